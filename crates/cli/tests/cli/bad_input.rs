//! Bad input to the CLI: each case is a one-line error naming the problem, a non-zero exit
//! code, and nothing written or changed on disk.

use crate::common::{cli, scratch, snapshot, write_cifar, write_image_folder};
use std::path::Path;

/// Runs `firemesh ARGS` in `cwd` and checks the failure; returns the error line.
fn fails(cwd: &Path, args: &[&str], names: &str) -> String {
    let before = snapshot(cwd);
    let out = cli(cwd, args);
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?}: one line, got:\n{stderr}"
    );
    assert!(stderr.starts_with("error"), "{args:?}: {stderr}");
    assert!(
        stderr.contains(names),
        "{args:?}: {stderr:?} does not say {names:?}"
    );
    assert!(
        snapshot(cwd) == before,
        "{args:?} changed files in {}",
        cwd.display()
    );
    stderr
}

#[test]
fn bad_options_and_sizes_are_named() {
    let cwd = scratch("bad-options");
    crate::common::write_text(&cwd.join("corpus.txt"), 10);
    let cases: &[(&[&str], &str)] = &[
        (
            &["train", "--lr", "nan", "--steps", "3"],
            "--lr NaN: the learning rate must be finite and positive",
        ),
        (&["train", "--lr=-0.1"], "must be finite and positive"),
        (&["train", "--lr", "inf"], "must be finite and positive"),
        (&["train", "--steps", "0"], "--steps must be at least 1"),
        (
            &["train", "--mesh", "cpu", "--steps", "1", "--engine", "nccl"],
            "the nccl engine cannot run this group's sums: NCCL runs the sums of CUDA groups only",
        ),
        (
            &["train", "--zero", "3", "--gather-ahead-mib=-1"],
            "--gather-ahead-mib -1",
        ),
        (&["train", "--epochs", "0"], "--epochs must be at least 1"),
        (
            &["train", "--samples", "5", "--batch", "32"],
            "--batch 32 is larger than the 5 training samples",
        ),
        (&["train", "--image-size", "100000"], "--image-size 100000"),
        (
            &[
                "train",
                "--mesh",
                "cpu",
                "--image-size",
                "4096",
                "--batch",
                "64",
            ],
            "more than available host memory",
        ),
        (
            &[
                "train",
                "--model",
                "gpt2-small",
                "--data",
                "text:corpus.txt",
                "--mesh",
                "cpu",
                "--ranks",
                "64",
                "--batch",
                "64",
            ],
            "more than available host memory",
        ),
        (
            &["train", "--model", "gpt-tiny", "--data", "text:absent.txt"],
            "cannot read absent.txt",
        ),
        (
            &["train", "--model", "resnet99"],
            "invalid value 'resnet99' for '--model",
        ),
        (
            &["train", "--data", "video:clips"],
            "unknown data source \"video:clips\"",
        ),
        (&["train", "--data", "cifar10"], "needs a path"),
        (&["train", "--model", "gpt-tiny"], "trains on text"),
        (
            &["train", "--model", "resnet18", "--data", "text:notes.txt"],
            "is text",
        ),
        (
            &["train", "--mesh", "cpu", "--ranks", "65"],
            "at most 64 ranks",
        ),
        (&["train", "--ranks", "0"], "--ranks must be at least 1"),
        (
            &["train", "--config", "missing.toml"],
            "cannot read missing.toml",
        ),
        (&["demo", "--ranks", "9999", "--mib", "1"], "ranks"),
        (&["demo", "--mesh", "cpu", "--mib", "0"], "--mib 0"),
        (
            &["train", "--mesh", "cpu", "--resume"],
            "no earlier run of resnet-tiny",
        ),
        (
            &["train", "--zero", "2"],
            "--zero 2: ZeRO stages 0, 1 and 3 exist here",
        ),
        (
            &["train", "--precision", "fp8"],
            "invalid value 'fp8' for '--precision",
        ),
        (
            &["train", "--precision", "f16", "--loss-scale", "0"],
            "the initial loss scale must be a finite positive number, got 0",
        ),
        (
            &["train", "--precision", "f16", "--loss-scale-interval", "0"],
            "growth interval must be at least 1 step",
        ),
    ];
    for (args, names) in cases {
        fails(&cwd, args, names);
    }
    // WGSL has no bf16: refused before the run folder exists, naming the rank and its device.
    // (Mesa's driver may warn on stderr first, about the environment: the error is the last
    // line.)
    if firemesh_collective::wgpu_devices::wgpu_adapter().is_ok() {
        // The same for the gradient sums' precision, named as its own setting.
        for setting in ["--precision", "--comm-precision"] {
            let before = snapshot(&cwd);
            let args = ["train", "--mesh", "wgpu", "--ranks", "1", setting, "bf16"];
            let out = cli(&cwd, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success());
            let last = stderr.trim_end().lines().last().unwrap_or("");
            let names = "rank 0's device (cubecl<wgpu<wgsl>>";
            assert!(
                last.starts_with(&format!("error: {setting} bf16: ")) && last.contains(names),
                "{stderr}"
            );
            assert!(
                last.ends_with("does not compute in bf16 (WGSL has no bf16 type)"),
                "{stderr}"
            );
            assert!(snapshot(&cwd) == before, "the refused run wrote files");
        }
    }
    if firemesh_collective::probe::usable_cuda_devices().is_err() {
        fails(&cwd, &["train", "--mesh", "cuda"], "cannot be used");
    }
    std::fs::remove_dir_all(&cwd).unwrap();
}

