//! `tpslab ramp tcp|udp`: closed-loop load stepping up the users, the knee, Little's law
//! per step, the Universal Scalability Law fit, and the server threads' states.

use crate::flags;
use crate::out;
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::gate::applies;
use tpslab_analysis::prelude::*;
use tpslab_analysis::record::Body;
use tpslab_run::ramp::{BuiltinServer, RampFlags, RampProto, RampSetup, StepResult};

#[derive(Subcommand, Debug)]
pub(crate) enum RampCmd {
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
mod http;

#[derive(Args, Debug)]
pub(crate) struct RampArgs {
    /// The server, HOST:PORT (TCP: optional, see above).
    target: Option<String>,
    /// Users, FIRST..LAST, e.g. 1..200.
    #[arg(long, default_value = "1..64")]
    users: String,
    /// Step: +N adds N users per step (or just N), xF multiplies by F.
    #[arg(long, default_value = "x2")]
    step: String,
    /// Measured time of each step.
    #[arg(long, default_value = "3s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    step_duration: Duration,
    /// Unmeasured start of each step (new users connect, queues settle).
    #[arg(long, default_value = "1s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    warmup: Duration,
    /// Think time of a user between a reply and its next request.
    #[arg(long, default_value = "0s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    think: Duration,
    /// Longest wait for a reply or a connect; a request that takes longer is an error.
    #[arg(long, default_value = "2s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    timeout: Duration,
    /// Request body size with tpslab's own protocol, bytes.
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size(), default_value = "1024")]
    size: u64,
    /// Send this file's bytes as each request instead (TCP: verbatim, with its framing).
    #[arg(long)]
    payload_file: Option<PathBuf>,
    /// TCP: how a reply ends: length (4-byte prefix, tpslab's protocol), fixed:BYTES or
    /// delim:TEXT (e.g. delim:\r\n).
    #[arg(long, default_value = "length")]
    framing: String,
    /// UDP with --payload-file: OFF:LEN of a sequence field the server echoes (DNS: 0:2).
    #[arg(long)]
    seq_field: Option<String>,
    /// PID of the server (its CPU and thread states are sampled).
    #[arg(long)]
    pid: Option<u32>,
    /// Thread-state sampling interval.
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    interval: Duration,
    /// Threads the users are multiplexed on (each an epoll loop holding its share of
    /// the users' connections, timeouts and think times); 0: one per CPU.
    #[arg(long, default_value_t = 0)]
    load_threads: usize,
    /// Knee: the first step whose TPS gain per user gain falls below this.
    #[arg(long, default_value_t = 0.2)]
    knee_gain: f64,
    /// Built-in server: CPU work per request.
    #[arg(long, default_value = "0s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    server_work: Duration,
    /// Built-in server: waiting per request (a sleep, like a database round trip).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    server_serial: Duration,
    /// Built-in server: hold one global lock during --server-serial (S3).
    #[arg(long)]
    serialize: bool,
    /// Built-in server: 0 = a thread per connection; N = N epoll workers sharing them.
    #[arg(long, default_value_t = 0)]
    server_threads: usize,
    #[command(flatten)]
    record: flags::RecordFlag,
    #[command(flatten)]
    metrics: crate::metrics::ListenFlag,
    /// Write TPS and response time against users with the fitted curve (SVG).
    #[arg(long)]
    svg: Option<PathBuf>,
    #[command(flatten)]
    gate: flags::GateFlags,
    /// Show the ramp full screen while it goes, from the steps --metrics-listen serves (a
    /// step's figures at its end): the step being run, TPS by users so far, response time
    /// mean/p99 and errors per step, the knee once the steps show it. Keys: q stops the
    /// ramp as Ctrl-C does, p freezes the screen, ? help. Standard output must be a
    /// terminal.
    #[arg(long)]
    live: bool,
}

