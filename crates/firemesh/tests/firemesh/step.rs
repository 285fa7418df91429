//! The training step: a step's `Partial` gradients are summed in ceil(bytes / bucket)
//! collectives, to the same values as one sum per parameter, late or early (during the backward
//! pass); accumulation reduces once; a bucketed run and `firemesh::Trainer` equal one-device
//! training; every ResNet depth steps with no fallback.

use burn::backend::Autodiff;
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsAccumulator, GradientsParams, Optimizer, SgdConfig};
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::AutodiffBackend;
use burn_flex::{Flex, FlexDevice};
use firemesh::backend::buckets::EarlyBuckets;
use firemesh::backend::{redistribute, shard, shard_int, stats, Mesh, Placement, Sharded};
use firemesh::grads::{reduce_gradients, Bucketed};
use firemesh::Trainer;
use firemesh_resnet::{ResNet, ResNetConfig, StemKind};

pub(crate) type Ad = Autodiff<Sharded<Flex>>;
pub(crate) type One = Autodiff<Flex>;

pub(crate) fn images<B: Backend>(
    n: usize,
    side: usize,
    seed: usize,
    device: &B::Device,
) -> Tensor<B, 4> {
    let values: Vec<f32> = (0..n * 3 * side * side)
        .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0) - 1.0)
        .collect();
    Tensor::from_data(TensorData::new(values, [n, 3, side, side]), device)
}

pub(crate) fn labels<B: Backend>(n: usize, seed: usize, device: &B::Device) -> Tensor<B, 1, Int> {
    let values: Vec<i32> = (0..n).map(|i| ((i * 3 + seed) % 10) as i32).collect();
    Tensor::from_data(TensorData::new(values, [n]), device)
}

/// The gradients of one step of `model` on batch `seed` of `n` images, sharded over the mesh.
fn sharded_grads(
    model: &ResNet<Ad>,
    mesh: &Mesh<FlexDevice>,
    n: usize,
    side: usize,
    seed: usize,
) -> GradientsParams {
    let x = shard(images::<Ad>(n, side, seed, mesh), 0).unwrap();
    let y = shard_int(labels::<Ad>(n, seed, mesh), 0).unwrap();
    GradientsParams::from_grads(step_loss(model, x, y).backward(), model)
}

/// The same on one device.
fn one_device_grads(model: &ResNet<One>, n: usize, side: usize, seed: usize) -> GradientsParams {
    let x = images::<One>(n, side, seed, &FlexDevice);
    let y = labels::<One>(n, seed, &FlexDevice);
    GradientsParams::from_grads(step_loss(model, x, y).backward(), model)
}

/// Every parameter's gradient read back as floats, in module order.
fn read_grads<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    grads: &GradientsParams,
) -> Vec<Vec<f32>> {
    struct Read<'a>(&'a GradientsParams, Vec<Vec<f32>>);
    impl<B: AutodiffBackend> ModuleVisitor<B> for Read<'_> {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<B, D>>) {
            if let Some(g) = self.0.get::<B::InnerBackend, D>(p.id) {
                self.1.push(g.into_data().to_vec().unwrap());
            }
        }
    }
    let mut read = Read(grads, Vec::new());
    model.visit(&mut read);
    read.1
}

/// A one-device model and the same parameters on the mesh (through a record, so that no other
/// test's draws from the global generator interfere).
pub(crate) fn same_model(
    config: &ResNetConfig,
    mesh: &Mesh<FlexDevice>,
) -> (ResNet<One>, ResNet<Ad>) {
    let one = config.init::<One>(&FlexDevice).unwrap();
    // Parameters are drawn lazily, and a clone would draw its own: draw them first.
    params(&one);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder.record(one.clone().into_record(), ()).unwrap();
    let record = recorder.load(bytes, mesh).unwrap();
    let many = config.init::<Ad>(mesh).unwrap().load_record(record);
    (one, many)
}

pub(crate) fn step_loss<B: Backend>(
    model: &ResNet<B>,
    x: Tensor<B, 4>,
    y: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    let device = x.device();
    CrossEntropyLossConfig::new()
        .init(&device)
        .forward(model.forward(x), y)
}

pub(crate) fn largest_difference(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    let pairs = a.iter().zip(b).flat_map(|(x, y)| x.iter().zip(y));
    pairs
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0, f32::max)
}

/// Bytes of gradients (f32) read back by `read_grads`.
fn grad_bytes(read: &[Vec<f32>]) -> usize {
    read.iter().map(|g| g.len() * 4).sum()
}

