//! `Sharded<B>`: a Burn backend that splits tensors across the devices of a mesh.
//!
//! Change one type — `Autodiff<Sharded<NdArray>>` for `Autodiff<NdArray>` — and put the batch
//! on the mesh with [`shard`]: every op then runs on all ranks at once, following a placement
//! rule (`rules/`) that keeps data where it is; weight gradients come out `Partial` and are
//! all-reduced when the optimizer combines them with `Replicated` parameters. An op with no rule
//! for its inputs still gives the right answer by running replicated; such fallbacks are counted
//! ([`stats`]) and traced.

mod api;
mod backend;
mod kind;
mod mesh;
mod mesh_collectives;
mod ops;
mod placement;
mod ranks;
mod redistribute;
mod rules;
pub mod stats;
mod tensor;

pub use api::*;
pub use backend::Sharded;
pub use firemesh_collective::probe::{cuda_devices, cuda_unavailable_reason, usable_cuda_devices};
pub use kind::{Bool, Float, Int, Kind, Quantized};
pub use mesh::{Mesh, MeshError, MESH_TYPE_ID};
pub use mesh_collectives::MeshCollectives;
pub use placement::{even_split, Placement};
pub use tensor::ShardedTensor;
