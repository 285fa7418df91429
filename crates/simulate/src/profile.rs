//! A measured one-device training step: what the simulator starts from.

use crate::workload::Workload;
use crate::{Result, SimulateError};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One layer's part of the backward pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layer {
    pub name: String,
    /// Seconds of this layer's backward on one device.
    pub backward_s: f64,
    /// Bytes of each gradient tensor it writes (empty for a layer without parameters).
    pub grad_bytes: Vec<u64>,
}

/// One rank's training step on one device, before any communication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepProfile {
    pub model: String,
    /// "images" or "tokens".
    pub unit: String,
    /// Samples in one rank's batch.
    pub samples_per_rank: f64,
    pub forward_s: f64,
    /// Layers in the order the backward pass visits them (the forward order reversed).
    pub layers: Vec<Layer>,
    /// The optimizer update after the gradients are summed.
    pub optimizer_s: f64,
    /// Sums over the ranks the step waits on (synchronized BatchNorm statistics and their
    /// gradients), and the bytes of each.
    #[serde(default)]
    pub blocking_sums: usize,
    #[serde(default)]
    pub blocking_sum_bytes: f64,
    /// Kernel launches (ops) the host issues per rank per step, for the host model.
    #[serde(default)]
    pub ops_per_step: usize,
}

impl StepProfile {
    /// A profile from a model's shape and one measured step time (`step_s`, one device,
    /// `samples_per_rank` samples): a third of the compute is the forward pass, two thirds the
    /// backward (weights' and inputs' gradients), spread over the layers by multiply-adds.
    /// Gradients have `grad_element_bytes` bytes per element (4 for f32).
    pub fn from_workload(
        workload: &Workload,
        samples_per_rank: f64,
        step_s: f64,
        grad_element_bytes: u64,
    ) -> Result<StepProfile> {
        positive("the measured step time", step_s)?;
        positive("the batch per rank", samples_per_rank)?;
        let macs = workload.macs_per_sample();
        let backward_s = step_s * 2.0 / 3.0;
        let layers = workload
            .layers
            .iter()
            .rev()
            .map(|l| Layer {
                name: l.name.clone(),
                backward_s: backward_s * l.macs_per_sample / macs,
                grad_bytes: l.params.iter().map(|p| p * grad_element_bytes).collect(),
            })
            .collect();
        Ok(StepProfile {
            model: workload.name.clone(),
            unit: workload.unit.to_string(),
            samples_per_rank,
            forward_s: step_s / 3.0,
            layers,
            optimizer_s: 0.0,
            blocking_sums: 0,
            blocking_sum_bytes: 0.0,
            ops_per_step: 0,
        })
    }

    /// Reads a profile written as JSON (the fields of this type), and checks it.
    pub fn load(path: &Path) -> Result<StepProfile> {
        let fail = |reason: String| SimulateError::Profile {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let profile: StepProfile = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
        profile.check().map_err(|e| fail(e.to_string()))?;
        Ok(profile)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a profile is plain data")
    }

    /// Refuses negative, infinite or missing times and sizes.
    pub fn check(&self) -> Result<()> {
        positive("samples_per_rank", self.samples_per_rank)?;
        non_negative("forward_s", self.forward_s)?;
        non_negative("optimizer_s", self.optimizer_s)?;
        non_negative("blocking_sum_bytes", self.blocking_sum_bytes)?;
        if self.layers.is_empty() {
            return Err(SimulateError::Invalid("the profile has no layers".into()));
        }
        for l in &self.layers {
            non_negative(&format!("layer {} backward_s", l.name), l.backward_s)?;
        }
        if self.compute_s() <= 0.0 {
            return Err(SimulateError::Invalid(
                "the profile's step takes no time".into(),
            ));
        }
        Ok(())
    }

    pub fn backward_s(&self) -> f64 {
        self.layers.iter().map(|l| l.backward_s).sum()
    }

    /// Forward, backward and optimizer: one device's step.
    pub fn compute_s(&self) -> f64 {
        self.forward_s + self.backward_s() + self.optimizer_s
    }

    pub fn gradient_bytes(&self) -> u64 {
        self.layers.iter().flat_map(|l| &l.grad_bytes).sum()
    }

    pub fn gradient_tensors(&self) -> usize {
        self.layers.iter().map(|l| l.grad_bytes.len()).sum()
    }
}

fn positive(what: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(SimulateError::Invalid(format!(
            "{what} must be a finite number above 0, not {v}"
        )))
    }
}

fn non_negative(what: &str, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(SimulateError::Invalid(format!(
            "{what} must be a finite number >= 0, not {v}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::resnet;

    #[test]
    fn a_measured_step_is_spread_by_multiply_adds() {
        let w = resnet(50, 224, 1000).unwrap();
        let p = StepProfile::from_workload(&w, 256.0, 0.1, 4).unwrap();
        assert!((p.compute_s() - 0.1).abs() < 1e-12);
        assert_eq!(p.gradient_bytes(), 4 * 25_557_032);
        assert_eq!(p.gradient_tensors(), 161);
        // Backward order: the classifier first, the stem last.
        assert_eq!(p.layers.first().unwrap().name, "fc");
        assert_eq!(p.layers.last().unwrap().name, "stem.conv");
        let back = StepProfile::from_workload(&w, 256.0, 0.1, 4)
            .unwrap()
            .to_json();
        let dir = std::env::temp_dir().join(format!("firemesh-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.json");
        std::fs::write(&path, back).unwrap();
        assert_eq!(StepProfile::load(&path).unwrap(), p);
        std::fs::write(
            &path,
            p.to_json().replace("\"forward_s\": ", "\"forward_s\": -"),
        )
        .unwrap();
        let e = StepProfile::load(&path).unwrap_err().to_string();
        assert!(e.contains("forward_s") && e.contains("p.json"), "{e}");
        std::fs::write(&path, "{").unwrap();
        assert!(StepProfile::load(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(StepProfile::from_workload(&w, 0.0, 0.1, 4).is_err());
        assert!(StepProfile::from_workload(&w, 1.0, f64::INFINITY, 4).is_err());
    }
}
