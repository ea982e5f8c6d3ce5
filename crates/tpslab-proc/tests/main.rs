//! The /proc parsers' integration tests, one binary: `cargo test --profile suite -p tpslab-proc
//! --test proc [MODULE::]`.

mod fixtures;
mod no_panic;
