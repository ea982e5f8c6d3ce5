//! The live view of a command made of several UDP runs: `diagnose` (the run as is, then
//! with the fix), `sweep` (a run per cell and repeat), `capacity` (a step per rate tried).
//! The run going now is the UDP view ([`LiveState`], fed by the same per-interval lines as
//! `load udp --live`, started afresh for each run); above it, a table of the runs so far:
//! for a diagnosis each run's drops by layer (the verdict's evidence), for a sweep each
//! run's cell and figures as the table fills in, for a capacity search each step's rate and
//! call with the bracket so far (judged by the search's own [`bounds_so_far`]).

use super::draw::{draw_body, dur_us, help_overlay, si, status_line, too_small};
use super::{LiveFrame, LiveHeader, LiveState};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;
use tpslab_analysis::capacity::bounds_so_far;
use tpslab_record::capacity::{CapacityStep, StepStatus};
use tpslab_record::sweep::RunMetrics;

/// Which command's runs the table lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunsKind {
    /// `diagnose`: a row per run ended (its labelled phase), from its own lines: mean
    /// offered and delivered pps, drops by layer since its start, deepest rx_queue.
    Diagnose,
    /// `sweep`: a row per run done, of `planned` runs: its cell, TPS, loss, p99.
    Sweep {
        /// Runs in the sweep's plan.
        planned: usize,
    },
    /// `capacity`: a row per step judged (rate, achieved, p99, loss, the call) and the
    /// bracket so far.
    Capacity,
}

/// One row of the runs table: its label, its figures (already written as the table shows
/// them), and whether it went wrong (drops, a failed step: shown red).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// The run, e.g. `run 1: as is`, `3/12 cpus=0`, `step 4`.
    pub label: String,
    /// Its figures, one per column after the label.
    pub cells: Vec<String>,
    /// Something was lost or failed in it.
    pub bad: bool,
}

/// Sums over the current run's lines for its row: (pps x ms, ms) of offered and delivered.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Means {
    offered: (f64, f64),
    delivered: (f64, f64),
}

impl Means {
    fn add(&mut self, f: &LiveFrame) {
        for (v, acc) in [
            (f.offered_pps, &mut self.offered),
            (f.delivered_pps, &mut self.delivered),
        ] {
            if let Some(v) = v {
                acc.0 += v * f.interval_ms;
                acc.1 += f.interval_ms;
            }
        }
    }

    fn mean(acc: (f64, f64)) -> String {
        match acc.1 > 0.0 {
            true => si(acc.0 / acc.1),
            false => "-".into(),
        }
    }
}

/// What the screen of a command of several runs shows: the run going now (its UDP view
/// and label), the rows of the runs so far, a capacity search's steps.
#[derive(Debug, Clone)]
pub struct RunsLiveState {
    /// The command's runs.
    pub kind: RunsKind,
    /// The header every run's view starts with.
    pub header: LiveHeader,
    /// The run going now (the keys' flags live here).
    pub run: LiveState,
    /// Its label (the workflow's phase, or the sweep's cell), None before the first.
    pub current: Option<String>,
    /// The runs ended so far (diagnose, sweep).
    pub rows: Vec<RunRow>,
    /// A capacity search's steps judged so far.
    pub steps: Vec<CapacityStep>,
    means: Means,
}

impl RunsLiveState {
    /// An empty view of a command of `kind`'s runs, each shown under `header`.
    pub fn new(kind: RunsKind, header: LiveHeader) -> RunsLiveState {
        RunsLiveState {
            kind,
            run: LiveState::new(header.clone()),
            header,
            current: None,
            rows: vec![],
            steps: vec![],
            means: Means::default(),
        }
    }

    /// A run called `label` starts: the one before it gets its row (a diagnosis's; a
    /// sweep's and a search's come from their records), the UDP view starts afresh.
    pub fn start_run(&mut self, label: &str) {
        if self.kind == RunsKind::Diagnose && self.run.frames > 0 {
            if let Some(prev) = &self.current {
                let row = self.diagnose_row(prev);
                self.rows.push(row);
            }
        }
        self.current = Some(label.to_string());
        self.fresh_run();
    }

