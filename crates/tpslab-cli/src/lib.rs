//! tpslab's command line: every command's flags (clap) and the validated plan each builds
//! from them (`plan()`), the shared flag groups (`flags`), and what a bad command line
//! gets said ([`parse`]). Nothing here runs load or starts a process: a `plan()` reads
//! what its flags name (a payload, TLS roots, a plan file) and checks the terminal for
//! `--live`; the one thing printed here is the exit-code gate's line (`flags::GateFlags`).
//! The binary (`src/`) runs the plan through its workflow (`tpslab_run`) and renders the
//! record.
//! Tested as table rows on `Cli::try_parse_from(argv)?.plan()` (`plan_tests`).

pub mod agent;
pub mod bdp;
pub mod capacity;
pub mod compare_cmd;
pub mod diagnose;
pub mod doctor;
mod errors;
pub mod flags;
pub mod fleet;
pub mod help;
pub mod history_cmd;
pub mod live;
pub mod load_http;
pub mod metrics;
pub mod probe;
pub mod ramp;
pub mod report_cmd;
pub mod serve_tcp;
pub mod sweep;
mod target;
pub mod tcp;
pub mod udp;

pub use errors::name_defaults;
#[cfg(test)]
use errors::usage_error;

use crate::udp::{LoadUdpArgs, RunUdpArgs, ServeArgs, WatchArgs};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "tpslab",
    about = "Load, serve, observe and explain UDP loss and TPS limits"
)]
pub struct Cli {
    /// No progress bars on stderr (they show only when stderr is a terminal anyway).
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
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
    // Its usage on two lines: on one it is 87 columns.
    #[command(
        override_usage = "tpslab agent [OPTIONS] --plan <FILE> --index <INDEX> --of <OF>\n       \
                                --start-at <TIME>"
    )]
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
        /// Write every page into this folder (created when missing).
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ServeProto {
    /// UDP reference server.
    Udp(ServeArgs),
    /// TCP server (sink: reads and discards).
    Tcp(serve_tcp::ServeTcpArgs),
    /// HTTP/1.1 keep-alive reference server (what `ramp http` without a URL starts).
    Http(crate::serve_tcp::serve_http::ServeHttpArgs),
}

#[derive(Subcommand, Debug)]
pub enum LoadProto {
    /// UDP open-loop generator.
    Udp(LoadUdpArgs),
    /// HTTP/1.1 at a fixed rate (open loop, wrk2's model): latency from each request's
    /// intended send time (corrected for coordinated omission) beside the uncorrected.
    Http(crate::load_http::LoadHttpArgs),
}

#[derive(Subcommand, Debug)]
pub enum RunProto {
    /// UDP: our server and our generator, observed together.
    Udp(RunUdpArgs),
}

/// What [`parse`] found wrong, or asked for instead of a run.
pub enum NoRun {
    /// `--help` or `--version`: clap prints it on standard output (`e.exit()`).
    Shown(clap::Error),
    /// A usage error, as tpslab prints it (escaped, with a tip where one helps); exit 2.
    Usage(String),
}

/// The command tree, `--version` printing `version` (the binary's release and commit),
/// each help text split into `-h`'s first clause and `--help`'s whole ([`help::split`]).
pub fn command(version: &'static str) -> clap::Command {
    use clap::CommandFactory;
    help::split(Cli::command().version(version))
}

/// Parses `args` (the program's name first): the command line, its defaults noted for
/// errors that name them ([`name_defaults`]); `version` as in [`command`].
/// Errors: [`NoRun`].
pub fn parse(args: &[std::ffi::OsString], version: &'static str) -> Result<Cli, NoRun> {
    use clap::FromArgMatches;
    let mut cmd = help::sized(command(version));
    match cmd
        .try_get_matches_from_mut(args)
        .and_then(|m| Ok((Cli::from_arg_matches(&m)?, m)))
    {
        Ok((c, m)) => {
            errors::note_defaults(&cmd, &m);
            Ok(c)
        }
        Err(e) if !e.use_stderr() => Err(NoRun::Shown(e)),
        Err(e) => Err(NoRun::Usage(errors::usage_error(&cmd, e, args))),
    }
}

/// `s` safe to print on a terminal: a value the user (or a file) gave, with its control
/// characters escaped; line feeds stay (clap's messages have several lines).
pub fn printable(s: &str) -> String {
    tpslab_report::term::escaped(s, &['\n'])
}

/// A word of an error longer than this is cut (a 100 KB URL or payload is not echoed
/// whole), characters.
pub const WORD_MAX_CHARS: usize = 200;

/// An error line longer than this (after its words are cut: many long words) is cut in
/// its middle, characters.
pub const LINE_MAX_CHARS: usize = 1024;

/// An error's message as the one line printed after `tpslab: error: `: line feeds as
/// spaces, control characters shown escaped once ([`printable`]), each word over
/// [`WORD_MAX_CHARS`] cut to its first and last 60 characters around `...[N bytes]...`,
/// and a line still over [`LINE_MAX_CHARS`] cut to its first 700 and last 300 the same
/// way (what is allowed, at the end, stays).
pub fn error_line(msg: &str) -> String {
    let line = cut_words(&printable(&msg.replace('\n', " ")));
    cut(&line, LINE_MAX_CHARS, 700, 300)
}

/// `line` with each word (between spaces) over [`WORD_MAX_CHARS`] cut ([`cut`]); line
/// feeds stay.
pub fn cut_words(line: &str) -> String {
    line.split('\n')
        .map(|l| {
            l.split(' ')
                .map(|w| cut(w, WORD_MAX_CHARS, 60, 60))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `s` whole when at most `max` characters, else its first `head` and last `tail`
/// characters around `...[N bytes]...` (N: the length of the whole, bytes).
fn cut(s: &str, max: usize, head: usize, tail: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let h: String = s.chars().take(head).collect();
    let t: String = s.chars().skip(n - tail).collect();
    format!("{h}...[{} bytes]...{t}", s.len())
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "plan_tests/mod.rs"]
mod plan_tests;
