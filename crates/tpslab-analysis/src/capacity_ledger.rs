//! A `capacity tcp|http` step's response-time ledger ([`crate::rt_ledger::open_loop`]) in
//! the verdict of its first failing rate, as a ramp's ([`crate::ramp_rank`]): the
//! ledger's line is evidence; the verdict names the ledger part its case stands for,
//! with its share of the mean response time (a full accept queue: waiting to be
//! accepted; saturated threads: on a CPU and waiting for one; waiting threads: the
//! largest of their waits, a lock, a timer, a peer, the disk); replies held by Nagle
//! until a delayed ACK head the verdict when their stall is at least
//! [`SIDE_SHARE`] of the mean response time and more than the case's part, the rule's
//! layer then a side finding, else they follow as a side finding with their share.

use crate::nagle::{judge, NagleStall, FIX};
use crate::ramp_rank::SIDE_SHARE;
use crate::rt_ledger::{balances, line_at, share};
use tpslab_record::gaps::ReplyGaps;
use tpslab_record::rt_ledger::{RtLedger, RtPart};
use tpslab_record::verdict::{Case, Diagnosis, Evidence, Recommendation};

/// The waits a waiting server's threads can be in, in the ledger's terms.
const WAITS: [RtPart; 5] = [
    RtPart::Lock,
    RtPart::Sleep,
    RtPart::Peer,
    RtPart::Disk,
    RtPart::OtherWait,
];

/// The ledger parts a capacity verdict of `case` stands for in `l`: waiting to be
/// accepted for a full accept queue, on a CPU and runnable for saturated threads, the
/// largest wait for waiting threads (none when no wait was read); none for the others
/// (refused or reset connections have no response time).
pub fn case_parts(case: Case, l: &RtLedger) -> Vec<RtPart> {
    match case {
        Case::AcceptQueueFull => vec![RtPart::AcceptWait],
        Case::ServerSaturated => vec![RtPart::OnCpu, RtPart::Runnable],
        Case::ServerWaiting => WAITS
            .into_iter()
            .filter(|&p| l.ms(p) > 0.0)
            .max_by(|a, b| l.ms(*a).total_cmp(&l.ms(*b)))
            .into_iter()
            .collect(),
        _ => vec![],
    }
}

/// The parts' words and figures: "server threads waiting on a lock 3.90 ms of the 4.20
/// ms mean response time at 800 requests/s (93 %)".
fn share_words(l: &RtLedger, parts: &[RtPart], at: &str) -> String {
    let ms: f64 = parts.iter().map(|&p| l.ms(p)).sum::<f64>().min(l.mean_ms);
    // Parts may overlap (on a CPU and runnable both within one request): the sum of
    // their shares is at most the whole mean.
    let pct: f64 = (100.0 * parts.iter().map(|&p| share(l, p)).sum::<f64>()).min(100.0);
    let label = parts
        .iter()
        .map(|p| p.label())
        .collect::<Vec<_>>()
        .join(" or ");
    format!(
        "{label} {ms:.2} ms of the {:.2} ms mean response time at {at} ({pct:.0} %)",
        l.mean_ms
    )
}

/// The Nagle finding at a capacity step: the figures of `n` and the ledger's stall.
fn nagle_words(n: &NagleStall, l: &RtLedger, at: &str) -> String {
    format!(
        "{}: the server writes a reply in two or more sends; Nagle holds the last until the client's delayed ACK (~40 ms): {} [ledger: {}]",
        NagleStall::NAME,
        n.evidence(),
        share_words(l, &[RtPart::TransmissionStall], at)
    )
}

/// `d` (the verdict of a failing `capacity tcp|http` step) with the step's ledger `l`
/// at `at` (`800 requests/s`) and its replies' gaps: the ledger's line as evidence
/// (its parts' sources), the case's part and share after the headline when the ledger
/// balances, and the Nagle finding first or as a side finding (see the module's text).
pub fn with_ledger(d: &mut Diagnosis, l: &RtLedger, gaps: Option<&ReplyGaps>, at: &str) {
    let sources: Vec<String> = l
        .parts
        .iter()
        .filter(|p| p.ms >= 0.005 || p.part == RtPart::AcceptWait)
        .map(|p| format!("{}: {}", p.part.label(), p.part.source()))
        .collect();
    d.evidence.push(Evidence {
        text: line_at(l, at),
        source: format!(
            "the step's response-time ledger (the replies' mean response time, request written to reply read; {})",
            sources.join("; ")
        ),
    });
    let parts: Vec<RtPart> = case_parts(d.case, l)
        .into_iter()
        .filter(|p| l.parts.iter().any(|x| x.part == *p))
        .collect();
    let named: f64 = parts.iter().map(|&p| share(l, p)).sum();
    if balances(l) && !parts.is_empty() {
        let head = d.headline.trim_end_matches('.');
        d.headline = format!("{head}; ledger: {}.", share_words(l, &parts, at));
    }
    let Some(n) = gaps.and_then(judge) else {
        return;
    };
    let stall = share(l, RtPart::TransmissionStall);
    let words = nagle_words(&n, l, at);
    if stall >= SIDE_SHARE && stall > named {
        d.evidence.push(Evidence {
            text: format!("side finding: {}", d.layer),
            source: "the rule that named the layer, second to the stall by its share of the ledger"
                .into(),
        });
        d.layer = words.clone();
        d.headline = format!("At the first failing rate, what gave: {words}.");
        d.recommendations.insert(
            0,
            Recommendation {
                what: FIX.into(),
                why: "each held reply waits for the client's delayed ACK (~40 ms) while the server idles".into(),
                lines: vec![],
            },
        );
    } else {
        d.evidence.push(Evidence {
            text: format!("side finding: {words}"),
            source: "the replies' first-to-last-byte gaps (the client's timestamps per request, reply_gaps) and TcpExt DelayedACKs of the client's namespace".into(),
        });
    }
}

#[cfg(test)]
#[path = "capacity_ledger_tests.rs"]
mod tests;
