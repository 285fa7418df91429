//! Reference ResNets for firemesh, generic over any Burn backend (plain or `Sharded<B>`).
//!
//! ResNet-18/34 use basic blocks, ResNet-50/101/152 bottlenecks with the stride on the 3×3
//! convolution ("v1.5", as in torchvision). Convolutions are He-normal initialized (fan-out);
//! each block's last BatchNorm scale can start at zero. With the ImageNet stem, parameter counts
//! equal torchvision's (see [`count_params`]).
//!
//! ```no_run
//! # use burn::prelude::*;
//! # fn demo<B: Backend>(device: &B::Device) -> Result<(), firemesh_resnet::ResNetError> {
//! use firemesh_resnet::{ResNetConfig, StemKind};
//! let model = ResNetConfig::resnet18(10).with_stem(StemKind::Cifar).init::<B>(device)?;
//! let logits = model.try_forward(Tensor::zeros([8, 3, 32, 32], device))?; // [8, 10]
//! # Ok(()) }
//! ```

mod block;
mod config;
mod error;
mod layers;
mod model;
mod param_count;
mod stem;

pub use block::{BasicBlock, BlockKind, Bottleneck, Projection, ResidualBlock};
pub use config::ResNetConfig;
pub use error::ResNetError;
pub use model::{ResNet, Stage};
pub use param_count::{count_params, ParamCount};
pub use stem::{Stem, StemKind};
