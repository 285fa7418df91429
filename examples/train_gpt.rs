//! Train the zoo's GPT (the tiny one up to GPT-2 small) on a local text file, on all the
//! devices found: byte-level tokens, or GPT-2's BPE from local `encoder.json` and `vocab.bpe`
//! (`--tokenizer gpt2:DIR`). Validation loss and perplexity after every epoch, and a sampled
//! continuation at the end. With no `--data`, it trains on firemesh's own README.
//!
//! ```text
//! cargo run --release -p firemesh-examples --example train_gpt -- --epochs 5
//! cargo run --release -p firemesh-examples --example train_gpt -- --model gpt2-small --data text:corpus.txt --tokenizer gpt2:gpt2-files --seq-len 256
//! ```

use firemesh_cli::train::{self, DataSpec, ModelName, Record, TrainConfig};
use firemesh_examples::{exit_code, train_options};
use std::process::ExitCode;

fn main() -> ExitCode {
    exit_code(run())
}

fn run() -> firemesh_cli::Result<()> {
    let mut options = train_options()?;
    options.model.get_or_insert(ModelName::GptTiny);
    let readme = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    options.data.get_or_insert(DataSpec::Text(readme.into()));
    let config = TrainConfig::resolve(options)?;
    let summary = train::run(&config)?;
    if let Some(Record::Eval {
        loss,
        perplexity: Some(perplexity),
        ..
    }) = summary.last_eval
    {
        println!(
            "{}: held-out loss {loss:.4}, perplexity {perplexity:.2} after {} steps, {:.0} tokens/s on {}",
            summary.model, summary.steps, summary.throughput, summary.mesh
        );
    }
    if let Some(sample) = summary.sample {
        println!("sampled continuation: {sample:?}");
    }
    Ok(())
}
