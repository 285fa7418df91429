//! The main job trains: loss falls and the replicas stay identical.

use burn::backend::Autodiff;
use burn_ndarray::{NdArray, NdArrayDevice};
use firemesh::train::{train_resnet, TrainArgs};
use firemesh_collective::PortableGroup;

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
    let group = PortableGroup::<NdArray>::new_shared(vec![NdArrayDevice::Cpu; 2]).unwrap();
    let report =
        train_resnet::<Autodiff<NdArray>, _>(vec![NdArrayDevice::Cpu; 2], group, &args).unwrap();
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
    let group = PortableGroup::<NdArray>::new_shared(vec![NdArrayDevice::Cpu; 2]).unwrap();
    let err = train_resnet::<Autodiff<NdArray>, _>(vec![NdArrayDevice::Cpu; 2], group, &args)
        .err()
        .unwrap();
    assert!(err.contains("multiple of the 2 ranks"), "{err}");
}
