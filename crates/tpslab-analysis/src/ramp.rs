//! A closed-loop ramp's plan and record (`tpslab ramp`), and its judgement: a pure
//! function of the record ([`analyse`]): Little's law per step, the knee, the Universal
//! Scalability Law fit and the verdict, with the CPU count of the host that ran it.

use crate::usl::{self, StepPoint};
use std::collections::BTreeMap;
use std::time::Duration;
use tpslab_record::ramp::{RampAnalysis, RampRecord, StepResult};
use tpslab_record::usl::{LittleCheck, UslFit};

mod verdict;

/// Why the ramp measured nothing because the target could not be reached, as one line
/// for an environment error (like iperf3's "unable to connect"): Some when no request
/// was answered in any step and every failure was a connection that could not be
/// made (a TCP connect that failed: refused, timed out, unreachable; a UDP request
/// refused by an ICMP port unreachable). None when some request was answered, when
/// none failed, when some failed otherwise (a server that accepts and never answers
/// is measured: its timeouts are the result), or when the ramp was interrupted.
pub fn unreachable(rec: &RampRecord) -> Option<String> {
    if rec.interrupted {
        return None;
    }
    let completed: u64 = rec.steps.iter().map(|s| s.completed).sum();
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for (k, n) in rec.steps.iter().flat_map(|s| &s.errors) {
        *kinds.entry(k).or_default() += n;
    }
    let cannot_connect = |k: &str| k.starts_with("connect: ") || k == "connection refused";
    if completed > 0 || kinds.is_empty() || !kinds.keys().all(|k| cannot_connect(k)) {
        return None;
    }
    let by_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    Some(format!(
        "ramp {} {}: unable to reach the server: every request failed ({}), none was answered; nothing was measured",
        rec.plan.proto.command(),
        rec.plan.target,
        by_kind.join(", ")
    ))
}

/// The gates' view of the ramp: the share of requests that failed or timed out over
/// every measured window (loss), the failures by kind (errors), and no valid evidence
/// when no request was answered at all.
pub fn outcome(rec: &RampRecord) -> crate::gate::Outcome {
    use crate::gate::{Loss, Outcome};
    let completed: u64 = rec.steps.iter().map(|s| s.completed).sum();
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for (k, n) in rec.steps.iter().flat_map(|s| &s.errors) {
        *kinds.entry(k).or_default() += n;
    }
    let failed: u64 = kinds.values().sum();
    Outcome {
        interrupted: rec.interrupted,
        invalid: if completed == 0 {
            vec![format!(
                "no request was answered in {} step(s) ({failed} failed)",
                rec.steps.len()
            )]
        } else {
            vec![]
        },
        loss: match completed + failed {
            0 => Loss::NotMeasured("no request was measured".into()),
            n => Loss::Measured(
                100.0 * failed as f64 / n as f64,
                format!("of {n} requests failed or timed out"),
            ),
        },
        errors: (failed > 0).then(|| {
            let by_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} x{n}")).collect();
            format!("{failed} requests failed ({})", by_kind.join(", "))
        }),
        target: None,
        figures: Default::default(),
    }
}

/// Each step's point for the USL and Little's law (think time in seconds).
pub fn points(rec: &RampRecord) -> Vec<StepPoint> {
    let think_s = rec.plan.think.as_nanos() as f64 / 1e9;
    rec.steps
        .iter()
        .map(|s| StepPoint {
            users: s.users as f64,
            tps: s.tps,
            mean_response_s: s.response.mean_ns / 1e9,
            think_s,
        })
        .collect()
}

/// Top wait channel of a step and its share of the thread samples.
/// With per-thread samples, of the working threads only (idle helpers left out, see
/// [`crate::ramp_threads`]).
pub fn top_state(s: &StepResult) -> Option<(String, f64)> {
    let working = crate::ramp_threads::facts(s).map(|f| f.states);
    let t = working.as_ref().or(s.threads.as_ref())?;
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

/// What a wait channel means.
pub fn wchan_meaning(w: &str) -> &'static str {
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
    } else if w.starts_with("disk") {
        "waiting on disk I/O"
    } else if w == "running" {
        "busy on CPU (running or runnable)"
    } else {
        "waiting in the kernel"
    }
}

/// Share of a step's thread samples asleep in a futex.
fn futex_share(s: &StepResult) -> f64 {
    s.threads.as_ref().map_or(0.0, |t| {
        let f: u64 = t
            .sleeping
            .iter()
            .filter(|(w, _)| w.starts_with("futex"))
            .map(|(_, n)| n)
            .sum();
        f as f64 / t.samples.max(1) as f64
    })
}

