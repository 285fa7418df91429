//! Module ops over a batch: conv, pooling, interpolation, embedding, linear, layer norm. The
//! activations are sharded along the batch (or, where the op is per channel, the channels);
//! the weights are `Replicated`; weight gradients come out `Partial`.

use crate::kind::{Float, Int, Kind};
use crate::placement::Placement;
use crate::ranks::{common_mesh, on_ranks};
use crate::redistribute::to_replicated;
use crate::rules::{elementwise2, elementwise3, pointwise, replicate_for, Linear};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, TensorMetadata};

type F<B> = ShardedTensor<B, Float>;
type I<B> = ShardedTensor<B, Int>;
type P<B> = <B as burn_backend::BackendTypes>::FloatTensorPrimitive;
type IP<B> = <B as burn_backend::BackendTypes>::IntTensorPrimitive;

/// Whether an activation may stay sharded along `d` through a per-sample, per-channel op.
fn batch_or_channel(p: Placement) -> bool {
    matches!(p, Placement::Shard(0 | 1) | Placement::Replicated)
}

/// The input of a pooling-like op (per sample and per channel).
pub(crate) fn batch_input<B: Backend, K: Kind<B>>(
    x: ShardedTensor<B, K>,
    op: &'static str,
) -> (ShardedTensor<B, K>, Placement) {
    let (x, p) = pointwise(x);
    if batch_or_channel(p) {
        (x, p)
    } else {
        (replicate_for(x, op), Placement::Replicated)
    }
}

/// Two aligned inputs of a pooling backward op.
pub(crate) fn batch_inputs2<B: Backend, K1: Kind<B>, K2: Kind<B>>(
    a: ShardedTensor<B, K1>,
    b: ShardedTensor<B, K2>,
    op: &'static str,
) -> (ShardedTensor<B, K1>, ShardedTensor<B, K2>, Placement) {
    let (a, b, p) = elementwise2(a, b, Linear::No);
    if batch_or_channel(p) {
        (a, b, p)
    } else {
        (
            replicate_for(a, op),
            replicate_for(b, op),
            Placement::Replicated,
        )
    }
}

/// Three aligned inputs of a pooling backward op.
pub(crate) fn batch_inputs3<B: Backend, K1: Kind<B>, K2: Kind<B>, K3: Kind<B>>(
    a: ShardedTensor<B, K1>,
    b: ShardedTensor<B, K2>,
    c: ShardedTensor<B, K3>,
    op: &'static str,
) -> (
    ShardedTensor<B, K1>,
    ShardedTensor<B, K2>,
    ShardedTensor<B, K3>,
    Placement,
) {
    let (a, b, c, p) = elementwise3(a, b, c);
    if batch_or_channel(p) {
        (a, b, c, p)
    } else {
        let (a, b) = (replicate_for(a, op), replicate_for(b, op));
        (a, b, replicate_for(c, op), Placement::Replicated)
    }
}

/// The batch sharding an activation may keep through an op that mixes channels (conv):
/// `Shard(0)` or `Replicated`; anything else is replicated.
fn batch_only<B: Backend>(x: F<B>, op: &'static str) -> F<B> {
    let x = to_replicated_if_partial(x);
    match x.placement() {
        Placement::Shard(0) | Placement::Replicated => x,
        _ => replicate_for(x, op),
    }
}

/// Conv forward: `x` sharded along the batch, weight and bias replicated.
pub(crate) fn batch<B: Backend>(
    x: F<B>,
    weight: F<B>,
    bias: Option<F<B>>,
    op: &'static str,
    f: impl Fn(P<B>, P<B>, Option<P<B>>) -> P<B> + Sync,
) -> F<B> {
    let mesh = common_mesh(
        &[
            Some(&x.mesh),
            Some(&weight.mesh),
            bias.as_ref().map(|b| &b.mesh),
        ],
        op,
    );
    let x = batch_only(x, op);
    let (weight, bias) = (to_replicated(weight), bias.map(to_replicated));
    let p = x.placement();
    on_ranks!(mesh, p, [x, weight, bias], f(x, weight, bias))
}

/// `x` and the output gradient of a conv, sharded alike along the batch (`Shard(0)`) or both
/// replicated.
fn batch_aligned<B: Backend>(x: F<B>, grad: F<B>, op: &'static str) -> (F<B>, F<B>, Placement) {
    let (x, grad, p) = elementwise2(batch_only(x, op), batch_only(grad, op), Linear::No);
    match p {
        Placement::Shard(0) | Placement::Replicated => (x, grad, p),
        _ => {
            let (x, grad) = (replicate_for(x, op), replicate_for(grad, op));
            (x, grad, Placement::Replicated)
        }
    }
}

/// Conv backward for the input: sharded along the batch like `x` and the output gradient.
pub(crate) fn batch_backward_x<B: Backend>(
    x: F<B>,
    weight: F<B>,
    grad: F<B>,
    op: &'static str,
    f: impl Fn(P<B>, P<B>, P<B>) -> P<B> + Sync,
) -> F<B> {
    let mesh = common_mesh(&[Some(&x.mesh), Some(&weight.mesh), Some(&grad.mesh)], op);
    let (x, grad, p) = batch_aligned(x, grad, op);
    let weight = to_replicated(weight);
    on_ranks!(mesh, p, [x, weight, grad], f(x, weight, grad))
}

/// Transposed-conv backward for the input: only the output gradient is an activation.
pub(crate) fn batch_grad<B: Backend>(
    weight: F<B>,
    grad: F<B>,
    op: &'static str,
    f: impl Fn(P<B>, P<B>) -> P<B> + Sync,
) -> F<B> {
    let mesh = common_mesh(&[Some(&weight.mesh), Some(&grad.mesh)], op);
    let grad = batch_only(to_replicated_if_partial(grad), op);
    let weight = to_replicated(weight);
    let p = grad.placement();
    on_ranks!(mesh, p, [weight, grad], f(weight, grad))
}

