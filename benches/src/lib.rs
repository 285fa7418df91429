//! Shared pieces of the benchmark runs: timing, bandwidth arithmetic, result files.

use serde::Serialize;
use std::time::Instant;

/// Every benchmark program runs on the `firemesh` CLI's allocator (`firemesh::alloc`); the
/// peers measured beside ours in one run share it.
#[global_allocator]
static ALLOCATOR: firemesh::alloc::Allocator = firemesh::alloc::Allocator;

/// Median wall time of `f` over `iters` runs after one warm-up, in seconds.
pub fn time_median(iters: usize, mut f: impl FnMut() -> f64) -> f64 {
    f();
    let mut samples: Vec<f64> = (0..iters.max(1)).map(|_| f()).collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Seconds taken by `f`.
pub fn seconds(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64()
}

/// NCCL's algorithm bandwidth: bytes per rank over time, in GB/s.
pub fn algbw(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}

/// NCCL's bus bandwidth of an all-reduce: algbw · 2(N-1)/N.
pub fn busbw(algbw: f64, ranks: usize) -> f64 {
    algbw * 2.0 * (ranks as f64 - 1.0) / ranks as f64
}

/// Host memcpy bandwidth for buffers of `bytes` (best of a few copies), in GB/s: the bound of a
/// transport that goes through host memory.
pub fn memcpy_gbps(bytes: usize) -> f64 {
    let src = vec![1u8; bytes.max(1)];
    let mut dst = vec![0u8; bytes.max(1)];
    let reps = (64 << 20) / bytes.max(1) + 1;
    let best = (0..5)
        .map(|_| {
            seconds(|| {
                for _ in 0..reps {
                    dst.copy_from_slice(std::hint::black_box(&src));
                }
            }) / reps as f64
        })
        .fold(f64::INFINITY, f64::min);
    std::hint::black_box(&dst);
    bytes as f64 / best / 1e9
}

/// Human size: 4 KiB, 16 MiB, …
pub fn size_label(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub implementation: String,
    pub backend: String,
    pub ranks: usize,
    pub bytes: usize,
    pub seconds: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
}

impl Row {
    pub fn new(
        implementation: &str,
        backend: &str,
        ranks: usize,
        bytes: usize,
        seconds: f64,
    ) -> Self {
        let a = algbw(bytes, seconds);
        Self {
            implementation: implementation.into(),
            backend: backend.into(),
            ranks,
            bytes,
            seconds,
            algbw_gbps: a,
            busbw_gbps: busbw(a, ranks),
        }
    }
}

/// The median of `samples` (sorted in place).
pub fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// One setup of a training-step benchmark, timed side by side with the others in one run.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    pub setup: String,
    pub median_step_ms: f64,
    pub images_per_s: f64,
    /// Step time over the first setup's (plain Flex).
    pub vs_flex: f64,
    /// Step time over the second setup's (Sharded with one rank).
    pub vs_sharded_n1: f64,
    pub final_loss: f32,
}

/// The rows of a step benchmark from each setup's name, median step time (s) and last loss,
/// with their Markdown table lines (the header is the caller's).
pub fn step_rows(
    setups: &[String],
    medians: &[f64],
    losses: &[f32],
    batch: usize,
) -> (Vec<StepRow>, String) {
    let mut md = String::from(
        "| setup | median step ms | images/s | vs Flex | vs Sharded N=1 | final loss |\n\
         |---|---|---|---|---|---|\n",
    );
    let rows: Vec<StepRow> = setups
        .iter()
        .enumerate()
        .map(|(i, setup)| StepRow {
            setup: setup.clone(),
            median_step_ms: medians[i] * 1e3,
            images_per_s: batch as f64 / medians[i],
            vs_flex: medians[i] / medians[0],
            vs_sharded_n1: medians[i] / medians[1],
            final_loss: losses[i],
        })
        .collect();
    for r in &rows {
        md += &format!(
            "| {} | {:.1} | {:.1} | {:.3}× | {:.3}× | {:.4} |\n",
            r.setup, r.median_step_ms, r.images_per_s, r.vs_flex, r.vs_sharded_n1, r.final_loss
        );
    }
    (rows, md)
}

/// Write `json` and `markdown` to `dir/name.{json,md}`, creating `dir`; the Markdown's header
/// (the line after its title) names the commit measured.
pub fn write_results(
    dir: &str,
    name: &str,
    json: &impl Serialize,
    markdown: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(json).map_err(std::io::Error::other)?;
    std::fs::write(format!("{dir}/{name}.json"), text)?;
    let (title, rest) = markdown.split_once('\n').unwrap_or((markdown, ""));
    let commit = firemesh_cli::bench::source_commit();
    let stamped = format!("{title}\n\nMeasured at commit {commit}.\n{rest}");
    std::fs::write(format!("{dir}/{name}.md"), stamped)
}

/// Reads every float parameter of `module` once, which runs Burn's lazy initializers: setups
/// seeded alike then start from the same weights.
pub fn init_params<B: burn::tensor::backend::Backend, M: burn::module::Module<B>>(module: &M) {
    struct Touch;
    impl<B: burn::tensor::backend::Backend> burn::module::ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(
            &mut self,
            param: &burn::module::Param<burn::tensor::Tensor<B, D>>,
        ) {
            let _ = param.val();
        }
    }
    module.visit(&mut Touch);
}

/// Burn's plain SGD over a ResNet, as the step benchmarks train it.
pub type ResNetSgd<B> = burn::optim::adaptor::OptimizerAdaptor<
    burn::optim::Sgd<<B as burn::tensor::backend::AutodiffBackend>::InnerBackend>,
    firemesh_resnet::ResNet<B>,
    B,
>;

/// A fresh [`ResNetSgd`].
pub fn resnet_sgd<B>() -> ResNetSgd<B>
where
    B: burn::tensor::backend::AutodiffBackend,
    firemesh_resnet::ResNet<B>: burn::module::AutodiffModule<B>,
{
    burn::optim::SgdConfig::new().init::<B, firemesh_resnet::ResNet<B>>()
}

/// A ResNet's cross-entropy loss on a batch of images and labels.
pub fn resnet_loss<B: burn::tensor::backend::Backend>(
    model: &firemesh_resnet::ResNet<B>,
    images: burn::tensor::Tensor<B, 4>,
    labels: burn::tensor::Tensor<B, 1, burn::tensor::Int>,
) -> burn::tensor::Tensor<B, 1> {
    let logits = model.forward(images);
    burn::nn::loss::CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits, labels)
}
