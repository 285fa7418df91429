//! Checkpoints survive preemption: the CLI is killed (SIGKILL) at random moments, some of them
//! inside a checkpoint write, and resumed each time; the final parameters equal those of an
//! uninterrupted run bit for bit. Damaged checkpoints are skipped, checkpoints of another
//! model are refused, and a diverging loss stops the run keeping the last good checkpoint.

use crate::common::{cli, scratch, snapshot, steps_logged, Moments};
use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const STEPS: usize = 60;

/// `firemesh train` on 2 CPU ranks, 8×8 synthetic images in batches of 8, into `run_dir`;
/// then `extra`.
fn train_args(run_dir: &Path, extra: &str) -> Vec<String> {
    sized_args("--image-size 8 --batch 8", run_dir, extra)
}

/// `firemesh train` on 2 CPU ranks of synthetic images of `sizes`, into `run_dir`; then `extra`.
fn sized_args(sizes: &str, run_dir: &Path, extra: &str) -> Vec<String> {
    format!("train --mesh cpu --ranks 2 {sizes} --run-dir")
        .split_whitespace()
        .map(String::from)
        .chain([run_dir.display().to_string()])
        .chain(extra.split_whitespace().map(String::from))
        .collect()
}

fn args(run_dir: &Path) -> Vec<String> {
    let extra = format!(
        "--samples 96 --eval-samples 16 --checkpoint-every 3 --keep-checkpoints 2 --steps {STEPS} --seed 5"
    );
    train_args(run_dir, &extra)
}

/// The digest of the final parameters (summary.json), once the final checkpoint exists.
fn final_params(run_dir: &Path) -> String {
    assert!(run_dir
        .join(format!("checkpoints/step-{STEPS:08}.ckpt"))
        .exists());
    let summary = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    summary["params_digest"].as_str().unwrap().to_string()
}

