//! Averaging the gradients of N replicas: each replica's gradients are laid end to end in
//! module order, cut into buckets of at most `bucket_bytes`, and every bucket is all-reduced.

use crate::TrainError;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{backend::AutodiffBackend, Tensor};
use firemesh_collective::{ReduceOp, TensorCollectives};

/// Averages gradients across replicas with a collective group over the inner backend.
pub struct GradientSync<G> {
    group: G,
    bucket_bytes: usize,
}

impl<G> GradientSync<G> {
    /// `bucket_bytes` bounds each all-reduce (25 MiB is PyTorch DDP's default).
    pub fn new(group: G, bucket_bytes: usize) -> Self {
        Self {
            group,
            bucket_bytes: bucket_bytes.max(4),
        }
    }

    pub fn group(&self) -> &G {
        &self.group
    }

    /// Replace every replica's gradients by their mean over replicas. `grads[r]` belongs to
    /// `replicas[r]`; all replicas must be the same model.
    pub fn all_reduce_mean<B, M>(
        &self,
        replicas: &[M],
        grads: &mut [GradientsParams],
    ) -> Result<(), TrainError>
    where
        B: AutodiffBackend,
        M: AutodiffModule<B>,
        G: TensorCollectives<B::InnerBackend>,
    {
        let flats: Vec<Vec<Tensor<B::InnerBackend, 1>>> = replicas
            .iter()
            .zip(grads.iter())
            .map(|(m, g)| flatten::<B, M>(m, g))
            .collect();
        let count = flats[0].len();
        if let Some(r) = flats.iter().position(|f| f.len() != count) {
            return Err(TrainError::GradientSetMismatch {
                rank: r,
                expected: count,
                got: flats[r].len(),
            });
        }
        let lens: Vec<usize> = flats[0].iter().map(|t| t.dims()[0]).collect();
        let mut reduced: Vec<Vec<Tensor<B::InnerBackend, 1>>> = vec![Vec::new(); replicas.len()];
        for bucket in buckets(&lens, self.bucket_bytes / 4) {
            let per_rank: Vec<Tensor<B::InnerBackend, 1>> = flats
                .iter()
                .map(|f| Tensor::cat(f[bucket.clone()].to_vec(), 0))
                .collect();
            for (r, t) in self
                .group
                .all_reduce_tensors(per_rank, ReduceOp::Mean)?
                .into_iter()
                .enumerate()
            {
                reduced[r].push(t);
            }
        }
        for ((m, g), parts) in replicas.iter().zip(grads.iter_mut()).zip(reduced) {
            let flat = Tensor::cat(parts, 0);
            m.visit(&mut Scatter::<B> {
                grads: g,
                flat,
                offset: 0,
            });
        }
        Ok(())
    }
}

/// Consecutive index ranges of `lens` whose sums stay within `cap` (a longer item stands alone).
fn buckets(lens: &[usize], cap: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, &l) in lens.iter().enumerate() {
        if i > start && size + l > cap {
            out.push(start..i);
            (start, size) = (i, 0);
        }
        size += l;
    }
    if start < lens.len() {
        out.push(start..lens.len());
    }
    out
}

/// Every gradient of `module`, flattened, in module order (parameters without one are skipped).
fn flatten<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &GradientsParams,
) -> Vec<Tensor<B::InnerBackend, 1>> {
    struct Flatten<'a, B: AutodiffBackend> {
        grads: &'a GradientsParams,
        out: Vec<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Flatten<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
                self.out.push(g.flatten(0, D - 1));
            }
        }
    }
    let mut v = Flatten::<B> {
        grads,
        out: Vec::new(),
    };
    module.visit(&mut v);
    v.out
}

/// Put the reduced values back, in the same module order as [`flatten`].
struct Scatter<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    flat: Tensor<B::InnerBackend, 1>,
    offset: usize,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Scatter<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let dims = g.dims();
            let n: usize = dims.iter().product();
            let part = self
                .flat
                .clone()
                .slice([self.offset..self.offset + n])
                .reshape(dims);
            self.grads.register::<B::InnerBackend, D>(param.id, part);
            self.offset += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::buckets;

    #[test]
    fn buckets_respect_the_cap_and_cover_everything() {
        assert_eq!(buckets(&[3, 3, 3, 10, 1], 6), vec![0..2, 2..3, 3..4, 4..5]);
        assert_eq!(buckets(&[1, 1, 1], 100), vec![0..3]);
        assert_eq!(buckets(&[], 10), Vec::<std::ops::Range<usize>>::new());
    }
}
