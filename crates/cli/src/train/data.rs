//! The data of a run: the training and held-out splits of `--data`, opened and checked before
//! anything trains.

use super::config::{DataSpec, TokenizerSpec, TrainConfig};
use crate::{Error, Result};
use burn::data::dataset::Dataset;
use firemesh_datasets::{
    ByteTokenizer, Cifar10, DatasetError, Gpt2Bpe, ImageFolder, ImageItem, SyntheticImages,
    SyntheticImagesConfig, TextCorpus, Tokenizer,
};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// Where images come from.
#[derive(Clone)]
pub enum ImageSource {
    Synthetic(Arc<SyntheticImages>),
    Cifar10(Arc<Cifar10>),
    Folder(Arc<ImageFolder>),
}

impl ImageSource {
    /// Item `index`, decoded; an error names the file.
    pub fn load(&self, index: usize) -> std::result::Result<ImageItem, DatasetError> {
        let len = self.len();
        let missing = DatasetError::IndexOutOfRange { index, len };
        match self {
            Self::Synthetic(d) => d.get(index).ok_or(missing),
            Self::Cifar10(d) => d.get(index).ok_or(missing),
            Self::Folder(d) => d.load(index),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Synthetic(d) => d.len(),
            Self::Cifar10(d) => d.len(),
            Self::Folder(d) => d.len(),
        }
    }
}

/// A split: some items of a source, in a fixed order.
#[derive(Clone)]
pub enum Split {
    Images {
        source: ImageSource,
        items: Vec<usize>,
    },
    Tokens(Arc<TextCorpus>),
}

impl Split {
    fn images(source: ImageSource, items: impl IntoIterator<Item = usize>) -> Self {
        Self::Images {
            source,
            items: items.into_iter().collect(),
        }
    }

    /// Samples (images or sequences).
    pub fn len(&self) -> usize {
        match self {
            Self::Images { items, .. } => items.len(),
            Self::Tokens(c) => c.len(),
        }
    }
}

/// The training and held-out splits of a run.
pub struct RunData {
    pub train: Split,
    pub eval: Split,
    /// Image classes, or the tokenizer's vocabulary size.
    pub classes: usize,
    pub tokenizer: Option<Arc<dyn Tokenizer>>,
    /// Tokens per sequence item (`seq_len + 1`: inputs and the next-token targets).
    pub window: Option<usize>,
    pub describe: String,
}

/// Opens `--data` for `config`. Text needs `seq_len` (tokens per training sequence).
pub fn open(config: &TrainConfig, seq_len: usize) -> Result<RunData> {
    let side = config.image_size;
    match &config.data {
        DataSpec::Synthetic => {
            let eval = config.eval_samples.max(1);
            let source = SyntheticImages::new(SyntheticImagesConfig {
                shape: [3, side, side],
                ..SyntheticImagesConfig::cifar_like(config.samples + eval, config.seed)
            })?;
            let source = ImageSource::Synthetic(Arc::new(source));
            Ok(RunData {
                train: Split::images(source.clone(), 0..config.samples),
                eval: Split::images(source, config.samples..config.samples + eval),
                classes: 10,
                tokenizer: None,
                window: None,
                describe: format!(
                    "{} synthetic {side}×{side} images in 10 classes ({eval} held out)",
                    config.samples
                ),
            })
        }
        DataSpec::Cifar10(dir) => {
            must_be_dir(dir)?;
            let train = ImageSource::Cifar10(Arc::new(Cifar10::train(dir)?));
            let (train, eval, held_out) = if dir.join("test_batch.bin").exists() {
                let test = ImageSource::Cifar10(Arc::new(Cifar10::test(dir)?));
                (
                    Split::images(train.clone(), 0..train.len()),
                    Split::images(test.clone(), 0..test.len()),
                    "test_batch.bin",
                )
            } else {
                let (head, tail) = holdout(train.len());
                (
                    Split::images(train.clone(), head),
                    Split::images(train, tail),
                    "the last tenth of the training files",
                )
            };
            Ok(RunData {
                describe: format!(
                    "CIFAR-10 from {}: {} training images, held out: {held_out}",
                    dir.display(),
                    train.len()
                ),
                train,
                eval,
                classes: Cifar10::NUM_CLASSES,
                tokenizer: None,
                window: None,
            })
        }
        DataSpec::Images(dir) => {
            must_be_dir(dir)?;
            let (train_dir, val_dir) = (dir.join("train"), dir.join("val"));
            let (train, eval, classes, held_out) = if train_dir.is_dir() && val_dir.is_dir() {
                let train = ImageFolder::open(&train_dir, side)?;
                let val = ImageFolder::open(&val_dir, side)?;
                if val.classes() != train.classes() {
                    return Err(Error::Invalid(format!(
                        "{} and {} have different class folders",
                        train_dir.display(),
                        val_dir.display()
                    )));
                }
                let classes = train.classes().len();
                let (train, val) = (
                    ImageSource::Folder(Arc::new(train)),
                    ImageSource::Folder(Arc::new(val)),
                );
                (
                    Split::images(train.clone(), 0..train.len()),
                    Split::images(val.clone(), 0..val.len()),
                    classes,
                    "val/",
                )
            } else {
                let folder = ImageFolder::open(dir, side)?;
                let classes = folder.classes().len();
                let source = ImageSource::Folder(Arc::new(folder));
                // Every tenth image is held out, so that every class is in both splits.
                let (train, eval): (Vec<usize>, Vec<usize>) =
                    (0..source.len()).partition(|i| i % 10 != 9);
                (
                    Split::images(source.clone(), train),
                    Split::images(source, eval),
                    classes,
                    "every tenth image",
                )
            };
            Ok(RunData {
                describe: format!(
                    "{} images in {classes} classes from {}, resized to {side}×{side}, held out: {held_out}",
                    train.len(),
                    dir.display()
                ),
                train,
                eval,
                classes,
                tokenizer: None,
                window: None,
            })
        }
        DataSpec::Text(file) => open_text(file, &config.tokenizer, seq_len),
    }
}

