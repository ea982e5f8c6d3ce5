//! What the report crate's tests share: the fixtures, real records each written by the
//! tool's own `--json` (the command that made each is in `every_kind.rs`'s header).
//! `every_kind.rs` checks that this is every `*.json` in `tests/fixtures/` and that every
//! record kind has one.

/// File names under `tests/fixtures/`, old ones first.
pub const FIXTURES: &[&str] = &[
    "udp_run.json",
    "diagnose.json",
    "ramp.json",
    "sweep.json",
    "tcp_lab.json",
    "watch.json",
    "watch_tcp.json",
    "serve_udp.json",
    "tcp_bulk.json",
    "tcp_watched.json",
    "serve_tcp.json",
    "doctor.json",
    "probe_idle.json",
    "probe_idle_udp.json",
    "probe_idle_haproxy.json",
    "probe_pool.json",
    "compare.json",
    "bdp.json",
    "ramp_redis.json",
    "ramp_java_http_lock.json",
    "load_http.json",
    "load_http_nagle.json",
    "load_http3.json",
    "load_http3_server.json",
    "load_http_series.json",
    "load_http_lock.json",
    "ramp_python_nagle.json",
    "capacity.json",
    "capacity_retry.json",
    "ramp_python_lock.json",
    "capacity_http_lock.json",
];
