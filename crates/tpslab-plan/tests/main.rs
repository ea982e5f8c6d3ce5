//! The plan crate's integration tests, one binary: `cargo test --release -p tpslab-plan
//! --test plan [MODULE::]`.

mod no_panic;
