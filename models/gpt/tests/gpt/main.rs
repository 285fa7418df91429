//! The tests of firemesh-gpt, in one binary (one link of the Burn stack).

mod forward_backward;
mod overfit_and_generate;
mod param_counts;
mod record_roundtrip;
