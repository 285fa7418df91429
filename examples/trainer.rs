//! Your own training loop through `firemesh::Trainer`: one call per step runs the forward pass
//! and loss you give it, the backward pass, the gradient sums over the ranks (in buckets, each
//! summed during the backward pass as soon as it is full) and the optimizer's update.
//!
//! The same model trains twice, step by step, from the same weights: on a mesh of `--ranks`
//! ranks and on one device (`Trainer::single_device`, the same step with nothing to sum). The
//! losses agree up to the order of floating-point sums, which is the point of firemesh.
//!
//! ```text
//! cargo run --release -p firemesh-examples --example trainer -- --ranks 4
//! ```

use burn::backend::{Autodiff, Flex};
use burn::optim::AdamConfig;
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn_flex::FlexDevice;
use clap::Parser;
use firemesh::Trainer;
use firemesh_backend::{shard, shard_int, Mesh, Sharded};
use firemesh_examples::{Mlp, Spirals};

type OnMesh = Autodiff<Sharded<Flex>>;
type OnOne = Autodiff<Flex>;

#[derive(Parser)]
struct Args {
    /// Ranks of the CPU mesh.
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// Optimizer steps.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// Points per step, over all ranks.
    #[arg(long, default_value_t = 64)]
    batch: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mesh = Mesh::replicate(FlexDevice, args.ranks)?;
    let data = Spirals::new(3, 200);
    let batch = args.batch.clamp(args.ranks, data.len());

    // The same weights on both: drawn once (Burn draws them lazily, when first read), recorded,
    // and loaded into each.
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder.record(Mlp::<OnOne>::new(3, &FlexDevice).into_record(), ())?;
    let one =
        Mlp::<OnOne>::new(3, &FlexDevice).load_record(recorder.load(bytes.clone(), &FlexDevice)?);
    let many = Mlp::<OnMesh>::new(3, &mesh).load_record(recorder.load(bytes, &mesh)?);

    let lr = |step: usize| if step < 100 { 1e-2 } else { 3e-3 };
    let mut reference =
        Trainer::single_device(one, AdamConfig::new().init(), &FlexDevice).with_lr(lr);
    // Buckets of 512 bytes: this small model's gradients (1.5 KiB) take several.
    let mut trainer = Trainer::sharded(many, AdamConfig::new().init(), &mesh, 512).with_lr(lr);
    let mut worst = 0f64;
    for step in 0..args.steps {
        let start = (step * batch) % (data.len() - batch + 1);
        let range = start..start + batch;
        let report = trainer.step(|model| {
            let (x, y) = data.tensors::<OnMesh>(range.clone(), &mesh);
            Ok(model.loss(shard(x, 0)?, shard_int(y, 0)?))
        })?;
        let want = reference.step(|model| {
            let (x, y) = data.tensors::<OnOne>(range.clone(), &FlexDevice);
            Ok(model.loss(x, y))
        })?;
        worst = worst.max((report.loss - want.loss).abs());
        if report.step % 50 == 0 || report.step == args.steps {
            println!(
                "step {:>4}: loss {:.4} on {} ranks, {:.4} on one device; {} gradient collectives ({} during the backward pass)",
                report.step,
                report.loss,
                args.ranks,
                want.loss,
                report.gradient_collectives,
                report.early_gradient_collectives
            );
        }
    }
    println!(
        "largest loss difference over {} steps: {worst:.2e}",
        args.steps
    );
    Ok(())
}
