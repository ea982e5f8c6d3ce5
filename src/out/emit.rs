//! The one epilogue of every command that makes a record ([`emit`]), the live sink of
//! `--json-stream`, and what makes text from records safe to print on a terminal.

use crate::flags::is_stdout;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use tpslab_analysis::record::Record;

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

impl<'a> Outputs<'a> {
    /// The files the record flags name (no command's own files yet).
    pub(crate) fn of(r: &'a crate::flags::RecordFlag) -> Outputs<'a> {
        Outputs {
            json: r.json.as_deref(),
            html: r.html.as_deref(),
            metrics: r.metrics_file.as_deref(),
            history: !r.no_history,
            extra: vec![],
        }
    }
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
