//! The command line to the plan, row by row, for ramp, tcp, serve tcp, probe, doctor, bdp
//! and fleet: each row's words parsed by clap ([`Cli::try_parse_from`]) and its command's
//! `plan()`, giving the plan (checked field by field) or the one-line error the user
//! reads (as `tpslab: error: ...` says it, before `cli` marks the defaults in it). Nothing
//! runs: plans resolve addresses, read input files and check output folders only.

use super::{Cli, Cmd, ServeProto};
use crate::doctor::DoctorPlan;
use crate::fleet::{FleetCmd, K8sLaunch, SshLaunch};
use crate::probe::ProbeCmd;
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;
use tpslab_plan::bdp::BdpPlan;
use tpslab_plan::probe::{IdleTarget, OnIdle, PoolPlan, ResponderPlan};
use tpslab_plan::tcp::{ServeTcpMode, ServeTcpPlan, TcpMode, TcpPlan};
use tpslab_run::probe::IdleSetup;
use tpslab_run::ramp::{RampProto, RampSetup, BUILTIN_UNSTARTED};

/// A plan of one of these commands.
#[derive(Debug)]
enum Planned {
    Ramp(RampSetup),
    Tcp(TcpPlan),
    ServeTcp(ServeTcpPlan),
    Idle(IdleSetup),
    Pool(PoolPlan),
    Responder(ResponderPlan),
    Doctor(DoctorPlan),
    Bdp(BdpPlan),
    K8s(K8sLaunch),
    Ssh(SshLaunch),
}

/// The plan of `tpslab WORDS...`, or the error line: clap's for a value its parser
/// refused (as `cli::usage_error` shows it, without `tpslab: error: `), else the plan's.
fn planned(words: &[&str]) -> Result<Planned, String> {
    let cli = Cli::try_parse_from(std::iter::once("tpslab").chain(words.iter().copied())).map_err(
        |e| {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            line.strip_prefix("error: ").unwrap_or(line).to_string()
        },
    )?;
    let plan = match &cli.cmd {
        Cmd::Ramp { proto } => proto.plan().map(Planned::Ramp),
        Cmd::Tcp(a) => a.plan().map(Planned::Tcp),
        Cmd::Serve {
            proto: ServeProto::Tcp(a),
        } => a.plan().map(Planned::ServeTcp),
        Cmd::Probe { what } => match what {
            ProbeCmd::Idle(a) => a.plan().map(Planned::Idle),
            ProbeCmd::Pool(a) => a.plan().map(Planned::Pool),
            ProbeCmd::IdleResponder(a) => a.plan().map(Planned::Responder),
        },
        Cmd::Doctor(a) => a.plan().map(Planned::Doctor),
        Cmd::Bdp(a) => a.plan().map(Planned::Bdp),
        Cmd::Fleet { how } => match how {
            FleetCmd::K8s(a) => a.plan().map(Planned::K8s),
            FleetCmd::Ssh(a) => a.plan().map(Planned::Ssh),
        },
        other => panic!("not a command of these rows: {other:?}"),
    };
    plan.map_err(|e| format!("{e:#}"))
}

/// What a row expects.
enum Want {
    /// A plan, and what holds of it.
    Plan(fn(&Planned) -> bool),
    /// An error line that starts with this (the whole line where it names no OS text).
    Error(&'static str),
}
use Want::{Error, Plan};

/// Runs the rows; every failing row is named, then the test fails.
fn check(rows: &[(&[&str], Want)]) {
    let mut failed = vec![];
    for (words, want) in rows {
        let got = planned(words);
        let ok = match (&got, want) {
            (Ok(p), Plan(f)) => f(p),
            (Err(e), Error(w)) => e.starts_with(w),
            _ => false,
        };
        if !ok {
            failed.push(format!("tpslab {}: {got:?}", words.join(" ")));
        }
    }
    assert!(failed.is_empty(), "rows failed:\n{}", failed.join("\n"));
}

/// A scratch folder for the rows' input files (this process's own).
fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpslab-plan-rows-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `name` in [`scratch`] holding `bytes`, as a leaked &str for a row's words.
fn file(name: &str, bytes: &[u8]) -> &'static str {
    let p = scratch().join(name);
    std::fs::write(&p, bytes).unwrap();
    Box::leak(p.to_str().unwrap().to_string().into_boxed_str())
}

