//! Terminal and JSON renderings of real records (written by `tpslab run udp` and
//! `tpslab diagnose` on this project's test machine) against their saved output: a change
//! to a renderer shows here as a diff. To accept an intended change, render the fixture
//! again with `tpslab report tests/fixtures/NAME.json > tests/fixtures/NAME.txt`.

use tpslab_record::Record;
use tpslab_report::{render, Format};

fn fixture(name: &str) -> String {
    let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn rendered(json: &str, format: Format, explain: bool) -> String {
    let rec = Record::from_json(&fixture(json)).expect("fixture is a record");
    let mut out = Vec::new();
    render(&mut out, &rec, format, explain).expect("render into a buffer");
    String::from_utf8(out).expect("UTF-8")
}

fn assert_same(got: &str, want_file: &str) {
    let want = fixture(want_file);
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{want_file}: differs at line {}:\n  want: {:?}\n  got:  {:?}",
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}

#[test]
fn udp_run_terminal_report() {
    let got = rendered("udp_run.json", Format::Term, false);
    assert_same(&got, "udp_run.txt");
    // What a reader looks for first is there.
    assert!(got.contains("Ledger: where every datagram went"));
    assert!(got.contains("dropped at the server socket receive buffer"));
}

#[test]
fn diagnose_terminal_report_with_and_without_sources() {
    let got = rendered("diagnose.json", Format::Term, false);
    assert_same(&got, "diagnose.txt");
    assert!(got.lines().nth(2).unwrap().starts_with("VERDICT: "));
    let explained = rendered("diagnose.json", Format::Term, true);
    assert_same(&explained, "diagnose_explain.txt");
    assert!(explained.contains("[source: "));
}

/// The persist block, pasted into a shell as printed (from its `cat` to its `EOF`), writes
/// the file with one `KEY = VALUE` line per key: an indented here-document never ends.
#[test]
fn diagnose_persist_block_runs_as_pasted() {
    let got = rendered("diagnose.json", Format::Term, false);
    let start = got.find("cat > ").expect("a persist block");
    let end = start + got[start..].find("\nEOF\n").expect("EOF alone on its line") + 5;
    let dir = std::env::temp_dir().join(format!("tpslab-persist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("60-udp-buffers.conf");
    let block =
        got[start..end].replace("/etc/sysctl.d/60-udp-buffers.conf", file.to_str().unwrap());
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&block)
        .output()
        .expect("sh runs");
    let written = std::fs::read_to_string(&file);
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{out:?}");
    let written = written.expect("the file is written");
    assert!(!written.is_empty());
    for l in written.lines() {
        assert!(
            l.starts_with("net.") && l.contains(" = "),
            "a key line, unindented: {l:?} in {written:?}"
        );
    }
}

#[test]
fn json_report_gives_the_record_back() {
    for f in ["udp_run.json", "diagnose.json"] {
        assert_eq!(rendered(f, Format::Json, false), fixture(f), "{f}");
    }
}

#[test]
fn ramp_terminal_report_and_plot() {
    let got = rendered("ramp.json", Format::Term, false);
    assert_same(&got, "ramp.txt");
    assert!(got.starts_with("tpslab ramp tcp: 4 steps"));
    assert!(got.contains("VERDICT: serialisation"));
    assert_same(&rendered("ramp.json", Format::Svg, false), "ramp.svg");
    assert_eq!(
        rendered("ramp.json", Format::Json, false),
        fixture("ramp.json")
    );
}

#[test]
fn a_plot_of_a_kind_without_one_is_an_error_naming_it() {
    let rec = Record::from_json(&fixture("udp_run.json")).unwrap();
    let e = render(&mut Vec::new(), &rec, Format::Svg, false).unwrap_err();
    assert!(
        e.to_string().contains("a udp_run record has no plot"),
        "{e}"
    );
}

#[test]
fn csv_tables_of_a_run_and_a_ramp() {
    let run = rendered("udp_run.json", Format::Csv, false);
    let rec = Record::from_json(&fixture("udp_run.json")).unwrap();
    let tpslab_record::Body::UdpRun(r) = &rec.body else {
        panic!("a run")
    };
    let series = &r.observer.as_ref().unwrap().series;
    let lines: Vec<&str> = run.lines().collect();
    assert_eq!(lines.len(), series.t_ms.len() + 1, "one row per sample");
    assert!(lines[0].starts_with("t_ms,") && lines[0].contains("server_rx_queue_bytes"));
    let cols = lines[0].split(',').count();
    assert!(
        lines.iter().all(|l| l.split(',').count() == cols),
        "ragged rows"
    );
    // A rate series lies between samples: its first cell is empty, its last is filled.
    let k = lines[0]
        .split(',')
        .position(|c| c.ends_with("_per_s") || c.ends_with("_pps"))
        .expect("a rate column");
    assert_eq!(lines[1].split(',').nth(k), Some(""));
    assert_ne!(lines.last().unwrap().split(',').nth(k), Some(""));
    let ramp = rendered("ramp.json", Format::Csv, false);
    let rows: Vec<&str> = ramp.lines().collect();
    assert_eq!(rows.len(), 5, "{ramp}");
    assert!(rows[0].starts_with("users,tps,"));
    assert!(
        rows[1].starts_with("1,") && rows[4].starts_with("8,"),
        "{ramp}"
    );
}

#[test]
fn tcp_lab_terminal_report_before_and_after() {
    let got = rendered("tcp_lab.json", Format::Term, false);
    assert_same(&got, "tcp_lab.txt");
    assert!(got.starts_with("tpslab tcp: lab between two network namespaces"));
    assert!(got.contains("\nAFTER: the same lab with both buffers at the recommended size"));
    assert!(got.contains("target 80.0 Mbit/s: reached"));
    assert_eq!(
        rendered("tcp_lab.json", Format::Json, false),
        fixture("tcp_lab.json")
    );
    // One CSV row per TCP_INFO sample of each run, after the header.
    let rec = Record::from_json(&fixture("tcp_lab.json")).unwrap();
    let tpslab_record::Body::Tcp(t) = &rec.body else {
        panic!("a tcp record")
    };
    let samples: usize = t.runs.iter().map(|r| r.flow.samples.len()).sum();
    let csv = rendered("tcp_lab.json", Format::Csv, false);
    assert_eq!(csv.lines().count(), samples + 1);
    assert!(csv.lines().nth(1).unwrap().starts_with("first,"));
    assert!(csv.lines().last().unwrap().starts_with("after,"));
}

/// Every fixture's HTML page: self-contained (a CSP that forbids loading, no reference to
/// anything outside the page), the verdict first, the plots its kind has, each series
/// named with its source.
#[test]
fn html_pages_are_self_contained_and_show_each_kind() {
    // (fixture, plots at least, texts the page must hold)
    let cases: [(&str, usize, &[&str]); 5] = [
        (
            "udp_run.json",
            3,
            &[
                "Offered and delivered",
                "Udp: RcvbufErrors",
                "Ledger: where every datagram went",
                "CPU per core",
            ],
        ),
        (
            "diagnose.json",
            6,
            &[
                "VERDICT: Datagrams die at the server socket&#x27;s receive buffer",
                "before: Drops per interval",
                "after: Drops per interval",
                "sock_diag SK_MEMINFO_RCVBUF",
            ],
        ),
        (
            "ramp.json",
            2,
            &[
                "TPS against users",
                "USL fit: sigma 0.965",
                "knee: 1 user(s)",
            ],
        ),
        (
            "tcp_lab.json",
            6,
            &[
                "Windows and bytes in flight",
                "held by the receiver window",
                "TCP_INFO tcpi_snd_wnd",
            ],
        ),
        (
            "sweep.json",
            2,
            &[
                "loss_pct by cell",
                "0 (baseline)",
                "Student t over the repeats",
            ],
        ),
    ];
    for (f, plots, texts) in cases {
        let html = rendered(f, Format::Html, false);
        assert!(html.starts_with("<!DOCTYPE html>"), "{f}");
        assert!(
            html.contains("Content-Security-Policy\" content=\"default-src 'none'"),
            "{f}"
        );
        for outside in ["src=", "href=", "url(", "@import", "https:"] {
            assert!(
                !html.contains(outside),
                "{f}: refers outside the page ({outside})"
            );
        }
        let n = html.matches("<figure class=\"plot\"").count();
        assert!(n >= plots, "{f}: {n} plots, want at least {plots}");
        // Each figure's declared series are drawn (the browser test checks the same).
        assert!(
            !html.contains("data-series=\"0\""),
            "{f}: a plot without a series"
        );
        for t in texts {
            assert!(html.contains(t), "{f}: missing {t:?}");
        }
        // The terminal report closes the page.
        assert!(
            html.contains("<summary>The terminal report</summary>"),
            "{f}"
        );
    }
}

#[test]
fn html_escapes_what_the_record_says() {
    let mut rec = Record::from_json(&fixture("udp_run.json")).unwrap();
    rec.meta.argv.push("<script>alert(1)</script>".into());
    let mut out = Vec::new();
    render(&mut out, &rec, Format::Html, false).unwrap();
    let html = String::from_utf8(out).unwrap();
    assert!(!html.contains("<script>alert(1)"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));
}

#[test]
fn html_never_shows_a_share_of_an_inconsistent_ledger() {
    let mut rec = Record::from_json(&fixture("udp_run.json")).unwrap();
    let tpslab_record::Body::UdpRun(r) = &mut rec.body else {
        panic!("a run")
    };
    r.ledger.as_mut().unwrap().request.inconsistent =
        Some("a count includes another sender".into());
    let mut out = Vec::new();
    render(&mut out, &rec, Format::Html, false).unwrap();
    let html = String::from_utf8(out).unwrap();
    assert!(html.contains("the request path&#x27;s ledger is inconsistent, so no share is shown"));
    assert!(
        !html.contains("request path <span"),
        "a bar of the inconsistent path"
    );
    assert!(
        html.contains("reply path"),
        "the consistent path keeps its bar"
    );
}

#[test]
fn compare_of_a_record_with_itself_finds_no_difference_and_renders_everywhere() {
    use tpslab_analysis::compare::{compare, CompareError};
    let a = Record::from_json(&fixture("diagnose.json")).unwrap();
    let c = compare(&[("a".into(), a.clone()), ("b".into(), a.clone())]).unwrap();
    assert!(c.differences.is_empty(), "{:?}", c.differences);
    let loss = c
        .figures
        .iter()
        .find(|f| f.name == "socket loss %")
        .unwrap();
    // Ten batches of the window, each a real share.
    let v = loss.values[0].unwrap();
    assert_eq!(v.n, tpslab_analysis::compare::BATCHES);
    assert!(v.mean > 50.0 && v.mean < 100.0, "{v:?}");
    let e = loss.effects[0].unwrap();
    assert!(e.diff == 0.0 && !e.significant);
    // Every format renders it.
    let rec = Record::new(tpslab_record::Body::Compare(c));
    for f in [Format::Term, Format::Json, Format::Csv, Format::Html] {
        let mut out = Vec::new();
        render(&mut out, &rec, f, false).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("socket loss %"), "{f:?}");
    }
    let mut out = Vec::new();
    render(&mut out, &rec, Format::Term, false).unwrap();
    let s = String::from_utf8(out).unwrap();
    assert!(s.contains("What differs: nothing"), "{s}");
    assert!(s.contains("within noise"), "{s}");
    // The JSON reads back as a record.
    let mut out = Vec::new();
    render(&mut out, &rec, Format::Json, false).unwrap();
    assert_eq!(
        Record::from_json(&String::from_utf8(out).unwrap())
            .unwrap()
            .kind(),
        "compare"
    );
    // Kinds must match; a kind without runs is named.
    let r = Record::from_json(&fixture("ramp.json")).unwrap();
    let e = compare(&[("a".into(), a), ("r".into(), r.clone())]).unwrap_err();
    assert!(matches!(e, CompareError::Kinds(..)), "{e}");
    // A ramp against itself: its steps, measured once each, untested.
    let c = compare(&[("r1".into(), r.clone()), ("r2".into(), r)]).unwrap();
    assert!(c.differences.is_empty(), "{:?}", c.differences);
    let tps = c
        .figures
        .iter()
        .find(|f| f.name == "TPS at 1 user(s)")
        .unwrap();
    assert_eq!(tps.values[0].unwrap().n, 1);
    // A TCP record: throughput per batch of its TCP_INFO samples.
    let t = Record::from_json(&fixture("tcp_lab.json")).unwrap();
    let c = compare(&[("t1".into(), t.clone()), ("t2".into(), t)]).unwrap();
    let thr = c
        .figures
        .iter()
        .find(|f| f.name == "run 2: throughput Mbit/s")
        .unwrap();
    let v = thr.values[0].unwrap();
    assert_eq!(v.n, tpslab_analysis::compare::BATCHES);
    assert!(v.mean > 90.0 && v.mean < 120.0, "{v:?}");
}

#[test]
fn compare_of_sweeps_uses_each_cells_repeats() {
    let s = Record::from_json(&fixture("sweep.json")).unwrap();
    let c = tpslab_analysis::compare::compare(&[("a".into(), s.clone()), ("b".into(), s)]).unwrap();
    assert!(c.differences.is_empty(), "{:?}", c.differences);
    let row = c
        .figures
        .iter()
        .find(|f| f.name == "loss_pct [cpus=all rcvbuf=8192]")
        .expect("the cell's loss");
    let v = row.values[0].unwrap();
    assert_eq!(v.n, 3, "the sweep's three repeats");
    assert!(v.mean > 50.0);
    assert!(!row.effects[0].unwrap().significant);
}

/// The diagnose fixture's facts and diagnosis are what the analysis makes of its own
/// "before" run and probe (regenerated, never edited by hand), and its evidence holds no
/// figure above what it names: no more dropped within one burst interval than a burst.
#[test]
fn diagnose_fixture_is_what_the_analysis_computes_from_its_run() {
    use tpslab_analysis::verdict::diagnose;

    use tpslab_record::Body;
    let rec = Record::from_json(&fixture("diagnose.json")).unwrap();
    let Body::Diagnose(d) = &rec.body else {
        panic!("diagnose.json is a diagnose record")
    };
    let facts = tpslab_analysis::verdict::facts_of(&d.before, Some(&d.probe));
    assert!(
        facts.peak_drops_window <= facts.burst,
        "{} dropped within one burst interval, bursts of {}",
        facts.peak_drops_window,
        facts.burst
    );
    assert_eq!(facts, d.facts);
    assert_eq!(diagnose(&facts, Some(&d.probe)), d.diagnosis);
}

/// A `load http` stopped early says so, and its rate is not set against the plan (over
/// the planned duration it would read as the server's shortfall).
#[test]
fn an_interrupted_load_http_is_said_so() {
    let rec = Record::from_json(&fixture("load_http.json")).expect("fixture is a record");
    let tpslab_record::Body::LoadHttp(l) = &rec.body else {
        panic!("a load_http fixture")
    };
    let mut out = Vec::new();
    tpslab_report::term::load_http::record(&mut out, l, true).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("INTERRUPTED: the last request went"),
        "{text}"
    );
    assert!(!text.contains("error "), "{text}");
    assert!(!text.contains("Not sent"), "{text}");
    let mut whole = Vec::new();
    tpslab_report::term::load_http::record(&mut whole, l, false).unwrap();
    assert!(String::from_utf8(whole)
        .unwrap()
        .starts_with("Rate: intended"));
}

