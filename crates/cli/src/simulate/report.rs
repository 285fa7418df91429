//! The simulation as a table on the terminal, and as simulate.json, simulate.md,
//! efficiency.png and buckets.png in the output folder.

use super::Simulation;
use crate::train::charts::{line_chart, Series};
use crate::{Error, Result};
use firemesh_simulate::{Prediction, Schedule};
use plotters::style::{RGBColor, BLUE, RED};
use std::fmt::Write as _;
use std::path::Path;

const MIB: f64 = (1u64 << 20) as f64;

/// The report as Markdown (also printed).
pub fn markdown(sim: &Simulation) -> String {
    let p = &sim.profile;
    let s = &sim.scenario;
    let mut md = String::new();
    let bucket = match s.schedule {
        Schedule::PerTensor => "one collective per tensor".to_string(),
        Schedule::Buckets { bytes } => format!("buckets of {:.1} MiB", bytes as f64 / MIB),
    };
    let latency = |l: &firemesh_simulate::Link| match l.nccl {
        Some(_) => "NCCL's ring latencies".to_string(),
        None => format!("α {:.1} µs per step", l.alpha_s * 1e6),
    };
    let ports = match s.topology.ports_per_node {
        Some(k) => format!("{k} network ports per node"),
        None => "a network port per rank".to_string(),
    };
    let levels = match (s.topology.levels, &s.topology.host) {
        (firemesh_simulate::Levels::Ring, _) => "one NCCL ring through every rank".to_string(),
        (firemesh_simulate::Levels::NodeBuffer, _) => {
            "summed in the node, one buffer per node across the nodes (one port), shared in the node"
                .to_string()
        }
        (firemesh_simulate::Levels::NodeBlocks, _) => {
            "reduce-scattered in the node, each rank's block across the nodes, all-gathered in the node"
                .to_string()
        }
        (firemesh_simulate::Levels::HostStaged, host) => format!(
            "reduce-scattered in the node, staged through the host ({}) and the node's first GPU, one buffer per node across the nodes, all-gathered in the node",
            match host {
                Some(h) => format!("{}, {:.1} GB/s per GPU", h.name, h.bytes_per_s / 1e9),
                None => "not costed".to_string(),
            }
        ),
    };
    let _ = writeln!(
        md,
        "# Simulated scaling: {}{}\n\n\
         - One device: {:.1} ms per step of {} {} ({:.0} {}/s); source: {}.\n\
         - Gradients: {} tensors, {:.1} MB, summed in {bucket}, overlapped with the backward pass.\n\
         - Links: {} in a node ({}, {:.1} GB/s bus bandwidth), {} across nodes ({}, {:.1} GB/s per port), {} ranks per node, {ports}; sums across nodes: {levels}.\n\
         - Straggler spread (cv of a rank's step time): {} (no published spread is built in; give a measured one with --straggler-cv).",
        p.model,
        match &sim.published {
            Some(_) => format!(" on {}", sim.gpu),
            None => String::new(),
        },
        p.compute_s() * 1e3,
        p.samples_per_rank,
        p.unit,
        p.samples_per_rank / p.compute_s(),
        p.unit,
        sim.source,
        p.gradient_tensors(),
        p.gradient_bytes() as f64 / 1e6,
        s.topology.intra.name,
        latency(&s.topology.intra),
        s.topology.intra.bytes_per_s / 1e9,
        s.topology.inter.name,
        latency(&s.topology.inter),
        s.topology.inter.bytes_per_s / 1e9,
        s.topology.ranks_per_node,
        s.straggler_cv
    );
    if let Some(f) = &sim.firemesh_step {
        let issue = match s.host.handoff_s {
            None => "ranks issued in turn from one thread: each further rank adds its share and \
                     its launch"
                .to_string(),
            Some(h) => format!(
                "ranks on rank threads (a core per rank): the calling thread issues rank 0's \
                 share and hands each further rank one job ({:.2} µs, measured with 2 ranks), \
                 each rank's thread issues its own share and launch beside it",
                h * 1e6
            ),
        };
        let _ = writeln!(
            md,
            "- firemesh's step, measured here on a CPU mesh: {} ops per step, {} blocking sums \
             ({:.0} bytes each); host time per op {:.2} µs + {:.2} µs per extra rank in turn \
             (Sharded<Flex>), plus {:.1} µs per rank for the inner backend's launch; {issue}.",
            f.ops_per_step,
            f.blocking_sums,
            p.blocking_sum_bytes,
            f.host_op_s * 1e6,
            f.host_op_s_per_extra_rank * 1e6,
            (s.host.op_s - f.host_op_s) * 1e6
        );
    }
    md += "\n| ranks | step ms | throughput | efficiency | gradient comm ms | exposed ms | hidden | blocking ms | host ms | collectives | no overlap | per tensor | per tensor, no overlap |\n\
           |---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (i, r) in sim.predictions.iter().enumerate() {
        let _ = writeln!(
            md,
            "| {} | {:.1} | {:.0} {}/s | {:.1}% | {:.2} | {:.2} | {:.0}% | {:.2} | {:.2} | {} + {} | {:.1}% | {:.1}% | {:.1}% |",
            r.ranks,
            r.step_s * 1e3,
            r.throughput,
            p.unit,
            100.0 * r.efficiency,
            r.gradient_comm_s * 1e3,
            r.exposed_comm_s * 1e3,
            (100.0 * r.hidden_fraction()).max(0.0),
            r.blocking_s * 1e3,
            r.host_s * 1e3,
            r.gradient_collectives,
            r.blocking_collectives,
            100.0 * sim.no_overlap[i].efficiency,
            100.0 * sim.per_tensor[i].efficiency,
            100.0 * sim.per_tensor_no_overlap[i].efficiency,
        );
    }
    if let (Some(run), Some(eight)) = (
        &sim.published,
        sim.predictions.iter().find(|r| r.ranks == 8),
    ) {
        let _ = writeln!(
            md,
            "\nPublished for this run on eight GPUs: {:.0} {}/s ({:.2}×); predicted {:.0} ({:.2}×), {:+.1}%. \
             The prediction has no term for what an 8-GPU run loses besides communication \
             (benches/results/simulate_check.md).",
            run.eight_gpus,
            p.unit,
            run.eight_gpus / run.one_gpu,
            eight.throughput,
            eight.throughput / run.one_gpu,
            100.0 * (eight.throughput / run.eight_gpus - 1.0)
        );
    }
    stage_table(sim, &mut md);
    let largest = sim.predictions.iter().map(|r| r.ranks).max().unwrap_or(1);
    let _ = writeln!(
        md,
        "\nStep time against the bucket size at {largest} ranks (overlapped):\n\n| bucket | step ms |\n|---|---|"
    );
    for (bytes, step) in &sim.bucket_sweep {
        let _ = writeln!(md, "| {} | {:.2} |", size(*bytes), step * 1e3);
    }
    md += "\nModel: firemesh-simulate (ring all-reduce timed by NCCL's published cost model on preset links, α–β ring or one-shot on custom ones; \
           buckets filled in backward order and summed on a stream beside compute; blocking sums on \
           the critical path; the slowest rank sets the step; the step lasts at least the host's \
           issue time). Predictions, not measurements.\n";
    md
}

