//! Output and process helpers every command uses: output paths checked before a run,
//! JSON written to a file or standard output, the terminal report, signals, targets.

use anyhow::{anyhow, bail, Context, Result};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tpslab_analysis::record::Record;

pub(crate) use tpslab_plan::limits::MAX_UDP_PAYLOAD;

/// SIGINT, SIGTERM and SIGHUP set the returned flag (the run ends early, its record is
/// written, host settings are restored); a second signal restores host settings at once
/// and exits with 130.
pub(crate) fn install_signals() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
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

/// Whether an output path means standard output.
pub(crate) fn is_stdout(p: &std::path::Path) -> bool {
    p.as_os_str() == "-"
}

/// Checks before a run that `flag`'s output file can be written, so no result is lost at
/// the end: its folder exists and the file can be created (a file created by the check is
/// removed again). `-` (standard output) only where `stdout_ok`.
pub(crate) fn check_output(flag: &str, p: &std::path::Path, stdout_ok: bool) -> Result<()> {
    if is_stdout(p) {
        if stdout_ok {
            return Ok(());
        }
        bail!("{flag} -: standard output is taken by the report here; give a file");
    }
    if p.is_dir() {
        bail!("{flag} {}: a folder; give a file name", p.display());
    }
    if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!(
                "{flag} {}: folder {} does not exist",
                p.display(),
                dir.display()
            );
        }
    }
    match std::fs::symlink_metadata(p) {
        // A symlink, FIFO or device: opening it to test could create a link's target or
        // hand a pipe's reader an early end of file; the write at the end will tell.
        Ok(m) if !m.file_type().is_file() => Ok(()),
        // An existing file: writable? (not truncated by the check)
        Ok(_) => std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .map(|_| ())
            .map_err(|e| anyhow!("{flag} {}: {e}", p.display())),
        // A new file: created only by the check itself (never someone else's), removed.
        Err(_) => {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map_err(|e| anyhow!("{flag} {}: {e}", p.display()))?;
            let _ = std::fs::remove_file(p);
            Ok(())
        }
    }
}

/// Writes JSON to `path` (`-`: standard output).
pub(crate) fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> Result<()> {
    if is_stdout(path) {
        let out = std::io::stdout().lock();
        serde_json::to_writer_pretty(out, value).context("writing JSON to standard output")?;
        println!();
        return Ok(());
    }
    let f = std::fs::File::create(path).with_context(|| format!("--json {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, value)
        .map_err(std::io::Error::from)
        .and_then(|_| std::io::Write::write_all(&mut w, b"\n"))
        .and_then(|_| std::io::Write::flush(&mut w))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Writes a record's HTML report to `path` (`-`: standard output), when given; a file
/// written is said on standard error.
pub(crate) fn write_html(path: Option<&std::path::Path>, rec: &Record) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    let mut page = Vec::new();
    tpslab_report::html::record(&mut page, rec).context("rendering the HTML report")?;
    if is_stdout(path) {
        return std::io::Write::write_all(&mut std::io::stdout().lock(), &page)
            .context("writing the HTML report to standard output");
    }
    std::fs::write(path, page).with_context(|| format!("--html {}", path.display()))?;
    eprintln!("tpslab: HTML report written to {}", path.display());
    Ok(())
}

/// `--metrics-file FILE`: the record's figures in Prometheus' text format, written to a
/// temporary file beside it and renamed into place (a textfile collector never reads
/// half a file).
pub(crate) fn write_metrics(path: Option<&std::path::Path>, rec: &Record) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    let mut text = Vec::new();
    tpslab_report::render(&mut text, rec, tpslab_report::Format::Metrics, false)
        .context("rendering the metrics")?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            anyhow!("--metrics-file {}: {e}", path.display())
        })?;
    eprintln!("tpslab: metrics written to {}", path.display());
    Ok(())
}

/// `--json-stream FILE`: a sink writing each sample as one JSON line, flushed (the file
/// is created now; a line that cannot be written is said once on stderr, the run goes on).
pub(crate) fn live_sink(
    path: Option<&std::path::Path>,
) -> Result<Option<tpslab_engine::observe::LiveSink>> {
    let Some(path) = path else { return Ok(None) };
    let f =
        std::fs::File::create(path).with_context(|| format!("--json-stream {}", path.display()))?;
    let state = std::sync::Mutex::new((f, false));
    let name = path.display().to_string();
    Ok(Some(tpslab_engine::observe::LiveSink(Arc::new(
        move |s: &tpslab_engine::observe::LiveSample| {
            let mut line = serde_json::to_vec(s).unwrap_or_default();
            line.push(b'\n');
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            // One write per line: a reader following the file sees whole lines.
            if let Err(e) = std::io::Write::write_all(&mut st.0, &line) {
                if !st.1 {
                    eprintln!("tpslab: --json-stream {name}: {e}; the run goes on");
                    st.1 = true;
                }
            }
        },
    ))))
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

/// Shows a progress bar on stderr while `f` runs, for a run planned to last `secs`
/// (phase `label`, elapsed and planned time); nothing when stderr is not a terminal or the
/// run is short.
pub(crate) fn with_progress<T>(label: &str, secs: f64, f: impl FnOnce() -> T) -> T {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        if secs > 1.0 && progress_shown() {
            s.spawn(|| {
                let pb = indicatif::ProgressBar::new((secs * 10.0) as u64);
                pb.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{msg} [{bar:30}] {elapsed}/{duration}",
                    )
                    .unwrap()
                    .progress_chars("=> "),
                );
                pb.set_message(label.to_string());
                let t0 = std::time::Instant::now();
                while !done.load(Relaxed) {
                    pb.set_position(
                        ((t0.elapsed().as_secs_f64() * 10.0) as u64).min((secs * 10.0) as u64),
                    );
                    std::thread::sleep(Duration::from_millis(100));
                }
                pb.finish_and_clear();
            });
        }
        let r = f();
        done.store(true, Relaxed);
        r
    })
}

/// Prints a record's terminal report on standard output.
pub(crate) fn print_report(rec: &Record, explain: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    tpslab_report::term::record(&mut out, rec, explain)
        .context("writing the report to standard output")
}

/// When a command started, for its record's metadata: this host's facts, the wall clock
/// (ms since the Unix epoch) and the monotonic clock.
pub(crate) struct Started {
    env: tpslab_analysis::record::Environment,
    unix_ms: u64,
    t0: u64,
}

impl Started {
    /// Now.
    pub(crate) fn now() -> Started {
        Started {
            env: tpslab_engine::env::environment(),
            unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            t0: tpslab_net::mono_ns(),
        }
    }

    /// The metadata of a command that ran from then until now.
    pub(crate) fn meta(&self, interrupted: bool) -> tpslab_analysis::record::Meta {
        self.meta_for((tpslab_net::mono_ns() - self.t0) as f64 / 1e9, interrupted)
    }

    /// The metadata of a command that ran for `elapsed_s` seconds (measured by it).
    pub(crate) fn meta_for(
        &self,
        elapsed_s: f64,
        interrupted: bool,
    ) -> tpslab_analysis::record::Meta {
        tpslab_analysis::record::Meta::new(&self.env, self.unix_ms, elapsed_s, interrupted)
    }
}
