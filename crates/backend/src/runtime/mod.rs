//! The ground floor the mesh runs on: the rank threads ([`lanes`]), each running its rank's
//! ops in order on its device's stream. Nothing here knows about tensors, placements or
//! processes.

pub(crate) mod lanes;
