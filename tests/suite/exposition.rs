//! tpslab's metrics as Prometheus' own tools read them: `promtool check metrics` (Debian's
//! prometheus package) on a live `--metrics-listen` scrape asked for in the text format
//! 0.0.4 and with Prometheus' own Accept header (OpenMetrics), on `--metrics-file` output
//! and on every record kind's metrics (`report --format metrics` of the report layer's
//! fixtures); node_exporter's textfile collector with two tpslab files in its folder
//! serving every series of both.

use crate::common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What Debian's Prometheus 2.42 sends when it scrapes (captured from a scrape).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// GET /metrics from 127.0.0.1:`port` with `accept` (none when empty): the head and body.
fn scrape(port: u16, accept: &str) -> Option<(String, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let accept = if accept.is_empty() {
        String::new()
    } else {
        format!("Accept: {accept}\r\n")
    };
    // HTTP/1.0: the server closes after its answer (node_exporter keeps an HTTP/1.1
    // connection open).
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n{accept}\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.to_string(), body.to_string()))
}

/// `promtool check metrics` of `text`: its exit status and what it said (one problem per
/// line).
fn promtool(text: &str) -> (bool, String) {
    let mut c = Command::new("/usr/bin/promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), said)
}

/// The families with a `# TYPE` line, and every sample's name without a family that has
/// one (a histogram's `_bucket`, `_sum`, `_count` belong to theirs).
fn untyped_samples(text: &str) -> Vec<String> {
    let typed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .filter(|name| {
            !typed.iter().any(|t| {
                name == t
                    || ["_total", "_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| *name == format!("{t}{s}"))
            })
        })
        .collect()
}

/// A sample line as (name, labels sorted, value): node_exporter sorts labels and prints
/// floats (values and `le` bounds) its own way.
fn sample(line: &str) -> (String, BTreeMap<String, String>, f64) {
    let (series, value) = line.rsplit_once(' ').unwrap();
    let value: f64 = match value {
        "+Inf" => f64::INFINITY,
        v => v.parse().unwrap(),
    };
    let (name, labels) = match series.split_once('{') {
        Some((n, rest)) => (n, rest.trim_end_matches('}')),
        None => (series, ""),
    };
    let labels = labels
        .split("\",")
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once("=\"").unwrap();
            let v = v.trim_end_matches('"');
            // A bucket's bound as a number (node_exporter prints 0.00001 as 1e-05).
            let v = match (k, v.parse::<f64>()) {
                ("le", Ok(b)) => b.to_string(),
                _ => v.to_string(),
            };
            (k.to_string(), v)
        })
        .collect();
    (name.to_string(), labels, value)
}

