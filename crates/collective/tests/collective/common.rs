//! The collective test suite, written once and run against every group kind
//! (CubeCL devices over lavapipe, the portable path over Flex).
#![allow(dead_code)]

use firemesh_collective::{
    shard_ranges, Algorithm, CollectiveConfig, Collectives, DType, ReduceOp, Transfer,
};

/// How a suite makes groups and moves data in and out of them.
pub trait Harness {
    type G: Collectives;
    /// A group of `n` ranks with `config`, or `None` (with a printed reason) when unavailable.
    fn group(&self, n: usize, config: CollectiveConfig) -> Option<Self::G>;
    fn dtypes(&self, group: &Self::G) -> Vec<DType>;
    fn upload(
        &self,
        group: &Self::G,
        rank: usize,
        dtype: DType,
        values: &[f64],
    ) -> <Self::G as Collectives>::Buf;
    fn download(&self, group: &Self::G, buf: &<Self::G as Collectives>::Buf) -> Vec<f64>;
}

/// Integer-valued inputs in [-15, 15]: every partial sum is exact in every dtype, so sums and
/// maxima must be exact whatever the reduction order.
pub fn integer_input(rank: usize, len: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i * 7 + rank * 13 + i / 5) % 31) as f64 - 15.0)
        .collect()
}

/// Non-integer inputs for the rounding-tolerance check.
pub fn real_input(rank: usize, len: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i as f64 * 0.37 + rank as f64 * 1.91).sin() * 3.0) + 0.001 * rank as f64)
        .collect()
}

pub fn round_to(dtype: DType, values: &[f64]) -> Vec<f64> {
    dtype.decode(&dtype.encode(values))
}

/// f64 reference of `op` over the (already rounded) inputs.
pub fn reference(op: ReduceOp, inputs: &[Vec<f64>]) -> Vec<f64> {
    let n = inputs.len();
    (0..inputs[0].len())
        .map(|i| {
            let vals = inputs.iter().map(|v| v[i]);
            match op {
                ReduceOp::Sum => vals.sum(),
                ReduceOp::Mean => vals.sum::<f64>() / n as f64,
                ReduceOp::Max => vals.fold(f64::NEG_INFINITY, f64::max),
            }
        })
        .collect()
}

/// Exact up to the final rounding into `dtype` (mean on half types may round twice: 1 ulp).
pub fn assert_exact(what: &str, dtype: DType, op: ReduceOp, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let want = round_to(dtype, want);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let slack = if op == ReduceOp::Mean && dtype != DType::F32 {
            w.abs() * dtype.epsilon()
        } else {
            0.0
        };
        assert!(
            (g - w).abs() <= slack,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// Within the rounding error of summing `n` terms in `dtype` (with f32 accumulation).
pub fn assert_close(
    what: &str,
    dtype: DType,
    n: usize,
    got: &[f64],
    want: &[f64],
    magnitude: &[f64],
) {
    for (i, ((g, w), m)) in got.iter().zip(want).zip(magnitude).enumerate() {
        let tol = (n as f64 + 1.0) * dtype.epsilon() * m.max(w.abs()) + 1e-30;
        assert!(
            (g - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w} (tol {tol})"
        );
    }
}

pub const OPS: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max];
pub const ALGORITHMS: [Algorithm; 2] = [Algorithm::Ring, Algorithm::OneShot];

/// The lengths the issue names for a group of `n`: 0, 1, N-1, N+1 and a prime.
pub fn lengths(n: usize) -> Vec<usize> {
    let mut l = vec![0, 1, n.saturating_sub(1), n + 1, 257];
    l.dedup();
    l
}

fn upload_all<H: Harness>(
    h: &H,
    g: &H::G,
    dtype: DType,
    inputs: &[Vec<f64>],
) -> Vec<<H::G as Collectives>::Buf> {
    inputs
        .iter()
        .enumerate()
        .map(|(r, v)| h.upload(g, r, dtype, v))
        .collect()
}

/// Every rank's buffer `outs[r]` reads as `want(r)`, exact up to the final rounding.
fn assert_every_rank<'w, H: Harness>(
    h: &H,
    g: &H::G,
    outs: &[<H::G as Collectives>::Buf],
    what: &str,
    dtype: DType,
    op: ReduceOp,
    want: impl Fn(usize) -> &'w [f64],
) {
    for (r, out) in outs.iter().enumerate() {
        let what = format!("{what} rank {r}");
        assert_exact(&what, dtype, op, &h.download(g, out), want(r));
    }
}

