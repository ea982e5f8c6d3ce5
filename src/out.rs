//! Output and process helpers every command uses: output paths checked before a run,
//! JSON written to a file or standard output, the terminal report, signals, targets.

use anyhow::{anyhow, bail, Context, Result};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tpslab_analysis::record::Record;

pub(crate) use tpslab_plan::limits::MAX_UDP_PAYLOAD;

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

/// Whether an output path means standard output.
pub(crate) fn is_stdout(p: &std::path::Path) -> bool {
    p.as_os_str() == "-"
}

/// Checks before a run that `flag`'s output file can be written, so no result is lost at
/// the end (see [`tpslab_run::outfile::check`]). `-` (standard output) only where `stdout_ok`.
pub(crate) fn check_output(flag: &str, p: &Path, stdout_ok: bool) -> Result<()> {
    if is_stdout(p) {
        if stdout_ok {
            return Ok(());
        }
        bail!("{flag} -: standard output is taken by the report here; give a file");
    }
    Ok(tpslab_run::outfile::check(flag, p)?)
}

/// The files a command writes besides what it prints: the record (`--json`), its HTML page,
/// its metrics, the history entry, and any of its own (a plot, a CSV).
#[derive(Default)]
pub(crate) struct Outputs<'a> {
    /// `--json` (`-`: standard output, which then carries the record alone).
    pub(crate) json: Option<&'a Path>,
    /// `--html` (`-`: standard output, where the command allows it).
    pub(crate) html: Option<&'a Path>,
    /// `--metrics-file`.
    pub(crate) metrics: Option<&'a Path>,
    /// Append the record to the history.
    pub(crate) history: bool,
    /// A command's own files: flag, path, a name for the status line, the rendered bytes
    /// (or why they could not be rendered).
    pub(crate) extra: Vec<(&'static str, &'a Path, &'static str, Result<Vec<u8>>)>,
}

/// What a command prints on standard output at its end.
pub(crate) enum Terminal<'a> {
    /// The record's report (`tpslab report`'s term format).
    Report { explain: bool },
    /// The command's own rendering.
    With(&'a dyn Fn(&mut dyn Write) -> std::io::Result<()>),
    /// Nothing more (printed while it ran, or only files were asked for).
    Nothing,
}

