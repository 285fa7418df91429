//! GPT-2's byte-level BPE, from a local `encoder.json` (token → id) and `vocab.bpe` (merges).
//!
//! Text is split by [`pretokenize::split`](super::pretokenize), each piece's UTF-8 bytes are
//! mapped to GPT-2's printable stand-in characters, and the adjacent pair with the lowest merge
//! rank is merged (every occurrence at once) until no pair has a rank.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{pretokenize, Tokenizer};
use crate::error::DatasetError;

/// A GPT-2 BPE tokenizer loaded from local files.
#[derive(Debug, Clone)]
pub struct Gpt2Bpe {
    encoder: HashMap<String, u32>,
    decoder: HashMap<u32, String>,
    ranks: HashMap<(String, String), usize>,
    byte_to_char: [char; 256],
    char_to_byte: HashMap<char, u8>,
    vocab_path: PathBuf,
}

/// GPT-2's reversible byte → character table: printable Latin-1 bytes stand for themselves,
/// the other 68 bytes take the characters from U+0100 on, in byte order.
fn byte_to_char() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = ['\0'; 256];
    let mut next = 0x100;
    for byte in 0..=255u8 {
        table[byte as usize] = if printable(byte) {
            char::from(byte)
        } else {
            next += 1;
            char::from_u32(next - 1).unwrap_or('\u{FFFD}')
        };
    }
    table
}

impl Gpt2Bpe {
    /// Loads `encoder.json` and `vocab.bpe` (GPT-2's file names; any names work).
    pub fn from_files(
        encoder_json: impl AsRef<Path>,
        vocab_bpe: impl AsRef<Path>,
    ) -> Result<Self, DatasetError> {
        let (encoder_path, merges_path) = (encoder_json.as_ref(), vocab_bpe.as_ref());
        let read =
            |path: &Path| std::fs::read_to_string(path).map_err(|e| DatasetError::io(path, e));
        let encoder: HashMap<String, u32> =
            serde_json::from_str(&read(encoder_path)?).map_err(|e| {
                DatasetError::malformed(
                    encoder_path,
                    format!("expected a JSON object of token ids: {e}"),
                )
            })?;
        if encoder.is_empty() {
            return Err(DatasetError::malformed(encoder_path, "has no tokens"));
        }
        let ranks = parse_merges(&read(merges_path)?, merges_path, &encoder, encoder_path)?;
        let decoder = encoder
            .iter()
            .map(|(token, &id)| (id, token.clone()))
            .collect();
        let byte_to_char = byte_to_char();
        let char_to_byte = byte_to_char
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        Ok(Self {
            encoder,
            decoder,
            ranks,
            byte_to_char,
            char_to_byte,
            vocab_path: encoder_path.to_path_buf(),
        })
    }

    /// Applies the merges to one pre-tokenized piece, returning its symbols.
    fn merge(&self, piece: &str) -> Vec<String> {
        let mut symbols: Vec<String> = piece
            .bytes()
            .map(|b| self.byte_to_char[b as usize].to_string())
            .collect();
        loop {
            let best = symbols
                .windows(2)
                .filter_map(|pair| {
                    self.ranks
                        .get(&(pair[0].clone(), pair[1].clone()))
                        .map(|&rank| (rank, pair))
                })
                .min_by_key(|&(rank, _)| rank)
                .map(|(_, pair)| (pair[0].clone(), pair[1].clone()));
            let Some((left, right)) = best else {
                return symbols;
            };
            let mut merged = Vec::with_capacity(symbols.len());
            let mut i = 0;
            while i < symbols.len() {
                if i + 1 < symbols.len() && symbols[i] == left && symbols[i + 1] == right {
                    merged.push(format!("{left}{right}"));
                    i += 2;
                } else {
                    merged.push(std::mem::take(&mut symbols[i]));
                    i += 1;
                }
            }
            symbols = merged;
        }
    }
}

/// Parses `vocab.bpe`: an optional `#version` line, then one merge "left right" per line,
/// highest priority first. Every merge result must be a token of the encoder.
fn parse_merges(
    text: &str,
    path: &Path,
    encoder: &HashMap<String, u32>,
    encoder_path: &Path,
) -> Result<HashMap<(String, String), usize>, DatasetError> {
    let mut ranks = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        if line.starts_with("#version") || line.is_empty() {
            continue;
        }
        let mut parts = line.split(' ');
        let (Some(left), Some(right), None) = (parts.next(), parts.next(), parts.next()) else {
            let reason = format!(
                "line {} is {line:?}, expected two symbols separated by one space",
                number + 1
            );
            return Err(DatasetError::malformed(path, reason));
        };
        let merged = format!("{left}{right}");
        if !encoder.contains_key(&merged) {
            let reason = format!(
                "line {} merges into {merged:?}, which {} lacks",
                number + 1,
                encoder_path.display()
            );
            return Err(DatasetError::malformed(path, reason));
        }
        let rank = ranks.len();
        ranks
            .entry((left.to_string(), right.to_string()))
            .or_insert(rank);
    }
    Ok(ranks)
}

impl Tokenizer for Gpt2Bpe {
    fn encode(&self, text: &str) -> Result<Vec<u32>, DatasetError> {
        let mut ids = Vec::new();
        for piece in pretokenize::split(text) {
            for symbol in self.merge(piece) {
                let id = self
                    .encoder
                    .get(&symbol)
                    .ok_or_else(|| DatasetError::UnknownSymbol {
                        symbol: symbol.clone(),
                        vocab: self.vocab_path.clone(),
                    })?;
                ids.push(*id);
            }
        }
        Ok(ids)
    }

    fn decode(&self, ids: &[u32]) -> Result<String, DatasetError> {
        let mut bytes = Vec::new();
        for &id in ids {
            let token = self.decoder.get(&id).ok_or(DatasetError::UnknownToken {
                id,
                vocab_size: self.vocab_size(),
            })?;
            // Characters outside the byte table (none in GPT-2's vocabulary) pass through as UTF-8.
            for c in token.chars() {
                match self.char_to_byte.get(&c) {
                    Some(&b) => bytes.push(b),
                    None => bytes.extend_from_slice(c.to_string().as_bytes()),
                }
            }
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn vocab_size(&self) -> usize {
        self.decoder.keys().max().map_or(0, |&max| max as usize + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::byte_to_char;

    #[test]
    fn byte_table_matches_gpt2() {
        let table = byte_to_char();
        assert_eq!(table[b'a' as usize], 'a');
        assert_eq!(table[b' ' as usize], 'Ġ'); // U+0120: the 33rd remapped byte
        assert_eq!(table[b'\n' as usize], 'Ċ'); // U+010A
        assert_eq!(table[0], 'Ā'); // U+0100
        assert_eq!(table[0xAD], 'Ń'); // U+0143: soft hyphen, the last remapped byte
        let mut unique = table.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 256);
    }
}
