//! `--live`: the report layer's live view ([`tpslab_report::live`]) on the terminal, drawn
//! by its own thread from the observer's samples (the lines `--json-stream` writes), with
//! keys: `q` (or Ctrl-C) stops the run as SIGINT does, `p` freezes the screen, `?` help.

use anyhow::{bail, Result};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tpslab_analysis::capacity::CapacityStep;
use tpslab_analysis::sweep::RunMetrics;
use tpslab_engine::observe::{LiveSample, LiveSink};
use tpslab_engine::openloop::{HttpLiveSample, HttpLiveSink};
use tpslab_report::live::keys::{commands, Key, KeyFlags, Keyed};
use tpslab_report::live::{
    HttpFrame, HttpLiveState, LiveFrame, LiveHeader, LiveState, RampHeader, RampLiveState,
    RunsKind, RunsLiveState,
};
use tpslab_run::ramp::StepResult;

/// How often the view looks for keys and draws what came in (samples are taken in
/// between; the observer never waits for the view).
const TICK: Duration = Duration::from_millis(100);

/// Checks before a run that `--live` can be shown: standard output is a terminal.
/// Errors: one line (exit 2).
pub(crate) fn check() -> Result<()> {
    if !std::io::stdout().is_terminal() {
        bail!("--live: standard output is not a terminal (use --json-stream FILE to follow a run from a script)");
    }
    Ok(())
}

/// Whether a view holds the terminal now (for [`restore_terminal`]).
static SHOWN: AtomicBool = AtomicBool::new(false);

/// Sets the stop flag; when it was set already, raises SIGINT so the signal thread
/// (`out::install_signals`) quits at once.
fn stop_or_quit(stop: &AtomicBool) {
    if stop.swap(true, Relaxed) {
        let _ = signal_hook::low_level::raise(signal_hook::consts::SIGINT);
    }
}

/// Gives the terminal back if a view holds it: for a process about to exit without
/// unwinding (a second signal).
pub(crate) fn restore_terminal() {
    if SHOWN.swap(false, Relaxed) {
        if HUNG_UP.load(Relaxed) && gone(rustix::stdio::stdout()) {
            // Nothing to give back; the report printed after goes nowhere, not to an
            // error (EIO) that would cost the exit code.
            to_dev_null(|f| rustix::stdio::dup2_stdout(f));
        } else {
            ratatui::restore();
        }
    }
    give_back_stderr();
}

/// Set when the view found its terminal hung up ([`hung_up`]).
static HUNG_UP: AtomicBool = AtomicBool::new(false);

/// Whether `fd` is a terminal that was hung up (poll(2) says HUP or ERR at once).
fn gone(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::OUT)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut fds, Some(&zero)).is_ok()
        && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
}

/// Points a standard descriptor (`dup2`: stdout's or stderr's) at /dev/null, as nohup
/// does, best effort.
fn to_dev_null(dup2: fn(&std::fs::File) -> rustix::io::Result<()>) {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = dup2(&null);
    }
}

/// Standard error while a view holds the terminal: (the real one, duplicated; the file
/// that takes its place), so that no line (the signal thread's "stopping", a warning, a
/// `--server-cmd` server's own) lands on the view's screen.
static STDERR: Mutex<Option<(std::os::fd::OwnedFd, std::fs::File)>> = Mutex::new(None);

/// Points standard error at an unnamed file until [`give_back_stderr`]. Errors: the
/// descriptor cannot be duplicated or the file made.
fn hold_stderr() -> Result<()> {
    use std::os::fd::AsFd;
    let real = rustix::io::dup(std::io::stderr().as_fd())?;
    let file = tempfile::tempfile()?;
    rustix::stdio::dup2_stderr(&file)?;
    *STDERR.lock().unwrap_or_else(|e| e.into_inner()) = Some((real, file));
    Ok(())
}

