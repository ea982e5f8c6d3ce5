//! The live view of a ramp (`ramp tcp|udp|http --live`): fed by the steps the ramp hands
//! its `--metrics-listen` exporter (every step measured so far, as each one ends), it shows
//! the step being run, TPS against users so far (a bar per step), response time mean/p99
//! and errors/timeouts per step, and the knee as soon as the steps so far show it.
//!
//! The knee is judged by the same pure function the record's analysis uses
//! ([`tpslab_analysis::usl::find_knee`], the first step whose TPS gain per user gain falls
//! below `--knee-gain` while response time rises): it looks only at the steps up to the
//! knee, so a knee found on the steps so far is the one the analysis finds at the end.

use tpslab_analysis::usl::{find_knee, StepPoint};
use tpslab_record::ramp::StepResult;

use super::draw::{dur_us, help_overlay, keys, si, too_small};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

/// What the ramp is, for the status line and the pending steps.
#[derive(Debug, Clone, PartialEq)]
pub struct RampHeader {
    /// The command, e.g. `ramp tcp`.
    pub command: String,
    /// The target, e.g. `127.0.0.1:9000` or a URL.
    pub target: String,
    /// The users of each planned step, in order.
    pub users: Vec<usize>,
    /// Unmeasured start of each step, s.
    pub warmup_s: f64,
    /// Measured window of each step, s.
    pub window_s: f64,
    /// Think time between a reply and the next request, s (for the knee's points).
    pub think_s: f64,
    /// The knee's threshold: TPS gain per user gain (`--knee-gain`).
    pub knee_gain: f64,
}

impl RampHeader {
    /// One step's planned length (warm-up + window), s.
    pub fn step_s(&self) -> f64 {
        self.warmup_s + self.window_s
    }

    /// The whole plan's length, s.
    pub fn planned_s(&self) -> f64 {
        self.step_s() * self.users.len() as f64
    }
}

/// What the ramp's screen shows: the header, the steps measured so far, the time since the
/// ramp started (from the view's clock: the steps arrive only at their ends) and the keys'
/// state.
#[derive(Debug, Clone)]
pub struct RampLiveState {
    /// The ramp.
    pub header: RampHeader,
    /// Every step measured so far, in order.
    pub steps: Vec<StepResult>,
    /// Seconds since the ramp started.
    pub elapsed_s: f64,
    /// The screen is frozen (`p`).
    pub paused: bool,
    /// The help overlay is shown (`?`).
    pub help: bool,
    /// The ramp was asked to stop (`q`): the record is being written.
    pub stopping: bool,
}

/// The step being run now, as the plan and the steps so far tell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurrentStep {
    /// Its index (0-based) in the plan.
    pub index: usize,
    /// Its users.
    pub users: usize,
    /// Seconds into it (warm-up included), from the plan's clock.
    pub into_s: f64,
}

impl RampLiveState {
    /// An empty view of the ramp `header`.
    pub fn new(header: RampHeader) -> RampLiveState {
        RampLiveState {
            header,
            steps: Vec::new(),
            elapsed_s: 0.0,
            paused: false,
            help: false,
            stopping: false,
        }
    }

    /// The steps measured so far (the ramp's whole list each time; the view keeps the last).
    pub fn set_steps(&mut self, steps: &[StepResult]) {
        self.steps = steps.to_vec();
    }

    /// The step being run: the first not yet measured, its time from the plan (step k
    /// runs from k x step_s); None once every planned step is measured.
    pub fn current(&self) -> Option<CurrentStep> {
        let index = self.steps.len();
        let users = *self.header.users.get(index)?;
        let step_s = self.header.step_s();
        let into_s = (self.elapsed_s - index as f64 * step_s).clamp(0.0, step_s);
        Some(CurrentStep {
            index,
            users,
            into_s,
        })
    }

    /// The knee among the steps so far (index into `steps`), judged as the analysis does.
    pub fn knee(&self) -> Option<usize> {
        let pts: Vec<StepPoint> = self
            .steps
            .iter()
            .map(|s| StepPoint {
                users: s.users as f64,
                tps: s.tps,
                mean_response_s: s.response.mean_ns / 1e9,
                think_s: self.header.think_s,
            })
            .collect();
        find_knee(&pts, self.header.knee_gain)
    }

