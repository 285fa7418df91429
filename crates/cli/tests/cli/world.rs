//! The world a launcher starts, as `firemesh train` reads it from the environment: described by
//! `--dry-run`, refused by a run while firemesh trains in one process, and nothing written.

use crate::common::{cli_launched, scratch, snapshot};
use firemesh::world::{LinkError, World};

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

/// The CLI's join by NCCL's own bootstrap makes the checks every build makes before NCCL is
/// asked (a CPU or wgpu mesh crosses the processes through MPI), then refuses as experimental
/// in a build without the feature; `firemesh::world` tests the join itself.
#[test]
fn an_nccl_bootstrap_join_checks_the_mesh_and_the_feature_before_nccl_is_asked() {
    use firemesh::mesh::MeshKind;
    use firemesh_cli::train::join_by_nccl;
    use std::time::Duration;
    let vars: std::collections::HashMap<_, _> = TORCHRUN_PROCESS_0_OF_2.iter().copied().collect();
    let torchrun = World::from_env(|k| vars.get(k).map(|v| v.to_string())).unwrap();
    let refused = |mesh| {
        let never =
            |_: &str| -> std::result::Result<_, LinkError> { unreachable!("NCCL was asked") };
        match join_by_nccl(&torchrun, mesh, never, Duration::from_secs(1)) {
            Ok(_) => panic!("joined without NCCL"),
            Err(e) => e.to_string(),
        }
    };
    for (mesh, name) in [
        (MeshKind::Cpu, "a CPU mesh"),
        (MeshKind::Wgpu, "a wgpu mesh"),
    ] {
        let e = refused(mesh);
        assert!(
            e.starts_with(&format!("{name} across processes goes through MPI")),
            "{e}"
        );
    }
    if !cfg!(feature = "experimental") {
        let e = refused(MeshKind::Cuda);
        assert!(e.contains("NCCL across processes is experimental"), "{e}");
    }
}
