//! `tpslab diagnose`: its flags and the plan they make; the probe, the runs, the verdict
//! and the verification are [`tpslab_run::diagnose`]'s.

use crate::flags::{self, GateFlags, LoadFlags, RecordFlag};
use crate::out;
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::record::{Body, DiagnoseRecord};
use tpslab_run::diagnose::{DiagnosePlan, UdpTarget};

/// The record's files and the gate are the shared groups, global (given before or after
/// `udp`), their help said of a diagnosis.
#[derive(Args, Debug)]
#[command(
    mut_arg("json", |a| a.global(true).value_name("JSON").help(
        "Write the diagnosis with the full run records (JSON, schema tpslab.record/2, kind diagnose)")),
    mut_arg("html", |a| a.global(true).help(
        "Also write the diagnosis as one self-contained HTML page to FILE: the verdict, then before and after side by side on the same axes")),
    mut_arg("metrics_file", |a| a.global(true).display_order(6).help(
        "Also write the figures of the last run (after the fix, when there was one) to FILE in Prometheus' text format, for node_exporter's textfile collector")),
    mut_arg("no_history", |a| a.global(true).display_order(7).help(
        "Do not append this diagnosis to the history (`tpslab history`)")),
    // Moved after the record's flags, where it was declared (completions list them so).
    mut_arg("explain", |a| a),
    mut_arg("fail_on", |a| a.global(true).help(
        "Exit 1 when the first run (\"as is\") meets one of these, comma-separated: 'loss>PCT%', invalid, errors. Quote it, e.g. --fail-on 'loss>1%': unquoted, the shell reads > as a redirection")),
    mut_arg("strict", |a| a.global(true).help(
        "Exit 3 when the first run is not valid evidence (RUN INVALID)")),
)]
pub(crate) struct DiagnoseArgs {
    #[command(subcommand)]
    pub(crate) target: Option<DiagProto>,
    /// Apply the recommendation for a second run and show before/after (default for the
    /// built-in scenario; host sysctls are journaled and always restored).
    #[arg(long, global = true)]
    pub(crate) verify: bool,
    /// Built-in scenario: diagnose only, no verification run.
    #[arg(long, global = true)]
    pub(crate) no_verify: bool,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, global = true, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) interval: Duration,
    #[command(flatten)]
    pub(crate) record: RecordFlag,
    /// Show the source counter of every figure.
    #[arg(long, global = true)]
    pub(crate) explain: bool,
    #[command(flatten)]
    pub(crate) gate: GateFlags,
    /// Show the runs full screen while they go: each run's drops by layer as it ends,
    /// above the run going now (offered vs delivered pps, this interval's drops by layer,
    /// the rx_queue against its SO_RCVBUF limit, latency). Keys: q ends the diagnosis as
    /// Ctrl-C does, p freezes the screen, ? help. Standard output must be a terminal.
    #[arg(long, global = true)]
    pub(crate) live: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum DiagProto {
    /// A UDP server on this host (yours, found by --pid or its port).
    Udp(DiagUdpArgs),
}

#[derive(Args, Debug)]
pub(crate) struct DiagUdpArgs {
    /// Server address, HOST:PORT (not with --server-cmd).
    pub(crate) target: Option<String>,
    /// Start the user's server for each run: a shell command with {port} (e.g.
    /// 'cd srv && java UdpServer.java {port}'), run by `sh -c` as its own process group
    /// that is stopped after the run and dies with tpslab; the group's process owning the
    /// UDP socket on the port is the server watched; with --verify the
    /// recommended host sysctls are applied before it starts again, so the fix is proven
    /// on the user's own server.
    #[arg(long)]
    pub(crate) server_cmd: Option<String>,
    #[command(flatten)]
    pub(crate) load: LoadFlags,
    /// Sender threads (the --flows sockets dealt among them).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// PID of the server: its network namespace, sockets and threads are watched, and
    /// (root, kernel 6.4+) the UDP datagrams its threads read and send are counted exactly.
    #[arg(long)]
    pub(crate) pid: Option<u32>,
    /// Local port of the server's socket, when it differs from TARGET's port.
    #[arg(long)]
    pub(crate) port: Option<u16>,
}

