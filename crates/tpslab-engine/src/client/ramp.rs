//! Closed-loop load that ramps up: N users, each sending a request and waiting for its
//! reply (plus optional think time), N stepping up over the run; per step TPS, response
//! times, errors, the server's CPU and its threads' states.
//!
//! Each step starts with `warmup_ns` (new users connect, queues settle; not measured),
//! then `step_ns` measured: a request counts in the step when its reply arrives inside
//! that window. Every request has a timeout, so a server that stops answering or closes
//! connections costs errors, never a hang. A user that fails reconnects (TCP) and goes on.
//! The users are state machines multiplexed on a few epoll loop threads (`users.rs`; one
//! per CPU unless the plan says), so a step of 10,000 users is 10,000 sockets, not
//! 10,000 threads. What they send and how a reply is recognised is the plan's protocol
//! ([`crate::client::proto`]); the step accounting they share is `tally.rs`.
//!
//! A plan is a promise of how long a server is loaded: the users follow the plan's clock,
//! not this thread's. Each user checks the plan's end (and the run's stop) itself before
//! it connects or writes, so the last request is written by the plan's end however late
//! the thread that keeps the books is (a busy host, a slow `--pid` sample, a live feed);
//! the last step's books are kept once no request is being sent. The record says when
//! each step's requests were really written (`load_sent_s`, `load_end_s`) and, when load
//! ran past the plan by more than [`tpslab_record::ramp::Overrun::TOLERANCE_S`], that
//! it overran (`overrun`, with the host's load average).

use std::collections::BTreeMap;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use tpslab_analysis::stats::new_ns_histogram;
use tpslab_net::mono_ns;
use tpslab_plan::time::nanos;

use crate::client::proto::Protocol;
use crate::client::tally::{StepAcc, Tally};
use crate::EngineError;
use tpslab_plan::proto::Transport;

use tpslab_plan::ramp::RampPlan;
use tpslab_record::ramp::{RampRecord, StepResult};

/// Runs the plan; `stop` ends it early (the steps so far are returned).
pub fn run_ramp(plan: &RampPlan, stop: &AtomicBool) -> Result<RampRecord, EngineError> {
    run_ramp_with(plan, stop, &|_| {})
}

