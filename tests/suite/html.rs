//! HTML reports in a real browser (Debian's headless Chromium): every kind of record
//! renders to a page that opens offline with no console message (its Content-Security-
//! Policy would report any load from outside the page as one), whose own check finds
//! every plot laid out at a visible size with its series drawn, and whose screenshot is
//! not blank. Real runs too: `run udp --html` in a namespace of its own, `doctor --html`.

use crate::common;

use common::{tmp, NetNs};
use std::path::{Path, PathBuf};
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/crates/tpslab-report/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// Runs headless Chromium on `page` with `args`, in a profile of its own (tests run in
/// parallel), bounded by `timeout`. Returns (stdout, stderr).
fn chromium(page: &Path, args: &[&str]) -> (String, String) {
    let profile = tmp(&format!(
        "chromium-{}",
        page.file_name().unwrap().to_string_lossy()
    ));
    let out = Command::new("timeout")
        .arg("90")
        .arg(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed on {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Share of pixels that are not white, and distinct colours, of a PNG.
fn ink(png_path: &Path) -> (f64, usize) {
    let dec = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("screenshot written"),
    ));
    let mut reader = dec.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let px = info.color_type.samples();
    let data = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0usize;
    for p in data.chunks(px) {
        if p[..3] != [255, 255, 255] {
            inked += 1;
        }
        colours.insert([p[0], p[1], p[2]]);
    }
    (inked as f64 / (data.len() / px) as f64, colours.len())
}

/// Opens `page` in Chromium: no console message, the page's self-check "ok" with
/// `plots` plots at least, a screenshot with ink and colour. Returns the DOM.
fn assert_renders(page: &Path, plots: usize) -> String {
    let (dom, log) = chromium(page, &["--dump-dom"]);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(
        console.is_empty(),
        "{}: console messages: {console:#?}",
        page.display()
    );
    let body = dom
        .lines()
        .find(|l| l.contains("<body "))
        .unwrap_or_else(|| panic!("{}: no body in the DOM", page.display()));
    assert!(
        body.contains("data-check=\"ok\""),
        "{}: the page's check failed: {body}",
        page.display()
    );
    let n: usize = body
        .split("data-plots=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .expect("data-plots set by the page's script");
    assert!(n >= plots, "{}: {n} plots, want {plots}", page.display());
    let shot = page.with_extension("png");
    chromium(
        page,
        &[
            "--window-size=1280,1600",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let (share, colours) = ink(&shot);
    assert!(
        share > 0.02 && colours > 20,
        "{}: screenshot looks blank ({:.1} % inked, {colours} colours)",
        page.display(),
        share * 100.0
    );
    dom
}

fn html_of(record: &Path, name: &str) -> PathBuf {
    let page = tmp(name);
    let out = common::run({
        let mut c = common::tpslab();
        c.arg("report").arg(record).arg("--html").arg(&page);
        c
    });
    assert!(
        out.status.success(),
        "report --html of {}",
        record.display()
    );
    page
}

#[test]
fn every_kind_of_record_renders_in_a_browser() {
    if !common::need("every_kind_of_record_renders_in_a_browser", CHROMIUM) {
        return;
    }
    for (f, plots) in [
        ("udp_run.json", 3),
        ("diagnose.json", 6),
        ("ramp.json", 2),
        ("tcp_lab.json", 6),
        ("sweep.json", 2),
    ] {
        let page = html_of(&fixture(f), &f.replace(".json", ".html"));
        let dom = assert_renders(&page, plots);
        assert!(dom.contains("class=\"verdict"), "{f}: no verdict box");
    }
    // compare: a record of its own kind, written by the command itself.
    let page = tmp("compare.html");
    let out = common::run({
        let mut c = common::tpslab();
        c.arg("compare")
            .arg(fixture("diagnose.json"))
            .arg(fixture("diagnose.json"))
            .arg("--html")
            .arg(&page);
        c
    });
    assert!(out.status.success());
    let dom = assert_renders(&page, 4);
    assert!(dom.contains("What differs (settings, not results)"));
}

#[test]
fn a_real_run_and_doctor_write_pages_that_render() {
    let test = "a_real_run_and_doctor_write_pages_that_render";
    if !common::need(test, CHROMIUM) || !common::can_netns(test) {
        return;
    }
    let ns = NetNs::new();
    let (json, page) = (tmp("run.json"), tmp("run.html"));
    let mut c = ns.tpslab();
    c.args([
        "run",
        "udp",
        "--rate",
        "20000",
        "--burst",
        "200",
        "--burst-interval",
        "10ms",
        "--rcvbuf",
        "20000",
        "--duration",
        "500ms",
        "--warmup",
        "100ms",
        "--interval",
        "20ms",
        "--json",
    ])
    .arg(&json)
    .arg("--html")
    .arg(&page);
    let out = common::run(c);
    assert!(out.status.success());
    let dom = assert_renders(&page, 4);
    // A run of this release plots what it sent, and its latency by percentile.
    for plot in ["rates", "rx_queue", "drops", "latency"] {
        assert!(
            dom.contains(&format!("data-plot=\"{plot}\"")),
            "no {plot} plot"
        );
    }
    assert!(dom.contains("offered pps (sent)"));
    assert!(dom.contains("from the intended send time (coordinated omission corrected)"));
    // The page is the record's: rendered again from the file, it is the same page.
    let again = html_of(&json, "run-again.html");
    assert_eq!(
        std::fs::read_to_string(&page).unwrap(),
        std::fs::read_to_string(&again).unwrap()
    );
    // doctor has no plot: its page is its findings, and still renders cleanly.
    let page = tmp("doctor.html");
    let mut c = ns.tpslab();
    c.args(["doctor", "--html"]).arg(&page);
    let out = common::run(c);
    assert!(out.status.success());
    let dom = assert_renders(&page, 0);
    assert!(dom.contains("data-kind=\"doctor\""));
}

/// `load http --html` of a real 2 s run against python3's http.server (HTTP/1.0, one
/// request per connection): the page has the verdict (with the connection-reuse finding),
/// the rates, latency-over-time and histogram plots, each an SVG with its series drawn,
/// and the record's series holds every reply.
#[test]
fn a_real_load_http_page_has_its_plots_and_verdict() {
    let test = "a_real_load_http_page_has_its_plots_and_verdict";
    if !common::need(test, CHROMIUM) || !common::need(test, "/usr/bin/python3") {
        return;
    }
    let port = common::free_port();
    let dir = tmp("load-http-html");
    let _ = std::fs::create_dir_all(&dir);
    std::fs::write(dir.join("index.html"), "hi\n").unwrap();
    let child = Command::new("/usr/bin/python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 -m http.server");
    let _k = common::Kill(child);
    common::wait_listening(port, "python3 -m http.server");
    let (json, page) = (tmp("load-http.json"), tmp("load-http.html"));
    let mut c = common::tpslab();
    c.args(["load", "http", &format!("http://127.0.0.1:{port}/")])
        .args(["--rate", "200", "--connections", "2", "--duration", "2s"])
        .arg("--json")
        .arg(&json)
        .arg("--html")
        .arg(&page);
    let out = common::run(c);
    assert!(out.status.success(), "{out:?}");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (r, s) = (&rec["result"], &rec["result"]["series"]);
    let replies = r["status"]["s2xx"].as_u64().unwrap();
    let sum = |v: &serde_json::Value, f: &dyn Fn(&serde_json::Value) -> u64| {
        v.as_array().unwrap().iter().map(f).sum::<u64>()
    };
    // 2 s at 0.25 s a point, and the short last one; every reply in a point and a bin.
    let points = s["points"].as_array().unwrap().len();
    assert!((8..=10).contains(&points), "{points} points");
    assert_eq!(
        sum(&s["points"], &|p| p["status"]["s2xx"].as_u64().unwrap()),
        replies
    );
    assert_eq!(
        sum(&s["histogram"], &|b| b["count"].as_u64().unwrap()),
        replies
    );
    let dom = assert_renders(&page, 3);
    for plot in ["http_rates", "http_latency", "http_histogram"] {
        let at = dom
            .find(&format!("data-plot=\"{plot}\""))
            .unwrap_or_else(|| panic!("no {plot} plot"));
        let svg = &dom[at..dom[at..].find("</svg>").map_or(dom.len(), |e| at + e)];
        assert!(
            svg.contains("<svg") && svg.contains("<polyline"),
            "{plot}: no series drawn"
        );
    }
    assert!(dom.contains("class=\"verdict"), "no verdict box");
    assert!(dom.contains("limited by"), "no verdict text");
    assert!(dom.contains("the server does not keep connections alive"));
}
