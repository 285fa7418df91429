//! `firemesh train` under `mpirun` (a build with `--features mpi`): processes × CPU ranks on
//! loopback train one world. 2 processes × 2 ranks end where 1 process × 4 ranks ends (within
//! 1e-6: the sums are added in another order), for the tiny ResNet and the tiny GPT, and with
//! ZeRO-1; so do 2 processes × 2 wgpu clients and 3 processes × 1 rank (sums by blocks); a process
//! killed with SIGKILL ends the job within a bound, and `--resume` after 3 random kills ends bit
//! for bit where an uninterrupted world ends; SIGTERM to one process stops the whole world
//! after a step with one checkpoint; processes started with different settings are refused
//! alike. Every `mpirun` here runs under a deadline and is killed with its processes past it.

use crate::common::{scratch, steps_logged, Moments};
use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn_flex::{Flex, FlexDevice};
use firemesh::checkpoint::CheckpointDir;
use firemesh_cli::train::ModelName;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest an `mpirun` here may take.
const DEADLINE: Duration = Duration::from_secs(180);

/// `mpirun -np NP firemesh ARGS`, set up for this machine: as root if need be, more processes
/// than cores allowed, no binding to cores.
fn mpirun_command(cwd: &Path, np: usize, args: &[String]) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        &np.to_string(),
    ])
    .arg(env!("CARGO_BIN_EXE_firemesh"))
    .args(args)
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .current_dir(cwd)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c
}

/// Waits for `child` until `deadline`, killing it (and the processes it started) past it.
fn finish(mut child: Child, deadline: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > deadline {
            for pid in children_of(child.id()) {
                kill(pid, libc::SIGKILL);
            }
            let _ = child.kill();
            panic!("mpirun ran past {} s and was killed", deadline.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mpirun(cwd: &Path, np: usize, args: &[String]) -> Output {
    finish(mpirun_command(cwd, np, args).spawn().unwrap(), DEADLINE)
}

/// `firemesh ARGS` as one process (no launcher).
fn alone(cwd: &Path, args: &[String]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_firemesh"))
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, DEADLINE)
}

fn ok(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

/// The processes `parent` started (read from /proc).
fn children_of(parent: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // pid (comm) state ppid ...: the fields after the last ')'.
            let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
            after.split_whitespace().nth(1) == Some(&parent.to_string())
        })
        .collect()
}

/// Whether process `pid` still runs, a second after its job ended (a zombie, ended but not yet
/// reaped, does not).
fn running(pid: i32) -> bool {
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit_once(')').map_or("", |(_, a)| a).to_string();
        after.split_whitespace().next().map(String::from)
    };
    let gone = |s: Option<String>| s.is_none_or(|s| s == "Z" || s == "X");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        if gone(state()) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !gone(state())
}

fn kill(pid: i32, signal: i32) {
    // SAFETY: a signal to a process this test started, by its id.
    unsafe { libc::kill(pid, signal) };
}

fn args(line: &str, run_dir: &Path) -> Vec<String> {
    line.split_whitespace()
        .map(String::from)
        .chain(["--run-dir".into(), run_dir.display().to_string()])
        .collect()
}

/// The final parameters of `run_dir`'s newest checkpoint, in module order.
fn final_params(run_dir: &Path, model: ModelName, classes: usize, image_size: usize) -> Vec<f32> {
    let (_, ckpt) = CheckpointDir::new(run_dir)
        .newest_valid::<serde_json::Value>(|w| panic!("{w}"))
        .expect("a checkpoint");
    let device = FlexDevice;
    let net = model.config(classes, image_size, classes).unwrap();
    let record = BinBytesRecorder::<FullPrecisionSettings>::default()
        .load(ckpt.model, &device)
        .unwrap();
    let net = net.init::<Flex>(&device).unwrap().load_record(record);
    struct Read(Vec<f32>);
    impl ModuleVisitor<Flex> for Read {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Flex, D>>) {
            self.0.extend(p.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let mut read = Read(Vec::new());
    net.visit(&mut read);
    read.0
}

/// The step losses of `run_dir`'s metrics.
fn losses(run_dir: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == "step")
        .map(|r| r["loss"].as_f64().unwrap())
        .collect()
}

fn summary(run_dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap()).unwrap()
}

fn worst(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0, f32::max)
}