#[test]
fn resnet50_step_sums_its_gradients_in_ceil_bytes_over_bucket_collectives() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let model = ResNetConfig::resnet50(10)
        .with_stem(StemKind::Cifar)
        .init::<Ad>(&mesh)
        .unwrap();
    let (mut grads, forward_backward) = stats::count(|| sharded_grads(&model, &mesh, 4, 8, 1));
    let bucket = firemesh::backend::buckets::DEFAULT_BUCKET_BYTES;
    let (buckets, reduce) =
        stats::count(|| reduce_gradients::<Flex, _>(&model, &mut grads, bucket, None));
    let sums: u64 = reduce.routes.values().sum();
    let statistic_sums: u64 = forward_backward.routes.values().sum();
    // Read once, after the reduction: summing changes no size.
    let tensors = read_grads(&model, &grads);
    let bytes = grad_bytes(&tensors);
    let want = bytes.div_ceil(bucket);
    println!(
        "ResNet-50: {} gradient tensors, {bytes} bytes: {buckets} collectives in buckets of \
         25 MiB (one per tensor without buckets); {statistic_sums} sums in the forward and \
         backward passes (BatchNorm statistics and their gradients, the loss)",
        tensors.len()
    );
    assert_eq!(buckets, want, "ceil({bytes} / {bucket})");
    assert_eq!(sums, want as u64, "one collective per bucket");
    // Outside the buckets only per-channel values are summed (BatchNorm's statistics, their
    // gradients and running averages, a few sums per channel each), never an activation:
    // BatchNorm's backward pass sums its channel-sized gradient before broadcasting it, and a
    // batch statistic used several times is summed once: 4 sums per layer, 2 elements per
    // channel parameter (185,920 elements, 3.5 per channel parameter, when each use summed its
    // own; 2,707,136 with the broadcast summed).
    let channels = rank_one_elements(&model);
    let summed = forward_backward.summed_elements;
    println!("{summed} elements summed per rank in the forward and backward passes");
    assert!(summed <= 2 * channels, "{summed} > 2 × {channels}");
    assert!(forward_backward.sums_reused > 0);
    assert_eq!(reduce.summed_elements as usize, bytes / 4);
    for g in &tensors {
        assert!(g.iter().all(|v| v.is_finite()));
    }

    // Early buckets: started inside `backward()`, as soon as the backward pass has made their
    // gradients, while the gradients of the first layers are still to come (the optimizer
    // sums those, with BatchNorm's); the same values, bit for bit, in no more collectives. On
    // Flex they run on the communication thread, beside the rest of the backward pass, and
    // are counted where the step waits for them.
    let early_sums = EarlyBuckets::new(bucket);
    let armed = early_sums.arm(&mesh);
    let (mut grads, backward) = stats::count(|| sharded_grads(&model, &mesh, 4, 8, 1));
    drop(armed);
    let (collectives, at_step) =
        stats::count(|| reduce_gradients::<Flex, _>(&model, &mut grads, bucket, Some(&early_sums)));
    let early = backward.early_buckets;
    let sums = |c: &stats::Counts| c.routes.values().sum::<u64>();
    println!(
        "early buckets: {early} started during the backward pass, {} at the step \
         ({collectives} collectives for the gradients, {want} without early buckets); \
         {:.1} ms summing them on the communication thread, {:.1} ms waited for at the step",
        collectives as u64 - early,
        at_step.early_comm_nanos as f64 * 1e-6,
        at_step.early_wait_nanos as f64 * 1e-6,
    );
    assert!(early >= 2, "{early} early buckets");
    assert!(
        collectives as u64 > early,
        "the first layers' gradients come after the early buckets"
    );
    assert!(collectives <= want, "{collectives} > {want}");
    assert_eq!(
        sums(&backward),
        statistic_sums,
        "nothing else summed on this thread"
    );
    assert_eq!(
        sums(&at_step),
        collectives as u64,
        "one collective per bucket"
    );
    assert!(at_step.early_comm_nanos > 0 && at_step.early_wait_nanos <= at_step.comm_nanos);
    assert_eq!(
        read_grads(&model, &grads),
        tensors,
        "early sums equal late ones"
    );
}

/// Elements of a model's one-dimensional parameters (BatchNorm's scales and shifts, biases).
fn rank_one_elements<B: Backend, M: Module<B>>(model: &M) -> u64 {
    struct Count(u64);
    impl<B: Backend> ModuleVisitor<B> for Count {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if D == 1 {
                self.0 += param.val().shape().num_elements() as u64;
            }
        }
    }
    let mut count = Count(0);
    model.visit(&mut count);
    count.0
}

