//! The engine's integration tests, one binary (one link instead of five): `cargo test
//! --profile suite -p tpslab-engine --test engine [MODULE::]`. Host settings a module changes go
//! through the host guard, which waits for `$TPSLAB_HOST_LOCK` as the product does.

mod common;
mod dropwatch;
mod guard;
mod link;
mod no_panic;
mod observe_scan;