const SIZE_FORMS: &str = "allowed bytes (65536) or a size with a unit: KiB, MiB, GiB (binary; K, M, G the same) or KB, MB, GB (decimal), e.g. 64KiB, 2MiB";
const BITRATE_FORMS: &str = "allowed a number with a unit: bit, kbit, mbit, gbit (or bps, kbps, mbps, gbps, Mb/s; kB/s, MB/s, GB/s for bytes), e.g. 80mbit";
const DURATION_FORMS: &str = "allowed a duration with a unit: ns, us, ms, s, m (minutes), h, d, e.g. 200us, 10ms, 1.5s, 1m, 1h30m";

#[test]
fn ramp_rows() {
    let dns = file("dns.bin", &[0u8; 29]);
    let one = file("one.bin", b"x");
    check(&[
        (&["ramp", "tcp"], Plan(|p| matches!(p, Planned::Ramp(RampSetup { plan, builtin: Some(b) })
            if plan.proto == RampProto::Tcp && plan.target == BUILTIN_UNSTARTED
                && plan.steps == [1, 2, 4, 8, 16, 32, 64] && plan.step_ns == 3_000_000_000
                && plan.warmup_ns == 1_000_000_000 && plan.timeout_ns == 2_000_000_000
                // 1024 bytes, "ping" every 64, behind a 4-byte length.
                && plan.request.len() == 1028 && plan.request[..4] == 1024u32.to_be_bytes()
                && plan.request[4..8] == *b"ping" && plan.request[1028 - 64..1028 - 60] == *b"ping"
                && plan.server_pid.is_none() && b.serial == Duration::from_millis(10)
                && plan.builtin_server.as_deref() == Some("0ns CPU + 10ms waiting per request, no lock")))),
        (&["ramp", "tcp", "--users", "10..30", "--step", "+10", "--serialize", "--server-threads", "4"],
            Plan(|p| matches!(p, Planned::Ramp(RampSetup { plan, builtin: Some(b) })
                if plan.steps == [10, 20, 30] && b.serialize && b.threads == 4
                    && plan.builtin_server.as_deref() == Some("0ns CPU + 10ms under one global lock per request")))),
        (&["ramp", "udp", "127.0.0.1:9", "--payload-file", dns, "--seq-field", "0:2", "--knee-gain", "0.5"],
            Plan(|p| matches!(p, Planned::Ramp(RampSetup { plan, builtin: None })
                if plan.proto == RampProto::Udp && plan.target.port() == 9 && plan.request.len() == 29
                    && plan.seq_field == Some((0, 2)) && plan.knee_gain == 0.5 && plan.builtin_server.is_none()))),
        (&["ramp", "tcp", "--users", "9..1"], Error("--users 9..1: the range is empty (FIRST above LAST)")),
        (&["ramp", "tcp", "--users", "0..5"], Error("--users 0..5: allowed FIRST..LAST with 1 <= FIRST <= LAST <= 10000, e.g. 1..200")),
        (&["ramp", "tcp", "--step", "x1"], Error("--step x1: allowed +N or N (add N users, N >= 1) or xF (multiply by F > 1), e.g. +10 or x2")),
        (&["ramp", "tcp", "127.0.0.1:9", "--payload-file", "/nonexistent/req.bin"], Error("--payload-file /nonexistent/req.bin: ")),
        (&["ramp", "tcp", "--framing", "lines"], Error("--framing \"lines\": allowed length, fixed:BYTES (1..=16777216) or delim:TEXT (e.g. delim:\\r\\n)")),
        (&["ramp", "tcp", "--timeout", "0s"], Error("--timeout 0s: allowed 1ms..=10m")),
        (&["ramp", "tcp", "--knee-gain", "2"], Error("--knee-gain 2: allowed above 0 and below 1")),
        (&["ramp", "tcp", "127.0.0.1:9", "--serialize"], Error("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out TARGET to use it")),
        (&["ramp", "tcp", "127.0.0.1:9", "--server-threads", "4"], Error("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out TARGET to use it")),
        (&["ramp", "udp"], Error("ramp udp needs TARGET (HOST:PORT), e.g. of `tpslab serve udp --mode echo`")),
        (&["ramp", "udp", "127.0.0.1:9", "--seq-field", "0:2"], Error("--seq-field needs --payload-file")),
        (&["ramp", "udp", "127.0.0.1:9", "--payload-file", one, "--seq-field", "18446744073709551615:2"],
            Error("--seq-field \"18446744073709551615:2\": allowed OFFSET:LEN with LEN 1..=8 inside the 1-byte payload, e.g. 0:2")),
        (&["ramp", "udp", "127.0.0.1:9", "--payload-file", one], Error("ramp udp --payload-file needs --seq-field OFF:LEN (a field the server echoes, e.g. 0:2 for a DNS id) to match replies")),
        (&["ramp", "udp", "127.0.0.1:9", "--framing", "fixed:4"], Error("--framing applies to ramp tcp")),
        (&["ramp", "tcp", "--seq-field", "0:2"], Error("--seq-field applies to ramp udp")),
        (&["ramp", "tcp", "--size", "7"], Error("--size 7: allowed 8..=65507 bytes")),
        (&["ramp", "tcp", "--size", "2x"], Error(joined("--size 2x: ", SIZE_FORMS))),
        (&["ramp", "tcp", "--pid", "1"], Error("--pid applies with a TARGET; the built-in server is watched anyway")),
        (&["ramp", "tcp", "--users", "1..2", "--json", "/nonexistent-tpslab-dir/out.json"], Error("--json /nonexistent-tpslab-dir/out.json: folder /nonexistent-tpslab-dir does not exist")),
        (&["ramp", "tcp", "--users", "1..2", "--json", "-"], Error("--json -: standard output is taken by the report here; give a file")),
        (&["ramp", "tcp", "--svg", "/nonexistent-tpslab-dir/x.svg"], Error("--svg /nonexistent-tpslab-dir/x.svg: folder /nonexistent-tpslab-dir does not exist")),
    ]);
}

