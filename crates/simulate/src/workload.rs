//! The shapes of the zoo's models, layer by layer: parameter tensors and multiply-adds per
//! sample. A measured step time is spread over the layers in proportion to their multiply-adds
//! ([`crate::StepProfile::from_workload`]).

use crate::{Result, SimulateError};

/// One layer: its parameter tensors (element counts) and multiply-adds per sample (an image,
/// or a token).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerShape {
    pub name: String,
    pub params: Vec<u64>,
    pub macs_per_sample: f64,
}

/// A model's layers in forward order, and what one sample is.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub name: String,
    pub layers: Vec<LayerShape>,
    /// "images" or "tokens".
    pub unit: &'static str,
}

impl Workload {
    pub fn parameters(&self) -> u64 {
        self.layers.iter().flat_map(|l| &l.params).sum()
    }

    pub fn tensors(&self) -> usize {
        self.layers.iter().map(|l| l.params.len()).sum()
    }

    pub fn macs_per_sample(&self) -> f64 {
        self.layers.iter().map(|l| l.macs_per_sample).sum()
    }

    /// BatchNorm layers: each sums its batch statistics over the ranks in the forward pass and
    /// their gradients in the backward pass when the batch is sharded.
    pub fn batch_norms(&self) -> usize {
        self.layers
            .iter()
            .filter(|l| l.name.ends_with(".bn"))
            .count()
    }
}

struct Builder {
    layers: Vec<LayerShape>,
}

impl Builder {
    /// A bias-free k×k convolution producing `out` channels on an `hw`×`hw` grid, and its
    /// BatchNorm.
    fn conv_bn(&mut self, name: &str, k: u64, cin: u64, cout: u64, hw: u64) {
        let weights = k * k * cin * cout;
        self.layers.push(LayerShape {
            name: format!("{name}.conv"),
            params: vec![weights],
            macs_per_sample: (weights * hw * hw) as f64,
        });
        self.layers.push(LayerShape {
            name: format!("{name}.bn"),
            params: vec![cout, cout],
            macs_per_sample: (2 * cout * hw * hw) as f64,
        });
    }

    fn linear(&mut self, name: &str, input: u64, output: u64, per_sample: u64) {
        self.layers.push(LayerShape {
            name: name.to_string(),
            params: vec![input * output, output],
            macs_per_sample: (input * output * per_sample) as f64,
        });
    }

    fn norm(&mut self, name: &str, d: u64) {
        self.layers.push(LayerShape {
            name: name.to_string(),
            params: vec![d, d],
            macs_per_sample: (4 * d) as f64,
        });
    }
}

/// ResNet-`depth` (18, 34, 50, 101, 152) on `image_size`² RGB images: the ImageNet stem (7×7
/// stride-2 convolution and max-pool) at 128 pixels and above, the CIFAR stem (3×3 stride 1)
/// below, like the zoo; strides on the 3×3 convolutions (v1.5).
pub fn resnet(depth: usize, image_size: usize, classes: usize) -> Result<Workload> {
    let (blocks, bottleneck): ([u64; 4], bool) = match depth {
        18 => ([2, 2, 2, 2], false),
        34 => ([3, 4, 6, 3], false),
        50 => ([3, 4, 6, 3], true),
        101 => ([3, 4, 23, 3], true),
        152 => ([3, 8, 36, 3], true),
        _ => {
            return Err(SimulateError::Invalid(format!(
                "ResNet-{depth}: the depths are 18, 34, 50, 101 and 152"
            )))
        }
    };
    if image_size < 8 || classes == 0 {
        return Err(SimulateError::Invalid(format!(
            "ResNet on {image_size}-pixel images with {classes} classes: images of 8 pixels or more and 1 class or more"
        )));
    }
    let mut b = Builder { layers: Vec::new() };
    let mut hw = image_size as u64;
    if image_size >= 128 {
        hw = hw.div_ceil(2);
        b.conv_bn("stem", 7, 3, 64, hw);
        hw = hw.div_ceil(2);
    } else {
        b.conv_bn("stem", 3, 3, 64, hw);
    }
    let expansion = if bottleneck { 4 } else { 1 };
    let mut cin = 64;
    for (stage, &count) in blocks.iter().enumerate() {
        let width = 64u64 << stage;
        for block in 0..count {
            let name = format!("layer{}.{block}", stage + 1);
            let stride = if block == 0 && stage > 0 { 2 } else { 1 };
            let out_hw = hw.div_ceil(stride);
            let cout = width * expansion;
            if bottleneck {
                b.conv_bn(&format!("{name}.1"), 1, cin, width, hw);
                b.conv_bn(&format!("{name}.2"), 3, width, width, out_hw);
                b.conv_bn(&format!("{name}.3"), 1, width, cout, out_hw);
            } else {
                b.conv_bn(&format!("{name}.1"), 3, cin, width, out_hw);
                b.conv_bn(&format!("{name}.2"), 3, width, width, out_hw);
            }
            if stride != 1 || cin != cout {
                b.conv_bn(&format!("{name}.down"), 1, cin, cout, out_hw);
            }
            cin = cout;
            hw = out_hw;
        }
    }
    b.linear("fc", cin, classes as u64, 1);
    Ok(Workload {
        name: format!("resnet{depth}"),
        layers: b.layers,
        unit: "images",
    })
}

