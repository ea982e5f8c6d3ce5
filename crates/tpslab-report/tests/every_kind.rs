//! Every record kind's output, byte for byte (issue 34: code moves between crates while the
//! output stays byte-identical). Each fixture in `tests/fixtures/` is rendered through
//! `tpslab_report::render` in every `Format` and compared with its expected file in
//! `tests/fixtures/expected/`, with no normalisation (a changed trailing newline or space is
//! a change):
//!
//! | format              | expected file                                               |
//! |---------------------|-------------------------------------------------------------|
//! | term                | `NAME.txt`                                                  |
//! | term with --explain | `NAME.explain.txt`; without that file, the same as `NAME.txt` |
//! | term at 80 columns  | `NAME.80.txt`; without that file, the same as `NAME.txt`    |
//! | term at 160 columns | `NAME.160.txt`; without that file, the same as `NAME.txt`   |
//! | json                | the fixture itself (`NAME.json`: the record gives itself back) |
//! | csv                 | `NAME.csv`                                                  |
//! | metrics             | `NAME.prom`                                                 |
//! | html                | `NAME.html`                                                 |
//! | svg                 | `NAME.svg`                                                  |
//!
//! A format a kind refuses (a plot of a kind without one) has `NAME.EXT.error` instead: the
//! error's message. Every output is rendered twice and must be the same both times: nothing
//! in it may come from the clock, a hash map's order or the host that renders it. The
//! terminal report fitted to a width (`term::fit`: a terminal of 80 or 160 columns) has no
//! line longer than the width; `NAME.txt` is what a pipe gets (full width).
//!
//! To accept an intended change: `TPSLAB_BLESS=1 cargo test --profile suite -p tpslab-report
//! --test report every_kind::` writes the expected files from the renderers and still FAILS, naming
//! what it wrote; review `git diff`, then run again without it. Nothing accepts a change
//! silently.
//!
//! The fixtures are records the tool wrote (`--json`), untouched, on the project's test
//! machine (2 CPUs, root), from the workspace root with `T=./target/release/tpslab`,
//! `F=crates/tpslab-report/tests/fixtures`:
//!
//! - `udp_run.json`: `tpslab run udp --rate 20000 --burst 200 --burst-interval 10ms
//!   --rcvbuf 20000 --duration 500ms --warmup 100ms --interval 20ms --json $F/udp_run.json`
//! - `diagnose.json`: `tpslab diagnose --interval 10ms --json $F/diagnose.json` (its facts
//!   and diagnosis recomputed from its own run; see `snapshots.rs`)
//! - `ramp.json`: `tpslab ramp tcp --users 1..8 --step x2 --step-duration 300ms --warmup
//!   100ms --serialize --server-serial 2ms --json ramp.json`
//! - `ramp_redis.json`: Debian's redis-server 7 (`redis-server --port P --save ''
//!   --appendonly no --daemonize no`), then `$T ramp tcp 127.0.0.1:P --framing 'delim:\r\n'
//!   --payload-file ping.req --pid PID --users 1..64 --step x4 --step-duration 1s --warmup
//!   300ms -q --json ramp_redis.json` with `ping.req` holding `PING\r\n` (the run of
//!   tests/suite/threads.rs: per-thread samples, 1 working thread and 4 idle)
//! - `ramp_java_http_lock.json`: S3 in miniature over HTTP (`java
//!   tests/servers/LockedHttpServer.java P 20 1`: the JDK's com.sun.net.httpserver, 8 pool
//!   threads, a 20 ms sleep under one global lock), then `$T ramp http
//!   http://127.0.0.1:P/ -q --pid PID --users 1..8 --step x2 --step-duration 2s --warmup
//!   500ms --json ramp_java_http_lock.json` (the run of tests/suite/threads.rs: per-thread spans,
//!   timed futex waits and peer sockets; serialised by the lock)
//! - `sweep.json`: `tpslab sweep --factor rcvbuf=16000000,8192 --factor cpus=all,1 --repeat 3
//!   --burst 1000 --burst-interval 20ms --duration 600ms --warmup 200ms --seed 42 --out
//!   /tmp/sw --json /tmp/sweep.json`
//! - `tcp_lab.json`: `$T tcp --lab-rtt 30ms --lab-rate 622mbit --sndbuf 64KiB --sink-rcvbuf
//!   64KiB --target-rate 80mbit --duration 3s --interval 250ms --skip 500ms --json
//!   $F/tcp_lab.json`
//! - `serve_udp.json` (kind `serve`) and `watch.json` (a UDP server watched), one session:
//!   `$T serve udp --bind 127.0.0.1:39701 --rcvbuf 65536 --duration 3s --json
//!   $F/serve_udp.json &`, 0.3 s later `$T load udp 127.0.0.1:39701 --rate 20000 --burst 200
//!   --burst-interval 10ms --duration 2500ms &` and `$T watch --pid $SERVER --duration 2s
//!   --interval 100ms --json $F/watch.json`
//! - `serve_tcp.json` (a sink) and `tcp_bulk.json` (kind `tcp`, a bulk flow into it):
//!   `$T serve tcp --mode sink --bind 127.0.0.1:39702 --duration 3s --json $F/serve_tcp.json
//!   &`, 0.3 s later `$T tcp 127.0.0.1:39702 --duration 2s --interval 100ms --skip 500ms
//!   --sndbuf 64KiB --target-rate 10gbit --json $F/tcp_bulk.json`
//! - `tcp_watched.json` (kind `tcp`, another process's flows watched, with its threads'
//!   waits) and `watch_tcp.json` (a TCP server watched), one session: `$T serve tcp --mode
//!   source --bind 127.0.0.1:39703 --sndbuf 64KiB --duration 4s &`, `$T tcp
//!   127.0.0.1:39703 --reverse --rcvbuf 128KiB --duration 3500ms --interval 100ms --skip
//!   500ms &`, then together `$T tcp --watch-pid $SERVER --duration 2s --interval 100ms
//!   --skip 500ms --json $F/tcp_watched.json &` and `$T watch --pid $SERVER --duration 2s
//!   --interval 100ms --json $F/watch_tcp.json`
//! - `doctor.json`: `$T doctor --root tests/fixtures/doctor/s1 --for udp --rate 100000
//!   --burst 5000 --size 1024 --json $F/doctor.json`
//! - `probe_idle.json` (TCP): `$T probe idle --lab-idle-timeout 2500ms --min 1s --max 4s
//!   --resolution 1s --json $F/probe_idle.json`
//! - `probe_idle_udp.json` (UDP mappings): `$T probe idle --udp --lab-idle-timeout 2500ms
//!   --min 1s --max 4s --resolution 1s --json $F/probe_idle_udp.json`
//! - `probe_idle_haproxy.json` (a real proxy that ends flows with a FIN and ignores TCP
//!   keepalive): Debian's haproxy 2.6 in TCP mode on 127.0.0.1:18500 (`timeout client 5s`,
//!   `timeout server 5s`) in front of `$T probe idle-responder 127.0.0.1:18501`, then in a
//!   folder holding hikari.properties (`keepaliveTime=0`): `$T probe idle 127.0.0.1:18500
//!   --min 1s --max 8s --resolution 1s --pool-config hikari.properties --json
//!   $F/probe_idle_haproxy.json`
//! - `probe_pool.json`: `$T probe pool --lab-idle-timeout 1s --validate-every 2s --max-idle 3s
//!   --min-idle 1 --requests 4 --request-every 1500ms --query-timeout 500ms --json
//!   $F/probe_pool.json`
//! - `compare.json`: two runs `$T run udp --rate 20000 --burst 200 --burst-interval 10ms
//!   --rcvbuf R --duration 1s --warmup 100ms --interval 50ms --json /tmp/snapcmp/X.json`
//!   (R = 20000 for a.json, 2000000 for b.json), then in /tmp/snapcmp `tpslab compare
//!   a.json b.json --json $F/compare.json`
//! - `bdp.json` (a host whose buffers fall short of 1 Gbit/s over 100 ms): `$T bdp --rtt
//!   100ms --rate 1gbit --buffer 64KiB --json $F/bdp.json`
//! - `load_http.json`: `$T serve http --bind 127.0.0.1:P &`, then `$T load http
//!   http://127.0.0.1:P/ --rate 2000 --connections 10 --duration 1s --json $F/load_http.json`
//! - `load_http_series.json`: `python3 -m http.server 18431 --bind 127.0.0.1 &`, then `$T
//!   load http http://127.0.0.1:18431/ --rate 200 --connections 4 --duration 2s --json
//!   $F/load_http_series.json --html page.html` (with its series: 8 points, 17 bins)
//! - `load_http3.json`: Caddy 2.6 (Debian) on https://localhost:18443 (`tls internal`,
//!   `respond "hello" 200`), then `$T load http https://localhost:18443/ --http3 --insecure
//!   --rate 500 --connections 4 --streams 2 --duration 1s --json $F/load_http3.json`
//! - `load_http3_server.json`: Debian's Caddy 2.6.2 (quic-go, `tls internal`) run as
//!   nobody in a network namespace of its own by `--server-cmd`, there `$T load http
//!   https://localhost:8443/ --http3 --insecure --rate 2000 --connections 4 --streams 4
//!   --duration 2s --server-cmd 'cd DIR && exec setpriv --reuid=nobody --regid=nogroup
//!   --clear-groups env HOME=DIR ... caddy run --config Caddyfile --adapter caddyfile'
//!   --verify --json $F/load_http3_server.json` (its socket found by the URL's address,
//!   the datagram ledger, nothing dropped: nothing to verify)
//! - `capacity.json`: in a network namespace of its own, `$T serve udp --work 200us --bind
//!   127.0.0.1:39704 --sched fifo:10 --cpus 1 --duration 60s &`, then `chrt -f 5 $T capacity
//!   udp 127.0.0.1:39704 --load-cpus 0 --start-rate 1000 --step-duration 500ms --warmup
//!   200ms --repeats 2 --budget 40s --json $F/capacity.json` (the server's capacity is
//!   about 1/200us = 5,000 pps; the search found 4,625)
//! - `capacity_retry.json`: in a network namespace of its own, `chrt -f 5 $T capacity udp
//!   --server-cmd "$T serve udp --bind 127.0.0.1:{port} --sched fifo:10 --cpus 1
//!   --no-history" --fix-and-retry --burst 200 --load-cpus 0 --no-drop-reasons --start-rate
//!   10k --step-duration 1s --warmup 300ms --budget 60s --json $F/capacity_retry.json` (S1
//!   in one command: nothing passes with the default buffer; with net.core.rmem_default
//!   raised and the server started again, 100,000 pps)
//! - `ramp_python_lock.json` and `capacity_http_lock.json` (records with response-time
//!   ledgers): the locked Python service of tests/suite/ramp_lock.rs (`LOCKED_HTTP`, 4 ms under
//!   one lock, listen backlog 5) on port P with PID S, then `$T ramp http
//!   http://127.0.0.1:P/ --pid S --users 1..64 --step x4 --step-duration 2s --warmup
//!   500ms --json $F/ramp_python_lock.json` (its steps' drop reasons, host-wide, taken
//!   out) and `$T capacity http http://127.0.0.1:P/ --pid S --connections 4 --start-rate
//!   400 --resolution 20% --repeats 1 --step-duration 1s --warmup 300ms --budget 30s
//!   --json $F/capacity_http_lock.json` (sustains 225 requests/s; the lock 71 % of the
//!   failing step's mean response time)
//! - `load_http_lock.json` (a `load http` record with its response-time ledger): the same
//!   locked Python service on port P, then `$T load http http://127.0.0.1:P/ --rate 300
//!   --connections 4 --duration 2s --json $F/load_http_lock.json` (the server found by the
//!   URL's listening socket, as tests/suite/ramp_lock.rs's
//!   `load_http_finds_the_server_by_its_socket_and_names_the_lock_in_its_ledger`; achieved
//!   243 of 300/s beside a busy host's other builds and tests; the lock 12.36 ms of the
//!   16.33 ms mean response time, 76 %), with its replies' codes (`200 486`)
//!
//! (History was kept out of the way with `XDG_DATA_HOME` set to a scratch directory.)

