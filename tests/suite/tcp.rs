//! `tpslab tcp` and `tpslab serve tcp` for real: S4 across the user-space delay line, and a
//! flow into the sink on loopback.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Host settings the lab must leave as they were (it changes none).
fn host_state() -> Vec<String> {
    let mut v: Vec<String> = [
        "/proc/sys/net/ipv4/tcp_rmem",
        "/proc/sys/net/ipv4/tcp_wmem",
        "/proc/sys/net/core/rmem_max",
        "/proc/sys/net/core/wmem_max",
    ]
    .iter()
    .map(|p| std::fs::read_to_string(p).unwrap_or_default())
    .collect();
    // Interfaces of this namespace (no tpsl-* may stay behind) and named namespaces.
    v.push(
        std::fs::read_to_string("/proc/net/dev")
            .unwrap_or_default()
            .lines()
            .map(|l| l.split(':').next().unwrap_or("").trim().to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    let mut ns: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    ns.retain(|n| !n.starts_with("tpslab-t"));
    ns.sort();
    v.push(ns.join(","));
    v
}

/// `tpslab serve tcp` on a free loopback port with `extra` flags, its first line read
/// (it is listening then); ended by its PID on drop, also when a test fails.
struct ServeTcp {
    child: std::process::Child,
    port: u16,
    first: String,
    rest: BufReader<std::process::ChildStdout>,
}

impl ServeTcp {
    fn start(extra: &[&str]) -> ServeTcp {
        // Port chosen by the kernel for a moment, then given to the server.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = common::tpslab()
            .args(["serve", "tcp", "--bind", &format!("127.0.0.1:{port}")])
            .args(["--duration", "20s"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut rest = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        rest.read_line(&mut first).unwrap();
        ServeTcp {
            child,
            port,
            first,
            rest,
        }
    }

    /// Ends it as Ctrl-C would (SIGTERM to its PID) and returns all it printed.
    fn stop(mut self) -> String {
        // SAFETY: a signal to the PID of our own child, not yet reaped.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) },
            0
        );
        let mut all = self.first.clone();
        std::io::Read::read_to_string(&mut self.rest, &mut all).unwrap();
        assert!(self.child.wait().unwrap().success());
        all
    }
}

impl Drop for ServeTcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn s4_window_limited_at_64k_and_80_mbit_with_the_bdp_buffers() {
    if !common::can_netns("s4_window_limited_at_64k_and_80_mbit_with_the_bdp_buffers") {
        return;
    }
    let _g = common::serial();
    // Changes host-wide state or checks it unchanged: under the suite's host lock,
    // taken after serial(): another test may hold serial() while its tpslab waits for it.
    let _host = common::host_lock();
    let before = host_state();
    let json = common::tmp("s4.json");
    // The delay line is a user-space process: on a busy 2-core host its RTT can stretch
    // past the 10 % this test allows (34 ms seen once in a full suite run). Up to 3 runs;
    // a host that spoils all of them gives a counted skip.
    let test = "s4_window_limited_at_64k_and_80_mbit_with_the_bdp_buffers";
    let Some(out) = common::retry(test, 3, || {
        let mut c = common::tpslab();
        c.args([
            "tcp",
            "--lab-rtt",
            "30ms",
            "--lab-rate",
            "622mbit",
            "--sndbuf",
            "64KiB",
            "--sink-rcvbuf",
            "64KiB",
            "--target-rate",
            "80mbit",
            "--duration",
            "3s",
            "--json",
        ])
        .arg(&json);
        let out = common::run(c);
        assert!(out.status.success());
        assert_eq!(
            host_state(),
            before,
            "host settings and interfaces unchanged"
        );
        let j = common::record(&json);
        let rtt_s = j["runs"][0]["analysis"]["rtt_mean_us"].as_f64().unwrap() / 1e6;
        if (rtt_s - 0.030).abs() >= 0.003 {
            return Err(format!("the lab's RTT was {rtt_s} s, asked 0.030 s"));
        }
        Ok(out)
    }) else {
        return;
    };
    common::assert_report_reproduces(&json, &out.stdout);
    let j = common::record(&json);
    assert_eq!(j["schema"], "tpslab.record/2");
    assert_eq!(j["kind"], "tcp");
    assert_eq!(j["plan"]["mode"], "lab");
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "before and after");
    let b = &runs[0]["analysis"];
    let held = b["held_by"].as_str().unwrap();
    assert!(held == "receive_window" || held == "send_buffer", "{held}");
    let thr = b["throughput_bps"].as_f64().unwrap();
    let rtt_s = b["rtt_mean_us"].as_f64().unwrap() / 1e6;
    // The RTT is the configured one (the delay line adds well under 10 %).
    assert!((rtt_s - 0.030).abs() < 0.003, "RTT {rtt_s}");
    // window / RTT, with the 64 KiB of S4 and with the window actually advertised.
    let nominal = 65536.0 * 8.0 / rtt_s;
    let advertised = b["window_ceiling_bps"].as_f64().unwrap();
    for (what, ceiling) in [
        ("64 KiB / RTT", nominal),
        ("advertised window / RTT", advertised),
    ] {
        let r = thr / ceiling;
        assert!(
            (0.8..=1.2).contains(&r),
            "{thr} bit/s is {r:.2} x {what} ({ceiling})"
        );
    }
    let a = &runs[1];
    // The bdp buffer for 80 Mbit/s over 30 ms is 655360 bytes: setsockopt asks for half,
    // the kernel doubles it.
    assert_eq!(a["flow"]["plan"]["sndbuf"], 327680);
    assert_eq!(a["flow"]["sndbuf_granted"], 655360);
    assert_eq!(a["lab"]["sink_rcvbuf"], 327680);
    assert_eq!(a["lab"]["sink_rcvbuf_granted"], 655360);
    let thr2 = a["analysis"]["throughput_bps"].as_f64().unwrap();
    assert!(thr2 >= 80e6, "after: {thr2} bit/s");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("target 80.0 Mbit/s: reached"), "{text}");
}

#[test]
fn flow_into_the_sink_on_loopback() {
    let _g = common::serial();
    let sink_json = common::tmp("loopback-sink.json");
    let sink = ServeTcp::start(&["--json", sink_json.to_str().unwrap()]);
    let (port, first) = (sink.port, sink.first.clone());
    assert!(
        first.contains(&format!("sink on 127.0.0.1:{port}")),
        "{first}"
    );
    let json = common::tmp("loopback-tcp.json");
    let mut cmd = common::tpslab();
    cmd.args([
        "tcp",
        &format!("127.0.0.1:{port}"),
        "--duration",
        "2s",
        "--skip",
        "500ms",
    ])
    .args(["--sndbuf", "256KiB", "--target-rate", "1mbit", "--json"])
    .arg(&json);
    let out = common::run(cmd);
    // The sender has closed; the sink reads what is still queued (at most its receive
    // buffer, a few MB: milliseconds on loopback) before it is stopped.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let sink_out = sink.stop();
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    // The sink's record: what it read, rendered again as it printed it.
    common::assert_report_reproduces(&sink_json, sink_out.as_bytes());
    let sj = common::record(&sink_json);
    assert_eq!(
        (sj["kind"].as_str(), sj["connections"].as_u64()),
        (Some("serve_tcp"), Some(1))
    );
    assert!(sj["interrupted"].as_bool().unwrap());
    let j = common::record(&json);
    assert_eq!(j["plan"]["mode"], "send");
    let r = &j["runs"][0];
    // 256 KiB doubled (as root SO_SNDBUFFORCE passes net.core.wmem_max).
    let granted = r["flow"]["sndbuf_granted"].as_u64().unwrap();
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(granted, 524288);
    } else {
        assert!(granted >= 262144, "{granted}");
    }
    let samples = r["flow"]["samples"].as_array().unwrap();
    assert!(
        samples.len() >= 15,
        "{} samples at 100 ms over 2 s",
        samples.len()
    );
    let acked = samples.last().unwrap()["bytes_acked"].as_u64().unwrap();
    let written = r["flow"]["bytes_written"].as_u64().unwrap();
    assert!(
        acked > 10_000_000 && acked <= written,
        "{acked} acked of {written}"
    );
    // Every byte acknowledged reached the sink's reads (it reads until the peer closes).
    let read = sj["bytes"].as_u64().unwrap();
    assert!(
        read >= acked && read <= written,
        "{read} read, {acked} acked, {written} written"
    );
    let thr = r["analysis"]["throughput_bps"].as_f64().unwrap();
    assert!(thr > 1e6, "{thr}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("meets the 1.0 Mbit/s target"), "{text}");
    assert!(
        !text.contains("Recommendation"),
        "no advice when the target is met"
    );
}

#[test]
fn reverse_flow_from_the_source_on_loopback() {
    let _g = common::serial();
    let src = ServeTcp::start(&["--mode", "source"]);
    let (port, first) = (src.port, src.first.clone());
    assert!(first.contains("source on"), "{first}");
    let json = common::tmp("reverse-tcp.json");
    let mut cmd = common::tpslab();
    cmd.args([
        "tcp",
        &format!("127.0.0.1:{port}"),
        "--reverse",
        "--rcvbuf",
        "64KiB",
    ])
    .args(["--duration", "2s", "--skip", "500ms", "--json"])
    .arg(&json);
    let out = common::run(cmd);
    drop(src);
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    let r = &common::record(&json)["runs"][0];
    assert_eq!(r["flow"]["bytes_written"], 0);
    assert!(r["flow"]["bytes_read"].as_u64().unwrap() > 10_000_000);
    let an = &r["receiver_analysis"];
    assert!(an["throughput_bps"].as_f64().unwrap() > 1e6, "{an}");
    // 64 KiB asked, doubled; the advertised window is below the granted buffer.
    let w = an["rcv_wnd_mean_bytes"].as_f64().unwrap();
    assert!(w > 0.0 && w <= 131072.0, "{w}");
    // The verdict follows the analysis: window-bound or not, or withheld without an RTT.
    let v = r["verdict"].as_str().unwrap();
    match an["window_bound"].as_bool() {
        Some(true) => assert!(v.starts_with("held by this side's receive window"), "{v}"),
        Some(false) => assert!(
            v.starts_with("not held by this side's receive window"),
            "{v}"
        ),
        // Linux negotiates TCP timestamps on loopback: the RTT is measured.
        None => panic!("no verdict with timestamps on: {v} {an}"),
    }
}

#[test]
fn watch_another_process_flow_by_pid() {
    let _g = common::serial();
    let sink = ServeTcp::start(&["--rcvbuf", "64KiB"]);
    let target = format!("127.0.0.1:{}", sink.port);
    let mut sender = common::tpslab()
        .args(["tcp", &target, "--duration", "6s"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let json = common::tmp("watch-tcp.json");
    let mut cmd = common::tpslab();
    cmd.args([
        "tcp",
        "--watch-pid",
        &sender.id().to_string(),
        "--duration",
        "2s",
        "--skip",
        "500ms",
    ])
    .arg("--json")
    .arg(&json);
    let out = common::run(cmd);
    // Ours: end both by PID.
    let _ = sender.kill();
    let _ = sender.wait();
    drop(sink);
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    let j = common::record(&json);
    let w = j["watched"].as_array().unwrap();
    assert_eq!(w.len(), 1, "the sender has one flow: {j}");
    assert_eq!(w[0]["direction"], "sending");
    assert_eq!(w[0]["flow"]["remote"], target.as_str());
    assert!(w[0]["analysis"]["throughput_bps"].as_f64().unwrap() > 1e6);
    assert!(w[0]["flow"]["samples"].as_array().unwrap().len() >= 15);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("VERDICT 127.0.0.1:"), "{text}");
    // Its threads were sampled; a flow its application did not hold gets no such verdict.
    assert!(j["thread_waits"]["ticks"].as_u64().unwrap() >= 15);
    assert_eq!(
        text.contains("held by their own application"),
        w[0]["analysis"]["held_by"] == "application",
        "{text}"
    );
}

#[test]
fn a_relay_waiting_on_its_upstream_is_named_s4() {
    let _g = common::serial();
    let sink = ServeTcp::start(&[]);
    // S4's pipeline in small: an upstream that writes 64 KiB every 50 ms, and a relay that
    // polls it and writes what it reads to the sink: its flow to the sink is held by
    // the relay, which waits in poll for its upstream.
    let spawn = |code: String| {
        let mut c = std::process::Command::new("python3")
            .args(["-c", &code])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        (c, line.trim().to_string())
    };
    let (mut up, up_port) = spawn(
        "import socket, time\n\
         l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n\
         print(l.getsockname()[1], flush=True)\n\
         c, _ = l.accept(); end = time.time() + 8\n\
         while time.time() < end:\n    c.sendall(b'x' * 65536); time.sleep(0.05)\n"
            .into(),
    );
    let (mut relay, ready) = spawn(format!(
        "import socket, select\n\
         up = socket.create_connection(('127.0.0.1', {up_port}))\n\
         down = socket.create_connection(('127.0.0.1', {}))\n\
         print('ready', flush=True)\n\
         p = select.poll(); p.register(up, select.POLLIN)\n\
         while True:\n    p.poll(); d = up.recv(65536)\n    if not d: break\n    down.sendall(d)\n",
        sink.port
    ));
    assert_eq!(ready, "ready");
    let json = common::tmp("watch-relay.json");
    let mut cmd = common::tpslab();
    cmd.args(["tcp", "--watch-pid", &relay.id().to_string()])
        .args(["--duration", "2s", "--skip", "300ms", "--json"])
        .arg(&json);
    let out = common::run(cmd);
    // Ours: end them by PID.
    for c in [&mut relay, &mut up] {
        let _ = c.kill();
        let _ = c.wait();
    }
    drop(sink);
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    let j = common::record(&json);
    let tw = &j["thread_waits"];
    assert!(tw["ticks"].as_u64().unwrap() >= 15, "{tw}");
    let text = String::from_utf8_lossy(&out.stdout);
    let sending = j["watched"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["direction"] == "sending")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(sending["analysis"]["held_by"], "application", "{text}");
    assert!(
        text.contains("held by their own application, whose threads spent")
            && text.contains(
                "waiting for the network (in poll): it waits on another peer or its input"
            ),
        "{text}"
    );
}

/// In a terminal of 80 columns (a pseudo-terminal: script(1), COLUMNS=80) a flow's
/// lines (its header, the per-interval timeline, the analysis and its sources) fit it as
/// every report does; in a pipe each line is whole (issue 60).
#[test]
fn in_a_terminal_of_80_columns_a_flows_lines_fit_it() {
    let test = "in_a_terminal_of_80_columns_a_flows_lines_fit_it";
    if !common::need(test, "/usr/bin/script") {
        return;
    }
    let _g = common::serial();
    let sink = ServeTcp::start(&[]);
    let target = format!("127.0.0.1:{}", sink.port);
    let args = ["tcp", &target, "--duration", "1s", "--skip", "200ms"];
    let width = |text: &str| {
        text.lines()
            .map(|l| tpslab_report::term::fit::cells(l.trim_end_matches('\r')))
            .max()
            .unwrap_or(0)
    };
    let mut c = common::tpslab();
    c.args(args);
    let piped = String::from_utf8(common::run(c).stdout).unwrap();
    assert!(width(&piped) > 80, "{piped}");
    let mut c = std::process::Command::new("script");
    c.env("XDG_DATA_HOME", common::history_home());
    common::free_of_host_lock(&mut c);
    let line = format!("{} {}", env!("CARGO_BIN_EXE_tpslab"), args.join(" "));
    c.args(["-qec", &line, "/dev/null"]).env("COLUMNS", "80");
    let out = common::run(c);
    sink.stop();
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    // The per-interval timeline and the sources line are there, wrapped.
    assert!(
        shown.contains("Mbit/s") && shown.contains("sources:"),
        "{shown}"
    );
    assert!(width(&shown) <= 80, "{shown}");
}