/// A GPT: token and position embeddings, `layers` pre-norm blocks (attention, 4× MLP), a final
/// norm and an output head tied to the token embedding (its multiply-adds are counted on the
/// embedding). Samples are tokens; attention over a full `context` is counted per token.
pub fn gpt(layers: usize, d_model: usize, vocab: usize, context: usize) -> Result<Workload> {
    if layers == 0 || d_model == 0 || vocab == 0 || context == 0 {
        return Err(SimulateError::Invalid(
            "a GPT needs at least one layer, and a width, vocabulary and context above 0".into(),
        ));
    }
    let (d, v, t) = (d_model as u64, vocab as u64, context as u64);
    let mut b = Builder { layers: Vec::new() };
    b.layers.push(LayerShape {
        name: "embedding".into(),
        params: vec![v * d, t * d],
        macs_per_sample: (v * d) as f64,
    });
    for i in 0..layers {
        b.norm(&format!("block{i}.norm1"), d);
        b.linear(&format!("block{i}.qkv"), d, 3 * d, 1);
        b.layers.push(LayerShape {
            name: format!("block{i}.attention"),
            params: vec![],
            macs_per_sample: (2 * t * d) as f64,
        });
        b.linear(&format!("block{i}.proj"), d, d, 1);
        b.norm(&format!("block{i}.norm2"), d);
        b.linear(&format!("block{i}.mlp.up"), d, 4 * d, 1);
        b.linear(&format!("block{i}.mlp.down"), 4 * d, d, 1);
    }
    b.norm("final_norm", d);
    Ok(Workload {
        name: format!("gpt-{layers}x{d_model}"),
        layers: b.layers,
        unit: "tokens",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_match_the_published_models() {
        let r50 = resnet(50, 224, 1000).unwrap();
        assert_eq!(r50.parameters(), 25_557_032);
        assert_eq!(r50.tensors(), 161);
        assert_eq!(r50.batch_norms(), 53);
        // About 4.1 G multiply-adds per 224² image.
        let gmacs = r50.macs_per_sample() / 1e9;
        assert!((4.0..4.2).contains(&gmacs), "{gmacs}");
        assert_eq!(resnet(18, 224, 1000).unwrap().parameters(), 11_689_512);
        assert_eq!(resnet(34, 224, 1000).unwrap().parameters(), 21_797_672);
        assert_eq!(resnet(101, 224, 1000).unwrap().parameters(), 44_549_160);
        assert_eq!(resnet(152, 224, 1000).unwrap().parameters(), 60_192_808);
        assert_eq!(gpt(12, 768, 50257, 1024).unwrap().parameters(), 124_439_808);
        // GPT-2 XL, as its published checkpoint counts it.
        assert_eq!(
            gpt(48, 1600, 50257, 1024).unwrap().parameters(),
            1_557_611_200
        );
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(resnet(42, 224, 1000)
            .unwrap_err()
            .to_string()
            .contains("18, 34"));
        assert!(resnet(50, 4, 1000).is_err());
        assert!(gpt(0, 768, 50257, 1024).is_err());
    }
}