/// all-reduce of integer inputs is exact for every op, on every rank.
pub fn check_all_reduce<H: Harness>(h: &H, g: &H::G, dtype: DType, len: usize, op: ReduceOp) {
    let n = g.size();
    let inputs: Vec<Vec<f64>> = (0..n).map(|r| integer_input(r, len)).collect();
    let want = reference(op, &inputs);
    let mut bufs = upload_all(h, g, dtype, &inputs);
    g.all_reduce(&mut bufs, op).expect("all_reduce");
    let what = format!("all_reduce {op:?} {dtype:?} n={n} len={len}");
    assert_every_rank(h, g, &bufs, &what, dtype, op, |_| &want);
}

pub fn check_reduce_scatter<H: Harness>(h: &H, g: &H::G, dtype: DType, len: usize, op: ReduceOp) {
    let n = g.size();
    let inputs: Vec<Vec<f64>> = (0..n).map(|r| integer_input(r, len)).collect();
    let want = reference(op, &inputs);
    let mut bufs = upload_all(h, g, dtype, &inputs);
    let outs = g.reduce_scatter(&mut bufs, op).expect("reduce_scatter");
    let parts = shard_ranges(len, n);
    let what = format!("reduce_scatter {op:?} {dtype:?} n={n} len={len}");
    assert_every_rank(h, g, &outs, &what, dtype, op, |r| &want[parts[r].clone()]);
}

/// Shards of uneven lengths (rank r holds len + r elements, rank 0 possibly none).
pub fn check_all_gather<H: Harness>(h: &H, g: &H::G, dtype: DType, len: usize) {
    let n = g.size();
    let inputs: Vec<Vec<f64>> = (0..n).map(|r| integer_input(r, len + r % 3)).collect();
    let want: Vec<f64> = inputs.iter().flatten().copied().collect();
    let shards = upload_all(h, g, dtype, &inputs);
    let outs = g.all_gather(&shards).expect("all_gather");
    let what = format!("all_gather {dtype:?} n={n} len={len}");
    assert_every_rank(h, g, &outs, &what, dtype, ReduceOp::Sum, |_| &want);
}

/// Three tensors' row blocks per rank (of uneven lengths, some empty), gathered tensor after
/// tensor with 7 elements of padding between them: every block lands in its place on every
/// rank.
pub fn check_all_gather_placed<H: Harness>(h: &H, g: &H::G, dtype: DType, len: usize) {
    check_placed(h, g, dtype, len, 3, false);
}

/// `items` tensors' row blocks per rank gathered tensor after tensor (padding between them),
/// each rank's blocks listed in item order or, `shuffled`, odd ranks' in reverse.
pub fn check_placed<H: Harness>(
    h: &H,
    g: &H::G,
    dtype: DType,
    len: usize,
    items: usize,
    shuffled: bool,
) {
    let n = g.size();
    let lens: Vec<Vec<usize>> = (0..items)
        .map(|i| (0..n).map(|r| (len + i + r) % (len + 2)).collect())
        .collect();
    let mut places: Vec<Vec<std::ops::Range<usize>>> = vec![Vec::new(); n];
    let mut at = 0;
    for of_item in &lens {
        for (r, &l) in of_item.iter().enumerate() {
            places[r].push(at..at + l);
            at += l;
        }
        at += 7;
    }
    if shuffled {
        places
            .iter_mut()
            .skip(1)
            .step_by(2)
            .for_each(|p| p.reverse());
    }
    let inputs: Vec<Vec<f64>> = (0..n)
        .map(|r| integer_input(r, places[r].iter().map(|p| p.len()).sum()))
        .collect();
    let shards = upload_all(h, g, dtype, &inputs);
    let outs = g
        .all_gather_placed(&shards, &places, at)
        .expect("all_gather_placed");
    for (rank, out) in outs.iter().enumerate() {
        let got = h.download(g, out);
        assert_eq!(
            got.len(),
            at,
            "all_gather_placed n={n} len={len} rank {rank}"
        );
        for (r, of_rank) in places.iter().enumerate() {
            let mut from = 0;
            for place in of_rank {
                let what = format!("all_gather_placed {dtype:?} n={n} len={len}: rank {rank}'s copy of rank {r}'s block at {place:?}");
                let want = &inputs[r][from..from + place.len()];
                assert_exact(&what, dtype, ReduceOp::Sum, &got[place.clone()], want);
                from += place.len();
            }
        }
    }
}

