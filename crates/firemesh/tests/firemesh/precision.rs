//! Mixed precision through the `Trainer`: bf16 and f16 (with loss scaling) runs track the f32
//! run; an overflow is skipped, the scale halves, and it grows again after clean steps.

use crate::step::{images, labels, largest_difference, step_loss, Ad, One};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::SgdConfig;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::{Tensor, TensorData};
use burn_flex::FlexDevice;
use firemesh::backend::{shard, shard_int, Mesh};
use firemesh::precision::{LossScaling, LossTracking};
use firemesh::{Precision, StepReport, Trainer};
use firemesh_resnet::{ResNet, ResNetConfig};

const STEPS: usize = 16;

/// The tiny ResNet on `mesh` with the same parameters on every run (a clone starts from the
/// same values), so that the tolerances below hold for one model, not for whichever one a run
/// draws (Burn's CPU generator is shared by the tests running beside this one). Each drawn
/// parameter comes from its own initialiser's distribution, through SplitMix64: convolutions
/// He-normal (std √(2 / fan-out)), the classifier's weight and bias uniform within
/// ±1/√fan-in (Burn's `Linear` default); BatchNorm's constants are kept.
pub(crate) fn model(mesh: &Mesh<FlexDevice>) -> ResNet<Ad> {
    struct Fixed {
        rng: firemesh_rng::SplitMix64,
        features: usize,
    }
    impl ModuleMapper<One> for Fixed {
        fn map_float<const D: usize>(
            &mut self,
            param: Param<Tensor<One, D>>,
        ) -> Param<Tensor<One, D>> {
            let (id, tensor, mapper) = param.consume();
            let drawn = tensor.to_data().to_vec::<f32>().unwrap();
            if drawn.iter().all(|x| *x == drawn[0]) {
                return Param::from_mapped_value(id, tensor, mapper);
            }
            let dims = tensor.dims();
            let rng = &mut self.rng;
            let values: Vec<f32> = match D {
                // [out, in, k, k]: He-normal, fan-out mode (Box-Muller).
                4 => {
                    let std = (2.0 / (dims[0] * dims[2] * dims[3]) as f64).sqrt();
                    (0..drawn.len())
                        .map(|_| {
                            let (u, v) = (1.0 - rng.next_f64(), rng.next_f64());
                            let normal = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                            (std * normal) as f32
                        })
                        .collect()
                }
                // The classifier's weight [in, out] and bias [out]: fan-in = its input features.
                _ => {
                    let bound = 1.0 / (self.features as f64).sqrt();
                    (0..drawn.len())
                        .map(|_| ((2.0 * rng.next_f64() - 1.0) * bound) as f32)
                        .collect()
                }
            };
            let data = TensorData::new(values, dims);
            let fixed = Tensor::<One, D>::from_data(data, &FlexDevice).require_grad();
            Param::from_mapped_value(id, fixed, mapper)
        }
    }
    let config = ResNetConfig::tiny(10);
    let mut fixed = Fixed {
        rng: firemesh_rng::SplitMix64::new(31),
        features: config.feature_channels(),
    };
    let one = config.init::<One>(&FlexDevice).unwrap().map(&mut fixed);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder.record(one.into_record(), ()).unwrap();
    let record = recorder.load(bytes, mesh).unwrap();
    config.init::<Ad>(mesh).unwrap().load_record(record)
}

/// A trainer of `model`, SGD with momentum.
pub(crate) fn trainer(
    model: ResNet<Ad>,
    mesh: &Mesh<FlexDevice>,
) -> Trainer<Ad, ResNet<Ad>, impl burn::optim::Optimizer<ResNet<Ad>, Ad>> {
    let sgd = SgdConfig::new().with_momentum(Some(burn::optim::momentum::MomentumConfig::new()));
    Trainer::sharded(model, sgd.init::<Ad, ResNet<Ad>>(), mesh, 3000).with_lr(|_| 0.02)
}

/// One step on batch `batch` (of 3, in turn) of 16 images; the loss multiplied by `factor`.
pub(crate) fn step<O: burn::optim::Optimizer<ResNet<Ad>, Ad>>(
    trainer: &mut Trainer<Ad, ResNet<Ad>, O>,
    mesh: &Mesh<FlexDevice>,
    batch: usize,
    factor: f64,
) -> StepReport {
    trainer
        .step(|m| {
            let x = shard(images::<Ad>(16, 8, batch % 3, mesh), 0).unwrap();
            let y = shard_int(labels::<Ad>(16, batch % 3, mesh), 0).unwrap();
            Ok(step_loss(m, x, y).mul_scalar(factor))
        })
        .unwrap()
}

fn losses(precision: Precision, model: &ResNet<Ad>, mesh: &Mesh<FlexDevice>) -> (Vec<f64>, usize) {
    let mut t = trainer(model.clone(), mesh)
        .with_precision(precision)
        .unwrap();
    let reports: Vec<StepReport> = (0..STEPS).map(|i| step(&mut t, mesh, i, 1.0)).collect();
    let skipped = reports.iter().filter(|r| r.skipped).count();
    (reports.iter().map(|r| r.loss).collect(), skipped)
}

