//! The live view of an open loop of HTTP requests (`load http --live`, `capacity http
//! --live`) drawn from streams recorded by real runs (`testdata/live/`, see its README) into
//! ratatui's TestBackend at 80x24 and 160x48, against saved screens (`BLESS_LIVE=1` writes
//! them again; read the diff), with the figures a wrong view would get wrong checked on
//! their own: the rates, the latency from the intended send, the interval's timeouts, the
//! connections, the bracket.

use crate::snap::{assert_screen, data};
use tpslab_analysis::capacity::bounds_so_far;
use tpslab_record::capacity::CapacityStep;
use tpslab_report::live::{draw_http, HttpFrame, HttpLiveState, LiveHeader};

/// The lines of a recorded `load http --json-stream` file.
fn frames(name: &str) -> Vec<HttpFrame> {
    data(name)
        .lines()
        .map(|l| HttpFrame::from_line(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect()
}

fn header(command: &str, target: &str, planned_s: f64) -> LiveHeader {
    LiveHeader {
        command: command.into(),
        target: target.into(),
        planned_s: Some(planned_s),
        planned_requests: None,
        no_latency: None,
    }
}

/// A count or rate as the view writes it: `850`, `8.73k`, `10.0k`.
fn si(v: f64) -> String {
    if v >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{:.2}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[test]
fn an_overloaded_server_shows_achieved_under_intended_and_latency_climbing() {
    let fs = frames("load_http_overload.ndjson");
    // The middle of the run: 1200/s intended, a server that answers 900/s at most.
    let n = fs.len() / 2;
    let mut st = HttpLiveState::new(header("load http", "http://127.0.0.1:18481/", 4.0));
    for f in fs.iter().take(n).cloned() {
        st.push(f);
    }
    let last = &fs[n - 1];
    assert_eq!(last.intended_rps, 1200.0);
    assert!(last.sent_rps < 1000.0, "{last:?}");
    // Corrected latency climbs interval by interval: each waits longer behind the last.
    let p50: Vec<f64> = st.latency.iter().map(|p| p.1).collect();
    assert!(p50.windows(2).all(|w| w[1] > w[0]), "{p50:?}");
    let total: u64 = fs.iter().take(n).map(|f| f.status.s2xx).sum();
    assert_eq!(st.total_status.s2xx, total);
    for (w, h, file) in [
        (80, 24, "load_http_overload_80x24.txt"),
        (160, 48, "load_http_overload_160x48.txt"),
    ] {
        let s = crate::snap::screen(w, h, |f| draw_http(f, &st));
        assert!(s.contains("intended 1.20k"), "{w}x{h}:\n{s}");
        // Every series named with its value, at 80 columns too (answered and p99.9 were
        // cut off the top border there).
        let answered = format!("answered {}", si(last.answered_rps));
        assert!(s.contains(&answered), "{w}x{h}: no {answered:?}\n{s}");
        assert!(s.contains("p99.9 5"), "{w}x{h}:\n{s}");
        assert!(
            s.contains(&format!("achieved {}", si(last.sent_rps))),
            "{w}x{h}:\n{s}"
        );
        let l = last.latency.as_ref().unwrap();
        let ms = format!("p99 {:.1}ms", l.p99_us / 1e3);
        assert!(s.contains(&ms), "{w}x{h}: no {ms:?}:\n{s}");
        let row = s.lines().find(|l| l.contains("2xx")).unwrap();
        assert!(
            row.split_whitespace()
                .any(|c| c == si(last.status.s2xx as f64))
                && row.split_whitespace().any(|c| c == si(total as f64)),
            "{w}x{h}: {row}"
        );
        assert!(s.contains("no request or connect failed"), "{w}x{h}:\n{s}");
        // A stream written before codes and bins: the classes, and the histogram's absence
        // said; the gauge by time alone (no requests planned given).
        assert!(s.contains("no histogram in this stream"), "{w}x{h}:\n{s}");
        assert!(
            s.lines()
                .nth(1)
                .unwrap()
                .starts_with("  50 % 2.0 s of 4.0 s, "),
            "{w}x{h}:\n{s}"
        );
        assert!(
            s.contains("connections open  50 (peak 50)"),
            "{w}x{h}:\n{s}"
        );
        assert_screen(&s, file);
    }
}

#[test]
fn timeouts_are_counted_in_their_interval_and_since_the_start() {
    let fs = frames("load_http_timeouts.ndjson");
    let mut st = HttpLiveState::new(header("load http", "http://127.0.0.1:18481/", 4.0));
    // Up to the last line that still intended requests (the drain's follows).
    let end = fs.iter().rposition(|f| f.intended_rps > 0.0).unwrap() + 1;
    assert!(end < fs.len(), "the fixture holds the drain");
    for f in fs.iter().take(end).cloned() {
        st.push(f);
    }
    let last = &fs[end - 1];
    let total: u64 = fs.iter().take(end).map(|f| f.errors.timeout).sum();
    assert!(last.errors.timeout > 0 && total > last.errors.timeout);
    assert_eq!(st.total_errors.timeout, total);
    for (w, h, file) in [
        (80, 24, "load_http_timeouts_80x24.txt"),
        (160, 48, "load_http_timeouts_160x48.txt"),
    ] {
        let s = crate::snap::screen(w, h, |f| draw_http(f, &st));
        let row = s
            .lines()
            .find(|l| l.contains("timeout"))
            .unwrap_or_else(|| panic!("{w}x{h}: no timeout row:\n{s}"));
        assert!(
            row.split_whitespace()
                .any(|c| c == si(last.errors.timeout as f64))
                && row.split_whitespace().any(|c| c == si(total as f64)),
            "{w}x{h}: {row}"
        );
        assert!(!s.contains("no request or connect failed"), "{w}x{h}:\n{s}");
        assert_screen(&s, file);
    }
}

/// The recorded search's steps.
fn steps() -> Vec<CapacityStep> {
    data("capacity_http.steps.ndjson")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_capacity_search_shows_its_steps_and_the_bracket_above_the_step_running() {
    let all = steps();
    assert_eq!(all.len(), 7);
    let mut st = HttpLiveState::search(header("capacity http", "http://127.0.0.1:18482/", 1.2));
    st.set_steps(&all[..6]);
    st.start_run("capacity step 7: 925 requests/s");
    // A warm-up's line, then the step's own: the clock going back starts the view afresh.
    let mut step = frames("capacity_http_step_925.ndjson");
    // The step's load, without the drain's line after it.
    step.retain(|f| f.intended_rps > 0.0);
    st.push(step[2].clone());
    for f in step.iter().cloned() {
        st.push(f);
    }
    assert_eq!(st.frames, step.len() as u64);
    let (lo, hi) = bounds_so_far(&all[..6]);
    assert_eq!((lo, hi), (Some(900.0), Some(1000.0)));
    for (w, h, file) in [
        (80, 24, "capacity_http_80x24.txt"),
        (160, 48, "capacity_http_160x48.txt"),
    ] {
        let s = crate::snap::screen(w, h, |f| draw_http(f, &st));
        assert!(
            s.contains("bracket so far: sustains 900 req/s, fails at 1.00k req/s"),
            "{w}x{h}:\n{s}"
        );
        assert!(
            s.contains("capacity search: now capacity step 7: 925 requests/s"),
            "{w}x{h}:\n{s}"
        );
        let want = format!("intended {}", si(step.last().unwrap().intended_rps));
        assert!(s.contains(&want), "{w}x{h}: no {want:?}:\n{s}");
        assert_screen(&s, file);
    }
}

#[test]
fn help_pause_and_the_first_interval() {
    let mut st = HttpLiveState::new(header("load http", "http://127.0.0.1:18481/", 4.0));
    let s = crate::snap::screen(80, 24, |f| draw_http(f, &st));
    assert!(s.contains("waiting for the first interval"), "{s}");
    st.push(frames("load_http_overload.ndjson")[0].clone());
    (st.help, st.paused) = (true, true);
    let s = crate::snap::screen(80, 24, |f| draw_http(f, &st));
    assert!(s.contains("PAUSED"), "{s}");
    assert!(s.contains("corrected for"), "{s}");
    let s = crate::snap::screen(79, 24, |f| draw_http(f, &st));
    assert!(s.starts_with("terminal too small"), "{s}");
}

/// A run whose server answers 200, 404 and 503 (`testdata/live/load_http_codes.ndjson`):
/// a row per code with the interval's count and the total (the lines' sums), the latency
/// histogram holding every reply (its slow tail: the server's 30 ms replies), the gauge at
/// the run's middle with the requests done of the 1600 planned.
#[test]
fn status_codes_the_histogram_and_the_gauge_of_a_run_with_mixed_replies() {
    let fs = frames("load_http_codes.ndjson");
    let n = fs.len() / 2;
    let mut h = header("load http", "http://127.0.0.1:18486/", 4.0);
    h.planned_requests = Some(1600);
    let mut st = HttpLiveState::new(h);
    for f in fs.iter().take(n).cloned() {
        st.push(f);
    }
    let sum = |code: u16| fs.iter().take(n).map(|f| f.codes.get(code)).sum::<u64>();
    for code in [200, 404, 503] {
        assert!(sum(code) > 0, "no {code} in the first {n} lines");
        assert_eq!(st.total_codes.get(code), sum(code), "{code}");
    }
    // Every reply has its code, and its latency in the histogram.
    let replies = st.total_status.total();
    assert_eq!(st.total_codes.total(), replies);
    assert_eq!(st.histogram.iter().sum::<u64>(), replies);
    let last = &fs[n - 1];
    let done = st.requests_done();
    let gauge = format!(
        "{:.1} s of 4.0 s, {} of 1.60k requests done",
        st.elapsed_s(),
        si(done as f64)
    );
    for (w, h, file) in [
        (80, 24, "load_http_codes_80x24.txt"),
        (160, 48, "load_http_codes_160x48.txt"),
    ] {
        let s = crate::snap::screen(w, h, |f| draw_http(f, &st));
        for code in [200u16, 404, 503] {
            let cell = format!("│{code} ");
            let row = s
                .lines()
                .find(|l| l.contains(&cell))
                .unwrap_or_else(|| panic!("{w}x{h}: no row of {code}:\n{s}"));
            let cells: Vec<&str> = row
                .split(&cell)
                .nth(1)
                .unwrap()
                .split_whitespace()
                .collect();
            assert_eq!(
                &cells[..2],
                &[si(last.codes.get(code) as f64), si(sum(code) as f64)],
                "{w}x{h}: {row}"
            );
        }
        let second = s.lines().nth(1).unwrap();
        assert!(
            second.contains(&gauge),
            "{w}x{h}: {second:?}, not {gauge:?}"
        );
        let title = format!("latency histogram: {} replies", si(replies as f64));
        assert!(s.contains(&title), "{w}x{h}:\n{s}");
        // The 30 ms replies: a row whose bound is 30 ms or more holds some.
        let slow = s.lines().any(|l| {
            let Some(i) = l.find('≤') else { return false };
            let label: String = l[i + '≤'.len_utf8()..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect();
            label.ends_with("ms")
                && label
                    .trim_end_matches("ms")
                    .parse::<f64>()
                    .is_ok_and(|v| v >= 30.0)
        });
        assert!(slow, "{w}x{h}: no row at 30 ms or more:\n{s}");
        assert_screen(&s, file);
    }
}
