//! ZeRO-3 (`Trainer::with_zero(3)`): the parameters stay `Shard(0)` between steps, each op of
//! the forward and backward passes gathers the ones it reads, and the training is the replicated
//! optimizer's: the tiny ResNet and the tiny GPT on 3 ranks, in f32 and bf16.

use crate::step::{images, labels, largest_difference, params, same_model, step_loss, Ad, One};
use burn::module::{Module, ModuleVisitor, Param};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::{Int, Tensor, TensorData};
use burn_flex::FlexDevice;
use firemesh::backend::{placement, shard, shard_int, Mesh, Placement};
use firemesh::optim::{AnyOptimizer, OptimizerKind};
use firemesh::zero::parameter_bytes_per_rank;
use firemesh::{Precision, StepReport, Trainer};
use firemesh_gpt::{Gpt, GptConfig};
use firemesh_resnet::ResNetConfig;

const STEPS: usize = 6;
const BUCKET: usize = 3000;

fn trainer<M: burn::module::AutodiffModule<Ad>>(
    model: M,
    mesh: &Mesh<FlexDevice>,
    zero: u8,
    precision: Precision,
) -> Trainer<Ad, M, AnyOptimizer<M, Ad>> {
    let adamw = AnyOptimizer::new(OptimizerKind::Adamw, 0.9, 0.01);
    Trainer::sharded(model, adamw, mesh, BUCKET)
        .with_lr(|_| 1e-3)
        .with_precision(precision)
        .unwrap()
        .with_zero(zero)
        .unwrap()
}

/// The placements `module`'s parameters are stored in.
fn placements<M: Module<Ad>>(module: &M) -> Vec<Placement> {
    struct Look(Vec<Placement>);
    impl ModuleVisitor<Ad> for Look {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad, D>>) {
            self.0.push(placement(&param.val().inner()));
        }
    }
    let mut look = Look(Vec::new());
    module.visit(&mut look);
    look.0
}

/// Trains `model` with ZeRO-0 and ZeRO-3 side by side, `step` running one step of each;
/// checks the losses and final parameters (within 1e-6), that ZeRO-3 gathers parameters in
/// every step and no parameter after it, and that each rank stores about a third of the
/// parameters' bytes.
fn compare<M: burn::module::AutodiffModule<Ad>>(
    what: &str,
    model: M,
    mesh: &Mesh<FlexDevice>,
    step: impl Fn(&mut Trainer<Ad, M, AnyOptimizer<M, Ad>>, usize) -> StepReport,
) {
    for precision in [Precision::F32, Precision::Bf16] {
        let mut full = trainer(model.clone(), mesh, 0, precision);
        let mut sharded = trainer(model.clone(), mesh, 3, precision);
        let mut at_use = trainer(model.clone(), mesh, 3, precision).with_gathers_ahead(0);
        for i in 0..STEPS {
            let (want, got) = (step(&mut full, i), step(&mut sharded, i));
            let plain = step(&mut at_use, i);
            // The same gathers, each made at use or taken from ahead: the same numbers.
            assert_eq!(plain.loss, got.loss, "{what} {precision} step {i}");
            assert_eq!(plain.counts.parameter_gathers, got.counts.parameter_gathers);
            assert_eq!(plain.counts.parameter_gathers_ahead, 0);
            // The first step has no order to follow; later steps gather every parameter but
            // the first of the step ahead of use.
            let ahead = got.counts.parameter_gathers_ahead;
            println!(
                "{what} {precision} step {i}: {} gathers, {ahead} ahead",
                got.counts.parameter_gathers
            );
            match i {
                0 => assert_eq!(ahead, 0),
                _ => assert_eq!(ahead, got.counts.parameter_gathers - 1, "{what} step {i}"),
            }
            assert!(
                (got.loss - want.loss).abs() <= 1e-6 * want.loss,
                "{what} {precision} step {i}: {} vs {}",
                got.loss,
                want.loss
            );
            let fallbacks = &got.counts.fallbacks;
            assert!(
                fallbacks.is_empty(),
                "{what} {precision} step {i}: {fallbacks:?}"
            );
            assert_eq!(got.parameter_collectives, 0, "no gather after the update");
            assert!(got.counts.parameter_gathers > 0);
            assert_eq!(want.counts.parameter_gathers, 0);
        }
        assert_eq!(
            largest_difference(&params(sharded.model()), &params(at_use.model())),
            0.0,
            "{what} {precision}: gathered ahead or at use"
        );
        let worst = largest_difference(&params(sharded.model()), &params(full.model()));
        assert!(
            worst <= 1e-6,
            "{what} {precision}: parameters {worst} apart"
        );
        let whole = parameter_bytes_per_rank(full.model());
        let per_rank = parameter_bytes_per_rank(sharded.model());
        let placements = placements(sharded.model());
        let report = step(&mut sharded, STEPS);
        println!(
            "{what}, {precision}, 3 ranks: parameter bytes per rank {per_rank:?} with ZeRO-3, \
             {whole:?} without; {} gathers in a step",
            report.counts.parameter_gathers
        );
        assert!(placements.contains(&Placement::Shard(0)), "{placements:?}");
        let total: usize = per_rank.iter().sum();
        assert!(
            total <= whole[0] + whole[0] / 10,
            "{per_rank:?} against {whole:?}"
        );
        for b in &per_rank {
            assert!(
                *b <= whole[0] / 3 + whole[0] / 10,
                "{per_rank:?} against {whole:?}"
            );
        }
    }
}

