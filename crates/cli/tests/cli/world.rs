//! The world a launcher starts, as `firemesh train` reads it from the environment: described by
//! `--dry-run`, refused by a run while firemesh trains in one process, and nothing written.

use crate::common::{cli_launched, scratch, snapshot};
use firemesh_cli::world::{Launcher, World};
use firemesh_cli::Result;
use std::collections::HashMap;

const TORCHRUN_PROCESS_0_OF_2: &[(&str, &str)] = &[
    ("RANK", "0"),
    ("WORLD_SIZE", "2"),
    ("LOCAL_RANK", "0"),
    ("MASTER_ADDR", "127.0.0.1"),
    ("MASTER_PORT", "29500"),
];

const MPI_PROCESS_1_OF_2: &[(&str, &str)] = &[
    ("OMPI_COMM_WORLD_RANK", "1"),
    ("OMPI_COMM_WORLD_SIZE", "2"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
];

#[test]
fn dry_run_prints_the_world_and_writes_nothing() {
    let cwd = scratch("world-dry-run");
    let args = [
        "train",
        "--dry-run",
        "--mesh",
        "cpu",
        "--ranks",
        "4",
        "--batch",
        "32",
    ];
    let before = snapshot(&cwd);
    let alone = cli_launched(&cwd, &args, &[]);
    let text = String::from_utf8_lossy(&alone.stdout);
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stderr)
    );
    for says in [
        "launcher: none (one process)",
        "processes: 1 (this is process 0)",
        "ranks: 4 in this process, 4 in the world",
        "devices of this process: cpu, cpu, cpu, cpu",
        "batch: 32 samples a step, 8.0 per rank",
        "transport in the process: one device holds every rank",
        "transport across processes: none (one process)",
    ] {
        assert!(text.contains(says), "{says:?} not in:\n{text}");
    }
    let launched = cli_launched(&cwd, &args, MPI_PROCESS_1_OF_2);
    let text = String::from_utf8_lossy(&launched.stdout);
    assert!(
        launched.status.success(),
        "{}",
        String::from_utf8_lossy(&launched.stderr)
    );
    let across = match cfg!(feature = "mpi") {
        true => "transport across processes: MPI, one buffer per process",
        false => "transport across processes: none: this firemesh was built without MPI",
    };
    for says in [
        "launcher: mpirun (OpenMPI)",
        "processes: 2 (this is process 1, process 1 on its node)",
        "ranks: 4 in this process, 8 in the world",
        "batch: 32 samples a step, 4.0 per rank",
        across,
    ] {
        assert!(text.contains(says), "{says:?} not in:\n{text}");
    }
    // Torchrun-style variables start NCCL's own bootstrap, which CPU meshes cannot take.
    let launched = cli_launched(&cwd, &args, TORCHRUN_PROCESS_0_OF_2);
    let text = String::from_utf8_lossy(&launched.stdout);
    for says in [
        "launcher: torchrun-style variables",
        "processes: 2 (this is process 0, process 0 on its node)",
        "transport across processes: none: ",
        "goes through MPI, which torchrun-style variables do not start: launch it with mpirun \
         or srun",
    ] {
        assert!(text.contains(says), "{says:?} not in:\n{text}");
    }
    // A wgpu mesh crosses the processes through MPI too, read back to the host.
    if cfg!(feature = "mpi") && firemesh_collective::wgpu_devices::wgpu_devices(2).is_ok() {
        let wgpu = ["train", "--dry-run", "--mesh", "wgpu", "--ranks", "2"];
        let launched = cli_launched(&cwd, &wgpu, MPI_PROCESS_1_OF_2);
        let text = String::from_utf8_lossy(&launched.stdout);
        assert!(
            text.contains(
                "transport across processes: MPI, one buffer per process after the \
                           process's own ranks (read back to the host)"
            ),
            "{text}{}",
            String::from_utf8_lossy(&launched.stderr)
        );
    }
    // The same checks as a run: a batch smaller than the ranks is refused.
    let small = cli_launched(
        &cwd,
        &["train", "--dry-run", "--ranks", "4", "--batch", "2"],
        &[],
    );
    assert!(!small.status.success());
    assert!(snapshot(&cwd) == before, "a dry run wrote files");
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// A world of several processes that MPI cannot join (its variables set by hand here, with no
/// mpirun behind them; or any, in a build without MPI) is refused before anything is written,
/// in one line naming the launcher; so is a torchrun world with no place to meet, or variables
/// that are not numbers.
#[test]
fn worlds_of_several_processes_are_refused_in_one_line() {
    let cwd = scratch("world-refused");
    let before = snapshot(&cwd);
    let train = [
        "train", "--mesh", "cpu", "--ranks", "2", "--steps", "1", "--trace", "t.json",
    ];
    for (vars, says) in [
        (
            MPI_PROCESS_1_OF_2,
            "mpirun (OpenMPI) started 2 processes (this is process 1)",
        ),
        (
            &[("SLURM_PROCID", "0"), ("SLURM_STEP_NUM_TASKS", "4")][..],
            "srun (Slurm) started 4 processes",
        ),
        (
            &[("PMI_RANK", "0"), ("PMI_SIZE", "2")][..],
            "mpiexec (PMI: MPICH, Intel MPI) started 2 processes",
        ),
        (
            &[("RANK", "0"), ("WORLD_SIZE", "2")][..],
            "WORLD_SIZE=2 names a world without a place to meet",
        ),
        (&[("RANK", "one"), ("WORLD_SIZE", "2")][..], "RANK=\"one\""),
        // Torchrun-style variables start NCCL's own bootstrap, for CUDA meshes only: a CPU
        // mesh is refused before NCCL is asked.
        (
            TORCHRUN_PROCESS_0_OF_2,
            "a CPU mesh across processes goes through MPI, which torchrun-style variables do \
             not start",
        ),
        // Several processes per node are refused before NCCL is asked.
        (
            &[TORCHRUN_PROCESS_0_OF_2, &[("LOCAL_WORLD_SIZE", "2")]].concat()[..],
            "LOCAL_WORLD_SIZE=2): firemesh runs one process per node",
        ),
    ] {
        let train = [&train[..], &["--world-timeout", "5"]].concat();
        let out = cli_launched(&cwd, &train, vars);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{vars:?}");
        let last = stderr.trim_end();
        assert_eq!(last.lines().count(), 1, "{stderr}");
        assert!(last.contains(says), "{vars:?}: {stderr}");
    }
    // A CUDA mesh joins by NCCL's own bootstrap in a build with the `experimental` feature:
    // here NCCL or a GPU is missing (or, on a GPU machine, process 1 never comes within the
    // timeout). Without it the join is refused as experimental
    // (`an_nccl_bootstrap_join_that_cannot_be_made_names_its_process_and_place` runs the join
    // in every build).
    let cuda = [
        "train",
        "--mesh",
        "cuda",
        "--steps",
        "1",
        "--world-timeout",
        "5",
    ];
    let out = cli_launched(&cwd, &cuda, TORCHRUN_PROCESS_0_OF_2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let says = match cfg!(feature = "experimental") {
        true => "process 0 of 2, joining by NCCL's own bootstrap at 127.0.0.1:29501",
        false => {
            "torchrun-style variables: NCCL's own bootstrap at 127.0.0.1:29501: NCCL across \
             processes is experimental (it has not run on GPUs yet), so this build leaves it \
             out: build firemesh with `--features experimental`"
        }
    };
    assert!(stderr.contains(says), "{stderr}");
    // A launcher's world of one process trains as before.
    let one = [("SLURM_PROCID", "0"), ("SLURM_STEP_NUM_TASKS", "1")];
    let args = ["train", "--dry-run", "--mesh", "cpu", "--ranks", "2"];
    let out = cli_launched(&cwd, &args, &one);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("launcher: srun (Slurm)"));
    assert!(snapshot(&cwd) == before, "a refused run wrote files");
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// The experimental join by NCCL's own bootstrap, called as the library (any build): an id that
/// cannot be made (no NCCL here; on a GPU machine, a peer that never comes) fails in one error
/// naming the process and the place, and the checks every build makes come first.
#[test]
fn an_nccl_bootstrap_join_that_cannot_be_made_names_its_process_and_place() {
    use firemesh::mesh::MeshKind;
    use firemesh_cli::train::join_by_nccl;
    use std::time::Duration;
    let torchrun = world(TORCHRUN_PROCESS_0_OF_2).unwrap();
    let mut asked = Vec::new();
    let no_nccl = |place: &str| {
        asked.push(place.to_string());
        Err(firemesh_collective::LinkError(
            "no NCCL on this machine".into(),
        ))
    };
    let joined = join_by_nccl(&torchrun, MeshKind::Cuda, no_nccl, Duration::from_secs(1));
    let Err(e) = joined else {
        panic!("joined without NCCL")
    };
    assert_eq!(
        e.to_string(),
        "process 0 of 2, joining by NCCL's own bootstrap at 127.0.0.1:29501: no NCCL on this machine"
    );
    assert_eq!(asked, ["127.0.0.1:29501"]);
    // A CPU mesh is refused before NCCL is asked.
    let never = |_: &str| -> std::result::Result<_, _> { unreachable!("NCCL was asked") };
    let joined = join_by_nccl(&torchrun, MeshKind::Cpu, never, Duration::from_secs(1));
    let Err(e) = joined else {
        panic!("a CPU mesh joined")
    };
    assert!(
        e.to_string()
            .contains("a CPU mesh across processes goes through MPI"),
        "{e}"
    );
}

/// The world the variables `vars` describe.
fn world(vars: &[(&str, &str)]) -> Result<World> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    World::from_env(|k| vars.get(k).cloned())
}