/// [`run_ramp`], with each step's result also given to `on_step` as soon as it is measured
/// (a live exporter's feed). Errors: a plan [`RampPlan::validate`] refuses (its line), more
/// users than file descriptors or (TCP) local ports, a loop thread that cannot start.
pub fn run_ramp_with(
    plan: &RampPlan,
    stop: &AtomicBool,
    on_step: &(dyn Fn(&StepResult) + Sync),
) -> Result<RampRecord, EngineError> {
    plan.validate()
        .map_err(|e| EngineError::Other(e.to_string()))?;
    let proto = Protocol::for_plan(&plan.wire());
    // HTTP/2 and HTTP/3: the users share the plan's connections; else a socket per user.
    let version = plan.connections.version();
    let (h2, h3) = (version.is_http2(), version.is_http3());
    let (sockets, loops) = sockets_and_loops(plan, &proto)?;
    // HTTP/3's one handshake before the run (a round trip, and up to 100 ms for its
    // close): before the plan's clock starts, so the first step's warm-up is the users'.
    let h3client = match (plan.proto.http_request(), h3) {
        (Some(req), true) => Some(crate::client::openloop::h3loop::client(
            req,
            plan.target,
            plan.timeout,
        )?),
        _ => None,
    };
    let t0 = mono_ns() + 50_000_000;
    let per = nanos(&(plan.warmup + plan.step));
    let shared = new_tally(plan, stop, t0, per);
    let mut results = vec![];
    // The server's network namespace (its TCP counters and listen socket): its PID's,
    // or this host's for a local target.
    // HTTP/3 is over UDP: no TCP of its own to read.
    let tcp_root = match (proto.transport(), plan.server_pid) {
        _ if h3 => None,
        (Transport::Stream, Some(pid)) => Some(std::path::PathBuf::from(format!("/proc/{pid}"))),
        (Transport::Stream, None) if plan.target.ip().is_loopback() => {
            Some(std::path::PathBuf::from("/proc/self"))
        }
        _ => None,
    };
    let listener = tcp_root
        .as_ref()
        .and_then(|_| listener(plan.server_pid, plan.target));
    // Replies' gaps from first byte to last are dated on a stream of the users' loop.
    let gaps_kept = proto.transport() == Transport::Stream && !h2 && !h3;
    let mut watch = ServerWatch::new(plan, tcp_root, gaps_kept);
    let h2run = match (plan.proto.http_request(), h2) {
        (Some(req), true) => Some(h2_users(plan, req, &shared)?),
        _ => None,
    };
    let h3run = h3client.map(|c| crate::client::openloop::h3loop::ramp_users(plan, c, &shared));
    std::thread::scope(|s| -> Result<(), EngineError> {
        // The users, multiplexed on a few loop threads (user i on loop i % loops; with
        // HTTP/2 or HTTP/3 connection c on loop c % loops, its users with it).
        for t in 0..loops {
            let (sh, proto, h2run, h3run) = (&shared, &proto, &h2run, &h3run);
            let ids: Vec<usize> = (t..sockets).step_by(loops).collect();
            let spawned = std::thread::Builder::new()
                .name(format!("ramp-users-{t}"))
                .spawn_scoped(s, move || match (h2run, h3run) {
                    (Some(run), _) => crate::client::openloop::h2loop::run_loop(run, ids),
                    (_, Some(run)) => crate::client::openloop::h3loop::run_loop(run, ids),
                    _ => proto.with(crate::client::users::Users { sh, ids }),
                });
            if let Err(e) = spawned {
                // The loops already started must end, or the scope would wait forever.
                shared.done.store(true, Relaxed);
                return Err(EngineError::Other(format!(
                    "starting user loop {t} of {loops}: {e}"
                )));
            }
        }
        for (k, &users) in plan.steps.iter().enumerate() {
            let Some(r) = watch.step(&shared, k, users, t0) else {
                break;
            };
            results.push(r);
            if let Some(r) = results.last() {
                on_step(r);
            }
        }
        shared.done.store(true, Relaxed);
        Ok(())
    })?;
    if let Some(why) = h2run
        .as_ref()
        .and_then(|r| r.fatal.lock().unwrap_or_else(|e| e.into_inner()).take())
    {
        return Err(EngineError::Other(why));
    }
    // Every loop thread (its runtime, endpoints and sockets) has ended: the sockets'
    // counts are whole.
    let quic = h3run.as_ref().map(|r| {
        let mut q = *r.quic.lock().unwrap_or_else(|e| e.into_inner());
        r.sockets.fill(&mut q);
        q
    });
    let ended = Ended {
        shared: &shared,
        proto: &proto,
        h2seen: h2run
            .as_ref()
            .map(|r| r.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()),
        quic,
        gaps_kept,
        t0,
        per,
    };
    Ok(ended.record(results, listener))
}

/// The sockets the plan opens at its last step (a user's each, or with HTTP/2 or HTTP/3
/// the plan's connections) and the loop threads they are spread on. Errors: more than the
/// file descriptors allow, or (TCP) than the local ports (one line each).
fn sockets_and_loops(plan: &RampPlan, proto: &Protocol) -> Result<(usize, usize), EngineError> {
    let max_users = *plan.steps.last().unwrap_or(&1);
    let shared = plan.connections.shared();
    let sockets = shared.unwrap_or(max_users);
    // One socket per user (or connection), plus room for the process's own files.
    let limit = tpslab_net::raise_nofile();
    if (sockets as u64) + 64 > limit {
        let what = if shared.is_some() {
            "connections"
        } else {
            "users"
        };
        return Err(EngineError::Other(format!(
            "{sockets} {what} need {} file descriptors; the limit (RLIMIT_NOFILE, ulimit -n) is {limit}: raise it or ramp to fewer {what}",
            sockets + 64
        )));
    }
    // HTTP/3's QUIC connections are UDP sockets: no TCP local port each.
    if proto.transport() == Transport::Stream && !plan.connections.version().is_http3() {
        crate::host::env::check_ports(sockets)?;
    }
    let loops = match plan.load_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, sockets.max(1));
    Ok((sockets, loops))
}