/// The one epilogue of every command that makes a record: nothing is lost when one output
/// fails. Every file is attempted (each safely, see `outfile`), the history appended, then
/// the terminal output printed (or the record alone on standard output with `--json -`),
/// then one status line per file written on standard error. Files come before standard
/// output so a closed pipe (`| head`, which ends tpslab by SIGPIPE) costs none of them; none
/// of them can block (a FIFO nobody reads is an error at once).
///
/// Errors: one line naming every output that failed (`--json /dev/full: No space left on
/// device; ...`), after the others were written: the caller exits 2.
pub(crate) fn emit(rec: &Record, outs: Outputs<'_>, terminal: Terminal<'_>) -> Result<()> {
    let mut failed: Vec<String> = vec![];
    let mut written: Vec<String> = vec![];
    let mut stdout_bytes: Option<Vec<u8>> = None;
    let mut file = |flag: &str, path: &Path, what: &str, bytes: Result<Vec<u8>>| match bytes {
        Err(e) => failed.push(format!("{flag} {}: {e:#}", path.display())),
        Ok(b) if is_stdout(path) => stdout_bytes = Some(b),
        Ok(b) => match tpslab_run::outfile::write(flag, path, &b) {
            Ok(()) => written.push(format!("{what} written to {}", path.display())),
            Err(e) => failed.push(e.0),
        },
    };
    if let Some(p) = outs.json {
        file("--json", p, "record", tpslab_run::outfile::json_bytes(rec));
    }
    if let Some(p) = outs.html {
        let mut page = Vec::new();
        let r = tpslab_report::html::record(&mut page, rec)
            .map(|_| page)
            .context("rendering the HTML report");
        file("--html", p, "HTML report", r);
    }
    if let Some(p) = outs.metrics {
        let mut text = Vec::new();
        let r = tpslab_report::render(&mut text, rec, tpslab_report::Format::Metrics, false)
            .map(|_| text)
            .context("rendering the metrics");
        file("--metrics-file", p, "metrics", r);
    }
    for (flag, p, what, bytes) in outs.extra {
        file(flag, p, what, bytes);
    }
    if outs.history {
        if let Err(e) = tpslab_run::history::append(rec) {
            eprintln!("tpslab: not recorded in the history: {e:#}");
        }
    }
    let mut out = std::io::stdout().lock();
    let printed = match (stdout_bytes, terminal) {
        (Some(b), _) => out.write_all(&b),
        (None, Terminal::Report { explain }) => {
            let mut text = Vec::new();
            tpslab_report::term::record(&mut text, rec, explain)
                .and_then(|_| out.write_all(&terminal_safe(&text)))
        }
        (None, Terminal::With(f)) => {
            let mut text = Vec::new();
            f(&mut text).and_then(|_| out.write_all(&terminal_safe(&text)))
        }
        (None, Terminal::Nothing) => Ok(()),
    };
    if let Err(e) = printed.and_then(|_| out.flush()) {
        failed.push(format!("standard output: {e}"));
    }
    drop(out);
    for w in written {
        eprintln!("tpslab: {w}");
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}

/// The epilogue of a UDP run's or a watch's record: [`emit`] with its report, then the
/// exit code under `gate` (0 for an interrupted run where `interrupt_is_normal`: a watch
/// ends by Ctrl-C as a matter of course). Errors: a record of another kind, or as [`emit`].
pub(crate) fn emit_run(
    rec: &Record,
    outs: Outputs<'_>,
    explain: bool,
    gate: &crate::flags::GateFlags,
    interrupt_is_normal: bool,
) -> Result<std::process::ExitCode> {
    let Some(run) = tpslab_run::udp::run_of(rec) else {
        bail!("a {} record is not a UDP run's", rec.kind());
    };
    emit(rec, outs, Terminal::Report { explain })?;
    if interrupt_is_normal && run.interrupted {
        return Ok(std::process::ExitCode::SUCCESS);
    }
    crate::flags::gate_exit(run, gate)
}

/// `s` with its control characters (ESC of an escape sequence, NUL, BEL, CR, C1) and the
/// Unicode line and paragraph separators shown escaped (`\u{1b}`), never sent raw to a
/// terminal; the characters in `keep` (a line feed, a tab) stay.
pub(crate) fn escaped(s: &str, keep: &[char]) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if !keep.contains(&c) && (c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// A terminal report safe to print: the strings in it come from records, which may come
/// from another host (a fleet agent's) or another user, so they are [`escaped`]; line feeds
/// and tabs stay. The renderers themselves use no escape sequences.
pub(crate) fn terminal_safe(text: &[u8]) -> Vec<u8> {
    escaped(&String::from_utf8_lossy(text), &['\n', '\t']).into_bytes()
}

/// `--json-stream FILE`: a sink writing each sample as one JSON line, flushed (the file
/// is created now; a line that cannot be written is said once on stderr, the run goes on).
pub(crate) fn live_sink(path: Option<&Path>) -> Result<Option<tpslab_engine::observe::LiveSink>> {
    let Some(path) = path else { return Ok(None) };
    let f = tpslab_run::outfile::create_stream("--json-stream", path)?;
    let state = std::sync::Mutex::new((f, false));
    let name = path.display().to_string();
    Ok(Some(tpslab_engine::observe::LiveSink(Arc::new(
        move |s: &tpslab_engine::observe::LiveSample| {
            let mut line = serde_json::to_vec(s).unwrap_or_default();
            line.push(b'\n');
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            // One write per line: a reader following the file sees whole lines.
            // A FIFO whose reader went away fails the line (EPIPE), not the run.
            let file = &mut st.0;
            if let Err(e) = tpslab_net::process::without_sigpipe(|| file.write_all(&line)) {
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

/// The terminal's progress: a bar on stderr per phase (when stderr is a terminal, not
/// `--quiet`, and the phase lasts over a second), lines on stderr.
pub(crate) struct TermProgress;

/// A bar drawn by its own thread until dropped.
struct Bar {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl tpslab_run::Progress for TermProgress {
    fn phase(&self, label: &str, secs: f64) -> Box<dyn Send + '_> {
        if !(secs > 1.0 && progress_shown()) {
            return Box::new(());
        }
        let done = Arc::new(AtomicBool::new(false));
        let (d, label) = (done.clone(), label.to_string());
        let thread = std::thread::spawn(move || {
            let pb = indicatif::ProgressBar::new((secs * 10.0) as u64);
            pb.set_style(
                indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {elapsed}/{duration}")
                    .unwrap()
                    .progress_chars("=> "),
            );
            pb.set_message(label);
            let t0 = std::time::Instant::now();
            while !d.load(Relaxed) {
                pb.set_position(
                    ((t0.elapsed().as_secs_f64() * 10.0) as u64).min((secs * 10.0) as u64),
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            pb.finish_and_clear();
        });
        Box::new(Bar {
            done,
            thread: Some(thread),
        })
    }

    fn line(&self, line: &str) {
        eprintln!("tpslab: {line}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_records_control_characters_reach_the_terminal_escaped() {
        let text = "note: \u{1b}]52;c;aGk=\u{7}\u{1b}[31mred\r\u{9b}x\n\tok │\n";
        assert_eq!(
            String::from_utf8(super::terminal_safe(text.as_bytes())).unwrap(),
            "note: \\u{1b}]52;c;aGk=\\u{7}\\u{1b}[31mred\\u{d}\\u{9b}x\n\tok │\n"
        );
    }
}
