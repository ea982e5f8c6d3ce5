//! The workspace's integration tests, one test binary (issue 55): each module was a test
//! binary of its own, compiled and linked once each (about 12 s of CPU apiece here, 49 of
//! them); as modules of one binary, tests/common is compiled once and the binary linked
//! once. Run one module with `cargo test --profile suite --test suite ledger::` (a test
//! name filter; test.sh's build; `--release` works too, built apart). A new integration test file goes here, declared below; tests/suite/architecture.rs
//! fails on a test file left out of this list or put beside it in tests/.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod bdp;
mod by_address;
mod capacity;
mod capacity_stream;
mod cli_errors;
mod compare;
mod diagnose;
mod dns_seq_field;
mod docs;
mod doctor;
mod exposition;
mod fleet;
mod foreign;
mod h2_hostile;
mod history;
mod html;
mod http2_bytes;
mod http2_streams;
mod http3;
mod http3_aioquic;
mod http_errors;
mod http_hostile;
mod https;
mod import_graph;
mod ledger;
mod live;
mod load_http;
mod load_http2;
mod load_http_max;
mod memcached_frames;
mod metrics;
mod nagle;
mod no_listener;
mod one_path;
mod outputs;
mod package;
mod planted_folder;
mod probe;
mod probe_behaviour;
mod probe_db;
mod probe_proxy;
mod ramp;
mod ramp_http;
mod ramp_lock;
mod ramp_on_time;
mod resp;
mod reuseport;
mod screenshot;
mod shell;
mod softnet;
mod stream;
mod sweep;
mod tcp;
mod test_command;
mod threads;
mod turns;
mod waits;