/// Gives standard error back (when held) and writes there what was written to it
/// meanwhile.
fn give_back_stderr() {
    use std::io::Seek;
    let held = STDERR.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some((real, mut file)) = held else {
        return;
    };
    use std::os::fd::AsFd;
    if HUNG_UP.load(Relaxed) && gone(real.as_fd()) {
        // Standard error was the terminal that hung up: a line written there would fail
        // (and eprintln! panic); what was held is lost with the terminal.
        to_dev_null(|f| rustix::stdio::dup2_stderr(f));
        return;
    }
    if rustix::stdio::dup2_stderr(&real).is_err() {
        return;
    }
    // Copied in pieces: what a chatty --server-cmd server wrote is not held in memory.
    if file.rewind().is_ok() {
        let _ = std::io::copy(&mut file, &mut std::io::stderr().lock());
    }
}

/// The live view while it runs: the terminal is the view's until this is dropped (the
/// view's thread restores it then, and a panic's hook does too).
pub(crate) struct LiveView {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    lines: Arc<Mutex<Vec<String>>>,
}

/// A view started: the view, the sender that feeds it `T`, the progress whose lines are
/// held until the view ends.
pub(crate) type Started<T> = (LiveView, mpsc::Sender<T>, Arc<dyn tpslab_run::Progress>);

/// A view of several runs started: the view, the sink of every run's samples, the
/// progress that tells it each run, the sender of what the command tells it besides.
pub(crate) type RunsStarted = (
    LiveView,
    LiveSink,
    Arc<dyn tpslab_run::Progress>,
    mpsc::Sender<RunsItem>,
);

impl LiveView {
    /// Takes the terminal (raw mode, alternate screen) and starts the view's thread for
    /// the run `header`; `q` sets `stop` (the flag SIGINT sets). Returns the view, the
    /// sink the observer gives its samples to, and the progress whose lines are held until
    /// the view ends. Errors: the terminal cannot be set up.
    pub(crate) fn start(
        header: LiveHeader,
        stop: Arc<AtomicBool>,
    ) -> Result<(LiveView, LiveSink, Arc<dyn tpslab_run::Progress>)> {
        let (view, tx, progress) = LiveView::start_screen(LiveState::new(header), stop)?;
        let sink = LiveSink(Arc::new(move |s: &LiveSample| {
            if let Some(f) = frame(s) {
                let _ = tx.send(f);
            }
        }));
        Ok((view, sink, progress))
    }

    /// [`LiveView::start`] for a ramp: the view is fed every step measured so far, as
    /// each ends (what the ramp hands its `--metrics-listen` exporter), through the
    /// returned sender.
    pub(crate) fn start_ramp(
        header: RampHeader,
        stop: Arc<AtomicBool>,
    ) -> Result<Started<Vec<StepResult>>> {
        LiveView::start_screen(RampLiveState::new(header), stop)
    }

    /// [`LiveView::start`] for a command of several UDP runs (diagnose, sweep, capacity):
    /// the sink gives every run's samples to the view; the progress tells it each phase
    /// that starts (a run, a step) and a capacity search's steps; the sender takes what
    /// the command tells it besides (a sweep's runs).
    pub(crate) fn start_runs(
        kind: RunsKind,
        header: LiveHeader,
        stop: Arc<AtomicBool>,
    ) -> Result<RunsStarted> {
        let (view, tx, _) = LiveView::start_screen(RunsLiveState::new(kind, header), stop)?;
        let to_view = tx.clone();
        let sink = LiveSink(Arc::new(move |s: &LiveSample| {
            if let Some(f) = frame(s) {
                let _ = to_view.send(RunsItem::Frame(f));
            }
        }));
        let progress = Arc::new(RunsProgress {
            held: HeldLines(view.lines.clone()),
            tx: tx.clone(),
        });
        Ok((view, sink, progress, tx))
    }