#[test]
fn two_processes_of_two_ranks_train_as_one_process_of_four() {
    let cwd = scratch("mpi-equivalence");
    crate::common::write_text(&cwd.join("text.txt"), 40);
    let jobs = [
        (
            ModelName::ResnetTiny,
            "--model resnet-tiny --image-size 8 --samples 96 --eval-samples 16",
            10,
            8,
        ),
        (
            ModelName::GptTiny,
            "--model gpt-tiny --data text:text.txt --seq-len 16 --eval-samples 8",
            256,
            32,
        ),
        // ZeRO-1 across processes: its state, sharded over the world, is read for each
        // checkpoint by every process in one order.
        (
            ModelName::ResnetTiny,
            "--model resnet-tiny --image-size 8 --samples 96 --eval-samples 16 --optimizer adamw --lr 0.0001 --zero 1",
            10,
            8,
        ),
        // ZeRO-3 across processes: the parameters stay sharded over the world, and each op
        // gathers them through both levels.
        (
            ModelName::GptTiny,
            "--model gpt-tiny --data text:text.txt --seq-len 16 --eval-samples 8 --zero 3",
            256,
            32,
        ),
    ];
    for (i, (model, job, classes, image_size)) in jobs.into_iter().enumerate() {
        // Buckets of 10 KiB: several fill during each backward pass and cross the processes
        // early, through MPI's side communicator.
        let common = format!(
            "train --mesh cpu --batch 8 --steps 6 --checkpoint-every 3 --bucket-mib 0.01 {job}"
        );
        let one = cwd.join(format!("{i}-{model}-1x4"));
        let two = cwd.join(format!("{i}-{model}-2x2"));
        ok(&alone(&cwd, &args(&format!("{common} --ranks 4"), &one)));
        let text = ok(&mpirun(
            &cwd,
            2,
            &args(&format!("{common} --ranks 2"), &two),
        ));
        // One process prints the run and writes its folder.
        assert_eq!(text.matches("firemesh train:").count(), 1, "{text}");
        assert!(
            text.contains("in each of 2 processes (4 ranks in the world)"),
            "{text}"
        );
        let s = summary(&two);
        assert_eq!(s["ranks"], 4);
        assert!(s["routes"]["across-processes"].as_u64().unwrap() > 0, "{s}");
        assert!(s["early_gradient_collectives"].as_u64().unwrap() > 0, "{s}");
        if job.contains("--zero 3") {
            // Parameters gathered ahead of use, through the side communicator too: all but the
            // step's first.
            let gathers = s["parameter_gathers_per_step"].as_u64().unwrap();
            assert_eq!(s["parameter_gathers_ahead_per_step"], gathers - 1, "{s}");
        }
        let (want, got) = (losses(&one), losses(&two));
        assert_eq!(want.len(), 6);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs(),
                "{model} step {i}: {g} vs {w}"
            );
        }
        let apart = worst(
            &final_params(&two, model, classes, image_size),
            &final_params(&one, model, classes, image_size),
        );
        assert!(apart <= 1e-6, "{model}: parameters {apart} apart");
        println!("{model}: 2 processes x 2 ranks against 1 x 4: parameters {apart:e} apart");
    }
    std::fs::remove_dir_all(&cwd).unwrap();
}

const STEPS: usize = 30;

fn fault_args(run_dir: &Path, extra: &str) -> Vec<String> {
    let line = format!(
        "train --mesh cpu --ranks 2 --model resnet-tiny --image-size 8 --batch 8 --samples 96 \
         --eval-samples 16 --steps {STEPS} --checkpoint-every 3 --seed 9 {extra}"
    );
    args(&line, run_dir)
}

/// The parameter digest of the fault tests' job run through by a world of 2 processes.
fn uninterrupted_digest(cwd: &Path) -> serde_json::Value {
    let reference = cwd.join("reference");
    ok(&mpirun(cwd, 2, &fault_args(&reference, "")));
    summary(&reference)["params_digest"].clone()
}

/// Resumes the world of `run` to its end, which must hold the parameters `want` bit for bit.
fn resume_to_the_end(cwd: &Path, run: &Path, want: &serde_json::Value) {
    ok(&mpirun(cwd, 2, &fault_args(run, "--resume")));
    assert_eq!(&summary(run)["params_digest"], want);
}

/// Starts an `mpirun` world of 2 processes and waits until it has logged `steps` steps;
/// returns it and its two firemesh processes.
fn world_at_step(cwd: &Path, args: &[String], steps: usize) -> (Child, Vec<i32>) {
    let mut child = mpirun_command(cwd, 2, args).spawn().unwrap();
    let run_dir = PathBuf::from(args.last().unwrap());
    let start = Instant::now();
    while steps_logged(&run_dir) < steps {
        assert!(child.try_wait().unwrap().is_none(), "the world ended early");
        assert!(start.elapsed() < DEADLINE, "no {steps} steps in time");
        std::thread::sleep(Duration::from_millis(5));
    }
    let processes = children_of(child.id());
    assert_eq!(processes.len(), 2, "mpirun's processes: {processes:?}");
    (child, processes)
}