#[test]
fn buckets_give_the_sums_of_one_collective_per_parameter() {
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    let model = ResNetConfig::tiny(10).init::<Ad>(&mesh).unwrap();
    // GradientsParams cannot be cloned: each variant recomputes the (deterministic) step.
    let mut per_param = sharded_grads(&model, &mesh, 7, 8, 1);
    // The reference: each gradient summed on its own.
    struct SumEach<'a>(&'a mut GradientsParams);
    impl ModuleVisitor<Ad> for SumEach<'_> {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Ad, D>>) {
            if let Some(g) = self.0.remove::<Sharded<Flex>, D>(p.id) {
                self.0
                    .register(p.id, redistribute(g, Placement::Replicated));
            }
        }
    }
    model.visit(&mut SumEach(&mut per_param));
    let want = read_grads(&model, &per_param);
    let bytes = grad_bytes(&want);
    // Buckets of 1000 bytes: tensors span buckets, and some buckets hold several tensors.
    for bucket in [1000, 4096, bytes, 25 << 20] {
        let mut bucketed = sharded_grads(&model, &mesh, 7, 8, 1);
        let (collectives, counts) =
            stats::count(|| reduce_gradients::<Flex, _>(&model, &mut bucketed, bucket, None));
        assert_eq!(collectives, bytes.div_ceil(bucket), "bucket {bucket}");
        assert_eq!(counts.total_fallbacks(), 0);
        assert_eq!(read_grads(&model, &bucketed), want, "bucket {bucket}");
    }
}

#[test]
fn accumulated_micro_batches_are_reduced_once_and_equal_one_device() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let (one, many) = same_model(&ResNetConfig::tiny(10), &mesh);
    let mut sharded = GradientsAccumulator::<ResNet<Ad>>::new();
    let mut reference = GradientsAccumulator::<ResNet<One>>::new();
    let mut sums_while_accumulating = 0;
    for micro in 0..3 {
        reference.accumulate(&one, one_device_grads(&one, 5, 8, micro));
        let grads = sharded_grads(&many, &mesh, 5, 8, micro);
        let ((), counts) = stats::count(|| sharded.accumulate(&many, grads));
        sums_while_accumulating += counts.routes.values().sum::<u64>();
    }
    assert_eq!(
        sums_while_accumulating, 0,
        "accumulation stays on each rank"
    );
    let mut grads = sharded.grads();
    let collectives = reduce_gradients::<Flex, _>(&many, &mut grads, 25 << 20, None);
    assert_eq!(collectives, 1);
    let got = read_grads(&many, &grads);
    let want = read_grads(&one, &reference.grads());
    let worst = largest_difference(&got, &want);
    assert!(worst <= 1e-5, "gradients differ by {worst}");
}

#[test]
fn a_bucketed_sgd_run_equals_one_device_training() {
    // The 3-rank mesh of the other tests here (one device list, one mesh): the `Trainer` tests
    // that arm early buckets on it meanwhile, on their threads, leave this run's gradients alone.
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    for early in [false, true] {
        let (mut one, mut many) = same_model(&ResNetConfig::tiny(10), &mesh);
        let sgd = SgdConfig::new();
        let mut opt_one = sgd.init::<One, ResNet<One>>();
        // Buckets of 3000 bytes: several per step, most tensors split across two (or, early,
        // a few gradients each).
        let mut opt_many = Bucketed::new(sgd.init::<Ad, ResNet<Ad>>()).with_bucket_bytes(3000);
        if early {
            opt_many = opt_many.summing_early();
        }
        let mut early_buckets = 0;
        for step in 0..4 {
            one = opt_one.step(0.05, one.clone(), one_device_grads(&one, 7, 8, step));
            let (grads, counts) = stats::count(|| sharded_grads(&many, &mesh, 7, 8, step));
            early_buckets += counts.early_buckets;
            many = opt_many.step(0.05, many.clone(), grads);
        }
        drop(opt_many);
        // From the second step on (the first step turns them on).
        assert_eq!(early_buckets > 0, early, "early buckets {early_buckets}");
        let worst = largest_difference(&params(&many), &params(&one));
        assert!(worst <= 1e-5, "early {early}: parameters differ by {worst}");
    }
}