#[test]
fn launchers_are_read_from_their_variables() {
    assert_eq!(world(&[]).unwrap(), World::single());
    let mpi = world(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
    ])
    .unwrap();
    assert_eq!(
        (mpi.launcher, mpi.process, mpi.processes, mpi.local_process),
        (Launcher::OpenMpi, 1, 2, Some(1))
    );
    let slurm = world(&[("SLURM_PROCID", "3"), ("SLURM_STEP_NUM_TASKS", "4")]).unwrap();
    assert_eq!((slurm.launcher, slurm.process), (Launcher::Slurm, 3));
    assert_eq!(slurm.local_process, None);
    // A batch script run without srun: one process of a job of several tasks.
    let batch = world(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4")]).unwrap();
    assert_eq!(batch, World::single());
    // srun starting torchrun: torchrun's processes inherit the step's one task.
    let inner = world(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_STEP_NUM_TASKS", "1"),
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("MASTER_ADDR", "node1"),
        ("MASTER_PORT", "29500"),
    ])
    .unwrap();
    assert_eq!((inner.launcher, inner.processes), (Launcher::Torchrun, 8));
    let pmi = world(&[("PMI_RANK", "1"), ("PMI_SIZE", "3")]).unwrap();
    assert_eq!(
        (pmi.launcher, pmi.process, pmi.processes),
        (Launcher::Pmi, 1, 3)
    );
    let torch = world(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "0"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
    ])
    .unwrap();
    assert_eq!(torch.bootstrap.as_deref(), Some("10.0.0.1:29500"));
    // NCCL's own bootstrap meets on the two ports after MASTER_PORT (torchrun's store holds
    // MASTER_PORT itself); LOCAL_WORLD_SIZE counts the node's processes.
    let meeting = torch.nccl_meeting().unwrap();
    assert_eq!(meeting, ["10.0.0.1:29501", "10.0.0.1:29502"]);
    assert_eq!(torch.local_processes, None);
    let per_gpu = world(&[
        ("RANK", "3"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_WORLD_SIZE", "4"),
        ("MASTER_ADDR", "node0"),
        ("MASTER_PORT", "29500"),
    ])
    .unwrap();
    assert_eq!(per_gpu.local_processes, Some(4));
    assert_eq!(per_gpu.nccl_meeting().unwrap()[0], "node0:29501");
    assert!(world(&[("RANK", "0"), ("WORLD_SIZE", "1")])
        .unwrap()
        .nccl_meeting()
        .is_none());
    assert!(torch
        .check_single()
        .unwrap_err()
        .to_string()
        .contains("8 processes"));
    // mpirun's variables win over torchrun-style ones left in the environment.
    let both = world(&[
        ("OMPI_COMM_WORLD_RANK", "0"),
        ("OMPI_COMM_WORLD_SIZE", "1"),
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
    ])
    .unwrap();
    assert_eq!((both.launcher, both.processes), (Launcher::OpenMpi, 1));
    assert!(both.check_single().is_ok());
}

#[test]
fn worlds_that_cannot_be_are_named() {
    for (vars, says) in [
        (
            &[("RANK", "2"), ("WORLD_SIZE", "2")][..],
            "RANK=2 and WORLD_SIZE=2",
        ),
        (
            &[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")][..],
            "SLURM_PROCID=\"x\"",
        ),
        (
            &[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "0")][..],
            "not a process",
        ),
        (
            &[("RANK", "0"), ("WORLD_SIZE", "2")][..],
            "MASTER_ADDR and MASTER_PORT",
        ),
        (
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "p"),
            ][..],
            "MASTER_PORT=\"p\": not a TCP port",
        ),
        (
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "70000"),
            ][..],
            "not a TCP port",
        ),
        // NCCL's bootstrap takes the two ports after MASTER_PORT.
        (
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "65534"),
            ][..],
            "two more after it",
        ),
    ] {
        let err = world(vars).unwrap_err().to_string();
        assert!(err.contains(says), "{vars:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
