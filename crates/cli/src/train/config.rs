//! What a training run is asked to do. [`TrainOptions`] are the options of `firemesh train`; a
//! TOML file takes the same keys, and the command line overrides it. [`TrainConfig`] is the
//! checked result, with every default filled in.

use crate::options::{self, at_least_one, MeshOptions, StepOptions};
use crate::{Error, Result};
use firemesh::mesh::MeshKind;
use firemesh::precision::{LossScaling, Precision};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use firemesh::optim::{OptimizerKind, ScheduleKind};
pub use firemesh_zoo::{ModelName, NetConfig};

/// The optimizer that trains `net` unless asked otherwise: SGD with momentum for a ResNet (as
/// the ResNet papers), AdamW for a GPT (as GPT-2).
pub fn default_optimizer(net: &NetConfig) -> OptimizerKind {
    match net {
        NetConfig::ResNet(_) => OptimizerKind::Sgd,
        NetConfig::Gpt(_) => OptimizerKind::Adamw,
    }
}

/// Where the training data comes from: `synthetic`, `cifar10:DIR` (the binary version),
/// `images:DIR` (one sub-folder per class, or `train/` and `val/` holding them) or
/// `text:FILE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DataSpec {
    Synthetic,
    Cifar10(PathBuf),
    Images(PathBuf),
    Text(PathBuf),
}

impl DataSpec {
    pub fn is_text(&self) -> bool {
        matches!(self, Self::Text(_))
    }
}

impl FromStr for DataSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        let path = || -> Result<PathBuf> {
            if rest.is_empty() {
                Err(Error::Invalid(format!(
                    "--data {kind}: needs a path, as in {kind}:PATH"
                )))
            } else {
                Ok(PathBuf::from(rest))
            }
        };
        match kind {
            "synthetic" if rest.is_empty() => Ok(Self::Synthetic),
            "cifar10" => Ok(Self::Cifar10(path()?)),
            "images" => Ok(Self::Images(path()?)),
            "text" => Ok(Self::Text(path()?)),
            _ => Err(Error::Invalid(format!(
                "unknown data source {s:?}: expected synthetic, cifar10:DIR, images:DIR or text:FILE"
            ))),
        }
    }
}

impl TryFrom<String> for DataSpec {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<DataSpec> for String {
    fn from(d: DataSpec) -> String {
        d.to_string()
    }
}

impl fmt::Display for DataSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Synthetic => f.write_str("synthetic"),
            Self::Cifar10(p) => write!(f, "cifar10:{}", p.display()),
            Self::Images(p) => write!(f, "images:{}", p.display()),
            Self::Text(p) => write!(f, "text:{}", p.display()),
        }
    }
}

/// How text becomes tokens: `bytes` (256 ids) or `gpt2:DIR` (GPT-2's BPE from
/// `DIR/encoder.json` and `DIR/vocab.bpe`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum TokenizerSpec {
    Bytes,
    Gpt2(PathBuf),
}

impl FromStr for TokenizerSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.split_once(':') {
            None if s == "bytes" => Ok(Self::Bytes),
            Some(("gpt2", dir)) if !dir.is_empty() => Ok(Self::Gpt2(dir.into())),
            _ => Err(Error::Invalid(format!(
                "unknown tokenizer {s:?}: expected bytes or gpt2:DIR"
            ))),
        }
    }
}