/// How long each request waited on disk I/O in a step, ns, by Little's law: the server's
/// threads waiting on disk I/O (state D, or blocked in an fsync-family call) per sampling
/// tick, divided by the step's TPS; from state D alone in records made before wait
/// classes. None without thread samples or replies.
fn disk_ns_per_request(s: &StepResult, sample: Duration) -> Option<f64> {
    let t = s.threads.as_ref().filter(|t| t.samples > 0)?;
    if s.tps <= 0.0 {
        return None;
    }
    // Idle threads (parked in one wait all step) never weigh: the working threads'
    // samples when the step has them one by one.
    let working = crate::ramp_threads::facts(s).map(|f| f.states);
    let t = working.as_ref().unwrap_or(t);
    let disk = if t.by_class.is_empty() {
        t.disk
    } else {
        t.by_class
            .get(&tpslab_record::waits::WaitClass::Disk)
            .copied()
            .unwrap_or(0)
    };
    // A tree sampled in turns: each thread was read at its share of the ticks, so the
    // threads on disk per tick are the samples per thread's.
    let ticks = match s.tree_sampling.filter(|c| c.partial() && c.threads > 0) {
        Some(c) => c.samples as f64 / f64::from(c.threads),
        None => s.measured_s * 1e9 / sample.as_nanos().max(1) as f64,
    }
    .ceil()
    .max(1.0);
    Some(disk as f64 / ticks / s.tps * 1e9)
}

/// Waits on disk I/O that grew with users: (first step's disk wait per request, last
/// step's, its share of the last step's mean response time, the call most disk waits were
/// in) when the last step's is at least twice the first's and a quarter of its response
/// time (not more than all of it): requests queue at the disk.
fn disk_waits_grow(rec: &RampRecord) -> Option<(f64, f64, f64, String)> {
    let (f, l) = (rec.steps.first()?, rec.steps.last()?);
    let sn = rec.plan.sample_interval;
    let (a, b) = (disk_ns_per_request(f, sn)?, disk_ns_per_request(l, sn)?);
    let share = b / l.response.mean_ns.max(1.0);
    // Above the response time it is not a per-request wait: threads other than those
    // serving requests (a background writer) wait on disk too, and nothing is claimed.
    (rec.steps.len() >= 2 && b >= 2.0 * a && b > 0.0 && (0.25..=1.0).contains(&share)).then(|| {
        let call = l
            .threads
            .as_ref()
            .and_then(|t| crate::waits::top_syscall(t, tpslab_record::waits::WaitClass::Disk))
            .map_or(String::new(), |c| format!(", in {c}"));
        (a, b, share, call)
    })
}

/// The kernel's drop reasons per step that had any (host-wide), or why they were not
/// read; None for records without them.
fn drop_reasons_line(rec: &RampRecord) -> Option<String> {
    let read: Vec<(usize, &tpslab_record::DropReasons)> = rec
        .steps
        .iter()
        .filter_map(|s| Some((s.users, s.drop_reasons.as_ref()?)))
        .collect();
    if let Some((_, d)) = read
        .first()
        .filter(|_| read.iter().all(|(_, d)| d.unavailable.is_some()))
    {
        return Some(format!(
            "kernel drop reasons not read ({})",
            d.unavailable.as_deref().unwrap_or("?")
        ));
    }
    let per: Vec<String> = read
        .iter()
        .filter(|(_, d)| !d.by_reason.is_empty() || d.lost > 0)
        .map(|(users, d)| {
            let mut v: Vec<String> = d
                .by_reason
                .iter()
                .map(|(r, n)| {
                    let at = d
                        .by_site
                        .iter()
                        .filter(|(sr, _, _)| sr == r)
                        .max_by_key(|x| x.2)
                        .map_or(String::new(), |(_, f, _)| format!(" in {f}"));
                    format!("{r} {n}{at}")
                })
                .collect();
            if d.lost > 0 {
                v.push(format!("{} LOST (rings full)", d.lost));
            }
            format!("{users} users: {}", v.join(", "))
        })
        .collect();
    if read.is_empty() {
        return None;
    }
    Some(if per.is_empty() {
        "kernel drop reasons (skb:kfree_skb, host-wide): none in any step".to_string()
    } else {
        format!(
            "kernel drop reasons (skb:kfree_skb, host-wide) per step: {}",
            per.join("; ")
        )
    })
}

