//! An ordinary Burn training loop, made data-parallel with firemesh.
//!
//! Compared with the one-device program, three lines change (marked `firemesh:`): the backend
//! type, the device (a mesh of ranks), and the batch, which is sharded over the ranks. The
//! model (`Mlp`, an ordinary Burn module in `lib.rs`), the loss, the optimizer and
//! the loop are Burn's, unchanged. Weight gradients come out
//! of `backward()` as per-rank partial sums; the optimizer's update sums them across the ranks.
//!
//! ```text
//! cargo run --release -p firemesh-examples --example data_parallel -- --ranks 4
//! ```

use burn::backend::{Autodiff, Flex};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn_flex::FlexDevice;
use clap::Parser;
use firemesh_backend::{shard, shard_int, Mesh, Sharded};
use firemesh_examples::{Mlp, Spirals};

type B = Autodiff<Sharded<Flex>>; // firemesh: was Autodiff<Flex>

#[derive(Parser)]
struct Args {
    /// Ranks of the CPU mesh.
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// Optimizer steps.
    #[arg(long, default_value_t = 300)]
    steps: usize,
    /// Points per step, over all ranks.
    #[arg(long, default_value_t = 64)]
    batch: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let device = Mesh::replicate(FlexDevice, args.ranks)?; // firemesh: was FlexDevice
    let data = Spirals::new(3, 200);
    let batch = args.batch.clamp(args.ranks, data.len());

    let mut model = Mlp::<B>::new(3, &device);
    let mut optimizer = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    for step in 1..=args.steps {
        let start = (step * batch) % (data.len() - batch + 1);
        let (x, y) = data.tensors::<B>(start..start + batch, &device);
        let (x, y) = (shard(x, 0)?, shard_int(y, 0)?); // firemesh: split the batch over the ranks
        let loss = loss_fn.forward(model.forward(x), y);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(1e-2, model, grads);
        if step % 50 == 0 || step == args.steps {
            println!("step {step:>4}: loss {:.4}", loss.into_scalar());
        }
    }

    let (x, y) = data.tensors::<B>(0..data.len(), &device);
    let predicted = model.forward(x).argmax(1).squeeze_dim::<1>(1);
    let correct: i64 = predicted.equal(y).int().sum().into_scalar().into();
    println!(
        "training accuracy on {} ranks: {:.1}%",
        args.ranks,
        100.0 * correct as f64 / data.len() as f64
    );
    Ok(())
}