impl TryFrom<String> for TokenizerSpec {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<TokenizerSpec> for String {
    fn from(t: TokenizerSpec) -> String {
        match t {
            TokenizerSpec::Bytes => "bytes".into(),
            TokenizerSpec::Gpt2(dir) => format!("gpt2:{}", dir.display()),
        }
    }
}

/// The options of `firemesh train`, each optional: unset ones come from `--config FILE.toml`
/// (same keys, e.g. `model = "resnet18"`, `checkpoint-every = 100`), then from the defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize, clap::Args)]
#[serde(rename_all = "kebab-case")]
pub struct TrainOptions {
    /// A TOML file with any of these options (keys as spelled here, without the dashes).
    #[arg(long, value_name = "FILE.toml")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Model to train [default: resnet-tiny].
    #[arg(long, value_enum)]
    pub model: Option<ModelName>,
    /// Data: synthetic, cifar10:DIR, images:DIR or text:FILE [default: synthetic images, or
    /// text for a GPT].
    #[arg(long, value_name = "SOURCE")]
    pub data: Option<DataSpec>,
    #[command(flatten)]
    #[serde(flatten)]
    pub devices: MeshOptions,
    /// Samples (images or sequences) per step over all ranks [default: 32].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Epochs over the training split [default: 2, unless --steps is given].
    #[arg(long, conflicts_with = "steps")]
    pub epochs: Option<usize>,
    /// Optimizer steps (instead of --epochs).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Optimizer [default: sgd for a ResNet, adamw for a GPT].
    #[arg(long, value_parser = options::named::<OptimizerKind>())]
    pub optimizer: Option<OptimizerKind>,
    /// Peak learning rate [default: 0.05 for SGD, 0.003 for AdamW].
    #[arg(long)]
    pub lr: Option<f64>,
    /// SGD momentum [default: 0.9].
    #[arg(long)]
    pub momentum: Option<f64>,
    /// Weight decay [default: 0.0001 for SGD, 0.01 for AdamW].
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Steps of linear warm-up [default: 5% of the steps].
    #[arg(long)]
    pub warmup_steps: Option<usize>,
    /// Learning-rate schedule after the warm-up [default: cosine].
    #[arg(long, value_parser = options::named::<ScheduleKind>())]
    pub schedule: Option<ScheduleKind>,
    /// Seed of the model, the data order and the synthetic data [default: 42].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Folder of the run's metrics, charts and checkpoints [default: runs/MODEL-NNN, the
    /// next free one; with --resume, the newest one of the model].
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Write a checkpoint every this many steps, and at the end [default: 50].
    #[arg(long)]
    pub checkpoint_every: Option<usize>,
    /// Checkpoints to keep [default: 3].
    #[arg(long)]
    pub keep_checkpoints: Option<usize>,
    /// Continue from the newest valid checkpoint of --run-dir.
    #[arg(long)]
    #[serde(default)]
    pub resume: bool,
    /// Side of the square images, in pixels (image folders are resized) [default: 16 for
    /// resnet-tiny on synthetic data, else 32].
    #[arg(long)]
    pub image_size: Option<usize>,
    /// Images in the synthetic training split [default: 1024].
    #[arg(long)]
    pub samples: Option<usize>,
    /// Samples of the held-out split evaluated after each epoch (0: all) [default: 512].
    #[arg(long)]
    pub eval_samples: Option<usize>,
    /// Tokens per training sequence [default: the model's context length, at most 256].
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Tokenizer of text data: bytes or gpt2:DIR [default: bytes].
    #[arg(long, value_name = "TOKENIZER")]
    pub tokenizer: Option<TokenizerSpec>,
    /// Precision of matrix products and convolutions: f32, bf16 (f32 elsewhere) or f16 (f32
    /// elsewhere, with dynamic loss scaling) [default: f32].
    #[arg(long, value_parser = options::named::<Precision>())]
    pub precision: Option<Precision>,
    /// ZeRO stage: 0, 1 (each rank keeps and updates 1/N of the optimizer state; the
    /// parameters are all-gathered after each update) or 3 (each rank stores 1/N of the
    /// parameters too; each op gathers the ones it reads) [default: 0].
    #[arg(long, value_name = "STAGE")]
    pub zero: Option<u8>,
    /// f16: clean steps in a row after which the loss scale doubles [default: 2000].
    #[arg(long, value_name = "STEPS")]
    pub loss_scale_interval: Option<usize>,
    /// f16: the first loss scale [default: 65536].
    #[arg(long, value_name = "SCALE")]
    pub loss_scale: Option<f64>,
    #[command(flatten)]
    #[serde(flatten)]
    pub sums: StepOptions,
    /// Sum every gradient bucket after the backward pass instead of as soon as the backward
    /// pass fills it (for comparisons: the communication early buckets hide).
    #[arg(long)]
    #[serde(default)]
    pub late_buckets: bool,
    /// Batches prepared ahead on worker threads [default: 2].
    #[arg(long)]
    pub prefetch: Option<usize>,
    /// Threads decoding samples [default: 2].
    #[arg(long)]
    pub workers: Option<usize>,
    /// Print a progress line every this many steps when not on a terminal [default: 10].
    #[arg(long)]
    pub log_every: Option<usize>,
}

impl TrainOptions {
    /// Reads a TOML file of options; unknown keys are errors.
    pub fn from_toml_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Invalid(format!("cannot read {}: {e}", path.display())))?;
        let invalid = |msg: String| Error::Invalid(format!("{}: {msg}", path.display()));
        let table: toml::Table =
            toml::from_str(&text).map_err(|e| invalid(e.message().trim().to_string()))?;
        // Every key, also those of the flattened option groups (serde cannot deny unknown
        // fields through `flatten`).
        let known = to_map(&TrainOptions::default())?;
        if let Some(key) = table.keys().find(|k| !known.contains_key(*k)) {
            let keys: Vec<&str> = known.keys().map(String::as_str).collect();
            return Err(invalid(format!(
                "unknown field `{key}`, expected one of {}",
                keys.join(", ")
            )));
        }
        toml::from_str(&text).map_err(|e| invalid(e.message().trim().to_string()))
    }

    /// These options over `base`: each one set here wins.
    pub fn over(self, base: TrainOptions) -> Result<TrainOptions> {
        let (mut merged, mine) = (to_map(&base)?, to_map(&self)?);
        for (key, value) in mine {
            if !(value.is_null() || value == serde_json::Value::Bool(false)) {
                merged.insert(key, value);
            }
        }
        serde_json::from_value(serde_json::Value::Object(merged))
            .map_err(|e| Error::Invalid(format!("options: {e}")))
    }

    /// The command line's options over those of its `--config` file, if any.
    pub fn with_config_file(self) -> Result<TrainOptions> {
        match &self.config {
            Some(path) => self.clone().over(Self::from_toml_file(path)?),
            None => Ok(self),
        }
    }
}