/// `a` then `b`, for a row's expected line (leaked once per row: tests only).
fn joined(a: &str, b: &str) -> &'static str {
    Box::leak(format!("{a}{b}").into_boxed_str())
}

#[test]
fn tcp_rows() {
    check(&[
        (&["tcp", "127.0.0.1:1"], Plan(|p| matches!(p, Planned::Tcp(TcpPlan { mode: TcpMode::Send { target }, duration_ns: 10_000_000_000, interval_ns: 100_000_000, skip_ns: 1_000_000_000, sndbuf: None, rcvbuf: None, write_bytes: 131_072, target_rate_bps: None }) if target.port() == 1))),
        (&["tcp", "127.0.0.1:1", "--reverse", "--rcvbuf", "64KiB"], Plan(|p| matches!(p, Planned::Tcp(TcpPlan { mode: TcpMode::Reverse { .. }, rcvbuf: Some(65536), .. })))),
        (&["tcp", "--lab-rtt", "30ms", "--lab-loss", "0.1%", "--target-rate", "80mbit", "--no-verify"],
            Plan(|p| matches!(p, Planned::Tcp(TcpPlan { mode: TcpMode::Lab { link, sink_rcvbuf: None, verify: false }, target_rate_bps: Some(r), .. })
                if link.delay_ns == 15_000_000 && (link.loss - 0.001).abs() < 1e-12 && link.queue_packets == 1000 && *r == 80e6))),
        (&["tcp", "--watch-port", "80"], Plan(|p| matches!(p, Planned::Tcp(TcpPlan { mode: TcpMode::Watch { pid: None, port: Some(80) }, .. })))),
        (&["tcp"], Error("tcp needs TARGET (HOST:PORT of a sink) or --lab-rtt RTT (a lab between two namespaces)")),
        (&["tcp", "127.0.0.1:1", "--lab-rtt", "30ms"], Error("give TARGET or --lab-rtt, not both: the lab runs its own sink")),
        (&["tcp", "--lab-rtt", "30ms", "--lab-loss", "2"], Error("--lab-loss 2: allowed a share from 0 up to (not including) 1, or a percentage such as 0.1%")),
        (&["tcp", "--lab-rtt", "11s"], Error("--lab-rtt 11s: allowed 1ms..=10s")),
        (&["tcp", "--lab-rtt", "0s"], Error("--lab-rtt 0s: allowed 1ms..=10s")),
        (&["tcp", "--lab-rtt", "30ms", "--lab-rate", "fast"], Error(joined("--lab-rate fast: ", BITRATE_FORMS))),
        (&["tcp", "--lab-rtt", "30ms", "--lab-rate", "80"], Error(joined("--lab-rate 80: ", BITRATE_FORMS))),
        (&["tcp", "--lab-rtt", "30ms", "--lab-queue", "0"], Error("lab link: queue 0 packets: allowed 1 to 32768 (--lab-rate, --lab-queue)")),
        (&["tcp", "--lab-rtt", "30ms", "--sndbuf", "2GiB"], Error("--sndbuf 2GiB: allowed 1KiB to 1023MiB")),
        (&["tcp", "--lab-rtt", "30ms", "--sndbuf", "1GiB"], Error("--sndbuf 1GiB: allowed 1KiB to 1023MiB")),
        (&["tcp", "--lab-rtt", "30ms", "--sink-rcvbuf=-5"], Error(joined("--sink-rcvbuf -5: ", SIZE_FORMS))),
        (&["tcp", "--lab-rtt", "30ms", "--write-size", "2x"], Error(joined("--write-size 2x: ", SIZE_FORMS))),
        (&["tcp", "127.0.0.1:1", "--sink-rcvbuf", "64KiB"], Error("--sink-rcvbuf applies only with --lab-rtt")),
        (&["tcp", "127.0.0.1:1", "--lab-queue", "10"], Error("--lab-queue applies only with --lab-rtt")),
        (&["tcp", "127.0.0.1:1", "--no-verify"], Error("--no-verify applies only with --lab-rtt")),
        // `cli` then marks --skip as its default, not given.
        (&["tcp", "127.0.0.1:1", "--duration", "1s"], Error("--skip 1s leaves less than two samples of --duration 1s: shorten --skip or lengthen --duration")),
        (&["tcp", "127.0.0.1:1", "--interval", "500us"], Error("--interval 500us: allowed 1ms..=1m")),
        (&["tcp", "127.0.0.1:1", "--duration", "1h", "--interval", "1ms"], Error("--interval 1ms over --duration 1h: 3600000 samples; allowed up to 360000 (an --interval of at least 10ms)")),
        (&["tcp", "127.0.0.1:1", "--target-rate", "0mbit"], Error(joined("--target-rate 0mbit: ", BITRATE_FORMS))),
        (&["tcp", "127.0.0.1:1", "--reverse", "--sndbuf", "64KiB"], Error("--sndbuf is the sender's: with --reverse the sender is the source (tpslab serve tcp --mode source --sndbuf SIZE)")),
        (&["tcp", "127.0.0.1:1", "--rcvbuf", "64KiB"], Error("--rcvbuf applies with --reverse (this side receiving); the sink's buffer is set on the sink")),
        (&["tcp", "--lab-rtt", "30ms", "--reverse"], Error("--reverse and --rcvbuf apply with a TARGET, not in the lab yet")),
        (&["tcp", "127.0.0.1:1", "--reverse", "--target-rate", "80mbit"], Error("--target-rate applies to sending; with --reverse only this side's receive window is judged")),
        (&["tcp", "127.0.0.1:1", "--reverse", "--fail-on", "target"], Error("--fail-on target: with --reverse no target rate is judged; allowed invalid")),
        (&["tcp", "--watch-pid", "999999999"], Error("--watch-pid 999999999: no such process")),
        (&["tcp", "--watch-port", "80", "--lab-loss", "1%"], Error("--lab-loss does not apply when watching flows of another process")),
        (&["tcp", "--watch-port", "80", "--sndbuf", "64KiB"], Error("--sndbuf does not apply when watching flows of another process")),
        (&["tcp", "127.0.0.1:1", "--watch-port", "80"], Error("--watch-pid/--watch-port watch existing flows: leave out TARGET and --lab-rtt")),
        (&["tcp", "--lab-rtt", "10ms", "--json", "/nonexistent-tpslab-dir/out.json"], Error("--json /nonexistent-tpslab-dir/out.json: folder /nonexistent-tpslab-dir does not exist")),
    ]);
}

