//! Choosing the devices: `auto` prefers CUDA GPUs that can run kernels, else a CPU mesh, and
//! says why; bad rank counts are errors.

use firemesh::mesh::{DeviceMesh, MeshKind};

/// `auto` falls back to a CPU mesh and says why when CUDA cannot run kernels; an explicit
/// `cuda` mesh is an error with the same reason; zero ranks, or more than a CPU mesh has, is
/// an error.
#[test]
fn mesh_discovery_explains_its_choice() {
    match firemesh_collective::probe::usable_cuda_devices() {
        Ok(gpus) => {
            match DeviceMesh::discover(MeshKind::Auto, None, false).unwrap() {
                DeviceMesh::Cuda(d) => assert_eq!(d.len(), gpus.len()),
                other => panic!("GPUs present but auto chose {}", other.describe()),
            }
            let more = Some(gpus.len() + 1);
            assert!(matches!(
                DeviceMesh::discover(MeshKind::Cuda, more, false),
                Err(firemesh::Error::TooFewGpus { found, .. }) if found == gpus.len()
            ));
            assert!(DeviceMesh::discover(MeshKind::Cuda, more, true).is_ok());
        }
        Err(reason) => {
            let auto = DeviceMesh::discover(MeshKind::Auto, None, false).unwrap();
            assert!(matches!(auto, DeviceMesh::Cpu { ranks: 4, .. }));
            assert!(
                auto.describe().contains(&reason.to_string()),
                "{}",
                auto.describe()
            );
            let err = DeviceMesh::discover(MeshKind::Cuda, Some(2), false)
                .err()
                .unwrap();
            assert!(
                matches!(&err, firemesh::Error::Unavailable(why) if *why == reason),
                "{err}"
            );
        }
    }
    let cpu = DeviceMesh::discover(MeshKind::Cpu, Some(3), false).unwrap();
    assert_eq!(cpu.describe(), "a CPU mesh of 3 rank(s)");
    assert!(matches!(
        DeviceMesh::discover(MeshKind::Cpu, Some(0), false),
        Err(firemesh::Error::NoRanks)
    ));
    let err = DeviceMesh::discover(MeshKind::Cpu, Some(65), false)
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            firemesh::Error::TooManyRanks {
                asked: 65,
                most: 64,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.to_string(), "65 ranks: a CPU mesh has at most 64");
}