fn to_map(o: &TrainOptions) -> Result<serde_json::Map<String, serde_json::Value>> {
    match serde_json::to_value(o) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        _ => Err(Error::Invalid("options cannot be serialized".into())),
    }
}

/// How long to train.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Length {
    Epochs(usize),
    Steps(usize),
}

/// A checked training configuration: every value is usable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TrainConfig {
    pub model: ModelName,
    pub data: DataSpec,
    pub mesh: MeshKind,
    pub ranks: Option<usize>,
    pub share_devices: bool,
    pub batch: usize,
    pub length: Length,
    pub optimizer: OptimizerKind,
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    pub warmup_steps: Option<usize>,
    pub schedule: ScheduleKind,
    pub seed: u64,
    pub run_dir: Option<PathBuf>,
    pub checkpoint_every: usize,
    pub keep_checkpoints: usize,
    pub resume: bool,
    pub image_size: usize,
    pub samples: usize,
    pub eval_samples: usize,
    pub seq_len: Option<usize>,
    pub tokenizer: TokenizerSpec,
    pub precision: Precision,
    pub comm_precision: Precision,
    pub zero: u8,
    /// How the loss scale of f16 moves.
    pub loss_scaling: LossScaling,
    /// Bytes of a gradient bucket.
    pub bucket_bytes: usize,
    /// ZeRO-3: bytes of parameter gathers issued ahead of use (0: each at use).
    #[serde(default)]
    pub gather_ahead_bytes: usize,
    /// Buckets summed during the backward pass as it fills them (else after it).
    pub early_buckets: bool,
    pub prefetch: usize,
    pub workers: usize,
    pub log_every: usize,
}