    /// Takes the terminal and starts the thread drawing `st`, fed through the sender.
    fn start_screen<S: Screen>(st: S, stop: Arc<AtomicBool>) -> Result<Started<S::Item>> {
        let (tx, rx) = mpsc::channel::<S::Item>();
        // try_init turns raw mode on before it enters the alternate screen: if that fails,
        // the terminal is given back here, not left raw.
        SHOWN.store(true, Relaxed);
        if let Err(e) = hold_stderr() {
            SHOWN.store(false, Relaxed);
            return Err(e);
        }
        let mut term = match ratatui::try_init() {
            Ok(t) => t,
            Err(e) => {
                restore_terminal();
                return Err(e.into());
            }
        };
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let thread = std::thread::Builder::new()
            .name("tpslab-live".into())
            .spawn(move || {
                let _ = run_view(&mut term, st, &rx, &stop, &d);
                restore_terminal();
            });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                restore_terminal();
                return Err(e.into());
            }
        };
        let lines = Arc::new(Mutex::new(Vec::new()));
        let progress = Arc::new(HeldLines(lines.clone()));
        Ok((
            LiveView {
                done,
                thread: Some(thread),
                lines,
            },
            tx,
            progress,
        ))
    }
}

/// What the view's thread draws: a state fed by what the run hands it, with the keys'
/// flags.
trait Screen: KeyFlags + Send + 'static {
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
        tpslab_report::live::draw(f, self)
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
        tpslab_report::live::draw_ramp(f, self)
    }
}

/// With `live`, starts the view of a command of several runs ([`LiveView::start_runs`],
/// the run's `header`) and points `ctx`'s samples and progress at it; returns the view and
/// the sender of what the command tells it besides. None without `live`. Errors: the
/// terminal cannot be set up.
pub(crate) fn attach_runs(
    live: bool,
    kind: RunsKind,
    header: LiveHeader,
    ctx: &mut tpslab_run::Ctx,
) -> Result<Option<(LiveView, mpsc::Sender<RunsItem>)>> {
    if !live {
        return Ok(None);
    }
    let (view, sink, progress, tx) = LiveView::start_runs(kind, header, ctx.stop.clone())?;
    ctx.live = Some(sink);
    ctx.progress = progress;
    Ok(Some((view, tx)))
}

/// With `live`, starts the view of an open loop of HTTP requests under `header` (`search`:
/// a capacity search's, its steps above the step running) and points `ctx`'s HTTP samples
/// (beside `--json-stream`'s, if any) and progress at it. None without `live`. Errors: the
/// terminal cannot be set up.
pub(crate) fn attach_http(
    live: bool,
    search: bool,
    header: LiveHeader,
    ctx: &mut tpslab_run::Ctx,
) -> Result<Option<LiveView>> {
    if !live {
        return Ok(None);
    }
    let st = match search {
        true => HttpLiveState::search(header),
        false => HttpLiveState::new(header),
    };
    let (view, tx, _) = LiveView::start_screen(st, ctx.stop.clone())?;
    let to_view = tx.clone();
    let also = ctx.http_live.take();
    ctx.http_live = Some(HttpLiveSink(Arc::new(move |s: &HttpLiveSample| {
        if let Some(o) = &also {
            (o.0)(s);
        }
        // The --json-stream line itself, read back.
        let f = serde_json::to_string(s).map(|l| HttpFrame::from_line(&l));
        if let Ok(Ok(f)) = f {
            let _ = to_view.send(HttpItem::Frame(f));
        }
    })));
    ctx.progress = Arc::new(HttpProgress {
        held: HeldLines(view.lines.clone()),
        tx,
    });
    Ok(Some(view))
}

/// What an open loop of HTTP requests tells its view.
pub(crate) enum HttpItem {
    /// A capacity search's step called this starts.
    Run(String),
    /// One interval of the run going now.
    Frame(HttpFrame),
    /// A capacity search's steps judged so far.
    Steps(Vec<CapacityStep>),
}

