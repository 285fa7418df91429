//! A world of processes (`Mesh::in_world`), its processes stood in by threads joined by a
//! `ThreadWorld`: 2 processes x 2 ranks train as 1 process x 4 ranks does (the world's global
//! batch, BatchNorm over all of it, one loss), and a world that cannot be formed is an error.

use crate::step::{images, labels, largest_difference, params, step_loss, Ad};
use burn::module::Module;
use burn::optim::{Optimizer, SgdConfig};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::{Int, Tensor, TensorData};
use burn_flex::FlexDevice;
use firemesh::backend::{shard, shard_int, stats, Mesh, MeshError, Route};
use firemesh::optim::{AnyOptimizer, OptimizerKind};
use firemesh::world::{ProcessLink, ThreadWorld};
use firemesh::zero::{parameter_bytes_per_rank, state_bytes_per_rank};
use firemesh::Trainer;
use firemesh_gpt::{Gpt, GptConfig};
use firemesh_resnet::{ResNet, ResNetConfig};
use std::sync::Arc;
use std::time::Duration;

const STEPS: usize = 4;
const BATCH: usize = 8;

/// Runs `f` as every process of a world of `processes` threads, each with a mesh of `ranks`
/// CPU ranks; returns each process's result, in process order.
fn in_world<T: Send + 'static>(
    processes: usize,
    ranks: usize,
    f: impl Fn(Mesh<FlexDevice>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let handles: Vec<_> = ThreadWorld::links(processes, Duration::from_secs(120))
        .into_iter()
        .map(|link| {
            let f = f.clone();
            std::thread::spawn(move || {
                let link: Arc<dyn ProcessLink> = Arc::new(link);
                f(Mesh::in_world(vec![FlexDevice; ranks], link).unwrap())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// The bytes of a freshly initialised model, loaded on every mesh (one draw for all).
fn record_of<M: Module<burn::backend::Autodiff<burn_flex::Flex>>>(model: M) -> Vec<u8> {
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    recorder.record(model.into_record(), ()).unwrap()
}

fn load<M: Module<Ad>>(empty: M, bytes: &[u8], mesh: &Mesh<FlexDevice>) -> M {
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    empty.load_record(recorder.load(bytes.to_vec(), mesh).unwrap())
}

/// A run's step losses and final parameters.
type Run = (Vec<f64>, Vec<Vec<f32>>);

/// `STEPS` steps of `t` (the tiny ResNet) on batches of synthetic images: the losses.
fn resnet_steps<O: Optimizer<ResNet<Ad>, Ad>>(
    t: &mut Trainer<Ad, ResNet<Ad>, O>,
    mesh: &Mesh<FlexDevice>,
) -> Vec<f64> {
    (0..STEPS)
        .map(|i| {
            let report = t
                .step(|m| {
                    let x = shard(images::<Ad>(BATCH, 8, i, mesh), 0).unwrap();
                    let y = shard_int(labels::<Ad>(BATCH, i, mesh), 0).unwrap();
                    Ok(step_loss(m, x, y))
                })
                .unwrap();
            EARLY.with(|e| e.set(e.get() + report.early_gradient_collectives));
            report.loss
        })
        .collect()
}

thread_local! {
    /// Gradient buckets summed during the backward pass by this thread's training loops.
    static EARLY: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// `STEPS` SGD steps of the tiny ResNet on `mesh`: the losses and the final parameters.
fn train_resnet(mesh: &Mesh<FlexDevice>, record: &[u8]) -> Run {
    train_resnet_buckets(mesh, record, true)
}

/// [`train_resnet`], its gradient buckets summed during the backward pass (`early`) or after.
fn train_resnet_buckets(mesh: &Mesh<FlexDevice>, record: &[u8], early: bool) -> Run {
    let config = ResNetConfig::tiny(10);
    let model: ResNet<Ad> = load(config.init(mesh).unwrap(), record, mesh);
    let optimizer = SgdConfig::new().init();
    let mut t = Trainer::sharded(model, optimizer, mesh, 4000).with_lr(|_| 0.05);
    if !early {
        t = t.without_early_buckets();
    }
    let losses = resnet_steps(&mut t, mesh);
    (losses, params(t.model()))
}

fn tokens(i: usize, mesh: &Mesh<FlexDevice>) -> Tensor<Ad, 2, Int> {
    let values: Vec<i32> = (0..BATCH * 16)
        .map(|k| ((k * 31 + i * 7) % 256) as i32)
        .collect();
    Tensor::from_data(TensorData::new(values, [BATCH, 16]), mesh)
}

/// The same for the tiny GPT (dropout on: its masks are drawn per world rank).
fn train_gpt(mesh: &Mesh<FlexDevice>, record: &[u8]) -> Run {
    let config = gpt_config();
    let model: Gpt<Ad> = load(config.init(mesh).unwrap(), record, mesh);
    let optimizer = SgdConfig::new().init();
    let mut t = Trainer::sharded(model, optimizer, mesh, 4000)
        .with_lr(|_| 0.1)
        .with_step_seeds(7);
    let losses = (0..STEPS)
        .map(|i| {
            t.step(|m| {
                Ok(m.next_token_loss(shard_int(tokens(i, mesh), 0).unwrap())
                    .unwrap())
            })
            .unwrap()
            .loss
        })
        .collect();
    (losses, params(t.model()))
}

fn gpt_config() -> GptConfig {
    let mut c = GptConfig::tiny();
    c.dropout = 0.1;
    c
}

/// Compares every process's run with the one-process reference: losses and parameters within
/// 1e-6 (the sums are added in another order), and every process holds the same bits.
fn check(what: &str, reference: &Run, world: &[Run]) {
    for (p, (losses, parameters)) in world.iter().enumerate() {
        for (i, (got, want)) in losses.iter().zip(&reference.0).enumerate() {
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{what}, process {p}, step {i}: loss {got} against {want}"
            );
        }
        let worst = largest_difference(parameters, &reference.1);
        assert!(
            worst <= 1e-6,
            "{what}, process {p}: parameters {worst} apart"
        );
        assert_eq!(
            parameters, &world[0].1,
            "{what}: process {p} differs from 0"
        );
    }
    println!(
        "{what}: 2 processes x 2 ranks match 1 x 4 (losses {:?})",
        reference.0
    );
}

#[test]
fn two_processes_of_two_ranks_train_resnet_and_gpt_as_one_process_of_four() {
    let device = FlexDevice;
    let resnet = Arc::new(record_of(ResNetConfig::tiny(10).init(&device).unwrap()));
    let gpt = Arc::new(record_of(gpt_config().init(&device).unwrap()));

    let four = Mesh::replicate(FlexDevice, 4).unwrap();
    let want_resnet = train_resnet(&four, &resnet);
    let want_gpt = train_gpt(&four, &gpt);

    let (r, g) = (resnet.clone(), gpt.clone());
    let world = in_world(2, 2, move |mesh| {
        let (out, counts) = stats::count(|| (train_resnet(&mesh, &r), train_gpt(&mesh, &g)));
        (out, counts.route(Route::AcrossProcesses))
    });
    for (_, across) in &world {
        assert!(*across > 0, "no sum crossed the processes");
    }
    let resnets: Vec<_> = world.iter().map(|((r, _), _)| r.clone()).collect();
    let gpts: Vec<_> = world.iter().map(|((_, g), _)| g.clone()).collect();
    check("tiny ResNet", &want_resnet, &resnets);
    check("tiny GPT", &want_gpt, &gpts);
}

/// Early buckets in a world: the communication thread crosses the processes through the
/// side channel while the step's own sums (BatchNorm's statistics, during the same backward
/// pass) cross the main link. The run is bit for bit the one whose buckets are all summed
/// after the backward pass, and buckets were summed early on every process.
#[test]
fn early_buckets_cross_the_processes_beside_the_steps_own_sums_bit_for_bit() {
    let resnet = Arc::new(record_of(ResNetConfig::tiny(10).init(&FlexDevice).unwrap()));
    let r = resnet.clone();
    let world = in_world(2, 2, move |mesh| {
        assert!(mesh.side_link().is_some());
        EARLY.with(|e| e.set(0));
        let early = train_resnet_buckets(&mesh, &r, true);
        let summed_early = EARLY.with(|e| e.replace(0));
        let late = train_resnet_buckets(&mesh, &r, false);
        (early, summed_early, late, EARLY.with(|e| e.get()))
    });
    for (p, (early, summed_early, late, summed_late)) in world.iter().enumerate() {
        assert!(
            *summed_early >= STEPS,
            "process {p}: {summed_early} buckets summed early in {STEPS} steps"
        );
        assert_eq!(*summed_late, 0, "process {p}: early buckets were off");
        assert_eq!(early, late, "process {p}: early and late buckets differ");
        assert_eq!(early, &world[0].0, "process {p} differs from process 0");
    }
    println!(
        "2 processes x 2 ranks: {} buckets summed early per process, the same bits as after \
         the backward pass",
        world[0].1
    );
}

/// `STEPS` AdamW steps of the tiny ResNet with ZeRO `stage`: the losses, the final parameters
/// and the AdamW state each rank holds.
fn train_resnet_zero(stage: u8, mesh: &Mesh<FlexDevice>, record: &[u8]) -> (Run, Vec<usize>) {
    type Adam = AnyOptimizer<ResNet<Ad>, Ad>;
    let config = ResNetConfig::tiny(10);
    let model: ResNet<Ad> = load(config.init(mesh).unwrap(), record, mesh);
    let optimizer = Adam::new(OptimizerKind::Adamw, 0.9, 0.01);
    let mut t = Trainer::sharded(model, optimizer, mesh, 4000)
        .with_lr(|_| 1e-4)
        .with_zero(stage)
        .unwrap();
    let losses = resnet_steps(&mut t, mesh);
    let state = match stage {
        3 => parameter_bytes_per_rank(t.model()),
        _ => state_bytes_per_rank(t.optimizer(), t.model()).unwrap(),
    };
    ((losses, params(t.model())), state)
}

/// ZeRO-1 across processes: 2 processes x 2 ranks end where 1 x 4 ends, and each rank holds
/// about a quarter of AdamW's state (tensors whose rows do not split into equal shares per
/// process are kept whole).
#[test]
fn zero1_across_two_processes_trains_as_one_process_of_four_with_a_quarter_of_the_state() {
    let resnet = Arc::new(record_of(ResNetConfig::tiny(10).init(&FlexDevice).unwrap()));
    let four = Mesh::replicate(FlexDevice, 4).unwrap();
    let (want, whole_state) = train_resnet_zero(1, &four, &resnet);
    let r = resnet.clone();
    let world = in_world(2, 2, move |mesh| train_resnet_zero(1, &mesh, &r));
    let runs: Vec<_> = world.iter().map(|(run, _)| run.clone()).collect();
    check("tiny ResNet, ZeRO-1", &want, &runs);
    let whole: usize = whole_state.iter().sum();
    for (_, per_rank) in &world {
        println!("AdamW state per rank: {per_rank:?} bytes (1 x 4: {whole_state:?})");
        assert_eq!(per_rank.len(), 2);
        for b in per_rank {
            assert!(
                *b <= whole / 4 / 4 * 5,
                "{per_rank:?} against {whole} in all"
            );
        }
    }
}

/// ZeRO-3 across processes: 2 processes x 2 ranks end where 1 x 4 ends (within 1e-6), the
/// parameters gathered across the two levels as ZeRO-1's are, and each rank stores about a
/// quarter of the parameters, as on 1 x 4.
#[test]
fn zero3_across_two_processes_trains_as_one_process_of_four() {
    let resnet = Arc::new(record_of(ResNetConfig::tiny(10).init(&FlexDevice).unwrap()));
    let four = Mesh::replicate(FlexDevice, 4).unwrap();
    let (want, four_stores) = train_resnet_zero(3, &four, &resnet);
    let r = resnet.clone();
    let world = in_world(2, 2, move |mesh| train_resnet_zero(3, &mesh, &r));
    let runs: Vec<_> = world.iter().map(|(run, _)| run.clone()).collect();
    check("tiny ResNet, ZeRO-3", &want, &runs);
    let whole: usize = want.1.iter().map(|p| 4 * p.len()).sum();
    let mut stores: Vec<usize> = world.iter().flat_map(|(_, b)| b.clone()).collect();
    println!("parameter bytes per rank: {stores:?} (1 x 4: {four_stores:?}; whole {whole})");
    assert!(stores.iter().all(|b| *b <= whole / 4 / 4 * 5), "{stores:?}");
    // The world's four ranks store the blocks 1 x 4's do.
    let mut four_stores = four_stores;
    stores.sort_unstable();
    four_stores.sort_unstable();
    assert_eq!(stores, four_stores);
}

#[test]
fn processes_with_different_rank_counts_are_refused_on_every_process() {
    let links = ThreadWorld::links(2, Duration::from_secs(30));
    let handles: Vec<_> = links
        .into_iter()
        .enumerate()
        .map(|(p, link)| {
            std::thread::spawn(move || {
                let link: Arc<dyn ProcessLink> = Arc::new(link);
                Mesh::in_world(vec![FlexDevice; 1 + p], link).map(|_| ())
            })
        })
        .collect();
    for h in handles {
        let err = h.join().unwrap().unwrap_err();
        assert!(matches!(err, MeshError::UnevenWorld(_)), "{err}");
        assert!(err.to_string().contains("1, 2"), "{err}");
    }
}

#[test]
fn a_batch_that_does_not_split_into_equal_shares_per_process_is_an_error() {
    let errors = in_world(2, 2, |mesh| {
        let x = images::<Ad>(5, 4, 0, &mesh);
        shard(x, 0).unwrap_err().to_string()
    });
    for e in errors {
        assert!(e.contains("5 rows"), "{e}");
    }
}

/// One linear layer applied twice: its weight's gradient is made twice in each backward pass,
/// and autodiff adds the two on the calling thread while the first may be in an early bucket.
#[derive(burn::module::Module, Debug)]
struct Twice<B: burn::tensor::backend::Backend> {
    layer: burn::nn::Linear<B>,
}

fn train_twice(mesh: &Mesh<FlexDevice>, record: &[u8], early: bool) -> Run {
    let empty = Twice {
        layer: burn::nn::LinearConfig::new(12, 12).init(mesh),
    };
    let model: Twice<Ad> = load(empty, record, mesh);
    let optimizer = SgdConfig::new().init();
    // 64-byte buckets: every gradient fills one (the weight's 576 bytes, the bias's 48 with
    // the next one).
    let mut t = Trainer::sharded(model, optimizer, mesh, 64).with_lr(|_| 0.1);
    if !early {
        t = t.without_early_buckets();
    }
    let losses = (0..STEPS)
        .map(|i| {
            let report = t
                .step(|m| {
                    let x = images::<Ad>(BATCH, 2, i, mesh).reshape([BATCH, 12]);
                    let once =
                        burn::tensor::activation::tanh(m.layer.forward(shard(x, 0).unwrap()));
                    Ok(m.layer.forward(once).powf_scalar(2.0).mean())
                })
                .unwrap();
            EARLY.with(|e| e.set(e.get() + report.early_gradient_collectives));
            report.loss
        })
        .collect();
    (losses, params(t.model()))
}

/// A parameter used twice, in a world with early buckets: the sum of its first gradient, done
/// on the communication thread, reaches the gradient's clones only when the buckets close, so
/// the add of its two gradients meets the same placements on every process whatever the
/// timing. Run 3 times: each bit for bit the run without early buckets.
#[test]
fn a_parameter_used_twice_trains_alike_with_early_buckets_in_a_world() {
    let device = FlexDevice;
    let record = Arc::new(record_of(
        Twice::<burn::backend::Autodiff<burn_flex::Flex>> {
            layer: burn::nn::LinearConfig::new(12, 12).init(&device),
        },
    ));
    let r = record.clone();
    let world = in_world(2, 2, move |mesh| {
        let late = train_twice(&mesh, &r, false);
        EARLY.with(|e| e.set(0));
        let early: Vec<Run> = (0..3).map(|_| train_twice(&mesh, &r, true)).collect();
        assert!(EARLY.with(|e| e.get()) > 0, "no bucket was summed early");
        (late, early)
    });
    for (p, (late, early)) in world.iter().enumerate() {
        for run in early {
            assert_eq!(run, late, "process {p}: early buckets changed the run");
        }
        assert_eq!(late, &world[0].0, "process {p} differs from process 0");
    }
}
