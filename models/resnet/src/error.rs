//! Errors returned by ResNet configuration and input checks.

/// What can go wrong when building or calling a ResNet.
#[derive(Debug, thiserror::Error)]
pub enum ResNetError {
    /// `ResNetConfig::from_depth` was given a depth without a standard layout.
    #[error("unsupported ResNet depth {0}: expected one of 18, 34, 50, 101, 152")]
    UnsupportedDepth(usize),
    /// A configuration field has a value the model cannot be built from.
    #[error("invalid ResNet config: `{field}` {reason}")]
    InvalidConfig {
        /// Name of the offending field.
        field: &'static str,
        /// Why the value is rejected.
        reason: String,
    },
    /// The input tensor does not have the shape `[batch, in_channels, height, width]`.
    #[error("ResNet input must be [batch, {expected_channels}, height, width] with non-zero sizes, got {got:?}")]
    InputShape {
        /// Channels the model was configured for.
        expected_channels: usize,
        /// Shape that was passed.
        got: [usize; 4],
    },
}