/// Each ZeRO stage of `--zero` side by side: step, communication and memory per rank.
fn stage_table(sim: &Simulation, md: &mut String) {
    let gb = |b: f64| b / 1e9;
    let _ = writeln!(
        md,
        "\nZeRO stages (memory per rank in GB, f32 state, against {:.0} GB per GPU):\n\n\
         | ZeRO | gathers | ranks | step ms | efficiency | gradient comm ms | parameter comm ms | exposed ms | parameters | gradients | optimizer state | activations | total | fits |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        gb(sim.device_bytes)
    );
    for plan in &sim.stages {
        let gathers = match (plan.stage, plan.prefetch) {
            (0, _) => "none",
            (1, _) => "after the update",
            (_, false) => "at use",
            (_, true) => "ahead",
        };
        for (i, r) in plan.predictions.iter().enumerate() {
            let memory = match plan.memory[i] {
                Some(m) => format!(
                    "{:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {}",
                    gb(m.parameters),
                    gb(m.gradients),
                    gb(m.optimizer_state),
                    gb(m.activations),
                    gb(m.total()),
                    if plan.fits(i, sim.device_bytes) {
                        "yes"
                    } else {
                        "no"
                    }
                ),
                None => "– | – | – | – | – | (profile: shape unknown)".to_string(),
            };
            let _ = writeln!(
                md,
                "| {} | {gathers} | {} | {:.1} | {:.1}% | {:.2} | {:.2} | {:.2} | {memory} |",
                plan.stage,
                r.ranks,
                r.step_s * 1e3,
                100.0 * r.efficiency,
                r.gradient_comm_s * 1e3,
                r.parameter_comm_s * 1e3,
                r.exposed_comm_s * 1e3,
            );
        }
    }
    *md += "\nZeRO-1 reduce-scatters the gradient buckets and gathers the updated f32 parameters after \
            the optimizer; ZeRO-3 gathers each layer's parameters (in the compute precision) before \
            its forward and again before its backward, on the stream the reduce-scatters use. A \
            reduce-scatter or all-gather is timed as half a ring all-reduce. Memory: \
            `firemesh train --dry-run`'s estimate (activations kept for the backward pass, f32).\n";
}

fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

pub fn print(sim: &Simulation) {
    print!("{}", markdown(sim));
}

/// Writes the files; returns their paths.
pub fn write(sim: &Simulation, dir: &Path) -> Result<Vec<String>> {
    let io = |what: &Path, e: std::io::Error| Error::io(what.display(), e);
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let json = dir.join("simulate.json");
    let text = serde_json::to_string_pretty(sim).map_err(|e| Error::json("the simulation", e))?;
    std::fs::write(&json, text).map_err(|e| io(&json, e))?;
    let md = dir.join("simulate.md");
    // The file names the commit it was written at, after its title.
    let text = markdown(sim);
    let (title, body) = text.split_once('\n').unwrap_or((&text, ""));
    let commit = crate::bench::source_commit();
    let text = format!("{title}\n\nMeasured at commit {commit}.\n{body}");
    std::fs::write(&md, text).map_err(|e| io(&md, e))?;
    let curve = |preds: &[Prediction]| -> Vec<(f64, f64)> {
        preds
            .iter()
            .map(|r| ((r.ranks as f64).log2(), 100.0 * r.efficiency))
            .collect()
    };
    let efficiency = dir.join("efficiency.png");
    line_chart(
        &efficiency,
        "Predicted scaling efficiency",
        "log2(ranks)",
        "efficiency (%)",
        &[
            Series {
                name: "buckets, overlapped".into(),
                points: curve(&sim.predictions),
                color: BLUE,
            },
            Series {
                name: "buckets, after the backward".into(),
                points: curve(&sim.no_overlap),
                color: RGBColor(0, 128, 0),
            },
            Series {
                name: "per tensor, overlapped".into(),
                points: curve(&sim.per_tensor),
                color: RED,
            },
            Series {
                name: "per tensor, after the backward".into(),
                points: curve(&sim.per_tensor_no_overlap),
                color: RGBColor(128, 0, 128),
            },
        ],
    )?;
    let buckets = dir.join("buckets.png");
    line_chart(
        &buckets,
        "Step time against the bucket size",
        "log2(bucket MiB)",
        "step (ms)",
        &[Series {
            name: "overlapped".into(),
            points: sim
                .bucket_sweep
                .iter()
                .map(|(b, t)| ((*b as f64 / MIB).log2(), t * 1e3))
                .collect(),
            color: BLUE,
        }],
    )?;
    Ok([json, md, efficiency, buckets]
        .iter()
        .map(|p| p.display().to_string())
        .collect())
}
