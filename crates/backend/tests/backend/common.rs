//! Shared by the op and training tests: the reference backend, meshes of N CPU ranks, inputs
//! put into every placement, and a comparison with a relative tolerance.
#![allow(dead_code)]

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor, TensorData};
use firemesh_backend::{from_parts, redistribute, Mesh, MeshBackend, Placement, Sharded};

pub type Ref = Flex;
pub type S = Sharded<Ref>;
pub type RefAd = Autodiff<Ref>;
pub type SAd = Autodiff<S>;

pub type Dev = FlexDevice;
pub const CPU: FlexDevice = FlexDevice;

pub fn mesh(ranks: usize) -> Mesh<FlexDevice> {
    Mesh::replicate(CPU, ranks).expect("a valid mesh")
}

/// How a test input is put on the mesh: a placement, or `Shard(d)` with the last rank's
/// block empty (what a loader's last batch can leave a rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Replicated,
    Partial,
    Shard(usize),
    ShardEmptyLast(usize),
}

/// The layouts a `rank`-dim input can take: every placement (shardings of dims shorter than
/// `ranks` skipped), and on two ranks or more each sharding with an empty last block.
pub fn placements(shape: &[usize], ranks: usize) -> Vec<Layout> {
    let mut out = vec![Layout::Replicated, Layout::Partial];
    for (d, len) in shape.iter().enumerate().take(2) {
        if *len >= ranks {
            out.push(Layout::Shard(d));
        }
        if ranks > 1 && *len >= ranks - 1 {
            out.push(Layout::ShardEmptyLast(d));
        }
    }
    out
}

/// Processes of the world meshes `check_op!` runs every op on too (threads joined by a
/// `ThreadWorld`), each with 1 and with 2 ranks.
pub const WORLD_PROCESSES: usize = 2;

/// One link per process of a fresh world of [`WORLD_PROCESSES`], taken by the threads that
/// stand in for them (each pops one).
pub fn world_links() -> std::sync::Mutex<Vec<firemesh_world::ThreadLink>> {
    let links =
        firemesh_world::ThreadWorld::links(WORLD_PROCESSES, std::time::Duration::from_secs(60));
    std::sync::Mutex::new(links)
}

/// A mesh of `ranks` CPU ranks as the share of one process (the thread that pops a link of
/// `links`) of its world.
pub fn world_mesh(
    ranks: usize,
    links: &std::sync::Mutex<Vec<firemesh_world::ThreadLink>>,
) -> Mesh<FlexDevice> {
    let link = links.lock().unwrap().pop().expect("a link per process");
    let link: std::sync::Arc<dyn firemesh_world::ProcessLink> = std::sync::Arc::new(link);
    Mesh::in_world(vec![CPU; ranks], link).expect("a world mesh")
}

/// The layouts of an input on a world of `processes` processes of `ranks` ranks: every
/// placement, a sharding only of a dim every process can hold an equal share of.
pub fn world_placements(shape: &[usize], processes: usize, ranks: usize) -> Vec<Layout> {
    let mut out = vec![Layout::Replicated, Layout::Partial];
    for (d, len) in shape.iter().enumerate().take(2) {
        if *len >= processes * ranks && len % processes == 0 {
            out.push(Layout::Shard(d));
        }
    }
    out
}