/// The users' shared tally of a plan starting at `t0` (ns), each step `per` ns long
/// (warm-up included): its measured windows, and empty counts.
fn new_tally<'a>(plan: &'a RampPlan, stop: &'a AtomicBool, t0: u64, per: u64) -> Tally<'a> {
    let windows: Vec<(u64, u64)> = (0..plan.steps.len() as u64)
        .map(|k| (t0 + k * per + nanos(&plan.warmup), t0 + (k + 1) * per))
        .collect();
    Tally {
        plan,
        done: AtomicBool::new(false),
        stop,
        sent: crate::client::tally::no_sends(plan.steps.len()),
        windows,
        acc: plan
            .steps
            .iter()
            .map(|_| {
                Mutex::new(StepAcc {
                    hist: new_ns_histogram(),
                    errors: BTreeMap::new(),
                    gaps: Default::default(),
                    backoffs: 0,
                })
            })
            .collect(),
    }
}

/// What the ramp watches of the server and the host step by step.
struct ServerWatch {
    /// The server's namespace's /proc root (its TCP counters), on a stream protocol.
    tcp_root: Option<std::path::PathBuf>,
    /// A sock_diag socket opened once in the server's namespace: each sample asks it for
    /// the listening sockets only (the kernel filters by state), where reading
    /// /proc/PID/net/tcp would list every one of thousands of connections.
    diag: Option<tpslab_net::diag::SockDiag>,
    /// Whether replies' gaps (and the client's delayed ACKs) are kept.
    gaps_kept: bool,
}

/// What a step's measure opened at its window's start.
struct StepOpen {
    /// When the server's CPU time was first read, ns, and what it was.
    t_cpu0: u64,
    cpu0: Option<crate::observe::server_tree::ServerTree>,
    sampler: Option<crate::observe::step_sampler::StepSampler>,
    tcp0: Option<tpslab_proc::netstat::TcpCounters>,
    drops: Result<crate::observe::dropwatch::DropSampler, String>,
    delack0: Option<u64>,
    /// The target's listen socket(s): the first read is the drops' baseline.
    listen: Option<crate::observe::listen::Listen>,
}

impl ServerWatch {
    fn new(plan: &RampPlan, tcp_root: Option<std::path::PathBuf>, gaps_kept: bool) -> Self {
        let diag = tcp_root.as_ref().and_then(|_| {
            crate::host::env::in_netns_of(plan.server_pid, || {
                tpslab_net::diag::SockDiag::open().ok()
            })
            .flatten()
        });
        ServerWatch {
            tcp_root,
            diag,
            gaps_kept,
        }
    }

    /// Step `k` of `users` users: waits for its window, samples the server through it,
    /// and gives its result (its HTTP/2 counts and final send span filled in later).
    /// None when the run was stopped, or ended by a failure no request gets past.
    fn step(&mut self, sh: &Tally<'_>, k: usize, users: usize, t0: u64) -> Option<StepResult> {
        let (plan, stop) = (sh.plan, sh.stop);
        let (w0, w1) = sh.windows[k];
        // Also ended by a failure no request gets past (the loops set `done`), at once.
        let halt = &sh.done;
        sleep_until(w0 - nanos(&plan.warmup), stop, halt);
        sleep_until(w0, stop, halt);
        // Stopped, or ended by a failure no request gets past (HTTP/2 refused).
        if stop.load(Relaxed) || sh.done.load(Relaxed) {
            return None;
        }
        let mut open = self.open_step(plan);
        let mut next = w0;
        // One sample at least, even when the first reads took the whole window (a
        // loaded host: a step with no thread sample could not be judged).
        loop {
            if let Some(sm) = open.sampler.as_mut() {
                sm.sample();
            }
            if let (Some(d), Some(l)) = (self.diag.as_mut(), open.listen.as_mut()) {
                l.read(d, false);
            }
            next = next_tick(next, nanos(&plan.sample_interval), mono_ns());
            sleep_until(next.min(w1), stop, &sh.done);
            // Ended by a failure no request gets past: `sleep_until` returns at once then.
            if next >= w1 || mono_ns() >= w1 || stop.load(Relaxed) || sh.done.load(Relaxed) {
                break;
            }
        }
        if stop.load(Relaxed) {
            return None;
        }
        Some(self.close_step(open, sh, k, users, t0))
    }

