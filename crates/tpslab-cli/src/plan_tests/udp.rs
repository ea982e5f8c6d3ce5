//! The table rows of UDP loads, runs, the UDP server and watch's plan, and output files.

use super::{accepted, made, payload_files, refused, Made, SIZE_FORMS};

#[test]
fn udp_loads_and_runs_refuse_what_they_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    payload_files(dir.path());
    let seq = "load udp 127.0.0.1:9 --payload-file {dir}/payload.bin --seq-field";
    let (seq_9, seq_28) = (format!("{seq} 0:9"), format!("{seq} 28:2"));
    let seq_max = format!("{seq} 18446744073709551615:2");
    let rcvbuf = format!("tpslab: error: --rcvbuf 2x: {SIZE_FORMS}");
    refused(
        dir.path(),
        &[
            ("load udp 127.0.0.1:9 --rate 0", &["--rate 0"]),
            ("load udp 127.0.0.1:9 --size 70000", &["--size 70000"]),
            ("load udp 127.0.0.1:9 --size 10", &["--size 10"]),
            ("run udp --mode bogus", &["bogus"]),
            (
                "serve udp --reuseport-steer bpf",
                &["--reuseport-steer", "bpf", "allowed hash, cpu, random"],
            ),
            ("load udp 127.0.0.1:9 --seq-field 0:2", &["--seq-field", "--payload-file"]),
            (&seq_9, &["0:9"]),
            (&seq_28, &["28:2", "29"]),
            (&seq_max, &["18446744073709551615:2"]),
            ("run udp --cpus 99 --duration 100ms", &["--cpus \"99\""]),
            ("run udp --sched fifo:0 --duration 100ms", &["fifo:0"]),
            ("load udp 127.0.0.1:9 --burst 0", &["--burst 0"]),
            (
                "load udp 127.0.0.1:9 --burst 0 --burst-interval 50ms",
                &["--burst 0", "allowed 1..="],
            ),
            (
                "load udp 127.0.0.1:9 --pacing-slack 5ms",
                &["--pacing-slack 5ms: allowed 0s..=2ms"],
            ),
            (
                "load udp 127.0.0.1:9 --rate max --pacing-slack 1ms",
                &["--pacing-slack does not apply"],
            ),
            ("load udp 127.0.0.1:9 --interval 0ms", &["--interval"]),
            (
                "load udp 127.0.0.1:9 --rate 5000 --burst 100 --burst-interval 10ms",
                &["--rate 5000", "10000 pps"],
            ),
            (
                "load udp 127.0.0.1:9 --burst 100000000 --burst-interval 1ms",
                &["--burst 100000000"],
            ),
            (
                "load udp 127.0.0.1:9 --payload-file /dev/zero",
                &["/dev/zero", "a character device; allowed a regular file"],
            ),
            (
                "load udp 127.0.0.1:9 --payload-file /dev/null",
                &["/dev/null", "a character device; allowed a regular file"],
            ),
            (
                "load udp 127.0.0.1:9 --payload-file {dir}/big-payload.bin",
                &["65507", "70000 bytes; allowed up to 65507 bytes"],
            ),
            ("load udp 127.0.0.1:0", &["port 0"]),
            (
                "load udp 127.0.0.1:9 --fail-on loss",
                &[
                    "--fail-on loss: no threshold; write it in quotes, --fail-on 'loss>1%': unquoted, the shell reads > as a redirection",
                    "writes a file named after the threshold (1%)",
                ],
            ),
            (
                "load udp 127.0.0.1:9 --fail-on 'loss>1'",
                &["loss>1", "--fail-on 'loss>1': allowed 'loss>PCT%' (e.g. --fail-on 'loss>0.1%')"],
            ),
            (
                "serve udp --busy-poll 2s",
                &["--busy-poll 2000000", "0..=1000000 us"],
            ),
            (
                "serve udp --busy-poll 1500ns",
                &["--busy-poll 1us 500ns", "whole microseconds"],
            ),
            ("load udp 127.0.0.1:9 --threads 0", &["--threads 0", "1..=256"]),
            ("run udp --load-threads 300", &["--load-threads 300", "1..=256"]),
            ("serve udp --work 200000", &["--work"]),
            ("serve udp --work 20us --work-ns 20000", &["--work"]),
            ("serve udp --work 2s", &["--work 2s", "0s..=1s"]),
            (
                "load udp 127.0.0.1:9 --rate '\u{1b}[2J\u{1b}[31mx'",
                &["--rate", "\\u{1b}[2J"],
            ),
            ("serve udp --rcvbuf 2x", &[&rcvbuf]),
            (
                "load udp 127.0.0.1:9 --rate 10m",
                &["tpslab: error: --rate 10m: allowed a rate above 0 up to 100000000 pps (10000, 10k, 1.5M, 100kpps), or max"],
            ),
        ],
    );
    // clap's own error echoes the bad value, never as raw control bytes.
    let e = made(dir.path(), "run udp --mode '\u{1b}[2Jx\u{7}'").unwrap_err();
    assert!(
        e.contains("--mode") && !e.contains(['\u{1b}', '\u{7}']),
        "{e:?}"
    );
}

#[test]
fn udp_plans_carry_what_the_flags_say() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The same mean rate given both ways is fine: bursts of 100 every 10 ms.
    let line = "load udp 127.0.0.1:9 --rate 10000 --burst 100 --burst-interval 10ms --duration 100ms --warmup 0s --no-replies";
    let Made::Udp(p) = accepted(d, line) else {
        panic!("a UDP run")
    };
    assert_eq!((p.load.rate_pps, p.load.burst), (10_000.0, 100));
    assert!(!p.load.expect_replies && p.server.is_none());
    assert_eq!(p.load.target.to_string(), "127.0.0.1:9");
    // Our server with --no-replies is a sink; the generator's threads are --load-threads.
    let line = "run udp --no-replies --load-threads 2 --threads 3";
    let Made::Udp(p) = accepted(d, line) else {
        panic!("a UDP run")
    };
    let srv = p.server.unwrap();
    assert_eq!(srv.mode, tpslab_plan::udp::Mode::Sink);
    assert_eq!(
        (srv.threads, p.load.threads, p.load.target),
        (3, 2, srv.bind)
    );
    let Made::Serve(s) = accepted(d, "serve udp --duration 2s") else {
        panic!("a server")
    };
    assert_eq!(s.duration, Some(std::time::Duration::from_secs(2)));
    let Made::Watch(w) = accepted(d, "watch --port 53") else {
        panic!("a watch")
    };
    assert_eq!((w.pid, w.port, w.duration.as_secs()), (None, Some(53), 10));
}

#[test]
fn output_files_are_checked_by_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let gone = &["does not exist"][..];
    refused(
        dir.path(),
        &[
            (
                "load udp 127.0.0.1:9 --json /nonexistent-tpslab-dir/out.json",
                gone,
            ),
            ("run udp --json /nonexistent-tpslab-dir/out.json", gone),
            (
                "watch --port 9 --json /nonexistent-tpslab-dir/out.json",
                gone,
            ),
            ("diagnose --json /nonexistent-tpslab-dir/out.json", gone),
            ("serve udp --json /nonexistent-tpslab-dir/out.json", gone),
            ("run udp --html /nonexistent-tpslab-dir/r.html", gone),
            ("diagnose --html /nonexistent-tpslab-dir/r.html", gone),
            (
                "run udp --metrics-file /nonexistent-tpslab-dir/m.prom",
                gone,
            ),
            (
                "diagnose --metrics-file /nonexistent-tpslab-dir/m.prom",
                gone,
            ),
        ],
    );
}
