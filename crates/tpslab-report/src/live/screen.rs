//! The live view's loop, apart from the terminal it runs on: each screen fed by what its
//! run hands it ([`Screen`]), drawn every tick into any ratatui backend, its keys taken
//! from a [`KeySource`] (all those pending at once: [`super::keys`]). The binary gives it
//! the crossterm terminal and the keys read from the tty; a test gives it a TestBackend.

use super::keys::{commands, Key, KeyFlags, Keyed};
use super::{HttpFrame, HttpLiveState, LiveFrame, LiveState, RampLiveState, RunsLiveState};
use ratatui::backend::Backend;
use ratatui::Terminal;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::Duration;
use tpslab_record::capacity::CapacityStep;
use tpslab_record::ramp::StepResult;
use tpslab_record::sweep::RunMetrics;

/// What the view's loop draws: a state fed by what the run hands it, with the keys'
/// flags.
pub trait Screen: KeyFlags + Send + 'static {
    /// What the run hands the view (a sample, the steps so far).
    type Item: Send + 'static;
    /// Takes one in.
    fn take(&mut self, item: Self::Item);
    /// The view's clock: `since` the view started (for screens fed only now and then).
    fn tick(&mut self, _since: Duration) {}
    /// Draws the whole frame.
    fn draw(&self, f: &mut ratatui::Frame);
}

impl Screen for LiveState {
    type Item = LiveFrame;
    fn take(&mut self, item: LiveFrame) {
        self.push(item);
    }
    fn draw(&self, f: &mut ratatui::Frame) {
        super::draw(f, self)
    }
}

impl Screen for RampLiveState {
    type Item = Vec<StepResult>;
    fn take(&mut self, item: Vec<StepResult>) {
        self.set_steps(&item);
    }
    fn tick(&mut self, since: Duration) {
        self.elapsed_s = since.as_secs_f64();
    }
    fn draw(&self, f: &mut ratatui::Frame) {
        super::draw_ramp(f, self)
    }
}

/// What a command of several runs tells its view.
pub enum RunsItem {
    /// A run (a phase, a sweep's cell) called this starts.
    Run(String),
    /// One interval of the run going now.
    Frame(LiveFrame),
    /// A sweep's run ended: runs done, its cell's label, its figures.
    SweepDone(usize, String, Box<RunMetrics>),
    /// A capacity search's steps judged so far.
    Steps(Vec<CapacityStep>),
}

impl Screen for RunsLiveState {
    type Item = RunsItem;
    fn take(&mut self, item: RunsItem) {
        match item {
            RunsItem::Run(label) => self.start_run(&label),
            RunsItem::Frame(f) => self.push(f),
            RunsItem::SweepDone(done, cell, m) => self.sweep_done(done, &cell, &m),
            RunsItem::Steps(steps) => self.set_steps(&steps),
        }
    }
    fn draw(&self, f: &mut ratatui::Frame) {
        super::draw_runs(f, self)
    }
}

/// What an open loop of HTTP requests tells its view.
pub enum HttpItem {
    /// A capacity search's step called this starts.
    Run(String),
    /// One interval of the run going now.
    Frame(Box<HttpFrame>),
    /// A capacity search's steps judged so far.
    Steps(Vec<CapacityStep>),
}

impl Screen for HttpLiveState {
    type Item = HttpItem;
    fn take(&mut self, item: HttpItem) {
        match item {
            HttpItem::Run(label) => self.start_run(&label),
            HttpItem::Frame(f) => self.push(*f),
            HttpItem::Steps(steps) => self.set_steps(&steps),
        }
    }
    fn draw(&self, f: &mut ratatui::Frame) {
        super::draw_http(f, self)
    }
}

/// Where the view's keys come from (the terminal).
pub trait KeySource {
    /// Waits up to `timeout` for the terminal to be readable, then returns every key
    /// pending (empty: none came), or None when the terminal was hung up. Errors: the
    /// terminal cannot be read.
    fn keys(&mut self, timeout: Duration) -> std::io::Result<Option<Vec<Key>>>;
}

/// How the view's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewEnd {
    /// `done` was set: the run ended.
    Done,
    /// The terminal was hung up, or could not be drawn on: nobody sees the view nor can
    /// press `q` (the caller stops the run as on SIGHUP).
    HungUp,
}

