//! The plan crate's integration tests, one binary: `cargo test --profile suite -p tpslab-plan
//! --test plan [MODULE::]`.

mod no_panic;
