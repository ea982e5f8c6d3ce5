//! The /proc parsers' integration tests, one binary: `cargo test --release -p tpslab-proc
//! --test proc [MODULE::]`.

mod fixtures;
mod no_panic;