/// The view's loop until `done`: every `tick`, take in what came on `rx`, draw (the
/// frozen copy while paused, `stopping` shown once `stop` is set), then wait for keys and
/// apply them all (`on_stop` for each `q` or Ctrl-C). Errors: the key source's.
pub fn run_view<S: Screen, B: Backend>(
    term: &mut Terminal<B>,
    st: S,
    rx: &mpsc::Receiver<S::Item>,
    keys: &mut dyn KeySource,
    (stop, done): (&AtomicBool, &AtomicBool),
    on_stop: &mut dyn FnMut(),
    tick: Duration,
) -> std::io::Result<ViewEnd> {
    let t0 = std::time::Instant::now();
    let mono = no_color();
    let mut view = Keyed::new(st);
    while !done.load(Relaxed) {
        while let Ok(f) = rx.try_recv() {
            view.st.take(f);
        }
        view.st.tick(t0.elapsed());
        let shown = view.shown(stop.load(Relaxed));
        if term.draw(|f| draw_in(f, shown, mono)).is_err() {
            return Ok(ViewEnd::HungUp);
        }
        let Some(pending) = keys.keys(tick)? else {
            return Ok(ViewEnd::HungUp);
        };
        // Raw mode turns Ctrl-C into a key: the first q or Ctrl-C stops the run as a
        // SIGINT does; a second one is a real SIGINT, which quits at once (host settings
        // restored, the terminal given back) as a second Ctrl-C does without --live.
        view.apply(&commands(&pending), on_stop);
    }
    Ok(ViewEnd::Done)
}

/// Whether the view is drawn without colours: `NO_COLOR` set and not empty
/// (no-color.org).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Draws `screen` into `f`, without colours when `mono` ([`monochrome`]; the charts'
/// series then told apart by their markers: [`super::axis::without_colours`]).
pub fn draw_in<S: Screen>(f: &mut ratatui::Frame, screen: &S, mono: bool) {
    // Without colours each chart's series has a marker of its own.
    super::axis::without_colours(mono, || screen.draw(f));
    if mono {
        monochrome(f.buffer_mut());
    }
}

/// `buf` without colours: every cell's foreground and background the terminal's own
/// (bold, dim and reversed stay: they are not colours).
pub fn monochrome(buf: &mut ratatui::buffer::Buffer) {
    for c in buf.content.iter_mut() {
        c.set_fg(ratatui::style::Color::Reset);
        c.set_bg(ratatui::style::Color::Reset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::LiveHeader;
    use ratatui::backend::TestBackend;

    /// Keys typed in turns: each call gives one turn's keys (all at once); after the last
    /// the run is done.
    struct Typed<'a>(Vec<&'static str>, &'a AtomicBool);

    impl KeySource for Typed<'_> {
        fn keys(&mut self, _timeout: Duration) -> std::io::Result<Option<Vec<Key>>> {
            if self.0.is_empty() {
                self.1.store(true, Relaxed);
                return Ok(Some(vec![]));
            }
            let turn = self.0.remove(0);
            Ok(Some(turn.chars().map(|c| Key::Char(c, false)).collect()))
        }
    }

    #[test]
    fn keys_read_in_one_turn_are_drawn_at_the_next_tick() {
        let header = LiveHeader {
            command: "load http".into(),
            target: "http://127.0.0.1:9/".into(),
            planned_s: Some(4.0),
            planned_requests: None,
            no_latency: None,
        };
        let (stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
        let (_tx, rx) = mpsc::channel();
        let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
        // `p?` in one read, then nothing: the last frame drawn is paused with the help.
        let mut keys = Typed(vec!["p?"], &done);
        let mut stops = 0;
        let end = run_view(
            &mut term,
            HttpLiveState::new(header),
            &rx,
            &mut keys,
            (&stop, &done),
            &mut || stops += 1,
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!((end, stops), (ViewEnd::Done, 0));
        let buf = term.backend().buffer().clone();
        let text: String = (0..24)
            .map(|y| (0..80).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
            .collect();
        assert!(text.contains("PAUSED"), "{text}");
        assert!(text.contains("stop the run as Ctrl-C does"), "{text}");
    }
}
