//! `capacity udp|http`: open-loop steps (each one UDP run, `load udp`'s engine, with its
//! warm-up; or `load http`'s open loop after a warm-up run) at rates the search chooses ([`tpslab_analysis::capacity::next`]), each step
//! judged (the generator's self-check, then the objective; the verdict rules on a failing
//! UDP step), until the search ends, the budget would be passed, or `ctx.stop`; one record of
//! kind `capacity`.

mod search_steps;
pub(crate) mod watch;

use crate::diagnose::apply_fix;
use crate::server_proc::ServerProcess;
use crate::{Ctx, Started};
use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tpslab_analysis::capacity::{self as search, latency_text, rate_text};
use tpslab_engine::client::openloop::{run_load_http_live, run_load_tcp};
use tpslab_engine::client::udp_run::run_udp_streamed;
use tpslab_engine::host::guard::HostGuard;
use tpslab_net::sched::SchedPolicy;
use tpslab_plan::capacity::{CapacityLoad, CapacityPlan};
use tpslab_record::capacity::{CapacityRecord, CapacityRetry, CapacityStep, Conclusion};
use tpslab_record::verdict::{Diagnosis, Facts};
use tpslab_record::{Body, Record};
use watch::StreamWatch;

/// Sets `stop` when `ctx` is stopped or `deadline` passes, until dropped.
struct Watchdog {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(ctx: &Ctx, stop: Arc<AtomicBool>, deadline: Instant) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let (d, outer) = (done.clone(), ctx.stop.clone());
        let thread = std::thread::spawn(move || {
            while !d.load(Relaxed) {
                if outer.load(Relaxed) || Instant::now() >= deadline {
                    stop.store(true, Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Watchdog {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A step that failed on latency alone (every broken objective a latency bound) with
/// nothing lost: where the datagrams waited, when the server's socket held them (its
/// rx_queue), as the layer and its evidence. Not when an error or rate objective broke
/// too: the queue then explains only part of the failure.
fn queued(d: &mut Diagnosis, f: &Facts, latency_only: bool) {
    if !latency_only || d.case != tpslab_record::verdict::Case::NoLoss || f.rxq_max_bytes <= 0.0 {
        return;
    }
    d.layer =
        "the server's receive queue: datagrams waited there (the latency), none dropped yet".into();
    d.headline = format!(
        "Latency alone broke the objective: all {} datagrams were read and answered, after waiting in the server socket's receive queue (up to {:.0} B).",
        f.attempted, f.rxq_max_bytes
    );
    d.evidence.push(tpslab_record::verdict::Evidence {
        text: format!(
            "server socket rx_queue: mean {:.0} B, max {:.0} B{}",
            f.rxq_mean_bytes,
            f.rxq_max_bytes,
            f.limit_bytes
                .map_or(String::new(), |l| format!(" against a limit of {l} B"))
        ),
        source: "/proc/PID/net/udp rx_queue of the server socket, every sample".into(),
    });
}

/// A step's line for the terminal while the search runs: `step 3: 4,000 pps: pass (p99
/// 310 us, loss 0 %)`.
fn step_line(n: usize, s: &CapacityStep, unit: tpslab_plan::capacity::RateUnit) -> String {
    let p99 = s.latency_ns.map_or("no reply".to_string(), |l| {
        format!("p99 {}", latency_text(l[2] as f64))
    });
    let loss = s
        .loss_pct
        .map_or(String::new(), |l| format!(", loss {l:.2} %"));
    let why = if s.why.is_empty() {
        String::new()
    } else {
        format!(": {}", s.why.join(", "))
    };
    format!(
        "capacity step {n}: {} {unit}: {} ({p99}{loss}){why}",
        rate_text(s.rate_pps),
        s.status.word()
    )
}

/// What a step leaves for its verdict: a UDP run's record, or what a TCP or HTTP step's
/// window showed ([`StreamWatch`]).
enum StepEvidence {
    Udp(Box<tpslab_record::RunRecord>),
    /// The window's facts, and the window as a step for its response-time ledger.
    Stream(
        Box<tpslab_analysis::capacity_stream::StreamFacts>,
        Option<Box<tpslab_record::ramp::StepResult>>,
    ),
}

/// One step at `rate`: its figures and, for UDP, its run (the verdict's evidence; its
/// samples streamed to `ctx.live`). HTTP: the warm-up's run first (its figures not kept),
/// unless stopped. Errors: the engine's (one line).
fn run_step(
    plan: &CapacityPlan,
    rate: f64,
    stop: &AtomicBool,
    ctx: &Ctx,
) -> Result<(search::StepFigures, StepEvidence)> {
    match &plan.load {
        CapacityLoad::Udp(r) => {
            let mut run = r.clone();
            run.load.rate_pps = rate;
            run.load.run_id = tpslab_net::mono_ns() ^ ((std::process::id() as u64) << 32);
            let rec = run_udp_streamed(run, stop, ctx.live.clone())?;
            let Some(f) = search::figures(&rec, rate) else {
                anyhow::bail!("capacity step at {rate} pps: the run has no generator report");
            };
            Ok((f, StepEvidence::Udp(Box::new(rec))))
        }
        CapacityLoad::Http(h) => {
            let mut load = h.load.clone();
            load.rate = rate;
            if !h.warmup.is_zero() {
                load.duration = h.warmup;
                run_load_http_live(&load, stop, ctx.http_live.as_ref())?;
                load.duration = h.load.duration;
            }
            let watch = StreamWatch::start(load.target, h.pid, !load.version.is_http3());
            let rec = run_load_http_live(&load, stop, ctx.http_live.as_ref())?;
            // Requests in flight at once: each connection's streams with --http2.
            let (facts, step) = watch.end(&rec.result, load.schedules());
            Ok((
                search::figures_http(&rec, rate, stop.load(Relaxed)),
                StepEvidence::Stream(Box::new(facts), step.map(Box::new)),
            ))
        }
        CapacityLoad::Tcp(t) => {
            let mut load = t.clone();
            load.rate = rate;
            if !t.warmup.is_zero() {
                load.duration = t.warmup;
                run_load_tcp(&load, stop, ctx.http_live.as_ref())?;
                load.duration = t.duration;
            }
            let watch = StreamWatch::start(load.target, load.pid, true);
            let r = run_load_tcp(&load, stop, ctx.http_live.as_ref())?;
            let (facts, step) = watch.end(&r, load.connections);
            Ok((
                search::figures_tcp(&r, t.duration, rate, stop.load(Relaxed)),
                StepEvidence::Stream(Box::new(facts), step.map(Box::new)),
            ))
        }
    }
}

/// Why the first step shows that nothing listens on the target, in words starting with
/// [`search::NO_LISTENER`] (the search stops there: halving the rate would find the same);
/// None when something answered. UDP: the verdict's no listener (Udp: NoPorts took nearly
/// every datagram, no reply), or sends refused (ECONNREFUSED: an ICMP port unreachable
/// came back) with no reply read; TCP or HTTP: connections refused and nothing answered.
fn no_listener(step: &CapacityStep, evidence: &StepEvidence) -> Option<String> {
    use tpslab_record::verdict::Case;
    let case = step.verdict.as_ref().map(|v| v.case);
    match evidence {
        StepEvidence::Udp(rec) => {
            let g = rec.generator.as_ref()?;
            let refused = g.send_errors.get("ECONNREFUSED").copied().unwrap_or(0);
            if case == Some(Case::NoListener) {
                let no_ports = rec
                    .ledger
                    .as_ref()
                    .map_or(0, |l| l.request.count("no_ports"));
                Some(format!(
                    "{}: {no_ports} of the first step's {} datagrams found no socket on the target's port (Udp: NoPorts) and no reply came",
                    search::NO_LISTENER,
                    g.sent
                ))
            } else if refused > 0 && g.replies_read == 0 {
                Some(format!(
                    "{}: {refused} of the first step's sends were refused (ECONNREFUSED: the target's host answered ICMP port unreachable) and no reply came",
                    search::NO_LISTENER
                ))
            } else {
                None
            }
        }
        StepEvidence::Stream(..) => {
            (case == Some(Case::ConnectionsRefused) && step.answered_pps == 0.0).then(|| {
                format!(
                    "{}: the first step's connections were refused and nothing answered",
                    search::NO_LISTENER
                )
            })
        }
    }
}

/// Runs `tpslab capacity`: with `plan.server_cmd` the user's server started first (the
/// load's target and PID its), the search (`search`), and with `plan.fix_and_retry` the
/// fix applied and the search run again (`retry`); the server stopped at the end.
///
/// Returns the `capacity` record (interrupted when `ctx.stop` was set). Errors: the server
/// cannot start, or the first step cannot run (the target cannot be reached or found, a
/// bad `--pid`).
pub fn run(plan: &CapacityPlan, ctx: &Ctx) -> Result<Record> {
    let started = Started::now();
    let mut server = start_server(plan)?;
    let mut rec = search_steps::search(&on_server(plan, server.as_ref()), ctx, "capacity step")?;
    if plan.fix_and_retry && !ctx.stopped() {
        retry(&mut rec, &mut server, ctx);
    }
    drop(server);
    // The record's meta says whether the command was interrupted; each search's own
    // `interrupted` whether it was.
    let interrupted = ctx.stopped();
    Ok(Record::with_meta(
        started.meta(interrupted),
        Body::Capacity(rec),
    ))
}

/// The user's server of `--server-cmd`, started (None without it); for `capacity tcp`
/// without a target, tpslab's reference server (`serve tcp --mode replace`, for the
/// budget and 30 s more). Errors: it cannot start or never opens its socket.
fn start_server(plan: &CapacityPlan) -> Result<Option<ServerProcess>> {
    let cmd = plan.server_cmd.as_deref();
    match (&plan.load, cmd) {
        (CapacityLoad::Tcp(_), Some(cmd)) => ServerProcess::user_tcp(cmd).map(Some),
        (CapacityLoad::Tcp(t), None) => t
            .builtin
            .map(|b| {
                let b = crate::ramp::BuiltinServer {
                    work: b.work,
                    serial: b.serial,
                    serialize: b.serialize,
                    threads: b.threads,
                };
                let life = plan.search.budget + Duration::from_secs(30);
                ServerProcess::tpslab(&b.args(life, false))
            })
            .transpose(),
        (_, Some(cmd)) => ServerProcess::user_udp(cmd, &[], SchedPolicy::Other).map(Some),
        (_, None) => Ok(None),
    }
}

/// `plan` with the started server's address and PID as the load's target (unchanged
/// without one).
fn on_server(plan: &CapacityPlan, server: Option<&ServerProcess>) -> CapacityPlan {
    let mut p = plan.clone();
    if let Some(srv) = server {
        p.load.on_server(srv.addr, srv.pid());
    }
    p
}

/// `--fix-and-retry`: the fix of the verdict at the first search's lowest failing rate
/// applied (host sysctls through the host guard, the server started again when tpslab
/// started it), the search run again from the rate the first sustained, the host restored.
/// When there is nothing to apply, or it cannot be applied, `rec.notes` says why and there
/// is no second search; a second search that fails to run becomes a note too (the first
/// search is never lost).
fn retry(rec: &mut CapacityRecord, server: &mut Option<ServerProcess>, ctx: &Ctx) {
    let no = |rec: &mut CapacityRecord, why: String| {
        rec.notes
            .push(format!("--fix-and-retry: no second search: {why}"))
    };
    let Some(d) = &rec.boundary else {
        let why = match &rec.conclusion {
            Conclusion::AtLeast { .. } => "no rate failed up to --max-rate, so there is nothing to fix",
            Conclusion::GeneratorLimited { .. } => "the generator was the limit, not the server: a fix of the server's host would prove nothing",
            _ => "no failing step named a layer to fix",
        };
        return no(rec, why.into());
    };
    let Some(fix) = d.fix.clone() else {
        let what = d
            .recommendations
            .first()
            .map_or(String::new(), |r| format!(" ({})", r.what));
        return no(
            rec,
            format!("the verdict at the first failing rate recommends no change tpslab can apply{what}: the change is the server's own"),
        );
    };
    let Some(first) = rec.plan.load.udp() else {
        return no(rec, "only a UDP search names a fix".into());
    };
    let mut run = first.clone();
    let restartable = rec.plan.server_cmd.is_some();
    let a = apply_fix(&mut run, &fix, restartable);
    if a.sysctls.is_empty() {
        let why = if a.skipped.is_empty() {
            "nothing recommended is a change tpslab can apply".to_string()
        } else {
            format!(
                "the fix ({}) reaches only sockets created after the change, and tpslab cannot restart this server: give --server-cmd 'COMMAND {{port}}' so that it can",
                a.skipped.join(", ")
            )
        };
        return no(rec, why);
    }
    let mut guard = match HostGuard::apply(&a.sysctls) {
        Ok(g) => g,
        Err(e) => return no(rec, format!("the fix could not be applied ({e})")),
    };
    // Sockets made before the change keep their old limits: the server starts again.
    if let Some(cmd) = &rec.plan.server_cmd {
        drop(server.take());
        match ServerProcess::user_udp(cmd, &[], SchedPolicy::Other) {
            Ok(s) => *server = Some(s),
            Err(e) => {
                restore(&mut guard, rec);
                no(
                    rec,
                    format!("the server did not start again after the change: {e}"),
                );
                return;
            }
        }
    }
    // Stopped while the server started again: no second search (the host is restored).
    if ctx.stopped() {
        restore(&mut guard, rec);
        return no(rec, "interrupted before it started".into());
    }
    let mut plan = rec.plan.clone();
    plan.fix_and_retry = false;
    // From the rate the first search sustained: below it the fix is not in question.
    if let Some(s) = rec.conclusion.bounds().0 {
        plan.search.start_rate = s.clamp(plan.search.min_rate.ceil(), plan.search.max_rate);
        run.load.rate_pps = plan.search.start_rate;
    }
    plan.load = CapacityLoad::Udp(run);
    let second = search_steps::search(
        &on_server(&plan, server.as_ref()),
        ctx,
        "capacity step (with the fix)",
    );
    let restored = restore(&mut guard, rec);
    match second {
        Ok(search) => {
            rec.retry = Some(Box::new(CapacityRetry {
                applied: a.what,
                restored,
                search,
            }))
        }
        Err(e) => no(rec, format!("the second search failed to run: {e}")),
    }
}

/// Puts the host settings back: returns what was restored; a setting that could not be
/// becomes a note of `rec`.
fn restore(guard: &mut HostGuard, rec: &mut CapacityRecord) -> Vec<(String, String)> {
    let done = guard.restore();
    rec.notes.extend(
        done.skipped
            .into_iter()
            .map(|s| format!("not restored: {s}")),
    );
    done.restored
}

/// `capacity tcp`'s settings as given, for [`tcp_step`].
#[derive(Debug, Clone)]
pub struct TcpFlags {
    /// `--protocol`'s protocol ([`tpslab_plan::proto::Proto::from_flag`]; `framed`:
    /// [`tpslab_plan::proto::Proto::Tcp`]).
    pub proto: tpslab_plan::proto::Proto,
    /// HOST:PORT; None: `--server-cmd`'s server, or tpslab's own.
    pub target: Option<String>,
    /// `--server-cmd` was given.
    pub server_cmd: bool,
    /// `--size`, bytes (tpslab's request, framed by a length prefix).
    pub size: u64,
    /// `--payload-file`: sent as each request instead, with its own framing.
    pub payload_file: Option<std::path::PathBuf>,
    /// `--framing` as typed (default `length`).
    pub framing: String,
    /// `--connections`.
    pub connections: usize,
    /// `--timeout`.
    pub timeout: Duration,
    /// `--load-threads` (0: one per CPU).
    pub load_threads: usize,
    /// `--pid`.
    pub pid: Option<u32>,
    /// `--server-work`, `--server-serial` (default 10ms, as `ramp tcp`'s),
    /// `--serialize`, `--server-threads`.
    pub builtin: tpslab_plan::capacity::BuiltinTcpServer,
    /// `--start-rate`, `--step-duration`, `--warmup`.
    pub rate: f64,
    /// The measured window of each step.
    pub window: Duration,
    /// The warm-up of each step.
    pub warmup: Duration,
}

/// The default waiting per request of tpslab's own server (`ramp tcp`'s).
pub const BUILTIN_SERIAL: Duration = Duration::from_millis(10);

/// The TCP step of `f`, checked: the framing, the request (`ramp tcp`'s: `--size`
/// bytes with "ping" every 64 and a length prefix, or the payload file's bytes), the
/// server (HOST:PORT resolved and `--pid` checked; `--server-cmd`; or tpslab's own,
/// whose `--server-*` settings apply only to it). Errors: one line naming the flag(s).
pub fn tcp_step(f: &TcpFlags) -> Result<tpslab_plan::capacity::TcpStep> {
    use anyhow::{anyhow, bail};
    let framing = tpslab_plan::framing::Framing::parse(&f.framing).map_err(|e| anyhow!("--{e}"))?;
    let payload = match &f.payload_file {
        Some(p) => Some(crate::input::read_payload_file(p)?),
        None => None,
    };
    let (request, _) = crate::ramp::request(
        f.proto.clone(),
        payload,
        f.size,
        f.framing != "length",
        None,
    )?;
    let b = f.builtin;
    let builtin_flags =
        !b.work.is_zero() || b.serialize || b.threads != 0 || b.serial != BUILTIN_SERIAL;
    let unstarted = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let (target, builtin) = match (&f.target, f.server_cmd) {
        (Some(_), true) => bail!(
            "capacity tcp: give HOST:PORT of a running server, or --server-cmd to start one, not both"
        ),
        (Some(t), false) => {
            if builtin_flags {
                bail!("--server-work, --server-serial, --server-threads and --serialize configure tpslab's own server: leave out HOST:PORT to use it");
            }
            if let Some(p) = f.pid {
                tpslab_plan::target::check_pid("--pid", p)?;
            }
            (tpslab_plan::target::resolve(t)?, None)
        }
        (None, true) => {
            if builtin_flags {
                bail!("--server-work, --server-serial, --server-threads and --serialize configure tpslab's own server, not --server-cmd's");
            }
            if f.pid.is_some() {
                bail!("--server-cmd starts the server itself: --pid does not apply");
            }
            (unstarted, None)
        }
        (None, false) => {
            if f.proto.builtin()? != tpslab_plan::proto::Builtin::Framed {
                bail!(
                    "capacity tcp --protocol {}: give the server's HOST:PORT or --server-cmd (tpslab's own server speaks framed requests)",
                    f.proto.name()
                );
            }
            if f.pid.is_some() {
                bail!("--pid applies with HOST:PORT; tpslab's own server is watched anyway");
            }
            (unstarted, Some(b))
        }
    };
    Ok(tpslab_plan::capacity::TcpStep {
        target,
        request_bytes: request.len() as u64,
        request,
        framing,
        rate: f.rate,
        connections: f.connections,
        duration: f.window,
        timeout: f.timeout,
        load_threads: f.load_threads,
        warmup: f.warmup,
        pid: f.pid,
        builtin,
        proto: f.proto.clone(),
    })
}
