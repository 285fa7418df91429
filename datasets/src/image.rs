//! The item every image source produces.

/// One image and its class, pixels in [0, 1] stored channel-major (`[channels, height, width]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ImageItem {
    /// `channels * height * width` values, channel planes one after another.
    pub pixels: Vec<f32>,
    /// `[channels, height, width]`.
    pub shape: [usize; 3],
    /// Class index.
    pub label: usize,
}

impl ImageItem {
    /// Builds an item from interleaved values (`[height, width, channels]`, as image decoders
    /// return them), already scaled to [0, 1].
    pub fn from_interleaved(values: &[f32], shape: [usize; 3], label: usize) -> Self {
        let [channels, height, width] = shape;
        let plane = height * width;
        let mut pixels = vec![0.0; channels * plane];
        for (i, &value) in values.iter().enumerate().take(channels * plane) {
            pixels[(i % channels) * plane + i / channels] = value;
        }
        Self {
            pixels,
            shape,
            label,
        }
    }
}