pub fn check_broadcast<H: Harness>(h: &H, g: &H::G, dtype: DType, len: usize, root: usize) {
    let n = g.size();
    let inputs: Vec<Vec<f64>> = (0..n).map(|r| integer_input(r, len)).collect();
    let mut bufs = upload_all(h, g, dtype, &inputs);
    g.broadcast(&mut bufs, root).expect("broadcast");
    let what = format!("broadcast root {root} {dtype:?} n={n} len={len}");
    assert_every_rank(h, g, &bufs, &what, dtype, ReduceOp::Sum, |_| &inputs[root]);
}

/// Every op × dtype × length of the issue, for N = 1..=8, with both algorithms forced.
pub fn run_matrix<H: Harness>(h: &H, max_n: usize) {
    for algorithm in ALGORITHMS {
        for n in 1..=max_n {
            let Some(g) = h.group(n, CollectiveConfig::with_algorithm(algorithm)) else {
                return;
            };
            for dtype in h.dtypes(&g) {
                for len in lengths(n) {
                    for op in OPS {
                        check_all_reduce(h, &g, dtype, len, op);
                        check_reduce_scatter(h, &g, dtype, len, op);
                    }
                    check_all_gather(h, &g, dtype, len);
                    check_all_gather_placed(h, &g, dtype, len);
                    check_broadcast(h, &g, dtype, len, n - 1);
                    check_broadcast(h, &g, dtype, len, 0);
                }
            }
        }
    }
}

/// The placed all-gather of many small blocks cut into many pieces (4-byte sub-chunks), its
/// transfers on threads (no size floor), odd ranks' blocks listed in reverse, for N = 2..=8
/// and both algorithms.
pub fn run_placed_in_pieces<H: Harness>(h: &H) {
    for algorithm in ALGORITHMS {
        for n in 2..=8 {
            let config = CollectiveConfig {
                min_subchunk_bytes: 4,
                parallel_transfer_bytes: 0,
                pipeline_depth: 4,
                ..CollectiveConfig::with_algorithm(algorithm)
            };
            let Some(g) = h.group(n, config) else {
                return;
            };
            check_placed(h, &g, DType::F32, 300, 12, true);
        }
    }
}

/// Sources written in place as soon as a collective has returned (here by a second collective)
/// leave its results unchanged, for both algorithms: a transfer that reads its source after the
/// call returned must read a copy taken before.
pub fn run_sources_rewritten_after_return<H: Harness>(h: &H, n: usize, len: usize) {
    for algorithm in ALGORITHMS {
        let Some(g) = h.group(n, CollectiveConfig::with_algorithm(algorithm)) else {
            return;
        };
        let inputs: Vec<Vec<f64>> = (0..n).map(|r| integer_input(r, len)).collect();
        let mut shards = upload_all(h, &g, DType::F32, &inputs);
        let gathered = g.all_gather(&shards).expect("all_gather");
        g.all_reduce(&mut shards, ReduceOp::Sum)
            .expect("all_reduce");
        let want: Vec<f64> = inputs.iter().flatten().copied().collect();
        let what = format!("all_gather {algorithm:?} n={n} len={len}, then its shards summed");
        assert_every_rank(h, &g, &gathered, &what, DType::F32, ReduceOp::Sum, |_| {
            &want
        });
        let sums = reference(ReduceOp::Sum, &inputs);
        assert_every_rank(h, &g, &shards, &what, DType::F32, ReduceOp::Sum, |_| &sums);
    }
}

/// Non-integer data: results within the rounding error of the dtype.
pub fn run_rounding<H: Harness>(h: &H, n: usize, len: usize) {
    for algorithm in ALGORITHMS {
        let Some(g) = h.group(n, CollectiveConfig::with_algorithm(algorithm)) else {
            return;
        };
        for dtype in h.dtypes(&g) {
            let inputs: Vec<Vec<f64>> = (0..n)
                .map(|r| round_to(dtype, &real_input(r, len)))
                .collect();
            let magnitude = reference(
                ReduceOp::Sum,
                &inputs
                    .iter()
                    .map(|v| v.iter().map(|x| x.abs()).collect())
                    .collect::<Vec<_>>(),
            );
            for op in [ReduceOp::Sum, ReduceOp::Mean] {
                let want = reference(op, &inputs);
                let mut bufs = upload_all(h, &g, dtype, &inputs);
                g.all_reduce(&mut bufs, op).expect("all_reduce");
                let first = h.download(&g, &bufs[0]);
                for b in &bufs {
                    // Every rank holds the same bits: replicas never drift apart.
                    assert_eq!(
                        h.download(&g, b),
                        first,
                        "{op:?} {dtype:?} {algorithm:?}: ranks disagree"
                    );
                }
                assert_close(
                    &format!("{op:?} {dtype:?} {algorithm:?}"),
                    dtype,
                    n,
                    &first,
                    &want,
                    &magnitude,
                );
            }
        }
    }
}

