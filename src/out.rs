//! Output and process helpers every command uses: signals and the workflow's context;
//! the epilogue that writes a record's files and prints its report ([`emit()`]); the live
//! view's terminal; the terminal's progress ([`TermProgress`]).

mod emit;
mod live;
mod progress;

pub(crate) use emit::{emit, emit_files, emit_run, live_sink, Outputs, Terminal};
pub(crate) use live::{attach_http, attach_runs, LiveView};
pub(crate) use progress::TermProgress;

use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT set the returned flag (the run ends early, its record is
/// written, host settings are restored); a second signal restores host settings at once
/// and exits with 130. SIGHUP never counts as that second signal: a hangup may come twice
/// from the kernel (to the session's leader, then to the foreground group) and after the
/// live view found its terminal hung up and stopped the run already.
pub(crate) fn install_signals() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])?;
    let f = flag.clone();
    std::thread::Builder::new()
        .name("tpslab-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if f.swap(true, Relaxed) {
                    if sig == SIGHUP {
                        continue;
                    }
                    live::restore_terminal();
                    let r = tpslab_engine::host::guard::restore_now();
                    for (k, v) in r.restored {
                        eprintln!("tpslab: restored {k}={v}");
                    }
                    std::process::exit(130);
                }
                // A server tpslab started itself (-q) is stopped by it as a matter of course.
                if !QUIET.load(Relaxed) {
                    eprintln!(
                        "tpslab: stopping (the record is still written; again to quit at once)"
                    );
                }
            }
        })?;
    Ok(flag)
}

/// The context a command's workflow runs in: the signals installed ([`install_signals`]),
/// `live` receiving every observer sample, progress on the terminal ([`TermProgress`]).
pub(crate) fn ctx(live: Option<tpslab_engine::observe::LiveSink>) -> Result<tpslab_run::Ctx> {
    Ok(tpslab_run::Ctx {
        stop: install_signals()?,
        live,
        http_live: None,
        progress: Arc::new(TermProgress),
    })
}

/// [`ctx`] whose live samples go to `--json-stream FILE` and to the `--metrics-listen`
/// endpoint, either or both.
pub(crate) fn live_ctx(
    json_stream: Option<&std::path::Path>,
    exporter: Option<&tpslab_run::exporter::Exporter>,
) -> Result<tpslab_run::Ctx> {
    ctx(tpslab_run::exporter::both(
        live_sink(json_stream)?,
        exporter.map(|e| e.sink()),
    ))
}

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: no progress bars.
/// Runs `f` on standard output (locked) with its lines fitted to the terminal's width
/// (`tpslab_report::term::fit`: unchanged in a pipe): what a command prints before its
/// record's report. Errors: `f`'s, the write's.
pub(crate) fn fitted<T>(
    f: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<T>,
) -> std::io::Result<T> {
    use tpslab_report::term::fit;
    let mut lock = std::io::stdout().lock();
    let mut out = fit::Fitted::new(&mut lock, fit::width());
    let r = f(&mut out)?;
    out.finish()?;
    Ok(r)
}

pub(crate) fn set_quiet(q: bool) {
    QUIET.store(q, Relaxed);
}

/// Whether progress may be shown: stderr is a terminal and not `--quiet`.
pub(crate) fn progress_shown() -> bool {
    !QUIET.load(Relaxed) && std::io::IsTerminal::is_terminal(&std::io::stderr())
}
