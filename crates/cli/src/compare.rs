//! `firemesh compare RUN_DIR...`: runs of one job side by side (in f32, bf16 and f16, say).
//! Reads each run folder's `metrics.jsonl` and `summary.json`; writes `compare.md` (a table of
//! the final numbers, each against the first run's) and `compare-loss.png` and
//! `compare-eval.png` (every run's training loss and held-out metric against the step, on one
//! chart each) into `--out`.

use crate::train::charts::{line_chart, Series};
use crate::train::{Record, Summary};
use crate::{Error, Result};
use firemesh::precision::LossTracking;
use plotters::style::{RGBColor, BLACK, BLUE, GREEN, MAGENTA, RED};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What `firemesh compare` reads and where it writes.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareOptions {
    /// Run folders of `firemesh train` (two or more), the first the reference.
    #[arg(required = true, num_args = 2.., value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// Folder for compare.md, compare-loss.png and compare-eval.png.
    #[arg(long, default_value = "runs/compare")]
    pub out: PathBuf,
    /// Check that every run's training losses follow the first run's, step by step, within
    /// firemesh's bounds for low-precision runs against f32 (0.1% on the first step, 6% on any,
    /// 3% on the last four steps' mean); fails naming the runs that do not. The runs must have
    /// the same steps, at least 4.
    #[arg(long)]
    pub track_losses: bool,
}

/// One run folder, read.
struct Run {
    name: String,
    summary: Summary,
    records: Vec<Record>,
}

fn read(dir: &Path) -> Result<Run> {
    let text = |file: &str| {
        let path = dir.join(file);
        std::fs::read_to_string(&path).map_err(|e| {
            Error::Invalid(format!(
                "{}: not a finished run folder ({file}: {e})",
                dir.display()
            ))
        })
    };
    let summary: Summary = serde_json::from_str(&text("summary.json")?)
        .map_err(|e| Error::Invalid(format!("{}: summary.json: {e}", dir.display())))?;
    let records = text("metrics.jsonl")?
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let name = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Run {
        name,
        summary,
        records,
    })
}

/// The held-out numbers of a run's last evaluation: loss, and accuracy or perplexity.
fn held_out(s: &Summary) -> Option<(f64, Option<f64>, Option<f64>)> {
    match &s.last_eval {
        Some(Record::Eval {
            loss,
            accuracy,
            perplexity,
            ..
        }) => Some((*loss, *accuracy, *perplexity)),
        _ => None,
    }
}

/// Reads the runs, writes the table and the charts, prints the table; returns the table.
pub fn run(o: &CompareOptions) -> Result<String> {
    let runs = o.runs.iter().map(|d| read(d)).collect::<Result<Vec<_>>>()?;
    std::fs::create_dir_all(&o.out).map_err(|e| Error::io(o.out.display(), e))?;
    let mut table = table(&runs);
    let tracked = match o.track_losses {
        true => Some(track_losses(&runs)?),
        false => None,
    };
    if let Some((text, _)) = &tracked {
        table.push_str(text);
    }
    let path = o.out.join("compare.md");
    std::fs::write(&path, &table).map_err(|e| Error::io(path.display(), e))?;
    charts(&runs, &o.out)?;
    print!("{table}");
    match tracked {
        Some((_, off)) if !off.is_empty() => Err(Error::Invalid(format!(
            "--track-losses: {} do(es) not follow {}'s losses within the bounds",
            off.join(", "),
            runs[0].name
        ))),
        _ => Ok(table),
    }
}

/// The step losses of a run, in step order.
fn step_losses(run: &Run) -> Vec<f64> {
    let mut steps: Vec<(usize, f64)> = run
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Step { step, loss, .. } => Some((*step, *loss)),
            Record::Eval { .. } => None,
        })
        .collect();
    steps.sort_by_key(|(step, _)| *step);
    steps.into_iter().map(|(_, loss)| loss).collect()
}