    /// The first reads of a step, at its window's start.
    fn open_step(&mut self, plan: &RampPlan) -> StepOpen {
        // The server's CPU time (its PID's and its descendants') and thread states
        // are read first and last, right at the window's edges (the drop sampler
        // takes a while to start and finish); its CPU share is over the time
        // between the two reads.
        let (t_cpu0, cpu0) = (mono_ns(), server_tree(plan.server_pid));
        let port = plan.target.port();
        let sampler = plan
            .server_pid
            .map(|pid| crate::observe::step_sampler::StepSampler::start(pid, Some(port)));
        let tcp0 = self
            .tcp_root
            .as_deref()
            .and_then(|r| tpslab_proc::live::tcp_counters(r).ok());
        let drops = crate::observe::dropwatch::DropSampler::start();
        // The client's own namespace's delayed ACKs (the stalls of replies held by
        // the server's Nagle end when one fires): streams over HTTP/1.1 or TCP.
        let delack0 = self
            .gaps_kept
            .then(crate::client::openloop::delayed_acks)
            .flatten();
        let listen = self.diag.as_mut().map(|d| {
            let mut l = crate::observe::listen::Listen::new(plan.target);
            l.read(d, true);
            l
        });
        StepOpen {
            t_cpu0,
            cpu0,
            sampler,
            tcp0,
            drops,
            delack0,
            listen,
        }
    }

    /// The last reads of step `k`, at its window's end, and its result.
    fn close_step(
        &mut self,
        mut open: StepOpen,
        sh: &Tally<'_>,
        k: usize,
        users: usize,
        t0: u64,
    ) -> StepResult {
        let (w0, w1) = sh.windows[k];
        let (t_cpu1, cpu1) = (mono_ns(), server_tree(sh.plan.server_pid));
        if let (Some(d), Some(l)) = (self.diag.as_mut(), open.listen.as_mut()) {
            l.read(d, false);
        }
        let tree_sampling = open.sampler.as_ref().map(|sm| sm.coverage());
        let (states, per_thread) = match open.sampler.take().map(|sm| sm.finish()) {
            Some((st, per)) => (Some(st), per),
            None => (None, vec![]),
        };
        let tcp1 = self
            .tcp_root
            .as_deref()
            .and_then(|r| tpslab_proc::live::tcp_counters(r).ok());
        let delack1 = self
            .gaps_kept
            .then(crate::client::openloop::delayed_acks)
            .flatten();
        let drop_reasons = Some(crate::observe::dropwatch::finish(open.drops));
        let measured_s = (w1 - w0) as f64 / 1e9;
        // As the loops have published it so far (final values after they end).
        let (load_sent_s, load_end_s) = load_span(sh.sent_span(k), t0);
        // Replies still in flight at w1 land in no window; wait a moment for the
        // accumulator to be complete for replies that arrived before w1.
        let a = sh.acc[k].lock().unwrap_or_else(|e| e.into_inner());
        let response = tpslab_analysis::stats::latency_summary(&a.hist);
        let (t_cpu0, listen, tcp0, delack0) = (open.t_cpu0, open.listen, open.tcp0, open.delack0);
        StepResult {
            users,
            measured_s,
            completed: a.hist.len(),
            tps: a.hist.len() as f64 / measured_s,
            response,
            errors: a.errors.clone(),
            // Not measured when the reads were less than half the window apart (this
            // thread late past the window on a busy host): 10 ms ticks over a few ms
            // would say 0.
            server_cpu_cores: open.cpu0.zip(cpu1).and_then(|(c0, c1)| {
                let span_s = t_cpu1.saturating_sub(t_cpu0) as f64 / 1e9;
                (span_s >= 0.5 * measured_s)
                    .then(|| c1.cpu_s_since(&c0))
                    .flatten()
                    .map(|cpu_s| cpu_s / span_s)
            }),
            threads: states,
            tcp: tcp0.zip(tcp1).map(|(a, b)| b.since(&a)),
            // As before sock_diag's listener reads: 0 when the namespace's counters
            // were read but no listener served the target.
            accept_queue_max: tcp0.map(|_| listen.as_ref().map_or(0, |l| l.queue_max)),
            listener_drops: listen
                .as_ref()
                .and_then(crate::observe::listen::Listen::dropped),
            accept_queue_mean: listen
                .as_ref()
                .and_then(crate::observe::listen::Listen::queue_mean),
            drop_reasons,
            load_sent_s,
            load_end_s,
            per_thread,
            tree_sampling,
            // Filled in once the loops have ended and merged their counts.
            http2: None,
            reply_gaps: self.gaps_kept.then(|| tpslab_record::gaps::ReplyGaps {
                delayed_acks: delack0.zip(delack1).map(|(a, b)| b.saturating_sub(a)),
                ..a.gaps
            }),
            reconnect_backoffs: a.backoffs,
        }
    }
}

