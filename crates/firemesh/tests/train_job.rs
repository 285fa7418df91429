//! The main job trains: loss falls, with no op falling back to replicated execution.

use burn_ndarray::{NdArray, NdArrayDevice};
use firemesh::train::{train_resnet, TrainArgs};
use firemesh_backend::Mesh;

#[test]
fn data_parallel_resnet_on_a_cpu_mesh_learns() {
    let args = TrainArgs {
        steps: 24,
        batch: 16,
        lr: 0.05,
        samples: 256,
        image_size: 8,
        seed: 7,
        log_every: 8,
    };
    let mesh = Mesh::replicate(NdArrayDevice::Cpu, 2).unwrap();
    let report = train_resnet::<NdArray>(mesh, &args).unwrap();
    assert_eq!(report.fallbacks, 0);
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
        batch: 5,
        lr: 0.05,
        samples: 64,
        image_size: 8,
        seed: 7,
        log_every: 1,
    };
    let mesh = Mesh::replicate(NdArrayDevice::Cpu, 2).unwrap();
    let err = train_resnet::<NdArray>(mesh, &args).err().unwrap();
    assert!(err.contains("multiple of the 2 ranks"), "{err}");
}

/// The same job on separate wgpu clients (lavapipe in CI): a GPU-kind mesh trains too.
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
        batch: 8,
        lr: 0.05,
        samples: 64,
        image_size: 8,
        seed: 7,
        log_every: 3,
    };
    let mesh = firemesh_backend::Sharded::<burn_wgpu::Wgpu>::mesh(devices).unwrap();
    let report = train_resnet::<burn_wgpu::Wgpu>(mesh, &args).unwrap();
    assert_eq!(report.fallbacks, 0);
    assert!(
        report.last_loss.is_finite() && report.last_loss < report.first_loss,
        "loss {} -> {}",
        report.first_loss,
        report.last_loss
    );
}
