//! The simplest tokenizer: one token per UTF-8 byte, vocabulary 256.

use super::Tokenizer;
use crate::error::DatasetError;

/// Token id = byte value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByteTokenizer;

impl Tokenizer for ByteTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, DatasetError> {
        Ok(text.bytes().map(u32::from).collect())
    }

    fn decode(&self, ids: &[u32]) -> Result<String, DatasetError> {
        let bytes = ids
            .iter()
            .map(|&id| {
                u8::try_from(id).map_err(|_| DatasetError::UnknownToken {
                    id,
                    vocab_size: 256,
                })
            })
            .collect::<Result<Vec<u8>, _>>()?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn vocab_size(&self) -> usize {
        256
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_roundtrip_including_multibyte_characters() {
        let text = "héllo ✓";
        let ids = ByteTokenizer.encode(text).unwrap();
        assert_eq!(ids.len(), text.len());
        assert_eq!(&ids[..2], &[104, 0xC3]);
        assert_eq!(ByteTokenizer.decode(&ids).unwrap(), text);
        assert!(matches!(
            ByteTokenizer.decode(&[256]),
            Err(DatasetError::UnknownToken { id: 256, .. })
        ));
    }
}