#[test]
fn promtool_passes_a_live_scrape_in_both_formats() {
    let t = "promtool_passes_a_live_scrape_in_both_formats";
    if !common::need(t, "/usr/bin/promtool") {
        return;
    }
    // The watched process: this test, whose socket is never read (its queue holds what
    // we send); its threads are the server's.
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let log = common::tmp("exposition-watch.log");
    let mut c = common::tpslab();
    let pid = std::process::id().to_string();
    // --port: the suite's other sockets are not this test's server.
    let port_s = port.to_string();
    c.args([
        "watch",
        "--pid",
        &pid,
        "--port",
        &port_s,
        "--duration",
        "20s",
    ])
    .args(["--interval", "10ms", "--no-history"])
    .args(["--metrics-listen", "127.0.0.1:0"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut watch = common::Kill(c.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mport: u16 = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.split("metrics at http://127.0.0.1:").nth(1) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
        assert!(
            watch.0.try_wait().unwrap().is_none(),
            "watch ended:\n{text}"
        );
        assert!(Instant::now() < deadline, "no metrics address:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // The kernel's drop reasons are sampled as root (perf tracepoints), else not at all.
    let reasons = common::root(
        t,
        "(drop reasons: perf tracepoints): their series not checked",
    );
    let socket =
        format!("tpslab_target_socket_drops_total{{socket=\"udp:127.0.0.1:{port}\",inode=\"");
    let reason = "tpslab_kernel_drops_total{reason=\"SOCKET_RCVBUFF\"}";
    // Our socket is never read: once its buffer is full (a few hundred datagrams) each
    // one sent is dropped there, counted by the socket and by the kernel's reason
    // (sent until the drop sampler, started after the exporter, has seen some).
    let deadline = Instant::now() + Duration::from_secs(10);
    let (head, text) = loop {
        for _ in 0..1000 {
            tx.send_to(&[0u8; 64], ("127.0.0.1", port)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(150));
        // Once the observer's slow sample has read the threads (every 100 ms).
        // A series present at 0 is not enough: the observer may not have counted the
        // drops yet (two suites on this host: the scrape came first once).
        let positive = |b: &str, prefix: &str| {
            b.lines()
                .find(|l| l.starts_with(prefix))
                .is_some_and(|l| sample(l).2 > 0.0)
        };
        if let Some((h, b)) = scrape(mport, "text/plain;version=0.0.4") {
            if b.contains("tpslab_server_threads{")
                && b.contains("tpslab_socket_rx_queue_bytes")
                && positive(&b, &socket)
                && (!reasons || positive(&b, reason))
            {
                break (h, b);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no thread states, socket drops or drop reasons in the scrape: {:?}",
            scrape(mport, "text/plain;version=0.0.4")
        );
    };
    assert!(
        head.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    let (ok, said) = promtool(&text);
    assert!(
        ok && said.is_empty(),
        "promtool on the text format: {said}\n{text}"
    );
    assert_eq!(untyped_samples(&text), Vec::<String>::new(), "{text}");
    // Every family has its help (promtool says so of a counter whose help names it
    // without _total, as OpenMetrics does).
    assert!(text.contains("# HELP tpslab_socket_drops_total "), "{text}");
    // The datagrams queued at our socket are in its queue.
    let q = text
        .lines()
        .find(|l| l.starts_with("tpslab_socket_rx_queue_bytes "))
        .map(|l| sample(l).2);
    assert!(q.is_some_and(|q| q > 0.0), "{text}");
    // Its drops, by socket (named by its address) and by the kernel's reason, with their
    // helps (promtool passed them above).
    let dropped = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .map(|l| sample(l).2)
    };
    assert!(dropped(&socket).is_some_and(|d| d > 0.0), "{text}");
    assert!(
        text.contains("# HELP tpslab_target_socket_drops_total "),
        "{text}"
    );
    if reasons {
        assert!(dropped(reason).is_some_and(|d| d > 0.0), "{text}");
        assert!(
            text.contains("# TYPE tpslab_kernel_drops_total counter\n"),
            "{text}"
        );
        assert!(text.contains("tpslab_kernel_drops_lost_total "), "{text}");
    }

    // What Prometheus asks for: OpenMetrics. promtool 2.42 reads only the text format
    // 0.0.4: of OpenMetrics it can only say that each counter's `_total` samples have no
    // help of their own (their family's help names it without `_total`); nothing else.
    let (head, om) = scrape(mport, PROMETHEUS_ACCEPT).unwrap();
    assert!(
        head.contains(
            "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"
        ),
        "{head}"
    );
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(om.contains("# TYPE tpslab_socket_drops counter\n"), "{om}");
    let (_, said) = promtool(&om);
    for line in said.lines() {
        let counter = line
            .strip_suffix("_total no help text")
            .filter(|name| om.contains(&format!("# TYPE {name} counter\n")));
        assert!(counter.is_some(), "promtool on OpenMetrics: {line}\n{om}");
    }
    assert_eq!(untyped_samples(&om), Vec::<String>::new(), "{om}");
    // No Accept header (curl's default is */*): the text format, as client libraries do.
    let (head, _) = scrape(mport, "").unwrap();
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
}

#[test]
fn promtool_passes_every_record_kinds_metrics() {
    let t = "promtool_passes_every_record_kinds_metrics";
    if !common::need(t, "/usr/bin/promtool") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/tpslab-report/tests/fixtures");
    let mut checked = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let out = common::run({
            let mut c = common::tpslab();
            c.arg("report").arg(&p).args(["--format", "metrics"]);
            c
        });
        assert!(out.status.success(), "{}: {out:?}", p.display());
        let text = String::from_utf8(out.stdout).unwrap();
        let (ok, said) = promtool(&text);
        assert!(
            ok && said.is_empty(),
            "{}: promtool: {said}\n{text}",
            p.display()
        );
        assert_eq!(
            untyped_samples(&text),
            Vec::<String>::new(),
            "{}",
            p.display()
        );
        checked += 1;
    }
    assert!(checked >= 20, "{checked} fixtures");
}

#[test]
fn node_exporter_serves_two_tpslab_files_without_collisions() {
    let t = "node_exporter_serves_two_tpslab_files_without_collisions";
    if !common::need(t, "/usr/bin/prometheus-node-exporter") {
        return;
    }
    let dir = common::tmp("textfile2");
    std::fs::create_dir_all(&dir).unwrap();
    let _g = common::serial();
    // Two producers of the same kind against alike targets: every series would be the
    // same but for the file label.
    let mut texts = vec![];
    for (name, rate) in [("dns.prom", "4000"), ("ntp.prom", "6000")] {
        let out = common::run({
            let mut c = common::tpslab();
            c.args(["run", "udp", "--bind", "127.0.0.1:0", "--rate", rate])
                .args(["--duration", "300ms", "--warmup", "100ms", "--size", "64"])
                .args(["--no-drop-reasons", "--no-history", "--metrics-file"])
                .arg(dir.join(name));
            c
        });
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(
            text.contains(&format!(
                "tpslab_run_info{{kind=\"udp_run\",version=\"{}\",file=\"{name}\"}} 1\n",
                env!("CARGO_PKG_VERSION")
            )),
            "{text}"
        );
        if Path::new("/usr/bin/promtool").exists() {
            let (ok, said) = promtool(&text);
            assert!(ok && said.is_empty(), "promtool on {name}: {said}\n{text}");
        }
        texts.push(text);
    }
    let web = common::free_port();
    let nlog = common::tmp("node-exporter2.log");
    let _ne = common::Kill(
        Command::new("/usr/bin/prometheus-node-exporter")
            .args(["--collector.disable-defaults", "--collector.textfile"])
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
        if let Some((h, b)) = scrape(web, "text/plain;version=0.0.4") {
            if h.contains(" 200 ") {
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
    assert!(body.contains("node_textfile_scrape_error 0"), "{body}");
    let served: Vec<_> = body
        .lines()
        .filter(|l| l.starts_with("tpslab_"))
        .map(sample)
        .collect();
    // Every series of both files, as it is in its file.
    for text in &texts {
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let want = sample(line);
            assert!(
                served.iter().any(|s| s.0 == want.0
                    && s.1 == want.1
                    && (s.2 == want.2 || (s.2.is_nan() && want.2.is_nan()))),
                "{line} not served:\n{body}\n{}",
                std::fs::read_to_string(&nlog).unwrap_or_default()
            );
        }
    }
    let said = std::fs::read_to_string(&nlog).unwrap_or_default();
    assert!(!said.contains("collected before"), "{said}");
}

/// The port of `--metrics-listen 127.0.0.1:0` as the command said it on stderr (`log`),
/// waiting up to 10 s for the line while `child` runs.
fn metrics_port(log: &Path, child: &mut common::Kill) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(rest) = text.split("metrics at http://127.0.0.1:").nth(1) {
            return rest.split('/').next().unwrap().parse().unwrap();
        }
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "the command ended:\n{text}"
        );
        assert!(Instant::now() < deadline, "no metrics address:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of the sample line starting with `prefix` (name and labels as written).
fn value(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .map(|l| sample(l).2)
}

#[test]
fn load_http_serves_its_counts_while_it_runs_and_promtool_passes() {
    let t = "load_http_serves_its_counts_while_it_runs_and_promtool_passes";
    if !common::need(t, "/usr/bin/promtool") {
        return;
    }
    let Some((_nginx, port)) = common::nginx("exposition-load-http") else {
        return;
    };
    let (log, json) = (
        common::tmp("exposition-load-http.log"),
        common::tmp("exposition-load-http.json"),
    );
    let _ = std::fs::remove_file(&json);
    let mut c = common::tpslab();
    c.args(["load", "http", &format!("http://127.0.0.1:{port}/")])
        .args(["--rate", "1000", "--connections", "4", "--duration", "3s"])
        .args(["--metrics-listen", "127.0.0.1:0", "--no-history", "--json"])
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut load = common::Kill(c.spawn().unwrap());
    let mport = metrics_port(&log, &mut load);
    let ok = "tpslab_http_replies_total{class=\"2xx\"} ";
    let latency = "tpslab_latency_seconds_count{from=\"intended\"} ";
    // Once an interval with replies was read (every 250 ms).
    let deadline = Instant::now() + Duration::from_secs(5);
    let (head, text) = loop {
        if let Some((h, b)) = scrape(mport, "text/plain;version=0.0.4") {
            if value(&b, ok).is_some_and(|n| n > 0.0) {
                break (h, b);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no replies in the scrape: {:?}\n{}",
            scrape(mport, "text/plain;version=0.0.4"),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        head.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    let (good, said) = promtool(&text);
    assert!(
        good && said.is_empty(),
        "promtool on the text format: {said}\n{text}"
    );
    assert_eq!(untyped_samples(&text), Vec::<String>::new(), "{text}");
    assert!(
        text.contains("tpslab_exporter_info{command=\"load http\","),
        "{text}"
    );
    // Counts from the start: every reply was a request sent; the latency histogram holds
    // the replies (its count is the 2xx and other classes read, all 2xx from nginx here).
    let (sent, answered) = (
        value(&text, "tpslab_http_requests_sent_total ").unwrap(),
        value(&text, ok).unwrap(),
    );
    assert!(sent >= answered, "{text}");
    assert_eq!(value(&text, latency), Some(answered), "{text}");
    // The plan's rate over the last interval (the scrape is early: the plan still runs).
    let intended = value(
        &text,
        "tpslab_http_interval_rate_per_second{of=\"intended\"} ",
    );
    assert!(intended.is_some_and(|r| (r - 1000.0).abs() < 1.0), "{text}");
    assert!(
        value(&text, "tpslab_http_in_flight_requests ").is_some(),
        "{text}"
    );
    // OpenMetrics, as Prometheus asks: promtool 2.42 can only say each counter's `_total`
    // has no help of its own.
    let (head, om) = scrape(mport, PROMETHEUS_ACCEPT).unwrap();
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(om.ends_with("# EOF\n"), "{om}");
    let (_, said) = promtool(&om);
    for line in said.lines() {
        let counter = line
            .strip_suffix("_total no help text")
            .filter(|name| om.contains(&format!("# TYPE {name} counter\n")));
        assert!(counter.is_some(), "promtool on OpenMetrics: {line}\n{om}");
    }
    // The run ends as planned; its record counts at least what was served while it ran.
    let status = load.0.wait().unwrap();
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let rec = common::record(&json);
    let r = &rec["result"];
    assert!(r["sent"].as_f64().unwrap() >= sent, "{r}");
    assert!(r["status"]["s2xx"].as_f64().unwrap() >= answered, "{r}");
}
