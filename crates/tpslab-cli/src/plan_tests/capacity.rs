//! The table rows of `capacity udp` and `capacity http`: their flags as `load udp` and
//! `load http` take them, the objective, the search's bounds.

use super::{accepted, refused, Made, DURATION_FORMS};
use std::time::Duration;
use tpslab_plan::capacity::{CapacityLoad, Objective, Quantile, RateUnit};

#[test]
fn capacity_refuses_what_it_cannot_search() {
    let dir = tempfile::tempdir().unwrap();
    let bad_budget = format!("--budget 1x: {DURATION_FORMS}");
    refused(
        dir.path(),
        &[
            (
                "capacity udp 127.0.0.1:9 --slo p99<20",
                &["--slo p99<20: allowed p99<DURATION"],
            ),
            (
                "capacity udp 127.0.0.1:9 --slo loss<0%",
                &["--slo loss<0%: allowed loss<PCT"],
            ),
            (
                "capacity udp 127.0.0.1:9 --resolution 60%",
                &["--resolution 60%: allowed 0.5%..=50%"],
            ),
            (
                "capacity udp 127.0.0.1:9 --resolution five",
                &["--resolution five: allowed a percentage"],
            ),
            (
                "capacity udp 127.0.0.1:9 --start-rate max",
                &["--start-rate max: allowed a rate above 0"],
            ),
            (
                "capacity udp 127.0.0.1:9 --start-rate 10k --max-rate 5k",
                &["--start-rate 10000 is above --max-rate 5000"],
            ),
            (
                "capacity udp 127.0.0.1:9 --step-duration 10ms",
                &["--step-duration 10ms: allowed 100ms..=1h"],
            ),
            (
                "capacity udp 127.0.0.1:9 --budget 2s",
                &["--budget 2s: allowed at least one step"],
            ),
            (
                // One step of 2.5 s needs 3.4 s with its drain and start: a 3 s budget
                // would run no step at all.
                "capacity udp 127.0.0.1:9 --step-duration 2s --warmup 500ms --budget 3s",
                &["--budget 3s: allowed at least one step (3s 400ms"],
            ),
            (
                "capacity udp 127.0.0.1:9 --max-rate 2.4",
                &["--max-rate 2.4: allowed a whole rate from 1"],
            ),
            (
                "capacity udp 127.0.0.1:9 --budget 1x",
                &[bad_budget.as_str()],
            ),
            (
                "capacity udp 127.0.0.1:9 --repeats 0",
                &["--repeats 0: allowed 1..=10"],
            ),
            ("capacity udp 127.0.0.1:9 --size 10", &["--size 10"]),
            ("capacity udp 127.0.0.1:9 --threads 0", &["--threads 0"]),
            (
                "capacity udp",
                &["capacity udp: give HOST:PORT of the server, or --server-cmd 'COMMAND {port}'"],
            ),
            (
                "capacity udp 127.0.0.1:9 --server-cmd 'srv {port}'",
                &["or --server-cmd to start one, not both"],
            ),
            (
                "capacity udp --server-cmd 'srv 9000'",
                &["--server-cmd \"srv 9000\": allowed a shell command containing {port}"],
            ),
            (
                "capacity udp --server-cmd 'srv {port}' --pid 1",
                &["--server-cmd starts the server itself: --pid does not apply"],
            ),
            (
                "capacity http http://127.0.0.1:9/ --fix-and-retry",
                &["--fix-and-retry"],
            ),
        ],
    );
}

