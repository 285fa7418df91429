//! The ground floor the mesh runs on: the rank threads ([`lanes`]), each running its rank's
//! ops in order on its device's stream, and what each thread armed for the ops it issues
//! ([`armed`]: the step's precision, early buckets and parameter gathers), and the
//! communication thread ([`comm`]) that runs sums and gathers beside them. Nothing here knows
//! about tensors or placements.

pub(crate) mod armed;
pub(crate) mod comm;
pub(crate) mod lanes;
