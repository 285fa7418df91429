//! Bad input returns an error, never a panic or a hang.

use crate::common;

use burn_flex::{Flex, FlexDevice};
use burn_tensor::Tensor;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use firemesh_collective::{
    CollectiveError, Collectives, Communicator, DType, Group, PortableGroup, ReduceOp, Result,
};
use std::time::{Duration, Instant};

type B = Flex;

fn wgpu_group(n: usize) -> Option<Group<WgpuRuntime>> {
    Some(Group::new(common::wgpu_or_skip(n)?).unwrap())
}

#[test]
fn empty_group_and_duplicate_rank() {
    assert_eq!(
        Group::<WgpuRuntime>::new(vec![]).err(),
        Some(CollectiveError::EmptyGroup)
    );
    let Some(d) = common::wgpu_or_skip(2) else {
        return;
    };
    let err = Group::<WgpuRuntime>::new(vec![d[0].clone(), d[1].clone(), d[0].clone()])
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            CollectiveError::DuplicateRank {
                first: 0,
                second: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(Group::<WgpuRuntime>::new_shared(vec![d[0].clone(), d[0].clone()]).is_ok());
    assert_eq!(
        PortableGroup::<Flex>::new(vec![]).err(),
        Some(CollectiveError::EmptyGroup)
    );
    assert!(PortableGroup::<Flex>::new(vec![FlexDevice, FlexDevice]).is_err());
}

#[test]
fn missing_device_is_an_error() {
    let err = Group::<cubecl::cuda::CudaRuntime>::new(vec![cubecl::cuda::CudaDevice { index: 64 }])
        .err()
        .unwrap();
    assert!(
        matches!(err, CollectiveError::DeviceUnavailable { rank: 0, .. }),
        "{err}"
    );
    eprintln!("{err}");
    let err = Group::<WgpuRuntime>::new(vec![WgpuDevice::Existing(1_000_000)])
        .err()
        .unwrap();
    assert!(
        matches!(err, CollectiveError::DeviceUnavailable { rank: 0, .. }),
        "{err}"
    );
}

#[test]
fn mismatched_lengths_dtypes_ranks_and_roots() {
    let Some(g) = wgpu_group(3) else { return };
    let mut bufs: Vec<_> = (0..3)
        .map(|r| g.upload(r, DType::F32, &vec![1.0; 10 + r / 2]).unwrap())
        .collect();
    let err = g.all_reduce(&mut bufs, ReduceOp::Sum).unwrap_err();
    assert_eq!(
        err,
        CollectiveError::LengthMismatch {
            rank: 2,
            expected: 10,
            got: 11
        }
    );
    assert!(matches!(
        g.broadcast(&mut bufs, 0).unwrap_err(),
        CollectiveError::LengthMismatch { .. }
    ));

    let dtypes: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|&d| g.supports(0, d))
        .collect();
    if let Some(&other) = dtypes.iter().find(|&&d| d != DType::F32) {
        let mut mixed = vec![
            g.upload(0, DType::F32, &[1.0; 4]).unwrap(),
            g.upload(1, other, &[1.0; 4]).unwrap(),
            g.upload(2, DType::F32, &[1.0; 4]).unwrap(),
        ];
        let err = g.all_reduce(&mut mixed, ReduceOp::Sum).unwrap_err();
        assert!(
            matches!(err, CollectiveError::DTypeMismatch { rank: 1, .. }),
            "{err}"
        );
    }
    let mut two: Vec<_> = bufs[..2].to_vec();
    assert!(matches!(
        g.all_reduce(&mut two, ReduceOp::Sum).unwrap_err(),
        CollectiveError::WrongRankCount {
            expected: 3,
            got: 2
        }
    ));
    // Buffers given in the wrong rank order live on the wrong devices.
    let mut swapped = vec![bufs[1].clone(), bufs[0].clone(), bufs[2].clone()];
    assert!(matches!(
        g.all_gather(&swapped).unwrap_err(),
        CollectiveError::DeviceUnavailable { rank: 0, .. }
    ));
    // Places that do not fit the shards (rank 1 has 10 elements), overlap, name a fourth rank,
    // or reach past the result's end.
    let one_each = |blocks: &[(usize, usize)]| -> Vec<Vec<std::ops::Range<usize>>> {
        (blocks.iter())
            .map(|&(a, b)| std::iter::once(a..b).collect())
            .collect()
    };
    for (blocks, len) in [
        (one_each(&[(0, 10), (10, 19), (20, 31)]), 40),
        (one_each(&[(0, 10), (5, 15), (20, 31)]), 40),
        (one_each(&[(0, 10), (10, 20), (20, 31), (31, 31)]), 40),
        (one_each(&[(0, 10), (10, 20), (20, 31)]), 30),
    ] {
        assert_eq!(
            g.all_gather_placed(&bufs, &blocks, len).unwrap_err(),
            CollectiveError::BadPlaces {
                places: blocks.clone(),
                lens: vec![10, 10, 11],
                len
            }
        );
    }
    assert_eq!(
        g.broadcast(&mut swapped, 7).unwrap_err(),
        CollectiveError::BadRoot { root: 7, ranks: 3 }
    );
    assert!(matches!(
        g.upload(5, DType::F32, &[1.0]).unwrap_err(),
        CollectiveError::BadRank { rank: 5, ranks: 3 }
    ));
}