/// The server's processes (`pid`'s tree) as read now, when the plan has its PID.
fn server_tree(pid: Option<u32>) -> Option<crate::observe::server_tree::ServerTree> {
    pid.map(crate::observe::server_tree::ServerTree::processes)
}

/// What the ramp knows once its loops have ended, to finish its record.
struct Ended<'a> {
    shared: &'a Tally<'a>,
    proto: &'a Protocol,
    /// The HTTP/2 loops' counts per step (with HTTP/2).
    h2seen: Option<Vec<tpslab_record::load_http::Http2Streams>>,
    /// The QUIC connections' figures over the run (with HTTP/3).
    quic: Option<tpslab_record::quic::QuicPaths>,
    gaps_kept: bool,
    /// The plan's start and each step's length (warm-up included), ns.
    t0: u64,
    per: u64,
}

impl Ended<'_> {
    /// The ramp's record of the steps measured (`results`): each step's final send span
    /// and HTTP/2 counts, the quick-ACK re-timing where replies looked held by Nagle, and
    /// the ramp's own span and overrun.
    fn record(
        &self,
        mut results: Vec<StepResult>,
        listener: Option<tpslab_record::ramp::Listener>,
    ) -> RampRecord {
        let (plan, stop, shared) = (self.shared.plan, self.shared.stop, self.shared);
        // The loops have ended and published every send and their HTTP/2 counts per step:
        // each step's span and counts, and the ramp's.
        for (k, r) in results.iter_mut().enumerate() {
            (r.load_sent_s, r.load_end_s) = load_span(shared.sent_span(k), self.t0);
            r.http2 = self
                .h2seen
                .as_ref()
                .map(|s| s.get(k).copied().unwrap_or_default());
        }
        // Replies that look held by Nagle until a delayed ACK: re-timed once with the client
        // acknowledging at once (crate::client::quickack), the figures kept in each step that looked
        // so. Not once stopped.
        if self.gaps_kept
            && !stop.load(Relaxed)
            && crate::client::quickack::wanted(results.iter().filter_map(|r| r.reply_gaps.as_ref()))
        {
            let q = self.proto.with(crate::client::quickack::Run {
                timeout_ns: nanos(&plan.timeout).max(1_000_000),
                stop,
            });
            crate::client::quickack::attach(
                results.iter_mut().filter_map(|r| r.reply_gaps.as_mut()),
                q,
            );
        }
        let spans: Vec<(u64, u64)> = (0..plan.steps.len())
            .filter_map(|k| shared.sent_span(k))
            .collect();
        let whole = spans
            .iter()
            .map(|s| s.0)
            .min()
            .zip(spans.iter().map(|s| s.1).max());
        let (load_sent_s, load_end_s) = load_span(whole, self.t0);
        let planned_s = plan.steps.len() as f64 * self.per as f64 / 1e9;
        let overrun = tpslab_record::ramp::Overrun::judge(
            planned_s,
            load_end_s,
            load_average(),
            Some(tpslab_net::online_cpus()),
        );
        // The CPUs the server may run on: its processes' affinity (all of them together)
        // when it is on this host, else ours (a server tpslab started inherits it).
        let server_cpus = match plan.server_pid {
            Some(pid) => crate::observe::server_tree::ServerTree::processes(pid).cpus(),
            None => std::thread::available_parallelism().ok().map(|n| n.get()),
        };
        RampRecord {
            plan: plan.clone(),
            interrupted: stop.load(Relaxed) && results.len() < plan.steps.len(),
            steps: results,
            server_cpus,
            listener,
            generator_peak_rss_kib: crate::host::env::peak_rss_kib(),
            load_sent_s,
            overrun,
            http2: self
                .h2seen
                .as_ref()
                .map(tpslab_record::load_http::Http2Streams::sum),
            http3: self.quic,
        }
    }
}

