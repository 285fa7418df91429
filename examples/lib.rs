//! What the examples share: the options and exit code of the training examples, and a small
//! 2-D classification problem (interleaved spirals) that a small network learns in seconds on a
//! CPU.
//!
//! The examples themselves are beside this file; run one with
//! `cargo run -p firemesh-examples --example NAME` (`data_parallel`, `train_resnet`,
//! `train_gpt`, `learner`, `collectives`).

use burn::prelude::*;
use clap::Parser;
use firemesh::train::TrainOptions;
use std::process::ExitCode;

/// The options of `firemesh train`, from the command line and its `--config` file.
pub fn train_options() -> firemesh::Result<TrainOptions> {
    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        options: TrainOptions,
    }
    Args::parse().options.with_config_file()
}

/// The exit code of a run: failure after printing the error on one line.
pub fn exit_code(result: firemesh::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
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
