//! `--live`: the report layer's live view ([`tpslab_report::live`]) on the terminal, drawn
//! by its own thread from the observer's samples (the lines `--json-stream` writes), with
//! keys: `q` (or Ctrl-C) stops the run as SIGINT does, `p` freezes the screen, `?` help.

use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tpslab_engine::observe::LiveSink;
use tpslab_record::ramp::StepResult;
use tpslab_report::live::keys::{parse_keys, Key};
use tpslab_report::live::screen::{run_view, KeySource, RunsItem, Screen, ViewEnd};
use tpslab_report::live::{
    HttpLiveState, LiveHeader, LiveState, RampHeader, RampLiveState, RunsKind, RunsLiveState,
};
use tpslab_run::live::{HeldLines, KeysTty};

/// How often the view looks for keys and draws what came in (samples are taken in
/// between; the observer never waits for the view).
const TICK: Duration = Duration::from_millis(100);

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
        if HUNG_UP.load(Relaxed) && tpslab_run::live::gone(rustix::stdio::stdout()) {
            // Nothing to give back; the report printed after goes nowhere, not to an
            // error (EIO) that would cost the exit code.
            tpslab_run::live::to_dev_null(|f| rustix::stdio::dup2_stdout(f));
        } else {
            ratatui::restore();
        }
    }
    tpslab_run::live::give_back_stderr(HUNG_UP.load(Relaxed));
}

/// Set when the view found its terminal hung up ([`hung_up`]).
static HUNG_UP: AtomicBool = AtomicBool::new(false);

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
        Ok((view, tpslab_run::live::udp_sink(tx, |f| f), progress))
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
        let sink = tpslab_run::live::udp_sink(tx.clone(), RunsItem::Frame);
        let held = HeldLines(view.lines.clone());
        let progress = Arc::new(tpslab_run::live::runs_progress(held, tx.clone()));
        Ok((view, sink, progress, tx))
    }

    /// Takes the terminal and starts the thread drawing `st`, fed through the sender.
    fn start_screen<S: Screen>(st: S, stop: Arc<AtomicBool>) -> Result<Started<S::Item>> {
        let (tx, rx) = mpsc::channel::<S::Item>();
        // try_init turns raw mode on before it enters the alternate screen: if that fails,
        // the terminal is given back here, not left raw.
        SHOWN.store(true, Relaxed);
        if let Err(e) = tpslab_run::live::hold_stderr() {
            SHOWN.store(false, Relaxed);
            return Err(e.into());
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
                let keys = KeysTty::open().map(|t| Keys(t, Vec::new()));
                let end = keys.and_then(|mut k| {
                    let mut on_stop = || stop_or_quit(&stop);
                    let flags = (&*stop, &*d);
                    run_view(&mut term, st, &rx, &mut k, flags, &mut on_stop, TICK)
                });
                if let Ok(ViewEnd::HungUp) = end {
                    hung_up(&stop);
                }
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
    ctx.http_live = Some(tpslab_run::live::http_sink(
        ctx.http_live.take(),
        tx.clone(),
    ));
    let held = HeldLines(view.lines.clone());
    ctx.progress = Arc::new(tpslab_run::live::http_progress(held, tx));
    Ok(Some(view))
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

/// The terminal is gone (its tmux server or ssh session ended: a hangup) or cannot be
/// drawn on: nobody sees the view nor can press `q`, so the run stops as on SIGHUP (its
/// record written, marked interrupted; host settings restored).
fn hung_up(stop: &AtomicBool) {
    HUNG_UP.store(true, Relaxed);
    stop.store(true, Relaxed);
}

/// The view's keys: every byte pending when the terminal wakes the view, read from the
/// tty ([`KeysTty::read_pending`], at most [`KEY_BYTES`] a tick: a paste of any length is
/// taken within a few ticks, a `q` after it never lost), as keys
/// ([`tpslab_report::live::keys::parse_keys`]); a sequence cut at the end of a read is
/// kept and read with the next bytes, a lone ESC is Escape once a tick passed with nothing
/// after it.
struct Keys(KeysTty, Vec<u8>);

/// The most bytes read from the terminal a tick (a paste longer than this is taken over
/// the next ticks).
const KEY_BYTES: usize = 64 << 10;

impl KeySource for Keys {
    fn keys(&mut self, timeout: Duration) -> std::io::Result<Option<Vec<Key>>> {
        let Keys(tty, held) = self;
        if !tty.wait(timeout)? {
            // Nothing came: what was held back (a lone ESC) is taken as it stands.
            let (keys, _) = parse_keys(held, false);
            held.clear();
            return Ok(Some(keys));
        }
        if !tty.read_pending(held, held.len() + KEY_BYTES)? {
            return Ok(None);
        }
        let (keys, used) = parse_keys(held, true);
        held.drain(..used);
        Ok(Some(keys))
    }
}
