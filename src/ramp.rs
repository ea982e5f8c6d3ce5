//! `tpslab ramp tcp|udp`: closed-loop load stepping up the users, the knee, Little's law
//! per step, the Universal Scalability Law fit, and the server threads' states.

use crate::flags;
use crate::out::{self, install_signals, resolve};
use crate::server_proc::ServerProcess;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::gate::applies;
use tpslab_analysis::prelude::*;
use tpslab_analysis::ramp;
use tpslab_analysis::record::{Body, RampReport, Record};
use tpslab_engine::ramp::{run_ramp_with, RampPlan, RampProto};
use tpslab_engine::rr::{frame, Framing};
use tpslab_plan::limits::{
    MAX_UDP_PAYLOAD, REQUEST_TIMEOUT, SAMPLE_INTERVAL, STEP_DURATION, STEP_WARMUP, THINK,
};

#[derive(Subcommand, Debug)]
pub(crate) enum RampCmd {
    /// TCP: one connection per user. Without TARGET, tpslab's reference server is started
    /// (as a child process) with the --server-* flags.
    Tcp(RampArgs),
    /// UDP: one socket per user; replies matched by a sequence field.
    Udp(RampArgs),
}

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
}

/// Users per step from "A..B" and "+N" / "N" / "xF". Errors name the value.
pub(crate) fn parse_steps(users: &str, step: &str) -> Result<Vec<usize>, String> {
    let bad_users = || {
        format!(
            "--users {users}: allowed FIRST..LAST with 1 <= FIRST <= LAST <= 10000, e.g. 1..200"
        )
    };
    let (a, b) = users.split_once("..").ok_or_else(bad_users)?;
    let a: usize = a.trim().parse().map_err(|_| bad_users())?;
    let b: usize = b.trim().parse().map_err(|_| bad_users())?;
    if a < 1 || b > 10_000 {
        return Err(bad_users());
    }
    if a > b {
        return Err(format!(
            "--users {users}: the range is empty (FIRST above LAST)"
        ));
    }
    let bad_step = || {
        format!("--step {step}: allowed +N or N (add N users, N >= 1) or xF (multiply by F > 1), e.g. +10 or x2")
    };
    let mut v = vec![a];
    if let Some(f) = step.strip_prefix('x') {
        let f: f64 = f.parse().map_err(|_| bad_step())?;
        if !(f > 1.0 && f.is_finite()) {
            return Err(bad_step());
        }
        let mut x = a as f64;
        loop {
            x *= f;
            let n = (x.round() as usize).max(v[v.len() - 1] + 1);
            if n >= b {
                break;
            }
            v.push(n);
        }
    } else {
        let n: usize = step
            .trim_start_matches('+')
            .parse()
            .map_err(|_| bad_step())?;
        if n == 0 {
            return Err(bad_step());
        }
        let mut x = a + n;
        while x < b {
            v.push(x);
            x += n;
        }
    }
    if *v.last().unwrap_or(&0) != b {
        v.push(b);
    }
    if v.len() > 200 {
        return Err(format!(
            "--users {users} --step {step}: {} steps, allowed at most 200",
            v.len()
        ));
    }
    Ok(v)
}

/// Starts tpslab's reference server (`serve tcp --mode replace`) with the ramp's
/// server settings, for as long as the ramp can last and 30 s more.
fn start_builtin(a: &RampArgs, steps: usize) -> Result<ServerProcess> {
    let mut args: Vec<String> = ["serve", "tcp", "--mode", "replace", "--bind", "127.0.0.1:0"]
        .map(String::from)
        .into();
    args.extend([
        "--work".into(),
        humantime::format_duration(a.server_work).to_string(),
        "--serial".into(),
        humantime::format_duration(a.server_serial).to_string(),
        "--threads".into(),
        a.server_threads.to_string(),
    ]);
    if a.serialize {
        args.push("--serialize".into());
    }
    let life = (a.step_duration + a.warmup) * steps as u32 + Duration::from_secs(30);
    args.extend(["--duration".into(), format!("{}s", life.as_secs())]);
    ServerProcess::tpslab(&args)
}

/// A sequence field in a request: (offset, length), bytes.
type SeqField = (usize, usize);