impl TrainConfig {
    /// Fills in the defaults and checks every value; the error names the option.
    pub fn resolve(o: TrainOptions) -> Result<Self> {
        let model = o.model.unwrap_or(ModelName::ResnetTiny);
        let data = match o.data {
            Some(d) => d,
            None if model.is_gpt() => {
                return Err(Error::Invalid(format!(
                    "--model {model} trains on text: give --data text:FILE"
                )))
            }
            None => DataSpec::Synthetic,
        };
        if model.is_gpt() != data.is_text() {
            let (wants, got) = if model.is_gpt() {
                ("text (text:FILE)", "images")
            } else {
                ("images", "text")
            };
            return Err(Error::Invalid(format!(
                "--model {model} trains on {wants}, but --data {data} is {got}"
            )));
        }
        let optimizer = o
            .optimizer
            .unwrap_or(default_optimizer(&model.net(10, 32)?));
        let length = match (o.epochs, o.steps) {
            (Some(_), Some(_)) => return Err(invalid("give --epochs or --steps, not both")),
            (_, Some(s)) => Length::Steps(at_least_one("--steps", s)?),
            (Some(e), None) => Length::Epochs(at_least_one("--epochs", e)?),
            (None, None) => Length::Epochs(2),
        };
        let default_lr = match optimizer {
            OptimizerKind::Sgd => 0.05,
            OptimizerKind::Adamw => 3e-3,
        };
        let lr = o.lr.unwrap_or(default_lr);
        if !(lr.is_finite() && lr > 0.0) {
            return Err(Error::Invalid(format!(
                "--lr {lr}: the learning rate must be finite and positive"
            )));
        }
        let momentum = o.momentum.unwrap_or(0.9);
        if !(0.0..1.0).contains(&momentum) {
            return Err(Error::Invalid(format!(
                "--momentum {momentum}: must be in [0, 1)"
            )));
        }
        let weight_decay = o.weight_decay.unwrap_or(match optimizer {
            OptimizerKind::Sgd => 1e-4,
            OptimizerKind::Adamw => 0.01,
        });
        if !(weight_decay.is_finite() && weight_decay >= 0.0) {
            return Err(Error::Invalid(format!(
                "--weight-decay {weight_decay}: must be finite and not negative"
            )));
        }
        if let Some(ranks) = o.devices.ranks {
            at_least_one("--ranks", ranks)?;
        }
        let default_size = if model == ModelName::ResnetTiny && data == DataSpec::Synthetic {
            16
        } else {
            32
        };
        let image_size = options::image_size(o.image_size.unwrap_or(default_size))?;
        if matches!(data, DataSpec::Cifar10(_)) && o.image_size.is_some_and(|s| s != 32) {
            return Err(Error::Invalid(format!(
                "--image-size {image_size}: CIFAR-10 images are 32×32"
            )));
        }
        let seq_len = o.seq_len.map(options::seq_len).transpose()?;
        let bucket_bytes = o.sums.bucket_bytes()?;
        let defaults = LossScaling::default();
        let loss_scaling = LossScaling {
            initial: o.loss_scale.unwrap_or(defaults.initial),
            growth_interval: o.loss_scale_interval.unwrap_or(defaults.growth_interval),
        }
        .validated()?;
        Ok(Self {
            model,
            data,
            mesh: o.devices.mesh.unwrap_or(MeshKind::Auto),
            ranks: o.devices.ranks,
            share_devices: o.devices.share_devices,
            batch: at_least_one("--batch", o.batch.unwrap_or(32))?,
            length,
            optimizer,
            lr,
            momentum,
            weight_decay,
            warmup_steps: o.warmup_steps,
            schedule: o.schedule.unwrap_or(ScheduleKind::Cosine),
            seed: o.seed.unwrap_or(42),
            run_dir: o.run_dir,
            checkpoint_every: at_least_one("--checkpoint-every", o.checkpoint_every.unwrap_or(50))?,
            keep_checkpoints: at_least_one("--keep-checkpoints", o.keep_checkpoints.unwrap_or(3))?,
            resume: o.resume,
            image_size,
            samples: at_least_one("--samples", o.samples.unwrap_or(1024))?,
            eval_samples: o.eval_samples.unwrap_or(512),
            seq_len,
            tokenizer: o.tokenizer.unwrap_or(TokenizerSpec::Bytes),
            precision: o.precision.unwrap_or_default(),
            comm_precision: o.sums.comm_precision(),
            zero: firemesh::zero::stage(o.zero.unwrap_or(0))?,
            loss_scaling,
            bucket_bytes,
            gather_ahead_bytes: o.sums.gather_ahead_bytes()?,
            early_buckets: !o.late_buckets,
            prefetch: at_least_one("--prefetch", o.prefetch.unwrap_or(2))?,
            workers: at_least_one("--workers", o.workers.unwrap_or(2))?,
            log_every: at_least_one("--log-every", o.log_every.unwrap_or(10))?,
        })
    }
}

fn invalid(msg: &str) -> Error {
    Error::Invalid(msg.into())
}
