//! The live view (`--live`) drawn from streams recorded by real runs (`testdata/live/`, see
//! its README) into ratatui's TestBackend at 80x24 and 160x48, against saved screens. To
//! accept an intended change: `BLESS_LIVE=1 cargo test --profile suite -p tpslab-report --test
//! live_view`, then read the diff.

use crate::snap::{assert_screen, frames};
use tpslab_report::live::{draw, LiveHeader, LiveState};

/// The SO_RCVBUF limit the paused run's record gave (`observer.target_rcvbuf_bytes`).
const PAUSED_LIMIT: u64 = 131072;

fn paused_header() -> LiveHeader {
    LiveHeader {
        command: "load udp".into(),
        target: "127.0.0.1:19977".into(),
        planned_s: Some(4.0),
        planned_requests: None,
        no_latency: None,
    }
}

/// The paused run up to the n-th line, each line given the limit its record had.
fn paused_until(n: usize) -> LiveState {
    let mut st = LiveState::new(paused_header());
    for mut f in frames("load_udp_paused.ndjson").into_iter().take(n) {
        f.rcvbuf_limit_bytes = Some(PAUSED_LIMIT);
        st.push(f);
    }
    st
}

/// Index (1-based count of lines) of the fourth line in which the stopped server read
/// nothing: the middle of the stall.
fn mid_stall() -> usize {
    let fs = frames("load_udp_paused.ndjson");
    let zero: Vec<usize> = fs
        .iter()
        .enumerate()
        .filter(|(_, f)| f.delivered_pps == Some(0.0))
        .map(|(i, _)| i + 1)
        .collect();
    assert!(zero.len() >= 5, "the fixture holds a stall: {zero:?}");
    zero[3]
}

#[test]
fn mid_stall_the_delivered_rate_is_zero_and_the_queue_is_at_its_limit() {
    let n = mid_stall();
    let st = paused_until(n);
    let last = st.last.clone().unwrap();
    // What the view was given: the line's own figures.
    assert_eq!(st.delivered.back().unwrap().1, 0.0);
    assert!(st.offered.back().unwrap().1 > 9000.0);
    let prev = frames("load_udp_paused.ndjson")[n - 2].socket_drops;
    assert!(last.socket_drops > prev, "drops grow while stopped");
    for (w, h, file) in [
        (80, 24, "load_udp_paused_stall_80x24.txt"),
        (160, 48, "load_udp_paused_stall_160x48.txt"),
    ] {
        let s = crate::snap::screen(w, h, |f| draw(f, &st));
        // The rate chart's title names the delivered rate of this interval: nothing.
        assert!(s.contains("delivered 0 "), "{w}x{h}:\n{s}");
        // The gauge reads the line's rx_queue against the record's limit.
        let pct = (last.rx_queue_bytes as f64 / PAUSED_LIMIT as f64 * 100.0).round();
        let gauge = format!("{} / {PAUSED_LIMIT} B ({pct:.0} %)", last.rx_queue_bytes);
        assert!(s.contains(&gauge), "{w}x{h}: no {gauge:?}:\n{s}");
        // This interval's socket drops, the difference of two lines, in the drops panel.
        let d = last.socket_drops - prev;
        assert!(d > 0);
        let row = s
            .lines()
            .find(|l| l.contains("server socket"))
            .unwrap_or_else(|| panic!("{w}x{h}: no socket row:\n{s}"));
        assert!(
            row.split_whitespace()
                .any(|c| c == d.to_string() || c == format!("{:.2}k", d as f64 / 1e3)),
            "{w}x{h}: {d} not in {row:?}"
        );
        // No replies while stopped: the latency chart says so over the ones before.
        assert!(s.contains("no reply this interval"), "{w}x{h}:\n{s}");
        assert_screen(&s, file);
    }
}