fn to_replicated_if_partial<B: Backend>(t: F<B>) -> F<B> {
    pointwise(t).0
}

/// Weight (or bias) gradient of a conv: `x` and the output gradient sharded alike along the
/// batch give one addend per rank.
pub(crate) fn weight_grad<B: Backend>(
    x: F<B>,
    weight: F<B>,
    grad: F<B>,
    op: &'static str,
    f: impl Fn(P<B>, P<B>, P<B>) -> P<B> + Sync,
) -> F<B> {
    let mesh = common_mesh(&[Some(&x.mesh), Some(&weight.mesh), Some(&grad.mesh)], op);
    let (x, grad, p) = batch_aligned(x, grad, op);
    let p = match p {
        Placement::Shard(0) => Placement::Partial,
        p => p,
    };
    let weight = to_replicated(weight);
    on_ranks!(mesh, p, [x, weight, grad], f(x, weight, grad))
}

/// Embedding lookup: sharded indices give sharded rows of the replicated table.
pub(crate) fn embedding<B: Backend>(
    weights: F<B>,
    indices: I<B>,
    f: impl Fn(P<B>, IP<B>) -> P<B> + Sync,
) -> F<B> {
    let mesh = common_mesh(&[Some(&weights.mesh), Some(&indices.mesh)], "embedding");
    let weights = to_replicated(weights);
    let p = indices.placement();
    on_ranks!(mesh, p, [weights, indices], f(weights, indices))
}

/// Embedding backward: sharded gradients and indices give one addend per rank.
pub(crate) fn embedding_backward<B: Backend>(
    weights: F<B>,
    grad: F<B>,
    indices: I<B>,
    f: impl Fn(P<B>, P<B>, IP<B>) -> P<B> + Sync,
) -> F<B> {
    let mesh = common_mesh(
        &[Some(&weights.mesh), Some(&grad.mesh), Some(&indices.mesh)],
        "embedding_backward",
    );
    let (grad, indices, p) = elementwise2(grad, indices, Linear::No);
    let p = match p {
        Placement::Shard(_) => Placement::Partial,
        _ => Placement::Replicated,
    };
    let weights = to_replicated(weights);
    on_ranks!(mesh, p, [weights, grad, indices], f(weights, grad, indices))
}

/// Whether `p` shards a dim other than the last (the features a linear layer mixes).
fn rows(p: Placement, rank: usize) -> bool {
    matches!(p, Placement::Shard(d) if d + 1 < rank)
}

/// Activations of a linear layer or layer norm: sharded along any dim but the features.
fn row_sharded<B: Backend>(x: F<B>, op: &'static str) -> F<B> {
    let (x, p) = pointwise(x);
    if rows(p, x.rank()) || p == Placement::Replicated {
        x
    } else {
        replicate_for(x, op)
    }
}

/// A per-row op with replicated parameters (linear, layer norm): `x` sharded along any dim but
/// the features.
pub(crate) fn rows_with_params<B: Backend>(
    x: F<B>,
    weight: F<B>,
    bias: Option<F<B>>,
    op: &'static str,
    f: impl Fn(P<B>, P<B>, Option<P<B>>) -> P<B> + Sync,
) -> F<B> {
    let meshes = [
        Some(&x.mesh),
        Some(&weight.mesh),
        bias.as_ref().map(|b| &b.mesh),
    ];
    let mesh = common_mesh(&meshes, op);
    let x = row_sharded(x, op);
    let (weight, bias) = (to_replicated(weight), bias.map(to_replicated));
    let p = x.placement();
    on_ranks!(mesh, p, [x, weight, bias], f(x, weight, bias))
}

pub(crate) fn linear_x_backward<B: Backend>(
    weight: F<B>,
    grad: F<B>,
    f: impl Fn(P<B>, P<B>) -> P<B> + Sync,
) -> F<B> {
    let mesh = common_mesh(&[Some(&weight.mesh), Some(&grad.mesh)], "linear_x_backward");
    let grad = row_sharded(grad, "linear_x_backward");
    let weight = to_replicated(weight);
    let p = grad.placement();
    on_ranks!(mesh, p, [weight, grad], f(weight, grad))
}

pub(crate) fn linear_weight_backward<B: Backend>(
    x: F<B>,
    grad: F<B>,
    f: impl Fn(P<B>, P<B>) -> P<B> + Sync,
) -> F<B> {
    let op = "linear_weight_backward";
    let mesh = common_mesh(&[Some(&x.mesh), Some(&grad.mesh)], op);
    let (x, grad, p) = elementwise2(row_sharded(x, op), row_sharded(grad, op), Linear::No);
    let (x, grad, p) = match p {
        p if rows(p, x.rank()) => (x, grad, Placement::Partial),
        Placement::Replicated => (x, grad, Placement::Replicated),
        _ => (
            replicate_for(x, op),
            replicate_for(grad, op),
            Placement::Replicated,
        ),
    };
    on_ranks!(mesh, p, [x, grad], f(x, grad))
}

pub(crate) fn linear_bias_backward<B: Backend>(
    grad: F<B>,
    f: impl Fn(P<B>) -> P<B> + Sync,
) -> F<B> {
    let grad = row_sharded(grad, "linear_bias_backward");
    let p = if rows(grad.placement(), grad.rank()) {
        Placement::Partial
    } else {
        Placement::Replicated
    };
    on_ranks!(grad.mesh.clone(), p, [grad], f(grad))
}