#[test]
fn capacity_takes_the_load_flags_and_the_search_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let Made::Capacity(p) = accepted(
        dir.path(),
        "capacity udp 127.0.0.1:9 --slo 'p99.9<5ms,rate>=99%' --start-rate 10k --max-rate 2M --resolution 2% --repeats 5 --budget 90s --step-duration 1s --warmup 200ms --size 512 --burst 10 --threads 2",
    ) else {
        panic!("not a capacity plan")
    };
    let CapacityLoad::Udp(r) = &p.load else {
        panic!("not a UDP search")
    };
    let (l, s) = (&r.load, &p.search);
    assert_eq!(s.unit, RateUnit::Pps);
    assert_eq!(
        (l.size_bytes, l.burst, l.threads, l.duration, l.warmup),
        (
            512,
            10,
            2,
            Duration::from_secs(1),
            Duration::from_millis(200)
        )
    );
    assert_eq!(l.target.to_string(), "127.0.0.1:9");
    assert_eq!(
        (
            s.start_rate,
            s.max_rate,
            s.resolution_pct,
            s.repeats,
            s.budget
        ),
        (10_000.0, 2e6, 2.0, 5, Duration::from_secs(90))
    );
    assert_eq!(
        s.slo.objectives,
        vec![
            Objective::Latency {
                quantile: Quantile::P999,
                limit: std::time::Duration::from_millis(5),
                inclusive: false
            },
            Objective::Rate {
                min_pct: 99.0,
                inclusive: true
            }
        ]
    );
    // The defaults: the objective, 1,000 pps up to 1M, 5 %, 3 repeats, 5 minutes.
    let Made::Capacity(d) = accepted(dir.path(), "capacity udp 127.0.0.1:9") else {
        panic!("not a capacity plan")
    };
    assert_eq!(d.search.slo.to_string(), "p99<20ms,loss<0.1%,errors<0.1%");
    assert_eq!(
        (
            d.search.start_rate,
            d.search.max_rate,
            d.search.resolution_pct,
            d.search.repeats
        ),
        (1000.0, 1e6, 5.0, 3)
    );
    assert_eq!(d.search.budget, Duration::from_secs(300));
    assert_eq!((d.server_cmd.as_deref(), d.fix_and_retry), (None, false));
    // The user's server started by tpslab: its port is filled in when it starts. The fix
    // is applied as host sysctls: root only.
    if !tpslab_net::is_root() {
        refused(
            dir.path(),
            &[(
                "capacity udp --server-cmd 'java Srv.java {port}' --fix-and-retry",
                &["--fix-and-retry applies the fix as host sysctls (journaled and restored): run as root"],
            )],
        );
        return;
    }
    let Made::Capacity(u) = accepted(
        dir.path(),
        "capacity udp --server-cmd 'java Srv.java {port}' --fix-and-retry",
    ) else {
        panic!("not a capacity plan")
    };
    assert_eq!(u.server_cmd.as_deref(), Some("java Srv.java {port}"));
    assert!(u.fix_and_retry);
    assert_eq!(u.target().to_string(), "127.0.0.1:0");
}

#[test]
fn capacity_http_refuses_what_load_http_refuses_and_what_it_cannot_search() {
    let dir = tempfile::tempdir().unwrap();
    refused(
        dir.path(),
        &[
            ("capacity http ftp://127.0.0.1:9/", &["ftp://127.0.0.1:9/"]),
            (
                "capacity http http://127.0.0.1:9/ --header nocolon",
                &["--header \"nocolon\": allowed NAME: VALUE"],
            ),
            ("capacity http http://127.0.0.1:9/ --pid 0", &["--pid 0"]),
            (
                "capacity http http://127.0.0.1:9/ --connections 0",
                &["--connections 0: allowed 1..="],
            ),
            (
                "capacity http http://127.0.0.1:9/ --max-rate 20M",
                &["--max-rate 20000000: allowed a whole rate from 1 up to 10000000 requests/s"],
            ),
            (
                "capacity http http://127.0.0.1:9/ --slo p99<20",
                &["--slo p99<20: allowed p99<DURATION"],
            ),
            (
                "capacity http http://127.0.0.1:9/ --fail-on p99<20ms",
                &["--fail-on 'p99<20ms': this command cannot judge it; allowed 'rps>=N'"],
            ),
            (
                "capacity http http://127.0.0.1:9/ --fail-on rps>=fast",
                &["--fail-on 'rps>=fast': rps: requests a second"],
            ),
            (
                "capacity http http://127.0.0.1:9/ --warmup 50ms",
                &["--warmup 50ms: allowed 0 (none) or 100ms..=1h (a run of its own)"],
            ),
            (
                "capacity http http://127.0.0.1:9/ --max-rate max",
                &["--max-rate max: allowed a rate above 0 up to 10000000 requests/s"],
            ),
            (
                "capacity http http://127.0.0.1:9/ --step-duration 10ms",
                &["--step-duration 10ms: allowed 100ms..=1h"],
            ),
            (
                // 2.5 s of warm-up and window, two graces of 2 s (the warm-up's and the
                // window's), 400 ms to start and end: 6.9 s.
                "capacity http http://127.0.0.1:9/ --step-duration 2s --warmup 500ms --budget 6s",
                &["--budget 6s: allowed at least one step (6s 900ms"],
            ),
        ],
    );
}