#[test]
fn after_the_stall_delivered_comes_back_and_drops_stop() {
    // The last line of the load (the stream goes on through the drain, nothing offered).
    let fs = frames("load_udp_paused.ndjson");
    let end = fs
        .iter()
        .rposition(|f| f.offered_pps.unwrap_or(0.0) > 0.0)
        .unwrap()
        + 1;
    assert!(end < fs.len(), "the fixture holds the drain");
    let st = paused_until(end);
    let last = st.last.clone().unwrap();
    assert!(last.delivered_pps.unwrap() > 9000.0);
    assert_eq!(st.interval_drops.socket, 0);
    // The peak the gauge remembers is the stall's full queue.
    assert!(st.rx_queue_peak > PAUSED_LIMIT * 9 / 10);
    for (w, h, file) in [
        (80, 24, "load_udp_paused_end_80x24.txt"),
        (160, 48, "load_udp_paused_end_160x48.txt"),
    ] {
        let s = crate::snap::screen(w, h, |f| draw(f, &st));
        assert!(
            s.contains(&format!("peak {} B", st.rx_queue_peak)),
            "{w}x{h}:\n{s}"
        );
        assert!(
            s.contains(&format!("{:.1} s / 4.0 s", last.t_ms / 1e3)),
            "{w}x{h}:\n{s}"
        );
        assert_screen(&s, file);
    }
}

#[test]
fn a_sink_run_says_why_there_is_no_latency_and_no_limit() {
    let mut st = LiveState::new(LiveHeader {
        command: "run udp".into(),
        target: "127.0.0.1:40000".into(),
        planned_s: Some(2.0),
        planned_requests: None,
        no_latency: Some("UDP sink mode (--no-replies)".into()),
    });
    for f in frames("run_udp_sink.ndjson") {
        assert!(f.latency.is_none());
        st.push(f);
    }
    for (w, h, file) in [
        (80, 24, "run_udp_sink_80x24.txt"),
        (160, 48, "run_udp_sink_160x48.txt"),
    ] {
        let s = crate::snap::screen(w, h, |f| draw(f, &st));
        assert!(
            s.contains("no latency: UDP sink mode (--no-replies)"),
            "{w}x{h}:\n{s}"
        );
        assert!(!s.contains("p50"), "{w}x{h}:\n{s}");
        // The stream has no SO_RCVBUF limit: said, not drawn as an empty gauge.
        assert!(
            s.contains("SO_RCVBUF limit not in the stream"),
            "{w}x{h}:\n{s}"
        );
        assert_screen(&s, file);
    }
}

#[test]
fn help_and_pause_are_drawn_over_the_view() {
    let mut st = paused_until(10);
    st.help = true;
    st.paused = true;
    let s = crate::snap::screen(80, 24, |f| draw(f, &st));
    assert!(s.contains("PAUSED"), "{s}");
    assert!(s.contains("stop the run as Ctrl-C does"), "{s}");
}

/// The paused run whole (its stall ends with a real spike: the stalled replies' p99.9 at
/// 1.00 s against a few ms), one interval after it made a rate spike: 166.5k pps read
/// on a 10k pps run (the 10 ms interval).
fn with_a_spike() -> LiveState {
    let mut st = LiveState::new(paused_header());
    for (i, mut f) in frames("load_udp_paused.ndjson").into_iter().enumerate() {
        f.rcvbuf_limit_bytes = Some(PAUSED_LIMIT);
        if i == 29 {
            f.delivered_pps = Some(166_500.0);
        }
        st.push(f);
    }
    st
}

/// The labels of the y axes on a screen: the words just left of a chart's axis line.
fn axis_labels(s: &str) -> Vec<String> {
    s.lines()
        .filter_map(|l| {
            let (head, _) = l.split_once("│")?.1.split_once('│')?;
            let w = head.trim();
            let label = !w.is_empty() && !w.contains(' ') && w.chars().any(|c| c.is_ascii_digit());
            label.then(|| w.to_string())
        })
        .collect()
}