#[test]
fn serve_tcp_rows() {
    check(&[
        (
            &["serve", "tcp"],
            Plan(|p| {
                matches!(p, Planned::ServeTcp(s) if *s == ServeTcpPlan {
            listen: "127.0.0.1:5001".parse().unwrap(), mode: ServeTcpMode::Sink, rcvbuf: None, sndbuf: None,
            work_ns: 0, serial_ns: 0, serialize: false, threads: 0, duration_ns: None })
            }),
        ),
        (
            &[
                "serve",
                "tcp",
                "--mode",
                "replace",
                "--work",
                "20us",
                "--serial-ns",
                "1000000",
                "--serialize",
                "--threads",
                "4",
                "--duration",
                "1m",
            ],
            Plan(|p| {
                matches!(
                    p,
                    Planned::ServeTcp(ServeTcpPlan {
                        mode: ServeTcpMode::Replace,
                        work_ns: 20_000,
                        serial_ns: 1_000_000,
                        serialize: true,
                        threads: 4,
                        duration_ns: Some(60_000_000_000),
                        ..
                    })
                )
            }),
        ),
        (
            &["serve", "tcp", "--bind", "nowhere"],
            Error("--bind \"nowhere\": allowed ADDR:PORT, e.g. 127.0.0.1:5001"),
        ),
        (
            &["serve", "tcp", "--rcvbuf", "1"],
            Error("--rcvbuf 1: allowed 1KiB to 1023MiB"),
        ),
        (
            &["serve", "tcp", "--sndbuf", "2x"],
            Error(joined("--sndbuf 2x: ", SIZE_FORMS)),
        ),
        (
            &["serve", "tcp", "--mode", "echo", "--serialize"],
            Error(
                "--serialize needs --serial DURATION (the part of each request run under the lock)",
            ),
        ),
        (
            &["serve", "tcp", "--serial", "1ms"],
            Error("--serial applies to --mode echo or replace, not sink or source"),
        ),
        (
            &["serve", "tcp", "--mode", "source", "--rcvbuf", "64KiB"],
            Error("--rcvbuf applies to --mode sink"),
        ),
        (
            &["serve", "tcp", "--mode", "sink", "--sndbuf", "64KiB"],
            Error("--sndbuf applies to --mode source"),
        ),
        (
            &["serve", "tcp", "--mode", "echo", "--work", "2s"],
            Error("--work 2s: allowed 0s..=1s"),
        ),
        (
            &["serve", "tcp", "--mode", "echo", "--serial", "11s"],
            Error("--serial 11s: allowed 0s..=10s"),
        ),
        (
            &[
                "serve",
                "tcp",
                "--mode",
                "echo",
                "--serial",
                "1ms",
                "--serial-ns",
                "1000000",
            ],
            Error(
                "the argument '--serial <DURATION>' cannot be used with '--serial-ns <SERIAL_NS>'",
            ),
        ),
    ]);
}