/// `firemesh::Trainer` on a mesh equals the same trainer on one device, with early buckets
/// and without: the loss of every step and the final parameters. Its reports count the step:
/// early buckets only when they are on, a learning rate from the schedule, steps numbered on
/// from `starting_at`.
#[test]
fn a_trainer_on_a_mesh_equals_one_device_training() {
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    for early in [true, false] {
        let (one, many) = same_model(&ResNetConfig::tiny(10), &mesh);
        let sgd = SgdConfig::new();
        let lr = |step: usize| 0.05 / (step + 1) as f64;
        let mut reference =
            Trainer::single_device(one, sgd.init::<One, ResNet<One>>(), &FlexDevice)
                .with_lr(lr)
                .starting_at(10);
        // Buckets of 3000 bytes: several per step.
        let mut trainer = Trainer::sharded(many, sgd.init::<Ad, ResNet<Ad>>(), &mesh, 3000)
            .with_lr(lr)
            .starting_at(10);
        if !early {
            trainer = trainer.without_early_buckets();
        }
        for step in 0..4 {
            let want = reference
                .step(|m| {
                    let x = images::<One>(7, 8, step, &FlexDevice);
                    Ok(step_loss(m, x, labels::<One>(7, step, &FlexDevice)))
                })
                .unwrap();
            let got = trainer
                .step(|m| {
                    let x = shard(images::<Ad>(7, 8, step, &mesh), 0).unwrap();
                    let y = shard_int(labels::<Ad>(7, step, &mesh), 0).unwrap();
                    Ok(step_loss(m, x, y))
                })
                .unwrap();
            assert_eq!((got.step, want.step), (11 + step, 11 + step));
            assert_eq!(got.lr, lr(10 + step));
            assert!(
                (got.loss - want.loss).abs() <= 1e-5 * want.loss.abs().max(1.0),
                "step {step}: loss {} on the mesh, {} on one device",
                got.loss,
                want.loss
            );
            assert_eq!(want.gradient_collectives, 0);
            assert!(got.gradient_collectives >= 2, "{got:?}");
            assert_eq!(got.early_gradient_collectives > 0, early, "{got:?}");
            assert_eq!(got.counts.total_fallbacks(), 0);
        }
        assert_eq!(trainer.steps_done(), 14);
        let worst = largest_difference(&params(trainer.model()), &params(reference.model()));
        assert!(worst <= 1e-5, "early {early}: parameters differ by {worst}");
    }
}

/// A loss that fails leaves the trainer as it was: the same model, no step counted.
#[test]
fn a_failed_loss_leaves_the_trainer_as_it_was() {
    let mesh = Mesh::replicate(FlexDevice, 2).unwrap();
    let (_, many) = same_model(&ResNetConfig::tiny(10), &mesh);
    let before = params(&many);
    let mut trainer =
        Trainer::sharded(many, SgdConfig::new().init::<Ad, ResNet<Ad>>(), &mesh, 3000);
    let no_batch = std::io::Error::new(std::io::ErrorKind::NotFound, "no batch");
    let failed = trainer.step(|_| Err(firemesh::Error::model(no_batch)));
    assert!(matches!(failed, Err(firemesh::Error::Model(ref e)) if e.to_string() == "no batch"));
    assert_eq!(trainer.steps_done(), 0);
    assert_eq!(params(trainer.model()), before);
}

pub(crate) fn params<B: Backend, M: Module<B>>(model: &M) -> Vec<Vec<f32>> {
    struct Read(Vec<Vec<f32>>);
    impl<B: Backend> ModuleVisitor<B> for Read {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<B, D>>) {
            self.0.push(p.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let mut read = Read(Vec::new());
    model.visit(&mut read);
    read.0
}

#[test]
fn every_resnet_depth_steps_with_no_fallback_on_uneven_blocks() {
    let mesh = Mesh::replicate(FlexDevice, 3).unwrap();
    for depth in [18, 34, 50, 101, 152] {
        let config = ResNetConfig::from_depth(depth, 10)
            .unwrap()
            .with_stem(StemKind::Cifar)
            .with_base_width(4);
        let model = config.init::<Ad>(&mesh).unwrap();
        let mut optimizer = Bucketed::new(SgdConfig::new().init::<Ad, ResNet<Ad>>());
        // 5 images over 3 ranks: blocks of 2, 2 and 1.
        let (_, counts) = stats::count(|| {
            let grads = sharded_grads(&model, &mesh, 5, 8, 0);
            optimizer.step(0.01, model, grads)
        });
        assert_eq!(counts.fallbacks, Default::default(), "ResNet-{depth}");
    }
}
