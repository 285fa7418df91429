//! A reference GPT-2-style decoder for firemesh, generic over any Burn backend (plain or
//! `Sharded<B>`).
//!
//! Token and learned position embeddings, pre-LayerNorm blocks with causal multi-head attention
//! and a GELU MLP, a final LayerNorm and an output head tied to the token embedding. Includes the
//! next-token cross-entropy loss and greedy or temperature sampling for short demos.
//!
//! ```no_run
//! # use burn::prelude::*;
//! # fn demo<B: Backend>(device: &B::Device) -> Result<(), firemesh_gpt::GptError> {
//! use firemesh_gpt::{GptConfig, Sampling};
//! let model = GptConfig::tiny().init::<B>(device)?;
//! let tokens = Tensor::<B, 2, Int>::zeros([4, 17], device); // 16 inputs + 1 target per row
//! let loss = model.next_token_loss(tokens)?;
//! let text = model.generate(b"Hi".map(u32::from).as_slice(), 8, Sampling::Greedy, device)?;
//! # Ok(()) }
//! ```

mod attention;
mod block;
mod config;
mod error;
mod generate;
mod init;
mod model;

pub use attention::CausalSelfAttention;
pub use block::{Mlp, TransformerBlock};
pub use config::GptConfig;
pub use error::GptError;
pub use generate::Sampling;
pub use model::Gpt;