    /// The knee line: where it is, or that it is not there (yet).
    pub fn knee_line(&self) -> String {
        match self.knee() {
            Some(k) => {
                let s = &self.steps[k];
                format!(
                    "knee: at {} ({} TPS): beyond it TPS grew by less than {:.0} % of the users' growth while response time rose",
                    users(s.users),
                    tps(s.tps),
                    self.header.knee_gain * 100.0
                )
            }
            None if self.current().is_none() => {
                "no knee: TPS kept growing with users over the whole ramp".into()
            }
            None if self.steps.len() < 2 => "knee: judged at the end (needs two steps)".into(),
            None => format!(
                "knee: none in the {} steps so far (judged again as each step ends)",
                self.steps.len()
            ),
        }
    }
}

fn users(n: usize) -> String {
    match n {
        1 => "1 user".into(),
        n => format!("{n} users"),
    }
}

/// TPS with one decimal below 10k, else as `12.3k`.
fn tps(v: f64) -> String {
    if v.abs() >= 1e4 {
        si(v)
    } else {
        format!("{v:.1}")
    }
}

/// Errors of a step: (timeouts, other failures).
fn errors(s: &StepResult) -> (u64, u64) {
    let t = s.errors.get("timeout").copied().unwrap_or(0);
    let all: u64 = s.errors.values().sum();
    (t, all - t)
}

/// Draws `st` over the whole frame. A terminal smaller than [`super::MIN_WIDTH`] x [`super::MIN_HEIGHT`]
/// gets one line saying so (the ramp goes on).
pub fn draw_ramp(frame: &mut Frame, st: &RampLiveState) {
    let area = frame.area();
    if too_small(frame) {
        return;
    }
    let [status, step, knee, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(2),
        Constraint::Min(0),
    ])
    .areas(area);
    status_line(frame, status, st);
    step_line(frame, step, st);
    let style = if st.knee().is_some() {
        Style::default()
            .fg(Color::Yellow)
            .add_modifier(Modifier::BOLD)
    } else {
        Style::default().add_modifier(Modifier::DIM)
    };
    frame.render_widget(
        Paragraph::new(Line::styled(st.knee_line(), style)).wrap(Wrap { trim: true }),
        knee,
    );
    let [bars, table] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
    tps_bars(frame, bars, st);
    step_table(frame, table, st);
    if st.help {
        help_overlay(frame, area, "ramp", RAMP_HELP);
    }
}

