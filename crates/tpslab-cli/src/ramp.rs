//! `tpslab ramp tcp|udp`: closed-loop load stepping up the users, the knee, Little's law
//! per step, the Universal Scalability Law fit, and the server threads' states.

use crate::flags;
use anyhow::Result;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;
use tpslab_analysis::gate::applies;
use tpslab_plan::proto::Proto;
use tpslab_run::ramp::{BuiltinServer, RampFlags, RampSetup};

#[derive(Subcommand, Debug)]
pub enum RampCmd {
    /// TCP: one connection per user. Without TARGET, tpslab's reference server is started
    /// (as a child process) with the --server-* flags.
    Tcp(RampArgs),
    /// UDP: one socket per user; replies matched by a sequence field.
    Udp(RampArgs),
    /// HTTP/1.1 keep-alive: one connection per user, the same request to URL again and
    /// again. Without URL, tpslab's reference server (`serve http`) is started with the
    /// --server-* flags.
    Http(http::RampHttpArgs),
}

#[path = "ramp_http.rs"]
pub mod http;

#[derive(Args, Debug)]
pub struct RampArgs {
    /// The server, HOST:PORT (TCP: optional, see above).
    pub target: Option<String>,
    /// Users, FIRST..LAST, e.g. 1..200.
    #[arg(long, default_value = "1..64")]
    pub users: String,
    /// Step: +N adds N users per step (or just N), xF multiplies by F.
    #[arg(long, default_value = "x2")]
    pub step: String,
    /// Measured time of each step.
    #[arg(long, default_value = "3s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub step_duration: Duration,
    /// Unmeasured start of each step (new users connect, queues settle).
    #[arg(long, default_value = "1s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub warmup: Duration,
    /// Think time of a user between a reply and its next request.
    #[arg(long, default_value = "0s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub think: Duration,
    /// Longest wait for a reply or a connect; a request that takes longer is an error.
    #[arg(long, default_value = "2s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub timeout: Duration,
    /// Request body size with tpslab's own protocol, bytes.
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size(), default_value = "1024")]
    pub size: u64,
    /// Send this file's bytes as each request instead (TCP: verbatim, with its framing).
    #[arg(long)]
    pub payload_file: Option<PathBuf>,
    /// TCP: how a reply ends: length (4-byte prefix, tpslab's protocol), fixed:BYTES or
    /// delim:TEXT (e.g. delim:\r\n).
    #[arg(long, default_value = "length")]
    pub framing: String,
    #[arg(long, default_value = "framed", value_name = "PROTOCOL", help = tpslab_plan::proto::PROTOCOL_FLAG_HELP)]
    pub protocol: String,
    /// UDP with --payload-file: OFF:LEN of a sequence field the server echoes (DNS: 0:2).
    #[arg(long)]
    pub seq_field: Option<String>,
    /// PID of the server (its CPU and thread states are sampled).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Thread-state sampling interval.
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub interval: Duration,
    /// Threads the users are multiplexed on (each an epoll loop holding its share of
    /// the users' connections, timeouts and think times); 0: one per CPU.
    #[arg(long, default_value_t = 0)]
    pub load_threads: usize,
    /// Knee: the first step whose TPS gain per user gain falls below this.
    #[arg(long, default_value_t = 0.2)]
    pub knee_gain: f64,
    /// Built-in server: CPU work per request.
    #[arg(long, default_value = "0s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub server_work: Duration,
    /// Built-in server: waiting per request (a sleep, like a database round trip).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub server_serial: Duration,
    /// Built-in server: hold one global lock during --server-serial (S3).
    #[arg(long)]
    pub serialize: bool,
    /// Built-in server: 0 = a thread per connection; N = N epoll workers sharing them.
    #[arg(long, default_value_t = 0)]
    pub server_threads: usize,
    #[command(flatten)]
    pub record: flags::RecordFlag,
    #[command(flatten)]
    pub metrics: crate::metrics::ListenFlag,
    /// Write TPS and response time against users with the fitted curve (SVG).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub gate: flags::GateFlags,
    /// Show the ramp full screen while it goes, from the steps --metrics-listen serves (a
    /// step's figures at its end): the step being run, TPS by users so far, response time
    /// mean/p99 and errors per step, the knee once the steps show it. Keys: q stops the
    /// ramp as Ctrl-C does, p freezes the screen, ? help. Standard output must be a
    /// terminal.
    #[arg(long)]
    pub live: bool,
}

impl RampCmd {
    /// The validated setup of the flags given (checks in the order the errors are told):
    /// steps, output files, gates, times, the request, the target. Reads `--payload-file`
    /// and resolves TARGET; starts nothing.
    pub fn plan(&self) -> Result<RampSetup> {
        match self {
            RampCmd::Tcp(a) => a.plan(Proto::from_flag(&a.protocol)?),
            RampCmd::Udp(a) => {
                if a.protocol != "framed" {
                    anyhow::bail!("--protocol applies to ramp tcp");
                }
                a.plan(Proto::Udp)
            }
            RampCmd::Http(h) => h.plan(),
        }
    }
}

impl RampArgs {
    /// The settings as given, for [`RampFlags::setup`].
    fn flags(&self) -> RampFlags {
        let a = self;
        RampFlags {
            target: a.target.clone(),
            users: a.users.clone(),
            step: a.step.clone(),
            step_duration: a.step_duration,
            warmup: a.warmup,
            think: a.think,
            timeout: a.timeout,
            size: a.size,
            payload_file: a.payload_file.clone(),
            framing: a.framing.clone(),
            seq_field: a.seq_field.clone(),
            pid: a.pid,
            interval: a.interval,
            load_threads: a.load_threads,
            knee_gain: a.knee_gain,
            builtin: BuiltinServer {
                work: a.server_work,
                serial: a.server_serial,
                serialize: a.serialize,
                threads: a.server_threads,
            },
        }
    }

    /// The record's files, the plot's and the gate checked.
    fn outputs(&self) -> Result<()> {
        self.record.check(false)?;
        if let Some(p) = &self.svg {
            crate::flags::check_output("--svg", p, false)?;
        }
        self.gate.conditions(applies::RAMP)?;
        if self.live {
            crate::live::check()?;
        }
        Ok(())
    }

    /// The validated setup for `proto` ([`RampFlags::setup`]).
    fn plan(&self, proto: Proto) -> Result<RampSetup> {
        self.flags().setup(proto, || self.outputs())
    }
}
