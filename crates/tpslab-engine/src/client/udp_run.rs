//! One UDP run: optional in-process reference server, observer and generator, composed
//! into a run record with a ledger.

use crate::client::load::UdpLoad;
use crate::observe::{socket_queue, Observer, ObserverConfig, SocketMatch};
use crate::serve::server::UdpServer;
use crate::EngineError;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;
use tpslab_net::mono_ns;
use tpslab_plan::udp::Mode;
use tpslab_record::ledger::{Ledger, LedgerInputs};
use tpslab_record::ReplyFrames;
use tpslab_record::{GeneratorReport, ObserverReport, RunRecord, ServerReport};

use tpslab_plan::udp::UdpRunPlan;

/// Whether `ip` is an address of this host (in this network namespace).
pub(crate) fn is_local_ip(ip: std::net::IpAddr) -> bool {
    tpslab_net::UdpSock::bind(std::net::SocketAddr::new(ip, 0), false).is_ok()
}

/// Whether process `pid` shares this process's network namespace. Its `ns/net` link
/// needs ptrace access (another user's process, without root, reads as nothing): then its
/// UDP table (`/proc/PID/net/udp{,6}`, readable by anyone) is compared with this one's:
/// socket inodes are unique on the host, so one inode in both means one namespace (this
/// process's generator sockets are open when it is called).
fn same_netns(pid: u32) -> bool {
    let theirs = crate::host::env::netns(Some(pid));
    if !theirs.is_empty() {
        return theirs == crate::host::env::netns(None);
    }
    let inodes = |root: &std::path::Path| -> std::collections::BTreeSet<u64> {
        let mut v = tpslab_proc::live::udp(root).unwrap_or_default();
        v.extend(tpslab_proc::live::udp6(root).unwrap_or_default());
        v.into_iter().map(|s| s.inode).filter(|&i| i != 0).collect()
    };
    let ours = inodes(std::path::Path::new("/proc/self"));
    let theirs = inodes(&PathBuf::from(format!("/proc/{pid}")));
    tpslab_proc::live::forget_under(&PathBuf::from(format!("/proc/{pid}")));
    !ours.is_disjoint(&theirs)
}

