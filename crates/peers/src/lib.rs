//! The peers firemesh is measured against: burn-train's own strategies training the zoo's
//! models through its `Learner`, on synthetic batches. `firemesh bench` times `MultiDevice`
//! with it; `ddp_step` (built with the `ddp` feature) times the DDP strategy on CUDA.

mod error;
mod learner;
mod model;

pub use error::PeerError;
pub use learner::{step_seconds, Inner, Quiet, Strategy};
pub use model::Work;
