//! The tests of firemesh-resnet, in one binary (one link of the Burn stack).

mod config_checks;
mod forward_backward;
mod overfit;
mod param_counts;
mod record_roundtrip;