/// `t` on the mesh laid out as `layout`. A `Partial` value is split into N addends that are
/// not trivial: rank r holds the elements whose flat index is r mod N (N and r over the world,
/// on a mesh that is a process's share of one).
pub fn lift<Bk, const D: usize>(
    t: &Tensor<Ref, D>,
    mesh: &Mesh<FlexDevice>,
    layout: Layout,
) -> Tensor<Bk, D>
where
    Bk: MeshBackend<Inner = Ref>,
{
    let data = t.to_data();
    let n = mesh.world_len();
    let p = match layout {
        Layout::Replicated => Placement::Replicated,
        Layout::Partial => Placement::Partial,
        Layout::Shard(d) => Placement::Shard(d),
        Layout::ShardEmptyLast(d) if d < D && n > 1 => {
            let len = t.dims()[d];
            let mut start = 0;
            let parts = (0..n)
                .map(|r| {
                    let rows = if r + 1 == n {
                        0
                    } else {
                        len / (n - 1) + usize::from(r < len % (n - 1))
                    };
                    start += rows;
                    if rows == 0 {
                        let mut shape = t.dims();
                        shape[d] = 0;
                        Tensor::zeros(shape, &CPU)
                    } else {
                        t.clone().narrow(d, start - rows, rows)
                    }
                })
                .collect();
            return from_parts::<Bk, D>(mesh, parts, Placement::Shard(d)).expect("valid blocks");
        }
        Layout::ShardEmptyLast(_) => Placement::Replicated,
    };
    if p == Placement::Partial {
        let values: Vec<f32> = data.iter::<f32>().collect();
        let parts = (0..mesh.len())
            .map(|r| {
                let r = mesh.world_rank(r);
                let v: Vec<f32> = values
                    .iter()
                    .enumerate()
                    .map(|(i, x)| if i % n == r { *x } else { 0.0 })
                    .collect();
                Tensor::<Ref, D>::from_data(TensorData::new(v, data.shape.clone()), &CPU)
            })
            .collect();
        return from_parts::<Bk, D>(mesh, parts, p).expect("valid parts");
    }
    let whole = Tensor::<Bk, D>::from_data(data, mesh);
    if p == Placement::Replicated || usable(p, &t.dims(), mesh) {
        redistribute(whole, p)
    } else {
        whole
    }
}

/// Whether an input of `dims` can take placement `p` on `mesh`: a sharded dim needs a row per
/// rank, and an equal share for every process of a world.
fn usable(p: Placement, dims: &[usize], mesh: &Mesh<FlexDevice>) -> bool {
    match p {
        Placement::Shard(d) => dims
            .get(d)
            .is_some_and(|l| *l >= mesh.world_len() && l % mesh.processes() == 0),
        _ => true,
    }
}

/// Asserts `got` equals `want` within `rel` relative tolerance (exactly for ints and bools).
pub fn assert_close(got: TensorData, want: TensorData, rel: f64, ctx: &str) {
    assert_eq!(got.shape, want.shape, "{ctx}: shape");
    if want.dtype == DType::Bool(burn::tensor::BoolStore::Native)
        || matches!(want.dtype, DType::Bool(_))
    {
        assert_eq!(
            got.to_vec::<bool>().ok(),
            want.to_vec::<bool>().ok(),
            "{ctx}: values"
        );
        return;
    }
    let g: Vec<f64> = got.convert::<f64>().to_vec().expect("numeric");
    let w: Vec<f64> = want.convert::<f64>().to_vec().expect("numeric");
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let tol = rel * b.abs().max(1.0);
        assert!(
            (a - b).abs() <= tol || (a.is_nan() && b.is_nan()),
            "{ctx}: element {i}: got {a}, want {b}"
        );
    }
}

