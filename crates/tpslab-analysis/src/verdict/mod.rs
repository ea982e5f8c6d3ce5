//! The verdict: where the datagrams died, the evidence, and what to change.
//!
//! [`Facts`] are extracted from a run record (plus a truesize probe); [`diagnose`] applies
//! the rules of [`RULES`] in their order (the first whose condition holds names the
//! [`Case`]) and the case's explanation: its evidence, recommendations and fix.

mod explain;
mod facts;
mod imbalance;
mod rules;
mod words;

pub use facts::{drain, facts_of, Drain};
pub use rules::{contributions, first_rule, top_layer, Rule, RULES};
use tpslab_record::verdict::Facts;

use explain::Draft;
use tpslab_record::buffer::TruesizeProbe;
use tpslab_record::verdict::{Case, Diagnosis, Recommendation};
pub use words::PERSIST_FILE;
use words::{buffer_notes, ev, pct};

/// Applies the rules to the facts.
pub fn diagnose(f: &Facts, probe: Option<&TruesizeProbe>) -> Diagnosis {
    let rule = first_rule(f);
    let case = rule.case;
    let mut d = Draft::default();
    d.evidence.push(request_path(f));
    let (layer, mut headline) = (rule.explain)(f, &mut d);
    // The loss by contribution: the headline's layer with its share, the others after it.
    if let Some((share, line)) = by_contribution(f, case) {
        if let Some(h) = headline.strip_suffix(").") {
            headline = format!("{h}; {share:.1} % of the datagrams lost).");
        } else if let Some(h) = headline.strip_suffix('.') {
            headline = format!("{h} ({share:.1} % of the datagrams lost).");
        }
        d.evidence.insert(
            1,
            ev(
                line,
                "ledger rows, both paths: each row's datagrams / every datagram lost",
            ),
        );
    }
    let Draft {
        mut evidence,
        mut recs,
        buffer,
        fix,
        persist,
    } = d;
    // Every sysctl recommended above, persisted by one write of one file.
    let persist = words::persist_lines(&persist);
    if !persist.is_empty() {
        recs.push(Recommendation {
            what: format!(
                "keep the sysctls above across reboots: one file, {}, written once with every line",
                words::PERSIST_FILE
            ),
            why: "sysctl -w lasts until the next boot; one `cat >` per recommendation would each replace the file, and only the last one's keys would survive a reboot".into(),
            lines: persist,
        });
    }
    also_seen(f, case, &mut evidence);
    let involved = matches!(
        case,
        Case::SocketBufferBursts
            | Case::AppTooSlow
            | Case::SocketBufferUnjudged
            | Case::ReuseportImbalance
    );
    let mut notes = if involved {
        buffer_notes(f, probe)
    } else {
        vec![]
    };
    // S2's riddle is about the reference setup: background for a foreign server.
    let explain_notes = if f.ours {
        vec![]
    } else {
        let (riddle, rest): (Vec<String>, Vec<String>) = notes
            .into_iter()
            .partition(|n| n.starts_with("S2's riddle"));
        notes = rest;
        riddle
    };
    Diagnosis {
        case,
        layer,
        headline,
        evidence,
        recommendations: recs,
        buffer,
        buffer_notes: notes,
        fix,
        explain_notes,
    }
}

