//! Output and process helpers every command uses: output paths checked before a run,
//! signals and the workflow's context, targets; the epilogue that writes a record's files
//! and prints its report ([`emit`]); the terminal's progress ([`TermProgress`]).

mod emit;
mod progress;

pub(crate) use emit::{emit, emit_run, escaped, live_sink, terminal_safe, Outputs, Terminal};
pub(crate) use progress::TermProgress;

use anyhow::{anyhow, bail, Result};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT set the returned flag (the run ends early, its record is
/// written, host settings are restored); a second signal restores host settings at once
/// and exits with 130.
pub(crate) fn install_signals() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])?;
    let f = flag.clone();
    std::thread::Builder::new()
        .name("tpslab-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if f.swap(true, Relaxed) {
                    let r = tpslab_engine::guard::restore_now();
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
        progress: Arc::new(TermProgress),
    })
}

pub(crate) fn resolve(target: &str) -> Result<SocketAddr> {
    let mut addrs = target
        .to_socket_addrs()
        .map_err(|e| anyhow!("target \"{target}\": {e}; allowed HOST:PORT, e.g. 127.0.0.1:9000"))?;
    let addr = addrs
        .next()
        .ok_or_else(|| anyhow!("target \"{target}\" resolves to no address"))?;
    if addr.port() == 0 {
        bail!("target \"{target}\": port 0 is not a port a server listens on; allowed 1..=65535");
    }
    Ok(addr)
}

pub(crate) fn check_pid(pid: u32) -> Result<()> {
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        bail!("--pid {pid}: no such process");
    }
    Ok(())
}

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: no progress bars.
pub(crate) fn set_quiet(q: bool) {
    QUIET.store(q, Relaxed);
}

/// Whether progress may be shown: stderr is a terminal and not `--quiet`.
pub(crate) fn progress_shown() -> bool {
    !QUIET.load(Relaxed) && std::io::IsTerminal::is_terminal(&std::io::stderr())
}
