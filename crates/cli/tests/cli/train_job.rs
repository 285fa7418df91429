//! The main job trains: loss falls with no op falling back to replicated execution, and the run
//! folder holds the metrics, the summary, the charts and the checkpoints.

use crate::common::{cli, config, on_ranks, scratch, tiny};
use firemesh::mesh::MeshKind;
use firemesh::Precision;
use firemesh_cli::options::{MeshOptions, StepOptions};
use firemesh_cli::train::{self, Record, Summary, TrainOptions};
use std::path::Path;

fn lines(path: &Path) -> Vec<Record> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn resnet_on_a_cpu_mesh_learns_and_leaves_its_numbers() {
    let dir = scratch("learns");
    let summary = train::run(&config(TrainOptions {
        epochs: Some(3),
        checkpoint_every: Some(5),
        keep_checkpoints: Some(2),
        seed: Some(7),
        ..tiny(&dir)
    }))
    .unwrap();
    // 128 samples in batches of 16: 8 steps per epoch.
    assert_eq!((summary.steps, summary.batch, summary.ranks), (24, 16, 2));
    assert_eq!(summary.fallbacks, 0);
    // Ranks that share one device sum their parts in place: no collective across devices.
    assert!(
        summary.routes.keys().all(|r| r == "one-device"),
        "{:?}",
        summary.routes
    );
    assert!(
        summary.last_loss < 0.6 * summary.first_loss,
        "loss {} -> {}",
        summary.first_loss,
        summary.last_loss
    );
    assert!(summary.throughput > 0.0 && summary.throughput_unit == "images/s");
    assert!((0.0..1.0).contains(&summary.data_wait_fraction));

    let records = lines(&dir.join("metrics.jsonl"));
    let steps: Vec<usize> = records
        .iter()
        .filter(|r| matches!(r, Record::Step { .. }))
        .map(Record::step)
        .collect();
    assert_eq!(steps, (1..=24).collect::<Vec<_>>());
    for r in &records {
        if let Record::Step { samples, .. } = r {
            assert_eq!(*samples, 16, "throughput counts the samples processed");
        }
    }
    let evals: Vec<&Record> = records
        .iter()
        .filter(|r| matches!(r, Record::Eval { .. }))
        .collect();
    assert_eq!(evals.len(), 3, "one evaluation per epoch");
    match evals[2] {
        Record::Eval {
            step: 24,
            accuracy: Some(a),
            ..
        } => assert!(*a > 0.3, "held-out accuracy {a} (10 classes)"),
        other => panic!("{other:?}"),
    }
    let summary_file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary_file["steps"], 24);
    for chart in ["loss.png", "throughput.png", "eval.png"] {
        let bytes = std::fs::read(dir.join(chart)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{chart} is a PNG");
        assert!(
            bytes.len() > 5_000,
            "{chart} has a drawing ({} bytes)",
            bytes.len()
        );
    }
    // Every 5 steps and at the end: 5, 10, 15, 20, 24; the newest two are kept.
    let kept: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(kept, ["step-00000020.ckpt", "step-00000024.ckpt"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A global batch that does not split evenly over the ranks trains on uneven blocks.
#[test]
fn a_batch_of_any_size_splits_over_the_ranks() {
    let dir = scratch("uneven");
    let summary = train::run(&config(TrainOptions {
        batch: Some(5),
        steps: Some(3),
        ..on_ranks(3, tiny(&dir))
    }))
    .unwrap();
    assert_eq!((summary.batch, summary.ranks, summary.fallbacks), (5, 3, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--late-buckets` sums every gradient bucket after the backward pass: no bucket early, and
/// the same parameters, bit for bit, as the run that sums them during it (the default).
#[test]
fn late_buckets_train_to_the_bits_of_early_ones() {
    let dir = scratch("late-buckets");
    let run = |name: &str, late_buckets: bool| {
        train::run(&config(TrainOptions {
            steps: Some(3),
            sums: StepOptions {
                bucket_mib: Some(0.01),
                comm_precision: None,
                gather_ahead_mib: None,
            },
            late_buckets,
            ..tiny(&dir.join(name))
        }))
        .unwrap()
    };
    let (early, late) = (run("early", false), run("late", true));
    assert!(early.early_gradient_collectives > 0, "{early:?}");
    assert_eq!(late.early_gradient_collectives, 0);
    assert_eq!(early.params_digest, late.params_digest);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--precision bf16 --comm-precision bf16`: the run says so in its summary, each step's
/// metrics give the bytes it summed, and its gradients crossed in half the bytes of the f32
/// run's (the other sums, BatchNorm's statistics and the loss, are the same in both).
#[test]
fn a_bf16_run_with_bf16_gradient_sums_reports_its_bytes() {
    let dir = scratch("bf16");
    let run = |name: &str, precision: Precision| {
        train::run(&config(TrainOptions {
            steps: Some(3),
            precision: Some(precision),
            sums: StepOptions {
                bucket_mib: None,
                comm_precision: Some(precision),
                gather_ahead_mib: None,
            },
            ..tiny(&dir.join(name))
        }))
        .unwrap()
    };
    let (full, half) = (run("f32", Precision::F32), run("bf16", Precision::Bf16));
    // `firemesh compare` puts them side by side.
    let (f32_dir, bf16_dir) = (dir.join("f32"), dir.join("bf16"));
    let out = cli(
        &dir,
        &[
            "compare",
            f32_dir.to_str().unwrap(),
            bf16_dir.to_str().unwrap(),
            "--out",
            "cmp",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = std::fs::read_to_string(dir.join("cmp/compare.md")).unwrap();
    assert!(
        table.contains("| f32 | resnet-tiny | f32, f32 | 0 | 3 |"),
        "{table}"
    );
    assert!(
        table.contains("| bf16 | resnet-tiny | bf16, bf16 | 0 | 3 |"),
        "{table}"
    );
    for chart in ["compare-loss.png", "compare-eval.png"] {
        assert!(
            std::fs::metadata(dir.join("cmp").join(chart))
                .unwrap()
                .len()
                > 1000
        );
    }
    let one = cli(&dir, &["compare", f32_dir.to_str().unwrap(), "missing"]);
    let err = String::from_utf8_lossy(&one.stderr);
    assert!(
        !one.status.success() && err.contains("missing: not a finished run folder"),
        "{err}"
    );
    assert_eq!(
        (full.precision, full.comm_precision),
        (Precision::F32, Precision::F32)
    );
    assert_eq!(
        (half.precision, half.comm_precision),
        (Precision::Bf16, Precision::Bf16)
    );
    assert_eq!(
        (half.skipped_steps, half.loss_scale),
        (0, None),
        "no scaling in bf16"
    );
    assert!(half.last_loss.is_finite() && half.fallbacks == 0);
    // What summed, and why: Burn's tensor ops on a CPU mesh (`--engine` picks on CUDA).
    assert_eq!(full.collective_engine, "portable");
    assert!(full.collective_engine_why.contains("CPU mesh"), "{full:?}");
    // Autocast's casts, counted in the summary: none in f32.
    let casts = |s: &Summary| {
        (
            s.casts_down_per_step,
            s.casts_up_per_step,
            s.cast_bytes_per_step,
        )
    };
    assert_eq!(casts(&full), (0, 0, 0));
    let (down, up, bytes) = casts(&half);
    assert!(down > 0 && up > 0 && bytes > 0, "{half:?}");
    // Where a block's input feeds two convolutions (its first and its downsampling one), the
    // backward pass adds their two narrow input gradients: kept narrow.
    assert_eq!(full.ops_kept_narrow_per_step, 0);
    assert!(half.ops_kept_narrow_per_step > 0, "{half:?}");
    // Each BatchNorm reads its convolution's narrow output three times in f32: widened
    // once. Each convolution's backward pass reads its output's gradient twice: cast once.
    assert_eq!(full.casts_up_reused_per_step, 0);
    assert!(half.casts_up_reused_per_step > 0, "{half:?}");
    assert_eq!(full.activation_casts_reused_per_step, 0);
    assert!(half.activation_casts_reused_per_step > 0, "{half:?}");
    // Every trained parameter of the tiny ResNet has a gradient: 2 bytes of each saved per
    // step (BatchNorm's running statistics have none).
    let saved = full.comm_bytes_per_step - half.comm_bytes_per_step;
    assert_eq!(saved, 2 * trained_params() as u64, "{full:?}\n{half:?}");
    for r in lines(&dir.join("bf16/metrics.jsonl")) {
        if let Record::Step { comm_bytes, .. } = r {
            assert_eq!(comm_bytes, half.comm_bytes_per_step);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `compare --track-losses`: a run against a copy of itself is within the bounds; against a
/// copy whose losses are 10% higher from its second step on (its first step the same, every
/// other past the bounds) it fails, naming that run; against a run of other steps it says so.
#[test]
fn compare_tracks_losses_within_the_precision_bounds() {
    let dir = scratch("track");
    let run = |name: &str, steps: usize| {
        train::run(&config(TrainOptions {
            steps: Some(steps),
            ..tiny(&dir.join(name))
        }))
        .unwrap()
    };
    run("f32", 6);
    run("short", 5);
    let copy = |name: &str, factor: f64| {
        let to = dir.join(name);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(dir.join("f32/summary.json"), to.join("summary.json")).unwrap();
        let text = std::fs::read_to_string(dir.join("f32/metrics.jsonl")).unwrap();
        let lines: Vec<String> = text
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                if v["kind"] == "step" && v["step"].as_u64().unwrap() >= 2 {
                    v["loss"] = serde_json::json!(v["loss"].as_f64().unwrap() * factor);
                }
                v.to_string()
            })
            .collect();
        std::fs::write(to.join("metrics.jsonl"), lines.join("\n") + "\n").unwrap();
        to
    };
    let (same, off) = (copy("same", 1.0), copy("off", 1.1));
    let compare = |runs: &[&Path]| {
        let mut args = vec!["compare", "--track-losses", "--out", "cmp"];
        args.extend(runs.iter().map(|p| p.to_str().unwrap()));
        let out = cli(&dir, &args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let f32_dir = dir.join("f32");
    let (ok, text) = compare(&[&f32_dir, &same]);
    assert!(ok, "{text}");
    assert!(
        text.contains("| same | 6 | 0.0e0 | 0.0e0 | 0.0e0 | yes |"),
        "{text}"
    );
    let (ok, text) = compare(&[&f32_dir, &same, &off]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("| off | 6 | 0.0e0 | 1.0e-1 | 1.0e-1 | **no** |"),
        "{text}"
    );
    assert!(
        text.contains("--track-losses: off do(es) not follow f32's losses"),
        "{text}"
    );
    let (ok, text) = compare(&[&f32_dir, &dir.join("short")]);
    assert!(
        !ok && text.contains("f32 logged 6 step losses and short logged 5"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Elements of the tiny ResNet's parameters that the optimizer trains.
fn trained_params() -> usize {
    use burn::module::{Module, ModuleVisitor, Param};
    use burn::tensor::Tensor;
    type Ad = burn::backend::Autodiff<burn_flex::Flex>;
    struct Count(usize);
    impl ModuleVisitor<Ad> for Count {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Ad, D>>) {
            if p.is_require_grad() {
                self.0 += p.val().shape().num_elements();
            }
        }
    }
    let model = firemesh_resnet::ResNetConfig::tiny(10)
        .init::<Ad>(&burn_flex::FlexDevice)
        .unwrap();
    let mut count = Count(0);
    model.visit(&mut count);
    count.0
}

/// The same job on separate wgpu clients (lavapipe in CI): sums and gathers across the clients
/// run on our CubeCL group, none on the portable path, and no part crosses CubeCL streams.
#[test]
fn the_job_trains_on_a_wgpu_mesh() {
    if !crate::common::wgpu_here() {
        return;
    }
    let dir = scratch("wgpu");
    let summary = train::run(&config(TrainOptions {
        devices: MeshOptions {
            mesh: Some(MeshKind::Wgpu),
            ranks: Some(2),
            share_devices: false,
        },
        samples: Some(64),
        eval_samples: Some(16),
        batch: Some(8),
        steps: Some(6),
        // Small buckets, so that some are summed during the backward pass.
        sums: StepOptions {
            bucket_mib: Some(0.05),
            comm_precision: None,
            gather_ahead_mib: None,
        },
        ..tiny(&dir)
    }))
    .unwrap();
    assert_eq!(summary.fallbacks, 0);
    // The default engine: the CubeCL ring (NCCL runs CUDA groups only).
    assert_eq!(summary.collective_engine, "cubecl");
    assert!(
        summary.collective_engine_why.contains("default"),
        "{summary:?}"
    );
    assert_eq!(
        summary.stream_handoffs, 0,
        "every part was made on the device stream (batches, evaluation)"
    );
    assert!(
        summary.early_gradient_collectives > 0
            && summary.early_gradient_collectives < summary.gradient_collectives,
        "{} of {} gradient collectives early",
        summary.early_gradient_collectives,
        summary.gradient_collectives
    );
    assert!(
        summary.routes.get("mesh-group") > Some(&0)
            && !summary.routes.contains_key("portable-group"),
        "{:?}",
        summary.routes
    );
    assert!(
        summary.last_loss.is_finite() && summary.last_loss < summary.first_loss,
        "loss {} -> {}",
        summary.first_loss,
        summary.last_loss
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gpu_monitor_reads_nvml_or_says_once_why_not() {
    use firemesh_cli::train::{describe_gpus, GpuMonitor, GpuSample};
    let (monitor, note) = GpuMonitor::cuda([0, 0]);
    match note {
        // No NVIDIA driver here (CI): one note, and no samples.
        Some(note) => {
            assert!(note.contains("NVML unavailable"), "{note}");
            assert!(monitor.sample().is_empty());
        }
        // A GPU machine: GPU 0, once, with sane numbers.
        None => {
            let samples = monitor.sample();
            assert_eq!(samples.len(), 1, "{samples:?}");
            let s = &samples[0];
            assert!(
                s.util_percent <= 100 && s.mem_used_mib <= s.mem_total_mib,
                "{s:?}"
            );
        }
    }
    let line = describe_gpus(&[GpuSample {
        gpu: 1,
        util_percent: 87,
        mem_used_mib: 12 * 1024 + 307,
        mem_total_mib: 80 * 1024,
    }]);
    assert_eq!(line, "gpu1 87% 12.3/80.0 GiB");
}

#[test]
fn a_terminal_gets_a_progress_bar_and_a_pipe_gets_plain_lines() {
    let dir = scratch("tty");
    let bin = env!("CARGO_BIN_EXE_firemesh");
    let args = "train --mesh cpu --ranks 2 --steps 3 --samples 64 --eval-samples 16";
    // util-linux's `script` runs the CLI on a pseudo-terminal.
    let tty = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{bin} {args} --run-dir {}", dir.join("tty").display()),
        ])
        .arg("/dev/null")
        .output();
    match tty {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{text}");
            // The bar (block glyphs), its step counter and ETA, then the summary.
            assert!(
                text.contains('\u{2588}') && text.contains("3/3 steps"),
                "{text}"
            );
            assert!(
                text.contains("ETA") && text.contains("done: loss"),
                "{text}"
            );
        }
        Err(e) => eprintln!("SKIPPED: no `script` to make a terminal ({e})"),
    }
    let piped = cli(
        &dir,
        &[
            "train",
            "--mesh",
            "cpu",
            "--ranks",
            "2",
            "--steps",
            "3",
            "--samples",
            "64",
            "--eval-samples",
            "16",
            "--log-every",
            "1",
            "--run-dir",
            "piped",
        ],
    );
    let text = String::from_utf8_lossy(&piped.stdout).to_string()
        + &String::from_utf8_lossy(&piped.stderr);
    assert!(piped.status.success(), "{text}");
    assert!(!text.contains('\u{2588}'), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("step ")).count(),
        3,
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--trace FILE`: a Chrome trace with one track per rank (rank 0 on the main thread, rank 1 on
/// its own thread) holding each rank's ops, and the sums between the ranks.
#[test]
fn a_trace_shows_each_rank_and_the_sums_between_them() {
    let dir = scratch("trace");
    let trace = dir.join("trace.json");
    let out = cli(
        &dir,
        &[
            "train",
            "--mesh",
            "cpu",
            "--ranks",
            "2",
            "--batch",
            "8",
            "--samples",
            "32",
            "--image-size",
            "8",
            "--steps",
            "2",
            "--run-dir",
            "run",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&trace).unwrap()).expect("a JSON array of events");
    let thread_of = |name: &str| {
        events
            .iter()
            .find(|e| {
                e["ph"] == "M"
                    && e["args"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(name))
            })
            .map(|e| e["tid"].clone())
    };
    let rank1_thread = thread_of("-rank1").expect("rank 1's thread is named");
    let ops_of = |rank: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["name"] == "op" && e["ph"] == "B" && e["args"]["rank"] == rank)
            .collect()
    };
    let (rank0, rank1) = (ops_of("0"), ops_of("1"));
    assert!(rank0.len() > 100, "{} ops of rank 0", rank0.len());
    // The ops ran on both ranks (the batch splits evenly: every one on rank 1's thread).
    assert_eq!(rank0.len(), rank1.len());
    assert!(rank1.iter().all(|e| e["tid"] == rank1_thread));
    assert!(rank0.iter().all(|e| e["tid"] != rank1_thread));
    assert!(rank1.iter().any(|e| e["args"]["op"] == "\"conv2d\""));
    let sums = events
        .iter()
        .filter(|e| e["name"] == "comm" && e["ph"] == "B" && e["args"]["kind"] == "\"sum\"")
        .count();
    assert!(
        sums > 0,
        "the BatchNorm statistics and gradients are summed"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