/// The command, the target, the keys.
fn status_line(frame: &mut Frame, area: Rect, st: &RampLiveState) {
    let h = &st.header;
    let mut spans = vec![
        Span::styled(
            format!(" tpslab {} ", h.command),
            Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ),
        Span::raw(format!(" {}  ", h.target)),
    ];
    let used: usize = spans.iter().map(|s| s.width()).sum();
    spans.push(keys(used, area.width));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The step being run (k of n, its users, its time from the plan), the ramp's time.
fn step_line(frame: &mut Frame, area: Rect, st: &RampLiveState) {
    let h = &st.header;
    let n = h.users.len();
    let step = match st.current() {
        Some(c) => format!(
            "step {} of {n}: {}, {:.1} s of {:.1} s",
            c.index + 1,
            users(c.users),
            c.into_s,
            h.step_s()
        ),
        None => format!("step {n} of {n}: done"),
    };
    let mut spans = vec![Span::raw(format!(
        "{step}   elapsed {:.1} s / {:.1} s  ",
        st.elapsed_s.min(h.planned_s()),
        h.planned_s()
    ))];
    if st.stopping {
        spans.push(Span::styled(
            "STOPPING (writing the record) ",
            Style::default().fg(Color::Yellow),
        ));
    }
    if st.paused {
        spans.push(Span::styled("PAUSED ", Style::default().fg(Color::Yellow)));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The rows a list of `total` fits in `rows`: the last ones (the newest steps) when it
/// does not all fit.
fn visible(total: usize, rows: usize) -> std::ops::Range<usize> {
    total.saturating_sub(rows)..total
}

fn tps_bars(frame: &mut Frame, area: Rect, st: &RampLiveState) {
    let block = Block::bordered().title(" TPS by users (a bar per step) ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let n = st.header.users.len();
    // Done steps, the current one, then those to come; the newest that fit.
    let shown = (st.steps.len() + 1).min(n);
    let range = visible(shown, inner.height as usize);
    let max = st.steps.iter().map(|s| s.tps).fold(0.0, f64::max);
    let label_w = 13usize;
    // " 12.3k TPS  <- knee"
    let value_w = 20usize;
    let bar_w = (inner.width as usize).saturating_sub(label_w + value_w + 1);
    let knee = st.knee();
    let mut lines = vec![];
    for i in range {
        let u = st.header.users[i];
        let label = format!("{:>12} ", users(u));
        match st.steps.get(i) {
            Some(s) => {
                let len = if max > 0.0 {
                    ((s.tps / max) * bar_w as f64).round() as usize
                } else {
                    0
                };
                let color = if knee.is_some_and(|k| i > k) {
                    Color::Yellow
                } else {
                    Color::Green
                };
                let mut spans = vec![
                    Span::raw(label),
                    Span::styled("█".repeat(len), Style::default().fg(color)),
                    Span::raw(format!(" {} TPS", tps(s.tps))),
                ];
                if knee == Some(i) {
                    spans.push(Span::styled(
                        "  <- knee",
                        Style::default()
                            .fg(Color::Yellow)
                            .add_modifier(Modifier::BOLD),
                    ));
                }
                lines.push(Line::from(spans));
            }
            None => {
                let into = st.current().map_or(0.0, |c| c.into_s);
                // The plan's time is up, the figures not in yet (the step's samplers end).
                let phase = if into >= st.header.step_s() {
                    "measured, its figures coming"
                } else if into < st.header.warmup_s {
                    "warming up"
                } else {
                    "measuring"
                };
                lines.push(Line::from(vec![
                    Span::raw(label),
                    Span::styled(
                        format!("{phase}, {into:.1} s of {:.1} s", st.header.step_s()),
                        Style::default().add_modifier(Modifier::DIM),
                    ),
                ]));
            }
        }
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

fn step_table(frame: &mut Frame, area: Rect, st: &RampLiveState) {
    let block = Block::bordered().title(" response time and failures per step ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let head = format!(
        "{:>6}  {:>10}  {:>9}  {:>9}  {:>8}  {:>8}",
        "users", "TPS", "mean", "p99", "errors", "timeouts"
    );
    let mut lines = vec![Line::styled(
        head,
        Style::default().add_modifier(Modifier::BOLD),
    )];
    if st.steps.is_empty() {
        lines.push(Line::styled(
            "no step measured yet (a step's figures come at its end)",
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
    let rows = (inner.height as usize).saturating_sub(1);
    for s in &st.steps[visible(st.steps.len(), rows)] {
        let (t, e) = errors(s);
        let bad = |v: u64| {
            if v > 0 {
                Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
            } else {
                Style::default()
            }
        };
        // No reply in the step: no response time (not a 0).
        let rt = |ns: f64| match s.completed {
            0 => "-".to_string(),
            _ => dur_us(ns / 1e3),
        };
        lines.push(Line::from(vec![
            Span::raw(format!(
                "{:>6}  {:>10}  {:>9}  {:>9}  ",
                s.users,
                tps(s.tps),
                rt(s.response.mean_ns),
                rt(s.response.p99_ns as f64),
            )),
            Span::styled(format!("{e:>8}"), bad(e)),
            Span::raw("  "),
            Span::styled(format!("{t:>8}"), bad(t)),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// What the ramp view's help says of its figures.
const RAMP_HELP: &[&str] = &[
    "A step's figures come when it ends (the ones the",
    "--metrics-listen exporter serves); the step being run",
    "shows its time from the plan. The knee is the analysis's",
    "rule on the steps so far. The report prints at the end.",
];
