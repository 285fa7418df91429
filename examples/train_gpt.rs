//! Train the zoo's GPT data-parallel on every device found, with the library alone: byte-level
//! tokens of a text file, windows of `--seq-len` tokens sharded over the ranks, one
//! `Trainer::step` per batch, then the held-out loss and perplexity (every 8th window) and a
//! sampled continuation. With no `--text`, it trains on firemesh's own README.
//!
//! ```text
//! cargo run --release -p firemesh-examples --example train_gpt -- --steps 300
//! cargo run --release -p firemesh-examples --example train_gpt -- --text corpus.txt --width 128 --layers 4 --precision bf16
//! ```

use burn::backend::Autodiff;
use burn::data::dataset::Dataset;
use burn::module::AutodiffModule;
use burn::optim::AdamWConfig;
use burn::prelude::*;
use clap::Parser;
use firemesh::grads::DEFAULT_BUCKET_BYTES;
use firemesh::mesh::{MeshJob, RuntimeConfig};
use firemesh::{Precision, Trainer};
use firemesh_backend::{from_shards_int, Mesh, MeshBackend, Sharded};
use firemesh_datasets::{shard_token_batch, ByteTokenizer, TextCorpus, Tokenizer};
use firemesh_examples::{batch_of, held_out, Devices};
use firemesh_gpt::{Gpt, GptConfig, Sampling};
use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    devices: Devices,
    /// A UTF-8 text file [default: firemesh's README].
    #[arg(long)]
    text: Option<PathBuf>,
    /// Tokens a sequence predicts (the model's context).
    #[arg(long, default_value_t = 32)]
    seq_len: usize,
    /// Width and layers of the model (heads of 16 channels).
    #[arg(long, default_value_t = 64)]
    width: usize,
    #[arg(long, default_value_t = 2)]
    layers: usize,
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// Sequences per step, over all ranks.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// f32, bf16 or f16: the precision of products (matmuls).
    #[arg(long, default_value = "f32")]
    precision: Precision,
}

type Ad<B> = Autodiff<Sharded<B>>;

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let devices = args.devices.discover()?;
    devices.run(&RuntimeConfig::default(), Train(args))?
}

/// The training, written once for every inner backend (`DeviceMesh::run` picks it).
struct Train(Args);

impl MeshJob for Train {
    type Output = Result<(), Box<dyn Error>>;
    fn run<B: Backend>(self, mesh: Mesh<B::Device>) -> Self::Output {
        train::<B>(&self.0, &mesh)
    }
}

fn train<B: Backend>(args: &Args, mesh: &Mesh<B::Device>) -> Result<(), Box<dyn Error>> {
    let readme = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let path = args.text.clone().unwrap_or_else(|| readme.into());
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let tokenizer = ByteTokenizer;
    let corpus = TextCorpus::from_tokens(tokenizer.encode(&text)?, args.seq_len)?;
    let (train, held): (Vec<usize>, Vec<usize>) = (0..corpus.len()).partition(|&i| !held_out(i));
    if train.len() < args.batch || args.batch < mesh.len() {
        return Err(format!(
            "--batch {} must be at least the {} ranks and at most the {} training sequences",
            args.batch,
            mesh.len(),
            train.len()
        )
        .into());
    }
    println!("{} tokens of {}", corpus.tokens().len(), path.display());
    Ad::<B>::seed(mesh, 42);
    let config = GptConfig {
        vocab_size: tokenizer.vocab_size(),
        context_length: args.seq_len,
        d_model: args.width,
        n_layers: args.layers,
        n_heads: (args.width / 16).max(1),
        ..GptConfig::tiny()
    };
    let model: Gpt<Ad<B>> = config.init(mesh)?;
    let optimizer = AdamWConfig::new().with_weight_decay(0.01).init();
    let lr = args.lr;
    // Gradients are summed over the ranks in 25 MiB buckets, each as soon as the backward
    // pass has filled it.
    let mut trainer = Trainer::sharded(model, optimizer, mesh, DEFAULT_BUCKET_BYTES)
        .with_lr(move |_| lr)
        // f16 scales the loss (dynamic loss scaling, its defaults).
        .with_precision(args.precision)?;
    let begin = Instant::now();
    for step in 1..=args.steps {
        // The next `batch` training windows, each rank's share made on its own device.
        let indices = batch_of(step, args.batch, &train);
        let tokens = on_mesh::<Ad<B>>(mesh, &corpus, &indices)?;
        let report = trainer.step(|model| {
            model
                .next_token_loss(tokens)
                .map_err(firemesh::Error::model)
        })?;
        if step % 10 == 0 || step == args.steps {
            let tokens = step * args.batch * args.seq_len;
            let per_s = tokens as f64 / begin.elapsed().as_secs_f64();
            println!(
                "step {step:>5}/{}  loss {:.4}  {per_s:.0} tokens/s",
                args.steps, report.loss
            );
        }
    }
    let model = trainer.model().valid();
    match held_out_loss::<B>(&model, mesh, &corpus, &held, args.batch)? {
        Some((loss, n)) => println!(
            "held-out loss {loss:.4}, perplexity {:.2} on {n} sequences after {} steps",
            loss.exp(),
            args.steps
        ),
        None => println!("no held-out batch of at least {} sequences", mesh.len()),
    }
    let prompt: Vec<u32> = corpus.tokens().iter().take(8).copied().collect();
    let sampling = Sampling::Temperature {
        temperature: 0.8,
        seed: 42,
    };
    let continued = model.generate(&prompt, 32, sampling, mesh)?;
    println!("sampled continuation: {:?}", tokenizer.decode(&continued)?);
    Ok(())
}

/// The windows at `indices` as one batch sharded over the mesh: rank `r` holds the `r`-th
/// share, made on its own device.
fn on_mesh<A: MeshBackend>(
    mesh: &Mesh<burn::tensor::Device<A::Inner>>,
    corpus: &TextCorpus,
    indices: &[usize],
) -> Result<Tensor<A, 2, Int>, Box<dyn Error>> {
    let parts = shard_token_batch::<A::Inner, _>(corpus, indices, mesh.devices())?;
    Ok(from_shards_int(mesh, parts, 0)?)
}

/// The mean next-token loss on the windows at `indices`, `batch` at a time (a last batch
/// smaller than the rank count is left out), and the windows it saw; `None` if it saw none.
fn held_out_loss<B: Backend>(
    model: &Gpt<Sharded<B>>,
    mesh: &Mesh<B::Device>,
    corpus: &TextCorpus,
    indices: &[usize],
    batch: usize,
) -> Result<Option<(f64, usize)>, Box<dyn Error>> {
    let (mut sum, mut seen) = (0.0, 0);
    for chunk in indices.chunks(batch).filter(|c| c.len() >= mesh.len()) {
        let loss = model.next_token_loss(on_mesh::<Sharded<B>>(mesh, corpus, chunk)?)?;
        sum += loss.into_scalar().elem::<f64>() * chunk.len() as f64;
        seen += chunk.len();
    }
    Ok((seen > 0).then(|| (sum / seen as f64, seen)))
}
