//! A ramp's verdicts ranked by what they explain: the headline is the finding that holds
//! TPS flat, with its share of the response-time ledger ([`crate::rt_ledger`]) at the
//! last step and the step it starts at; a rule that fires but explains little (a full
//! accept queue that only delays new connections) follows as a side finding, with its
//! share.

use crate::rt_ledger::{cycle_ms, first_step, share};
use tpslab_record::rt_ledger::{RtLedger, RtPart};

/// A side finding's share of the users' time below this never heads the verdict (a
/// fifth: what it costs is not what holds TPS).
pub const SIDE_SHARE: f64 = 0.2;

/// The ledger parts a verdict of the rule chain names (by its kind, the words after
/// `VERDICT: `): serialisation a lock, disk waits the disk, waiting for a peer the peer;
/// none for the others. The CPU kinds have none: a saturated event loop's requests wait
/// for its one thread in their sockets, a part the ledger does not measure, so the
/// threads' time on a CPU per request (cores / TPS) is not what holds TPS.
pub fn verdict_parts(verdict: &str) -> &'static [RtPart] {
    let kind = verdict.strip_prefix("VERDICT: ").unwrap_or(verdict);
    if kind.starts_with("serialisation") {
        &[RtPart::Lock]
    } else if kind.starts_with("waits on disk") {
        &[RtPart::Disk]
    } else if kind.starts_with("waiting for a peer") {
        &[RtPart::Peer]
    } else {
        &[]
    }
}

/// The full accept queue's share of the users' time at a step: its users' time outside
/// a request (connecting: SYN retransmissions) and waiting to be accepted, over their
/// cycle (response + think + outside).
pub fn accept_share(l: &RtLedger, think_s: f64) -> f64 {
    let c = cycle_ms(l, think_s);
    if c > 0.0 {
        ((l.outside_ms + l.ms(RtPart::AcceptWait)) / c).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// The headline: the rule chain's `verdict`, or the accept queue's (`accept`) when it
/// explains at least [`SIDE_SHARE`] of the users' time at the last step and more than
/// the chain's finding does; the other one is pushed to `lines` as a side finding with
/// its share. A verdict naming ledger parts carries their share of the mean response
/// time at the last step and the step they start at. Without replies (`served` false)
/// the chain's verdict stands.
pub fn rank(
    verdict: String,
    accept: Option<String>,
    ledger: &[RtLedger],
    think_s: f64,
    served: bool,
    lines: &mut Vec<String>,
) -> String {
    let last = ledger.last();
    let parts = verdict_parts(&verdict);
    let main_share = last.map_or(0.0, |l| {
        let c = cycle_ms(l, think_s);
        let ms: f64 = parts.iter().map(|&p| l.ms(p)).sum();
        if c > 0.0 {
            ms / c
        } else {
            0.0
        }
    });
    let verdict = match (last, parts.is_empty()) {
        (Some(l), false) => with_share(&verdict, l, parts, ledger),
        _ => verdict,
    };
    let Some(accept) = accept.filter(|_| served) else {
        return verdict;
    };
    let a = last.map_or(0.0, |l| accept_share(l, think_s));
    let a_words = last.map_or(String::new(), |l| {
        format!(
            " [ledger at {} users: {:.0} % of the users' time: connecting {:.2} ms per request outside the response time, waiting to be accepted {:.2} ms of the {:.2} ms mean response time]",
            l.users,
            100.0 * a,
            l.outside_ms,
            l.ms(RtPart::AcceptWait),
            l.mean_ms
        )
    });
    if a >= SIDE_SHARE && a > main_share {
        let kind = verdict.strip_prefix("VERDICT: ").unwrap_or(&verdict);
        lines.push(format!("side finding: {kind}"));
        format!("{accept}{a_words}")
    } else {
        let kind = accept.strip_prefix("VERDICT: ").unwrap_or(&accept);
        lines.push(format!("side finding: {kind}{a_words}"));
        verdict
    }
}

/// The verdict with its parts' share at its end: "...; ledger: server threads waiting
/// on a lock 246.52 ms of the 261.89 ms mean response time at 64 users (94 %), from 2
/// users on". Unchanged when the ledger did not read those parts (no per-thread
/// samples).
fn with_share(verdict: &str, l: &RtLedger, parts: &[RtPart], ledger: &[RtLedger]) -> String {
    if !crate::rt_ledger::balances(l) || !parts.iter().all(|p| l.parts.iter().any(|x| x.part == *p))
    {
        return verdict.to_string();
    }
    let ms: f64 = parts.iter().map(|&p| l.ms(p)).sum();
    let pct: f64 = 100.0 * parts.iter().map(|&p| share(l, p)).sum::<f64>();
    let label = parts
        .iter()
        .map(|p| p.label())
        .collect::<Vec<_>>()
        .join(" or ");
    let from = first_step(ledger, parts).map_or(String::new(), |u| {
        format!(", from {u} user{} on", if u == 1 { "" } else { "s" })
    });
    format!(
        "{verdict}; ledger: {label} {ms:.2} ms of the {:.2} ms mean response time at {} users ({pct:.0} %){from}",
        l.mean_ms, l.users
    )
}

/// Nagle x delayed ACK (`nagle`: [`crate::nagle::ramp_line`]) heads the verdict when the
/// last step's transmission stall is at least [`SIDE_SHARE`] of its mean response time
/// and more than the parts the verdict names (none for a verdict that names no part: one
/// step only, scaling, the CPU kinds); the verdict is then a side finding. Otherwise the
/// finding follows the verdict with its share. Unchanged without a finding.
pub fn stall_first(
    verdict: String,
    nagle: Option<String>,
    ledger: &[RtLedger],
    lines: &mut Vec<String>,
) -> String {
    let Some(nagle) = nagle else {
        return verdict;
    };
    let Some(last) = ledger.last() else {
        lines.push(nagle);
        return verdict;
    };
    let stall = share(last, RtPart::TransmissionStall);
    let named: f64 = verdict_parts(&verdict)
        .iter()
        .map(|&p| share(last, p))
        .sum();
    let words = format!(
        "{nagle} [ledger at {} users: {:.2} ms of the {:.2} ms mean response time ({:.0} %)]",
        last.users,
        last.ms(RtPart::TransmissionStall),
        last.mean_ms,
        100.0 * stall
    );
    if stall >= SIDE_SHARE && stall > named {
        let kind = verdict.strip_prefix("VERDICT: ").unwrap_or(&verdict);
        lines.push(format!("side finding: {kind}"));
        format!("VERDICT: {words}")
    } else {
        lines.push(format!("side finding: {words}"));
        verdict
    }
}