#[test]
fn probe_rows() {
    let bad_pool = file("bad.properties", b"keepaliveTime=soon\n");
    check(&[
        (
            &["probe", "idle", "127.0.0.1:9"],
            Plan(|p| {
                matches!(p, Planned::Idle(IdleSetup { plan, pools })
            if matches!(plan.target, IdleTarget::Server { addr } if addr.port() == 9)
                && (plan.min_s, plan.max_s, plan.resolution_s, plan.connections) == (10, 3600, 5, 16)
                && !plan.udp && pools.is_empty())
            }),
        ),
        // The derived resolution: half the range when that is below 5 s.
        (
            &[
                "probe",
                "idle",
                "--lab-idle-timeout",
                "3s",
                "--lab-on-idle",
                "reset",
                "--min",
                "1s",
                "--max",
                "5s",
                "--udp",
            ],
            Plan(|p| {
                matches!(p, Planned::Idle(IdleSetup { plan, .. })
                if plan.target == IdleTarget::Lab { idle_timeout_ns: 3_000_000_000, on_idle: OnIdle::Reset }
                    && plan.resolution_s == 2 && plan.udp)
            }),
        ),
        (
            &[
                "probe",
                "idle",
                "127.0.0.1:9",
                "--pool-config",
                file("hikari.properties", b"keepaliveTime=60000\n"),
            ],
            Plan(
                |p| matches!(p, Planned::Idle(IdleSetup { pools, .. }) if pools.len() == 1 && pools[0].settings[0].value == "60000"),
            ),
        ),
        (
            &["probe", "idle"],
            Error("probe idle needs a target HOST:PORT, or --lab-idle-timeout DUR for the lab"),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--lab-idle-timeout", "10s"],
            Error("give a target HOST:PORT or --lab-idle-timeout, not both"),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--min", "10"],
            Error(joined("--min 10: ", DURATION_FORMS)),
        ),
        // `cli` then marks the values not given as defaults.
        (
            &[
                "probe",
                "idle",
                "--lab-idle-timeout",
                "3s",
                "--min",
                "1s",
                "--max",
                "2s",
            ],
            Error("--resolution 1s is not below the range --min 1s to --max 2s"),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--min", "2h"],
            Error("--max 1h is not above --min 2h"),
        ),
        (
            &[
                "probe",
                "idle",
                "127.0.0.1:9",
                "--udp",
                "--pool-config",
                "x.ini",
            ],
            Error("--pool-config judges TCP connection pools: not with --udp"),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--pool-config", "/dev/zero"],
            Error("--pool-config /dev/zero: a character device; allowed a regular file"),
        ),
        (
            &["probe", "pool", "--lab-idle-timeout", "5s"],
            Plan(|p| {
                matches!(p, Planned::Pool(pp) if *pp == PoolPlan {
            idle_timeout_ns: 5_000_000_000, validate_every_ns: None, max_idle_ns: None, min_idle: 2, requests: 6,
            request_every_ns: 4_000_000_000, query_timeout_ns: 2_000_000_000 })
            }),
        ),
        (
            &[
                "probe",
                "pool",
                "--lab-idle-timeout",
                "1s",
                "--requests",
                "0",
            ],
            Error("--requests 0: allowed 1..=1000"),
        ),
        (
            &[
                "probe",
                "idle-responder",
                "0.0.0.0:9100",
                "--duration",
                "10s",
            ],
            Plan(|p| {
                matches!(p, Planned::Responder(r) if *r == ResponderPlan {
            bind: "0.0.0.0:9100".parse().unwrap(), duration: Some(Duration::from_secs(10)) })
            }),
        ),
        (
            &["probe", "idle-responder", "nowhere"],
            Error("bind \"nowhere\": allowed ADDR:PORT, e.g. 0.0.0.0:9100"),
        ),
        (
            &["probe", "idle-responder", "127.0.0.1:0", "--duration", "0s"],
            Error("--duration 0s: allowed 1ms..="),
        ),
    ]);
    // A pool setting that is not a number names itself.
    let e = planned(&["probe", "idle", "127.0.0.1:9", "--pool-config", bad_pool]).unwrap_err();
    assert!(e.contains("keepaliveTime"), "{e}");
}

