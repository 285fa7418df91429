//! Text corpora from local files and the tokenizers that turn them into token ids.

mod bpe;
mod byte_tokenizer;
mod corpus;
mod pretokenize;

pub use bpe::Gpt2Bpe;
pub use byte_tokenizer::ByteTokenizer;
pub use corpus::TextCorpus;

use crate::error::DatasetError;

/// Turns text into token ids and back.
pub trait Tokenizer: Send + Sync {
    /// Token ids of `text`; fails only if the vocabulary cannot represent some of it.
    fn encode(&self, text: &str) -> Result<Vec<u32>, DatasetError>;
    /// Text of `ids`; bytes that are not valid UTF-8 become U+FFFD.
    fn decode(&self, ids: &[u32]) -> Result<String, DatasetError>;
    /// Number of token ids (ids are below it).
    fn vocab_size(&self) -> usize;
}