    /// The UDP view emptied for a new run, the keys' flags kept.
    fn fresh_run(&mut self) {
        let mut run = LiveState::new(self.header.clone());
        (run.paused, run.help, run.stopping) = (self.run.paused, self.run.help, self.run.stopping);
        self.run = run;
        self.means = Means::default();
    }

    /// Takes one interval of the run going now in (a line whose clock went back starts a
    /// new observer: the view starts afresh under the same label).
    pub fn push(&mut self, f: LiveFrame) {
        if self.run.last.as_ref().is_some_and(|l| f.t_ms < l.t_ms) {
            self.fresh_run();
        }
        self.means.add(&f);
        self.run.push(f);
    }

    /// A sweep's run `done` (1-based) of cell `cell` ended with the figures `m` (its
    /// record's, as the sweep's analysis reads them).
    pub fn sweep_done(&mut self, done: usize, cell: &str, m: &RunMetrics) {
        let planned = match self.kind {
            RunsKind::Sweep { planned } => planned,
            _ => 0,
        };
        self.rows.push(RunRow {
            label: format!("{done}/{planned} {cell}"),
            cells: vec![
                if m.tps.is_finite() {
                    si(m.tps)
                } else {
                    "-".into()
                },
                if m.loss_pct.is_finite() {
                    format!("{:.2} %", m.loss_pct)
                } else {
                    "-".into()
                },
                m.p99_us.map_or("-".into(), dur_us),
                if m.rxq_mean_bytes.is_finite() {
                    si(m.rxq_mean_bytes)
                } else {
                    "-".into()
                },
            ],
            bad: m.loss_pct > 0.0,
        });
    }

    /// A capacity search's steps judged so far (the whole list each time).
    pub fn set_steps(&mut self, steps: &[CapacityStep]) {
        self.steps = steps.to_vec();
    }

    /// The row of the diagnosis's run `label` that just ended, from its own lines.
    fn diagnose_row(&self, label: &str) -> RunRow {
        let (t, peak) = (self.run.total_drops, self.run.rx_queue_peak);
        RunRow {
            label: label.to_string(),
            cells: vec![
                Means::mean(self.means.offered),
                Means::mean(self.means.delivered),
                si(t.socket as f64),
                si(t.rcvbuf_errors as f64),
                si(t.softnet as f64),
                si(peak as f64),
            ],
            bad: t.socket + t.rcvbuf_errors + t.softnet > 0,
        }
    }

    /// The run going now as a diagnosis row (its figures so far).
    fn diagnose_now(&self) -> Option<RunRow> {
        let label = self.current.as_deref()?;
        (self.run.frames > 0).then(|| self.diagnose_row(label))
    }

    /// The capacity search's bracket so far, in words.
    pub fn bracket_line(&self) -> String {
        bracket_words(&self.steps, "pps")
    }

    /// The table's column names and rows (the newest last).
    fn table(&self) -> (Vec<&'static str>, Vec<RunRow>) {
        match self.kind {
            RunsKind::Diagnose => {
                let mut rows = self.rows.clone();
                rows.extend(self.diagnose_now());
                (
                    vec!["offered", "deliv", "socket", "rcvbuf", "softnet", "rxq max"],
                    rows,
                )
            }
            RunsKind::Sweep { .. } => (vec!["TPS", "loss", "p99", "rxq mean"], self.rows.clone()),
            RunsKind::Capacity => (CAPACITY_COLUMNS.to_vec(), capacity_rows(&self.steps)),
        }
    }
}

/// A capacity search's bracket so far (by the search's own [`bounds_so_far`]) in words,
/// rates in `unit`.
pub(super) fn bracket_words(steps: &[CapacityStep], unit: &str) -> String {
    if steps.is_empty() {
        return "bracket: none yet (the first step is running)".into();
    }
    match bounds_so_far(steps) {
        (Some(l), Some(h)) => format!(
            "bracket so far: sustains {} {unit}, fails at {} {unit}",
            si(l),
            si(h)
        ),
        (Some(l), None) => format!("bracket so far: sustains {} {unit}, no failure yet", si(l)),
        (None, Some(h)) => format!("bracket so far: nothing passed, fails at {} {unit}", si(h)),
        (None, None) => "bracket so far: no step counted yet".into(),
    }
}

