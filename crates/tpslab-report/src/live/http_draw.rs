//! The HTTP view's layout ([`super::http`]): a status line, a progress gauge, a capacity
//! search's steps when there is one, intended vs achieved requests/s, replies by status
//! code and errors by kind (this interval's and since the start) with the connections and
//! requests in flight, latency over time, the latency histogram since the start.

use super::axis::{legend, marker, y_axis, Scale, Unit};
use super::draw::{help_overlay, si, status_bar, too_small, x_axis_of, LatencyOf};
use super::http::HttpLiveState;
use super::http_panels::{histogram_panel, progress_gauge};
use super::runs::{bracket_words, capacity_rows, table_panel, CAPACITY_COLUMNS};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Chart, Dataset, GraphType, Paragraph, Wrap};
use ratatui::Frame;
use tpslab_record::http_counts::ErrorKinds;

/// The intended rate's colour.
const INTENDED: Color = Color::Cyan;
/// The achieved (written) rate's colour.
const SENT: Color = Color::Green;
/// The answered rate's colour.
const ANSWERED: Color = Color::Magenta;

/// Draws `st` over the whole frame. A terminal smaller than [`super::MIN_WIDTH`] x
/// [`super::MIN_HEIGHT`] gets one line saying so (the run goes on).
pub fn draw_http(frame: &mut Frame, st: &HttpLiveState) {
    let area = frame.area();
    if too_small(frame) {
        return;
    }
    let table_h = match &st.search {
        // Borders, the column names, the bracket; the newest rows that fit in a third.
        Some(s) => (4 + s.steps.len().max(1) as u16).min(area.height / 3),
        None => 0,
    };
    let [status, gauge, table, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(table_h),
        Constraint::Min(0),
    ])
    .areas(area);
    status_bar(
        frame,
        status,
        &st.header,
        st.elapsed_s(),
        (st.stopping, st.paused),
    );
    progress_gauge(frame, gauge, st);
    if let Some(s) = &st.search {
        let title = match &s.current {
            Some(c) => format!(" capacity search: now {c} "),
            None => " capacity search: starting ".to_string(),
        };
        let bracket = bracket_words(&s.steps, "req/s");
        let rows = capacity_rows(&s.steps);
        table_panel(frame, table, title, &CAPACITY_COLUMNS, &rows, Some(bracket));
    }
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
    let side = if area.width >= 120 { 52 } else { 38 };
    let [rates, replies] =
        Layout::horizontal([Constraint::Min(30), Constraint::Length(side)]).areas(top);
    let [lat, hist] =
        Layout::horizontal([Constraint::Min(30), Constraint::Length(side)]).areas(bottom);
    rate_chart(frame, rates, st);
    replies_panel(frame, replies, st);
    let of = LatencyOf {
        points: &st.latency,
        last: st.last.as_ref().and_then(|f| f.latency.as_ref()),
        no_latency: st.header.no_latency.as_deref(),
        frames: st.frames,
        window: st.window(),
    };
    super::draw::latency_chart_of(frame, lat, &of);
    histogram_panel(frame, hist, st);
    if st.help {
        let what = if st.search.is_some() { "search" } else { "run" };
        help_overlay(frame, area, what, HTTP_HELP);
    }
}

/// What the HTTP view's help says of its figures.
const HTTP_HELP: &[&str] = &[
    "Figures are the --json-stream lines, one per 250 ms; latency",
    "is from each request's intended send time (corrected for",
    "coordinated omission). Replies by status code and errors:",
    "this interval's, then since the start; the histogram and",
    "the requests done: since the start. The full report prints",
    "at the end.",
];

fn rate_chart(frame: &mut Frame, area: Rect, st: &HttpLiveState) {
    let last = st.last.as_ref();
    let now = |v: Option<f64>| v.map_or("-".to_string(), si);
    let (title, below) = legend(
        " req/s: ",
        &[
            ("intended", now(last.map(|f| f.intended_rps)), INTENDED),
            ("achieved", now(last.map(|f| f.sent_rps)), SENT),
            ("answered", now(last.map(|f| f.answered_rps)), ANSWERED),
        ],
        area.width,
    );
    let block = super::draw::with_below(Block::bordered().title(title), below);
    if st.frames == 0 {
        frame.render_widget(
            Paragraph::new("waiting for the first interval").block(block),
            area,
        );
        return;
    }
    let series: Vec<(Vec<(f64, f64)>, Color)> = [
        (&st.intended, INTENDED),
        (&st.sent, SENT),
        (&st.answered, ANSWERED),
    ]
    .into_iter()
    .map(|(q, c)| (q.iter().copied().collect(), c))
    .collect();
    let scale = Scale::of(series.iter().flat_map(|s| s.0.iter().map(|p| p.1)));
    let series: Vec<(Vec<(f64, f64)>, Color)> = series
        .into_iter()
        .map(|(d, c)| (scale.clip(d), c))
        .collect();
    let block = match scale.mark(Unit::Rate) {
        Some(m) => block.title_bottom(m),
        None => block,
    };
    // In the legend's order: each series with the marker of its place.
    let sets = series
        .iter()
        .enumerate()
        .map(|(slot, (data, c))| {
            Dataset::default()
                .marker(marker(slot))
                .graph_type(GraphType::Line)
                .style(Style::default().fg(*c))
                .data(data)
        })
        .collect();
    let chart = Chart::new(sets)
        .block(block)
        .x_axis(x_axis_of(st.window()))
        .y_axis(y_axis(&scale, Unit::Rate))
        .legend_position(None);
    frame.render_widget(chart, area);
}