use std::collections::BTreeSet;
use std::path::PathBuf;
use tpslab_record::{Body, Record};
use tpslab_report::{render, Format};

use crate::common::FIXTURES;

/// The fixtures of each record kind. No `_` arm: a new kind does not compile until it is
/// named here, and `every_record_kind_has_a_fixture` fails until its fixture exists.
fn fixtures_of(body: &Body) -> &'static [&'static str] {
    match body {
        Body::UdpRun(_) => &["udp_run.json"],
        Body::Watch(_) => &["watch.json", "watch_tcp.json"],
        Body::Diagnose(_) => &["diagnose.json"],
        Body::Ramp(_) => &[
            "ramp.json",
            "ramp_redis.json",
            "ramp_java_http_lock.json",
            "ramp_python_nagle.json",
            "ramp_python_lock.json",
        ],
        Body::Sweep(_) => &["sweep.json"],
        Body::Serve(_) => &["serve_udp.json"],
        Body::Tcp(_) => &["tcp_lab.json", "tcp_bulk.json", "tcp_watched.json"],
        Body::ServeTcp(_) => &["serve_tcp.json"],
        Body::Doctor(_) => &["doctor.json"],
        Body::Bdp(_) => &["bdp.json"],
        Body::LoadHttp(_) => &[
            "load_http.json",
            "load_http_nagle.json",
            "load_http3.json",
            "load_http3_server.json",
            "load_http_series.json",
            "load_http_lock.json",
        ],
        Body::ProbeIdle(_) => &[
            "probe_idle.json",
            "probe_idle_udp.json",
            "probe_idle_haproxy.json",
        ],
        Body::ProbePool(_) => &["probe_pool.json"],
        Body::Compare(_) => &["compare.json"],
        Body::Capacity(_) => &[
            "capacity.json",
            "capacity_retry.json",
            "capacity_http_lock.json",
        ],
    }
}

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn record(name: &str) -> Record {
    let p = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    Record::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `rec` in `format` fitted to `width` columns (None: full width): its bytes, or the
/// error's message when the kind refuses the format.
fn rendered(
    rec: &Record,
    format: Format,
    explain: bool,
    width: Option<usize>,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    tpslab_report::term::fit::at_width(width, || render(&mut out, rec, format, explain))
        .map(|()| out)
        .map_err(|e| e.to_string())
}

/// The lines of `text` longer than `width` characters, with their line numbers.
fn too_wide(text: &[u8], width: usize) -> Vec<String> {
    String::from_utf8_lossy(text)
        .lines()
        .enumerate()
        .filter(|(_, l)| l.chars().count() > width)
        .map(|(i, l)| format!("line {} ({} columns): {l}", i + 1, l.chars().count()))
        .collect()
}

/// Where two outputs first differ: line (1-based) and both lines, or the lengths when one
/// is the other's beginning.
fn first_difference(got: &[u8], want: &[u8]) -> String {
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let line = |b: &[u8]| {
        let start = b[..at.min(b.len())]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |i| i + 1);
        let end = b[start..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |i| start + i);
        String::from_utf8_lossy(&b[start..end]).into_owned()
    };
    let n = want[..at.min(want.len())]
        .iter()
        .filter(|&&c| c == b'\n')
        .count();
    format!(
        "byte {at} (line {}; got {} bytes, want {}):\n    want: {:?}\n    got:  {:?}",
        n + 1,
        got.len(),
        want.len(),
        line(want),
        line(got)
    )
}