#[test]
fn unusable_data_is_named() {
    let cwd = scratch("bad-data");
    let missing = fails(
        &cwd,
        &["train", "--data", "cifar10:nowhere"],
        "nowhere is not a folder",
    );
    assert!(missing.contains("does not exist"), "{missing}");

    write_cifar(&cwd.join("cifar"), 4);
    std::fs::write(cwd.join("cifar/data_batch_3.bin"), [0u8; 100]).unwrap();
    fails(
        &cwd,
        &["train", "--data", "cifar10:cifar"],
        "data_batch_3.bin: 100 bytes",
    );

    std::fs::write(cwd.join("empty.txt"), "").unwrap();
    fails(
        &cwd,
        &["train", "--model", "gpt-tiny", "--data", "text:empty.txt"],
        "empty.txt is empty",
    );
    std::fs::write(cwd.join("short.txt"), "too short").unwrap();
    fails(
        &cwd,
        &["train", "--model", "gpt-tiny", "--data", "text:short.txt"],
        "too few",
    );

    std::fs::create_dir_all(cwd.join("flat")).unwrap();
    write_image_folder(&cwd.join("classes"), 2);
    std::fs::rename(cwd.join("classes/red/0.png"), cwd.join("flat/0.png")).unwrap();
    fails(
        &cwd,
        &["train", "--data", "images:flat"],
        "no class sub-folders",
    );
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// An image that cannot be decoded is found when its batch is built: the run stops with an
/// error naming the file, and leaves the other files alone.
#[test]
fn an_undecodable_image_stops_the_run_naming_it() {
    let cwd = scratch("bad-image");
    write_image_folder(&cwd.join("classes"), 2);
    std::fs::write(cwd.join("classes/red/1.png"), b"not a png").unwrap();
    let before = snapshot(&cwd.join("classes"));
    let args = [
        "train",
        "--data",
        "images:classes",
        "--mesh",
        "cpu",
        "--ranks",
        "1",
        "--batch",
        "3",
        "--image-size",
        "8",
        "--steps",
        "2",
    ];
    let out = cli(&cwd, &args);
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("classes/red/1.png"), "{stderr}");
    assert!(snapshot(&cwd.join("classes")) == before);
    std::fs::remove_dir_all(&cwd).unwrap();
}
