//! `tpslab ramp tcp|udp`: closed-loop load stepping up the users, the knee, Little's law
//! per step, the Universal Scalability Law fit, and the server threads' states.

use crate::cli::{install_signals, resolve, write_json};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;
use tpslab_analysis::gate::applies;
use tpslab_analysis::usl::{self, StepPoint, UslFit};
use tpslab_engine::ramp::{run_ramp, RampPlan, RampProto, RampRecord, StepResult};
use tpslab_engine::rr::{frame, Framing};
use tpslab_plan::limits::{
    MAX_UDP_PAYLOAD, REQUEST_TIMEOUT, SAMPLE_INTERVAL, STEP_DURATION, STEP_WARMUP, THINK,
};
use tpslab_report::term::table;

/// JSON schema of `tpslab ramp --json`.
pub const RAMP_SCHEMA: &str = "tpslab.ramp/1";

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
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    step_duration: Duration,
    /// Unmeasured start of each step (new users connect, queues settle).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Think time of a user between a reply and its next request.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    think: Duration,
    /// Longest wait for a reply or a connect; a request that takes longer is an error.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Request body size with tpslab's own protocol, bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
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
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Knee: the first step whose TPS gain per user gain falls below this.
    #[arg(long, default_value_t = 0.2)]
    knee_gain: f64,
    /// Built-in server: CPU work per request.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    server_work: Duration,
    /// Built-in server: waiting per request (a sleep, like a database round trip).
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    server_serial: Duration,
    /// Built-in server: hold one global lock during --server-serial (S3).
    #[arg(long)]
    serialize: bool,
    /// Built-in server: 0 = a thread per connection; N = N epoll workers sharing them.
    #[arg(long, default_value_t = 0)]
    server_threads: usize,
    /// Write the steps, the fit and the verdict (JSON, schema tpslab.ramp/1).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write TPS and response time against users with the fitted curve (SVG).
    #[arg(long)]
    svg: Option<PathBuf>,
    #[command(flatten)]
    gate: crate::cli::GateFlags,
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

/// The reference server as a child process; killed by its PID on drop.
struct ChildServer(Child);

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_builtin(a: &RampArgs, steps: usize) -> Result<(ChildServer, std::net::SocketAddr)> {
    let exe = std::env::current_exe().context("finding tpslab's own executable")?;
    let mut c = Command::new(exe);
    c.args(["serve", "tcp", "--mode", "replace", "--bind", "127.0.0.1:0"])
        .arg("--work-ns")
        .arg(humantime::format_duration(a.server_work).to_string())
        .arg("--serial-ns")
        .arg(humantime::format_duration(a.server_serial).to_string());
    if a.serialize {
        c.arg("--serialize");
    }
    c.arg("--threads").arg(a.server_threads.to_string());
    // Ends by itself even if tpslab is killed before it can stop it.
    let life = (a.step_duration + a.warmup) * steps as u32 + Duration::from_secs(30);
    c.arg("--duration").arg(format!("{}s", life.as_secs()));
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the reference server")?;
    let out = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no stdout of the server"))?;
    let child = ChildServer(child);
    let mut line = String::new();
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .context("reading the server's first line")?;
    let addr = line
        .split_whitespace()
        .find_map(|w| w.parse::<std::net::SocketAddr>().ok())
        .ok_or_else(|| anyhow!("the reference server did not start: {line:?}"))?;
    Ok((child, addr))
}

fn ms(ns: f64) -> String {
    format!("{:.2}", ns / 1e6)
}

/// Top wait channel of a step and its share of the thread samples.
fn top_state(s: &StepResult) -> Option<(String, f64)> {
    let t = s.threads.as_ref()?;
    if t.samples == 0 {
        return None;
    }
    let mut best = ("running".to_string(), t.running);
    for (w, &n) in &t.sleeping {
        if n > best.1 {
            best = (w.clone(), n);
        }
    }
    if t.disk > best.1 {
        best = ("disk (D)".into(), t.disk);
    }
    Some((best.0, best.1 as f64 / t.samples as f64))
}