/// A process killed with SIGKILL ends the world: `mpirun` exits non-zero, naming the lost
/// process, within 60 s. Three such kills at random steps of random processes, each followed
/// by `--resume` of the whole world, end bit for bit where an uninterrupted world ends.
#[test]
fn a_world_killed_three_times_and_resumed_ends_bit_identical() {
    let cwd = scratch("mpi-kills");
    let want = uninterrupted_digest(&cwd);

    let run = cwd.join("killed");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("kill moments seeded with {seed}");
    let mut moments = Moments(seed);
    let mut resume = "";
    for kill_no in 0..3 {
        let done = steps_logged(&run);
        let at = done + 1 + moments.next(((STEPS - done) / 3).max(1) as u64) as usize;
        let (child, processes) = world_at_step(&cwd, &fault_args(&run, resume), at);
        let victim = processes[moments.next(2) as usize];
        let killed = Instant::now();
        kill(victim, libc::SIGKILL);
        let out = finish(child, Duration::from_secs(60));
        let ended = killed.elapsed();
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "kill {kill_no}: {text}");
        // mpirun names the lost process: "process rank 1 ... exited on signal 9 (Killed)".
        assert!(
            text.contains("process rank") && text.contains("signal 9"),
            "kill {kill_no}: {text}"
        );
        let left: Vec<_> = processes.iter().filter(|p| running(**p)).collect();
        assert!(left.is_empty(), "kill {kill_no}: processes left: {left:?}");
        println!(
            "kill {kill_no}: process {victim} at step {at}: the world ended in {:.2} s",
            ended.as_secs_f64()
        );
        resume = "--resume";
    }
    resume_to_the_end(&cwd, &run, &want);
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// SIGTERM to one process (not process 0) stops the whole world after the same step: process
/// 0 writes one checkpoint of it, every process exits 0, and the outcome is in the summary and
/// the last line; `--resume` then ends bit for bit where an uninterrupted world ends.
#[test]
fn sigterm_to_one_process_stops_the_world_with_a_checkpoint_and_resume_ends_bit_identical() {
    let cwd = scratch("mpi-sigterm");
    let want = uninterrupted_digest(&cwd);

    let run = cwd.join("stopped");
    let (child, processes) = world_at_step(&cwd, &fault_args(&run, ""), 4);
    // The process that is not mpirun's first child need not be process 0: either works, the
    // point is that one process's signal stops them all.
    kill(processes[1], libc::SIGTERM);
    let text = ok(&finish(child, Duration::from_secs(60)));
    let s = summary(&run);
    let stopped = s["stopped_at"].as_u64().expect("the run stopped early") as usize;
    assert!(stopped < STEPS, "{s}");
    let last = text
        .lines()
        .rfind(|l| l.starts_with("stopped"))
        .unwrap_or("");
    assert!(last.contains(&format!("{stopped} of {STEPS}")), "{text}");
    assert!(run
        .join(format!("checkpoints/step-{stopped:08}.ckpt"))
        .exists());
    resume_to_the_end(&cwd, &run, &want);
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// A process that stops answering (SIGSTOP: stuck, not lost) makes the others end the world
/// within `--world-timeout`, naming the wait, instead of hanging.
#[test]
fn a_stopped_process_ends_the_world_within_the_world_timeout() {
    let cwd = scratch("mpi-stopped");
    let run = cwd.join("run");
    let (child, processes) = world_at_step(&cwd, &fault_args(&run, "--world-timeout 3"), 2);
    let stopped = Instant::now();
    kill(processes[0], libc::SIGSTOP);
    let out = finish(child, Duration::from_secs(60));
    let ended = stopped.elapsed();
    for p in &processes {
        kill(*p, libc::SIGKILL); // the stopped one, if mpirun left it
    }
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("no answer from the other processes within 3 s"),
        "{text}"
    );
    assert!(ended < Duration::from_secs(30), "ended after {ended:?}");
    println!(
        "a stopped process: the world ended in {:.1} s",
        ended.as_secs_f64()
    );
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// Processes started with different settings (here the learning rate), or with a batch the
/// world cannot split, are refused at start, each with the same one line, before anything is
/// written.
#[test]
fn processes_with_different_settings_are_refused_alike() {
    let cwd = scratch("mpi-mismatch");
    let run = cwd.join("run");
    // Different learning rates; then the same batch of 8 for 2 x 5 ranks.
    let job = |extra: &str| {
        let line = format!("train --mesh cpu --model resnet-tiny --image-size 8 --steps 4 {extra}");
        args(&line, &run)
    };
    let cases = [
        (
            "--ranks 2 --batch 8 --lr 0.1",
            "--ranks 2 --batch 8 --lr 0.2",
            "disagree on the run's settings",
        ),
        (
            "--ranks 5 --batch 8",
            "--ranks 5 --batch 8",
            "--batch 8 does not fit the world",
        ),
    ];
    for (first, second, says) in cases {
        let mut c = mpirun_command(&cwd, 1, &job(first));
        c.arg(":")
            .args(["-np", "1", env!("CARGO_BIN_EXE_firemesh")])
            .args(job(second));
        let out = finish(c.spawn().unwrap(), DEADLINE);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(says)).collect();
        assert_eq!(lines.len(), 2, "one line from each process: {stderr}");
        assert!(lines.iter().all(|l| *l == lines[0]), "{stderr}");
        assert!(!run.exists(), "a refused world wrote its run folder");
    }
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// Trains the tiny ResNet as `common` says as 1 process of `np * ranks` ranks and as `np`
/// processes of `ranks` (folders `1xN` and `PxR` of `cwd`); the worst relative difference of
/// their final parameters.
fn world_against_one_process(cwd: &Path, common: &str, np: usize, ranks: usize) -> f32 {
    let all = np * ranks;
    let (one, world) = (
        cwd.join(format!("1x{all}")),
        cwd.join(format!("{np}x{ranks}")),
    );
    ok(&alone(cwd, &args(&format!("{common} --ranks {all}"), &one)));
    let text = ok(&mpirun(
        cwd,
        np,
        &args(&format!("{common} --ranks {ranks}"), &world),
    ));
    let says = format!("in each of {np} processes ({all} ranks in the world)");
    assert!(text.contains(&says), "{text}");
    let model = ModelName::ResnetTiny;
    worst(
        &final_params(&world, model, 10, 8),
        &final_params(&one, model, 10, 8),
    )
}

/// A device mesh across processes: 2 processes × 2 wgpu clients (Mesa's software Vulkan on CI)
/// end where 1 process × 4 clients ends, within 1e-6. The path a CUDA mesh takes but for the
/// transport: each process sums its ranks on its devices with firemesh's collectives, then
/// one buffer per process crosses (MPI here, NCCL between CUDA meshes).
#[test]
fn a_wgpu_world_of_two_processes_trains_as_one_process_of_four_clients() {
    if !crate::common::wgpu_here() {
        return;
    }
    let cwd = scratch("mpi-wgpu");
    let common = "train --mesh wgpu --model resnet-tiny --image-size 8 --samples 48 \
                  --eval-samples 8 --batch 8 --steps 4 --checkpoint-every 4 --bucket-mib 0.01";
    let apart = world_against_one_process(&cwd, common, 2, 2);
    let (one, two) = (cwd.join("1x4"), cwd.join("2x2"));
    let s = summary(&two);
    assert!(s["routes"]["across-processes"].as_u64().unwrap() > 0, "{s}");
    assert!(s["early_gradient_collectives"].as_u64().unwrap() > 0, "{s}");
    let (want, got) = (losses(&one), losses(&two));
    assert_eq!((want.len(), got.len()), (4, 4));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-6 * w.abs(), "step {i}: {g} vs {w}");
    }
    assert!(apart <= 1e-6, "parameters {apart} apart");
    println!("wgpu: 2 processes x 2 clients against 1 x 4: parameters {apart:e} apart");
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// 3 processes of 1 rank end where 1 process of 3 ranks ends (within 1e-6). In a world of more
/// than 2 processes the large sums (the gradient buckets) go by blocks: MPI's all-to-all, each
/// process summing its block, then an all-gather of the sums.
#[test]
fn three_processes_train_as_one_process_of_three_ranks() {
    let cwd = scratch("mpi-three");
    let common = "train --mesh cpu --model resnet-tiny --image-size 8 --samples 48 \
                  --eval-samples 6 --batch 6 --steps 4 --checkpoint-every 4";
    let apart = world_against_one_process(&cwd, common, 3, 1);
    assert!(apart <= 1e-6, "parameters {apart} apart");
    println!("3 processes x 1 rank against 1 x 3: parameters {apart:e} apart");
    std::fs::remove_dir_all(&cwd).unwrap();
}
