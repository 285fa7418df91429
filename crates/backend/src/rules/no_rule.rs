//! Ops with no placement rule (attention, CTC loss, FFT, deformable and grid-sampling ops,
//! quantization, the n-d scatter/gather): their operands are made `Replicated` and they run on
//! every rank. Correct, and counted as a fallback whenever an operand was not `Replicated`.

use crate::rules::{Meta, Plan};

pub(crate) fn replicated(m: &[Meta]) -> Plan {
    Plan::fallback(m)
}
