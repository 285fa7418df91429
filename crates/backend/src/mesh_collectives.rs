//! The collectives a mesh uses to sum and gather float parts that live on different devices.
//! By default they run on `firemesh_collective::PortableGroup` (through host memory); a mesh of
//! CubeCL devices can use a `firemesh_collective::Group`, whose CubeCL kernels reduce the
//! tensors in device memory: `mesh.use_collectives::<Wgpu>(Group::new(devices)?)`.

use crate::mesh::Mesh;
use crate::stats;
use burn_backend::{Backend, Shape, TensorMetadata, TensorPrimitive};
use burn_tensor::Tensor;
use firemesh_collective::{CollectiveError, PortableGroup, ReduceOp, TensorCollectives};
use std::sync::Arc;

/// Sum and gather of one flat float tensor per rank, each on its rank's device.
pub trait MeshCollectives<B: Backend>: Send + Sync + 'static {
    fn sum(&self, parts: Vec<Tensor<B, 1>>) -> Result<Vec<Tensor<B, 1>>, CollectiveError>;
    fn gather(&self, parts: Vec<Tensor<B, 1>>) -> Result<Vec<Tensor<B, 1>>, CollectiveError>;
}

impl<B: Backend, G: TensorCollectives<B> + Send + Sync + 'static> MeshCollectives<B> for G {
    fn sum(&self, parts: Vec<Tensor<B, 1>>) -> Result<Vec<Tensor<B, 1>>, CollectiveError> {
        self.all_reduce_tensors(parts, ReduceOp::Sum)
    }
    fn gather(&self, parts: Vec<Tensor<B, 1>>) -> Result<Vec<Tensor<B, 1>>, CollectiveError> {
        self.all_gather_tensors(parts)
    }
}

/// The group registered for backend `B` on `mesh`, or a portable one.
fn group<B: Backend>(mesh: &Mesh<B::Device>) -> (Arc<dyn MeshCollectives<B>>, &'static str) {
    match mesh.collectives::<B>() {
        Some(g) => (g, "collective: mesh group"),
        None => {
            let g = PortableGroup::<B>::new_shared(mesh.devices().to_vec())
                .expect("a mesh has at least one rank");
            (Arc::new(g), "collective: portable group")
        }
    }
}

fn flat<B: Backend>(p: B::FloatTensorPrimitive) -> Tensor<B, 1> {
    let len = p.shape().num_elements();
    Tensor::from_primitive(TensorPrimitive::Float(B::float_reshape(
        p,
        Shape::new([len]),
    )))
}

fn failed(what: &str, e: CollectiveError) -> ! {
    panic!("firemesh: {what} across the mesh failed: {e}")
}

/// Every rank's copy of the sum of the parts (one shape).
pub(crate) fn sum_float<B: Backend>(
    parts: Vec<B::FloatTensorPrimitive>,
    mesh: &Mesh<B::Device>,
) -> Vec<B::FloatTensorPrimitive> {
    let shape = parts[0].shape();
    let (g, via) = group::<B>(mesh);
    stats::redistribution(via);
    let out = g
        .sum(parts.into_iter().map(flat).collect())
        .unwrap_or_else(|e| failed("all-reduce", e));
    out.into_iter()
        .map(|t| B::float_reshape(t.into_primitive().tensor(), shape.clone()))
        .collect()
}

/// Every rank's copy of the parts concatenated along `dim`: the sharded dim is moved to the
/// front, so that the flat parts concatenate in order.
pub(crate) fn gather_float<B: Backend>(
    parts: Vec<B::FloatTensorPrimitive>,
    dim: usize,
    mesh: &Mesh<B::Device>,
) -> Vec<B::FloatTensorPrimitive> {
    let mut shape = B::float_swap_dims(parts[0].clone(), 0, dim).shape();
    shape[0] = parts.iter().map(|p| p.shape()[dim]).sum();
    let (g, via) = group::<B>(mesh);
    stats::redistribution(via);
    let flats = parts
        .into_iter()
        .map(|p| flat::<B>(B::float_swap_dims(p, 0, dim)))
        .collect();
    let out = g.gather(flats).unwrap_or_else(|e| failed("all-gather", e));
    out.into_iter()
        .map(|t| {
            let whole = B::float_reshape(t.into_primitive().tensor(), shape.clone());
            B::float_swap_dims(whole, 0, dim)
        })
        .collect()
}
