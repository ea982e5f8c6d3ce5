//! The flags of what a command writes (its record's files, the live outputs) and of its
//! exit code (the gates).

use anyhow::{anyhow, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::gate;
use tpslab_record::RunRecord;

/// `--json FILE`, the same on every command that writes a record.
#[derive(Args, Debug, Clone, Default)]
pub struct RecordFlag {
    /// Write the command's record to FILE: JSON, schema tpslab.record/2, one kind per
    /// command (`-`: standard output, where the report does not use it); `tpslab report
    /// FILE` renders it again.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the report as one self-contained HTML page to FILE (plots of what was
    /// measured, every series named with its source; opens offline).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Do not append this run to the history database (`tpslab history`):
    /// $XDG_DATA_HOME/tpslab/history.sqlite, else ~/.local/share/tpslab/history.sqlite.
    #[arg(long)]
    pub no_history: bool,
    /// Also write the record's figures to FILE in Prometheus' text format, for
    /// node_exporter's textfile collector (written whole, then renamed into place), every
    /// series labelled file="NAME" (FILE's name: two files in one folder never collide).
    #[arg(long, value_name = "FILE")]
    pub metrics_file: Option<PathBuf>,
}

impl RecordFlag {
    /// Checks before the run that the record and report files can be written; `--json -`
    /// only where `json_stdout_ok`.
    pub fn check(&self, json_stdout_ok: bool) -> Result<()> {
        if let Some(p) = &self.json {
            check_output("--json", p, json_stdout_ok)?;
        }
        if let Some(p) = &self.html {
            check_output("--html", p, false)?;
        }
        if let Some(p) = &self.metrics_file {
            check_output("--metrics-file", p, false)?;
        }
        Ok(())
    }

    /// Whether a record is kept anywhere (a file, or the history).
    pub fn wanted(&self) -> bool {
        self.json.is_some()
            || self.html.is_some()
            || self.metrics_file.is_some()
            || !self.no_history
    }
}

#[derive(Args, Debug, Clone)]
pub struct OutputFlags {
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub interval: Duration,
    #[command(flatten)]
    pub record: RecordFlag,
    #[command(flatten)]
    pub metrics: crate::metrics::ListenFlag,
    /// Write one JSON object per sampling interval to FILE while the run goes (NDJSON,
    /// one write per line): time, offered and delivered pps, drops so far, rx_queue, and
    /// the latency of the replies read in the interval.
    #[arg(long, value_name = "FILE")]
    pub json_stream: Option<PathBuf>,
    /// Show the source counter of every figure.
    #[arg(long)]
    pub explain: bool,
    /// Do not sample the kernel's drop reasons (skb:kfree_skb, root): spares the cost of
    /// one perf sample per dropped packet on the host while the run lasts.
    #[arg(long)]
    pub no_drop_reasons: bool,
    #[command(flatten)]
    pub gate: GateFlags,
    /// Show the run full screen while it goes, from the same samples --json-stream
    /// writes: offered vs delivered pps, this interval's drops by layer, the server's
    /// rx_queue against its SO_RCVBUF limit, latency, softnet drops per CPU. Keys: q stops
    /// the run as Ctrl-C does, p freezes the screen, ? help. The report prints when the run
    /// ends. Standard output must be a terminal.
    #[arg(long)]
    pub live: bool,
}

impl OutputFlags {
    /// A UDP run's outputs checked: the interval, the gate, the record's files (`--json -`
    /// allowed). Returns whether histograms are kept (for `--metrics-file`).
    pub fn check(&self) -> Result<bool> {
        super::check_interval(self.interval)?;
        self.gate.conditions(gate::applies::UDP_RUN)?;
        self.record.check(true)?;
        Ok(self.record.metrics_file.is_some())
    }
}

/// Exit codes for CI pipelines: 0 ok; 1 a --fail-on condition met; 2 usage or
/// environment; 3 the run was not valid evidence (with --strict); 130 interrupted.
#[derive(Args, Debug, Clone, Default)]
pub struct GateFlags {
    /// Exit 1 when the run meets one of these, comma-separated: 'loss>PCT%' (load, run,
    /// diagnose: window loss; ramp: requests failed or timed out), invalid (not valid
    /// evidence: the generator was a bottleneck, no reply at all, a run of a sweep),
    /// errors (send or reply failures, ECONNREFUSED from a closed port included; failed
    /// requests; sweep runs with either), target (tcp: --target-rate not reached). Quote
    /// it, e.g. --fail-on 'loss>1%,invalid': unquoted, the shell reads > as a redirection.
    #[arg(long, value_name = "CONDITIONS")]
    pub fail_on: Option<String>,
    /// Exit 3 when the run is not valid evidence (RUN INVALID).
    #[arg(long)]
    pub strict: bool,
}

impl GateFlags {
    /// The parsed conditions, of those this command can judge (checked before the run).
    pub fn conditions(&self, allowed: &[&str]) -> Result<Vec<gate::FailOn>> {
        match &self.fail_on {
            None => Ok(vec![]),
            Some(s) => gate::parse(s, allowed).map_err(|e| anyhow!(e)),
        }
    }

    /// The exit code of a run's outcome, with its reasons printed to stderr.
    pub fn exit(&self, o: &gate::Outcome, allowed: &[&str]) -> Result<ExitCode> {
        let (code, why) = gate::exit_code(o, &self.conditions(allowed)?, self.strict);
        if code != 0 {
            for w in why {
                eprintln!("tpslab: exit {code}: {w}");
            }
        }
        Ok(ExitCode::from(code))
    }
}

/// The exit code of a UDP run record under `gate`.
pub fn gate_exit(rec: &RunRecord, gate: &GateFlags) -> Result<ExitCode> {
    gate.exit(&gate::udp_outcome(rec), gate::applies::UDP_RUN)
}

/// Whether an output path means standard output.
pub fn is_stdout(p: &std::path::Path) -> bool {
    p.as_os_str() == "-"
}

/// Checks before a run that `flag`'s output file can be written, so no result is lost at
/// the end (see [`tpslab_run::outfile::check`]). `-` (standard output) only where `stdout_ok`.
pub fn check_output(flag: &str, p: &std::path::Path, stdout_ok: bool) -> Result<()> {
    if is_stdout(p) {
        if stdout_ok {
            return Ok(());
        }
        anyhow::bail!("{flag} -: standard output is taken by the report here; give a file");
    }
    Ok(tpslab_run::outfile::check(flag, p)?)
}
