//! The live view's layout: a status line, offered vs delivered pps, this interval's drops
//! by layer, latency over time, the rx_queue against its limit, softnet per CPU.

use super::axis::{legend, marker, y_axis, Scale, Unit};
use super::LiveState;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Chart, Clear, Dataset, Gauge, GraphType, Paragraph, Wrap};
use ratatui::Frame;

/// The smallest terminal the view lays out in, columns; below it one line says so.
pub const MIN_WIDTH: u16 = 80;
/// The smallest terminal the view lays out in, rows.
pub const MIN_HEIGHT: u16 = 24;

/// Draws `st` over the whole frame. A terminal smaller than [`MIN_WIDTH`] x [`MIN_HEIGHT`]
/// gets one line saying so (the run goes on).
pub fn draw(frame: &mut Frame, st: &LiveState) {
    let area = frame.area();
    if too_small(frame) {
        return;
    }
    let [status, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    status_line(frame, status, st);
    draw_body(frame, body, st, area.width);
    if st.help {
        help_overlay(frame, area, "run", UDP_HELP);
    }
}

/// What the UDP view's help says of its figures.
const UDP_HELP: &[&str] = &[
    "Figures are the --json-stream lines, one per interval;",
    "latency is from each request's intended send time.",
    "Drops: this interval's, then since the start.",
    "The full report prints when the run ends.",
];

/// When the terminal is smaller than [`MIN_WIDTH`] x [`MIN_HEIGHT`], one line saying so
/// (the run goes on), and true.
pub(super) fn too_small(frame: &mut Frame) -> bool {
    let area = frame.area();
    if area.width >= MIN_WIDTH && area.height >= MIN_HEIGHT {
        return false;
    }
    let msg = format!(
        "terminal too small ({}x{}; the live view needs {MIN_WIDTH}x{MIN_HEIGHT}); q ends the run",
        area.width, area.height
    );
    frame.render_widget(Paragraph::new(msg), area);
    true
}

/// The keys at the end of a status line whose other spans take `used` columns of
/// `width`: in full where they fit, else their letters.
pub(super) fn keys(used: usize, width: u16) -> Span<'static> {
    const FULL: &str = "q stop (2x quit)  p pause  ? help";
    let keys = if used + FULL.len() <= width as usize {
        FULL
    } else {
        "q p ?"
    };
    Span::styled(keys, Style::default().add_modifier(Modifier::DIM))
}

/// The charts and panels of one UDP run in `body` (a terminal `width` wide): offered vs
/// delivered pps and this interval's drops above, latency, the rx_queue and softnet
/// below.
pub(super) fn draw_body(frame: &mut Frame, body: Rect, st: &LiveState, width: u16) {
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
    let side = if width >= 120 { 52 } else { 38 };
    let [rates, drops] =
        Layout::horizontal([Constraint::Min(30), Constraint::Length(side)]).areas(top);
    let [lat, right] =
        Layout::horizontal([Constraint::Min(30), Constraint::Length(side)]).areas(bottom);
    let [queue, host] = Layout::vertical([Constraint::Length(4), Constraint::Min(0)]).areas(right);
    rate_chart(frame, rates, st);
    drops_panel(frame, drops, st);
    latency_chart(frame, lat, st);
    queue_gauge(frame, queue, st);
    host_panel(frame, host, st);
}

/// `block` with the legend's `below` part on its bottom border, left.
pub(super) fn with_below(block: Block<'static>, below: Option<Line<'static>>) -> Block<'static> {
    match below {
        Some(b) => block.title_bottom(b.left_aligned()),
        None => block,
    }
}

/// The offered rate's colour (its line and its name in the title).
const OFFERED: Color = Color::Cyan;
/// The delivered rate's colour.
const DELIVERED: Color = Color::Green;
/// The latency percentiles' colours: p50, p99, p99.9.
const PCTS: [Color; 3] = [Color::Green, Color::Yellow, Color::Red];

/// `12.3k`, `1.20M`: a rate or count in 4 characters or so.
pub(super) fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.2}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A latency in us as `850us`, `12.3ms`, `1.20s`.
pub(super) fn dur_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{us:.0}us")
    }
}

/// The command, the target, the run's time, STOPPING/PAUSED, the keys.
pub(super) fn status_line(frame: &mut Frame, area: Rect, st: &LiveState) {
    let flags = (st.stopping, st.paused);
    status_bar(frame, area, &st.header, st.elapsed_s(), flags);
}

