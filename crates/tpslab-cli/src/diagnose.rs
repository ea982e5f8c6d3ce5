//! `tpslab diagnose`: its flags and the plan they make; the probe, the runs, the verdict
//! and the verification are [`tpslab_run::diagnose`]'s.

use crate::flags::{self, GateFlags, LoadFlags, RecordFlag};
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::time::Duration;
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
pub struct DiagnoseArgs {
    #[command(subcommand)]
    pub target: Option<DiagProto>,
    /// Apply the recommendation for a second run and show before/after (default for the
    /// built-in scenario; host sysctls are journaled and always restored).
    #[arg(long, global = true)]
    pub verify: bool,
    /// Built-in scenario: diagnose only, no verification run.
    #[arg(long, global = true)]
    pub no_verify: bool,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, global = true, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub interval: Duration,
    #[command(flatten)]
    pub record: RecordFlag,
    /// Show the source counter of every figure.
    #[arg(long, global = true)]
    pub explain: bool,
    #[command(flatten)]
    pub gate: GateFlags,
    /// Show the runs full screen while they go: each run's drops by layer as it ends,
    /// above the run going now (offered vs delivered pps, this interval's drops by layer,
    /// the rx_queue against its SO_RCVBUF limit, latency). Keys: q ends the diagnosis as
    /// Ctrl-C does, p freezes the screen, ? help. Standard output must be a terminal.
    #[arg(long, global = true)]
    pub live: bool,
}

#[derive(Subcommand, Debug)]
pub enum DiagProto {
    /// A UDP server on this host (yours, found by --pid or its port).
    Udp(DiagUdpArgs),
}

#[derive(Args, Debug)]
pub struct DiagUdpArgs {
    /// Server address, HOST:PORT (not with --server-cmd).
    pub target: Option<String>,
    /// Start the user's server for each run: a shell command with {port} (e.g.
    /// 'cd srv && java UdpServer.java {port}'), run by `sh -c` as its own process group
    /// that is stopped after the run and dies with tpslab; the group's process owning the
    /// UDP socket on the port is the server watched; with --verify the
    /// recommended host sysctls are applied before it starts again, so the fix is proven
    /// on the user's own server.
    #[arg(long)]
    pub server_cmd: Option<String>,
    #[command(flatten)]
    pub load: LoadFlags,
    /// Sender threads (the --flows sockets dealt among them).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// PID of the server: its network namespace, sockets and threads are watched, and
    /// (root, kernel 6.4+) the UDP datagrams its threads read and send are counted exactly.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Local port of the server's socket, when it differs from TARGET's port.
    #[arg(long)]
    pub port: Option<u16>,
}

impl DiagnoseArgs {
    /// The diagnosis: the first run (the built-in S1, or the user's server at TARGET or
    /// started from `--server-cmd`), the scenario in words, whether to verify; the
    /// interval, the output files and the gate checked. Errors: one line naming the flag.
    pub fn plan(&self) -> Result<DiagnosePlan> {
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
            crate::live::check()?;
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
