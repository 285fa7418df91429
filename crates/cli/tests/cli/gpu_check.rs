//! `scripts/gpu-check.sh` rehearsed on this machine (wgpu over lavapipe standing in for CUDA),
//! so that the harness the lent GPU machine runs cannot rot: both phases, their time accounting
//! and what they leave in `$OUT`, with the test binaries this `cargo test` built.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The newest test binary `name-<hash>` beside this one, if `cargo test` built it.
fn sibling_test_binary(name: &str) -> Option<PathBuf> {
    let deps = std::env::current_exe().ok()?.parent()?.to_path_buf();
    std::fs::read_dir(deps)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let file = p.file_name().and_then(|f| f.to_str()).unwrap_or("");
            let hash = file
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('-'));
            hash.is_some_and(|h| h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
}

/// A folder of the binaries the script runs, as links to what `cargo test` built; `None` (said
/// why) where a test binary or the wgpu adapter is missing. CI (`FIREMESH_REQUIRE_WGPU=1`, where
/// `cargo test --workspace` builds every test binary first) fails instead.
fn binaries(dir: &Path) -> Option<PathBuf> {
    let required = std::env::var("FIREMESH_REQUIRE_WGPU").is_ok_and(|v| v == "1");
    let skip = |why: String| {
        assert!(!required, "FIREMESH_REQUIRE_WGPU=1 but {why}");
        eprintln!("SKIPPED: {why}");
        None
    };
    if !crate::common::wgpu_here() {
        return None;
    }
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // The CLI stands in for both of the bundle's (with and without CubeCL's autotune).
    let cli = Some(PathBuf::from(env!("CARGO_BIN_EXE_firemesh")));
    let found = [
        ("firemesh", cli.clone()),
        ("firemesh-fixed", cli),
        ("collectives", sibling_test_binary("collective")),
        ("backend", sibling_test_binary("backend")),
    ];
    for (name, path) in found {
        let Some(path) = path else {
            return skip(format!(
                "no {name} test binary beside this one (cargo test --workspace builds it)"
            ));
        };
        std::os::unix::fs::symlink(path, bin.join(name)).unwrap();
    }
    Some(bin)
}

fn rehearse(phase: &str, bin: &Path, out: &Path, budget: Option<&str>) -> (bool, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("scripts/gpu-check.sh"))
        .args(["rehearse", phase])
        .env("GPU_CHECK_QUICK", "1")
        .env("GPU_CHECK_BIN", bin)
        .env("OUT", out);
    if let Some(seconds) = budget {
        cmd.env("PHASE_SECONDS", seconds);
    }
    let run = cmd.output().expect("bash runs the script");
    let summary =
        std::fs::read_to_string(out.join(format!("summary-{phase}.md"))).unwrap_or_else(|e| {
            panic!(
                "{phase}: no summary ({e}); {}",
                String::from_utf8_lossy(&run.stderr)
            )
        });
    (run.status.success(), summary)
}

/// The rows of a summary's step table: (step, verdict).
fn steps(summary: &str) -> Vec<(String, String)> {
    summary
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| step"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].to_string(), cells[1].to_string())
        })
        .collect()
}

/// The steps of each phase, in order: the same on CUDA and in the rehearsal.
const CORRECT: &[&str] = &[
    "collectives, synchronous copies",
    "collectives, stream-ordered copies",
    "collectives, one GPU as two",
    "stream-ordered, one hardware queue",
    "memcheck of the collectives",
    "streams: Burn ops and collectives from many threads",
    "autocast convolutions add in f32",
    "train on 1 rank",
    "train on 2 ranks, in turn",
    "train on 2 ranks, rank threads",
    "train on 1 rank in f16",
    "1 vs 2 ranks, in turn vs rank threads",
    "f16 against f32: losses within the precision bounds",
    "NCCL link: join, gather, a side channel",
    "NCCL: a join whose peer never comes fails (its own process, last)",
];
const SPEED: &[&str] = &[
    "all-reduce: ours, NCCL, the copy bound",
    "bench: ResNet-50 at batch 256, one rank, autotuned",
    "bench: the same, fixed kernels",
    "bench: ResNet-50 and GPT-2 small on 1 and 2 ranks",
    "PyTorch: ResNet-50 and GPT-2 small, FP32/TF32/AMP",
    "firemesh against PyTorch",
    "burn-train DDP (the peer)",
];

