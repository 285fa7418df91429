//! Sums across the processes of a world of 3 and 4 (threads joined by a `ThreadWorld`): a small
//! buffer crosses whole, a large one by blocks (each process sums its block, then the sums are
//! gathered). Either way every process holds the addends added in process order, bit for bit.

use crate::common::{Ref, CPU, S};
use burn::tensor::Tensor;
use firemesh_backend::{from_parts, redistribute, to_inner, Mesh, Placement};
use firemesh_world::{ProcessLink, ThreadWorld};
use std::sync::Arc;
use std::time::Duration;

/// Process `p`'s addend: values of many magnitudes, so that the order of the adds shows.
fn addend(p: usize, len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| {
            let x = ((i * 7919 + p * 104_729) % 10_007) as f32 / 10_007.0 - 0.5;
            x * [1.0, 3e-4, 1e3, 7e-8][(i + p) % 4]
        })
        .collect()
}

#[test]
fn sums_across_processes_add_in_process_order_whole_or_by_blocks() {
    // 7 and 40 000 f32: 28 B cross whole, 160 KB by blocks (uneven ones, for 40 001 over 4).
    for (processes, len) in [(3, 7), (3, 40_000), (4, 40_001)] {
        let addends: Vec<Vec<f32>> = (0..processes).map(|p| addend(p, len)).collect();
        let want: Vec<u32> = (0..len)
            .map(|i| {
                let sum = addends.iter().map(|a| a[i]).reduce(|a, b| a + b);
                sum.unwrap().to_bits()
            })
            .collect();
        let addends = &addends;
        let links = ThreadWorld::links(processes, Duration::from_secs(60));
        let got: Vec<Vec<u32>> = std::thread::scope(|s| {
            let handles: Vec<_> = links
                .into_iter()
                .map(|link| {
                    s.spawn(move || {
                        let p = link.process();
                        let link: Arc<dyn ProcessLink> = Arc::new(link);
                        let mesh = Mesh::in_world(vec![CPU], link).unwrap();
                        let part = Tensor::<Ref, 1>::from_floats(addends[p].as_slice(), &CPU);
                        let t = from_parts::<S, 1>(&mesh, vec![part], Placement::Partial).unwrap();
                        let summed = redistribute(t, Placement::Replicated);
                        let values = to_inner(summed, &CPU).into_data().to_vec::<f32>().unwrap();
                        values.iter().map(|v| v.to_bits()).collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (p, bits) in got.iter().enumerate() {
            let wrong = (0..len).filter(|&i| bits[i] != want[i]).count();
            assert_eq!(wrong, 0, "{processes} processes, {len} values: process {p}");
        }
    }
}