/// The columns of a capacity search's table.
pub(super) const CAPACITY_COLUMNS: [&str; 5] = ["rate", "achieved", "p99", "loss", "call"];

/// A capacity search's steps as table rows (a failed step shown red).
pub(super) fn capacity_rows(steps: &[CapacityStep]) -> Vec<RunRow> {
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| RunRow {
            label: format!("step {}", i + 1),
            cells: vec![
                si(s.rate_pps),
                si(s.achieved_pps),
                s.latency_ns
                    .map_or("-".into(), |l| dur_us(l[2] as f64 / 1e3)),
                s.loss_pct.map_or("-".into(), |l| format!("{l:.2} %")),
                s.status.word().to_string(),
            ],
            bad: s.status == StepStatus::Fail,
        })
        .collect()
}

/// Draws `st` over the whole frame: the status line of the run going now, the runs so far,
/// the run's UDP view. A terminal smaller than [`super::MIN_WIDTH`] x
/// [`super::MIN_HEIGHT`] gets one line saying so (the runs go on).
pub fn draw_runs(frame: &mut Frame, st: &RunsLiveState) {
    let area = frame.area();
    if too_small(frame) {
        return;
    }
    let (_, rows) = st.table();
    let extra = u16::from(st.kind == RunsKind::Capacity);
    // Borders, the column names, the bracket; the newest rows that fit in a third.
    let want = 3 + extra + rows.len().max(1) as u16;
    let table_h = want.min(area.height / 3);
    let [status, table, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_h),
        Constraint::Min(0),
    ])
    .areas(area);
    status_line(frame, status, &st.run);
    runs_table(frame, table, st);
    draw_body(frame, body, &st.run, area.width);
    if st.run.help {
        help_overlay(frame, area, "run", RUNS_HELP);
    }
}

/// What the help of a view of several runs says of its figures.
const RUNS_HELP: &[&str] = &[
    "The table: the runs so far (a diagnosis: each run's drops",
    "by layer; a sweep: each run's cell; capacity: each step's",
    "call and the bracket). Below, the run going now, from the",
    "--json-stream lines. The full report prints at the end.",
];

fn runs_table(frame: &mut Frame, area: Rect, st: &RunsLiveState) {
    let what = match st.kind {
        RunsKind::Diagnose => "diagnosis",
        RunsKind::Sweep { .. } => "sweep",
        RunsKind::Capacity => "capacity search",
    };
    let title = match &st.current {
        Some(c) => format!(" {what}: now {c} "),
        None => format!(" {what}: starting "),
    };
    let (cols, rows) = st.table();
    let bracket = (st.kind == RunsKind::Capacity).then(|| st.bracket_line());
    table_panel(frame, area, title, &cols, &rows, bracket);
}

/// A table of runs in a bordered box called `title`: the column names, the `bracket` line
/// when given, then the newest `rows` that fit.
pub(super) fn table_panel(
    frame: &mut Frame,
    area: Rect,
    title: String,
    cols: &[&str],
    rows: &[RunRow],
    bracket: Option<String>,
) {
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let col_w = if inner.width >= 100 { 9usize } else { 8 };
    let label_w = (inner.width as usize)
        .saturating_sub(cols.len() * (col_w + 1))
        .clamp(8, 32);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut head = format!("{:<label_w$}", "run");
    for c in cols {
        head.push_str(&format!(" {c:>col_w$}"));
    }
    let mut lines = vec![Line::styled(head, bold)];
    if let Some(b) = bracket {
        lines.push(Line::styled(b, Style::default().fg(Color::Yellow)));
    }
    if rows.is_empty() {
        lines.push(Line::styled(
            "no run ended yet",
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
    let room = (inner.height as usize).saturating_sub(lines.len());
    for r in &rows[rows.len().saturating_sub(room)..] {
        let mut label: String = r.label.chars().take(label_w).collect();
        label = format!("{label:<label_w$}");
        let mut spans = vec![Span::raw(label)];
        let style = if r.bad {
            Style::default().fg(Color::Red)
        } else {
            Style::default()
        };
        for c in &r.cells {
            spans.push(Span::styled(format!(" {c:>col_w$}"), style));
        }
        lines.push(Line::from(spans));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}