/// A `load http` run stopped early (the fixture marked interrupted after 1 s of sends):
/// its CSV and metrics give the rate over the time load was really sent, as the terminal
/// does, not over the planned duration.
#[test]
fn an_interrupted_load_http_rates_the_time_load_was_sent() {
    let mut rec = Record::from_json(&fixture("load_http.json")).expect("fixture is a record");
    rec.meta.interrupted = true;
    let tpslab_record::Body::LoadHttp(l) = &mut rec.body else {
        panic!("a load http record")
    };
    // 1001 sent from 0 s to 0.5 s of a planned 1 s at 2000/s: 1000 gaps in 0.5 s.
    l.result.sent = 1001;
    l.result.first_sent_s = 0.0;
    l.result.last_sent_s = 0.5;
    let out = |format| {
        let mut o = Vec::new();
        render(&mut o, &rec, format, false).expect("render into a buffer");
        String::from_utf8(o).expect("UTF-8")
    };
    let csv = out(Format::Csv);
    assert!(csv.contains("rate_achieved,2000,requests/s\n"), "{csv}");
    assert!(csv.contains("last_request_s,0.5,s\n"), "{csv}");
    assert!(!csv.contains("rate_error"), "{csv}");
    let prom = out(Format::Metrics);
    assert!(
        prom.contains("tpslab_http_rate_per_second{of=\"achieved\"} 2000.0\n"),
        "{prom}"
    );
    let term = out(Format::Term);
    assert!(term.contains("(2000.0/s until then)"), "{term}");
}