impl DiagnoseArgs {
    /// The diagnosis: the first run (the built-in S1, or the user's server at TARGET or
    /// started from `--server-cmd`), the scenario in words, whether to verify; the
    /// interval, the output files and the gate checked. Errors: one line naming the flag.
    pub(crate) fn plan(&self) -> Result<DiagnosePlan> {
        flags::check_interval(self.interval)?;
        let r = &self.record;
        if let Some(p) = &r.json {
            crate::flags::check_output("--json", p, true)?;
        }
        if let Some(p) = &r.metrics_file {
            crate::flags::check_output("--metrics-file", p, false)?;
        }
        if let Some(p) = &r.html {
            crate::flags::check_output("--html", p, false)?;
        }
        self.gate
            .conditions(tpslab_analysis::gate::applies::UDP_RUN)?;
        let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
        let plan = match &self.target {
            None => DiagnosePlan::built_in(self.interval, self.no_verify, argv),
            Some(DiagProto::Udp(u)) => u.plan(self.interval, self.verify, argv)?,
        };
        if self.verify && self.no_verify {
            bail!("--verify and --no-verify contradict each other: give one");
        }
        if self.live {
            out::check_live()?;
        }
        Ok(plan)
    }
}

impl DiagUdpArgs {
    /// The diagnosis of this server ([`DiagnosePlan::udp`]) with this load.
    fn plan(
        &self,
        interval: Duration,
        verify: bool,
        argv: Vec<std::ffi::OsString>,
    ) -> Result<DiagnosePlan> {
        let t = UdpTarget {
            target: self.target.clone(),
            server_cmd: self.server_cmd.clone(),
            pid: self.pid,
            port: self.port,
        };
        let load = |at| flags::load_config(&self.load, self.threads, "--threads", at);
        DiagnosePlan::udp(&t, load, interval, verify, argv)
    }
}

/// Runs `tpslab diagnose`.
pub fn run(a: DiagnoseArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let mut ctx = out::ctx(None)?;
    let kind = tpslab_report::live::RunsKind::Diagnose;
    let view = out::attach_runs(a.live, kind, live_header(&plan), &mut ctx)?;
    let rec = tpslab_run::diagnose::run(&plan, &ctx);
    // The terminal is given back before the report prints (or the error is said).
    drop(view);
    let rec = rec?;
    let Body::Diagnose(d) = &rec.body else {
        unreachable!("a diagnosis makes a diagnose record")
    };
    out::emit(
        &rec,
        crate::out::Outputs::of(&a.record),
        out::Terminal::Report { explain: a.explain },
    )?;
    diagnose_exit(d, &a.gate)
}

/// What the live view says of each run of a diagnosis: the server, each run's planned
/// length, why there is no latency (a load without replies).
fn live_header(plan: &DiagnosePlan) -> tpslab_report::live::LiveHeader {
    let load = &plan.first.load;
    tpslab_report::live::LiveHeader {
        command: "diagnose".into(),
        target: match &plan.server {
            tpslab_run::diagnose::Server::BuiltIn => "built-in S1 scenario".into(),
            tpslab_run::diagnose::Server::At(t) => t.clone(),
            tpslab_run::diagnose::Server::Started(_) => "the server of --server-cmd".into(),
        },
        planned_s: Some((load.warmup + load.duration).as_secs_f64()),
        no_latency: (!load.expect_replies).then(|| "the load reads no replies".into()),
    }
}

/// The exit code: the first run's under the gate; 130 when any part was interrupted.
fn diagnose_exit(rec: &DiagnoseRecord, gate: &GateFlags) -> Result<ExitCode> {
    if rec.interrupted {
        eprintln!("tpslab: exit 130: interrupted by a signal");
        return Ok(ExitCode::from(130));
    }
    flags::gate_exit(&rec.before, gate)
}