/// One large message (≥ 4M elements) through every op with the automatic algorithm choice.
pub fn run_large<H: Harness>(h: &H, n: usize, len: usize, dtype: DType) {
    let Some(g) = h.group(n, CollectiveConfig::default()) else {
        return;
    };
    if !h.dtypes(&g).contains(&dtype) {
        return;
    }
    for op in OPS {
        check_all_reduce(h, &g, dtype, len, op);
    }
    check_reduce_scatter(h, &g, dtype, len, ReduceOp::Sum);
    check_all_gather(h, &g, dtype, len / n);
    check_broadcast(h, &g, dtype, len, n / 2);
}

/// What a suite runs on, or `None` after printing why it is missing (`hint` says how to get
/// it). CI sets `{require}=1` where it installed what the suite needs, turning a skip into a
/// failure.
pub fn or_skip<T>(
    found: Result<T, firemesh_collective::Unavailable>,
    require: &str,
    hint: &str,
) -> Option<T> {
    match found {
        Ok(found) => Some(found),
        Err(reason) if std::env::var(require).is_ok_and(|v| v == "1") => {
            panic!("{require}=1 but {reason}")
        }
        Err(reason) => {
            eprintln!("SKIPPED: {reason}{hint}");
            None
        }
    }
}

/// `n` wgpu devices, or `None` after printing why they are unavailable.
pub fn wgpu_or_skip(n: usize) -> Option<Vec<cubecl::wgpu::WgpuDevice>> {
    or_skip(
        firemesh_collective::wgpu_devices::wgpu_devices(n),
        "FIREMESH_REQUIRE_WGPU",
        "; install mesa-vulkan-drivers to run the kernel tests",
    )
}

/// The harness of [`firemesh_collective::Group`] on any CubeCL runtime: `devices(n)` provides
/// the ranks' devices (or `None` to skip), `new_shared` lets several ranks share one device,
/// and every group's config asks for `transfer`.
pub struct DeviceHarness<R: firemesh_collective::CollectiveRuntime> {
    pub devices: fn(usize) -> Option<Vec<R::Device>>,
    pub shared: bool,
    pub transfer: Transfer,
    /// Ranks on one CUDA device copy as two GPUs would (`CollectiveConfig::one_device_as_peers`).
    pub one_device_as_peers: bool,
}

impl<R: firemesh_collective::CollectiveRuntime> Harness for DeviceHarness<R> {
    type G = firemesh_collective::Group<R>;

    fn group(&self, n: usize, config: CollectiveConfig) -> Option<Self::G> {
        let devices = (self.devices)(n)?;
        let config = CollectiveConfig {
            transfer: self.transfer,
            one_device_as_peers: self.one_device_as_peers,
            ..config
        };
        let group = if self.shared {
            Self::G::new_shared(devices)
        } else {
            Self::G::new(devices)
        };
        Some(
            group
                .expect("group of available devices")
                .with_config(config),
        )
    }

    fn dtypes(&self, g: &Self::G) -> Vec<DType> {
        DType::ALL
            .into_iter()
            .filter(|&d| g.supports(0, d))
            .collect()
    }

    fn upload(
        &self,
        g: &Self::G,
        rank: usize,
        dtype: DType,
        values: &[f64],
    ) -> firemesh_collective::DeviceBuffer<R> {
        g.upload(rank, dtype, values).expect("upload")
    }

    fn download(&self, g: &Self::G, buf: &firemesh_collective::DeviceBuffer<R>) -> Vec<f64> {
        g.download(buf).expect("download")
    }
}

