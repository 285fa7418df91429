//! Errors of datasets, samplers, tokenizers and batchers.

use std::path::PathBuf;

/// What can go wrong when reading data or arranging it for ranks.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A file or folder could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file's content does not have the expected format.
    #[error("malformed {}: {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument has a value that cannot be used.
    #[error("invalid `{name}`: {reason}")]
    InvalidArgument {
        /// The parameter's name.
        name: &'static str,
        /// Why the value is rejected.
        reason: String,
    },
    /// A dataset index is not below the dataset's length.
    #[error("index {index} is out of range for a dataset of {len} items")]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// The dataset's length.
        len: usize,
    },
    /// Text contains a symbol the tokenizer's vocabulary cannot represent.
    #[error("cannot tokenize {symbol:?}: not in the vocabulary {}", vocab.display())]
    UnknownSymbol {
        /// The symbol (a BPE unit in GPT-2's byte-to-unicode alphabet).
        symbol: String,
        /// The vocabulary file.
        vocab: PathBuf,
    },
    /// A token id has no entry in the tokenizer's vocabulary.
    #[error("token id {id} is not in the vocabulary of {vocab_size} tokens")]
    UnknownToken {
        /// The id.
        id: u32,
        /// Size of the vocabulary.
        vocab_size: usize,
    },
}

impl DatasetError {
    pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            name,
            reason: reason.into(),
        }
    }

    pub(crate) fn malformed(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Malformed {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
