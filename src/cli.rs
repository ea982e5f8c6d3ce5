//! The command line: the commands and their dispatch. Each command's flags and work live
//! in its own module; shared flags in `flags`, shared output and process helpers in `out`.

use crate::udp::{LoadUdpArgs, RunUdpArgs, ServeArgs, WatchArgs};
use crate::{
    agent, bdp, compare_cmd, diagnose, doctor, fleet, history_cmd, probe, ramp, report_cmd,
    serve_tcp, sweep, tcp, udp,
};
use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// `tpslab --version`: the release and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TPSLAB_COMMIT"), ")");

#[derive(Parser, Debug)]
#[command(
    name = "tpslab",
    version = VERSION,
    about = "Load, serve, observe and explain UDP loss and TPS limits"
)]
struct Cli {
    /// No progress bars on stderr (they show only when stderr is a terminal anyway).
    #[arg(long, short = 'q', global = true)]
    quiet: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the reference server (the S1 workload) until Ctrl-C or --duration.
    Serve {
        #[command(subcommand)]
        proto: ServeProto,
    },
    /// Send open-loop load to a server and account for every datagram.
    Load {
        #[command(subcommand)]
        proto: LoadProto,
    },
    /// Reference server + load + observer in one process: the exact ledger.
    Run {
        #[command(subcommand)]
        proto: RunProto,
    },
    /// Sample the kernel's counters for a socket/process over time.
    Watch(WatchArgs),
    /// Audit a host's network settings and the sysctl files it (or --root) applies at
    /// boot: unknown keys, malformed lines, overrides, values not running, inconsistent
    /// pairs, NICs; and against a workload (--for udp|tcp|pool).
    Doctor(doctor::DoctorArgs),
    /// Render saved records again (any --json): the tables
    /// the run printed, or the record as JSON.
    Report(report_cmd::ReportArgs),
    /// Records of the same kind side by side: what differs in plan and host first, then
    /// each figure's change against the first with its spread, and whether it is more
    /// than noise (Welch, 95 %).
    Compare(compare_cmd::CompareArgs),
    /// The runs recorded so far (every command that writes a record appends it, unless
    /// --no-history): list with filters, `history show ID` renders one again, `compare
    /// history:ID ...` compares them.
    History(history_cmd::HistoryArgs),
    /// Bandwidth-delay product: the TCP buffers a rate over an RTT needs (and this host's),
    /// or the ceiling a buffer puts on a flow.
    Bdp(bdp::BdpArgs),
    /// Experiments over tunables: each setting repeated, in random order, with the spread
    /// and whether each effect is distinguishable from noise.
    Sweep(Box<sweep::SweepArgs>),
    /// A bulk TCP flow with its TCP_INFO sampled: throughput and which limit held it
    /// (receiver window, send buffer, congestion window, application); --lab-rtt runs it
    /// across an emulated WAN link between two namespaces.
    Tcp(Box<tcp::TcpArgs>),
    /// Closed-loop load stepping up the users: TPS and response time per step, the knee,
    /// Little's law, a Universal Scalability Law fit, and the server threads' states
    /// (busy, or waiting on a lock or a peer).
    Ramp {
        #[command(subcommand)]
        proto: ramp::RampCmd,
    },
    /// The highest rate a server sustains within an objective (--slo), found by open-loop
    /// steps a search chooses (doubling, then bisection, repeats at the boundary), with
    /// the layer that gives first; the generator checked at every step.
    Capacity {
        #[command(subcommand)]
        proto: crate::capacity::CapacityCmd,
    },
    /// Find where datagrams die, recommend the fix and prove it. Without a target: the
    /// built-in S1 scenario on loopback.
    Diagnose(diagnose::DiagnoseArgs),
    /// Measure a path: `probe idle` finds after how long of idleness it kills a TCP
    /// connection, and how (dropped, reset, closed).
    Probe {
        #[command(subcommand)]
        what: probe::ProbeCmd,
    },
    /// One agent of a fleet: its share of a load plan (rate, sockets, sequence space),
    /// from a common start time, its record with the latency histograms (HdrHistogram
    /// V2) for `merge`.
    Agent(Box<agent::AgentArgs>),
    /// Add up a fleet's agent records exactly: counts and ledgers summed, histograms
    /// merged (percentiles of the merged histogram), each agent beside the total.
    Merge(agent::MergeArgs),
    /// Print how to start a fleet of agents: Kubernetes manifests (an Indexed Job) or an
    /// ssh fan-out, for one plan and a start time a little ahead.
    Fleet {
        #[command(subcommand)]
        how: fleet::FleetCmd,
    },
    /// Print the shell completion script for SHELL on standard output, e.g.
    /// `tpslab completions bash > /etc/bash_completion.d/tpslab`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page tpslab(1) on standard output, or with --dir write it and one page
    /// per command (tpslab-run-udp.1, ...) into DIR.
    Man {
        /// Write every page into this existing folder.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum ServeProto {
    /// UDP reference server.
    Udp(ServeArgs),
    /// TCP server (sink: reads and discards).
    Tcp(serve_tcp::ServeTcpArgs),
    /// HTTP/1.1 keep-alive reference server (what `ramp http` without a URL starts).
    Http(crate::serve_tcp::serve_http::ServeHttpArgs),
}

#[derive(Subcommand, Debug)]
enum LoadProto {
    /// UDP open-loop generator.
    Udp(LoadUdpArgs),
    /// HTTP/1.1 at a fixed rate (open loop, wrk2's model): latency from each request's
    /// intended send time (corrected for coordinated omission) beside the uncorrected.
    Http(crate::load_http::LoadHttpArgs),
}

#[derive(Subcommand, Debug)]
enum RunProto {
    /// UDP: our server and our generator, observed together.
    Udp(RunUdpArgs),
}

/// Parses the command line and runs it.
pub fn main() -> Result<ExitCode> {
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cmd = Cli::command();
    let cli = match cmd
        .try_get_matches_from_mut(&args)
        .and_then(|m| Ok((Cli::from_arg_matches(&m)?, m)))
    {
        Ok((c, m)) => {
            note_defaults(&cmd, &m);
            c
        }
        // --help and --version, on standard output.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            eprint!("{}", usage_error(&cmd, e, &args));
            return Ok(ExitCode::from(2));
        }
    };
    run(cli).map_err(|e| anyhow::anyhow!(name_defaults(&format!("{e:#}"))))
}