/// Seeded uniform data in [-1, 1) of `shape` on the reference backend.
pub fn rand<const D: usize>(shape: [usize; D], seed: u64) -> Tensor<Ref, D> {
    let n: usize = shape.iter().product();
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let v: Vec<f32> = (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_data(TensorData::new(v, shape), &CPU)
}

/// Runs `$body` on the reference backend and on `Sharded` meshes of 1..=4 ranks with every
/// placement of the first input (the other inputs either `Replicated` or placed alike), and
/// compares. Returns the number of fallbacks counted over all runs.
#[macro_export]
macro_rules! check_op {
    ($name:expr, [$first:ident $(, $rest:ident)*], $body:expr) => {
        check_op!($name, [$first $(, $rest)*], _dev, $body)
    };
    ($name:expr, [$first:ident $(, $rest:ident)*], $dev:ident, $body:expr) => {{
        let want = {
            let $first = $first.clone();
            let $dev = $first.device();
            $(let $rest = $rest.clone();)*
            $body.into_data()
        };
        let mut cases = Vec::new();
        for ranks in 1..=4 {
            let mesh = common::mesh(ranks);
            for p in common::placements(&$first.dims(), ranks) {
                for same in [false, true] {
                    let q = if same { p } else { common::Layout::Replicated };
                    let (got, counts) = firemesh_backend::stats::count(|| {
                        let $first = common::lift::<common::S, _>(&$first, &mesh, p);
                        let $dev = $first.device();
                        $(let $rest = common::lift::<common::S, _>(&$rest, &mesh, q);)*
                        $body.into_data()
                    });
                    let ctx = format!("{} with N={ranks}, first {p:?}, rest {q:?}", $name);
                    common::assert_close(got, want.clone(), 1e-5, &ctx);
                    cases.push(common::Case { ranks, first: p, rest: q, fallbacks: counts.total_fallbacks() });
                }
            }
        }
        // The same on worlds of processes (threads standing in for them), 1 and 2 ranks each:
        // every process must get the whole value, and count the same fallbacks.
        for ranks in 1..=2 {
            let layouts: Vec<(common::Layout, common::Layout)> =
                common::world_placements(&$first.dims(), common::WORLD_PROCESSES, ranks)
                    .into_iter()
                    .flat_map(|p| [(p, common::Layout::Replicated), (p, p)])
                    .collect();
            let links = common::world_links();
            let per_process: Vec<Vec<(burn::tensor::TensorData, u64)>> = std::thread::scope(|s| {
                let runs: Vec<_> = (0..common::WORLD_PROCESSES)
                    .map(|_| {
                        s.spawn(|| {
                            let mesh = common::world_mesh(ranks, &links);
                            layouts
                                .iter()
                                .map(|&(p, q)| {
                                    let _ = q; // the other inputs' layout, where there are some
                                    let (got, counts) = firemesh_backend::stats::count(|| {
                                        let $first = common::lift::<common::S, _>(&$first, &mesh, p);
                                        let $dev = $first.device();
                                        $(let $rest = common::lift::<common::S, _>(&$rest, &mesh, q);)*
                                        $body.into_data()
                                    });
                                    (got, counts.total_fallbacks())
                                })
                                .collect()
                        })
                    })
                    .collect();
                runs.into_iter().map(|r| r.join().expect("a process of the world")).collect()
            });
            for (process, results) in per_process.iter().enumerate() {
                for (i, ((p, q), (got, fallbacks))) in layouts.iter().zip(results).enumerate() {
                    let world = common::WORLD_PROCESSES;
                    let ctx = format!(
                        "{} on process {process} of a world of {world} x {ranks} ranks, first {p:?}, rest {q:?}",
                        $name
                    );
                    common::assert_close(got.clone(), want.clone(), 1e-5, &ctx);
                    assert_eq!(*fallbacks, per_process[0][i].1, "{ctx}: fallbacks against process 0");
                }
            }
            for ((p, q), (_, fallbacks)) in layouts.iter().zip(&per_process[0]) {
                cases.push(common::Case {
                    ranks: common::WORLD_PROCESSES * ranks,
                    first: *p,
                    rest: *q,
                    fallbacks: *fallbacks,
                });
            }
        }
        common::Fallbacks { op: $name, cases }
    }};
}

/// One run of an op in `check_op!`: its mesh, the layouts of its inputs, and how many of its
/// primitive ops fell back to running replicated.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub ranks: usize,
    pub first: Layout,
    pub rest: Layout,
    pub fallbacks: u64,
}

/// The fallbacks of every run of one op.
pub struct Fallbacks {
    pub op: &'static str,
    pub cases: Vec<Case>,
}