impl Screen for HttpLiveState {
    type Item = HttpItem;
    fn take(&mut self, item: HttpItem) {
        match item {
            HttpItem::Run(label) => self.start_run(&label),
            HttpItem::Frame(f) => self.push(f),
            HttpItem::Steps(steps) => self.set_steps(&steps),
        }
    }
    fn draw(&self, f: &mut ratatui::Frame) {
        tpslab_report::live::draw_http(f, self)
    }
}

/// Progress of an open loop of HTTP requests under its view: a capacity search's steps
/// (each phase that starts, the steps judged) go to it; lines are held for after.
struct HttpProgress {
    held: HeldLines,
    tx: mpsc::Sender<HttpItem>,
}

impl tpslab_run::Progress for HttpProgress {
    fn phase(&self, label: &str, _secs: f64) -> Box<dyn Send + '_> {
        let _ = self.tx.send(HttpItem::Run(label.to_string()));
        Box::new(())
    }

    fn line(&self, line: &str) {
        self.held.line(line)
    }

    fn capacity_steps(&self, steps: &[CapacityStep]) {
        let _ = self.tx.send(HttpItem::Steps(steps.to_vec()));
    }
}

/// What a command of several runs tells its view.
pub(crate) enum RunsItem {
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
        tpslab_report::live::draw_runs(f, self)
    }
}

/// Progress of a command of several runs under its view: each phase that starts is a run
/// the view shows, a capacity search's steps go to it; lines are held for after.
struct RunsProgress {
    held: HeldLines,
    tx: mpsc::Sender<RunsItem>,
}

impl RunsProgress {
    fn send(&self, item: RunsItem) {
        let _ = self.tx.send(item);
    }
}

impl tpslab_run::Progress for RunsProgress {
    fn phase(&self, label: &str, _secs: f64) -> Box<dyn Send + '_> {
        self.send(RunsItem::Run(label.to_string()));
        Box::new(())
    }

    fn line(&self, line: &str) {
        self.held.line(line)
    }

    fn capacity_steps(&self, steps: &[CapacityStep]) {
        self.send(RunsItem::Steps(steps.to_vec()));
    }
}

impl Drop for LiveView {
    /// Ends the view, gives the terminal back, then prints the progress lines held.
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The view's thread does this as it ends; after a panic there it did not, and
        // standard error (the panic's message, the lines below) would stay in the file.
        restore_terminal();
        for l in self
            .lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            eprintln!("tpslab: {l}");
        }
    }
}

/// One sample as the view reads it: the `--json-stream` line itself, read back, with the
/// figures the line leaves out (the SO_RCVBUF limit, softnet per CPU).
fn frame(s: &LiveSample) -> Option<LiveFrame> {
    let line = serde_json::to_string(s).ok()?;
    let mut f = LiveFrame::from_line(&line).ok()?;
    f.rcvbuf_limit_bytes = s.rcvbuf_limit_bytes;
    f.softnet_dropped_per_cpu = s.softnet_dropped_per_cpu.clone();
    f.threads = s.threads.clone();
    Some(f)
}

/// The view's loop: take in what came, draw (the frozen copy while paused), read every
/// key pending (all those read together: none waits for the next byte).
fn run_view<S: Screen>(
    term: &mut ratatui::DefaultTerminal,
    st: S,
    rx: &mpsc::Receiver<S::Item>,
    stop: &AtomicBool,
    done: &AtomicBool,
) -> Result<()> {
    let t0 = std::time::Instant::now();
    let mut view = Keyed::new(st);
    let tty = KeysTty::open()?;
    while !done.load(Relaxed) {
        while let Ok(f) = rx.try_recv() {
            view.st.take(f);
        }
        view.st.tick(t0.elapsed());
        let shown = view.shown(stop.load(Relaxed));
        if let Err(e) = term.draw(|f| shown.draw(f)) {
            hung_up(stop);
            return Err(e.into());
        }
        if !tty.wait(TICK)? {
            continue;
        }
        let mut keys = vec![];
        loop {
            if tty.hung_up()? {
                hung_up(stop);
                return Ok(());
            }
            if !event::poll(Duration::ZERO)? {
                break;
            }
            keys.push(key(event::read()?));
        }
        // Raw mode turns Ctrl-C into a key: the first q or Ctrl-C stops the run as a
        // SIGINT does; a second one is a real SIGINT, which quits at once (host settings
        // restored, the terminal given back) as a second Ctrl-C does without --live.
        view.apply(&commands(&keys), &mut || stop_or_quit(stop));
    }
    Ok(())
}

