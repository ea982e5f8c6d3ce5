//! Prometheus: `--metrics-listen` scraped by Debian's real `prometheus` (a series read back
//! through its HTTP API), a long watch as an exporter (descriptors and memory stay put
//! under hundreds of scrapes, 2000 slow clients and 1 MiB header lines), a wildcard
//! address warned about (`--metrics-file` read by node_exporter's textfile collector, and
//! promtool on both outputs: tests/suite/exposition.rs).

use crate::common;

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

/// GET `path` from 127.0.0.1:`port` (HTTP/1.0, OpenMetrics asked for): the status line
/// and body, or None when nothing answers.
fn get(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    // OpenMetrics, as Prometheus asks for it (its `# EOF` shows a body is whole).
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: application/openmetrics-text\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

/// Sends `request` as is to 127.0.0.1:`port` and reads until the server closes (5 s at
/// most): the status line and the rest, or None when nothing answers.
fn raw(port: u16, request: &str) -> Option<(String, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.to_string(), body.to_string()))
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
    // Counted once the last scrape's connection is closed on tpslab's side too and the
    // observer has opened what it reads.
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
    // HEAD: the headers of a scrape, no body; another method: 405.
    let (head, body) = raw(
        mport,
        "HEAD /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\r\n",
    )
    .unwrap();
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(
        head.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(body.is_empty(), "{body}");
    let (head, _) = raw(mport, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 405 "), "{head}");
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

/// Threads of `pid` (/proc/PID/status).
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// The exporter's cap on open connections (src/metrics/http.rs `MAX_CONNS`).
const MAX_CONNS: usize = 64;

/// Raises this test process's soft RLIMIT_NOFILE to `n` (within the hard limit) when it
/// is lower: the slow clients are held open here.
fn raise_nofile(n: u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit read and write the struct we own, nothing else.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        if r.rlim_cur < n {
            r.rlim_cur = n.min(r.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
        }
    }
}

/// Opens `n` connections to the exporter that each send half a request line and then
/// stay silent (a slowloris); they are held in `held`. Samples the exporter's threads
/// and descriptors every 100 connections and at the end: the largest seen.
fn slow_clients(
    port: u16,
    pid: u32,
    n: usize,
    held: &mut Vec<std::net::TcpStream>,
) -> (usize, usize) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (mut max_threads, mut max_fds) = (0, 0);
    for i in 0..n {
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .expect("the listener takes connections");
        s.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ").unwrap();
        held.push(s);
        if i % 100 == 99 {
            max_threads = max_threads.max(threads(pid));
            max_fds = max_fds.max(fds_and_rss_kib(pid).0);
        }
    }
    // Once more after the last one is accepted (accepts are not instant).
    std::thread::sleep(Duration::from_millis(50));
    (
        max_threads.max(threads(pid)),
        max_fds.max(fds_and_rss_kib(pid).0),
    )
}

#[test]
fn slow_clients_neither_exhaust_the_exporter_nor_lock_out_a_scrape() {
    let t = "slow_clients_neither_exhaust_the_exporter_nor_lock_out_a_scrape";
    raise_nofile(8192);
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let (w, mport) = watch("slow-watch", port, 60);
    let pid = w.0.id();
    let (status, _) = get(mport, "/metrics").expect("a first scrape");
    assert!(status.contains("200"), "{status}");
    std::thread::sleep(Duration::from_millis(300));
    let (threads0, (fds0, _)) = (threads(pid), fds_and_rss_kib(pid));
    // 2000 slow clients: one thread and a fixed number of connections serve them all
    // (one thread and two descriptors per connection before, without a cap).
    let mut held = Vec::with_capacity(2100);
    let (max_threads, max_fds) = slow_clients(mport, pid, 2000, &mut held);
    assert!(
        max_threads <= threads0,
        "threads grew from {threads0} to {max_threads} under 2000 slow clients"
    );
    let bound = fds0 + MAX_CONNS + 16;
    assert!(
        max_fds <= bound,
        "descriptors grew from {fds0} to {max_fds} (bound {bound}) under 2000 slow clients"
    );
    // With the connections all taken by slow clients, a scrape is answered at once: the
    // oldest slow one makes room. Timed: a loaded 2-CPU host can delay any answer, so
    // up to 3 attempts, each with the connections filled again just before.
    let spoiled = common::retry(t, 3, || {
        let (_, before) = slow_clients(mport, pid, MAX_CONNS + 16, &mut held);
        // The test's own check: the exporter does hold a full set of slow clients now.
        assert!(
            before >= fds0 + MAX_CONNS,
            "{before} descriptors, {fds0} at rest"
        );
        let t0 = Instant::now();
        let answer = get(mport, "/metrics");
        let took = t0.elapsed();
        let (status, body) = answer.ok_or("no answer to the scrape")?;
        assert!(status.contains("200"), "{status}");
        assert!(body.ends_with("# EOF\n"), "{body}");
        if took > Duration::from_secs(1) {
            return Err(format!(
                "the scrape took {took:?} (cpu pressure {:?} %)",
                common::cpu_pressure_pct()
            ));
        }
        Ok(())
    })
    .is_none();
    if spoiled {
        return;
    }
    assert!(threads(pid) <= threads0);
    // Each connection is closed 5 s after its accept at the latest: the newest slow
    // client sees its connection closed (EOF or reset) in time, not held forever.
    let mut newest = held.pop().unwrap();
    newest
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    let t0 = Instant::now();
    let mut sink = [0u8; 64];
    let r = newest.read(&mut sink);
    assert!(
        matches!(r, Ok(0))
            || r.as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "a slow client's connection was not closed within 8 s: {r:?} after {:?}",
        t0.elapsed()
    );
    assert!(t0.elapsed() < Duration::from_secs(7), "{:?}", t0.elapsed());
    // And with every slow client timed out, the exporter is back to where it started.
    std::thread::sleep(Duration::from_millis(300));
    let (fds1, _) = fds_and_rss_kib(pid);
    assert!(
        fds1 <= fds0,
        "descriptors {fds1} after the slow clients, {fds0} before"
    );
    drop(held);
    drop(rx);
}

#[test]
fn huge_header_lines_get_431_and_cost_no_memory() {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let (w, mport) = watch("huge-watch", port, 60);
    let pid = w.0.id();
    let (status, _) = get(mport, "/metrics").expect("a first scrape");
    assert!(status.contains("200"), "{status}");
    std::thread::sleep(Duration::from_millis(300));
    let (_, rss0) = fds_and_rss_kib(pid);
    // 8 clients at once, each a header line of 1 MiB that never ends: buffered whole,
    // they would cost 8 MiB or more; the exporter reads 8 KiB of each and answers 431.
    let clients: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", mport)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut req = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
                req.resize(req.len() + (1 << 20), b'a');
                // The exporter may stop reading (and close) before the last byte.
                let _ = s.write_all(&req);
                let mut answer = Vec::new();
                let r = s.read_to_end(&mut answer);
                (
                    r.map_err(|e| e.to_string()),
                    String::from_utf8_lossy(&answer).into_owned(),
                )
            })
        })
        .collect();
    for c in clients {
        let (r, answer) = c.join().unwrap();
        // Answered 431, or closed without an answer; never left waiting for the line.
        assert!(
            answer.starts_with("HTTP/1.1 431 ") || (answer.is_empty() && r.is_ok()),
            "{r:?}: {answer:?}"
        );
    }
    let (status, _) = get(mport, "/metrics").expect("a scrape after them");
    assert!(status.contains("200"), "{status}");
    let (_, rss1) = fds_and_rss_kib(pid);
    assert!(
        rss1 <= rss0 + 4096,
        "resident memory grew from {rss0} KiB to {rss1} KiB over 8 header lines of 1 MiB"
    );
    drop(rx);
}

