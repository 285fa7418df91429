//! `firemesh bench`: a small run on the CPU mesh writes its report, whose ratios follow from
//! its own rows, counts the collectives the buckets imply, and refuses bad input in one line.

use crate::common::{cli, scratch};
use burn::module::Module;
use burn_flex::Flex;
use serde_json::Value;

fn rows<'a>(json: &'a Value, model: &str, setup: &str) -> Vec<&'a Value> {
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["model"] == model && r["setup"] == setup)
        .collect()
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// A model's parameters and parameter tensors.
fn sizes<M: Module<Flex>>(m: &M) -> (usize, usize) {
    (m.num_params(), burn::module::list_param_ids(m).len())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn a_cpu_run_reports_throughput_efficiency_and_collectives_against_its_peers() {
    let dir = scratch("bench");
    let bucket_mib = 0.01;
    let args = [
        "bench",
        "--runtimes",
        "cpu",
        "--models",
        "resnet-tiny,gpt-tiny",
        "--ranks",
        "1,2",
        "--batch-per-rank",
        "2",
        "--image-size",
        "8",
        "--seq-len",
        "9",
        "--steps",
        "2",
        "--bucket-mib",
        "0.01",
        "--out",
        "out",
    ];
    let out = cli(&dir, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Progress of every setup, step by step.
    for line in [
        "cpu resnet-tiny firemesh n=2: step 3/3",
        "cpu gpt-tiny inner n=1: step 1/3 (warm-up)",
        "cpu gpt-tiny multi-device n=2: step 2/2",
    ] {
        assert!(stderr.contains(line), "{line} not in {stderr}");
    }
    for file in ["bench.md", "bench.json", "bench.png"] {
        let len = std::fs::metadata(dir.join("out").join(file)).unwrap().len();
        assert!(len > 500, "{file}: {len} bytes");
    }
    let md = std::fs::read_to_string(dir.join("out/bench.md")).unwrap();
    assert!(md.contains("## gpt-tiny on Cpu") && md.contains("| burn-train MultiDevice | 2 |"));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/bench.json")).unwrap())
            .unwrap();
    assert_eq!(json["burn"], "0.21.0");
    assert!(json["date"].as_str().unwrap().starts_with("20"));

    let flex = burn_flex::FlexDevice;
    let gpt = firemesh_gpt::GptConfig {
        vocab_size: 256,
        ..firemesh_gpt::GptConfig::tiny()
    };
    let params = [
        (
            "resnet-tiny",
            sizes(
                &firemesh_resnet::ResNetConfig::tiny(10)
                    .init::<Flex>(&flex)
                    .unwrap(),
            ),
            2.0,
        ),
        (
            "gpt-tiny",
            sizes(&gpt.init::<Flex>(&flex).unwrap()),
            2.0 * 8.0, // 2 sequences of 9 tokens predict 8 each
        ),
    ];
    let bucket = (bucket_mib * 1048576.0) as usize;
    for (model, (params, tensors), per_rank) in params {
        let ours = rows(&json, model, "firemesh");
        let inner = rows(&json, model, "inner");
        let multi = rows(&json, model, "multi-device");
        assert_eq!((ours.len(), inner.len(), multi.len()), (2, 1, 1), "{model}");
        let one = f(ours[0], "throughput");
        for r in ours.iter().chain(&inner).chain(&multi) {
            let n = f(r, "ranks");
            // Throughput is the step's samples over its median time.
            assert!(
                close(f(r, "throughput"), n * per_rank / f(r, "step_s")),
                "{r}"
            );
            assert_eq!(r["steps_s"].as_array().unwrap().len(), 2, "{r}");
            assert!(close(
                f(r, "vs_inner"),
                f(r, "throughput") / (n * f(inner[0], "throughput"))
            ));
        }
        for r in &ours {
            let n = f(r, "ranks");
            assert!(
                close(f(r, "scaling_efficiency"), f(r, "throughput") / (n * one)),
                "{r}"
            );
            // Every gradient is Partial: one stream of f32 in buckets, most of them summed
            // during the backward pass (each early bucket holds at least `bucket` bytes), the
            // rest at the step: at most ceil(bytes / bucket) collectives.
            let (all, early) = (
                u(r, "gradient_collectives"),
                u(r, "early_gradient_collectives"),
            );
            assert!(0 < early && early < all, "{model}: {early} of {all} early");
            assert!(all <= (4 * params).div_ceil(bucket), "{model}: {all}");
            // Without buckets: one sum per parameter tensor.
            assert_eq!(r["gradient_tensors"], tensors, "{model}");
            assert_eq!(r["fallbacks"], 0, "{r}");
            let hidden = f(r, "hidden_comm_share");
            assert!((0.0..=1.0).contains(&hidden), "{r}");
            let share = f(r, "comm_share");
            assert!((0.0..1.0).contains(&share) && share > 0.0, "{r}");
            assert!(f(r, "loss_first").is_finite() && f(r, "loss_last").is_finite());
        }
        assert!(close(
            f(ours[1], "vs_multi_device"),
            f(ours[1], "throughput") / f(multi[0], "throughput")
        ));
        assert_eq!(inner[0]["gradient_collectives"], 0);
        assert!(multi[0]["comm_share"].is_null());
    }
    // BatchNorm statistics of a sharded batch are summed over the ranks in the forward pass.
    let resnet = rows(&json, "resnet-tiny", "firemesh");
    assert!(
        resnet[1]["other_collectives"].as_u64().unwrap() > 10,
        "{}",
        resnet[1]
    );
}

#[test]
fn bad_bench_input_is_one_line_and_a_failure() {
    let dir = scratch("bench-bad");
    for (args, says) in [
        (&["bench", "--ranks", "0"][..], "--ranks 0"),
        (&["bench", "--steps", "0"][..], "--steps"),
        (&["bench", "--bucket-mib", "0"][..], "--bucket-mib"),
        (
            &[
                "bench",
                "--runtimes",
                "cpu",
                "--models",
                "gpt-tiny",
                "--seq-len",
                "99",
            ][..],
            "context",
        ),
    ] {
        let out = cli(&dir, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!dir.join("benches").exists(), "{args:?} wrote a report");
    }
}

fn u(row: &Value, key: &str) -> usize {
    row[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {row}")) as usize
}
