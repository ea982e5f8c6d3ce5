//! Prometheus: `--metrics-listen` scraped by Debian's real `prometheus` (a series read back
//! through its HTTP API), a long watch as an exporter (descriptors and memory stay put
//! under hundreds of scrapes), and `--metrics-file` read by node_exporter's textfile
//! collector.

mod common;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on loopback (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` from 127.0.0.1:`port` (HTTP/1.0): the status line and body, or None when
/// nothing answers.
fn get(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

/// Waits until `tpslab` has said where it serves metrics on stderr (logged to `log`).
fn metrics_port(log: &std::path::Path, child: &mut Child) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(rest) = text.split("metrics at http://127.0.0.1:").nth(1) {
            return rest.split('/').next().unwrap().parse().unwrap();
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "tpslab exited early:\n{text}"
        );
        assert!(
            Instant::now() < deadline,
            "no metrics address said:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `tpslab watch --port PORT --metrics-listen 127.0.0.1:0` for `secs`, stderr in a log.
fn watch(tag: &str, port: u16, secs: u32) -> (common::Kill, u16) {
    let log = common::tmp(&format!("{tag}.log"));
    let mut c = common::tpslab();
    c.args([
        "watch",
        "--port",
        &port.to_string(),
        "--duration",
        &format!("{secs}s"),
        "--interval",
        "10ms",
        "--no-drop-reasons",
        "--no-history",
        "--metrics-listen",
        "127.0.0.1:0",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut child = c.spawn().unwrap();
    let p = metrics_port(&log, &mut child);
    (common::Kill(child), p)
}

/// Sends `n` datagrams to a UDP socket of ours on `port` (nobody reads it: they queue).
fn udp_traffic(port: u16, n: usize) {
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..n {
        let _ = tx.send_to(&[0u8; 64], ("127.0.0.1", port));
    }
}

#[test]
fn prometheus_scrapes_a_watch_and_answers_for_its_series() {
    let t = "prometheus_scrapes_a_watch_and_answers_for_its_series";
    if !common::need(t, "/usr/bin/prometheus") {
        return;
    }
    // The watched socket: ours, never read, so its rx_queue holds what we send.
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let (_watch, mport) = watch("prom-watch", port, 40);
    udp_traffic(port, 50);
    let dir = common::tmp("prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: tpslab\n    static_configs:\n      - targets: ['127.0.0.1:{mport}']\n"
        ),
    )
    .unwrap();
    let web = free_port();
    let plog = dir.join("prometheus.log");
    let prom = common::Kill(
        Command::new("/usr/bin/prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&plog).unwrap())
            .spawn()
            .unwrap(),
    );
    // Prometheus starts, scrapes every second; its query API answers with what it holds.
    let deadline = Instant::now() + Duration::from_secs(30);
    let want = "tpslab_socket_rx_queue_bytes";
    let answer = loop {
        if let Some((status, body)) = get(web, &format!("/api/v1/query?query={want}")) {
            if status.contains("200") && body.contains(&format!("\"__name__\":\"{want}\"")) {
                break body;
            }
        }
        assert!(
            Instant::now() < deadline,
            "prometheus never returned {want}; its log:\n{}",
            std::fs::read_to_string(&plog).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    drop(prom);
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let r = &v["data"]["result"][0];
    assert_eq!(r["metric"]["job"], "tpslab", "{answer}");
    // 50 queued datagrams of 64 bytes: their truesize, far above 50 * 64.
    let bytes: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
    assert!(bytes >= 50.0 * 64.0, "rx_queue {bytes} bytes: {answer}");
    drop(rx);
}

/// Descriptors and resident memory of `pid`.
fn fds_and_rss_kib(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    (fds, rss)
}

#[test]
fn a_watch_exporter_keeps_its_descriptors_and_memory_under_many_scrapes() {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let (w, mport) = watch("long-watch", port, 60);
    let pid = w.0.id();
    let mut last = String::new();
    let mut scrape = |n: usize| {
        for _ in 0..n {
            let (status, body) = get(mport, "/metrics").expect("an answer");
            assert!(status.contains("200"), "{status}");
            last = body;
        }
    };
    // Counted once the last scrape's connection is closed on tpslab's side too (tiny_http
    // answers on a thread of its own) and the observer has opened what it reads.
    let settled = || {
        std::thread::sleep(Duration::from_millis(500));
        fds_and_rss_kib(pid)
    };
    scrape(100);
    let (fds0, rss0) = settled();
    scrape(600);
    let (fds1, rss1) = settled();
    // Also what an unknown path gets, and that the body is a whole OpenMetrics text.
    let (status, _) = get(mport, "/").unwrap();
    assert!(status.contains("404"), "{status}");
    assert!(last.ends_with("# EOF\n"), "{last}");
    assert!(
        last.contains("tpslab_exporter_info{command=\"watch\""),
        "{last}"
    );
    assert!(last.contains("tpslab_observer_samples_total "), "{last}");
    // Every connection was closed: not one descriptor more after 600 more scrapes.
    assert!(fds1 <= fds0, "descriptors grew from {fds0} to {fds1}");
    // The observer's samples grow until thinned; scrapes themselves must not add: a
    // bound far below what 600 retained bodies (~4 KiB each) would cost.
    assert!(
        rss1 <= rss0 + 2048,
        "resident memory grew from {rss0} KiB to {rss1} KiB over 600 scrapes"
    );
    drop(rx);
}

#[test]
fn node_exporter_reads_a_metrics_file() {
    let t = "node_exporter_reads_a_metrics_file";
    if !common::need(t, "/usr/bin/prometheus-node-exporter") {
        return;
    }
    let dir = common::tmp("textfile");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tpslab.prom");
    let _g = common::serial();
    let out = common::run({
        let mut c = common::tpslab();
        c.args([
            "run",
            "udp",
            "--bind",
            "127.0.0.1:0",
            "--rate",
            "5000",
            "--duration",
            "400ms",
            "--warmup",
            "100ms",
            "--size",
            "64",
            "--no-drop-reasons",
            "--no-history",
            "--metrics-file",
        ])
        .arg(&file);
        c
    });
    assert!(out.status.success());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("# TYPE tpslab_generator_sent_datagrams_total counter"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    let web = free_port();
    let nlog = common::tmp("node-exporter.log");
    let _ne = common::Kill(
        Command::new("/usr/bin/prometheus-node-exporter")
            .arg("--collector.disable-defaults")
            .arg("--collector.textfile")
            .arg(format!("--collector.textfile.directory={}", dir.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&nlog).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let body = loop {
        if let Some((s, b)) = get(web, "/metrics") {
            if s.contains("200") {
                break b;
            }
        }
        assert!(
            Instant::now() < deadline,
            "node_exporter did not answer: {}",
            std::fs::read_to_string(&nlog).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // The collector parsed the file (an error sets node_textfile_scrape_error 1) and
    // serves tpslab's series as they are in the record.
    assert!(body.contains("node_textfile_scrape_error 0"), "{body}");
    let rec_sent = {
        let line = text
            .lines()
            .find(|l| l.starts_with("tpslab_generator_sent_datagrams_total "))
            .unwrap();
        line.rsplit(' ').next().unwrap().to_string()
    };
    assert!(
        body.lines()
            .any(|l| l == format!("tpslab_generator_sent_datagrams_total {rec_sent}")),
        "{body}"
    );
    assert!(
        body.contains("tpslab_ledger_datagrams{layer=\"delivered\",path=\"request\"}"),
        "{body}"
    );
    assert!(
        body.contains("tpslab_latency_seconds_bucket{from=\"intended\",le=\"+Inf\"}"),
        "{body}"
    );
}

/// Scrapes `port` until a line starting with `prefix` appears (or 15 s pass); that line.
fn scrape_for(port: u16, prefix: &str, child: &mut Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some((_, body)) = get(port, "/metrics") {
            if let Some(l) = body.lines().find(|l| l.starts_with(prefix)) {
                return l.to_string();
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "tpslab exited before {prefix}"
        );
        assert!(Instant::now() < deadline, "no {prefix} in the scrapes");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serve_and_ramp_serve_their_figures_while_they_run() {
    // serve udp: what its threads read, counted as it goes.
    let log = common::tmp("serve-metrics.log");
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    drop(rx);
    let mut c = common::tpslab();
    c.args([
        "serve",
        "udp",
        "--bind",
        &format!("127.0.0.1:{port}"),
        "--duration",
        "20s",
    ])
    .args(["--no-history", "--metrics-listen", "127.0.0.1:0"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut serve = common::Kill(c.spawn().unwrap());
    let mport = metrics_port(&log, &mut serve.0);
    // The address is said before the server binds; its observer's first sample follows
    // the bind: traffic sent before that would be missed (or refused).
    scrape_for(mport, "tpslab_observer_samples_total", &mut serve.0);
    udp_traffic(port, 300);
    // Every datagram is read or dropped at the socket (300 back to back can overflow the
    // default buffer when the CPUs are busy): the two counters add up to what was sent.
    let deadline = Instant::now() + Duration::from_secs(15);
    let value = |body: &str, name: &str| -> u64 {
        body.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    loop {
        let (_, body) = get(mport, "/metrics").expect("an answer");
        let read = value(&body, "tpslab_server_read_datagrams_total ");
        let dropped = value(&body, "tpslab_socket_drops_total ");
        if read + dropped == 300 {
            assert!(read > 0, "{body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "read {read} + dropped {dropped} != 300 sent:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(serve);
    // ramp: each step's TPS as soon as it is measured, before the ramp ends.
    let log = common::tmp("ramp-metrics.log");
    let mut c = common::tpslab();
    c.args([
        "ramp",
        "tcp",
        "--users",
        "1..2",
        "--step",
        "+1",
        "--step-duration",
        "1s",
    ])
    .args([
        "--warmup",
        "200ms",
        "--server-serial",
        "1ms",
        "--no-history",
    ])
    .args(["--metrics-listen", "127.0.0.1:0"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut ramp = common::Kill(c.spawn().unwrap());
    let mport = metrics_port(&log, &mut ramp.0);
    let line = scrape_for(mport, "tpslab_ramp_tps{users=\"1\"}", &mut ramp.0);
    let tps: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    // One user, 1 ms of waiting per request: at most 1000 per second.
    assert!(tps > 100.0 && tps <= 1000.0, "{line}");
}
