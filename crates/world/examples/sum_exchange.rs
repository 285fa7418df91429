//! The two ways a sum crosses the processes of a world, timed side by side in one run: whole
//! (every process all-gathers every buffer and adds them all) and by blocks (an all-to-all
//! gives process q block q of every buffer, it adds them, and an all-gather shares the sums).
//! Both add each element in process order: the example checks they agree bit for bit.
//!
//!   cargo build --release -p firemesh-world --features mpi --example sum_exchange
//!   mpirun -np 4 target/release/examples/sum_exchange [REPEATS]
//!
//! Process 0 prints one line per buffer size (median over REPEATS, alternating the two) and a
//! JSON line of each to standard output.

use firemesh_world::mpi::Mpi;
use firemesh_world::ProcessLink;
use std::time::{Duration, Instant};

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

fn bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Adds `buffers` element by element, in their order.
fn add_in_order(buffers: Vec<Vec<f32>>) -> Vec<f32> {
    let mut it = buffers.into_iter();
    let mut sum = it.next().expect("a world has a process 0");
    for b in it {
        sum.iter_mut().zip(b).for_each(|(s, x)| *s += x);
    }
    sum
}

fn whole(link: &dyn ProcessLink, mine: &[f32]) -> Vec<f32> {
    let all = link.all_gather(&bytes(mine)).expect("an all-gather");
    add_in_order(all.iter().map(|b| floats(b)).collect())
}

fn by_blocks(link: &dyn ProcessLink, mine: &[f32]) -> Vec<f32> {
    let (n, me) = (link.processes(), link.process());
    let block = |q: usize| q * mine.len() / n..(q + 1) * mine.len() / n;
    let send_lens: Vec<usize> = (0..n).map(|q| block(q).len() * 4).collect();
    let got = link
        .all_to_all(&bytes(mine), &send_lens, &vec![block(me).len() * 4; n])
        .expect("an all-to-all");
    let sum = add_in_order(got.iter().map(|b| floats(b)).collect());
    let all = link.all_gather(&bytes(&sum)).expect("an all-gather");
    floats(&all.concat())
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let repeats: usize = std::env::args()
        .nth(1)
        .map_or(7, |a| a.parse().expect("REPEATS: a number"));
    let mpi = Mpi::init(Duration::from_secs(300)).expect("MPI");
    let link = mpi.link();
    let (n, me) = (link.processes(), link.process());
    for kib in [64usize, 1024, 4096, 16384] {
        let len = kib * 256;
        let mine: Vec<f32> = (0..len)
            .map(|i| ((i * 31 + me * 7) % 1000) as f32 * [1.0, 1e-4, 1e3][i % 3])
            .collect();
        let (mut t_whole, mut t_blocks) = (Vec::new(), Vec::new());
        for r in 0..repeats {
            let time = |f: &dyn Fn() -> Vec<f32>| {
                link.all_gather(&[]).expect("a barrier");
                let start = Instant::now();
                let out = f();
                (start.elapsed().as_secs_f64(), out)
            };
            let ((tw, w), (tb, b)) = if r % 2 == 0 {
                let w = time(&|| whole(&*link, &mine));
                (w, time(&|| by_blocks(&*link, &mine)))
            } else {
                let b = time(&|| by_blocks(&*link, &mine));
                (time(&|| whole(&*link, &mine)), b)
            };
            assert!(
                w.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "the two ways disagree"
            );
            t_whole.push(tw);
            t_blocks.push(tb);
        }
        let (w, b) = (median(t_whole), median(t_blocks));
        if me == 0 {
            println!(
                "{n} processes, {kib} KiB: whole {:.2} ms, by blocks {:.2} ms, blocks/whole {:.2}",
                w * 1e3,
                b * 1e3,
                b / w
            );
            println!(
                "{{\"processes\":{n},\"kib\":{kib},\"repeats\":{repeats},\"whole_ms\":{:.3},\"blocks_ms\":{:.3},\"ratio\":{:.3}}}",
                w * 1e3,
                b * 1e3,
                b / w
            );
        }
    }
}