/// One rank passes a bad buffer: every rank gets the error.
#[test]
fn one_failing_rank_fails_every_rank() {
    let Some(g) = wgpu_group(4) else { return };
    let bufs: Vec<_> = (0..4)
        .map(|r| {
            g.upload(r, DType::F32, &vec![r as f64; if r == 2 { 5 } else { 8 }])
                .unwrap()
        })
        .collect();
    let comms = Communicator::split(g, Duration::from_secs(30));
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .zip(bufs)
            .map(|(c, b)| s.spawn(move || c.all_reduce(b, ReduceOp::Sum)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in results {
        assert_eq!(
            r.unwrap_err(),
            CollectiveError::LengthMismatch {
                rank: 2,
                expected: 8,
                got: 5
            }
        );
    }
}

/// One rank never arrives: the others return a timeout naming it, within the time limit.
/// Each of `comms` all-reduces a tensor of ones on its own thread; their results in order.
fn all_reduce_ones(comms: &[Communicator<PortableGroup<B>>]) -> Vec<Result<Tensor<B, 1>>> {
    std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                s.spawn(move || c.all_reduce(Tensor::<B, 1>::ones([4], &FlexDevice), ReduceOp::Sum))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn a_missing_rank_times_out_everywhere() {
    let g = PortableGroup::<B>::new_shared(vec![FlexDevice; 3]).unwrap();
    let comms = Communicator::split(g, Duration::from_millis(300));
    let start = Instant::now();
    let results = all_reduce_ones(&comms[..2]);
    assert!(start.elapsed() < Duration::from_secs(5));
    for r in results {
        assert!(
            matches!(r.unwrap_err(), CollectiveError::Timeout { ref missing, .. } if missing == &vec![2])
        );
    }
    // The group is usable again afterwards.
    for r in all_reduce_ones(&comms) {
        assert_eq!(
            r.unwrap().into_data().to_vec::<f32>().unwrap(),
            vec![3.0; 4]
        );
    }
}

#[test]
fn ranks_disagreeing_on_the_op_fail() {
    let g = PortableGroup::<B>::new_shared(vec![FlexDevice; 2]).unwrap();
    let comms = Communicator::split(g, Duration::from_secs(10));
    let results: Vec<_> = std::thread::scope(|s| {
        let a =
            s.spawn(|| comms[0].all_reduce(Tensor::<B, 1>::ones([4], &FlexDevice), ReduceOp::Sum));
        let b = s.spawn(|| comms[1].broadcast(Tensor::<B, 1>::ones([4], &FlexDevice), 0));
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    for r in results {
        assert!(matches!(
            r.unwrap_err(),
            CollectiveError::RankFailed { rank: 1, .. }
        ));
    }
}
