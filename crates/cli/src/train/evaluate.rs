//! The held-out split and the text sample: what a run measures besides its training loss, in
//! the run's precision, as its steps compute.

use super::data::Split;
use super::job::{share, Job};
use super::metrics::Record;
use super::pipeline::{build, eval_chunks, share_of, to_mesh};
use crate::Result;
use burn::prelude::*;
use firemesh::Precision;
use firemesh_backend::{Autocasting, Mesh, Sharded};
use firemesh_gpt::Sampling;
use firemesh_zoo::{EvalCounts, Net};

/// Evaluation and sampling compute in the run's precision, as its steps do.
fn autocast<D: 'static>(mesh: &Mesh<D>, precision: Precision) -> Option<Autocasting<D>> {
    (precision != Precision::F32).then(|| mesh.autocast(precision.dtype()))
}

/// Loss and accuracy (or perplexity) on the held-out split; `None` when it holds fewer
/// samples than there are ranks.
pub fn evaluate<B: Backend>(
    job: &Job,
    model: &Net<Sharded<B>>,
    mesh: &Mesh<B::Device>,
    step: usize,
    epoch: u64,
) -> Result<Option<Record>> {
    let _span = tracing::info_span!("evaluate", step).entered();
    let c = &job.config;
    let _autocast = autocast(mesh, c.precision);
    let split = &job.data.eval;
    let mut total = EvalCounts::default();
    let share = share(&job.processes);
    for chunk in eval_chunks(
        split.len(),
        c.eval_samples,
        c.batch,
        mesh.world_len(),
        share.1,
    ) {
        let parts = build::<B>(split, share_of(&chunk, share), mesh.devices(), c.workers)?;
        let counts = model.evaluate(to_mesh::<Sharded<B>>(mesh, parts)?)?;
        total.loss_sum += counts.loss_sum;
        total.predictions += counts.predictions;
        total.correct += counts.correct;
    }
    if total.predictions == 0 {
        return Ok(None);
    }
    let n = total.predictions as f64;
    let loss = total.loss_sum / n;
    let text = matches!(split, Split::Tokens(_));
    Ok(Some(Record::Eval {
        step,
        epoch,
        loss,
        accuracy: (!text).then(|| total.correct as f64 / n),
        perplexity: text.then(|| loss.exp()),
    }))
}

/// An evaluation's line on the terminal.
pub fn describe_eval(r: &Record) -> String {
    match r {
        Record::Eval {
            step,
            loss,
            accuracy,
            perplexity,
            ..
        } => {
            let metric = match (accuracy, perplexity) {
                (Some(a), _) => format!("top-1 accuracy {:.1}%", 100.0 * a),
                (_, Some(p)) => format!("perplexity {p:.2}"),
                _ => String::new(),
            };
            format!("held out after step {step}: loss {loss:.4}, {metric}")
        }
        Record::Step { .. } => String::new(),
    }
}

/// A continuation of the start of the held-out text, sampled from a trained GPT.
pub fn generate_sample<B: Backend>(
    job: &Job,
    model: &Net<Sharded<B>>,
    mesh: &Mesh<B::Device>,
) -> Result<Option<String>> {
    let (Net::Gpt(gpt), Split::Tokens(corpus), Some(tokenizer)) =
        (model, &job.data.eval, &job.data.tokenizer)
    else {
        return Ok(None);
    };
    let _autocast = autocast(mesh, job.config.precision);
    let prompt: Vec<u32> = corpus.tokens().iter().take(8).copied().collect();
    let sampling = Sampling::Temperature {
        temperature: 0.8,
        seed: job.config.seed,
    };
    let tokens = gpt.generate(&prompt, 32, sampling, mesh)?;
    let text = tokenizer.decode(&tokens)?;
    if job.processes.leads() {
        println!("sample: {text:?}");
    }
    Ok(Some(text))
}