#[test]
fn doctor_rows() {
    use tpslab_analysis::doctor::Severity;
    use tpslab_plan::doctor::Workload;
    let exists = file("exists.conf", b"");
    check(&[
        (
            &["doctor"],
            Plan(|p| {
                matches!(p, Planned::Doctor(DoctorPlan { setup, fail_on: None })
            if setup.root == std::path::Path::new("/") && setup.workload.is_none() && setup.pools.is_empty())
            }),
        ),
        (
            &[
                "doctor",
                "--for",
                "udp",
                "--rate",
                "200k",
                "--burst",
                "5000",
                "--size",
                "1KiB",
                "--fail-on",
                "warn",
            ],
            Plan(|p| {
                matches!(p, Planned::Doctor(DoctorPlan { setup, fail_on: Some(Severity::Warn) })
                if setup.workload == Some(Workload::Udp { rate_pps: 200_000.0, burst: 5000, size_bytes: 1024, sockets: 1 }))
            }),
        ),
        (
            &[
                "doctor",
                "--for",
                "pool",
                "--idle-timeout",
                "350s",
                "--pool-config",
                file("pgbouncer.ini", b"[pgbouncer]\nserver_idle_timeout = 600\n"),
            ],
            Plan(|p| {
                matches!(p, Planned::Doctor(DoctorPlan { setup, .. })
                if matches!(setup.workload, Some(Workload::Pool { idle_timeout_ns: 350_000_000_000, .. })) && setup.pools.len() == 1)
            }),
        ),
        (
            &["doctor", "--rate", "10k"],
            Error("--rate describes a workload: give --for udp, tcp or pool"),
        ),
        (
            &["doctor", "--for", "disk"],
            Error("--for disk: allowed udp, tcp or pool"),
        ),
        (
            &["doctor", "--for", "udp", "--rate", "10k", "--burst", "5"],
            Error("--for udp needs --size (it takes --rate, --burst, --size, --sockets)"),
        ),
        (
            &["doctor", "--pool-config", "x.ini"],
            Error("--pool-config is judged against a timeout: give --for pool --idle-timeout DUR"),
        ),
        (
            &[
                "doctor",
                "--for",
                "pool",
                "--idle-timeout",
                "350s",
                "--pool-config",
                "/dev/zero",
            ],
            Error("--pool-config /dev/zero: a character device; allowed a regular file"),
        ),
        (
            &["doctor", "--fail-on", "often"],
            Error("--fail-on often: allowed warn or error"),
        ),
        (
            &["doctor", "--root", "/nonexistent-root"],
            Error("--root /nonexistent-root: not a folder"),
        ),
        (
            &["doctor", "--write-snippet", exists],
            Error(joined(
                &format!("--write-snippet {exists}"),
                ": exists; doctor does not overwrite (give a new file name)",
            )),
        ),
    ]);
}

