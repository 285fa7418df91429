//! firemesh-gpt