/// The request every user sends (the payload file's bytes, or `--size` bytes with "ping"
/// every 64; framed for tcp) and, for udp with a payload file, the sequence field that
/// matches replies.
fn request(a: &RampArgs, proto: RampProto) -> Result<(Vec<u8>, Option<SeqField>)> {
    let payload = match &a.payload_file {
        Some(p) => Some(flags::read_payload_file(p)?),
        None => None,
    };
    let size = usize::try_from(a.size).unwrap_or(usize::MAX);
    if !(8..=MAX_UDP_PAYLOAD).contains(&size) {
        bail!("--size {}: allowed 8..={MAX_UDP_PAYLOAD} bytes", a.size);
    }
    let body = || {
        let mut b = vec![b'.'; size];
        for c in b.chunks_mut(64) {
            if c.len() >= 4 {
                c[..4].copy_from_slice(b"ping");
            }
        }
        b
    };
    Ok(match proto {
        RampProto::Tcp => {
            if a.seq_field.is_some() {
                bail!("--seq-field applies to ramp udp");
            }
            (payload.unwrap_or_else(|| frame(&body())), None)
        }
        RampProto::Udp => {
            if a.framing != "length" {
                bail!("--framing applies to ramp tcp");
            }
            match (payload, &a.seq_field) {
                (Some(p), Some(s)) => {
                    let f = tpslab_plan::units::parse_seq_field("--seq-field", s, p.len())?;
                    (p, Some(f))
                }
                (Some(_), None) => bail!("ramp udp --payload-file needs --seq-field OFF:LEN (a field the server echoes, e.g. 0:2 for a DNS id) to match replies"),
                (None, Some(_)) => bail!("--seq-field needs --payload-file"),
                (None, None) => (body(), None),
            }
        }
    })
}

/// Where the load goes and which process is watched: TARGET (with `--pid`), or tpslab's
/// own server started for `steps` steps (stopped when the returned handle drops).
fn target(
    a: &RampArgs,
    proto: RampProto,
    steps: usize,
) -> Result<(std::net::SocketAddr, Option<u32>, Option<ServerProcess>)> {
    let builtin_flags = !a.server_work.is_zero()
        || a.serialize
        || a.server_threads != 0
        || a.server_serial != Duration::from_millis(10);
    Ok(match (&a.target, proto) {
        (Some(t), _) => {
            if builtin_flags {
                bail!("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out TARGET to use it");
            }
            if let Some(p) = a.pid {
                out::check_pid(p)?;
            }
            (resolve(t)?, a.pid, None)
        }
        (None, RampProto::Tcp) => {
            if a.pid.is_some() {
                bail!("--pid applies with a TARGET; the built-in server is watched anyway");
            }
            let c = start_builtin(a, steps)?;
            (c.addr, Some(c.pid()), Some(c))
        }
        (None, RampProto::Udp) => {
            bail!("ramp udp needs TARGET (HOST:PORT), e.g. of `tpslab serve udp --mode echo`")
        }
    })
}