#[test]
fn bdp_rows() {
    check(&[
        (&["bdp", "--rtt", "30ms", "--rate", "80mbit"], Plan(|p| matches!(p, Planned::Bdp(b) if *b == BdpPlan {
            rtt: Duration::from_millis(30), rate_bps: Some(80e6), buffer_bytes: None }))),
        (&["bdp", "--rtt", "30ms", "--buffer", "2MiB", "--rate", "1.5gbit"], Plan(|p| matches!(p, Planned::Bdp(BdpPlan { buffer_bytes: Some(2_097_152), rate_bps: Some(r), .. }) if *r == 1.5e9))),
        (&["bdp", "--rtt", "30ms"], Error("bdp needs --rate RATE (the buffers it needs) or --buffer SIZE (the rate it allows)")),
        (&["bdp", "--rtt", "0s", "--rate", "80mbit"], Error("--rtt 0s: allowed 1us..=1m")),
        (&["bdp", "--rtt", "30ms", "--rate", "80"], Error(joined("--rate 80: ", BITRATE_FORMS))),
        (&["bdp", "--rtt", "30ms", "--buffer", "2x"], Error(joined("--buffer 2x: ", SIZE_FORMS))),
    ]);
}

#[test]
fn fleet_rows() {
    let plan = file(
        "fleet.toml",
        b"target = \"10.0.0.1:9000\"\nrate = \"20k\"\nmax_wait = \"5m\"\n",
    );
    let not_toml = file("not.toml", b"x");
    check(&[
        (&["fleet", "k8s", "--plan", plan, "--agents", "4"], Plan(|p| matches!(p, Planned::K8s(K8sLaunch { how, text, fleet })
            if how.agents == 4 && how.name == "tpslab-fleet" && how.namespace == "default" && how.image == "tpslab:latest"
                && how.start_in == Duration::from_secs(60) && text.starts_with("target = ") && fleet.target == "10.0.0.1:9000"))),
        (&["fleet", "ssh", "--plan", plan, "--ssh", "ip netns exec", "--", "h1, root@10.0.0.2"], Plan(|p| matches!(p, Planned::Ssh(SshLaunch { how, plan_path, .. })
            if how.hosts == ["h1", "root@10.0.0.2"] && how.ssh_words().unwrap() == ["ip", "netns", "exec"]
                && how.out == std::path::Path::new("fleet-records") && !how.run && plan_path.ends_with("/fleet.toml")
                && plan_path.starts_with('/')))),
        (&["fleet", "k8s", "--plan", "p.toml", "--agents", "2", "--start-in", "1x"], Error(joined("--start-in 1x: ", DURATION_FORMS))),
        (&["fleet", "k8s", "--plan", "/dev/zero", "--agents", "2", "--start-in", "10s"], Error("--plan /dev/zero: a character device; allowed a regular file")),
        (&["fleet", "k8s", "--plan", not_toml, "--agents", "2"], Error(joined(&format!("--plan {not_toml:?}: "), "--plan expected `.`, `=`: allowed a TOML fleet plan"))),
        (&["fleet", "k8s", "--plan", plan, "--agents", "2", "--start-in", "5m"], Error("--start-in 5m: allowed above 0 and below the plan's max_wait 5m")),
        (&["fleet", "k8s", "--plan", plan, "--agents", "0"], Error("--agents 0: allowed 1..=1024")),
        (&["fleet", "k8s", "--plan", plan, "--agents", "2", "--name", "Fleet"], Error("--name \"Fleet\": allowed a lowercase RFC 1123 label (a-z, 0-9 and '-', starting and ending with a letter or digit) of at most 61 characters (NAME-INDEX is each pod's host name, at most 63)")),
        (&["fleet", "k8s", "--plan", plan, "--agents", "2", "--namespace", "a_b"], Error("--namespace \"a_b\": allowed a lowercase RFC 1123 label")),
        (&["fleet", "k8s", "--plan", plan, "--agents", "2", "--image", "a b"], Error("--image \"a b\": allowed an image reference of 1..=4096 bytes without white space or control characters")),
        (&["fleet", "ssh", "--plan", plan, "--", "h1,a;b"], Error("host \"a;b\": allowed a comma-separated list of [USER@]HOST")),
        (&["fleet", "ssh", "--plan", plan, "--ssh", "ssh '", "h1"], Error("--ssh \"ssh '\": allowed a command that splits into shell words (quotes closed)")),
        (&["fleet", "ssh", "--plan", plan, "--remote-tpslab=-x", "h1"], Error("--remote-tpslab \"-x\": allowed a path of letters, digits and /._+:@- not starting with '-'")),
        // The flags are checked before the plan file is read.
        (&["fleet", "ssh", "--plan", "/dev/zero", "--", "a;b"], Error("host \"a;b\": allowed")),
        (&["fleet", "ssh", "--plan", plan, &"h,".repeat(1025)[..2049]], Error("1025 hosts: --of 1025: allowed 1..=1024")),
    ]);
}

