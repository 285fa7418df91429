//! Transactions read every tensor through the `*_into_data` ops above, so the default suffices.

use crate::Sharded;
use burn_backend::ops::TransactionOps;
use burn_backend::Backend;

impl<B: Backend> TransactionOps<Self> for Sharded<B> {}
