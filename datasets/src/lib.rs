//! firemesh-datasets
