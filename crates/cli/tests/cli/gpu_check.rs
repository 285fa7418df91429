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
    let found = [
        (
            "firemesh",
            Some(PathBuf::from(env!("CARGO_BIN_EXE_firemesh"))),
        ),
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

#[test]
fn both_phases_run_within_their_budget_and_leave_few_files_in_out() {
    let dir = std::env::temp_dir().join(format!("firemesh-gpu-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Some(bin) = binaries(&dir) else { return };
    let out = dir.join("out");
    for (phase, names) in [
        (
            "correct",
            &[
                "collectives, synchronous copies",
                "collectives, one GPU as two",
                "stream-ordered, one hardware queue",
                "NCCL link: join, gather, a side channel, a lost peer",
                "memcheck of the collectives",
                "streams: Burn ops and collectives from many threads",
                "train on 2 ranks, rank threads",
                "1 vs 2 ranks, in turn vs rank threads",
            ][..],
        ),
        (
            "speed",
            &[
                "all-reduce: ours, the copy bound",
                "bench: ResNet-50 at batch 256, one rank, f32 and bf16",
                "PyTorch: ResNet-50 and GPT-2 small, FP32/TF32/AMP",
                "burn-train DDP (the peer)",
            ][..],
        ),
    ] {
        let (ok, summary) = rehearse(phase, &bin, &out, None);
        let log = std::fs::read_to_string(out.join(format!("{phase}.log"))).unwrap_or_default();
        assert!(ok, "{phase} failed:\n{summary}\n{log}");
        assert!(
            summary.starts_with(&format!("# gpu-check: {phase} (wgpu)")),
            "{summary}"
        );
        assert!(
            summary.contains("All steps passed; the steps' limits add up to"),
            "{summary}"
        );
        let rows = steps(&summary);
        for name in names {
            assert!(
                rows.iter().any(|(s, _)| s == name),
                "{phase}: no step {name:?}:\n{summary}"
            );
        }
        assert!(
            rows.iter()
                .all(|(_, v)| v == "passed" || v.starts_with("not on wgpu")),
            "{summary}"
        );
    }
    let files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for want in [
        "summary-correct.md",
        "correct.log",
        "summary-speed.md",
        "speed.log",
        "bench.md",
        "results.tar.gz",
    ] {
        assert!(files.iter().any(|f| f == want), "no {want} in {files:?}");
    }
    assert!(
        files.len() <= 8,
        "at most 8 files come back from the lent machine: {files:?}"
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
