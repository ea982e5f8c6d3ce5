//! A ramp's listen socket per step: connection requests dropped at a full accept queue,
//! counted at the target's own listen socket(s) (sk_drops, [`StepResult::listener_drops`])
//! when the ramp read them, else by the server namespace's TcpExt counters (every
//! listener of the namespace), and the accept queue's length.

use tpslab_record::ramp::{RampRecord, StepResult};

/// Where a step's drop count comes from: the target's listen socket(s) or the namespace.
const OWN: &str = "at the target's listen socket, sk_drops by sock_diag";
const NAMESPACE: &str = "TcpExt ListenOverflows/ListenDrops";

/// Connection requests dropped at a listener in a step: the target's own listen
/// socket(s)' drops when read, else the server namespace's (`TcpExt` ListenDrops counts
/// every such drop, ListenOverflows those of a full accept queue: the larger of the two);
/// None when not counted.
pub fn listen_dropped(s: &StepResult) -> Option<u64> {
    s.listener_drops
        .or_else(|| s.tcp.map(|t| t.listen_overflows.max(t.listen_drops)))
}

/// The source of [`listen_dropped`] over a ramp: the listen socket's own when every
/// counted step has it.
fn source(rec: &RampRecord) -> &'static str {
    let counted = rec.steps.iter().filter(|s| listen_dropped(s).is_some());
    if counted.clone().count() > 0 && counted.clone().all(|s| s.listener_drops.is_some()) {
        OWN
    } else {
        NAMESPACE
    }
}

/// Connection requests dropped at a full accept queue as users grew: (dropped over the
/// ramp, the users of the first step that dropped, where they were counted), when the
/// last step dropped some and at least as many as the first step.
pub fn accept_queue_overflow(rec: &RampRecord) -> Option<(u64, usize, &'static str)> {
    let first = rec.steps.first().and_then(listen_dropped)?;
    let last = rec.steps.last().and_then(listen_dropped)?;
    if last == 0 || last < first {
        return None;
    }
    let total = rec.steps.iter().filter_map(listen_dropped).sum();
    let from = rec
        .steps
        .iter()
        .find(|s| listen_dropped(s).unwrap_or(0) > 0)?
        .users;
    Some((total, from, source(rec)))
}

/// The listener's figures per step, when any request was dropped there (at the target's
/// listen socket, with the namespace's count in brackets when both were read).
pub fn accept_queue_line(rec: &RampRecord) -> Option<String> {
    if !rec.steps.iter().any(|s| listen_dropped(s).unwrap_or(0) > 0) {
        return None;
    }
    let own = source(rec) == OWN;
    let per: Vec<String> = rec
        .steps
        .iter()
        .map(|s| {
            let ns = match (own, s.tcp) {
                (true, Some(t)) => format!(" [{}]", t.listen_overflows.max(t.listen_drops)),
                _ => String::new(),
            };
            format!(
                "{} users {}{ns}{}",
                s.users,
                listen_dropped(s).map_or("?".into(), |n| n.to_string()),
                s.accept_queue_max
                    .map_or(String::new(), |q| format!(" (queue up to {q})"))
            )
        })
        .collect();
    let what = if own {
        "at the target's listen socket(s) (sk_drops by sock_diag, delta; in brackets the namespace's TcpExt ListenOverflows/ListenDrops)"
    } else {
        "(TcpExt ListenOverflows/ListenDrops of the server's namespace, delta)"
    };
    Some(format!(
        "listen socket{}: connection requests dropped per step {what}: {}",
        rec.listener
            .map_or(String::new(), |l| format!(" with backlog {}", l.backlog)),
        per.join(", ")
    ))
}