/// Polls `idle` every 10 ms until it holds twice in a row, at most `max`.
fn wait_idle(idle: &dyn Fn() -> bool, max: Duration) {
    let deadline = mono_ns() + max.as_nanos() as u64;
    let mut streak = 0;
    while mono_ns() < deadline {
        streak = if idle() { streak + 1 } else { 0 };
        if streak >= 2 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What the observer watches during a UDP run: the target's sockets (by inode when the
/// server is ours, else by port and address) in its network namespace, the generator's,
/// the target's threads (and their exact reads and sends for a foreign server).
fn observer_config(
    plan: &UdpRunPlan,
    server: Option<&UdpServer>,
    load: &UdpLoad,
    net_root: &std::path::Path,
    target: &SocketMatch,
) -> ObserverConfig {
    ObserverConfig {
        interval: plan.interval,
        net_root: net_root.to_path_buf(),
        target_inodes: target.inodes.clone(),
        target_port: target.port,
        target_addr: target.addr,
        gen_sockets: Some(load.own_sockets()),
        target_pid: if server.is_some() {
            Some(std::process::id())
        } else {
            plan.target_pid
        },
        target_tids: server
            .as_ref()
            .map(|s| s.tids().to_vec())
            .unwrap_or_default(),
        // Exact reads and sends per thread (root: perf tracepoints): a foreign server's
        // are the only exact source of what it read.
        count_io: match (server, plan.target_pid) {
            (None, Some(pid)) => Some((tpslab_proc::live::task_ids(pid), true)),
            _ => None,
        },
        // Ours counts its reads itself: sampled at no cost to its hot path.
        read_probe: server.as_ref().map(|s| s.read_probe()),
        send_probe: Some(load.send_probe()),
        live: None,
        live_latency: None,
        tcp_inodes: vec![],
    }
}

/// Runs the plan. `stop` (set by SIGINT/SIGTERM) ends the load early; the record is still
/// complete and marked interrupted.
pub fn run_udp(plan: UdpRunPlan, stop: &AtomicBool) -> Result<RunRecord, EngineError> {
    run_udp_streamed(plan, stop, None)
}

/// [`run_udp`], with every observer sample also given to `live` as it is taken.
pub fn run_udp_streamed(
    mut plan: UdpRunPlan,
    stop: &AtomicBool,
    live: Option<crate::observe::LiveSink>,
) -> Result<RunRecord, EngineError> {
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let t0 = mono_ns();
    let asked_pid = plan.target_pid;
    let resolved = find_owner(&plan)?;
    let others: Vec<u32> = resolved
        .as_ref()
        .map(|r| r.pids.iter().skip(1).copied().collect())
        .unwrap_or_default();
    if let Some(r) = &resolved {
        plan.target_pid = r.pid;
    }
    let server = match &plan.server {
        Some(cfg) => {
            let s = UdpServer::start(cfg.clone())?;
            plan.load.target = s.local_addr();
            Some(s)
        }
        None => None,
    };
    let load = UdpLoad::prepare(plan.load.clone())?;
    let target_proc = plan.target_pid.and_then(crate::host::env::target_process);
    let same_ns = plan.target_pid.is_none_or(same_netns);
    let (net_root, observable, target) = target_of(&plan, server.as_ref());
    let mut obs_cfg = observer_config(&plan, server.as_ref(), &load, &net_root, &target);
    if let (Some(pid), false) = (plan.target_pid, others.is_empty()) {
        follow_all(&mut obs_cfg, pid, &others);
    }
    // The interval's latency only when streamed (its lock costs the receivers a little).
    if live.is_some() && plan.load.expect_replies {
        obs_cfg.live_latency = Some(load.live_latency());
    }
    obs_cfg.live = live;
    let observer = Observer::start(obs_cfg);
    // Kernel drop reasons over the same window (host-wide), or why not.
    let drops = crate::observe::dropwatch::DropSampler::start_unless(plan.no_drop_reasons);
    // The live samples (--metrics-listen) carry them too.
    if let Ok(d) = &drops {
        observer.live_drops(d);
    }
    // The target holds nothing more: its sockets are empty and (ours) no datagram is
    // being handled.
    let target_idle = || {
        server.as_ref().is_none_or(|s| s.idle())
            && (!observable || socket_queue(&net_root, &target).1 == 0)
    };
    let gen = load.run(stop, &target_idle).report;
    // Without replies nothing waited for the target: let it drain before the last sample.
    wait_idle(&target_idle, Duration::from_secs(10));
    let obs = observer.stop();
    let drop_reasons = Some(crate::observe::dropwatch::finish(drops));
    // The generator's sockets close only after the final sample has seen them.
    drop(load);
    let srv = server.map(|s| s.stop());
    // This thread read the target's /proc files while waiting for it to drain.
    if let Some(pid) = plan.target_pid {
        tpslab_proc::live::forget_under(&PathBuf::from(format!("/proc/{pid}")));
    }
    let mut notes = vec![];
    if let Some(m) = resolved.as_ref().and_then(|r| r.missing.clone()) {
        notes.push(m);
    }
    // A server of ours is in the record's `server`, not its `target`.
    let target_proc = target_proc.filter(|_| srv.is_none()).map(|mut t| {
        t.exact_counts = obs.deltas.contains_key("server_io_read");
        t.found_by = resolved.as_ref().and_then(|r| r.found_by.clone());
        t.others = others.clone();
        t
    });
    let kernel_drops = drop_reasons
        .as_ref()
        .map(|d| tpslab_analysis::drop_reason::uncovered(&d.by_reason))
        .unwrap_or_default();
    let (ledger, gen, inputs) = build_ledger(
        &plan,
        gen,
        srv.as_ref(),
        &obs,
        (same_ns, observable),
        kernel_drops,
        &mut notes,
    );
    Ok(RunRecord {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        argv: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        started_unix_ms,
        elapsed_s: (mono_ns() - t0) as f64 / 1e9,
        interrupted: stop.load(Relaxed),
        // The plan as asked: a PID found by the target's socket is in `target`.
        plan: Some(tpslab_plan::udp::RunPlan::Udp(Box::new(UdpRunPlan {
            target_pid: asked_pid,
            ..plan.clone()
        }))),
        environment: crate::host::env::environment(),
        server: srv,
        generator: Some(gen),
        observer: Some(obs),
        ledger: Some(ledger),
        notes,
        peak_rss_kib: crate::host::env::peak_rss_kib(),
        target: target_proc,
        drop_reasons,
        agent: None,
        // What merge needs, kept with the histograms (an agent's run).
        ledger_inputs: plan.load.keep_histograms.then_some(inputs),
        merged: None,
    })
}

/// A foreign server on this host, found by its socket (or the given --pid checked
/// against it) before anything is sent: its threads' reads are the verdict's evidence.
/// None for a server of ours or a remote target without --pid. Errors: the given PID
/// holds no socket on the target (one line).
fn find_owner(plan: &UdpRunPlan) -> Result<Option<crate::observe::owner::Resolved>, EngineError> {
    let resolve = |pid| {
        crate::observe::owner::resolve(plan.load.target, pid, plan.watch_port)
            .map_err(EngineError::Other)
    };
    Ok(match (&plan.server, plan.target_pid) {
        (None, Some(_)) => Some(resolve(plan.target_pid)?),
        (None, None) if is_local_ip(plan.load.target.ip()) => Some(resolve(None)?),
        _ => None,
    })
}

/// The target as the observer sees it: the /proc root of its network namespace, whether
/// its sockets can be seen (they are ours, its process is given, or its address is
/// local; a remote server's side is not observable from here), and how they are matched.
fn target_of(plan: &UdpRunPlan, server: Option<&UdpServer>) -> (PathBuf, bool, SocketMatch) {
    let net_root = match (server.is_some(), plan.target_pid) {
        (false, Some(pid)) => PathBuf::from(format!("/proc/{pid}")),
        _ => PathBuf::from("/proc/self"),
    };
    let target_ip = plan.load.target.ip();
    let observable = server.is_some() || plan.target_pid.is_some() || is_local_ip(target_ip);
    let target = SocketMatch {
        inodes: server
            .map(|s| s.socket_inodes().to_vec())
            .unwrap_or_default(),
        port: observable.then(|| plan.watch_port.unwrap_or(plan.load.target.port())),
        addr: Some(target_ip),
    };
    (net_root, observable, target)
}

/// Several processes hold the socket (`pid` and `others`): every one's threads are
/// followed (a fixed list, where one process's threads are listed afresh at every sample).
fn follow_all(obs_cfg: &mut ObserverConfig, pid: u32, others: &[u32]) {
    let mut tids = tpslab_proc::live::task_ids(pid);
    for p in others {
        tids.extend(tpslab_proc::live::task_ids(*p));
    }
    obs_cfg.target_tids = tids.clone();
    obs_cfg.count_io = Some((tids, true));
}

/// Checks the exact per-thread read count against the namespace-wide `Udp: InDatagrams`
/// (which also counts every other reader there): the namespace cannot have read fewer.
/// True when it did (one of the two counts is wrong).
fn cross_check(
    gen: &GeneratorReport,
    obs: &ObserverReport,
    same_ns: bool,
    server_read: u64,
    notes: &mut Vec<String>,
) -> bool {
    let ns_in = obs.deltas.get("udp_in_datagrams").copied().unwrap_or(0);
    let own_in = if same_ns { gen.replies_read } else { 0 };
    let others = ns_in as i64 - own_in as i64 - server_read as i64;
    if others < 0 {
        notes.push(format!(
            "cross-check failed: the server's threads read {server_read} UDP datagrams but its namespace's Udp: InDatagrams rose by only {ns_in} (the generator read {own_in} of them): one count is wrong"
        ));
        return true;
    } else if others > 0 {
        notes.push(format!(
            "cross-check: its namespace's Udp: InDatagrams rose by {ns_in}: {others} datagrams were read by other sockets there (not the server's, not the generator's); the ledger counts only the server's threads"
        ));
    }
    false
}

/// (read, replies attempted, replies failed, the source of these counts).
type ServerCounts = (Option<u64>, Option<u64>, Option<u64>, String);

/// What the server read, replied and failed to reply (and the source of those counts),
/// by the best source there is: our own server's counts; its threads' reads and sends
/// counted exactly (tracepoints; cross-checked against its namespace's counters, the
/// second value true when that check failed); its namespace's counters minus the
/// generator's own (not exact, noted); nothing on the port; or unknown.
fn server_counts(
    gen: &GeneratorReport,
    srv: Option<&ServerReport>,
    obs: &ObserverReport,
    same_ns: bool,
    found: bool,
    absent: bool,
    notes: &mut Vec<String>,
) -> (ServerCounts, bool) {
    let d = |k: &str| obs.deltas.get(k).copied().unwrap_or(0);
    let mut cross_failed = false;
    let counts = match srv {
        Some(s) => (
            Some(s.received),
            Some(s.answered + s.reply_failed),
            Some(s.reply_failed),
            "tpslab server's own counts".to_string(),
        ),
        None if obs.deltas.contains_key("server_io_read") => {
            // Exact: what the server's own threads read and sent (tracepoints), whatever
            // else uses UDP on the host.
            let sent = d("server_io_sent");
            let failed = d("server_io_send_failed");
            let source = obs
                .sources
                .get("server_io_read")
                .cloned()
                .unwrap_or_default();
            cross_failed = cross_check(gen, obs, same_ns, d("server_io_read"), notes);
            (
                Some(d("server_io_read")),
                Some(sent + failed),
                Some(failed),
                source,
            )
        }
        None if found => {
            // Namespace-wide counters, minus the generator's own traffic when it shares the
            // namespace: exact only when nothing else uses UDP there.
            let (own_in, own_out, own_sndbuf) = if same_ns {
                let e = |k: &str| gen.send_errors.get(k).copied().unwrap_or(0);
                (gen.replies_read, gen.sent, e("ENOBUFS") + e("EAGAIN"))
            } else {
                (0, 0, 0)
            };
            notes.push(
                "NOT EXACT: the server's reads and replies are derived from Udp: InDatagrams/OutDatagrams of its network \
                 namespace minus the generator's own (its threads could not be counted: run as root on kernel 6.4+); \
                 any other UDP traffic in that namespace is counted as the server's"
                    .into(),
            );
            let read = d("udp_in_datagrams").saturating_sub(own_in);
            let out = d("udp_out_datagrams").saturating_sub(own_out);
            let sndbuf = d("udp_sndbuf_errors").saturating_sub(own_sndbuf);
            (
                Some(read),
                Some(out + sndbuf),
                Some(sndbuf),
                "derived: Udp InDatagrams / OutDatagrams / SndbufErrors deltas minus the generator's".to_string(),
            )
        }
        // No socket on the port: nothing can have been read or answered there.
        None if absent => (
            Some(0),
            Some(0),
            Some(0),
            "no socket on the target port".to_string(),
        ),
        None => (None, None, None, "not observable from here".to_string()),
    };
    (counts, cross_failed)
}

/// Replies counted by their frame header: complete and incomplete replies, frames read
/// of those announced, and what the server sent per request read beside them.
fn frames_note(f: &ReplyFrames, twice: u64, inputs: &LedgerInputs) -> String {
    let replies = f.replies_complete + f.replies_incomplete;
    let sent = match (inputs.server_read, inputs.server_reply_attempted) {
        (Some(r), Some(a)) if r > 0 => format!(
            "; the server sent {:.2} datagrams per request read, its failed sends and their resends included",
            a as f64 / r as f64
        ),
        _ => String::new(),
    };
    format!(
        "replies of several datagrams ({} frame header, {:.2} frames per reply): {} replies complete, {} incomplete (some frames never arrived: not answered); {} frames read of {} announced{}{sent}",
        f.header,
        f.frames_expected as f64 / replies.max(1) as f64,
        f.replies_complete,
        f.replies_incomplete,
        f.frames_received,
        f.frames_expected,
        match twice {
            0 => String::new(),
            n => format!(", {n} read twice"),
        },
    ) + &match f.frames_misnumbered {
        0 => String::new(),
        n => format!("; {n} datagrams answered a request with a frame number at or past its reply's total (a frame sent again after a failed send and numbered anew: its reply cannot be put together)"),
    }
}

/// What reply datagrams beyond the first per request were: frames of multi-datagram
/// replies (what the generator got per answered request is what the server sent per
/// request read, and the reply path balances), something else the server sent, or
/// unknown.
fn duplicates_note(gen: &GeneratorReport, inputs: &LedgerInputs, ledger: &Ledger) -> String {
    let balanced = ledger
        .reply
        .as_ref()
        .is_some_and(|r| r.unattributed == Some(0));
    // Frames when what the generator got per answered request is what the server sent
    // per request read.
    let per_read = match (inputs.server_read, inputs.server_reply_attempted) {
        (Some(r), Some(a)) if r > 0 => Some(a as f64 / r as f64),
        _ => None,
    };
    let per_answer = gen.replies_per_request.unwrap_or(0.0);
    let frames = per_read.is_some_and(|k| (k - per_answer).abs() <= 0.05 * k);
    if balanced && frames {
        format!(
            "{} reply datagrams beyond the first per request ({per_answer:.2} per answered request): sent by the server (the reply path balances against what it sent, {:.2} per request read), so replies of several datagrams (frames), not duplicated in the network",
            gen.duplicates,
            per_read.unwrap_or(0.0)
        )
    } else if balanced {
        format!(
            "{} reply datagrams beyond the first per request ({per_answer:.2} per answered request) while the server sent {:.2} per request read: some of what it sent is not a reply to these requests (another socket or client of the process)",
            gen.duplicates,
            per_read.unwrap_or(0.0)
        )
    } else {
        format!(
            "{} reply datagrams beyond the first per request ({:.2} per answered request): the server's sends are not known exactly, so frames of multi-datagram replies and duplicates cannot be told apart",
            gen.duplicates,
            gen.replies_per_request.unwrap_or(0.0)
        )
    }
}

fn build_ledger(
    plan: &UdpRunPlan,
    mut gen: GeneratorReport,
    srv: Option<&ServerReport>,
    obs: &ObserverReport,
    (same_ns, observable): (bool, bool),
    kernel_drops: Vec<(String, u64)>,
    notes: &mut Vec<String>,
) -> (Ledger, GeneratorReport, LedgerInputs) {
    let d = |k: &str| obs.deltas.get(k).copied().unwrap_or(0);
    let found = d("server_sockets_found") > 0;
    let replies_expected =
        plan.load.expect_replies && srv.is_none_or(|s| s.mode != Mode::Sink.to_string());
    // Replies prove a server exists even when its socket was not seen (another namespace
    // without --pid): then its side is unknown, not absent.
    let absent = observable && !found && gen.replies_read == 0;
    let ((server_read, reply_attempted, reply_failed, source), cross_failed) =
        server_counts(&gen, srv, obs, same_ns, found, absent, notes);
    if absent {
        notes.push(format!(
            "no socket of the target found on port {} in {}: counted as no listener (pass --pid if the server runs in another network namespace)",
            plan.load.target.port(),
            if plan.target_pid.is_some() {
                "the target's namespace"
            } else {
                "this namespace"
            }
        ));
    } else if !found && srv.is_none() {
        notes.push(format!(
            "the target's socket was not seen ({}): its drops and reads are unknown; pass --pid PID of the server",
            if observable { "replies came back, so it lives in another network namespace" } else { "not an address of this host" }
        ));
    }
    let inputs = LedgerInputs {
        gen_attempted: gen.attempted,
        gen_send_failed: gen.send_failed,
        server_socket_drops: (found || absent).then(|| d("server_drops")),
        gen_socket_drops: d("gen_drops"),
        softnet_drops: d("softnet_dropped"),
        // The kernel also counts softnet backlog drops in the device's rx_dropped
        // (enqueue_to_backlog): only the rest are the NIC's own.
        nic_rx_drops: d("dev_rx_drop").saturating_sub(d("softnet_dropped")),
        no_ports: d("udp_no_ports"),
        server_read,
        server_reply_attempted: reply_attempted,
        server_reply_failed: reply_failed,
        server_counts_source: source,
        gen_read: gen.replies_read,
        replies_expected,
        server_socket_seen: found || srv.is_some(),
        kernel_drops,
        max_segments_per_send: gen.max_segments_per_send,
    };
    if inputs.gen_socket_drops > 0 {
        gen.invalid_reasons.push(format!(
            "the generator's own sockets dropped {} replies (getsockopt SO_MEMINFO drops): reply loss is the tool's",
            inputs.gen_socket_drops
        ));
        gen.valid = false;
    }
    let mut ledger = tpslab_analysis::ledger::build(&inputs);
    if cross_failed && ledger.request.inconsistent.is_none() {
        ledger.request.inconsistent = Some(
            "the server's threads read more UDP datagrams than its network namespace counted (Udp: InDatagrams)".into(),
        );
    }
    if let Some(f) = &gen.frames {
        notes.push(frames_note(f, gen.duplicates, &inputs));
    } else if gen.duplicates > 0 {
        notes.push(duplicates_note(&gen, &inputs, &ledger));
    }
    (ledger, gen, inputs)
}
