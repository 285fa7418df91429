//! Reduction operators.

/// How the ranks' values are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Elementwise sum.
    Sum,
    /// Elementwise sum divided by the number of ranks.
    Mean,
    /// Elementwise maximum.
    Max,
}

impl ReduceOp {
    /// The pairwise operator used while reducing (mean sums, then divides once).
    pub(crate) fn pairwise(self) -> Combine {
        match self {
            ReduceOp::Sum | ReduceOp::Mean => Combine::Add,
            ReduceOp::Max => Combine::Max,
        }
    }
}

/// A pairwise combination step inside an algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Combine {
    Add,
    Max,
}