/// The four collectives on Burn tensors of rank 2 and 3 through a [`TensorCollectives`] group,
/// checked against host references. `devices[r]` is rank r's device.
pub fn check_tensor_ops<B, G>(g: &G, devices: &[B::Device])
where
    B: burn_tensor::backend::Backend,
    G: firemesh_collective::TensorCollectives<B>,
{
    use burn_tensor::{Tensor, TensorData};
    let n = devices.len();
    let make = |r: usize, dims: [usize; 2]| -> (Vec<f64>, Tensor<B, 2>) {
        let v = integer_input(r, dims[0] * dims[1]);
        let t = Tensor::from_data(
            TensorData::new(v.iter().map(|&x| x as f32).collect(), dims),
            &devices[r],
        );
        (v, t)
    };
    let host =
        |t: Tensor<B, 2>| -> Vec<f64> { t.into_data().convert::<f64>().to_vec::<f64>().unwrap() };

    // all-reduce, max
    let (vals, ts): (Vec<_>, Vec<_>) = (0..n).map(|r| make(r, [7, 3])).unzip();
    let want = reference(ReduceOp::Max, &vals);
    for t in g.all_reduce_tensors(ts, ReduceOp::Max).unwrap() {
        assert_eq!(t.dims(), [7, 3]);
        assert_eq!(host(t), want);
    }
    // reduce-scatter by rows: rank r gets rows shard_ranges(7, n)[r] of the sum
    let (vals, ts): (Vec<_>, Vec<_>) = (0..n).map(|r| make(r, [7, 3])).unzip();
    let want = reference(ReduceOp::Sum, &vals);
    for (t, rows) in g
        .reduce_scatter_tensors(ts, ReduceOp::Sum)
        .unwrap()
        .into_iter()
        .zip(shard_ranges(7, n))
    {
        assert_eq!(t.dims(), [rows.len(), 3]);
        assert_eq!(host(t), want[rows.start * 3..rows.end * 3]);
    }
    // all-gather of uneven row blocks
    let (vals, ts): (Vec<_>, Vec<_>) = (0..n).map(|r| make(r, [r + 1, 3])).unzip();
    let want: Vec<f64> = vals.concat();
    let rows = n * (n + 1) / 2;
    for t in g.all_gather_tensors(ts).unwrap() {
        assert_eq!(t.dims(), [rows, 3]);
        assert_eq!(host(t), want);
    }
    // broadcast from the last rank
    let (vals, ts): (Vec<_>, Vec<_>) = (0..n).map(|r| make(r, [2, 5])).unzip();
    for t in g.broadcast_tensors(ts, n - 1).unwrap() {
        assert_eq!(host(t), vals[n - 1]);
    }
    // shapes must agree
    let ts: Vec<_> = (0..n).map(|r| make(r, [2 + r % 2, 3]).1).collect();
    if n > 1 {
        let err = g.all_reduce_tensors(ts, ReduceOp::Sum).unwrap_err();
        assert!(
            matches!(
                err,
                firemesh_collective::CollectiveError::ShapeMismatch { rank: 1, .. }
            ),
            "{err}"
        );
    }
}

/// Each rank's input is uploaded on that rank's own thread (its own CubeCL stream, where the
/// upload may still be in flight when the thread ends), the all-reduce runs from this thread,
/// and each rank's result is read on its own thread again: transfers must wait for work other
/// threads queued on their sources, and results must be complete before other threads read.
pub fn run_inputs_from_other_threads<H>(h: &H, n: usize, len: usize)
where
    H: Harness + Sync,
    H::G: Sync,
    <H::G as Collectives>::Buf: Send + Sync,
{
    let Some(g) = h.group(n, CollectiveConfig::default()) else {
        return;
    };
    let inputs: Vec<Vec<f64>> = (0..n).map(|r| integer_input(r, len)).collect();
    let mut bufs: Vec<_> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|r| {
                let (g, inputs) = (&g, &inputs);
                s.spawn(move || h.upload(g, r, DType::F32, &inputs[r]))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    g.all_reduce(&mut bufs, ReduceOp::Sum).expect("all_reduce");
    let want = reference(ReduceOp::Sum, &inputs);
    std::thread::scope(|s| {
        for (r, b) in bufs.iter().enumerate() {
            let (g, want) = (&g, &want);
            s.spawn(move || {
                let got = h.download(g, b);
                assert_exact(
                    &format!("all_reduce of inputs uploaded on other threads, rank {r}"),
                    DType::F32,
                    ReduceOp::Sum,
                    &got,
                    want,
                )
            });
        }
    });
}
