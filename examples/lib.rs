//! What the examples share: the devices option of the training examples and their held-out
//! samples, and a small 2-D classification problem (interleaved spirals) with the small network
//! that learns it in seconds on a CPU.
//!
//! The examples themselves are beside this file; run one with
//! `cargo run -p firemesh-examples --example NAME` (`data_parallel`, `train_resnet`,
//! `trainer`, `train_gpt`, `learner`, `collectives`).

use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;
use firemesh::mesh::{DeviceMesh, MeshKind};

/// Which devices the training examples run on: `firemesh train`'s `--mesh` and `--ranks`.
#[derive(clap::Args, Debug, Clone)]
pub struct Devices {
    /// auto (CUDA GPUs when they can run kernels, else the CPU), cuda, wgpu or cpu.
    #[arg(long, default_value = "auto")]
    pub mesh: MeshKind,
    /// Ranks [default: one per GPU, or 4 on the CPU].
    #[arg(long)]
    pub ranks: Option<usize>,
}

impl Devices {
    /// The devices found, said on the terminal.
    pub fn discover(&self) -> firemesh::Result<DeviceMesh> {
        let found = DeviceMesh::discover(self.mesh, self.ranks, false)?;
        println!("training on {}", found.describe());
        Ok(found)
    }
}

/// The indices of step `step`'s batch (steps count from 1): the next `batch` of `train`, from
/// where the last batch ended, wrapping around at its end.
pub fn batch_of(step: usize, batch: usize, train: &[usize]) -> Vec<usize> {
    let first = (step - 1) * batch;
    (first..first + batch)
        .map(|i| train[i % train.len()])
        .collect()
}

/// Whether sample `index` is held out of training: every 8th one, for the accuracy or
/// perplexity a run reports.
pub fn held_out(index: usize) -> bool {
    index % 8 == 7
}

/// A two-layer perceptron for the spirals: 2 features, 64 hidden units, a logit per class. An
/// ordinary Burn module: nothing in it knows about meshes.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    hidden: Linear<B>,
    out: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    pub fn new(classes: usize, device: &B::Device) -> Self {
        Self {
            hidden: LinearConfig::new(2, 64).init(device),
            out: LinearConfig::new(64, classes).init(device),
        }
    }

    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        self.out.forward(relu(self.hidden.forward(x)))
    }

    /// The cross-entropy loss of a batch.
    pub fn loss(&self, x: Tensor<B, 2>, y: Tensor<B, 1, Int>) -> Tensor<B, 1> {
        let logits = self.forward(x);
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, y)
    }
}

/// Points of `classes` interleaved spiral arms, `per_class` per arm, in a fixed shuffled
/// order; each point has 2 features and its arm as label.
#[derive(Debug, Clone)]
pub struct Spirals {
    pub features: Vec<[f32; 2]>,
    pub labels: Vec<i64>,
}

impl Spirals {
    pub fn new(classes: usize, per_class: usize) -> Self {
        let mut points: Vec<([f32; 2], i64)> = Vec::with_capacity(classes * per_class);
        for class in 0..classes {
            for i in 0..per_class {
                let r = (i + 1) as f32 / per_class as f32;
                let angle = 3.0 * r + class as f32 * std::f32::consts::TAU / classes as f32;
                points.push(([r * angle.cos(), r * angle.sin()], class as i64));
            }
        }
        // A fixed interleaving, so that every batch holds every class.
        let n = points.len();
        let stride = (0..n)
            .map(|k| 7919 + k)
            .find(|s| gcd(*s, n) == 1)
            .unwrap_or(1);
        let (features, labels) = (0..n).map(|k| points[k * stride % n]).unzip();
        Self { features, labels }
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Points `rows` as tensors on `device`: features `[n, 2]` and labels `[n]`.
    pub fn tensors<B: Backend>(
        &self,
        rows: std::ops::Range<usize>,
        device: &B::Device,
    ) -> (Tensor<B, 2>, Tensor<B, 1, Int>) {
        let n = rows.len();
        let x: Vec<f32> = self.features[rows.clone()]
            .iter()
            .flatten()
            .copied()
            .collect();
        let y = self.labels[rows].to_vec();
        (
            Tensor::from_data(TensorData::new(x, [n, 2]), device),
            Tensor::from_data(TensorData::new(y, [n]), device),
        )
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
