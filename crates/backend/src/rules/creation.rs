//! Tensors made from nothing but a shape (zeros, ones, full, empty, arange): every rank makes
//! the whole tensor. Tensors from host data and random draws are made in `data.rs` and
//! `draw.rs`.

use crate::placement::Placement;
use crate::rules::{Meta, Plan};

pub(crate) fn on_every_rank(m: &[Meta]) -> Plan {
    Plan::keep(m, Placement::Replicated)
}
