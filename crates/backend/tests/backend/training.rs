//! Whole-run equivalence: 10 SGD steps on a batch sharded over 3 ranks end with the parameters
//! of the same run on one device, with no fallback in forward or backward.

use crate::common;

use burn::module::Module;
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, MaxPool2d, MaxPool2dConfig};
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{
    BatchNorm, BatchNormConfig, Embedding, EmbeddingConfig, Linear, LinearConfig, PaddingConfig2d,
};
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{activation, Int, Tensor, TensorData};
use common::{assert_params_close, mesh, params, same_init, RefAd, SAd, CPU};
use firemesh_backend::{shard, shard_int, stats};

#[derive(Module, Debug)]
pub(crate) struct Cnn<B: Backend> {
    conv1: Conv2d<B>,
    bn1: BatchNorm<B>,
    pool: MaxPool2d,
    conv2: Conv2d<B>,
    bn2: BatchNorm<B>,
    gap: AdaptiveAvgPool2d,
    head: Linear<B>,
}

impl<B: Backend> Cnn<B> {
    pub(crate) fn new(device: &B::Device) -> Self {
        let conv = |i, o| {
            Conv2dConfig::new([i, o], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
        };
        Self {
            conv1: conv(3, 6),
            bn1: BatchNormConfig::new(6).init(device),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            conv2: conv(6, 8),
            bn2: BatchNormConfig::new(8).init(device),
            gap: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: LinearConfig::new(8, 4).init(device),
        }
    }

    pub(crate) fn loss(&self, x: Tensor<B, 4>, y: Tensor<B, 1, Int>) -> Tensor<B, 1> {
        let h = activation::relu(self.bn1.forward(self.conv1.forward(x)));
        let h = self.pool.forward(h);
        let h = activation::relu(self.bn2.forward(self.conv2.forward(h)));
        let h = self.gap.forward(h).flatten::<2>(1, 3);
        let logits = self.head.forward(h);
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, y)
    }
}

#[derive(Module, Debug)]
struct TinyLm<B: Backend> {
    embed: Embedding<B>,
    encoder: TransformerEncoder<B>,
    head: Linear<B>,
}

const VOCAB: usize = 11;

impl<B: Backend> TinyLm<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            embed: EmbeddingConfig::new(VOCAB, 16).init(device),
            encoder: TransformerEncoderConfig::new(16, 32, 2, 2)
                .with_dropout(0.0)
                .init(device),
            head: LinearConfig::new(16, VOCAB).init(device),
        }
    }

    fn loss(&self, tokens: Tensor<B, 2, Int>, targets: Tensor<B, 2, Int>) -> Tensor<B, 1> {
        let [batch, seq] = tokens.dims();
        let mask = generate_autoregressive_mask::<B>(batch, seq, &tokens.device());
        let h = self.embed.forward(tokens);
        let h = self
            .encoder
            .forward(TransformerEncoderInput::new(h).mask_attn(mask));
        let logits = self.head.forward(h).reshape([batch * seq, VOCAB]);
        let targets = targets.reshape([batch * seq]);
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, targets)
    }
}

/// Runs `steps` SGD steps; returns the losses, the fallbacks counted in forward+backward and
/// the final parameters.
fn train<B: AutodiffBackend, M, F>(
    mut model: M,
    steps: usize,
    loss: F,
) -> (Vec<f32>, u64, Vec<Vec<f32>>)
where
    M: burn::module::AutodiffModule<B>,
    F: Fn(&M, usize) -> Tensor<B, 1>,
{
    let mut optim = SgdConfig::new().init::<B, M>();
    let (mut losses, mut fallbacks) = (Vec::new(), 0);
    for step in 0..steps {
        let ((l, grads), counts) = stats::count(|| {
            let l = loss(&model, step);
            let grads = l.backward();
            (l, grads)
        });
        if counts.total_fallbacks() > 0 {
            println!("step {step}: fallbacks {:?}", counts.fallbacks);
        }
        fallbacks += counts.total_fallbacks();
        losses.push(l.into_scalar().elem::<f32>());
        let grads = GradientsParams::from_grads(grads, &model);
        model = optim.step(0.1, model, grads);
    }
    (losses, fallbacks, params(&model))
}

use burn::tensor::ElementConversion;

/// What [`train`] returns: losses, fallbacks in forward and backward, final parameters.
type Run = (Vec<f32>, u64, Vec<Vec<f32>>);

