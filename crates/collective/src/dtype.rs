//! Element types a collective moves, and their host encodings.

use cubecl::ir::{ElemType, FloatKind, StorageType};

/// An element type of a collective buffer. Half types are reduced in f32 inside the kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
}

impl DType {
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    pub(crate) fn elem_type(self) -> ElemType {
        ElemType::Float(match self {
            DType::F32 => FloatKind::F32,
            DType::F16 => FloatKind::F16,
            DType::BF16 => FloatKind::BF16,
        })
    }

    pub(crate) fn storage_type(self) -> StorageType {
        StorageType::Scalar(self.elem_type())
    }

    /// The collective dtype of a Burn dtype: `None` for types no collective buffer holds (f64
    /// among them: the kernels reduce f32, f16 and bf16 only).
    pub fn from_burn(dtype: burn_tensor::DType) -> Option<DType> {
        match dtype {
            burn_tensor::DType::F32 | burn_tensor::DType::Flex32 => Some(DType::F32),
            burn_tensor::DType::F16 => Some(DType::F16),
            burn_tensor::DType::BF16 => Some(DType::BF16),
            _ => None,
        }
    }

    /// The Burn dtype of tensors holding this dtype's elements.
    pub fn to_burn(self) -> burn_tensor::DType {
        match self {
            DType::F32 => burn_tensor::DType::F32,
            DType::F16 => burn_tensor::DType::F16,
            DType::BF16 => burn_tensor::DType::BF16,
        }
    }

    /// Encode host values (given as f64) into this dtype's bytes, rounding to nearest.
    pub fn encode(self, values: &[f64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(values.len() * self.size());
        for &v in values {
            match self {
                DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
                DType::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
                DType::BF16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            }
        }
        out
    }

    /// Decode this dtype's bytes into f64 values.
    pub fn decode(self, bytes: &[u8]) -> Vec<f64> {
        match self {
            DType::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
                .collect(),
            DType::F16 => bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64())
                .collect(),
            DType::BF16 => bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f64())
                .collect(),
        }
    }

    /// Relative precision of one rounding (unit roundoff).
    pub fn epsilon(self) -> f64 {
        match self {
            DType::F32 => f32::EPSILON as f64,
            DType::F16 => half::f16::EPSILON.to_f64(),
            DType::BF16 => half::bf16::EPSILON.to_f64(),
        }
    }
}
