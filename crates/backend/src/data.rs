//! Creating tensors from host data, reading them back, moving them between meshes.

use crate::exec;
use crate::kind::{BoolKind, IntKind, Kind};
use crate::mesh::Mesh;
use crate::placement::Placement;
use crate::redistribute::to_replicated;
use crate::route::{self, To};
use crate::rules::no_rule;
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, IntDType, TensorData};

/// Host data, `Replicated` on every rank (one upload per distinct device).
pub(crate) fn from_data<B: Backend, K: Kind<B>>(
    data: TensorData,
    mesh: &Mesh<B::Device>,
) -> ShardedTensor<B, K> {
    exec::on_device_stream::<B, _>(|| {
        replicated_from_first(K::from_data(data, mesh.device(0)), mesh)
    })
}

/// A `Replicated` tensor whose value is `first`, a tensor on rank 0's device.
pub(crate) fn replicated_from_first<B: Backend, K: Kind<B>>(
    first: K::P,
    mesh: &Mesh<B::Device>,
) -> ShardedTensor<B, K> {
    ShardedTensor::new(
        share::<B, K>(first, mesh),
        Placement::Replicated,
        mesh.clone(),
    )
}

/// `whole` (on rank 0's device) given to every rank: the same handle where ranks share a
/// device, a copy otherwise.
pub(crate) fn share<B: Backend, K: Kind<B>>(whole: K::P, mesh: &Mesh<B::Device>) -> Vec<K::P> {
    mesh.devices()
        .iter()
        .map(|d| K::move_to(whole.clone(), d))
        .collect()
}

/// The tensor's value as host data: gathered or summed onto rank 0 first when needed.
pub(crate) fn into_data<B: Backend, K: Kind<B>>(t: ShardedTensor<B, K>) -> TensorData {
    exec::on_device_stream::<B, _>(|| {
        let (parts, placement, mesh) = t.with_known_sum().into_split();
        let mut whole = match placement {
            Placement::Replicated => parts,
            Placement::Shard(d) => route::gather::<B, K>(parts, d, &mesh, To::FirstRank),
            Placement::Partial => route::sum::<B, K>(parts, &mesh, To::FirstRank),
        };
        K::into_data(whole.swap_remove(0))
    })
}

/// `t` on `mesh`: kept as is on its own mesh, moved rank by rank to a mesh of the same size,
/// replicated through host memory otherwise.
pub(crate) fn to_mesh<B: Backend, K: Kind<B>>(
    t: ShardedTensor<B, K>,
    mesh: &Mesh<B::Device>,
) -> ShardedTensor<B, K> {
    if t.mesh == *mesh {
        return t;
    }
    exec::on_device_stream::<B, _>(|| moved_to(t, mesh))
}

fn moved_to<B: Backend, K: Kind<B>>(
    t: ShardedTensor<B, K>,
    mesh: &Mesh<B::Device>,
) -> ShardedTensor<B, K> {
    if t.mesh.len() == mesh.len() {
        let (parts, placement, _) = t.into_split();
        let parts = parts
            .into_iter()
            .zip(mesh.devices())
            .map(|(p, d)| K::move_to(p, d));
        return ShardedTensor::new(parts.collect(), placement, mesh.clone());
    }
    from_data(into_data(to_replicated(t)), mesh)
}

/// Indices of the true elements: computed on the whole mask (its rows are numbered globally),
/// which has no placement rule.
pub(crate) fn argwhere<B: Backend>(
    t: ShardedTensor<B, BoolKind>,
    out_dtype: IntDType,
) -> impl core::future::Future<Output = ShardedTensor<B, IntKind>> + 'static + Send {
    let whole: ShardedTensor<B, BoolKind> =
        exec::run("bool_argwhere", (t,), no_rule::replicated, |_, (t,)| t);
    let mesh = whole.mesh.clone();
    // The inner backend's argwhere reads the mask and uploads the indices when its future is
    // polled: it is polled here, on the device stream, where the runtime can read at once.
    let parts: Vec<_> = exec::on_device_stream::<B, _>(|| {
        whole
            .into_parts()
            .into_iter()
            .map(|p| {
                let indices = B::bool_argwhere(p, out_dtype);
                burn_backend::try_read_sync(indices)
                    .expect("the inner backend reads synchronously (all of firemesh's runtimes do)")
            })
            .collect()
    });
    async move { ShardedTensor::new(parts, Placement::Replicated, mesh) }
}