fn open_text(file: &Path, tokenizer: &TokenizerSpec, seq_len: usize) -> Result<RunData> {
    let bytes = std::fs::read(file)
        .map_err(|e| Error::Invalid(format!("cannot read {}: {e}", file.display())))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::Invalid(format!(
            "text file {} is empty",
            file.display()
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| Error::Invalid(format!("{} is not UTF-8 text: {e}", file.display())))?;
    let tokenizer: Arc<dyn Tokenizer> = match tokenizer {
        TokenizerSpec::Bytes => Arc::new(ByteTokenizer),
        TokenizerSpec::Gpt2(dir) => Arc::new(Gpt2Bpe::from_files(
            dir.join("encoder.json"),
            dir.join("vocab.bpe"),
        )?),
    };
    let tokens = tokenizer.encode(&text)?;
    // Windows of seq_len + 1 tokens; the last tenth (at least one window) is held out.
    let windows = tokens.len().saturating_sub(1) / seq_len;
    if windows < 2 {
        return Err(Error::Invalid(format!(
            "{} has {} tokens: too few for a training and a held-out sequence of {seq_len} tokens (use a longer text or a smaller --seq-len)",
            file.display(),
            tokens.len()
        )));
    }
    let eval_windows = (windows / 10).max(1);
    let split = (windows - eval_windows) * seq_len;
    let train = TextCorpus::from_tokens(tokens[..split + 1].to_vec(), seq_len)?;
    let eval = TextCorpus::from_tokens(tokens[split..].to_vec(), seq_len)?;
    Ok(RunData {
        describe: format!(
            "{} ({} tokens, {} sequences of {seq_len} for training, {} held out)",
            file.display(),
            tokens.len(),
            train.len(),
            eval.len()
        ),
        train: Split::Tokens(Arc::new(train)),
        eval: Split::Tokens(Arc::new(eval)),
        classes: tokenizer.vocab_size(),
        tokenizer: Some(tokenizer),
        window: Some(seq_len + 1),
    })
}

/// (training, held-out) indices: the last tenth, at least one item, is held out.
fn holdout(len: usize) -> (Range<usize>, Range<usize>) {
    let held = (len / 10).max(1).min(len);
    (0..len - held, len - held..len)
}

fn must_be_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "{} is not a folder{}",
            dir.display(),
            if dir.exists() {
                ""
            } else {
                " (it does not exist)"
            }
        )))
    }
}