#[test]
fn zero3_trains_the_tiny_resnet_as_the_replicated_optimizer() {
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    let (_, model) = same_model(&ResNetConfig::tiny(10), &mesh);
    // 10 images on 3 ranks: uneven batch blocks (4, 3, 3).
    compare("tiny ResNet", model, &mesh, |t, i| {
        t.step(|m| {
            let x = shard(images::<Ad>(10, 8, i % 4, &mesh), 0).unwrap();
            let y = shard_int(labels::<Ad>(10, i % 4, &mesh), 0).unwrap();
            Ok(step_loss(m, x, y))
        })
        .unwrap()
    });
}

fn tokens(i: usize, mesh: &Mesh<FlexDevice>) -> Tensor<Ad, 2, Int> {
    let values: Vec<i32> = (0..7 * 16)
        .map(|k| ((k * 31 + i * 7) % 256) as i32)
        .collect();
    shard_int(Tensor::from_data(TensorData::new(values, [7, 16]), mesh), 0).unwrap()
}

#[test]
fn zero3_trains_the_tiny_gpt_as_the_replicated_optimizer() {
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    // Drawn once on one device and loaded: a clone of a lazily drawn model would draw its own.
    let one: Gpt<One> = GptConfig::tiny().init(&FlexDevice).unwrap();
    params(&one);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder.record(one.into_record(), ()).unwrap();
    let record = recorder.load(bytes, &mesh).unwrap();
    let model = GptConfig::tiny()
        .init::<Ad>(&mesh)
        .unwrap()
        .load_record(record);
    // 7 sequences on 3 ranks: uneven blocks (3, 2, 2).
    compare("tiny GPT", model, &mesh, |t, i| {
        t.step(|m| Ok(m.next_token_loss(tokens(i, &mesh)).unwrap()))
            .unwrap()
    });
}

/// A step whose loss fails after its forward pass gathered parameters leaves its gathers
/// open; the next step closes them and trains as if it had not run: the same loss and
/// parameters as a trainer that never ran it, its gathers ahead again from the step after.
#[test]
fn a_failed_step_leaves_the_gathers_ahead_as_they_were() {
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    let (_, model) = same_model(&ResNetConfig::tiny(10), &mesh);
    let batch = |i: usize| {
        let x = shard(images::<Ad>(10, 8, i, &mesh), 0).unwrap();
        (x, shard_int(labels::<Ad>(10, i, &mesh), 0).unwrap())
    };
    let ok = |t: &mut Trainer<_, _, _>, i| {
        t.step(|m| {
            let (x, y) = batch(i);
            Ok(step_loss(m, x, y))
        })
        .unwrap()
    };
    let mut failing = trainer(model.clone(), &mesh, 3, Precision::F32);
    let mut plain = trainer(model, &mesh, 3, Precision::F32);
    for i in 0..3 {
        let (want, got) = (ok(&mut plain, i), ok(&mut failing, i));
        assert_eq!(got.loss, want.loss);
        let no_batch = std::io::Error::new(std::io::ErrorKind::NotFound, "no batch");
        let failed = failing.step(|m| {
            let (x, y) = batch(i);
            let _ = step_loss(m, x, y);
            Err(firemesh::Error::model(no_batch))
        });
        assert!(failed.is_err());
        let ahead = got.counts.parameter_gathers_ahead;
        assert_eq!(ahead, (got.counts.parameter_gathers - 1) * u64::from(i > 0));
    }
    let worst = largest_difference(&params(failing.model()), &params(plain.model()));
    assert_eq!(worst, 0.0);
}

/// The bottleneck ResNets: ResNet-50's blocks (4 wide, the CIFAR stem) on 3 uneven ranks,
/// ZeRO-3 against ZeRO-0 over 3 steps, the gathers ahead from the second.
#[test]
fn zero3_trains_resnet50_blocks_as_the_replicated_optimizer() {
    use firemesh_resnet::StemKind;
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    let config = ResNetConfig::from_depth(50, 10)
        .unwrap()
        .with_stem(StemKind::Cifar)
        .with_base_width(4);
    let (_, model) = same_model(&config, &mesh);
    let mut full = trainer(model.clone(), &mesh, 0, Precision::F32);
    let mut sharded = trainer(model, &mesh, 3, Precision::F32);
    for i in 0..3 {
        let run = |t: &mut Trainer<_, _, _>| {
            t.step(|m| {
                // 5 images over 3 ranks: blocks of 2, 2 and 1.
                let x = shard(images::<Ad>(5, 8, i, &mesh), 0).unwrap();
                let y = shard_int(labels::<Ad>(5, i, &mesh), 0).unwrap();
                Ok(step_loss(m, x, y))
            })
            .unwrap()
        };
        let (want, got) = (run(&mut full), run(&mut sharded));
        assert!((got.loss - want.loss).abs() <= 1e-6 * want.loss, "step {i}");
        assert!(
            got.counts.fallbacks.is_empty(),
            "{:?}",
            got.counts.fallbacks
        );
        let gathers = got.counts.parameter_gathers;
        assert_eq!(
            got.counts.parameter_gathers_ahead,
            (gathers - 1) * u64::from(i > 0)
        );
    }
    let worst = largest_difference(&params(sharded.model()), &params(full.model()));
    assert!(worst <= 1e-6, "parameters {worst} apart");
}