/// A terminal event as the view's keys read it: a key pressed, else [`Key::Other`].
fn key(e: Event) -> Key {
    match e {
        Event::Key(k) if k.kind == KeyEventKind::Press => match k.code {
            KeyCode::Char(c) => Key::Char(c, k.modifiers.contains(KeyModifiers::CONTROL)),
            KeyCode::Esc => Key::Esc,
            _ => Key::Other,
        },
        _ => Key::Other,
    }
}

/// The terminal is gone (its tmux server or ssh session ended: a hangup) or cannot be
/// drawn on: nobody sees the view nor can press `q`, so the run stops as on SIGHUP (its
/// record written, marked interrupted; host settings restored).
fn hung_up(stop: &AtomicBool) {
    HUNG_UP.store(true, Relaxed);
    stop.store(true, Relaxed);
}

/// The terminal the view reads keys from, as crossterm picks it: standard input when it
/// is a terminal, else `/dev/tty`. The view waits on it itself, so that crossterm never
/// reads a hung-up terminal: a read there ends at once with nothing (end of file) or
/// EIO, and crossterm 0.29's reader retries that in a loop inside `event::poll`, which then
/// never returns (the view's thread spinning, the run never ending).
enum KeysTty {
    Stdin,
    DevTty(std::fs::File),
}

impl KeysTty {
    /// Errors: standard input is not a terminal and `/dev/tty` cannot be opened.
    fn open() -> Result<KeysTty> {
        Ok(if std::io::stdin().is_terminal() {
            KeysTty::Stdin
        } else {
            KeysTty::DevTty(std::fs::File::open("/dev/tty")?)
        })
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            KeysTty::Stdin => rustix::stdio::stdin(),
            KeysTty::DevTty(f) => f.as_fd(),
        }
    }

    /// Polls the terminal for `timeout` at most, `IN` asked; returns the events seen
    /// (empty: nothing came). EINTR (a signal) counts as nothing. Errors: poll(2) fails.
    fn poll(&self, timeout: Duration) -> Result<rustix::event::PollFlags> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::from_borrowed_fd(self.fd(), PollFlags::IN)];
        let t = Timespec::try_from(timeout)?;
        match rustix::event::poll(&mut fds, Some(&t)) {
            Ok(_) => Ok(fds[0].revents()),
            Err(rustix::io::Errno::INTR) => Ok(PollFlags::empty()),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits up to `timeout` for the terminal to be readable (a key, or a hangup).
    fn wait(&self, timeout: Duration) -> Result<bool> {
        Ok(!self.poll(timeout)?.is_empty())
    }

    /// Whether the terminal was hung up (or its descriptor is no longer valid).
    fn hung_up(&self) -> Result<bool> {
        use rustix::event::PollFlags;
        let ev = self.poll(Duration::ZERO)?;
        Ok(ev.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL))
    }
}

/// Progress while the view holds the terminal: no bars, lines kept for after.
struct HeldLines(Arc<Mutex<Vec<String>>>);

impl tpslab_run::Progress for HeldLines {
    fn phase(&self, _label: &str, _secs: f64) -> Box<dyn Send + '_> {
        Box::new(())
    }

    fn line(&self, line: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line.to_string());
    }
}
