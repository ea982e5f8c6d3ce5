//! The report crate's integration tests, one binary: `cargo test --profile suite -p tpslab-report
//! --test report [MODULE::]`. Each module was a test binary of its own.

mod common;
mod every_kind;
mod live_http_view;
mod live_ramp_view;
mod live_runs_view;
mod live_view;
mod overrun;
mod record_fuzz;
#[path = "common/live.rs"]
#[allow(dead_code)]
mod snap;
mod snapshots;
