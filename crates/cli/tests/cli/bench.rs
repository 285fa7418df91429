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

/// A row's throughput in each repeat (`None` where its median step took no measurable time).
fn repeats(r: &Value) -> Vec<Option<f64>> {
    let v: Vec<Option<f64>> = r["repeat_throughputs"]
        .as_array()
        .unwrap_or_else(|| panic!("repeat_throughputs missing in {r}"))
        .iter()
        .map(Value::as_f64)
        .collect();
    assert_eq!(v.len(), 3, "{r}");
    v
}

/// `ours[k] / (scale · theirs[k])` for the repeats where both were measured.
fn per_repeat(ours: &[Option<f64>], theirs: &[Option<f64>], scale: f64) -> Vec<f64> {
    ours.iter()
        .zip(theirs)
        .filter_map(|(o, t)| Some(o.as_ref()? / (scale * t.as_ref()?)))
        .collect()
}

/// The median of a ratio's repeats: the middle one of three, halfway between two.
fn middle(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        3 => v[1],
        2 => (v[0] + v[1]) / 2.0,
        _ => v[0],
    }
}

/// The row's `ratio` is the median of its repeats `per`, given with its spread: with three
/// repeats, their interquartile range over their
/// median (quartiles interpolated: halfway between the middle and each end), and a spread
/// above 10% makes the row unsteady; with fewer, none is known and the row is unsteady.
fn assert_ratio(r: &Value, ratio: &str, per: &[f64]) {
    if per.is_empty() {
        assert!(r[ratio].is_null(), "{ratio}: {r}");
        return;
    }
    assert!(close(f(r, ratio), middle(per)), "{ratio}: {r}");
    let mut v = per.to_vec();
    v.sort_by(f64::total_cmp);
    if v.len() < 3 {
        assert!(r["spread"][ratio].is_null(), "{ratio}: {r}");
        assert_eq!(r["unsteady"], true, "{ratio}: {r}");
        return;
    }
    let iqr = (v[1] + v[2]) / 2.0 - (v[0] + v[1]) / 2.0;
    let spread = f(&r["spread"], ratio);
    assert!(close(spread, iqr / v[1]), "{ratio}: {r}");
    if spread > 0.10 {
        assert_eq!(r["unsteady"], true, "{ratio}: {r}");
    }
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
        "--repeats",
        "3",
        "--bucket-mib",
        "0.01",
        "--out",
        "out",
    ];
    let out = cli(&dir, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Progress of every setup, step by step, repeat by repeat.
    for line in [
        "cpu resnet-tiny firemesh n=2 (repeat 3/3): step 3/3",
        "cpu gpt-tiny inner n=1 (repeat 1/3): step 1/3 (warm-up)",
        "cpu gpt-tiny multi-device n=2 (repeat 2/3): step 2/2",
    ] {
        assert!(stderr.contains(line), "{line} not in {stderr}");
    }
    // Setups take turns: the second repeat of N=1 starts after the first repeat of N=2.
    let at = |line: &str| {
        stderr
            .find(line)
            .unwrap_or_else(|| panic!("{line} not in {stderr}"))
    };
    assert!(
        at("cpu resnet-tiny multi-device n=2 (repeat 1/3)")
            < at("cpu resnet-tiny firemesh n=1 (repeat 2/3)")
    );
    for file in ["bench.md", "bench.json", "bench.png"] {
        let len = std::fs::metadata(dir.join("out").join(file)).unwrap().len();
        assert!(len > 500, "{file}: {len} bytes");
    }
    let md = std::fs::read_to_string(dir.join("out/bench.md")).unwrap();
    assert!(md.contains("## gpt-tiny on Cpu") && md.contains("| burn-train MultiDevice | 2 |"));
    assert!(
        md.contains("3 repeat(s) of every setup") && md.contains("±"),
        "{md}"
    );
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
    let bucket = firemesh::grads::bucket_bytes(bucket_mib).unwrap();
    for (model, (params, tensors), per_rank) in params {
        let ours = rows(&json, model, "firemesh");
        let inner = rows(&json, model, "inner");
        let multi = rows(&json, model, "multi-device");
        assert_eq!((ours.len(), inner.len(), multi.len()), (2, 1, 1), "{model}");
        let one = repeats(ours[0]);
        let inner_repeats = repeats(inner[0]);
        for r in ours.iter().chain(&inner).chain(&multi) {
            let n = f(r, "ranks");
            // Throughput is the step's samples over its median time, over all repeats and in
            // each repeat alone.
            assert!(
                close(f(r, "throughput"), n * per_rank / f(r, "step_s")),
                "{r}"
            );
            let steps: Vec<f64> = r["steps_s"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(steps.len(), 3 * 2, "{r}");
            for (k, pair) in steps.chunks(2).enumerate() {
                let mid = (pair[0] + pair[1]) / 2.0;
                let want = (mid > 0.0).then(|| n * per_rank / mid);
                assert!(
                    match (repeats(r)[k], want) {
                        (Some(got), Some(want)) => close(got, want),
                        (got, want) => got.is_none() && want.is_none(),
                    },
                    "{r}"
                );
            }
            // Ratios: taken repeat by repeat, their median reported with its spread.
            let per = per_repeat(&repeats(r), &inner_repeats, n);
            assert_ratio(r, "vs_inner", &per);
        }
        for r in &ours {
            let n = f(r, "ranks");
            let per = per_repeat(&repeats(r), &one, n);
            assert_ratio(r, "scaling_efficiency", &per);
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
        let per = per_repeat(&repeats(ours[1]), &repeats(multi[0]), 1.0);
        assert_ratio(ours[1], "vs_multi_device", &per);
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

/// `--precision f32,bf16` measures firemesh in both, side by side, repeat by repeat: each
/// bf16 row has its own scaling efficiency and its throughput against f32's at the same N.
#[test]
fn precisions_are_measured_side_by_side() {
    let dir = scratch("bench-precision");
    let args = "bench --runtimes cpu --models resnet-tiny --ranks 1,2 --batch-per-rank 2 \
                --image-size 8 --steps 1 --repeats 3 --precision f32,bf16 --no-peers --out out";
    let out = cli(&dir, &args.split_whitespace().collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cpu resnet-tiny firemesh bf16 n=2 (repeat 3/3)"),
        "{stderr}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/bench.json")).unwrap())
            .unwrap();
    let ours = rows(&json, "resnet-tiny", "firemesh");
    let of = |p: &str| -> Vec<&Value> {
        ours.iter()
            .copied()
            .filter(|r| r["precision"] == p)
            .collect()
    };
    let (f32_rows, bf16_rows) = (of("f32"), of("bf16"));
    assert_eq!((f32_rows.len(), bf16_rows.len()), (2, 2), "{json}");
    for (low, full) in bf16_rows.iter().zip(&f32_rows) {
        assert_eq!(low["ranks"], full["ranks"]);
        assert!(full["vs_f32"].is_null(), "{full}");
        let per = per_repeat(&repeats(low), &repeats(full), 1.0);
        assert_ratio(low, "vs_f32", &per);
        let per = per_repeat(&repeats(low), &repeats(bf16_rows[0]), f(low, "ranks"));
        assert_ratio(low, "scaling_efficiency", &per);
    }
    let md = std::fs::read_to_string(dir.join("out/bench.md")).unwrap();
    assert!(
        md.contains("| firemesh Sharded (bf16) | 2 |") && md.contains("| vs f32 |"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--zero 0,1` measures firemesh with and without a sharded optimizer state, side by side:
/// the tiny GPT's AdamW state per rank halves on 2 ranks (within a few blocks' rounding), is
/// whole on 1, and each ZeRO-1 row has its throughput against stage 0's at the same N.
#[test]
fn zero_stages_are_measured_side_by_side() {
    let dir = scratch("bench-zero");
    let args = "bench --runtimes cpu --models gpt-tiny --ranks 1,2 --batch-per-rank 2 \
                --seq-len 8 --steps 1 --repeats 3 --zero 0,1 --no-peers --out out";
    let out = cli(&dir, &args.split_whitespace().collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cpu gpt-tiny firemesh zero-1 n=2 (repeat 3/3)"),
        "{stderr}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/bench.json")).unwrap())
            .unwrap();
    let ours = rows(&json, "gpt-tiny", "firemesh");
    let of = |z: u64| -> Vec<&Value> {
        ours.iter()
            .copied()
            .filter(|r| r["zero"].as_u64() == Some(z))
            .collect()
    };
    let (stage0, stage1) = (of(0), of(1));
    assert_eq!((stage0.len(), stage1.len()), (2, 2), "{json}");
    let state = |r: &Value| u(r, "optimizer_state_bytes_per_rank");
    for (sharded, whole) in stage1.iter().zip(&stage0) {
        assert_eq!(sharded["ranks"], whole["ranks"]);
        assert!(whole["vs_zero0"].is_null(), "{whole}");
        let per = per_repeat(&repeats(sharded), &repeats(whole), 1.0);
        assert_ratio(sharded, "vs_zero0", &per);
        let n = u(whole, "ranks");
        let (got, full) = (state(sharded), state(whole));
        // Each parameter's rows are cut in N blocks: a rank holds at most one row more
        // of each.
        assert!(
            got * n <= full + full / 10,
            "N={n}: {got} of {full} bytes per rank"
        );
        if n == 1 {
            assert_eq!(got, full, "one rank holds it all");
        }
    }
    let md = std::fs::read_to_string(dir.join("out/bench.md")).unwrap();
    assert!(
        md.contains("| firemesh Sharded (ZeRO-1) | 2 |") && md.contains("| vs ZeRO-0 |"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_bench_input_is_one_line_and_a_failure() {
    let dir = scratch("bench-bad");
    for (args, says) in [
        (&["bench", "--ranks", "0"][..], "--ranks 0"),
        (&["bench", "--steps", "0"][..], "--steps"),
        (&["bench", "--repeats", "0"][..], "--repeats"),
        (&["bench", "--bucket-mib", "0"][..], "--bucket-mib"),
        (
            &["bench", "--zero", "0,2"][..],
            "--zero 2: ZeRO stages 0, 1 and 3",
        ),
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

/// A bench stopped part way (a lent machine's call running out of time) leaves the setups it
/// finished: the report is written after each. Killed once the f32 setup's report is there,
/// while the bf16 setup runs its 1,000 steps.
#[test]
fn a_bench_cut_short_leaves_the_setups_it_finished() {
    let dir = scratch("bench-cut");
    let args = "bench --runtimes cpu --models resnet-tiny --ranks 1 --batch-per-rank 2 \
                --image-size 8 --steps 1000 --warmup 0 --repeats 1 --precision f32,bf16 \
                --no-peers --out out";
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_firemesh"))
        .current_dir(&dir)
        .args(args.split_whitespace())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let json = dir.join("out/bench.json");
    let start = std::time::Instant::now();
    while !json.exists() {
        assert!(
            start.elapsed().as_secs() < 300,
            "no report after the first setup"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed before its second setup ended");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ours = rows(&json, "resnet-tiny", "firemesh");
    assert_eq!(ours.len(), 1, "{json}");
    assert_eq!(ours[0]["precision"], "f32");
    let md = std::fs::read_to_string(dir.join("out/bench.md")).unwrap();
    assert!(md.contains("| firemesh Sharded | 1 |"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}