/// Names what a wait channel means.
fn wchan_meaning(w: &str) -> &'static str {
    if w.starts_with("futex") {
        "waiting on a lock (futex)"
    } else if w.contains("epoll")
        || w.contains("sk_wait")
        || w.contains("wait_woken")
        || w.contains("poll")
        || w.contains("inet_csk_accept")
    {
        "waiting for the network / peer"
    } else if w.contains("nanosleep") {
        "sleeping (timer)"
    } else if w == "running" {
        "busy on CPU (running or runnable)"
    } else {
        "waiting in the kernel"
    }
}

fn points(steps: &[StepResult], think_s: f64) -> Vec<StepPoint> {
    steps
        .iter()
        .map(|s| StepPoint {
            users: s.users as f64,
            tps: s.tps,
            mean_response_s: s.response.mean_ns / 1e9,
            think_s,
        })
        .collect()
}

/// `tpslab ramp`.
pub(crate) fn run(cmd: RampCmd) -> Result<ExitCode> {
    let (proto, a) = match cmd {
        RampCmd::Tcp(a) => (RampProto::Tcp, a),
        RampCmd::Udp(a) => (RampProto::Udp, a),
    };
    let steps = parse_steps(&a.users, &a.step).map_err(|e| anyhow!(e))?;
    if let Some(p) = &a.json {
        crate::cli::check_output("--json", p, false)?;
    }
    if let Some(p) = &a.svg {
        crate::cli::check_output("--svg", p, false)?;
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
    let payload = match &a.payload_file {
        Some(p) => Some(crate::cli::read_payload_file(p)?),
        None => None,
    };
    if !(8..=MAX_UDP_PAYLOAD).contains(&a.size) {
        bail!("--size {}: allowed 8..={MAX_UDP_PAYLOAD} bytes", a.size);
    }
    let body = || {
        let mut b = vec![b'.'; a.size];
        for c in b.chunks_mut(64) {
            if c.len() >= 4 {
                c[..4].copy_from_slice(b"ping");
            }
        }
        b
    };
    let (request, seq_field) = match proto {
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
    };
    let builtin_flags = !a.server_work.is_zero()
        || a.serialize
        || a.server_threads != 0
        || a.server_serial != Duration::from_millis(10);
    let mut server = None;
    let (target, pid) = match (&a.target, proto) {
        (Some(t), _) => {
            if builtin_flags {
                bail!("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out TARGET to use it");
            }
            if let Some(p) = a.pid {
                crate::cli::check_pid(p)?;
            }
            (resolve(t)?, a.pid)
        }
        (None, RampProto::Tcp) => {
            if a.pid.is_some() {
                bail!("--pid applies with a TARGET; the built-in server is watched anyway");
            }
            let (c, addr) = start_builtin(&a, steps.len())?;
            let pid = c.0.id();
            server = Some(c);
            (addr, Some(pid))
        }
        (None, RampProto::Udp) => {
            bail!("ramp udp needs TARGET (HOST:PORT), e.g. of `tpslab serve udp --mode echo`")
        }
    };
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
        server_pid: pid,
        sample_ns: a.interval.as_nanos() as u64,
    };
    let total = plan.steps.len() as f64 * (a.step_duration + a.warmup).as_secs_f64();
    println!(
        "tpslab ramp {}: {} steps of users {:?}, {} s{}; target {}{}",
        if proto == RampProto::Tcp {
            "tcp"
        } else {
            "udp"
        },
        plan.steps.len(),
        plan.steps,
        if total < 10.0 {
            format!("{total:.1}")
        } else {
            format!("{total:.0}")
        },
        if a.think.is_zero() {
            String::new()
        } else {
            format!(", think {:?}", a.think)
        },
        target,
        match (&server, a.serialize) {
            (Some(_), true) => format!(
                " (built-in server: {:?} CPU + {:?} under one global lock per request)",
                a.server_work, a.server_serial
            ),
            (Some(_), false) => format!(
                " (built-in server: {:?} CPU + {:?} waiting per request, no lock)",
                a.server_work, a.server_serial
            ),
            (None, _) => String::new(),
        }
    );
    let stop = install_signals()?;
    let rec = run_ramp(&plan, &stop)?;
    drop(server);
    let pts = points(&rec.steps, a.think.as_secs_f64());
    let fit = usl::fit_usl(&pts.iter().map(|p| (p.users, p.tps)).collect::<Vec<_>>());
    let knee = usl::find_knee(&pts, a.knee_gain);
    print_steps(&rec, &pts);
    let verdict = print_analysis(
        &rec,
        &pts,
        fit.as_ref().ok(),
        fit.as_ref().err(),
        knee,
        a.knee_gain,
    );
    if let Some(p) = &a.svg {
        std::fs::write(p, svg(&rec, fit.as_ref().ok()))
            .map_err(|e| anyhow!("--svg {}: {e}", p.display()))?;
        println!("plot: {}", p.display());
    }
    if let Some(p) = &a.json {
        let little: Vec<_> = pts.iter().map(usl::littles_law).collect();
        write_json(
            p,
            &serde_json::json!({
                "schema": RAMP_SCHEMA,
                "record": rec,
                "little": little,
                "knee_index": knee,
                "knee_users": knee.map(|k| rec.steps[k].users),
                "usl": fit.as_ref().ok(),
                "usl_error": fit.as_ref().err().map(|e| e.to_string()),
                "verdict": verdict,
            }),
        )?;
    }
    a.gate.exit(&rec.outcome(), applies::RAMP)
}