/// `ramp http --http2`'s users ([`crate::client::openloop::h2loop`] as a closed loop): the
/// plan's connections, as many users on each as the last step has (user `i` on
/// connection `i % connections`, joining at its step). Errors: a request HTTP/2 cannot
/// carry, a `--cacert` without a usable certificate (one line each).
fn h2_users<'a>(
    plan: &RampPlan,
    req: &tpslab_plan::http::HttpRequest,
    tally: &'a Tally<'a>,
) -> Result<crate::client::openloop::h2loop::H2Run<'a, Tally<'a>>, EngineError> {
    let c = plan.connections.shared().unwrap_or(1);
    let max_users = *plan.steps.last().unwrap_or(&1);
    Ok(crate::client::openloop::h2loop::H2Run {
        sched: tally,
        target: plan.target,
        url: req.url.clone(),
        tls: crate::client::proto::tls::client_for(req, crate::client::proto::h2::ALPN)
            .map_err(EngineError::Other)?,
        headers: crate::client::proto::h2::request_headers(req, plan.request.len())
            .map_err(EngineError::Other)?,
        body: plan.request.clone(),
        connections: c,
        streams: max_users.div_ceil(c),
        fatal: Mutex::new(None),
        closed: true,
        seen: Mutex::new(vec![]),
    })
}

/// A span of requests written (first, last, ns) as (seconds from first to last, seconds
/// from the plan's start `t0` to the last).
fn load_span(span: Option<(u64, u64)>, t0: u64) -> (Option<f64>, Option<f64>) {
    match span {
        Some((first, last)) => (
            Some(last.saturating_sub(first) as f64 / 1e9),
            Some(last.saturating_sub(t0) as f64 / 1e9),
        ),
        None => (None, None),
    }
}

/// The host's 1-minute load average (/proc/loadavg), when readable.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The listen socket(s) serving `target` in the server's namespace (`pid`'s, else this
/// one), by one sock_diag dump: their backlog limit, and net.core.somaxconn there. None
/// when no listener serves it (see [`crate::observe::listen::serves`]).
fn listener(
    pid: Option<u32>,
    target: std::net::SocketAddr,
) -> Option<tpslab_record::ramp::Listener> {
    let backlog = crate::host::env::in_netns_of(pid, move || -> Option<u64> {
        let mut l = crate::observe::listen::Listen::new(target);
        l.read(&mut tpslab_net::diag::SockDiag::open().ok()?, true);
        l.seen.then_some(l.backlog)
    })
    .flatten()?;
    Some(tpslab_record::ramp::Listener {
        backlog: u32::try_from(backlog).unwrap_or(u32::MAX),
        somaxconn: crate::host::env::somaxconn(pid),
    })
}

/// The sampling tick after `last` (ns, CLOCK_MONOTONIC) every `interval` ns, as seen at
/// `now`: the next one still ahead, so a thread woken late (its CPU taken by the load on
/// a busy host) skips the ticks it missed instead of taking them back to back, which
/// would crowd a step's samples into a few ms of it.
fn next_tick(last: u64, interval: u64, now: u64) -> u64 {
    let next = last + interval.max(1);
    if next > now {
        return next;
    }
    next + ((now - next) / interval.max(1) + 1) * interval.max(1)
}

fn sleep_until(t: u64, stop: &AtomicBool, done: &AtomicBool) {
    loop {
        let now = mono_ns();
        if now >= t || stop.load(Relaxed) || done.load(Relaxed) {
            return;
        }
        std::thread::sleep(Duration::from_nanos((t - now).min(50_000_000)));
    }
}

#[cfg(test)]
#[path = "ramp_tests.rs"]
mod tests;
