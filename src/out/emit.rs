//! The one epilogue of every command that makes a record ([`emit`]), the live sink of
//! `--json-stream`, and what makes text from records safe to print on a terminal.

use anyhow::{bail, Result};
use std::io::Write;
use std::path::Path;
use tpslab_record::Record;

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
    pub(crate) extra: Vec<tpslab_run::outfile::Extra<'a>>,
}

impl<'a> Outputs<'a> {
    /// The files the record flags name (no command's own files yet).
    pub(crate) fn of(r: &'a tpslab_cli::flags::RecordFlag) -> Outputs<'a> {
        Outputs {
            json: r.json.as_deref(),
            html: r.html.as_deref(),
            metrics: r.metrics_file.as_deref(),
            history: !r.no_history,
            extra: vec![],
        }
    }

    /// With a command's own file `flag` at `path` (nothing without a path), `what` in
    /// the status line, rendered by `render`.
    pub(crate) fn with(
        mut self,
        flag: &'static str,
        path: Option<&'a Path>,
        what: &'static str,
        render: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Outputs<'a> {
        if let Some(p) = path {
            let mut bytes = Vec::new();
            let r = render(&mut bytes)
                .map(|_| bytes)
                .map_err(anyhow::Error::from);
            self.extra.push((flag, p, what, r));
        }
        self
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
    let w = tpslab_run::outfile::write_files(
        rec,
        outs.json,
        outs.html,
        outs.metrics,
        outs.extra,
        outs.history,
    );
    let (written, mut failed, stdout_bytes) = (w.written, w.failed, w.stdout);
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
            let width = tpslab_report::term::fit::width();
            let mut fitted = tpslab_report::term::fit::Fitted::new(&mut text, width);
            f(&mut fitted)
                .and_then(|_| fitted.finish())
                .and_then(|_| out.write_all(&terminal_safe(&text)))
        }
        (None, Terminal::Nothing) => Ok(()),
    };
    if let Err(e) = printed.and_then(|_| out.flush()) {
        failed.push(format!("standard output: {e}"));
    }
    drop(out);
    for w in written {
        // One line each, escaped: a path holds what the user gave (a line feed, ESC).
        eprintln!("tpslab: {}", tpslab_report::term::escaped(&w, &[]));
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}

/// The record's files and its history entry alone, when any is wanted: [`emit`] for a
/// command that printed its report while it ran (standard output may still be locked).
pub(crate) fn emit_files(rec: &Record, record: &tpslab_cli::flags::RecordFlag) -> Result<()> {
    if record.wanted() {
        emit(rec, Outputs::of(record), Terminal::Nothing)?;
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
    gate: &tpslab_cli::flags::GateFlags,
    interrupt_is_normal: bool,
) -> Result<std::process::ExitCode> {
    let Some(run) = tpslab_run::udp::run_of(rec) else {
        bail!("a {} record is not a UDP run's", rec.kind());
    };
    emit(rec, outs, Terminal::Report { explain })?;
    if interrupt_is_normal && run.interrupted {
        return Ok(std::process::ExitCode::SUCCESS);
    }
    tpslab_cli::flags::gate_exit(run, gate)
}

use tpslab_report::term::terminal_safe;

/// `--json-stream FILE`: a sink writing each sample as one JSON line
/// ([`tpslab_run::outfile::json_stream`]); None without the flag.
pub(crate) fn live_sink(path: Option<&Path>) -> Result<Option<tpslab_engine::observe::LiveSink>> {
    path.map(tpslab_run::outfile::json_stream).transpose()
}