#[test]
fn capacity_http_takes_the_request_and_the_search_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let Made::Capacity(p) = accepted(
        dir.path(),
        "capacity http http://127.0.0.1:9/x --method POST --header 'X-A: b' --connections 50 --timeout 1s --start-rate 2k --max-rate 100k --step-duration 1s --warmup 0s --budget 60s",
    ) else {
        panic!("not a capacity plan")
    };
    let CapacityLoad::Http(h) = &p.load else {
        panic!("not an HTTP search")
    };
    assert_eq!(p.search.unit, RateUnit::RequestsPerSecond);
    assert_eq!(
        (h.load.request.method.as_str(), h.load.request.url.as_str()),
        ("POST", "http://127.0.0.1:9/x")
    );
    assert_eq!(h.load.request.headers.len(), 1);
    assert_eq!(
        (
            h.load.connections,
            h.load.timeout,
            h.load.duration,
            h.warmup
        ),
        (
            50,
            Duration::from_secs(1),
            Duration::from_secs(1),
            Duration::ZERO
        )
    );
    assert_eq!(h.load.target.to_string(), "127.0.0.1:9");
    assert_eq!(h.pid, None);
    assert_eq!(
        (p.search.start_rate, p.search.max_rate),
        (2000.0, 100_000.0)
    );
    // Without a warm-up one grace: 1 s window + 1 s grace + 400 ms.
    assert_eq!(p.min_budget(), Duration::from_millis(2400));
    // --pid: the server's threads judged at a failing step (this process is one on this
    // host).
    let me = std::process::id();
    let Made::Capacity(p) = accepted(
        dir.path(),
        &format!("capacity http http://127.0.0.1:9/ --pid {me}"),
    ) else {
        panic!("not a capacity plan")
    };
    let CapacityLoad::Http(h) = &p.load else {
        panic!("not an HTTP search")
    };
    assert_eq!(h.pid, Some(me));
}

