//! The table rows of watch, diagnose and sweep.

use super::{accepted, refused, Made};
use tpslab_run::diagnose::Server;

#[test]
fn watch_and_diagnose_refuse_what_they_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    refused(
        d,
        &[
            ("watch --duration 100ms", &["--pid", "--port"]),
            ("watch --duration 1s", &["--pid PID or --port PORT"]),
            (
                "watch --port 53 --duration 400days",
                &["--duration", "allowed 1ms..="],
            ),
            (
                "watch --port 9 --duration 5",
                &["tpslab: error: --duration 5: allowed a duration with a unit: ns, us, ms, s, m (minutes), h, d"],
            ),
            ("diagnose udp", &["--server-cmd"]),
            ("diagnose udp --server-cmd 'python3 srv.py'", &["{port}"]),
            ("diagnose udp 127.0.0.1:9 --server-cmd 'x {port}'", &["not both"]),
            ("diagnose udp 127.0.0.1:9 --verify --no-verify", &["--no-verify"]),
            (
                "diagnose --pid 42",
                &[
                    "unexpected argument '--pid'",
                    "tip: --pid is a flag of 'tpslab diagnose udp', not of 'tpslab diagnose': write it after 'udp'",
                ],
            ),
        ],
    );
    let Made::Diagnose(p) = accepted(d, "diagnose --no-verify") else {
        panic!("a diagnosis")
    };
    assert_eq!((p.server, p.verify), (Server::BuiltIn, false));
    let line = "diagnose udp --server-cmd 'srv {port}' --verify --rate 20k";
    let Made::Diagnose(p) = accepted(d, line) else {
        panic!("a diagnosis")
    };
    assert_eq!(p.server, Server::Started("srv {port}".into()));
    assert_eq!(p.scenario, "UDP server started by tpslab: srv {port}");
    assert!(p.verify && p.first.server.is_none());
    assert_eq!(p.first.load.rate_pps, 20_000.0);
}

#[test]
fn sweeps_refuse_bad_factors_and_cells_before_any_folder() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let none = "--out /nonexistent/never-created";
    let cell = "sweep --design factorial --out {dir}/cell --factor";
    let rows = [
        format!("sweep --factor bogus=1,2 {none}"),
        format!("sweep --factor rcvbuf=212992 {none}"),
        format!("sweep --factor kernel.panic=0,1 {none}"),
        format!("sweep --factor rate=1000,abc {none}"),
        format!("sweep --factor rate=1000,2000 {none} --fail-on target"),
        "sweep --factor net.ipv4.udp_rmem_min=4096,020000 --out {dir}/octal".into(),
        format!("{cell} busy_poll=off,4294967295"),
        format!("sweep --factor steer=hash,bogus {none}"),
        // Each level is fine alone; the cell that combines them is not.
        format!("{cell} rate=1000,max --factor burst=1,10"),
    ];
    let texts: [&[&str]; 9] = [
        &["bogus"],
        &["rcvbuf=212992"],
        &["kernel.panic"],
        &["--factor rate: level abc", "pps"],
        &["target"],
        &["020000", "octal (8192)"],
        &["--factor busy_poll: level 4294967295", "0..=1000000 us"],
        &["--factor steer: level \"bogus\": allowed hash, cpu, random"],
        &["burst does not apply", "rate=max", "burst=10"],
    ];
    let rows: Vec<(&str, &[&str])> = rows.iter().map(String::as_str).zip(texts).collect();
    refused(d, &rows);
    for f in ["octal", "cell"] {
        assert!(!d.join(f).exists(), "the output folder was created");
    }
    let line = "sweep --factor rcvbuf=212992,4MiB --repeat 2 --out {dir}/s";
    let Made::Sweep(Some(p)) = accepted(d, line) else {
        panic!("a new sweep")
    };
    assert_eq!((p.factors.len(), p.repeat), (1, 2));
    let resume = accepted(d, "sweep --resume --out {dir}/s");
    assert!(matches!(resume, Made::Sweep(None)), "{resume:?}");
}
