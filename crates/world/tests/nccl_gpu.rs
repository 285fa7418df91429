//! The NCCL link on a real GPU: a world of this one process joins, gathers and fails as a
//! world of several does. Skipped with a message where there is no GPU or no NCCL
//! (`FIREMESH_REQUIRE_CUDA=1` fails instead, as the GPU check runs it). A world of two
//! processes needs two GPUs: NCCL refuses two ranks of one communicator on one GPU.

use firemesh_world::nccl::{gpu_uuid, version, NcclLink, UniqueId};
use firemesh_world::ProcessLink;
use std::time::Duration;

/// NCCL's version, or `None` (and why, printed) where this machine cannot run the test.
fn nccl_here() -> Option<String> {
    let required = std::env::var("FIREMESH_REQUIRE_CUDA").is_ok_and(|v| v == "1");
    let why = match (version(), gpu_uuid(0)) {
        (Ok(v), Ok(_)) => return Some(v),
        (Err(e), _) | (_, Err(e)) => e,
    };
    assert!(!required, "FIREMESH_REQUIRE_CUDA=1, but: {why}");
    println!("skipped: {why}");
    None
}

#[test]
fn a_world_of_one_process_gathers_its_own_bytes_through_nccl() {
    let Some(v) = nccl_here() else { return };
    let uuid = gpu_uuid(0).unwrap();
    assert!(uuid.starts_with("GPU-") && uuid.len() == 36, "{uuid}");
    let id = UniqueId::new().unwrap();
    let link = NcclLink::connect(0, 0, 1, id, Duration::from_secs(60)).unwrap();
    assert_eq!((link.process(), link.processes()), (0, 1));
    let big: Vec<u8> = (0..5_000_003u32).map(|i| (i * 7 % 251) as u8).collect();
    for bytes in [&b"abc"[..], &b""[..], &big[..]] {
        assert_eq!(link.all_gather(bytes).unwrap(), vec![bytes.to_vec()]);
    }
    // A world of one process: its all-to-all is its own part, which stays on the host.
    assert_eq!(
        link.all_to_all(b"abc", &[3], &[3]).unwrap(),
        vec![b"abc".to_vec()]
    );
    assert!(link.all_to_all(b"abc", &[2], &[2]).is_err());
    assert!(link.has_all_to_all());
    println!("NCCL {v} on {uuid}: gathered 3 B, 0 B and 5 MB");
}

/// A link with a side channel: two communicators, each gathering on its own thread at once.
#[test]
fn a_side_channel_gathers_beside_the_link() {
    if nccl_here().is_none() {
        return;
    }
    let timeout = Duration::from_secs(60);
    let join = || NcclLink::connect(0, 0, 1, UniqueId::new().unwrap(), timeout).unwrap();
    let link = join().with_side_channel(join()).unwrap();
    let side = link.side_channel().expect("a side channel");
    assert!(side.side_channel().is_none());
    let beside = std::thread::spawn(move || {
        (0..50u32)
            .map(|i| side.all_gather(&i.to_le_bytes()).unwrap())
            .collect::<Vec<_>>()
    });
    for i in 0..50u32 {
        let bytes = vec![i as u8; 1000 + i as usize];
        assert_eq!(link.all_gather(&bytes).unwrap(), vec![bytes]);
    }
    for (i, got) in beside.join().unwrap().into_iter().enumerate() {
        assert_eq!(got, vec![(i as u32).to_le_bytes().to_vec()]);
    }
    println!("NCCL: 50 gathers on a link and 50 on its side channel, at once");
}

#[test]
fn a_join_whose_other_process_never_comes_fails_within_its_timeout() {
    if nccl_here().is_none() {
        return;
    }
    let id = UniqueId::new().unwrap();
    let start = std::time::Instant::now();
    let err = NcclLink::connect(0, 0, 2, id, Duration::from_secs(3))
        .err()
        .expect("process 1 never joins");
    assert!(err.to_string().contains("within 3 s"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}
