//! `Sharded<B>`: a Burn backend that splits tensors across the devices of a mesh.
//!
//! Change one type — `Autodiff<Sharded<Flex>>` for `Autodiff<Flex>` — and put the batch
//! on the mesh with [`shard`]: every op then runs on all ranks at once, following a placement
//! rule that keeps data where it is; weight gradients come out `Partial` and are summed across
//! the ranks when the optimizer combines them with `Replicated` parameters. An op with no rule
//! for its inputs still gives the right answer by running replicated; such fallbacks are
//! counted ([`stats`]) and traced.
//!
//! Layout: `ops/` implements Burn's backend traits, one file per trait; each method runs
//! through the executor (`exec/`) under the rule of its op family (`rules/`, one file per
//! family, named where each method is declared). `redistribute.rs` changes placements,
//! through `route/`, the one route for sums and gathers across ranks.

mod across;
mod api;
mod autocast;
mod backend;
pub mod buckets;
mod data;
mod draw;
mod exec;
mod gathers;
pub mod kind;
mod mesh;
mod ops;
mod origin;
mod part;
mod pending;
mod placement;
mod redistribute;
mod route;
mod rules;
mod runtime;
mod scope;
pub mod stats;
mod tensor;

pub use api::*;
pub use autocast::{Autocasting, Conv2dOp, ImplicitGemmConvs, NarrowConvs};
pub use backend::Sharded;
pub use gathers::ParameterGathers;
pub use mesh::{Mesh, MeshConfig, MeshError, MESH_TYPE_ID};
pub use placement::Placement;
pub use route::{MeshCollectives, Route};
pub use scope::{Entered, StepScope};
pub use tensor::ShardedTensor;
