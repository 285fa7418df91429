//! GPU presets and the published ResNet-50 training throughputs the simulator starts from and
//! is checked against. Every figure here is copied from the source named beside it; none is
//! fitted.

use crate::{Result, SimulateError};
use serde::Serialize;

/// A GPU board: its name, what it is, the link preset joining its eight GPUs, and the one
/// joining each GPU to the host (the board's PCIe generation, x16: NVIDIA's V100, A100, H100
/// and H200 datasheets).
#[derive(Debug)]
pub struct Gpu {
    pub name: &'static str,
    pub about: &'static str,
    pub link: &'static str,
    pub host: &'static str,
    /// Its memory as the board's name gives it, in GB (10^9 bytes; what a process can
    /// allocate is a little less).
    pub memory_gb: f64,
}

/// The presets. Links: see [`crate::LINK_PRESETS`].
pub const GPUS: &[Gpu] = &[
    Gpu {
        name: "v100",
        about: "V100 16GB SXM2 (DGX-1)",
        link: "nvlink2",
        host: "pcie3",
        memory_gb: 16.0,
    },
    Gpu {
        name: "a100",
        about: "A100 80GB SXM4 (DGX A100)",
        link: "nvlink3",
        host: "pcie4",
        memory_gb: 80.0,
    },
    Gpu {
        name: "h100",
        about: "H100 80GB SXM5 (DGX H100)",
        link: "nvlink4",
        host: "pcie5",
        memory_gb: 80.0,
    },
    Gpu {
        name: "h200",
        about: "H200 141GB SXM (HGX H200)",
        link: "nvlink4",
        host: "pcie5",
        memory_gb: 141.0,
    },
];

/// A published training throughput of ResNet-50 v1.5 at 224 px on one GPU and on the eight
/// GPUs of one machine, images per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Published {
    pub framework: &'static str,
    pub gpu: &'static str,
    /// "amp" (mixed precision), "tf32" or "fp32".
    pub precision: &'static str,
    /// Images per GPU per step.
    pub batch: u32,
    pub one_gpu: f64,
    pub eight_gpus: f64,
    pub source: &'static str,
}

const PYTORCH_RN50: &str = "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md (commit 291f0d0), \
    training performance tables (pytorch-21.03 NGC container); batch sizes from ConvNets/configs.yml";
const PADDLE_RN50: &str = "NVIDIA DeepLearningExamples, PaddlePaddle/Classification/RN50v1.5/README.md (commit 0bc061d), \
    training performance on DGX A100; batch 256 is the script's default";

/// The published figures. No H100 or H200 single-GPU ResNet-50 training figure from NVIDIA's
/// example pages could be found and checked here, so none is built in: `--gpu h100|h200`
/// needs `--throughput`.
pub const RESNET50: &[Published] = &[
    Published {
        framework: "PyTorch",
        gpu: "a100",
        precision: "amp",
        batch: 256,
        one_gpu: 2_470.0,
        eight_gpus: 16_621.0,
        source: PYTORCH_RN50,
    },
    Published {
        framework: "PyTorch",
        gpu: "a100",
        precision: "tf32",
        batch: 256,
        one_gpu: 938.0,
        eight_gpus: 7_248.0,
        source: PYTORCH_RN50,
    },
    Published {
        framework: "PyTorch",
        gpu: "v100",
        precision: "amp",
        batch: 256,
        one_gpu: 1_200.0,
        eight_gpus: 8_322.0,
        source: PYTORCH_RN50,
    },
    Published {
        framework: "PyTorch",
        gpu: "v100",
        precision: "fp32",
        batch: 112,
        one_gpu: 367.0,
        eight_gpus: 2_855.0,
        source: PYTORCH_RN50,
    },
    Published {
        framework: "PaddlePaddle",
        gpu: "a100",
        precision: "amp",
        batch: 256,
        one_gpu: 2_711.0,
        eight_gpus: 20_267.0,
        source: PADDLE_RN50,
    },
    Published {
        framework: "PaddlePaddle",
        gpu: "a100",
        precision: "tf32",
        batch: 256,
        one_gpu: 993.0,
        eight_gpus: 7_955.0,
        source: PADDLE_RN50,
    },
];

impl Gpu {
    /// The preset named `name`.
    pub fn preset(name: &str) -> Result<&'static Gpu> {
        GPUS.iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<&str> = GPUS.iter().map(|g| g.name).collect();
                SimulateError::Invalid(format!(
                    "unknown GPU {name:?}; the presets are {}",
                    names.join(", ")
                ))
            })
    }

    /// Its published PyTorch ResNet-50 figure in `precision`, if there is one.
    pub fn resnet50(&self, precision: &str) -> Option<&'static Published> {
        RESNET50.iter().find(|p| {
            p.framework == "PyTorch"
                && p.gpu == self.name
                && p.precision.eq_ignore_ascii_case(precision)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Link;

    #[test]
    fn presets_name_their_link_and_figures() {
        for g in GPUS {
            assert!(Link::preset(g.link).is_ok(), "{}", g.name);
            // The memory is the one the board's name gives.
            let named = format!("{}GB", g.memory_gb);
            assert!(g.about.contains(&named), "{}: {named}", g.about);
        }
        let a100 = Gpu::preset("A100").unwrap();
        assert_eq!(a100.link, "nvlink3");
        let amp = a100.resnet50("amp").unwrap();
        assert!(amp.one_gpu > a100.resnet50("tf32").unwrap().one_gpu);
        // H100 and H200: NVLink 4, and no built-in figure.
        for name in ["h100", "h200"] {
            let g = Gpu::preset(name).unwrap();
            assert_eq!(g.link, "nvlink4");
            assert!(g.resnet50("amp").is_none());
        }
        assert!(Gpu::preset("v100").unwrap().resnet50("tf32").is_none());
        let e = Gpu::preset("b200").unwrap_err().to_string();
        assert!(e.contains("a100") && e.contains("h200"), "{e}");
        for p in RESNET50 {
            assert!(Gpu::preset(p.gpu).is_ok() && p.eight_gpus > p.one_gpu);
        }
    }
}