#[test]
fn capacity_tcp_refuses_what_it_cannot_search() {
    let dir = tempfile::tempdir().unwrap();
    refused(
        dir.path(),
        &[
            (
                "capacity tcp 127.0.0.1:9 --framing fixed:0",
                &["--framing \"fixed:0\": allowed length, fixed:BYTES"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --size 4",
                &["--size 4: allowed 8..=65507 bytes"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --connections 0",
                &["--connections 0: allowed 1..=10000"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --timeout 0s",
                &["--timeout 0s: allowed 1ms..=10m"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --warmup 50ms",
                &["--warmup 50ms: allowed 0 (none) or 100ms..=1h (a run of its own)"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --slo rate>=0%",
                &["--slo rate>=0%: allowed rate>=PCT"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --max-rate 20M",
                &["--max-rate 20000000: allowed a whole rate from 1 up to 10000000 requests/s"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --server-work 1ms",
                &["configure tpslab's own server: leave out HOST:PORT to use it"],
            ),
            (
                "capacity tcp --server-cmd 'srv {port}' --server-threads 2",
                &["configure tpslab's own server, not --server-cmd's"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --server-cmd 'srv {port}'",
                &["give HOST:PORT of a running server, or --server-cmd to start one, not both"],
            ),
            (
                "capacity tcp --server-cmd srv",
                &["--server-cmd \"srv\": allowed a shell command containing {port}"],
            ),
            (
                "capacity tcp --pid 1",
                &["--pid applies with HOST:PORT; tpslab's own server is watched anyway"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --fix-and-retry",
                &["--fix-and-retry applies the fix the verdict at a failing UDP step recommends: capacity tcp names no fix"],
            ),
            (
                // The command that runs Redis, not a `capacity redis` there is not.
                "capacity tcp 127.0.0.1:9 --protocol redis --fix-and-retry",
                &["recommends: capacity tcp --protocol redis names no fix tpslab can apply"],
            ),
            (
                "capacity tcp 127.0.0.1:9 --payload-file {dir}/none.bin",
                &["--payload-file"],
            ),
            (
                // 2.5 s of warm-up and window, two graces of 2 s, 400 ms: 6.9 s.
                "capacity tcp 127.0.0.1:9 --step-duration 2s --warmup 500ms --budget 6s",
                &["--budget 6s: allowed at least one step (6s 900ms"],
            ),
        ],
    );
}

#[test]
fn capacity_tcp_takes_the_request_the_framing_and_the_server_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let Made::Capacity(p) = accepted(
        dir.path(),
        "capacity tcp 127.0.0.1:9 --framing 'delim:\\r\\n' --size 100 --connections 20 --timeout 1s --load-threads 1 --start-rate 2k --step-duration 1s --warmup 0s --budget 60s",
    ) else {
        panic!("not a capacity plan")
    };
    let CapacityLoad::Tcp(t) = &p.load else {
        panic!("not a TCP search")
    };
    assert_eq!(p.search.unit, RateUnit::RequestsPerSecond);
    assert_eq!(p.protocol(), "tcp");
    assert_eq!(t.target.to_string(), "127.0.0.1:9");
    assert_eq!(
        t.framing,
        tpslab_plan::framing::Framing::Delimiter(b"\r\n".to_vec())
    );
    // tpslab's request: 100 bytes behind a 4-byte length.
    assert_eq!((t.request.len(), t.request_bytes), (104, 104));
    assert_eq!(&t.request[..8], b"\0\0\0\x64ping");
    assert_eq!(
        (
            t.connections,
            t.timeout,
            t.load_threads,
            t.duration,
            t.warmup
        ),
        (
            20,
            Duration::from_secs(1),
            1,
            Duration::from_secs(1),
            Duration::ZERO
        )
    );
    assert_eq!((t.rate, t.builtin, t.pid), (2000.0, None, None));
    // Without HOST:PORT: tpslab's own server with the --server-* settings, its address
    // known once started.
    let Made::Capacity(p) = accepted(
        dir.path(),
        "capacity tcp --server-work 500us --server-serial 0s --server-threads 1",
    ) else {
        panic!("not a capacity plan")
    };
    let CapacityLoad::Tcp(t) = &p.load else {
        panic!("not a TCP search")
    };
    let b = t.builtin.expect("tpslab's own server");
    assert_eq!(
        (b.work, b.serial, b.serialize, b.threads),
        (Duration::from_micros(500), Duration::ZERO, false, 1)
    );
    assert_eq!(b.ceiling(t.connections), Some(2000.0));
    assert_eq!(t.target.port(), 0);
    // --server-cmd: the user's server, no built-in one.
    let Made::Capacity(p) = accepted(dir.path(), "capacity tcp --server-cmd 'srv --port {port}'")
    else {
        panic!("not a capacity plan")
    };
    let CapacityLoad::Tcp(t) = &p.load else {
        panic!("not a TCP search")
    };
    assert_eq!(t.builtin, None);
    assert_eq!(p.server_cmd.as_deref(), Some("srv --port {port}"));
}
