//! The firemesh command line's subcommands, on the `firemesh` library's public API: `train`
//! (the zoo on real data formats, with checkpoints and reports), `bench` (throughput and scaling
//! against the peers), `simulate` (predicted scaling) and `compare` (runs side by side). The
//! `firemesh` binary (src/main.rs) parses the command line and calls them.

pub use error::{Error, Result};

pub mod bench;
pub mod compare;
mod error;
pub mod options;
pub mod simulate;
pub mod train;
pub mod world;
