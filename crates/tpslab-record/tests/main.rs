//! The record crate's integration tests, one binary: `cargo test --profile suite -p tpslab-record
//! --test record [MODULE::]`.

mod bounded_memory;
mod schema;
