//! The model state one rank holds under each ZeRO stage: parameters, gradients and optimizer
//! state, in bytes, from the model's parameter count. What `firemesh train --dry-run` and
//! `firemesh simulate` print and check against a device's memory.

/// Bytes of model state on one rank at the peak of a step.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ModelState {
    pub parameters: f64,
    pub gradients: f64,
    pub optimizer_state: f64,
}

impl ModelState {
    pub fn total(&self) -> f64 {
        self.parameters + self.gradients + self.optimizer_state
    }
}

/// What the state of a model is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateShape {
    /// Parameter elements (f32 master weights).
    pub parameters: f64,
    /// Elements of the largest parameter tensor: the unit ZeRO-3 gathers whole for one op.
    pub largest: f64,
    /// Optimizer moments per parameter: 2 for AdamW, 1 for SGD with momentum, 0 without.
    pub moments: f64,
    /// Bytes of the gradient bucket being reduce-scattered (ZeRO-1 and 3 hold it whole).
    pub bucket_bytes: f64,
}

/// The state one of `ranks` ranks holds under ZeRO `stage` (0, 1 or 3), f32 throughout:
/// - 0: everything whole;
/// - 1: whole parameters, gradients reduce-scattered (1/N, plus the bucket in flight), 1/N of
///   the optimizer state;
/// - 3: 1/N of the parameters plus the largest one gathered whole, gradients and state as 1.
///
/// No share exceeds the whole.
pub fn model_state(shape: &StateShape, stage: u8, ranks: usize) -> ModelState {
    let n = ranks.max(1) as f64;
    let whole = 4.0 * shape.parameters;
    let state = shape.moments * whole;
    let (parameters, gradients, optimizer_state) = match stage {
        0 => (whole, whole, state),
        1 => (whole, whole / n + shape.bucket_bytes, state / n),
        _ => (
            whole / n + 4.0 * shape.largest,
            whole / n + shape.bucket_bytes,
            state / n,
        ),
    };
    ModelState {
        parameters: parameters.min(whole),
        gradients: gradients.min(whole),
        optimizer_state,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_by_stage() {
        let shape = StateShape {
            parameters: 1000.0,
            largest: 100.0,
            moments: 2.0,
            bucket_bytes: 40.0,
        };
        let at = |stage, n| model_state(&shape, stage, n);
        assert_eq!(
            at(0, 4),
            ModelState {
                parameters: 4000.0,
                gradients: 4000.0,
                optimizer_state: 8000.0
            }
        );
        assert_eq!(
            at(1, 4),
            ModelState {
                parameters: 4000.0,
                gradients: 1040.0,
                optimizer_state: 2000.0
            }
        );
        assert_eq!(
            at(3, 4),
            ModelState {
                parameters: 1400.0,
                gradients: 1040.0,
                optimizer_state: 2000.0
            }
        );
        // One rank holds everything once, whatever the stage.
        assert_eq!(at(3, 1).parameters, 4000.0);
        assert_eq!(at(3, 1).gradients, 4000.0);
        assert_eq!(at(0, 8).total(), 16_000.0);
    }
}