/// Both phases, rehearsed: every step in order, passed or without a wgpu counterpart, within
/// the GPU run's budgets (270 s and 360 s, the limits of the steps adding up to at most that
/// less the 20 s kept for what no step counts);
/// each phase's tables and archive under `$OUT`, at most 8 files in all; the bf16 (here f16)
/// run compared with f32 within the precision bounds.
#[test]
fn both_phases_run_within_their_budget_and_leave_few_files_in_out() {
    let dir = std::env::temp_dir().join(format!("firemesh-gpu-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Some(bin) = binaries(&dir) else { return };
    let out = dir.join("out");
    for (phase, names, budget) in [("correct", CORRECT, 270), ("speed", SPEED, 360)] {
        let (ok, summary) = rehearse(phase, &bin, &out, None);
        let log = std::fs::read_to_string(out.join(format!("{phase}.log"))).unwrap_or_default();
        assert!(ok, "{phase} failed:\n{summary}\n{log}");
        assert!(
            summary.starts_with(&format!("# gpu-check: {phase} (wgpu)")),
            "{summary}"
        );
        assert!(
            summary.contains(&format!("phase budget: {budget} s")),
            "{summary}"
        );
        let rows = steps(&summary);
        let found: Vec<&str> = rows.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(found, names, "{phase}: the steps, in order");
        assert!(
            rows.iter()
                .all(|(_, v)| v == "passed" || v.starts_with("not on wgpu")),
            "{summary}"
        );
        let limits: u64 = summary
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| step"))
            .filter_map(|l| {
                let cell = l.trim_matches('|').split('|').nth(2)?;
                let limit = cell.split('(').nth(1)?.trim_end_matches([')', ' ']);
                limit.parse::<u64>().ok()
            })
            .sum();
        assert!(limits + 20 <= budget, "{phase}: limits add up to {limits}");
        assert!(
            summary.contains(&format!(
                "All steps passed; the steps' limits add up to {limits} of the phase's {budget} s \
                 (20 kept for the rest)."
            )),
            "{summary}"
        );
    }
    let tables = std::fs::read_to_string(out.join("tables-correct.md")).unwrap();
    assert!(
        tables.contains("## Losses against run-1's") && tables.contains("| run-1-f16 | 4 |"),
        "{tables}"
    );
    let tables = std::fs::read_to_string(out.join("tables-speed.md")).unwrap();
    for table in [
        "# resnet-tiny at batch 4, f32 and f16, one rank, the autotuned binary",
        "# resnet-tiny at batch 4, f32 and f16, one rank, the fixed-kernel binary",
        "## gpt-tiny on Wgpu",
    ] {
        assert!(tables.contains(table), "{table} not in {tables}");
    }
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "correct.log",
            "results-correct.tar.gz",
            "results-speed.tar.gz",
            "speed.log",
            "summary-correct.md",
            "summary-speed.md",
            "tables-correct.md",
            "tables-speed.md",
        ],
        "at most 8 files come back from the lent machine"
    );

    // Limits that cannot fit the budget are refused before anything runs.
    let tight = dir.join("tight");
    let (ok, summary) = rehearse("correct", &bin, &tight, Some("10"));
    assert!(!ok, "a phase over its budget must fail:\n{summary}");
    assert!(summary.contains("over the phase's budget"), "{summary}");
    assert!(
        !summary.contains("| passed |"),
        "no step ran past the budget:\n{summary}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A phase stopped part way (its call out of time) has left under `$OUT` the summary rows and
/// the tables of the steps that finished: killed once the first bench's table is there.
#[test]
fn a_phase_cut_short_leaves_what_its_finished_steps_measured() {
    use std::os::unix::process::CommandExt;
    let dir = std::env::temp_dir().join(format!("firemesh-gpu-cut-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Some(bin) = binaries(&dir) else { return };
    let out = dir.join("out");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut child = Command::new("bash")
        .arg(root.join("scripts/gpu-check.sh"))
        .args(["rehearse", "speed"])
        .env("GPU_CHECK_QUICK", "1")
        .env("GPU_CHECK_BIN", &bin)
        .env("OUT", &out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let tables = out.join("tables-speed.md");
    let start = std::time::Instant::now();
    let finished = "# resnet-tiny at batch 4, f32 and f16, one rank, the autotuned binary";
    while !std::fs::read_to_string(&tables).is_ok_and(|t| t.contains(finished)) {
        if let Some(status) = child.try_wait().unwrap() {
            let summary = std::fs::read_to_string(out.join("summary-speed.md"));
            panic!("the phase ended ({status}) before its first bench: {summary:?}");
        }
        assert!(
            start.elapsed().as_secs() < 300,
            "the first bench never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The whole group: the script and the step it runs.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    let summary = std::fs::read_to_string(out.join("summary-speed.md")).unwrap();
    assert!(
        summary.contains("| bench: ResNet-50 at batch 256, one rank, autotuned | passed |"),
        "{summary}"
    );
    let tables = std::fs::read_to_string(&tables).unwrap();
    assert!(tables.contains("| firemesh Sharded | 1 |"), "{tables}");
    assert!(out.join("results-speed.tar.gz").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
