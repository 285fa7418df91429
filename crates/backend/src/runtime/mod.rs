//! The ground floor the mesh runs on: the rank threads ([`lanes`]), each running its rank's
//! ops in order on its device's stream, and what each thread armed for the ops it issues
//! ([`armed`]: the step's precision and early buckets). Nothing here knows about tensors,
//! placements or processes.

pub(crate) mod armed;
pub(crate) mod lanes;