impl Fallbacks {
    pub fn total(&self) -> u64 {
        self.cases.iter().map(|c| c.fallbacks).sum()
    }

    /// The op's rule keeps every layout it is given: no run falls back.
    pub fn none(&self) {
        self.only_where(|_| false, "no layout");
    }

    /// Runs fall back exactly where `needs` says the rule cannot keep the inputs' layout
    /// (`what` says which those are), and in every such run.
    pub fn only_where(&self, needs: impl Fn(&Case) -> bool, what: &str) {
        for c in &self.cases {
            let falls_back = c.fallbacks > 0;
            assert_eq!(
                falls_back,
                needs(c),
                "{}: {} fallback(s) with N={}, first {:?}, rest {:?}; expected fallbacks for {what}",
                self.op,
                c.fallbacks,
                c.ranks,
                c.first,
                c.rest,
            );
        }
    }
}

impl Layout {
    /// Split along `dim`, with or without an empty last block (on one rank too: the rules do
    /// not tell one rank's block from the whole).
    pub fn splits(self, dim: usize) -> bool {
        matches!(self, Layout::Shard(d) | Layout::ShardEmptyLast(d) if d == dim)
    }
}

/// Every float parameter, flattened, in visiting order.
struct Params(Vec<Vec<f32>>);

impl<B: Backend> ModuleVisitor<B> for Params {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let data = param.val().into_data().convert::<f32>();
        self.0.push(data.to_vec().expect("f32 data"));
    }
}

pub fn params<B: Backend, M: Module<B>>(m: &M) -> Vec<Vec<f32>> {
    let mut v = Params(Vec::new());
    m.visit(&mut v);
    v.0
}

/// Flex's generator and the meshes' random streams are one per process: tests that seed
/// them and draw run one at a time.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Builds the reference and the sharded model from the same random draws. Flex's generator
/// is global and both backends draw from it, so the inits hold a lock and reseed it.
/// Burn initializes parameters lazily, so both are visited (which draws them) under the lock.
pub fn same_init<A: Module<RefAd>, C: Module<SAd>>(
    seed: u64,
    reference: impl FnOnce() -> A,
    sharded: impl FnOnce() -> C,
) -> (A, C) {
    let _guard = serial();
    RefAd::seed(&CPU, seed);
    let a = reference();
    params(&a);
    RefAd::seed(&CPU, seed);
    let c = sharded();
    params(&c);
    (a, c)
}

/// The largest difference between two parameter lists, relative to magnitudes above 1.
pub fn largest_difference(got: &[Vec<f32>], want: &[Vec<f32>]) -> f32 {
    assert_eq!(got.len(), want.len());
    let mut worst = 0f32;
    for (g, w) in got.iter().zip(want) {
        for (a, b) in g.iter().zip(w) {
            worst = worst.max((a - b).abs() / b.abs().max(1.0));
        }
    }
    worst
}

pub fn assert_params_close(got: &[Vec<f32>], want: &[Vec<f32>], tol: f32) {
    let worst = largest_difference(got, want);
    println!("largest parameter difference: {worst:e}");
    assert!(worst <= tol, "parameters differ by {worst}");
}

/// The usable CUDA GPUs, or `None` (said why) where there are none; `FIREMESH_REQUIRE_CUDA=1`,
/// as `scripts/gpu-check.sh` sets, makes their absence a failure.
pub fn cuda_gpus() -> Option<Vec<cubecl::cuda::CudaDevice>> {
    match firemesh_collective::probe::usable_cuda_devices() {
        Ok(gpus) => Some(gpus),
        Err(reason) if std::env::var("FIREMESH_REQUIRE_CUDA").is_ok_and(|v| v == "1") => {
            panic!("FIREMESH_REQUIRE_CUDA=1 but {reason}")
        }
        Err(reason) => {
            eprintln!("SKIPPED: {reason}");
            None
        }
    }
}
