//! A token stream from local text files, cut into fixed-length training windows.

use std::path::Path;

use burn::data::dataset::Dataset;

use super::Tokenizer;
use crate::error::DatasetError;

/// Windows of `seq_len + 1` consecutive tokens (inputs plus next-token targets). Window `i`
/// starts at token `i * seq_len`, so consecutive windows share one token and every token is
/// predicted once.
#[derive(Debug, Clone)]
pub struct TextCorpus {
    tokens: Vec<u32>,
    seq_len: usize,
}

impl TextCorpus {
    /// Reads and tokenizes UTF-8 `files` in order and concatenates their tokens.
    pub fn from_files(
        files: &[impl AsRef<Path>],
        tokenizer: &dyn Tokenizer,
        seq_len: usize,
    ) -> Result<Self, DatasetError> {
        if files.is_empty() {
            return Err(DatasetError::invalid(
                "files",
                "must name at least one text file",
            ));
        }
        let mut tokens = Vec::new();
        for file in files {
            let path = file.as_ref();
            let bytes = std::fs::read(path).map_err(|e| DatasetError::io(path, e))?;
            let text = String::from_utf8(bytes)
                .map_err(|e| DatasetError::malformed(path, format!("is not UTF-8 text: {e}")))?;
            tokens.extend(tokenizer.encode(&text)?);
        }
        Self::from_tokens(tokens, seq_len)
    }

    /// Wraps an existing token stream; it must hold at least one window.
    pub fn from_tokens(tokens: Vec<u32>, seq_len: usize) -> Result<Self, DatasetError> {
        if seq_len == 0 {
            return Err(DatasetError::invalid("seq_len", "must be at least 1"));
        }
        if tokens.len() < seq_len + 1 {
            let reason = format!(
                "the corpus has {} tokens, fewer than one window of {}",
                tokens.len(),
                seq_len + 1
            );
            return Err(DatasetError::invalid("seq_len", reason));
        }
        Ok(Self { tokens, seq_len })
    }

    /// Tokens per window minus one.
    pub fn seq_len(&self) -> usize {
        self.seq_len
    }

    /// The whole token stream.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }
}

impl Dataset<Vec<u32>> for TextCorpus {
    fn get(&self, index: usize) -> Option<Vec<u32>> {
        let start = index.checked_mul(self.seq_len)?;
        self.tokens
            .get(start..start + self.seq_len + 1)
            .map(<[u32]>::to_vec)
    }

    fn len(&self) -> usize {
        (self.tokens.len() - 1) / self.seq_len
    }
}
