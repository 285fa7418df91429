//! Helpers: tiny training options, scratch folders, the CLI binary, data files.

use firemesh::mesh::MeshKind;
use firemesh_cli::options::MeshOptions;
use firemesh_cli::train::{ModelName, TrainConfig, TrainOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh scratch folder (removed first if a previous run left it).
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("firemesh-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// resnet-tiny on 128 synthetic 8×8 images, batches of 16 over a 2-rank CPU mesh.
pub fn tiny(run_dir: &Path) -> TrainOptions {
    TrainOptions {
        model: Some(ModelName::ResnetTiny),
        devices: MeshOptions {
            mesh: Some(MeshKind::Cpu),
            ranks: Some(2),
            share_devices: false,
        },
        samples: Some(128),
        eval_samples: Some(32),
        batch: Some(16),
        image_size: Some(8),
        run_dir: Some(run_dir.to_path_buf()),
        ..TrainOptions::default()
    }
}

/// `options` on `ranks` ranks of their mesh.
pub fn on_ranks(ranks: usize, mut options: TrainOptions) -> TrainOptions {
    options.devices.ranks = Some(ranks);
    options
}

pub fn config(options: TrainOptions) -> TrainConfig {
    TrainConfig::resolve(options).unwrap()
}

/// Runs `firemesh ARGS` in `cwd`, as one process (whatever launcher runs the tests).
pub fn cli(cwd: &Path, args: &[&str]) -> Output {
    cli_launched(cwd, args, &[])
}

/// The variables of the launchers `firemesh train` recognises (`firemesh_cli::world`).
const LAUNCHER_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "SLURM_PROCID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "LOCAL_WORLD_SIZE",
];

/// Runs `firemesh ARGS` in `cwd` as a launcher would start it: with `vars` and none of the
/// test runner's own launcher variables.
pub fn cli_launched(cwd: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_firemesh"));
    for var in LAUNCHER_VARS {
        command.env_remove(var);
    }
    command
        .envs(vars.iter().copied())
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("the CLI starts")
}

/// A text of `repeats` copies of a sentence.
pub fn write_text(path: &Path, repeats: usize) {
    std::fs::write(
        path,
        "the quick brown fox jumps over the lazy dog. ".repeat(repeats),
    )
    .unwrap();
}

/// A CIFAR-10 folder in the binary format with `per_file` records per file; the label of
/// record i is i % 10 and its pixels say so (so that a model can learn it).
pub fn write_cifar(dir: &Path, per_file: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let records = |offset: usize| -> Vec<u8> {
        (0..per_file)
            .flat_map(|i| {
                let label = ((i + offset) % 10) as u8;
                let mut r = vec![label];
                r.extend((0..3072).map(|p| (label as usize * 25 + p % 7) as u8));
                r
            })
            .collect()
    };
    for f in 1..=5 {
        std::fs::write(dir.join(format!("data_batch_{f}.bin")), records(f)).unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), records(0)).unwrap();
}

/// An image folder: `per_class` PNGs in each of two classes (reddish and bluish).
pub fn write_image_folder(dir: &Path, per_class: usize) {
    for (class, rgb) in [("blue", [20u8, 30, 220]), ("red", [220u8, 30, 20])] {
        std::fs::create_dir_all(dir.join(class)).unwrap();
        for i in 0..per_class {
            let shade = [rgb[0], rgb[1].wrapping_add(i as u8 * 5), rgb[2]];
            image::RgbImage::from_pixel(6 + i as u32, 5, image::Rgb(shade))
                .save(dir.join(class).join(format!("{i}.png")))
                .unwrap();
        }
    }
}

/// Every file under `dir` with its contents, for "nothing changed" checks.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    files.sort();
    files
}

/// Step records in the run's metrics so far.
pub fn steps_logged(run_dir: &Path) -> usize {
    std::fs::read_to_string(run_dir.join("metrics.jsonl"))
        .map(|t| {
            t.lines()
                .filter(|l| l.contains("\"kind\":\"step\""))
                .count()
        })
        .unwrap_or(0)
}

/// A small deterministic generator for the kill moments (seeded from the clock, printed).
pub struct Moments(pub u64);
impl Moments {
    pub fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound.max(1)
    }
}

/// Whether two wgpu clients can be made here; where not, says why (`SKIPPED: ...`), or fails
/// where `FIREMESH_REQUIRE_WGPU=1` (CI, which installs Mesa's software Vulkan).
pub fn wgpu_here() -> bool {
    let Err(reason) = firemesh_collective::wgpu_devices::wgpu_devices(2) else {
        return true;
    };
    let required = std::env::var("FIREMESH_REQUIRE_WGPU").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "FIREMESH_REQUIRE_WGPU=1 but no wgpu adapter: {reason}"
    );
    eprintln!("SKIPPED: no wgpu adapter ({reason})");
    false
}