impl RampCmd {
    /// The validated setup of the flags given (checks in the order the errors are told):
    /// steps, output files, gates, times, the request, the target. Reads `--payload-file`
    /// and resolves TARGET; starts nothing.
    pub(crate) fn plan(&self) -> Result<RampSetup> {
        match self {
            RampCmd::Tcp(a) => a.plan(RampProto::Tcp),
            RampCmd::Udp(a) => a.plan(RampProto::Udp),
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
            out::check_live()?;
        }
        Ok(())
    }

    /// The validated setup for `proto` ([`RampFlags::setup`]).
    fn plan(&self, proto: RampProto) -> Result<RampSetup> {
        self.flags().setup(proto, || self.outputs())
    }
}

/// Runs `tpslab ramp tcp|udp`: flags -> setup -> the server started (without a target)
/// -> the header -> the closed loop ([`tpslab_run::ramp`]) -> the record, its report, SVG
/// and exit code.
pub(crate) fn run(cmd: RampCmd) -> Result<ExitCode> {
    let setup = cmd.plan()?;
    let (RampCmd::Tcp(a) | RampCmd::Udp(a) | RampCmd::Http(http::RampHttpArgs { ramp: a, .. })) =
        &cmd;
    let ready = tpslab_run::ramp::prepare(&setup)?;
    let mut out = std::io::stdout().lock();
    tpslab_report::term::ramp_header(&mut out, &ready.plan)?;
    drop(out);
    let exporter = a.metrics.start("ramp")?;
    let mut ctx = out::ctx(None)?;
    let (view, to_view) = match a.live {
        true => {
            let header = live_header(&cmd, &ready);
            let (view, tx, progress) = out::LiveView::start_ramp(header, ctx.stop.clone())?;
            ctx.progress = progress;
            (Some(view), Some(tx))
        }
        false => (None, None),
    };
    // Scraped: every step's TPS and p99 as soon as it is measured; the same steps to the
    // live view.
    let on_steps = |st: &[StepResult]| {
        if let Some(e) = &exporter {
            e.set(tpslab_report::metrics::ramp_steps(st, None));
        }
        if let Some(tx) = &to_view {
            let _ = tx.send(st.to_vec());
        }
    };
    let rec = tpslab_run::ramp::run(ready, &ctx, &on_steps);
    // The terminal is given back before the report prints (or the error is said).
    drop(view);
    let rec = rec?;
    let Body::Ramp(r) = &rec.body else {
        unreachable!("a ramp's record")
    };
    let outputs = out::Outputs::of(&a.record).with("--svg", a.svg.as_deref(), "plot", |w| {
        tpslab_report::svg::ramp(w, r)
    });
    let print = |out: &mut dyn Write| tpslab_report::term::ramp_results(out, r);
    out::emit(&rec, outputs, out::Terminal::With(&print))?;
    // A target that refused every request: nothing was measured, an environment error
    // (exit 2, one line), after the record is kept like any run's.
    if let Some(why) = r.run.unreachable() {
        bail!(why);
    }
    a.gate.exit(&r.run.outcome(), applies::RAMP)
}

/// What the live view says of a ramp: its command, target (the built-in server's when
/// tpslab started it), steps and times.
fn live_header(cmd: &RampCmd, ready: &tpslab_run::ramp::Ready) -> tpslab_report::live::RampHeader {
    let p = &ready.plan;
    let command = match cmd {
        RampCmd::Tcp(_) => "ramp tcp",
        RampCmd::Udp(_) => "ramp udp",
        RampCmd::Http(_) => "ramp http",
    };
    let target = match (&p.proto, p.builtin_server.is_some()) {
        (RampProto::Http(h), false) => h.url.clone(),
        (_, true) => format!("{} (tpslab's server)", p.target),
        (_, false) => p.target.to_string(),
    };
    tpslab_report::live::RampHeader {
        command: command.into(),
        target,
        users: p.steps.clone(),
        warmup_s: p.warmup.as_secs_f64(),
        window_s: p.step.as_secs_f64(),
        think_s: p.think.as_secs_f64(),
        knee_gain: p.knee_gain,
    }
}