/// How every run's losses follow the first run's ([`LossTracking`]): a section of the table,
/// and the names of the runs outside the bounds. Runs that logged other steps are an error.
fn track_losses(runs: &[Run]) -> Result<(String, Vec<String>)> {
    let bounds = LossTracking::BOUNDS;
    let reference = step_losses(&runs[0]);
    let mut md = format!(
        "\n## Losses against {}'s\n\nBounds: {} (relative).\n\n| run | steps | first step | largest | last 4 steps' mean | within |\n|---|---|---|---|---|---|\n",
        runs[0].name, bounds
    );
    let mut off = Vec::new();
    for run in &runs[1..] {
        let losses = step_losses(run);
        let tracked = LossTracking::measure(&reference, &losses).ok_or_else(|| {
            Error::Invalid(format!(
                "--track-losses: {} logged {} step losses and {} logged {}: compare runs of the \
                 same steps, at least 4",
                runs[0].name,
                reference.len(),
                run.name,
                losses.len()
            ))
        })?;
        let within = tracked.within(&bounds);
        if !within {
            off.push(run.name.clone());
        }
        let _ = writeln!(
            md,
            "| {} | {} | {:.1e} | {:.1e} | {:.1e} | {} |",
            run.name,
            losses.len(),
            tracked.first,
            tracked.largest,
            tracked.last_four,
            if within { "yes" } else { "**no**" }
        );
    }
    Ok((md, off))
}

fn table(runs: &[Run]) -> String {
    let mut md = String::from(
        "# Runs compared\n\n\
         | run | model | precision (products, gradient sums) | ZeRO | steps | last training loss | held-out loss | vs first | held-out accuracy | vs first (points) | perplexity | skipped steps |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let first = held_out(&runs[0].summary);
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("–".to_string(), f);
    for r in runs {
        let s = &r.summary;
        let (loss, accuracy, perplexity) = match held_out(s) {
            Some((l, a, p)) => (Some(l), a, p),
            None => (None, None, None),
        };
        let vs_loss = loss.zip(first.map(|f| f.0)).map(|(l, f)| (l - f) / f);
        let vs_accuracy = accuracy
            .zip(first.and_then(|f| f.1))
            .map(|(a, f)| 100.0 * (a - f));
        let _ = writeln!(
            md,
            "| {} | {} | {}, {} | {} | {} | {:.4} | {} | {} | {} | {} | {} | {} |",
            r.name,
            s.model,
            s.precision,
            s.comm_precision,
            s.zero,
            s.steps,
            s.last_loss,
            opt(loss, &|v| format!("{v:.4}")),
            opt(vs_loss, &|v| format!("{:+.2}%", 100.0 * v)),
            opt(accuracy, &|v| format!("{:.1}%", 100.0 * v)),
            opt(vs_accuracy, &|v| format!("{v:+.1}")),
            opt(perplexity, &|v| format!("{v:.2}")),
            s.skipped_steps,
        );
    }
    md
}

fn charts(runs: &[Run], out: &Path) -> Result<()> {
    const COLORS: [RGBColor; 6] = [BLUE, RED, GREEN, MAGENTA, BLACK, RGBColor(255, 140, 0)];
    let series = |pick: &dyn Fn(&Record) -> Option<(f64, f64)>| -> Vec<Series> {
        runs.iter()
            .enumerate()
            .map(|(i, r)| Series {
                name: r.name.clone(),
                points: r.records.iter().filter_map(pick).collect(),
                color: COLORS[i % COLORS.len()],
            })
            .collect()
    };
    let train = series(&|r| match r {
        Record::Step { step, loss, .. } => Some((*step as f64, *loss)),
        Record::Eval { .. } => None,
    });
    line_chart(
        &out.join("compare-loss.png"),
        "Training loss",
        "step",
        "loss",
        &train,
    )?;
    let text = runs
        .iter()
        .any(|r| held_out(&r.summary).is_some_and(|h| h.2.is_some()));
    let eval = series(&|r| match r {
        Record::Eval {
            step,
            accuracy,
            perplexity,
            ..
        } => {
            let v = if text {
                *perplexity
            } else {
                accuracy.map(|a| 100.0 * a)
            };
            v.map(|v| (*step as f64, v))
        }
        Record::Step { .. } => None,
    });
    if eval.iter().any(|s| !s.points.is_empty()) {
        let (title, y) = if text {
            ("Held-out perplexity", "perplexity")
        } else {
            ("Held-out top-1 accuracy", "accuracy (%)")
        };
        line_chart(&out.join("compare-eval.png"), title, "step", y, &eval)?;
    }
    Ok(())
}
