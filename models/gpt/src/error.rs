//! Errors returned by GPT configuration, input checks and generation.

/// What can go wrong when building or calling a GPT.
#[derive(Debug, thiserror::Error)]
pub enum GptError {
    /// A configuration field has a value the model cannot be built from.
    #[error("invalid GPT config: `{field}` {reason}")]
    InvalidConfig {
        /// Name of the offending field.
        field: &'static str,
        /// Why the value is rejected.
        reason: String,
    },
    /// A token sequence is shorter or longer than the call accepts.
    #[error("sequence of {len} tokens is outside the accepted range {min}..={max}")]
    SequenceLength {
        /// Tokens given.
        len: usize,
        /// Fewest tokens accepted.
        min: usize,
        /// Most tokens accepted (the context length, plus one for the loss).
        max: usize,
    },
    /// A token id is not below the vocabulary size.
    #[error("token id {token} is out of range for a vocabulary of {vocab_size}")]
    TokenOutOfRange {
        /// The offending id.
        token: u32,
        /// The model's vocabulary size.
        vocab_size: usize,
    },
    /// Sampling temperature that is not a positive finite number.
    #[error("sampling temperature must be positive and finite, got {0}")]
    InvalidTemperature(f64),
}