/// The request path's ledger in one line of evidence: what was attempted, read by the
/// server (its share unless the ledger does not balance) and lost at each layer.
fn request_path(f: &Facts) -> tpslab_record::verdict::Evidence {
    let att = f.attempted;
    ev(
        format!(
            "request path: {att} attempted, {} read by the server ({}), {} at the socket buffer, {} softnet, {} NIC, {} no listener, {} failed to send{}{}",
            f.delivered,
            if f.inconsistent.is_some() || f.delivered > att {
                "share not shown: the ledger does not balance".to_string()
            } else {
                format!("{:.2} %", pct(f.delivered, att))
            },
            f.socket_drops,
            f.softnet_drops,
            f.nic_drops,
            f.no_ports,
            f.send_failed,
            match f.kernel_drops.iter().map(|k| k.1).sum::<u64>() {
                0 => String::new(),
                n => format!(
                    ", {n} by kernel drop reason ({})",
                    f.kernel_drops
                        .iter()
                        .filter(|k| k.1 > 0)
                        .map(|(r, n, _)| format!("{r} {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            match f.unattributed {
                None => ", rest unknown".to_string(),
                Some(u) if u < 0 => format!(", INCONSISTENT: the counters exceed what was sent by {}", -u),
                Some(u) => format!(", {u} unattributed"),
            }
        ),
        "ledger (see --explain for each counter)",
    )
}

/// Evidence of what else was seen: drops in layers the case does not blame, where the
/// server's threads waited, a SO_REUSEPORT group's imbalance.
fn also_seen(f: &Facts, case: Case, evidence: &mut Vec<tpslab_record::verdict::Evidence>) {
    // Seen drops in other layers are always reported.
    if case != Case::NicDrops && f.nic_drops > 0 {
        evidence.push(ev(
            format!("also: {} NIC drops", f.nic_drops),
            "/proc/net/dev",
        ));
    }
    if case != Case::SoftnetBacklog && f.softnet_drops + f.reply_softnet_drops > 0 {
        evidence.push(ev(
            format!(
                "also: {} softnet backlog drops",
                f.softnet_drops + f.reply_softnet_drops
            ),
            "/proc/net/softnet_stat",
        ));
    }
    if let Some(h) = &f.waits_headline {
        evidence.push(ev(
            format!("where the server's threads waited: {h}"),
            "/proc/PID/task/TID/stat, syscall and wchan every 100 ms; time on a CPU and runnable from schedstat",
        ));
    }
    if case != Case::ReuseportImbalance {
        if let Some(i) = crate::reuseport::judge(&f.group, f.flows, f.steer) {
            evidence.push(ev(i.sentence(), imbalance::SOURCE));
        }
    }
}

/// The layer a case blames among [`contributions`] (the SO_REUSEPORT, too-slow and
/// unjudged cases are socket-buffer drops); None for the cases that blame no layer.
fn layer_of(case: Case) -> Option<Case> {
    use Case::*;
    match case {
        SocketBufferBursts | AppTooSlow | SocketBufferUnjudged | ReuseportImbalance => {
            Some(SocketBufferBursts)
        }
        SoftnetBacklog | NicDrops | ListenerGone | KernelDrop | NotAnswered | ReplySendFailed
        | Unexplained => Some(case),
        _ => None,
    }
}

/// What a layer is called in the contribution line.
fn layer_words(f: &Facts, case: Case) -> String {
    match case {
        Case::SocketBufferBursts => "the server socket's receive buffer".into(),
        Case::SoftnetBacklog => "the softnet backlog".into(),
        Case::NicDrops => "the NIC".into(),
        Case::ListenerGone => "no listener on the port".into(),
        Case::KernelDrop => format!(
            "kernel drop reasons ({})",
            f.kernel_drops
                .iter()
                .filter(|k| k.1 + k.2 > 0)
                .map(|k| k.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Case::NotAnswered => "read by the server, never answered".into(),
        Case::ReplySendFailed => "the server's failed reply sends".into(),
        _ => "no counter (unattributed)".into(),
    }
}

/// The headline layer's share of every datagram lost (percent, 0..=100) and one line
/// naming each layer that lost datagrams with its count and share, largest first, the
/// headline's layer first; None when nothing was lost, the case blames no layer, or the
/// ledger does not balance (no share is given then).
fn by_contribution(f: &Facts, case: Case) -> Option<(f64, String)> {
    let head = layer_of(case)?;
    if f.inconsistent.is_some() {
        return None;
    }
    let mut rows: Vec<(u64, Case)> = contributions(f).into_iter().filter(|r| r.0 > 0).collect();
    let named: u64 = rows.iter().map(|r| r.0).sum();
    // Every datagram the ledger lost, both paths: rows no verdict names (the generator's
    // own socket dropping replies) are in it too, so no share is taken of less.
    let total = named.max(f.lost_total);
    let mine = rows.iter().find(|r| r.1 == head)?.0;
    rows.sort_by_key(|r| (r.1 != head, std::cmp::Reverse(r.0)));
    let share = |n: u64| 100.0 * n as f64 / total as f64;
    let mut parts: Vec<String> = rows
        .iter()
        .map(|&(n, c)| format!("{} {n} ({:.1} %)", layer_words(f, c), share(n)))
        .collect();
    if total > named {
        parts.push(format!(
            "other ledger rows (the generator's own socket, ...) {} ({:.1} %)",
            total - named,
            share(total - named)
        ));
    }
    let line = parts.join("; ");
    Some((
        share(mine),
        format!("the loss by contribution ({total} datagrams lost, both paths): {line}"),
    ))
}

#[cfg(test)]
pub(crate) mod tests;
