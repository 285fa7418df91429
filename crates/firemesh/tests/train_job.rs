//! The main job trains: loss falls, with no op falling back to replicated execution.

use burn_ndarray::{NdArray, NdArrayDevice};
use firemesh::mesh::{sharded_on_group, DeviceMesh, MeshKind};
use firemesh::train::{train_resnet, TrainArgs};
use firemesh_backend::{Mesh, Route};

#[test]
fn data_parallel_resnet_on_a_cpu_mesh_learns() {
    let args = TrainArgs {
        steps: 24,
        batch: Some(16),
        lr: 0.05,
        samples: 256,
        image_size: 8,
        seed: 7,
        log_every: 8,
    };
    let mesh = Mesh::replicate(NdArrayDevice::Cpu, 2).unwrap();
    let report = train_resnet::<NdArray>(mesh, &args).unwrap();
    assert_eq!(report.fallbacks, 0);
    assert_eq!(report.batch, 16);
    // Ranks that share one device sum their parts in place: no collective across devices.
    assert!(
        report.routes.keys().all(|r| *r == Route::OneDevice),
        "{:?}",
        report.routes
    );
    assert!(
        report.last_loss < 0.6 * report.first_loss,
        "loss {} -> {}",
        report.first_loss,
        report.last_loss
    );
    assert!(report.images_per_second > 0.0);
}

#[test]
fn a_batch_that_does_not_split_evenly_is_an_error() {
    let args = TrainArgs {
        steps: 1,
        batch: Some(5),
        lr: 0.05,
        samples: 64,
        image_size: 8,
        seed: 7,
        log_every: 1,
    };
    let mesh = Mesh::replicate(NdArrayDevice::Cpu, 2).unwrap();
    let err = train_resnet::<NdArray>(mesh, &args).err().unwrap();
    assert!(err.to_string().contains("multiple of the 2 ranks"), "{err}");
}

/// With no batch given, the default global batch (32) is rounded up to split evenly over any
/// rank count (3, 5, 6 or 7 GPUs, say).
#[test]
fn the_default_batch_splits_over_any_rank_count() {
    let args = TrainArgs {
        steps: 1,
        batch: None,
        lr: 0.05,
        samples: 128,
        image_size: 8,
        seed: 7,
        log_every: 1,
    };
    for (ranks, want) in [
        (1, 32),
        (3, 33),
        (4, 32),
        (5, 35),
        (6, 36),
        (7, 35),
        (8, 32),
    ] {
        assert_eq!(args.batch_for(ranks).ok(), Some(want), "{ranks} ranks");
    }
    let mesh = Mesh::replicate(NdArrayDevice::Cpu, 3).unwrap();
    let report = train_resnet::<NdArray>(mesh, &args).unwrap();
    assert_eq!(report.batch, 33);
}

/// `auto` falls back to a CPU mesh and says why when CUDA cannot run kernels; an explicit
/// `cuda` mesh is an error with the same reason; zero ranks is an error.
#[test]
fn mesh_discovery_explains_its_choice() {
    match firemesh_collective::probe::usable_cuda_devices() {
        Ok(gpus) => match DeviceMesh::discover(MeshKind::Auto, None).unwrap() {
            DeviceMesh::Cuda(d) => assert_eq!(d.len(), gpus.len()),
            other => panic!("GPUs present but auto chose {}", other.describe()),
        },
        Err(reason) => {
            let auto = DeviceMesh::discover(MeshKind::Auto, None).unwrap();
            assert!(matches!(auto, DeviceMesh::Cpu { ranks: 4, .. }));
            assert!(
                auto.describe().contains(&reason.to_string()),
                "{}",
                auto.describe()
            );
            let err = DeviceMesh::discover(MeshKind::Cuda, Some(2)).err().unwrap();
            assert!(
                matches!(&err, firemesh::Error::Unavailable(why) if *why == reason),
                "{err}"
            );
        }
    }
    let cpu = DeviceMesh::discover(MeshKind::Cpu, Some(3)).unwrap();
    assert_eq!(cpu.describe(), "a CPU mesh of 3 rank(s)");
    assert!(DeviceMesh::discover(MeshKind::Cpu, Some(0)).is_err());
}

/// The same job on separate wgpu clients (lavapipe in CI), as `firemesh train --mesh wgpu`
/// builds it: sums and gathers across the clients run on our CubeCL group, none on the
/// portable path.
#[test]
fn the_job_trains_on_a_wgpu_mesh() {
    let devices = match firemesh_collective::wgpu_devices::wgpu_devices(2) {
        Ok(d) => d,
        Err(reason) if std::env::var("FIREMESH_REQUIRE_WGPU").is_ok_and(|v| v == "1") => {
            panic!("FIREMESH_REQUIRE_WGPU=1 but no wgpu adapter: {reason}")
        }
        Err(reason) => return eprintln!("SKIPPED: no wgpu adapter ({reason})"),
    };
    let args = TrainArgs {
        steps: 6,
        batch: Some(8),
        lr: 0.05,
        samples: 64,
        image_size: 8,
        seed: 7,
        log_every: 3,
    };
    let mesh = sharded_on_group::<cubecl::wgpu::WgpuRuntime, burn_wgpu::Wgpu>(&devices).unwrap();
    let report = train_resnet::<burn_wgpu::Wgpu>(mesh, &args).unwrap();
    assert_eq!(report.fallbacks, 0);
    assert!(
        report.routes.get(&Route::MeshGroup) > Some(&0)
            && !report.routes.contains_key(&Route::PortableGroup),
        "{:?}",
        report.routes
    );
    assert!(
        report.last_loss.is_finite() && report.last_loss < report.first_loss,
        "loss {} -> {}",
        report.first_loss,
        report.last_loss
    );
}