mod errors;

use errors::{name_defaults, note_defaults, usage_error};

fn run(cli: Cli) -> Result<ExitCode> {
    crate::out::set_quiet(cli.quiet);
    // Shell integration touches nothing on the host.
    match &cli.cmd {
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(*shell, &mut cmd, "tpslab", &mut std::io::stdout());
            return Ok(ExitCode::SUCCESS);
        }
        Cmd::Man { dir } => return man(dir.as_deref()),
        _ => {}
    }
    // Settings a killed tpslab left changed are restored before anything else runs.
    let rec = tpslab_engine::guard::recover();
    for (k, v) in &rec.restored {
        eprintln!("tpslab: restored {k}={v}, left changed by an interrupted tpslab run");
    }
    for s in &rec.skipped {
        eprintln!("tpslab: host setting from an interrupted run not restored: {s}");
    }
    match cli.cmd {
        Cmd::Serve {
            proto: ServeProto::Udp(a),
        } => udp::serve(a),
        Cmd::Load {
            proto: LoadProto::Udp(a),
        } => udp::load(a),
        Cmd::Load {
            proto: LoadProto::Http(a),
        } => crate::load_http::run(a),
        Cmd::Run {
            proto: RunProto::Udp(a),
        } => udp::run(a),
        Cmd::Serve {
            proto: ServeProto::Tcp(a),
        } => serve_tcp::serve(a),
        Cmd::Serve {
            proto: ServeProto::Http(a),
        } => crate::serve_tcp::serve_http::serve(a),
        Cmd::Tcp(a) => tcp::run(*a),
        Cmd::Doctor(a) => doctor::run(a),
        Cmd::Probe { what } => probe::run(what),
        Cmd::Ramp { proto } => ramp::run(proto),
        Cmd::Diagnose(a) => diagnose::run(a),
        Cmd::Capacity { proto } => crate::capacity::run(proto),
        Cmd::Bdp(a) => bdp::run(&a),
        Cmd::Report(a) => report_cmd::run(a),
        Cmd::Compare(a) => compare_cmd::run(a),
        Cmd::History(a) => history_cmd::run(a),
        Cmd::Sweep(a) => sweep::run(*a),
        Cmd::Watch(a) => udp::watch(a),
        Cmd::Agent(a) => agent::agent(*a),
        Cmd::Merge(a) => agent::merge(a),
        Cmd::Fleet { how } => fleet::run(how),
        Cmd::Completions { .. } | Cmd::Man { .. } => unreachable!("handled above"),
    }
}

/// `tpslab man`: the man page from the command-line definitions (clap_mangen).
fn man(dir: Option<&std::path::Path>) -> Result<ExitCode> {
    use anyhow::{bail, Context};
    use clap::CommandFactory;
    let cmd = Cli::command();
    match dir {
        None => clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .context("writing the man page to standard output")?,
        Some(d) => {
            if !d.is_dir() {
                bail!("--dir {}: not an existing folder", d.display());
            }
            clap_mangen::generate_to(cmd, d).with_context(|| format!("--dir {}", d.display()))?;
            eprintln!("tpslab: man pages written to {}", d.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "plan_tests/mod.rs"]
mod plan_tests;
