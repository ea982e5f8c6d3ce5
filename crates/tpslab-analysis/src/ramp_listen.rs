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

/// Where one step's [`listen_dropped`] was counted: at the target's own listen socket(s)
/// (`listener_drops`, sk_drops) or by the namespace's TcpExt counters; None when not
/// counted.
fn step_source(s: &StepResult) -> Option<&'static str> {
    match (s.listener_drops, s.tcp) {
        (Some(_), _) => Some(OWN),
        (None, Some(_)) => Some(NAMESPACE),
        (None, None) => None,
    }
}

/// The source of [`listen_dropped`] over a ramp: the one source of every counted step,
/// or, when the steps mix the two, which steps were counted where ("the steps mix
/// sources: at the target's listen socket, sk_drops by sock_diag at 1, 2 users; TcpExt
/// ListenOverflows/ListenDrops at 4 users").
fn source(rec: &RampRecord) -> String {
    let mut by: Vec<(&'static str, Vec<String>)> = vec![];
    for s in &rec.steps {
        let Some(src) = step_source(s) else { continue };
        match by.iter_mut().find(|(x, _)| *x == src) {
            Some((_, users)) => users.push(s.users.to_string()),
            None => by.push((src, vec![s.users.to_string()])),
        }
    }
    match by.as_slice() {
        [] => NAMESPACE.to_string(),
        [(one, _)] => one.to_string(),
        _ => format!(
            "the steps mix sources: {}",
            by.iter()
                .map(|(src, users)| format!("{src} at {} users", users.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

/// Connection requests dropped at a full accept queue as users grew: (dropped over the
/// ramp, the users of the first step that dropped, where they were counted: one source,
/// or each step's when they mix), when the last step dropped some and at least as many
/// as the first step.
pub fn accept_queue_overflow(rec: &RampRecord) -> Option<(u64, usize, String)> {
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
/// listen socket, with the namespace's count in brackets when both were read). When the
/// steps mix sources (the listener read at some steps only), each step's figure names
/// its own.
pub fn accept_queue_line(rec: &RampRecord) -> Option<String> {
    if !rec.steps.iter().any(|s| listen_dropped(s).unwrap_or(0) > 0) {
        return None;
    }
    let src = source(rec);
    let (own, mixed) = (src == OWN, src != OWN && src != NAMESPACE);
    let per: Vec<String> = rec
        .steps
        .iter()
        .map(|s| {
            let ns = match (own || mixed, s.listener_drops, s.tcp) {
                (true, Some(_), Some(t)) => {
                    format!(" [{}]", t.listen_overflows.max(t.listen_drops))
                }
                _ => String::new(),
            };
            let at = match (mixed, step_source(s)) {
                (true, Some(OWN)) => " at the listen socket",
                (true, Some(_)) => " by TcpExt",
                _ => "",
            };
            format!(
                "{} users {}{at}{ns}{}",
                s.users,
                listen_dropped(s).map_or("?".into(), |n| n.to_string()),
                s.accept_queue_max
                    .map_or(String::new(), |q| format!(" (queue up to {q})"))
            )
        })
        .collect();
    let what = if own {
        "at the target's listen socket(s) (sk_drops by sock_diag, delta; in brackets the namespace's TcpExt ListenOverflows/ListenDrops)"
    } else if mixed {
        "(the steps mix sources: \"at the listen socket\" = sk_drops of the target's listen socket(s) by sock_diag, in brackets the namespace's TcpExt ListenOverflows/ListenDrops; \"by TcpExt\" = the namespace's TcpExt ListenOverflows/ListenDrops, every listener of it; delta)"
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