#[test]
fn ramp_http_rows() {
    let body = file("body.json", b"{\"a\":1}");
    let big = file("big.bin", &vec![b'x'; (1 << 20) + 1]);
    check(&[
        (&["ramp", "http", "http://127.0.0.1:8080/x?y=1", "--method", "POST", "--header", "Accept: */*",
           "--header", "X-Trace:  7 ", "--body", body, "--users", "1..4"],
            Plan(|p| matches!(p, Planned::Ramp(RampSetup { plan, builtin: None })
                if matches!(&plan.proto, RampProto::Http(h) if h.url == "http://127.0.0.1:8080/x?y=1"
                    && h.method == "POST"
                    && h.headers == [("Accept".to_string(), "*/*".to_string()), ("X-Trace".to_string(), "7".to_string())])
                && plan.target == "127.0.0.1:8080".parse().unwrap()
                && plan.request == b"{\"a\":1}" && plan.steps == [1, 2, 4]))),
        (&["ramp", "http", "--serialize"], Plan(|p| matches!(p, Planned::Ramp(RampSetup { plan, builtin: Some(b) })
            if matches!(&plan.proto, RampProto::Http(h) if h.method == "GET" && h.headers.is_empty())
                && plan.target == BUILTIN_UNSTARTED && plan.request.is_empty() && b.serialize))),
        (&["ramp", "http", "http://localhost/"], Plan(|p| matches!(p, Planned::Ramp(RampSetup { plan, .. })
            if plan.target.port() == 80 && plan.target.ip().is_loopback()))),
        (&["ramp", "http", "https://127.0.0.1/"], Error("URL \"https://127.0.0.1/\": TLS is not supported yet; use an http:// URL")),
        (&["ramp", "http", "ftp://127.0.0.1/"], Error("URL \"ftp://127.0.0.1/\": allowed http://HOST[:PORT]/PATH")),
        (&["ramp", "http", "127.0.0.1:8080"], Error("URL \"127.0.0.1:8080\": allowed http://HOST[:PORT]/PATH")),
        (&["ramp", "http", "http://127.0.0.1:0/"], Error("URL \"http://127.0.0.1:0/\": allowed a port 1..=65535")),
        (&["ramp", "http", "http://127.0.0.1:70000/"], Error("URL \"http://127.0.0.1:70000/\": allowed a port 1..=65535")),
        (&["ramp", "http", "http://a b/"], Error("URL \"http://a b/\": allowed http://HOST[:PORT]/PATH")),
        (&["ramp", "http", "http://127.0.0.1/", "--header", "NoColon"], Error("--header \"NoColon\": allowed NAME: VALUE")),
        (&["ramp", "http", "http://127.0.0.1/", "--header", "Content-Length: 3"],
            Error("--header \"Content-Length: 3\": allowed other headers: Content-Length is written by tpslab from the body (--body)")),
        (&["ramp", "http", "http://127.0.0.1/", "--method", "G ET"], Error("--method G ET: allowed an HTTP method")),
        (&["ramp", "http", "http://127.0.0.1/", "--body", "/nonexistent/b.json"], Error("--body /nonexistent/b.json: ")),
        (&["ramp", "http", "http://127.0.0.1/", "--body", "/dev/null"], Error("--body /dev/null: ")),
        (&["ramp", "http", "http://127.0.0.1/", "--body", big], Error("--body ")),
        (&["ramp", "http", "http://127.0.0.1/", "--payload-file", body], Error("--payload-file applies to ramp tcp|udp; ramp http sends --body FILE")),
        (&["ramp", "http", "http://127.0.0.1/", "--framing", "delim:x"], Error("--framing applies to ramp tcp")),
        (&["ramp", "http", "http://127.0.0.1/", "--seq-field", "0:2"], Error("--seq-field applies to ramp udp")),
        (&["ramp", "http", "http://127.0.0.1/", "--serialize"],
            Error("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out URL to use it")),
        (&["ramp", "http", "http://127.0.0.1/", "--users", "9..1"], Error("--users 9..1: the range is empty (FIRST above LAST)")),
    ]);
}
