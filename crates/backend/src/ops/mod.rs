//! The backend traits of `Sharded<B>`, one file per trait.

mod activation;
mod bool;
mod float;
mod int;
mod module;
mod qtensor;
mod transaction;