/// [`status_line`] of the run `h`, `elapsed_s` in, (stopping, paused).
pub(super) fn status_bar(
    frame: &mut Frame,
    area: Rect,
    h: &super::LiveHeader,
    elapsed_s: f64,
    (stopping, paused): (bool, bool),
) {
    let elapsed = match h.planned_s {
        Some(p) => format!("{:.1} s / {:.1} s", elapsed_s, p),
        None => format!("{:.1} s", elapsed_s),
    };
    let mut spans = vec![
        Span::styled(
            format!(" tpslab {} ", h.command),
            Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ),
        Span::raw(format!(" {}  {elapsed}  ", h.target)),
    ];
    if stopping {
        spans.push(Span::styled(
            "STOPPING (writing the record) ",
            Style::default().fg(Color::Yellow),
        ));
    }
    if paused {
        spans.push(Span::styled("PAUSED ", Style::default().fg(Color::Yellow)));
    }
    let used: usize = spans.iter().map(|s| s.width()).sum();
    spans.push(keys(used, area.width));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn x_axis<'a>(st: &LiveState) -> Axis<'a> {
    x_axis_of(st.window())
}

/// The x axis of a chart over the window `[a, b]`, s.
pub(super) fn x_axis_of<'a>([a, b]: [f64; 2]) -> Axis<'a> {
    Axis::default()
        .bounds([a, b])
        .labels(vec![format!("{a:.0}s"), format!("{b:.1}s")])
}

fn rate_chart(frame: &mut Frame, area: Rect, st: &LiveState) {
    let offered: Vec<(f64, f64)> = st.offered.iter().copied().collect();
    let delivered: Vec<(f64, f64)> = st.delivered.iter().copied().collect();
    let last = st.last.as_ref();
    let now = |v: Option<f64>| v.map_or("-".to_string(), si);
    let mut items = vec![];
    // A watch sends nothing: no offered rate to name.
    if !offered.is_empty() || last.is_some_and(|f| f.offered_pps.is_some()) {
        items.push(("offered", now(last.and_then(|f| f.offered_pps)), OFFERED));
    }
    items.push((
        "delivered",
        now(last.and_then(|f| f.delivered_pps)),
        DELIVERED,
    ));
    let (title, below) = legend(" pps: ", &items, area.width);
    let block = with_below(Block::bordered().title(title), below);
    if offered.is_empty() && delivered.is_empty() {
        let msg = if st.frames == 0 {
            "waiting for the first interval"
        } else {
            "no rates in the stream yet (delivered: Udp InDatagrams, read every 100 ms)"
        };
        frame.render_widget(
            Paragraph::new(msg).block(block).wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let scale = Scale::of(offered.iter().chain(&delivered).map(|p| p.1));
    let (offered, delivered) = (scale.clip(offered), scale.clip(delivered));
    let block = match scale.mark(Unit::Rate) {
        Some(m) => block.title_bottom(m),
        None => block,
    };
    // Each series drawn with the marker of its place in the legend (told apart by it
    // without colours).
    let delivered_slot = items.len() - 1;
    let mut sets = vec![];
    if !offered.is_empty() {
        sets.push(
            Dataset::default()
                .marker(marker(0))
                .graph_type(GraphType::Line)
                .style(Style::default().fg(OFFERED))
                .data(&offered),
        );
    }
    sets.push(
        Dataset::default()
            .marker(marker(delivered_slot))
            .graph_type(GraphType::Line)
            .style(Style::default().fg(DELIVERED))
            .data(&delivered),
    );
    let chart = Chart::new(sets)
        .block(block)
        .x_axis(x_axis(st))
        .y_axis(y_axis(&scale, Unit::Rate))
        .legend_position(None);
    frame.render_widget(chart, area);
}

fn drops_panel(frame: &mut Frame, area: Rect, st: &LiveState) {
    let block = Block::bordered().title(" drops by layer: interval / total ");
    let (i, t) = (st.interval_drops, st.total_drops);
    let wide = area.width >= 50;
    let row = |name: &str, long: &str, a: u64, b: u64| {
        let style = if a > 0 {
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        let label = if wide { long } else { name };
        let w = if wide { 30 } else { 18 };
        Line::from(vec![
            Span::raw(format!("{label:<w$}")),
            Span::styled(format!("{:>8}", si(a as f64)), style),
            Span::raw(format!(" {:>8}", si(b as f64))),
        ])
    };
    let mut lines = vec![];
    if st.frames == 0 {
        lines.push(Line::from("waiting for the first interval"));
    } else {
        lines.push(row(
            "server socket",
            "server socket (udp drops)",
            i.socket,
            t.socket,
        ));
        lines.push(row(
            "RcvbufErrors",
            "Udp RcvbufErrors (namespace)",
            i.rcvbuf_errors,
            t.rcvbuf_errors,
        ));
        lines.push(row(
            "softnet backlog",
            "softnet backlog (host-wide)",
            i.softnet,
            t.softnet,
        ));
        lines.push(Line::styled(
            "NIC, no listener, send: not in the stream (see the ledger at the end)",
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn latency_chart(frame: &mut Frame, area: Rect, st: &LiveState) {
    let last = st.last.as_ref().and_then(|f| f.latency.as_ref());
    let of = LatencyOf {
        points: &st.latency,
        last,
        no_latency: st.header.no_latency.as_deref(),
        frames: st.frames,
        window: st.window(),
    };
    latency_chart_of(frame, area, &of);
}

/// What a latency chart draws: (t s, p50, p99, p99.9 us) in the window, the last
/// interval's, why there is none, intervals received, the window.
pub(super) struct LatencyOf<'a> {
    pub(super) points: &'a std::collections::VecDeque<(f64, f64, f64, f64)>,
    pub(super) last: Option<&'a super::FrameLatency>,
    pub(super) no_latency: Option<&'a str>,
    pub(super) frames: u64,
    pub(super) window: [f64; 2],
}

/// Latency p50/p99/p99.9 over time, the last interval's in the title.
pub(super) fn latency_chart_of(frame: &mut Frame, area: Rect, of: &LatencyOf) {
    let last = of.last;
    let title = match last {
        Some(l) => {
            let items: Vec<(&str, String, Color)> =
                [("p50", l.p50_us), ("p99", l.p99_us), ("p99.9", l.p999_us)]
                    .into_iter()
                    .zip(PCTS)
                    .map(|((name, v), c)| (name, dur_us(v), c))
                    .collect();
            legend(" latency: ", &items, area.width)
        }
        None if !of.points.is_empty() => (Line::from(" latency: no reply this interval "), None),
        None => (Line::from(" latency "), None),
    };
    let block = with_below(Block::bordered().title(title.0), title.1);
    if of.points.is_empty() {
        let msg = match (of.no_latency, of.frames) {
            (Some(why), _) => format!("no latency: {why}"),
            (None, 0) => "waiting for the first interval".to_string(),
            (None, _) => "no replies read yet".to_string(),
        };
        frame.render_widget(
            Paragraph::new(msg).block(block).wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let scale = Scale::of(of.points.iter().flat_map(|p| [p.1, p.2, p.3]));
    let p50 = scale.clip(of.points.iter().map(|p| (p.0, p.1)));
    let p99 = scale.clip(of.points.iter().map(|p| (p.0, p.2)));
    let p999 = scale.clip(of.points.iter().map(|p| (p.0, p.3)));
    let block = match scale.mark(Unit::LatencyUs) {
        Some(m) => block.title_bottom(m),
        None => block,
    };
    let set = |data, slot: usize| {
        Dataset::default()
            .marker(marker(slot))
            .graph_type(GraphType::Line)
            .style(Style::default().fg(PCTS[slot]))
            .data(data)
    };
    let chart = Chart::new(vec![set(&p50, 0), set(&p99, 1), set(&p999, 2)])
        .block(block)
        .x_axis(x_axis_of(of.window))
        .y_axis(y_axis(&scale, Unit::LatencyUs))
        .legend_position(None);
    frame.render_widget(chart, area);
}

fn queue_gauge(frame: &mut Frame, area: Rect, st: &LiveState) {
    let block = Block::bordered().title(" server rx_queue / SO_RCVBUF ");
    let Some(f) = st.last.as_ref() else {
        frame.render_widget(
            Paragraph::new("waiting for the first interval").block(block),
            area,
        );
        return;
    };
    match f.rcvbuf_limit_bytes.filter(|&l| l > 0) {
        Some(limit) => {
            let ratio = (f.rx_queue_bytes as f64 / limit as f64).clamp(0.0, 1.0);
            let color = if ratio >= 0.9 {
                Color::Red
            } else if ratio >= 0.5 {
                Color::Yellow
            } else {
                Color::Green
            };
            let label = format!(
                "{} / {} B ({:.0} %)",
                f.rx_queue_bytes,
                limit,
                ratio * 100.0
            );
            frame.render_widget(
                Gauge::default()
                    .block(block.title_bottom(format!(" peak {} B ", st.rx_queue_peak)))
                    .gauge_style(Style::default().fg(color))
                    .ratio(ratio)
                    .label(label),
                area,
            );
        }
        None => {
            let lines = vec![
                Line::from(format!(
                    "{} B now, peak {} B",
                    f.rx_queue_bytes, st.rx_queue_peak
                )),
                Line::styled(
                    "SO_RCVBUF limit not in the stream",
                    Style::default().add_modifier(Modifier::DIM),
                ),
            ];
            frame.render_widget(Paragraph::new(lines).block(block), area);
        }
    }
}

fn host_panel(frame: &mut Frame, area: Rect, st: &LiveState) {
    let block = Block::bordered().title(" softnet drops per CPU, threads ");
    let mut lines = vec![];
    if st.softnet_per_cpu.is_empty() {
        lines.push(Line::from(format!(
            "per CPU: not in the stream (all CPUs: {})",
            st.total_drops.softnet
        )));
    } else {
        let mut cells: Vec<Span> = vec![];
        for (cpu, d) in &st.softnet_per_cpu {
            let style = if *d > 0 {
                Style::default().fg(Color::Red)
            } else {
                Style::default()
            };
            cells.push(Span::styled(
                format!("cpu{cpu} {:<7}", si(*d as f64)),
                style,
            ));
        }
        lines.push(Line::from(cells));
    }
    lines.extend(thread_lines(st, area.width.saturating_sub(2) as usize));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

/// The server's threads as last read: a line of how many are in each state and call
/// (`threads: 3 S recvfrom, 1 R`), then one line per thread (`1234 udp-srv S recvfrom`),
/// each cut to `width`.
fn thread_lines(st: &LiveState, width: usize) -> Vec<Line<'static>> {
    let dim = Style::default().add_modifier(Modifier::DIM);
    if st.threads.is_empty() {
        return vec![Line::styled(
            "server threads: not read (they are with a server process: --pid, or found by its socket)",
            dim,
        )];
    }
    let what = |t: &super::LiveThread| match &t.wait {
        Some(w) => format!("{} {w}", t.state),
        None => t.state.to_string(),
    };
    let mut counts: Vec<(String, usize)> = vec![];
    for t in &st.threads {
        let w = what(t);
        match counts.iter_mut().find(|c| c.0 == w) {
            Some(c) => c.1 += 1,
            None => counts.push((w, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let summary: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
    let cut = |s: String| s.chars().take(width).collect::<String>();
    let mut lines = vec![Line::from(cut(format!("threads: {}", summary.join(", "))))];
    for t in &st.threads {
        let style = if t.state == 'R' || t.state == 'D' {
            Style::default().fg(Color::Yellow)
        } else {
            Style::default()
        };
        lines.push(Line::styled(
            cut(format!("{:>7} {:<15} {}", t.tid, t.comm, what(t))),
            style,
        ));
    }
    lines
}

/// The help overlay over the middle of `area`: the keys (q stops the `what` as Ctrl-C does,
/// a second q quits at once), then `figures`, the view's own words on what it shows.
pub(super) fn help_overlay(frame: &mut Frame, area: Rect, what: &str, figures: &[&str]) {
    let w = 62.min(area.width);
    let h = (8 + figures.len() as u16).min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    let mut text = vec![
        Line::from(format!(
            "q, Ctrl-C  stop the {what} as Ctrl-C does: the record is"
        )),
        Line::from("           written, marked interrupted, the host restored"),
        Line::from("           twice: quit at once (host restored, no record)"),
        Line::from("p          freeze the screen (again: go on)"),
        Line::from("?          this help (again: hide it)"),
        Line::from(""),
    ];
    text.extend(figures.iter().map(|l| Line::from(*l)));
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(text).block(Block::bordered().title(" help ")),
        r,
    );
}