/// The formats with an expected file each: (format, explain, width in columns (None: full
/// width), the file's extension).
const FORMATS: &[(Format, bool, Option<usize>, &str)] = &[
    (Format::Term, false, None, "txt"),
    (Format::Term, true, None, "explain.txt"),
    (Format::Term, false, Some(80), "80.txt"),
    (Format::Term, false, Some(160), "160.txt"),
    (Format::Csv, false, None, "csv"),
    (Format::Metrics, false, None, "prom"),
    (Format::Html, false, None, "html"),
    (Format::Svg, false, None, "svg"),
];

#[test]
fn every_fixture_renders_as_its_expected_files_in_every_format() {
    let bless = std::env::var_os("TPSLAB_BLESS").is_some_and(|v| !v.is_empty() && v != "0");
    let expected = fixtures_dir().join("expected");
    let mut bad = Vec::new();
    let mut written = Vec::new();
    for name in FIXTURES {
        let stem = name.strip_suffix(".json").expect("a .json fixture");
        let rec = record(name);
        // JSON: the record gives itself back, byte for byte.
        let json = rendered(&rec, Format::Json, false, None).expect("every kind renders as JSON");
        let file = std::fs::read(fixtures_dir().join(name)).unwrap();
        if json != file {
            bad.push(format!(
                "{name} as json is not the fixture: {}",
                first_difference(&json, &file)
            ));
        }
        let term = rendered(&rec, Format::Term, false, None);
        for &(format, explain, width, ext) in FORMATS {
            let got = rendered(&rec, format, explain, width);
            // The same input renders the same bytes every time.
            let again = rendered(&rec, format, explain, width);
            if got != again {
                bad.push(format!("{stem}.{ext}: two renders differ"));
            }
            // Files are not fitted: a page made while the command runs in a terminal of
            // 80 columns is the page made in a pipe.
            if format == Format::Html && rendered(&rec, format, explain, Some(80)) != got {
                bad.push(format!("{stem}.{ext}: differs when made at 80 columns"));
            }
            if let (Some(w), Ok(text)) = (width, &got) {
                for l in too_wide(text, w) {
                    bad.push(format!("{stem}.{ext}: over {w} columns at {l}"));
                }
            }
            let ok = expected.join(format!("{stem}.{ext}"));
            let err = expected.join(format!("{stem}.{ext}.error"));
            // Explained or fitted terminal output has its own file only where it differs.
            let same_as_term = (explain || width.is_some()) && got == term;
            if bless {
                let _ = std::fs::remove_file(&ok);
                let _ = std::fs::remove_file(&err);
                if !same_as_term {
                    let (path, bytes) = match &got {
                        Ok(b) => (&ok, b.clone()),
                        Err(e) => (&err, format!("{e}\n").into_bytes()),
                    };
                    std::fs::create_dir_all(&expected).unwrap();
                    std::fs::write(path, bytes).unwrap();
                    written.push(path.file_name().unwrap().to_string_lossy().into_owned());
                }
                continue;
            }
            match (std::fs::read(&ok), std::fs::read(&err), &got) {
                (Ok(_), Ok(_), _) => bad.push(format!("{stem}.{ext}: both it and .error exist")),
                (Ok(want), Err(_), Ok(b)) if *b != want => bad.push(format!(
                    "{stem}.{ext} differs at {}",
                    first_difference(b, &want)
                )),
                (Ok(_), Err(_), Err(e)) => bad.push(format!("{stem}.{ext}: now refused ({e})")),
                (Err(_), Ok(want), Err(e)) if format!("{e}\n").as_bytes() != want => {
                    bad.push(format!(
                        "{stem}.{ext}.error differs at {}",
                        first_difference(format!("{e}\n").as_bytes(), &want)
                    ))
                }
                (Err(_), Ok(_), Ok(_)) => {
                    bad.push(format!("{stem}.{ext}: was refused, now renders"))
                }
                (Err(_), Err(_), _) if same_as_term => {}
                (Err(_), Err(_), _) => bad.push(if explain || width.is_some() {
                    format!("{stem}.{ext}: no expected file, and it differs from {stem}.txt")
                } else {
                    format!("{stem}.{ext}: no expected file")
                }),
                _ => {}
            }
        }
    }
    assert!(
        !bless,
        "TPSLAB_BLESS: wrote {} expected file(s) ({}); review `git diff`, then run again without it",
        written.len(),
        written.join(", ")
    );
    assert!(
        bad.is_empty(),
        "{} output(s) changed (an intended change: see this file's header):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// No expected file is left that no fixture renders (a renamed fixture's old files).
#[test]
fn every_expected_file_belongs_to_a_fixture_and_format() {
    let mut known = BTreeSet::new();
    for name in FIXTURES {
        let stem = name.strip_suffix(".json").unwrap();
        for (_, _, _, ext) in FORMATS {
            known.insert(format!("{stem}.{ext}"));
            known.insert(format!("{stem}.{ext}.error"));
        }
    }
    for e in std::fs::read_dir(fixtures_dir().join("expected")).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(known.contains(&n), "expected/{n}: no fixture renders it");
    }
}

/// The record kinds as `Record::from_json` reads them: the list its error for an unknown
/// `kind` names.
fn kinds_serde_reads() -> BTreeSet<String> {
    let p = fixtures_dir().join("serve_udp.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    v["kind"] = "(none)".into();
    let msg = Record::from_json(&v.to_string()).unwrap_err().to_string();
    let list = msg
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("serde's message names no variants: {msg}"));
    list.split(", ")
        .map(|k| k.split('`').nth(1).expect("a quoted variant").to_string())
        .collect()
}

/// Every variant of `Body` has a fixture of its kind: `fixtures_of` names each kind's
/// fixtures (a new variant does not compile without an arm), every kind serde reads is the
/// kind of a fixture, each fixture is listed under its own kind, and the fixture list is
/// every record in `tests/fixtures/`.
#[test]
fn every_record_kind_has_a_fixture() {
    let mut kinds = BTreeSet::new();
    for name in FIXTURES {
        let rec = record(name);
        assert!(
            fixtures_of(&rec.body).contains(name),
            "{name} (kind {}) is not listed under its kind in fixtures_of",
            rec.kind()
        );
        kinds.insert(rec.kind().to_string());
        for other in fixtures_of(&rec.body) {
            assert!(
                FIXTURES.contains(other),
                "{other}, listed for kind {}, is not in common::FIXTURES",
                rec.kind()
            );
            assert_eq!(record(other).kind(), rec.kind(), "{other}");
        }
    }
    let all = kinds_serde_reads();
    assert!(all.len() >= 12, "{all:?}");
    let missing: Vec<_> = all.difference(&kinds).collect();
    assert!(
        missing.is_empty(),
        "record kinds without a fixture: {missing:?}"
    );
    // The list is the directory: no record there escapes the snapshot and fuzz tests.
    let on_disk: BTreeSet<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let listed: BTreeSet<String> = FIXTURES.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        on_disk, listed,
        "tests/fixtures/*.json against common::FIXTURES"
    );
}