/// Temporary checkpoint files written since `since` (a leftover of an earlier kill is older).
fn fresh_temp_files(run_dir: &Path, since: std::time::SystemTime) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(run_dir.join("checkpoints")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= since)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The step of the newest complete checkpoint.
fn checkpointed(run_dir: &Path) -> usize {
    std::fs::read_dir(run_dir.join("checkpoints"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_prefix("step-")?
                        .strip_suffix(".ckpt")?
                        .parse()
                        .ok()
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

const KILLS: usize = 12;

/// A checkpoint write caught in the middle, with no help from the program: the temporary file
/// that a checkpoint will be written to is made a FIFO whose pipe holds one page, and its reader
/// takes `keep` bytes and then stops, so that the writer blocks inside its `write`. The caller
/// kills the writer then, and [`CaughtWrite::leave_partial_file`] puts in the FIFO's place a
/// regular file of the bytes that reached it: what a kill in the middle of a write leaves on
/// disk.
struct CaughtWrite {
    path: PathBuf,
    reader: File,
    got: Vec<u8>,
    keep: usize,
    /// The bytes waiting in the pipe at the last look, and since when.
    queued: Option<(libc::c_int, Instant)>,
}

impl CaughtWrite {
    /// The trap for the write of checkpoint `step` of `run_dir`, taking a quarter of the size
    /// of its newest checkpoint; `None` where that write has begun already.
    fn arm(run_dir: &Path, step: usize) -> Option<Self> {
        let checkpoints = run_dir.join("checkpoints");
        let size = std::fs::read_dir(&checkpoints)
            .ok()?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".ckpt"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len() as usize)
            .max()?;
        let path = checkpoints.join(format!(".step-{step:08}.ckpt.tmp"));
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        if unsafe { libc::mkfifo(name.as_ptr(), 0o600) } != 0 {
            return None; // the program made the file first
        }
        let keep = size / 4;
        // Opened first, without blocking: the writer's open then returns at once.
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .unwrap();
        unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
        Some(Self {
            path,
            reader,
            got: Vec::new(),
            keep,
            queued: None,
        })
    }

    /// Takes what the writer sent, up to `keep` bytes; true once the writer is blocked: `keep`
    /// bytes taken and the pipe full behind them.
    fn writer_blocked(&mut self) -> bool {
        let mut buf = [0u8; 4096];
        while self.got.len() < self.keep {
            let want = buf.len().min(self.keep - self.got.len());
            match self.reader.read(&mut buf[..want]) {
                Ok(0) | Err(_) => break, // no writer yet, or nothing new
                Ok(n) => self.got.extend_from_slice(&buf[..n]),
            }
        }
        if self.got.len() < self.keep {
            return false;
        }
        // The writer writes all its bytes with one call: once the bytes waiting in the pipe
        // stop growing, it is blocked inside that call.
        let mut queued: libc::c_int = 0;
        unsafe { libc::ioctl(self.reader.as_raw_fd(), libc::FIONREAD, &mut queued) };
        let now = Instant::now();
        match self.queued {
            Some((before, since)) if before == queued => {
                queued > 0 && now - since >= Duration::from_millis(20)
            }
            _ => {
                self.queued = Some((queued, now));
                false
            }
        }
    }

    fn leave_partial_file(self) {
        drop(self.reader);
        std::fs::remove_file(&self.path).unwrap();
        std::fs::write(&self.path, &self.got).unwrap();
    }
}

#[test]
fn killed_at_random_moments_and_resumed_it_ends_bit_identical() {
    let dir = scratch("kills");
    let reference = dir.join("reference");
    let started = Instant::now();
    let out = cli(
        &dir,
        &args(&reference)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let per_step = started.elapsed() / STEPS as u32; // an over-estimate: it includes the start
    let want = final_params(&reference);

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!(
        "kill moments seed {seed}; an uninterrupted run takes {:?}",
        per_step * STEPS as u32
    );
    let mut moments = Moments(seed);
    let run = dir.join("killed");
    let (mut kills, mut in_write, mut starts) = (0, 0, 0);
    let mut reached = Vec::new(); // the newest checkpoint after each start
    while !run.join("summary.json").exists() {
        starts += 1;
        assert!(starts < 100, "the run never finished");
        let mut a = args(&run);
        if run.exists() {
            a.push("--resume".into());
        }
        // Every second start is killed inside the second checkpoint write it makes (the first
        // completes, so that the run moves on), a quarter of the way into it. The trap is set
        // once the first is on disk (a start clears leftover temporary files when it resumes).
        let catch = kills < KILLS && starts % 2 == 0 && run.exists();
        let resumed_at = checkpointed(&run);
        let mut caught: Option<CaughtWrite> = None;
        let mut command = Command::new(env!("CARGO_BIN_EXE_firemesh"));
        command
            .args(&a)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let spawned = std::time::SystemTime::now();
        let mut child = command.spawn().unwrap();
        // Other starts die at a random moment before they could finish, and at the latest
        // once they have written two checkpoints: a start moves the run on by at most 6 steps,
        // so that 12 kills fit in the run however the moments fall (a start that could finish
        // would end the test with too few kills).
        let left = (STEPS - checkpointed(&run)) as u32;
        let budget = (per_step * left * 2 / 5).as_millis() as u64;
        let deadline = Instant::now() + Duration::from_millis(moments.next(budget));
        let mut killed = false;
        while kills < KILLS && child.try_wait().unwrap().is_none() {
            let newest = checkpointed(&run);
            if catch && caught.is_none() && newest > resumed_at && newest + 3 <= STEPS {
                caught = CaughtWrite::arm(&run, newest + 3);
            }
            let blocked = caught.as_mut().is_some_and(CaughtWrite::writer_blocked);
            assert!(
                Instant::now() < deadline + Duration::from_secs(120),
                "start {starts} neither ended nor was killed"
            );
            let moved_on = newest >= resumed_at + 6;
            if blocked || (!catch && (Instant::now() >= deadline || moved_on)) {
                let writing = blocked || !fresh_temp_files(&run, spawned).is_empty();
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                in_write += usize::from(writing);
                killed = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        if !killed {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "start {starts}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if let Some(caught) = caught.take() {
            caught.leave_partial_file();
        }
        reached.push(checkpointed(&run));
    }
    println!(
        "{kills} kills ({in_write} inside a checkpoint write), {starts} starts; \
         checkpoints after each: {reached:?}"
    );
    assert!(
        kills >= 10 && in_write >= 3,
        "{kills} kills, {in_write} inside a write"
    );
    assert_eq!(
        final_params(&run),
        want,
        "the resumed run's final parameters differ"
    );
    // The metrics hold each step once.
    let steps: Vec<usize> = std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<firemesh_cli::train::Record>(l).ok())
        .filter(|r| matches!(r, firemesh_cli::train::Record::Step { .. }))
        .map(|r| r.step())
        .collect();
    assert_eq!(steps, (1..=STEPS).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn checkpoints(run_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(run_dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn damaged_and_foreign_checkpoints_and_a_diverging_loss() {
    let dir = scratch("damaged");
    let run = dir.join("run");
    let base = |steps: &str| -> Vec<String> {
        let extra = format!("--samples 64 --eval-samples 8 --checkpoint-every 2 --steps {steps}");
        train_args(&run, &extra)
    };
    let go = |a: &[String]| cli(&dir, &a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(go(&base("4")).status.success());
    let summary = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
    };
    let losses = |s: &serde_json::Value| (s["first_loss"].as_f64(), s["last_loss"].as_f64());
    let finished = losses(&summary());
    assert!(finished.0.is_some() && finished.1.is_some(), "{finished:?}");

    // Resuming a finished run says so and keeps the run's losses (they are not NaN).
    let mut again = base("4");
    again.push("--resume".into());
    let out = go(&again);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("is already complete: 4 steps"), "{stdout}");
    assert!(!stdout.contains("NaN"), "{stdout}");
    assert_eq!(losses(&summary()), finished);
    let files = checkpoints(&run);
    assert_eq!(files.len(), 2, "{files:?}");

    // The same folder again without --resume: refused, nothing touched.
    let before = snapshot(&run);
    let out = go(&base("4"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already holds a run"));
    assert!(snapshot(&run) == before);

    // Another model's checkpoint: refused, nothing touched.
    let mut other = base("6");
    other.extend(["--resume".into(), "--model".into(), "resnet18".into()]);
    let out = go(&other);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("is a checkpoint of resnet-tiny"),
        "{stderr}"
    );
    assert!(snapshot(&run) == before);

    // The newest checkpoint damaged: skipped with a warning; training resumes from step 2.
    let mut bytes = std::fs::read(&files[1]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xFF;
    std::fs::write(&files[1], bytes).unwrap();
    let mut resume = base("6");
    resume.push("--resume".into());
    let out = go(&resume);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("skipping damaged checkpoint") && stderr.contains("step-00000004.ckpt"),
        "{stderr}"
    );
    assert!(stdout.contains("step 2 of 6"), "{stdout}");

    // Every checkpoint damaged: an error.
    for f in checkpoints(&run) {
        std::fs::write(&f, b"FIREMESH-CKPT\0v1 cut short").unwrap();
    }
    let out = go(&resume);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no readable checkpoint"));

    // A loss that becomes NaN or infinite stops the run naming the step; the last checkpoint
    // written before it stays.
    let diverge = dir.join("diverge");
    let a = train_args(
        &diverge,
        "--samples 64 --eval-samples 8 --checkpoint-every 1 --steps 8 --lr 1e30",
    );
    let out = go(&a);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("the loss became") && stderr.contains("at step"),
        "{stderr}"
    );
    let kept = checkpoints(&diverge);
    assert!(
        !kept.is_empty() && stderr.contains(&kept.last().unwrap().display().to_string()),
        "{stderr} {kept:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run resumed on another rank count continues with the same global batch.
#[test]
fn resuming_on_another_rank_count_keeps_the_global_batch() {
    let dir = scratch("reshape");
    let run = dir.join("run");
    let go = |a: Vec<String>| cli(&dir, &strs(&a));
    let first = go(train_args(
        &run,
        "--samples 64 --checkpoint-every 2 --steps 4",
    ));
    assert!(first.status.success());
    let mut more = train_args(&run, "--samples 64 --checkpoint-every 2 --steps 8 --resume");
    let ranks = more.iter().position(|a| a == "--ranks").unwrap();
    more[ranks + 1] = "3".into();
    let out = go(more);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("written on 2 ranks; continuing on 3 with the same global batch of 8"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        (summary["steps"].as_u64(), summary["ranks"].as_u64()),
        (Some(8), Some(3))
    );
    assert_eq!(summary["batch"].as_u64(), Some(8));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// ZeRO-1 with AdamW: a run stopped at a checkpoint and resumed ends bit for bit where an
/// uninterrupted one ends (the checkpoint holds the whole state, gathered); resumed on 3 ranks
/// instead of 2, the state is sliced again, a third per rank.
#[test]
fn a_zero1_run_resumes_bit_identical_and_onto_another_rank_count() {
    let dir = scratch("zero");
    let go = |run: &Path, extra: &str| {
        let options = format!(
            "--samples 64 --checkpoint-every 3 --optimizer adamw --schedule constant \
             --warmup-steps 0 --zero 1 {extra}"
        );
        let out = cli(&dir, &strs(&train_args(run, &options)));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(run.join("summary.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let whole = go(&dir.join("whole"), "--steps 6");
    let (resumed, other) = (dir.join("resumed"), dir.join("other"));
    go(&resumed, "--steps 3");
    std::fs::create_dir_all(&other).unwrap();
    for entry in ["checkpoints", "metrics.jsonl"] {
        let copy = Command::new("cp")
            .arg("-r")
            .arg(resumed.join(entry))
            .arg(&other)
            .status();
        assert!(copy.unwrap().success());
    }
    let same = go(&resumed, "--steps 6 --resume");
    assert_eq!(same["params_digest"], whole["params_digest"]);
    assert_eq!(same["zero"], 1);
    let state = |s: &serde_json::Value| -> Vec<u64> {
        let per_rank = s["optimizer_state_bytes_per_rank"].as_array().unwrap();
        per_rank.iter().map(|b| b.as_u64().unwrap()).collect()
    };
    let two = state(&same);
    assert_eq!(two.len(), 2);
    let mut three_ranks = train_args(&other, "");
    let ranks = three_ranks.iter().position(|a| a == "--ranks").unwrap();
    three_ranks[ranks + 1] = "3".into();
    three_ranks.extend(
        "--samples 64 --checkpoint-every 3 --optimizer adamw --schedule constant --warmup-steps 0 \
         --zero 1 --steps 6 --resume"
            .split_whitespace()
            .map(String::from),
    );
    let out = cli(&dir, &strs(&three_ranks));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let three: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(other.join("summary.json")).unwrap())
            .unwrap();
    let three = state(&three);
    let total: u64 = two.iter().sum();
    // The process held both ranks' state at once: its peak resident memory is above that.
    let peak = same["peak_host_bytes"].as_u64().expect("VmHWM (Linux)");
    assert!(peak > total, "{peak} bytes at peak, {total} of state");
    assert_eq!(three.len(), 3);
    assert_eq!(
        three.iter().sum::<u64>(),
        total,
        "{three:?} against {two:?}"
    );
    assert!(
        three.iter().all(|&b| b < total / 2),
        "{three:?}: sliced again"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// ZeRO-3 and ZeRO-0 checkpoints are interchangeable (parameters and state are saved whole):
/// a run saved under one stage and resumed under the other ends bit for bit where an
/// uninterrupted ZeRO-0 run ends, both ways; resumed on 3 ranks, a ZeRO-3 run stores a third of
/// the parameters per rank again.
#[test]
fn zero3_and_zero0_checkpoints_resume_each_other_bit_identical() {
    let dir = scratch("zero3");
    let options = "--samples 64 --checkpoint-every 3 --optimizer adamw --schedule constant \
                   --warmup-steps 0";
    let go = |run: &Path, extra: &str| {
        let out = cli(&dir, &strs(&train_args(run, &format!("{options} {extra}"))));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let text = std::fs::read_to_string(run.join("summary.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let whole = go(&dir.join("whole"), "--steps 6 --zero 0");
    for (first, then) in [(0, 3), (3, 0)] {
        let run = dir.join(format!("from{first}"));
        go(&run, &format!("--steps 3 --zero {first}"));
        let resumed = go(&run, &format!("--steps 6 --zero {then} --resume"));
        assert_eq!(resumed["zero"], then);
        assert_eq!(
            resumed["params_digest"], whole["params_digest"],
            "saved under ZeRO-{first}, resumed under ZeRO-{then}"
        );
    }
    let wider = dir.join("wider");
    go(&wider, "--steps 3 --zero 0");
    let mut three_ranks = train_args(&wider, &format!("{options} --steps 6 --zero 3 --resume"));
    let ranks = three_ranks.iter().position(|a| a == "--ranks").unwrap();
    three_ranks[ranks + 1] = "3".into();
    let out = cli(&dir, &strs(&three_ranks));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(wider.join("summary.json")).unwrap();
    let three: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (three["zero"].as_u64(), three["ranks"].as_u64()),
        (Some(3), Some(3))
    );
    let gathers = |s: &serde_json::Value| s["parameter_gathers_per_step"].as_u64().unwrap();
    assert!(gathers(&three) > 0, "{three}");
    assert_eq!(gathers(&whole), 0, "{whole}");
    let loss = |s: &serde_json::Value| s["last_loss"].as_f64().unwrap();
    assert!(
        (loss(&three) - loss(&whole)).abs() < 1e-4,
        "{three} against {whole}"
    );
    let bytes = |s: &serde_json::Value| -> Vec<u64> {
        let per_rank = s["parameter_bytes_per_rank"].as_array().unwrap();
        per_rank.iter().map(|b| b.as_u64().unwrap()).collect()
    };
    let (all, thirds) = (bytes(&whole), bytes(&three));
    assert!(all.len() == 2 && all[0] == all[1], "{all:?}");
    assert_eq!(thirds.len(), 3);
    for b in &thirds {
        assert!(*b <= all[0] / 3 + all[0] / 10, "{thirds:?} against {all:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Spawns `firemesh ARGS` in `cwd`, its output piped.
fn spawn(cwd: &Path, args: &[String]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_firemesh"))
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `run_dir` has logged `steps` steps (at most a minute).
fn wait_for_steps(child: &mut std::process::Child, run_dir: &Path, steps: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while steps_logged(run_dir) < steps {
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        assert!(
            Instant::now() < deadline,
            "no {steps} steps within a minute"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &std::process::Child, signal: i32) {
    // SAFETY: a signal to our own child process, by its id.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

/// A preemption notice: SIGTERM during a run ends it after its step, with a checkpoint of that
/// step, exit code 0 and the outcome in the summary and the last line; `--resume` then ends bit
/// for bit where an uninterrupted run ends.
#[test]
fn sigterm_checkpoints_the_step_and_the_resumed_run_ends_bit_identical() {
    sigterm_and_resume("sigterm", "");
}

/// The same in f16, its loss scale starting far too high: the first steps overflow and are
/// skipped, and the scale moves all run long (doubling every 3 clean steps), so a resumed run
/// that did not go on with the checkpoint's scale would skip other steps and end elsewhere.
#[test]
fn an_f16_run_stopped_and_resumed_ends_bit_identical() {
    let summary = sigterm_and_resume(
        "sigterm-f16",
        "--precision f16 --loss-scale 1e9 --loss-scale-interval 3",
    );
    assert_eq!(summary["precision"], "f16");
    let skipped = summary["skipped_steps"].as_u64().unwrap();
    assert!(skipped >= 5, "{skipped} steps skipped");
    assert!(summary["loss_scale"].as_f64().unwrap() < 1e9);
}

/// Runs a job to its end, and the same job stopped by SIGTERM and resumed; checks the stop and
/// that both end with the same parameters. Returns the resumed run's summary.
fn sigterm_and_resume(name: &str, options: &str) -> serde_json::Value {
    let dir = scratch(name);
    // Checkpoints only at the end: the one before it is the signal's.
    let extra = format!(
        "--samples 96 --eval-samples 16 --checkpoint-every 1000 --steps {STEPS} --seed 5 {options}"
    );
    let reference = dir.join("reference");
    let out = cli(&dir, &strs(&train_args(&reference, &extra)));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = final_params(&reference);

    let run = dir.join("stopped");
    let mut child = spawn(&dir, &train_args(&run, &extra));
    wait_for_steps(&mut child, &run, 5);
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let stopped = summary["stopped_at"].as_u64().expect("stopped_at") as usize;
    assert!(
        (5..STEPS).contains(&stopped),
        "stopped after step {stopped}"
    );
    assert_eq!(checkpointed(&run), stopped, "the stop's checkpoint");
    assert_eq!(steps_logged(&run), stopped, "every step done is logged");
    let last = stdout.trim_end().lines().last().unwrap_or("");
    assert!(
        last.starts_with(&format!(
            "stopped by a signal after step {stopped} of {STEPS}"
        )),
        "{last}"
    );

    let mut resume = train_args(&run, &extra);
    resume.push("--resume".into());
    let out = cli(&dir, &strs(&resume));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        final_params(&run),
        want,
        "the resumed run's final parameters differ"
    );
    let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    serde_json::from_str(&summary).unwrap()
}

/// A second signal does not wait for the step: the process ends at once with exit code 143,
/// naming the last good checkpoint. (The two signals are delivered together: the process is
/// stopped while they are sent, and SIGTERM and SIGINT do not merge as two SIGTERMs would.)
#[test]
fn a_second_signal_ends_the_run_at_once_naming_the_last_checkpoint() {
    let dir = scratch("sigterm-twice");
    let run = dir.join("run");
    // Steps long enough (32×32 images in batches of 16) that the run cannot end its step
    // before the signals are seen.
    let args = sized_args(
        "--image-size 32 --batch 16",
        &run,
        "--samples 96 --eval-samples 16 --checkpoint-every 1 --steps 200",
    );
    let mut child = spawn(&dir, &args);
    wait_for_steps(&mut child, &run, 2);
    signal(&child, libc::SIGSTOP);
    signal(&child, libc::SIGTERM);
    signal(&child, libc::SIGINT);
    signal(&child, libc::SIGCONT);
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let line = stderr.lines().last().unwrap_or("");
    assert!(
        line.contains("stopped at once by a second signal"),
        "{line}"
    );
    // The checkpoint named is complete; a later one may have been renamed into place between
    // the naming and the exit (a step is logged before its checkpoint is written).
    let named = line
        .split("the last good checkpoint is ")
        .nth(1)
        .and_then(|rest| rest.split(" (").next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no checkpoint named: {line}"));
    assert!(named.exists(), "{line}");
    let step: usize = named
        .file_name()
        .and_then(|n| {
            n.to_str()?
                .strip_prefix("step-")?
                .strip_suffix(".ckpt")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("not a checkpoint: {line}"));
    assert!((1..=checkpointed(&run)).contains(&step), "{line}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// When a stop stops waiting for the step: a second signal, or the deadline after the first.
#[test]
fn a_second_signal_or_the_deadline_forces_the_end() {
    use firemesh_cli::train::forced_stop;
    let (s, deadline) = (Duration::from_secs, Duration::from_secs(25));
    assert_eq!(forced_stop(0, s(99), deadline), None, "no signal");
    assert_eq!(forced_stop(1, s(24), deadline), None, "the step may finish");
    let late = forced_stop(1, s(25), deadline).expect("the deadline passed");
    assert!(late.contains("deadline of 25 s"), "{late}");
    assert_eq!(
        forced_stop(2, s(0), deadline).as_deref(),
        Some("a second signal")
    );
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