/// The kinds of `e` with their names, in the record's order.
fn kinds(e: &ErrorKinds) -> [(&'static str, u64); 7] {
    [
        ("refused", e.refused),
        ("reset", e.reset),
        ("timeout", e.timeout),
        ("closed by peer", e.closed),
        // A response no request asked for is a protocol error of its own kind.
        ("protocol", e.protocol + e.unsolicited),
        ("tls", e.tls),
        ("other", e.other),
    ]
}

/// Replies by status code (by class in a stream without codes) and errors by kind, this
/// interval's and since the start, then the connections and requests in flight.
fn replies_panel(frame: &mut Frame, area: Rect, st: &HttpLiveState) {
    let block = Block::bordered().title(" replies, errors: interval/total ");
    let Some(f) = st.last.as_ref() else {
        frame.render_widget(
            Paragraph::new("waiting for the first interval").block(block),
            area,
        );
        return;
    };
    let w = if area.width >= 50 { 30 } else { 18 };
    let row = |label: &str, a: u64, b: u64, bad: bool| {
        let style = if bad && a > 0 {
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        Line::from(vec![
            Span::raw(format!("{label:<w$}")),
            Span::styled(format!("{:>8}", si(a as f64)), style),
            Span::raw(format!(" {:>8}", si(b as f64))),
        ])
    };
    let mut lines = if st.total_codes.is_empty() {
        class_rows(st, f, &row)
    } else {
        // Each code seen since the start; 4xx, 5xx and codes outside 2xx/3xx in red.
        let mut v: Vec<Line> = st
            .total_codes
            .iter()
            .map(|(code, n)| row(&code.to_string(), f.codes.get(code), n, code >= 400))
            .collect();
        if st.total_codes.more() > 0 {
            let (a, b) = (f.codes.more(), st.total_codes.more());
            v.push(row("more codes", a, b, true));
        }
        v
    };
    let mut failed = false;
    for (prefix, now, total) in [
        ("", &f.errors, &st.total_errors),
        ("connect ", &f.connect_errors, &st.total_connect_errors),
    ] {
        for ((name, a), (_, b)) in kinds(now).into_iter().zip(kinds(total)) {
            if b > 0 {
                failed = true;
                lines.push(row(&format!("{prefix}{name}"), a, b, true));
            }
        }
    }
    if !failed {
        lines.push(Line::styled(
            "no request or connect failed",
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
    lines.extend(connection_lines(st, f));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

/// The replies by status class (a stream written before codes were counted): 2xx always,
/// the others once seen.
fn class_rows(
    st: &HttpLiveState,
    f: &super::http::HttpFrame,
    row: &dyn Fn(&str, u64, u64, bool) -> Line<'static>,
) -> Vec<Line<'static>> {
    let (s, t) = (&f.status, &st.total_status);
    let mut lines = vec![row("2xx", s.s2xx, t.s2xx, false)];
    for (name, a, b) in [
        ("3xx", s.s3xx, t.s3xx),
        ("4xx", s.s4xx, t.s4xx),
        ("5xx", s.s5xx, t.s5xx),
        ("other status", s.other, t.other),
    ] {
        if b > 0 {
            lines.push(row(name, a, b, name != "3xx"));
        }
    }
    lines
}

/// The connections open (and their peak), requests in flight, the achieved share of the
/// intended rate.
fn connection_lines(st: &HttpLiveState, f: &super::http::HttpFrame) -> Vec<Line<'static>> {
    let conns = match f.connections {
        Some(n) => format!("{n} (peak {})", st.connections_peak),
        None => "not counted (sock_diag)".to_string(),
    };
    let share = f.sent_rps / f.intended_rps * 100.0;
    let achieved = if f.intended_rps > 0.0 {
        // `100 %`, not `100.0 %`: the line fits 36 columns.
        let digits = usize::from(share < 99.95);
        format!("{share:.digits$} % of intended")
    } else {
        "- (none intended)".to_string()
    };
    vec![
        Line::from(format!("connections open  {conns}")),
        Line::from(format!("in flight         {}", f.in_flight)),
        Line::from(format!("achieved          {achieved}")),
    ]
}