/// The verdict of a ramp without a single reply: the failures that took the requests,
/// most first (a server whose replies never end fails every request "frame too long":
/// that is what to fix, not the accept queue the reconnects fill).
fn no_replies(rec: &RampRecord) -> String {
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for (k, n) in rec.steps.iter().flat_map(|s| &s.errors) {
        *kinds.entry(k).or_default() += n;
    }
    let mut by: Vec<(&str, u64)> = kinds.into_iter().collect();
    by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if by.is_empty() {
        return "VERDICT: no replies at all: the server did not answer (see the errors per step); nothing to say about scaling".to_string();
    }
    let words: Vec<String> = by
        .iter()
        .take(3)
        .map(|(k, n)| format!("{k} x{n}"))
        .collect();
    format!(
        "VERDICT: no replies at all: every request failed ({}{}); fix what the failures name first, nothing to say about scaling",
        words.join(", "),
        if by.len() > 3 { ", ..." } else { "" }
    )
}

/// The steps whose users backed off before connecting again (after a failed connect or
/// a connection closed for a reply no request asked for), with how often: "users backed
/// off before connecting again (...): 12 at 4 users, 40 at 8 users". None when none did.
fn backoffs_line(rec: &RampRecord) -> Option<String> {
    let by: Vec<String> = rec
        .steps
        .iter()
        .filter(|s| s.reconnect_backoffs > 0)
        .map(|s| format!("{} at {} users", s.reconnect_backoffs, s.users))
        .collect();
    (!by.is_empty()).then(|| {
        format!(
            "users backed off before connecting again (1 ms after a connection that answered, else doubling up to 1 s; after a failed connect or a reply no request asked for), in the step's window: {}",
            by.join(", ")
        )
    })
}

/// Judges a ramp from its record: its server's CPU use is judged against the CPUs it may
/// run on (`server_cpus` in the record), else `host_cpus`, the CPU count of the host that
/// ran it (the record's metadata), never of the host reading it.
pub fn analyse(rec: &RampRecord, host_cpus: usize) -> RampAnalysis {
    let cpus = rec.server_cpus.unwrap_or(host_cpus);
    let pts = points(rec);
    let fit = usl::fit_usl(&pts.iter().map(|p| (p.users, p.tps)).collect::<Vec<_>>());
    let knee = usl::find_knee(&pts, rec.plan.knee_gain);
    let little: Vec<LittleCheck> = pts.iter().map(usl::littles_law).collect();
    let fit_ok = fit.as_ref().ok();
    let mut lines = vec![];
    let served: u64 = rec.steps.iter().map(|s| s.completed).sum();
    // Without a single reply there is no curve: no knee, no Little's law, no fit to show.
    if served > 0 {
        curve_lines(rec, pts.is_empty(), knee, &little, &fit, &mut lines);
    }
    // Thread states at the last step: what the server did when most loaded.
    if let Some(last) = rec.steps.last() {
        last_step_lines(rec, last, &mut lines);
    }
    lines.extend(crate::ramp_threads::sampling_line(rec));
    let accept = crate::ramp_listen::accept_queue_overflow(rec);
    if let Some(l) = crate::ramp_listen::accept_queue_line(rec) {
        lines.push(l);
    }
    lines.extend(drop_reasons_line(rec));
    lines.extend(backoffs_line(rec));
    let nagle = crate::nagle::ramp_line(rec);
    lines.extend(crate::nagle::ramp_pause_line(rec));
    let signals = verdict::Signals::of(rec, cpus, served, knee, fit_ok);
    lines.extend(disk_line(rec));
    let think_s = rec.plan.think.as_nanos() as f64 / 1e9;
    let ledger = crate::rt_ledger::ledgers(&rec.steps, think_s);
    lines.extend(ledger.last().map(crate::rt_ledger::line));
    let accept_verdict = accept
        .as_ref()
        .map(|(dropped, from_users, source)| accept_verdict(rec, *dropped, *from_users, source));
    let verdict = verdict::verdict(&signals);
    let verdict = crate::ramp_rank::rank(
        verdict,
        accept_verdict,
        &ledger,
        think_s,
        served > 0,
        &mut lines,
    );
    let verdict = crate::ramp_rank::stall_first(verdict, nagle, &ledger, &mut lines);
    RampAnalysis {
        little,
        knee_index: knee,
        knee_users: knee.map(|k| rec.steps[k].users),
        usl: fit_ok.copied(),
        usl_error: fit.as_ref().err().map(|e| e.to_string()),
        lines,
        verdict,
        ledger,
    }
}