#[test]
fn a_wildcard_address_is_warned_about_and_the_help_says_unauthenticated() {
    let help = common::run({
        let mut c = common::tpslab();
        c.args(["watch", "--help"]);
        c
    });
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("Plain HTTP without") && text.contains("authentication"),
        "{text}"
    );
    let t = "a_wildcard_address_is_warned_about_and_the_help_says_unauthenticated";
    // 0.0.0.0 in a namespace of the test's own: nothing is exposed on the host.
    if !common::can_netns(t) {
        return;
    }
    let ns = common::NetNs::new();
    let warned = |listen: &str| -> Vec<String> {
        let mut c = ns.tpslab();
        c.args([
            "watch",
            "--port",
            "9",
            "--duration",
            "200ms",
            "--no-drop-reasons",
            "--no-history",
            "--metrics-listen",
            listen,
        ]);
        let out = common::run(c);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{listen}: {err}");
        assert!(err.contains("metrics at http://"), "{listen}: {err}");
        err.lines()
            .filter(|l| l.contains("warning: --metrics-listen"))
            .map(String::from)
            .collect()
    };
    let w = warned("0.0.0.0:0");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("0.0.0.0:0 is every interface") && w[0].contains("without authentication"),
        "{w:?}"
    );
    let w = warned("[::]:0");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("[::]:0 is every interface"), "{w:?}");
    assert_eq!(warned("127.0.0.1:0"), Vec::<String>::new());
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
