//! The inner backends are cargo features: a program that wants only the CPU mesh (the
//! default features) builds no CUDA or wgpu crate.

use std::process::Command;

/// The crates `firemesh` builds with `features` (its normal dependencies, not its tests').
fn dependencies(features: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "tree",
        "--locked",
        "-p",
        "firemesh",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
        "--no-default-features",
    ]);
    if !features.is_empty() {
        command.args(["--features", &features.join(",")]);
    }
    let out = command.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(String::from))
        .collect()
}

fn gpu_crates(crates: &[String]) -> Vec<&String> {
    let gpu = [
        "cudarc",
        "burn-cuda",
        "cubecl-cuda",
        "wgpu",
        "burn-wgpu",
        "cubecl-wgpu",
    ];
    crates
        .iter()
        .filter(|c| gpu.contains(&c.as_str()))
        .collect()
}

#[test]
fn a_cpu_only_program_builds_no_cuda_or_wgpu_crate() {
    let cpu = dependencies(&["cpu"]);
    assert!(cpu.iter().any(|c| c == "burn-flex"), "{cpu:?}");
    assert_eq!(gpu_crates(&cpu), Vec::<&String>::new());
    // The features do bring them in: the check above can see them.
    let all = dependencies(&["cpu", "wgpu", "cuda"]);
    for wanted in ["cudarc", "burn-cuda", "wgpu", "burn-wgpu"] {
        assert!(all.iter().any(|c| c == wanted), "{wanted} missing: {all:?}");
    }
}