/// bf16 and f16 loss curves track f32's within `LossTracking::BOUNDS`: the first step's loss
/// (the forward pass alone, same parameters) within 0.1%; every step within 6%, and the mean of
/// the last 4 within 3% (rounding differences grow over steps of SGD with momentum on batches
/// of 16); and they are not f32's (the products were cast).
#[test]
fn bf16_and_f16_loss_curves_track_f32() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let model = model(&mesh);
    let (f32_run, none) = losses(Precision::F32, &model, &mesh);
    assert_eq!(none, 0);
    assert!(
        f32_run[STEPS - 1] < 0.9 * f32_run[0],
        "the f32 run learns: {f32_run:?}"
    );
    for precision in [Precision::Bf16, Precision::F16] {
        let (run, skipped) = losses(precision, &model, &mesh);
        let tracked = LossTracking::measure(&f32_run, &run).unwrap();
        println!(
            "{precision}: relative loss difference to f32: {tracked}; {skipped} steps skipped"
        );
        let context = format!("{precision}: {run:?} against f32 {f32_run:?}");
        assert!(tracked.within(&LossTracking::BOUNDS), "{context}");
        let worst = tracked.largest;
        assert!(worst > 1e-6, "{precision}: equal to f32, nothing was cast");
        assert_eq!(skipped, 0, "{precision}: no overflow at the default scale");
    }
}

/// An injected overflow (the loss times 1e30: its scaled gradients overflow f16) skips the
/// step, leaving the parameters as they were, and halves the scale; after `growth_interval`
/// clean steps the scale doubles again.
#[test]
fn an_overflow_is_skipped_the_scale_halves_and_recovers() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let scaling = LossScaling {
        initial: 1024.0,
        growth_interval: 2,
    };
    let mut t = trainer(model(&mesh), &mesh)
        .with_precision(Precision::F16)
        .unwrap()
        .with_loss_scaling(scaling)
        .unwrap();
    let first = step(&mut t, &mesh, 0, 1.0);
    assert_eq!((first.loss_scale, first.skipped), (Some(1024.0), false));
    let before = trained(t.model());
    let overflow = step(&mut t, &mesh, 1, 1e30);
    assert!(overflow.skipped, "{overflow:?}");
    // (BatchNorm's running statistics move in the forward pass, skipped or not.)
    assert_eq!(
        trained(t.model()),
        before,
        "a skipped step changes no parameter"
    );
    assert_eq!(t.steps_done(), 2, "it still counts as a step");
    let scales: Vec<Option<f64>> = (2..5)
        .map(|i| {
            let r = step(&mut t, &mesh, i, 1.0);
            assert!(!r.skipped, "step {i}");
            r.loss_scale
        })
        .collect();
    // Halved by the overflow; doubled after 2 clean steps.
    assert_eq!(scales, [Some(512.0), Some(512.0), Some(1024.0)]);
    let state = t.loss_scaler().unwrap().state();
    assert_eq!((state.skipped_steps, state.scale), (1, 1024.0));
    assert!(
        largest_difference(&trained(t.model()), &before) > 0.0,
        "clean steps update"
    );
}

/// The values of the parameters the optimizer updates (not BatchNorm's running statistics).
fn trained(model: &ResNet<Ad>) -> Vec<Vec<f32>> {
    struct Read(Vec<Vec<f32>>);
    impl ModuleVisitor<Ad> for Read {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Ad, D>>) {
            if p.is_require_grad() {
                self.0.push(p.val().into_data().to_vec::<f32>().unwrap());
            }
        }
    }
    let mut read = Read(Vec::new());
    model.visit(&mut read);
    assert!(
        read.0.len() > 4,
        "found {} trained parameters",
        read.0.len()
    );
    read.0
}

/// Bad scaling values are refused with the value named.
#[test]
fn bad_loss_scaling_is_refused() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    for (initial, growth_interval, says) in [
        (0.0, 10, "initial loss scale"),
        (f64::INFINITY, 10, "initial loss scale"),
        (8.0, 0, "growth interval"),
    ] {
        let scaling = LossScaling {
            initial,
            growth_interval,
        };
        let err = trainer(model(&mesh), &mesh)
            .with_loss_scaling(scaling)
            .err()
            .unwrap();
        assert!(err.to_string().contains(says), "{err}");
    }
}

/// Gradient buckets summed in bf16 (`with_gradient_wire`): every gradient crosses in half the
/// bytes (the step's other sums, BatchNorm's statistics and the loss, stay f32), and the run
/// stays near the f32-communication run: losses within 2% at every step, over 16 steps (measured: 1.4e-3 to 7.4e-3).
#[test]
fn gradients_summed_in_bf16_cross_in_half_the_bytes() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let model = model(&mesh);
    let gradient_elements: usize = trained(&model).iter().map(Vec::len).sum();
    let mut f32_comm = trainer(model.clone(), &mesh);
    let mut bf16_comm = trainer(model, &mesh)
        .with_gradient_wire(Precision::Bf16)
        .unwrap();
    let mut worst = 0f64;
    for i in 0..STEPS {
        let (full, half) = (
            step(&mut f32_comm, &mesh, i, 1.0),
            step(&mut bf16_comm, &mesh, i, 1.0),
        );
        let saved = full.counts.summed_bytes - half.counts.summed_bytes;
        assert_eq!(
            saved as usize,
            2 * gradient_elements,
            "step {i}: {full:?} {half:?}"
        );
        assert_eq!(
            full.gradient_collectives, half.gradient_collectives,
            "the same buckets"
        );
        worst = worst.max((half.loss - full.loss).abs() / full.loss);
    }
    let params = largest_difference(&trained(bf16_comm.model()), &trained(f32_comm.model()));
    println!(
        "bf16 gradient sums: {} bytes of gradients per rank and step instead of {}; losses \
         within {worst:.1e} of f32 communication over {STEPS} steps, parameters within {params:.1e}",
        2 * gradient_elements,
        4 * gradient_elements
    );
    assert!(worst < 0.02, "losses {worst} apart");
    assert!(
        params > 0.0,
        "bf16 sums round: the parameters cannot be f32's exactly"
    );
}
