//! Train a ResNet of the zoo on all the devices found, as `firemesh train` does: ResNet-18, 34,
//! 50, 101, 152 or the tiny one, on synthetic images, CIFAR-10 (the binary version, from a local
//! folder) or an image folder (ImageNet layout: one sub-folder per class, or `train/` and `val/`
//! holding them). Top-1 accuracy on the held-out split is measured after every epoch; metrics,
//! charts and checkpoints land in the run folder. Every option of `firemesh train` works here.
//!
//! ```text
//! cargo run --release -p firemesh-examples --example train_resnet -- --data cifar10:/data/cifar-10-batches-bin --epochs 10
//! cargo run --release -p firemesh-examples --example train_resnet -- --model resnet50 --data images:/data/imagenette --image-size 160
//! ```

use firemesh_cli::train::{self, ModelName, Record, TrainConfig};
use firemesh_examples::{exit_code, train_options};
use std::process::ExitCode;

fn main() -> ExitCode {
    exit_code(run())
}

fn run() -> firemesh_cli::Result<()> {
    let mut options = train_options()?;
    options.model.get_or_insert(ModelName::Resnet18);
    let config = TrainConfig::resolve(options)?;
    if config.model.is_gpt() {
        return Err(firemesh_cli::Error::Invalid(
            "this example trains ResNets; see train_gpt for the GPT".into(),
        ));
    }
    let summary = train::run(&config)?;
    if let Some(Record::Eval {
        accuracy: Some(accuracy),
        ..
    }) = summary.last_eval
    {
        println!(
            "{}: top-1 accuracy {:.1}% on the held-out split after {} steps, {:.1} images/s on {}",
            summary.model,
            100.0 * accuracy,
            summary.steps,
            summary.throughput,
            summary.mesh
        );
    }
    Ok(())
}