#[test]
fn a_spike_is_clipped_and_marked_and_does_not_set_the_axis() {
    let st = with_a_spike();
    for (w, h, file) in [
        (80, 24, "load_udp_spike_80x24.txt"),
        (160, 48, "load_udp_spike_160x48.txt"),
    ] {
        let s = crate::snap::screen(w, h, |f| draw(f, &st));
        let labels = axis_labels(&s);
        // The rate axis tops out near the run's 10k pps, not at 166.5k x 1.1.
        let rate_top = labels
            .iter()
            .find(|l| l.ends_with('k'))
            .unwrap_or_else(|| panic!("{s}"));
        let top: f64 = rate_top.trim_end_matches('k').parse().unwrap();
        assert!((10.0..=25.0).contains(&top), "{rate_top}\n{s}");
        assert!(s.contains("▲ 1 clipped, peak 166.5k"), "{s}");
        // The latency axis is not stretched to the stall's 1.00 s replies either.
        assert!(s.contains("clipped, peak 1.00s"), "{s}");
        // One unit per axis: every rate label in k, every latency label in ms.
        let lat: Vec<&String> = labels.iter().filter(|l| l.ends_with('s')).collect();
        assert!(
            lat.len() == 3 && lat.iter().all(|l| l.ends_with("ms")),
            "{labels:?}\n{s}"
        );
        assert_screen(&s, file);
    }
}

#[test]
fn at_80_columns_every_series_is_named() {
    // Before the stall: every series has a value.
    let st = paused_until(11);
    let s = crate::snap::screen(80, 24, |f| draw(f, &st));
    for name in ["offered", "delivered", "p50", "p99", "p99.9"] {
        assert!(s.contains(name), "{name} missing at 80 columns:\n{s}");
    }
}

#[test]
fn no_color_leaves_no_colour_in_any_cell() {
    use ratatui::backend::TestBackend;
    use ratatui::style::Color;
    use ratatui::Terminal;
    use tpslab_report::live::screen::draw_in;
    let st = with_a_spike();
    let colours = |mono: bool| {
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| draw_in(f, &st, mono)).unwrap();
        t.backend()
            .buffer()
            .content
            .iter()
            .filter(|c| c.fg != Color::Reset || c.bg != Color::Reset)
            .count()
    };
    // In colour, the series and the drops are coloured; with NO_COLOR nothing is.
    assert!(colours(false) > 50, "{}", colours(false));
    assert_eq!(colours(true), 0);
}

#[test]
fn no_color_tells_the_series_apart_by_their_markers() {
    use tpslab_report::live::screen::draw_in;
    // The load's last line: the window holds the stall, where the offered rate stays up
    // while the delivered one is at zero and the latency percentiles part, so every
    // series has cells of its own; every legend has its values.
    let fs = frames("load_udp_paused.ndjson");
    let end = fs
        .iter()
        .rposition(|f| f.offered_pps.unwrap_or(0.0) > 0.0)
        .unwrap()
        + 1;
    let st = paused_until(end);
    let s = crate::snap::screen(80, 24, |f| draw_in(f, &st, true));
    // Each legend names its series with its glyph.
    for named in ["offered ⠒", "delivered •", "p50 ⠒", "p99 •", "p99.9 +"] {
        assert!(s.contains(named), "{named} missing:\n{s}");
    }
    let (rate, latency) = s.split_at(s.find("┌ latency").unwrap_or_else(|| panic!("{s}")));
    // What is plotted: the rows inside the charts' frames, not their borders' legends.
    let plotted = |part: &str, c: &dyn Fn(char) -> bool| {
        part.lines()
            .filter(|l| l.starts_with('│'))
            .any(|l| l.chars().any(c))
    };
    let braille = |c: char| ('\u{2801}'..='\u{28ff}').contains(&c);
    // The rate chart: offered in braille, delivered in dots.
    assert!(
        plotted(rate, &braille) && plotted(rate, &|c| c == '•'),
        "{rate}"
    );
    // The latency chart: p50 braille, p99 dots, p99.9 plus signs.
    assert!(
        plotted(latency, &braille)
            && plotted(latency, &|c| c == '•')
            && plotted(latency, &|c| c == '+'),
        "{latency}"
    );
    // In colour, braille alone, as before (the saved colour screens are unchanged).
    let coloured = crate::snap::screen(80, 24, |f| draw_in(f, &st, false));
    assert!(
        !coloured.contains('•') && !coloured.contains("offered ⠒"),
        "{coloured}"
    );
    assert_screen(&s, "load_udp_paused_end_nocolor_80x24.txt");
}
