//! The firemesh command line's subcommands, on the `firemesh` library's public API: `train`
//! (the zoo on real data formats, with checkpoints and reports), `bench` (throughput and scaling
//! against the peers), `simulate` (predicted scaling), `compare` (runs side by side) and `demo`
//! (one all-reduce, timed). The `firemesh` binary (src/main.rs) parses the command line and
//! hands each command to its module.

pub use error::{Error, Result};

pub mod bench;
pub mod compare;
pub mod demo;
mod error;
pub mod options;
pub mod simulate;
pub mod trace;
pub mod train;