/// Runs `tpslab ramp tcp|udp`: flags -> plan (request, target) -> the closed loop -> the
/// record -> its report, SVG and exit code.
pub(crate) fn run(cmd: RampCmd) -> Result<ExitCode> {
    let (proto, a) = match cmd {
        RampCmd::Tcp(a) => (RampProto::Tcp, a),
        RampCmd::Udp(a) => (RampProto::Udp, a),
    };
    let steps = parse_steps(&a.users, &a.step).map_err(|e| anyhow!(e))?;
    a.record.check(false)?;
    if let Some(p) = &a.svg {
        out::check_output("--svg", p, false)?;
    }
    a.gate.conditions(applies::RAMP)?;
    STEP_DURATION.check("--step-duration", a.step_duration)?;
    STEP_WARMUP.check("--warmup", a.warmup)?;
    THINK.check("--think", a.think)?;
    REQUEST_TIMEOUT.check("--timeout", a.timeout)?;
    SAMPLE_INTERVAL.check("--interval", a.interval)?;
    if !(a.knee_gain > 0.0 && a.knee_gain < 1.0) {
        bail!("--knee-gain {}: allowed above 0 and below 1", a.knee_gain);
    }
    let framing = Framing::parse(&a.framing).map_err(|e| anyhow!("--{e}"))?;
    let (request, seq_field) = request(&a, proto)?;
    let (target, pid, server) = target(&a, proto, steps.len())?;
    let plan = RampPlan {
        proto,
        target,
        steps,
        step_ns: a.step_duration.as_nanos() as u64,
        warmup_ns: a.warmup.as_nanos() as u64,
        think_ns: a.think.as_nanos() as u64,
        timeout_ns: a.timeout.as_nanos() as u64,
        request,
        framing,
        seq_field,
        knee_gain: a.knee_gain,
        builtin_server: server.as_ref().map(|_| {
            if a.serialize {
                format!(
                    "{:?} CPU + {:?} under one global lock per request",
                    a.server_work, a.server_serial
                )
            } else {
                format!(
                    "{:?} CPU + {:?} waiting per request, no lock",
                    a.server_work, a.server_serial
                )
            }
        }),
        server_pid: pid,
        sample_ns: a.interval.as_nanos() as u64,
        load_threads: a.load_threads,
    };
    let mut out = std::io::stdout().lock();
    tpslab_report::term::ramp_header(&mut out, &plan)?;
    drop(out);
    let exporter = a.metrics.start("ramp")?;
    let stop = install_signals()?;
    let started = crate::out::Started::now();
    let secs = plan.steps.len() as f64 * (plan.warmup_ns + plan.step_ns) as f64 / 1e9;
    let label = format!("ramp: {} steps", plan.steps.len());
    // Scraped: every step's TPS and p99 as soon as it is measured.
    let steps = std::sync::Mutex::new(vec![]);
    let on_step = |s: &tpslab_analysis::ramp::StepResult| {
        if let Some(e) = &exporter {
            let mut st = steps.lock().unwrap_or_else(|e| e.into_inner());
            st.push(s.clone());
            e.set(tpslab_report::metrics::ramp_steps(&st, None));
        }
    };
    let run = out::with_progress(&label, secs, || run_ramp_with(&plan, &stop, &on_step))?;
    drop(server);
    let meta = started.meta(run.interrupted);
    let analysis = ramp::analyse(&run, meta.cpus);
    let rec = Record::with_meta(meta, Body::Ramp(RampReport { run, analysis }));
    let Body::Ramp(r) = &rec.body else {
        unreachable!("made as a ramp above")
    };
    let mut outputs = a.record.outputs();
    if let Some(p) = &a.svg {
        let mut plot = Vec::new();
        let r = tpslab_report::svg::ramp(&mut plot, r)
            .map(|_| plot)
            .map_err(anyhow::Error::from);
        outputs.extra.push(("--svg", p, "plot", r));
    }
    let print = |out: &mut dyn Write| tpslab_report::term::ramp_results(out, r);
    out::emit(&rec, outputs, out::Terminal::With(&print))?;
    // A target that refused every request: nothing was measured, an environment error
    // (exit 2, one line), after the record is kept like any run's.
    if let Some(why) = r.run.unreachable() {
        bail!(why);
    }
    a.gate.exit(&r.run.outcome(), applies::RAMP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_users_and_step_are_steps_or_an_error(users in "[0-9x+. ]{0,8}\\.\\.[0-9 ]{0,6}|\\PC{0,12}", step in "[+x]?[0-9.]{0,8}|\\PC{0,6}") {
            if let Ok(v) = parse_steps(&users, &step) {
                prop_assert!(!v.is_empty() && v.len() <= 200);
                prop_assert!(v[0] >= 1 && *v.last().unwrap() <= 10_000);
                prop_assert!(v.windows(2).all(|w| w[0] < w[1]), "{:?}", v);
            }
        }
    }

    #[test]
    fn steps_from_ranges() {
        assert_eq!(
            parse_steps("1..32", "x2").unwrap(),
            vec![1, 2, 4, 8, 16, 32]
        );
        assert_eq!(
            parse_steps("1..110", "+10").unwrap(),
            vec![1, 11, 21, 31, 41, 51, 61, 71, 81, 91, 101, 110]
        );
        assert_eq!(parse_steps("10..30", "10").unwrap(), vec![10, 20, 30]);
        assert_eq!(parse_steps("5..5", "x2").unwrap(), vec![5]);
        assert_eq!(parse_steps("1..3", "x1.1").unwrap(), vec![1, 2, 3]);
        assert!(parse_steps("9..1", "x2").unwrap_err().contains("empty"));
        for (u, s) in [
            ("0..5", "x2"),
            ("1-5", "x2"),
            ("1..5", "x1"),
            ("1..5", "+0"),
            ("1..5", "fast"),
            ("1..10001", "x2"),
            ("1..10000", "+1"),
        ] {
            let e = parse_steps(u, s).unwrap_err();
            assert!(e.contains(u) || e.contains(s), "{e}");
        }
    }
}