/// The curve's lines of a ramp with replies: the knee, Little's law at each step (`none`:
/// no step completed), the USL fit.
fn curve_lines(
    rec: &RampRecord,
    none: bool,
    knee: Option<usize>,
    little: &[LittleCheck],
    fit: &Result<UslFit, usl::UslError>,
    lines: &mut Vec<String>,
) {
    let gain = rec.plan.knee_gain;
    match knee {
        Some(k) => lines.push(format!(
            "knee at {} user(s) ({:.1} TPS): beyond it TPS grew by less than {:.0} % of the users' growth while response time rose",
            rec.steps[k].users,
            rec.steps[k].tps,
            gain * 100.0
        )),
        None => lines.push("no knee: TPS kept growing with users over the whole ramp".into()),
    }
    let bad_little: Vec<String> = little
        .iter()
        .zip(&rec.steps)
        .filter(|(l, _)| !l.ok(0.1))
        .map(|(l, s)| format!("{} users ({:.2})", s.users, l.ratio))
        .collect();
    if none {
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
    match fit {
        Ok(f) => lines.push(format!(
            "USL fit: lambda {:.1} TPS/user [{:.1}, {:.1}], sigma {:.3} [{:.3}, {:.3}], kappa {:.5} [{:.5}, {:.5}], R^2 {:.3}. {}",
            f.lambda, f.lambda_ci.0, f.lambda_ci.1, f.sigma, f.sigma_ci.0, f.sigma_ci.1, f.kappa, f.kappa_ci.0, f.kappa_ci.1, f.r_squared, crate::usl::verdict(f)
        )),
        Err(e) => lines.push(format!("USL fit: {e}")),
    }
}

/// What the server's threads did at the last step: the top thread state and its meaning,
/// the working threads' evidence, the processes of the server's tree.
fn last_step_lines(rec: &RampRecord, last: &StepResult, lines: &mut Vec<String>) {
    if let Some((w, f)) = top_state(last) {
        let cpu = last.server_cpu_cores.map_or(String::new(), |c| {
            format!(", using {:.0} % of a CPU", c * 100.0)
        });
        // Most futex samples with a timeout: sleeps or timers (HotSpot's
        // Thread.sleep parks so), not a lock.
        let timed = crate::ramp_threads::facts(last)
            .is_some_and(|t| t.timed_share > 0.0 && t.timed_share >= t.lock_share);
        let meaning = if w.starts_with("futex") && timed {
            "mostly waits with a timeout (a sleep or a timer), not a lock"
        } else {
            wchan_meaning(&w)
        };
        lines.push(format!(
            "server threads at {} users: {:.0} % of samples in {w}: {meaning}{cpu}",
            last.users,
            f * 100.0,
        ));
    }
    if let Some(f) = crate::ramp_threads::facts(last) {
        lines.push(crate::ramp_threads::evidence_line(&f));
    }
    lines.extend(
        rec.plan
            .server_pid
            .and_then(|pid| crate::ramp_threads::processes_line(last, pid)),
    );
}

/// Disk I/O wait per request at each step, when at some step it is 10 % or more of the
/// response time (server threads in state D or an fsync-family call per sample, over TPS).
fn disk_line(rec: &RampRecord) -> Option<String> {
    let sn = rec.plan.sample_interval;
    let disk: Vec<(usize, f64, f64)> = rec
        .steps
        .iter()
        .filter_map(|s| {
            let d = disk_ns_per_request(s, sn)?;
            Some((s.users, d, d / s.response.mean_ns.max(1.0)))
        })
        .collect();
    if !disk.iter().any(|&(_, _, share)| share >= 0.1) {
        return None;
    }
    let per: Vec<String> = disk
        .iter()
        .map(|(u, d, share)| {
            if *share > 1.0 {
                format!(
                    "{u} users {:.2} ms (more than the response time: threads not serving requests wait on disk too)",
                    d / 1e6
                )
            } else {
                format!(
                    "{u} users {:.2} ms ({:.0} % of response)",
                    d / 1e6,
                    share * 100.0
                )
            }
        })
        .collect();
    Some(format!(
        "disk I/O wait per request (server threads in state D or an fsync-family call per sample, / TPS: Little's law): {}",
        per.join(", ")
    ))
}

/// The verdict of a full accept queue: `dropped` connection requests counted by `source`
/// from `from_users` users on, with the listen socket's backlog and net.core.somaxconn.
fn accept_verdict(rec: &RampRecord, dropped: u64, from_users: usize, source: &str) -> String {
    let (backlog, somaxconn) = rec
        .listener
        .map_or(("?".to_string(), "?".to_string()), |l| {
            (
                l.backlog.to_string(),
                l.somaxconn.map_or("?".into(), |s| s.to_string()),
            )
        });
    format!(
        "VERDICT: connections dropped at a full accept queue: {dropped} connection requests were dropped ({source}) from {from_users} users on; the listen socket's backlog is {backlog} (net.core.somaxconn {somaxconn}), so new users wait for SYN retransmissions (1 s, then 3 s, ...) instead of being served. Raise the listen backlog (listen(fd, N)) and net.core.somaxconn, and accept connections faster"
    )
}

#[cfg(test)]
#[path = "ramp_tests.rs"]
mod tests;