fn print_steps(rec: &RampRecord, pts: &[StepPoint]) {
    let mut t = table(&[
        "users",
        "TPS",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "errors",
        "X*(R+Z)/N",
        "server CPU",
        "run queue",
        "server threads mostly",
    ]);
    for (s, p) in rec.steps.iter().zip(pts) {
        let l = usl::littles_law(p);
        let errs: u64 = s.errors.values().sum();
        t.add_row(vec![
            s.users.to_string(),
            format!("{:.1}", s.tps),
            ms(s.response.p50_ns as f64),
            ms(s.response.p90_ns as f64),
            ms(s.response.p99_ns as f64),
            ms(s.response.max_ns as f64),
            if errs == 0 {
                "0".into()
            } else {
                format!(
                    "{errs} ({})",
                    s.errors
                        .iter()
                        .map(|(k, v)| format!("{k} x{v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            format!("{:.2}", l.ratio),
            s.server_cpu_cores
                .map_or("-".into(), |c| format!("{:.0} %", c * 100.0)),
            s.threads.as_ref().map_or("-".into(), |t| {
                format!("{:.0} %", t.runqueue_ns as f64 / 1e7 / s.measured_s)
            }),
            top_state(s).map_or("-".into(), |(w, f)| format!("{w} {:.0} %", f * 100.0)),
        ]);
    }
    println!("{t}");
    println!("  sources: TPS = replies in the step's measured window / its length; response = request written to reply read (closed loop: no coordinated omission, each user waits); X*(R+Z)/N = Little's law (1.00 = every user always had a request out); server CPU from /proc/PID/stat utime+stime; run queue = time the server's threads waited for a CPU while runnable, in % of one CPU (schedstat); threads from /proc/PID/task/*/stat state and wchan");
}

fn print_analysis(
    rec: &RampRecord,
    pts: &[StepPoint],
    fit: Option<&UslFit>,
    fit_err: Option<&usl::UslError>,
    knee: Option<usize>,
    gain: f64,
) -> String {
    let mut lines = vec![];
    let served: u64 = rec.steps.iter().map(|s| s.completed).sum();
    // Without a single reply there is no curve: no knee, no Little's law, no fit to show.
    if served > 0 {
        match knee {
            Some(k) => lines.push(format!(
                "knee at {} user(s) ({:.1} TPS): beyond it TPS grew by less than {:.0} % of the users' growth while response time rose",
                rec.steps[k].users,
                rec.steps[k].tps,
                gain * 100.0
            )),
            None => lines.push("no knee: TPS kept growing with users over the whole ramp".into()),
        }
        let bad_little: Vec<String> = pts
            .iter()
            .map(usl::littles_law)
            .zip(&rec.steps)
            .filter(|(l, _)| !l.ok(0.1))
            .map(|(l, s)| format!("{} users ({:.2})", s.users, l.ratio))
            .collect();
        if pts.is_empty() {
            lines.push("no step completed".into());
        } else if bad_little.is_empty() {
            lines.push(
                "Little's law holds within 10 % at every step: the load was closed-loop as intended"
                    .into(),
            );
        } else {
            lines.push(format!(
                "Little's law off by more than 10 % at {}: users were not always waiting on a reply (errors, timeouts, or the load tool itself)",
                bad_little.join(", ")
            ));
        }
        match (fit, fit_err) {
            (Some(f), _) => lines.push(format!(
                "USL fit: lambda {:.1} TPS/user [{:.1}, {:.1}], sigma {:.3} [{:.3}, {:.3}], kappa {:.5} [{:.5}, {:.5}], R^2 {:.3}. {}",
                f.lambda, f.lambda_ci.0, f.lambda_ci.1, f.sigma, f.sigma_ci.0, f.sigma_ci.1, f.kappa, f.kappa_ci.0, f.kappa_ci.1, f.r_squared, f.verdict()
            )),
            (None, Some(e)) => lines.push(format!("USL fit: {e}")),
            _ => {}
        }
    }
    // Thread states at the last step: what the server did when most loaded.
    if let Some(last) = rec.steps.last() {
        if let Some((w, f)) = top_state(last) {
            let cpu = last.server_cpu_cores.map_or(String::new(), |c| {
                format!(", using {:.0} % of a CPU", c * 100.0)
            });
            lines.push(format!(
                "server threads at {} users: {:.0} % of samples in {w}: {}{cpu}",
                last.users,
                f * 100.0,
                wchan_meaning(&w)
            ));
        }
    }
    let serial = fit.is_some_and(|f| f.sigma >= 0.5);
    let top = rec.steps.last().and_then(top_state);
    // A lock: most server thread samples wait in a futex at the top, and that share
    // grew with the users (idle pool threads parked on condition variables wait in a
    // futex at every step, even with one user).
    let futex_share = |s: &StepResult| {
        s.threads.as_ref().map_or(0.0, |t| {
            let f: u64 = t
                .sleeping
                .iter()
                .filter(|(w, _)| w.starts_with("futex"))
                .map(|(_, n)| n)
                .sum();
            f as f64 / t.samples.max(1) as f64
        })
    };
    let lock = match (rec.steps.first(), rec.steps.last()) {
        (Some(f), Some(l)) => futex_share(l) >= 0.5 && futex_share(l) - futex_share(f) >= 0.2,
        _ => false,
    };
    let busy = rec.steps.last().and_then(|s| s.server_cpu_cores);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let idle_cpu = busy.is_some_and(|b| b < 0.5 * cores);
    // Flat: TPS at the last step within 10 % of TPS at the knee.
    let flat = knee.is_some_and(|k| {
        rec.steps
            .last()
            .is_some_and(|l| l.tps < rec.steps[k].tps * 1.1)
    });
    let knee_users = knee.map_or(0, |k| rec.steps[k].users);
    let verdict = if served == 0 {
        "VERDICT: no replies at all: the server did not answer (see the errors per step); nothing to say about scaling".to_string()
    } else if rec.steps.len() < 2 {
        "VERDICT: one step only: a ramp needs at least two user counts to show how TPS scales"
            .to_string()
    } else if (serial || flat) && lock && idle_cpu {
        "VERDICT: serialisation: TPS is flat beyond the knee and the server's threads wait on a lock while its CPU idles; more users only lengthen the queue (response time grows linearly with users). Remove or shorten the serialised section; adding servers or threads will not raise TPS".to_string()
    } else if (serial || flat) && busy.is_some_and(|b| b >= 0.8 * cores) {
        format!("VERDICT: saturation of the CPU: the server uses {:.0} % of {cores:.0} CPUs at the top; TPS is capped by CPU, not by a lock", busy.unwrap_or(0.0) * 100.0)
    } else if (serial || flat) && lock {
        "VERDICT: TPS is flat and the server's threads wait on a lock more as users grow, while it uses much of its CPU: both contention and CPU may limit it; see the run queue column".to_string()
    } else if (serial || flat) && idle_cpu && top.is_some() {
        format!(
            "VERDICT: a concurrency cap: TPS stops at the knee ({knee_users} users) while the server's CPU idles and its threads wait ({}): it works on only about {knee_users} requests at once, each waiting on something (a backend, a peer, a timer). More threads, workers or connections (S3's single connection), or a faster backend, raise TPS",
            top.as_ref().map_or("?", |(w, _)| w.as_str())
        )
    } else if serial || flat {
        "VERDICT: TPS stops growing without a lock wait or a busy CPU visible on this host: the limit is elsewhere (a downstream peer, the network, one connection carrying all requests); give --pid to see the server's threads".to_string()
    } else if knee.is_some() {
        "VERDICT: throughput bends but keeps rising; see the USL fit for where it peaks".to_string()
    } else {
        "VERDICT: scales with users over the measured range".to_string()
    };
    println!("{verdict}");
    for l in &lines {
        println!("  {l}");
    }
    verdict
}

/// TPS and mean response time against users, with the USL curve: a self-contained SVG.
fn svg(rec: &RampRecord, fit: Option<&UslFit>) -> String {
    let (w, h, l, r, t, b) = (720.0, 420.0, 70.0, 70.0, 30.0, 50.0);
    let nmax = rec.steps.iter().map(|s| s.users).max().unwrap_or(1) as f64;
    let xmax = rec
        .steps
        .iter()
        .map(|s| s.tps)
        .fold(1.0, f64::max)
        .max(fit.map_or(0.0, |f| {
            (1..=nmax as usize)
                .map(|n| f.predict(n as f64))
                .fold(0.0, f64::max)
        }))
        * 1.1;
    let rmax = rec
        .steps
        .iter()
        .map(|s| s.response.mean_ns / 1e6)
        .fold(0.001, f64::max)
        * 1.1;
    let px = |n: f64| l + (w - l - r) * n / nmax;
    let py = |v: f64, max: f64| h - b - (h - t - b) * v / max;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    s += &format!(
        "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
        h - b,
        w - r,
        h - b
    );
    s += &format!(
        "<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" stroke=\"black\"/>\n",
        h - b
    );
    s += &format!(
        "<line x1=\"{}\" y1=\"{t}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
        w - r,
        w - r,
        h - b
    );
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#1f77b4\">{:.0}</text>\n",
            l - 5.0,
            py(xmax * f, xmax) + 4.0,
            xmax * f
        );
        s += &format!(
            "<text x=\"{}\" y=\"{}\" fill=\"#d62728\">{:.1}</text>\n",
            w - r + 5.0,
            py(rmax * f, rmax) + 4.0,
            rmax * f
        );
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:.0}</text>\n",
            px(nmax * f),
            h - b + 16.0,
            nmax * f
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">users (N)</text>\n",
        (l + w - r) / 2.0,
        h - 10.0
    );
    s += &format!(
        "<text x=\"10\" y=\"{}\" fill=\"#1f77b4\">TPS</text>\n",
        t - 10.0
    );
    s += &format!(
        "<text x=\"{}\" y=\"{}\" fill=\"#d62728\">mean response ms</text>\n",
        w - r - 40.0,
        t - 10.0
    );
    if let Some(f) = fit {
        let pts: Vec<String> = (0..=100)
            .map(|i| {
                let n = 1.0 + (nmax - 1.0) * i as f64 / 100.0;
                format!("{:.1},{:.1}", px(n), py(f.predict(n), xmax))
            })
            .collect();
        s += &format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-dasharray=\"5,4\"/>\n",
            pts.join(" ")
        );
        s += &format!(
            "<text x=\"{}\" y=\"{}\" fill=\"#1f77b4\">USL fit: sigma {:.3}, kappa {:.5}</text>\n",
            l + 10.0,
            t + 14.0,
            f.sigma,
            f.kappa
        );
    }
    let tps: Vec<String> = rec
        .steps
        .iter()
        .map(|x| format!("{:.1},{:.1}", px(x.users as f64), py(x.tps, xmax)))
        .collect();
    let rt: Vec<String> = rec
        .steps
        .iter()
        .map(|x| {
            format!(
                "{:.1},{:.1}",
                px(x.users as f64),
                py(x.response.mean_ns / 1e6, rmax)
            )
        })
        .collect();
    s += &format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n",
        tps.join(" ")
    );
    s += &format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>\n",
        rt.join(" ")
    );
    for p in &tps {
        let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
        s += &format!("<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"#1f77b4\"/>\n");
    }
    s += "</svg>\n";
    s
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