/// The sharded run learned like the reference, ended with its parameters (1e-4) and needed no
/// fallback.
fn assert_same_run((want_losses, _, want): Run, (losses, fallbacks, got): Run) {
    println!("losses: one device {want_losses:?}\n        sharded    {losses:?}");
    assert!(want_losses[9] < want_losses[0], "the run must learn");
    assert_params_close(&got, &want, 1e-4);
    assert_eq!(fallbacks, 0, "forward and backward need no fallback");
}

/// One fixed batch of 10 images and labels, so that ten steps visibly learn.
pub(crate) fn images(_step: usize) -> (TensorData, TensorData) {
    let x = common::rand([10, 3, 8, 8], 100);
    let y: Vec<i64> = (0..10).map(|i| (i % 4) as i64).collect();
    let x = x.into_data();
    (x, TensorData::new(y, [10]))
}

/// The CNN trained on one device and on `ranks` ranks (in turn, or on their own threads):
/// both runs, and what the sharded run counted.
fn cnn_runs(ranks: usize, parallel: bool) -> (Run, Run, stats::Counts) {
    let mesh = mesh(ranks);
    let default = mesh.parallel();
    mesh.set_parallel(parallel);
    let (reference, model) = same_init(7, || Cnn::<RefAd>::new(&CPU), || Cnn::<SAd>::new(&mesh));
    let reference = train(reference, 10, |m: &Cnn<RefAd>, step| {
        let (x, y) = images(step);
        m.loss(Tensor::from_data(x, &CPU), Tensor::from_data(y, &CPU))
    });

    let (sharded, counts) = stats::count(|| {
        train(model, 10, |m: &Cnn<SAd>, step| {
            let (x, y) = images(step);
            let x = shard(Tensor::from_data(x, &mesh), 0).expect("batch of 10 over the ranks");
            let y = shard_int(Tensor::from_data(y, &mesh), 0).expect("targets");
            m.loss(x, y)
        })
    });
    mesh.set_parallel(default);
    (reference, sharded, counts)
}

#[test]
fn cnn_with_batchnorm_matches_one_device() {
    let (reference, sharded, _) = cnn_runs(3, false);
    assert_same_run(reference, sharded);
}

/// Uneven blocks (10 images over 4 ranks) on rank threads: the ops run in turn, and right.
#[test]
fn cnn_with_batchnorm_matches_one_device_on_rank_threads_with_uneven_blocks() {
    let (reference, sharded, counts) = cnn_runs(4, true);
    assert_same_run(reference, sharded);
    println!(
        "{} of {} ops on rank threads",
        counts.on_rank_threads, counts.ops
    );
}

/// Even blocks (10 images over 5 ranks): ranks 1..4 run their shares on their own threads,
/// and the run ends with the parameters of one device, and bit for bit those of the same run
/// with the ranks in turn.
#[test]
fn cnn_on_rank_threads_matches_one_device_and_the_ranks_in_turn_bit_for_bit() {
    let (reference, threaded, counts) = cnn_runs(5, true);
    let (_, in_turn, _) = cnn_runs(5, false);
    println!(
        "{} of {} ops on rank threads",
        counts.on_rank_threads, counts.ops
    );
    assert!(
        counts.on_rank_threads * 10 >= counts.ops * 9,
        "at least 90% of the ops leave ranks 1.. to their threads: {counts:?}"
    );
    assert_eq!(threaded.2, in_turn.2, "the same parameters, bit for bit");
    assert_eq!(threaded.0, in_turn.0, "the same losses, bit for bit");
    assert_same_run(reference, threaded);
}

fn tokens(step: usize) -> (TensorData, TensorData) {
    let seq: Vec<i64> = (0..5 * 6)
        .map(|i| ((i * 3 + step) % VOCAB) as i64)
        .collect();
    let next: Vec<i64> = seq.iter().map(|t| (t + 1) % VOCAB as i64).collect();
    (TensorData::new(seq, [5, 6]), TensorData::new(next, [5, 6]))
}

#[test]
fn transformer_encoder_matches_one_device() {
    let mesh = mesh(3);
    let (reference, model) = same_init(
        11,
        || TinyLm::<RefAd>::new(&CPU),
        || TinyLm::<SAd>::new(&mesh),
    );
    let reference = train(reference, 10, |m: &TinyLm<RefAd>, step| {
        let (x, y) = tokens(step);
        m.loss(Tensor::from_data(x, &CPU), Tensor::from_data(y, &CPU))
    });

    let sharded = train(model, 10, |m: &TinyLm<SAd>, step| {
        let (x, y) = tokens(step);
        let x = shard_int(Tensor::from_data(x, &mesh), 0).expect("5 sequences over 3 ranks");
        let y = shard_int(Tensor::from_data(y, &mesh), 0).expect("targets");
        m.loss(x, y)
    });
    assert_same_run(reference, sharded);
}
