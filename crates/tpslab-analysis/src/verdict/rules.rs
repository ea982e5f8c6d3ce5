//! The UDP verdict's rules, in priority order: the first whose condition holds names the
//! case; [`super::explain`] says what it means and what to change. The order is the
//! policy, visible here in one table and tested as a table of cases.

use super::explain::{self as x, Draft};
use super::facts::usable_threads;
use super::words::{on_wire, server_starved};
use tpslab_record::verdict::{Case, Facts};

/// One rule: a condition on the facts, the case it names, and its explanation.
pub struct Rule {
    /// The case named when the condition holds.
    pub case: Case,
    /// The condition.
    pub when: fn(&Facts) -> bool,
    /// Why the rule has its place in the order.
    pub why_here: &'static str,
    /// Evidence, recommendations and fix; returns (layer, headline).
    pub(super) explain: fn(&Facts, &mut Draft) -> (String, String),
}

/// The rules, first match wins.
pub const RULES: &[Rule] = &[
    Rule {
        case: Case::NoListener,
        when: no_listener,
        why_here: "first: a generator that fell behind sent fewer datagrams, but it cannot make the kernel find no socket for them",
        explain: x::no_listener,
    },
    Rule {
        case: Case::GeneratorInvalid,
        when: |f| !f.gen_valid,
        why_here: "a run whose generator missed its schedule is not evidence against the server: nothing after it is judged",
        explain: x::generator_invalid,
    },
    Rule {
        case: Case::Inconsistent,
        when: |f| f.inconsistent.is_some(),
        why_here: "counters that exceed what was sent include other traffic: no layer can be blamed",
        explain: x::inconsistent,
    },
    Rule {
        case: Case::NoLoss,
        when: no_loss,
        why_here: "everything accounted for on both paths and nothing missing in the window",
        explain: x::no_loss,
    },
    Rule {
        case: Case::ReuseportImbalance,
        when: uneven_group,
        why_here: "socket-buffer drops in some sockets of a SO_REUSEPORT group while others had room and the server had CPU to spare: neither more buffer nor a faster server is the first fix, spreading the flows is (before too slow: one overloaded socket beside idle ones looks too slow)",
        explain: super::imbalance::reuseport_imbalance,
    },
    Rule {
        case: Case::AppTooSlow,
        when: |f| top_layer(f) == Some(Case::SocketBufferBursts) && too_slow(f),
        why_here: "socket-buffer drops from a server that cannot drain the mean rate: a bigger buffer only fills later",
        explain: x::app_too_slow,
    },
    Rule {
        case: Case::SocketBufferUnjudged,
        when: |f| top_layer(f) == Some(Case::SocketBufferBursts) && f.reads_unknown.is_some(),
        why_here: "socket-buffer drops from a server whose reads were not counted and whose queue and CPU do not show it too slow: bursts and too slow need opposite fixes, and only the read count tells them apart",
        explain: x::socket_buffer_unjudged,
    },
    Rule {
        case: Case::SocketBufferBursts,
        when: |f| top_layer(f) == Some(Case::SocketBufferBursts),
        why_here: "the most drops at the socket buffer, from a server that keeps up on average (S1)",
        explain: x::socket_buffer_bursts,
    },
    Rule {
        case: Case::SoftnetBacklog,
        when: |f| top_layer(f) == Some(Case::SoftnetBacklog),
        why_here: "the most drops in the per-CPU backlog, before any socket",
        explain: x::softnet_backlog,
    },
    Rule {
        case: Case::NicDrops,
        when: |f| top_layer(f) == Some(Case::NicDrops),
        why_here: "the most drops at the interface",
        explain: x::nic_drops,
    },
    Rule {
        case: Case::ListenerGone,
        when: |f| top_layer(f) == Some(Case::ListenerGone),
        why_here: "the most datagrams found no socket on the port of a server that answered others: it left during the run (not all of it: that is no listener, first)",
        explain: x::listener_gone,
    },
    Rule {
        case: Case::KernelDrop,
        when: |f| top_layer(f) == Some(Case::KernelDrop),
        why_here: "the most drops for a reason the kernel named and no counter covers (firewall, route, checksum, qdisc)",
        explain: x::kernel_drop,
    },
    Rule {
        case: Case::NotAnswered,
        when: |f| top_layer(f) == Some(Case::NotAnswered),
        why_here: "the most datagrams read and never answered by the application",
        explain: x::not_answered,
    },
    Rule {
        case: Case::ReplySendFailed,
        when: |f| top_layer(f) == Some(Case::ReplySendFailed),
        why_here: "the most replies the server failed to send",
        explain: x::reply_send_failed,
    },
    Rule {
        case: Case::Unexplained,
        when: |_| true,
        why_here: "last: loss that no counter places (or nothing counted at all)",
        explain: x::unexplained,
    },
];

/// The first rule whose condition holds (the last always does).
pub fn first_rule(f: &Facts) -> &'static Rule {
    RULES
        .iter()
        .find(|r| (r.when)(f))
        .unwrap_or(&RULES[RULES.len() - 1])
}

/// Nothing listened: NoPorts took (nearly) every datagram on the wire and no reply came.
fn no_listener(f: &Facts) -> bool {
    f.no_ports > 0
        && f.replies_read == 0
        && f.no_ports as f64 >= 0.9 * on_wire(f) as f64
        && f.inconsistent.is_none()
}

/// Nothing lost, nothing failed to send, and every datagram placed on both paths.
fn no_loss(f: &Facts) -> bool {
    let all_accounted = f.unattributed == Some(0)
        && (!f.replies || f.reply_unattributed == Some(0))
        && f.window_loss_pct.is_none_or(|l| l == 0.0);
    f.lost_total == 0 && f.send_failed == 0 && all_accounted
}

/// The layer that lost the most datagrams (ties go to the first, most specific layer);
/// None when no layer lost any. Unattributed loss counts as [`Case::Unexplained`].
pub fn top_layer(f: &Facts) -> Option<Case> {
    let (count, case) = contributions(f)
        .into_iter()
        .fold(
            (0, Case::Unexplained),
            |best, l| {
                if l.0 > best.0 {
                    l
                } else {
                    best
                }
            },
        );
    (count > 0).then_some(case)
}

/// Each layer's datagrams lost, both paths together, from the ledger's rows: (datagrams,
/// the case that names the layer), in the order ties are broken (most specific first).
/// Kernel drop reasons count on both paths (a firewall dropping replies is the firewall's
/// as much as one dropping requests).
pub fn contributions(f: &Facts) -> [(u64, Case); 8] {
    [
        (f.socket_drops, Case::SocketBufferBursts),
        (
            f.softnet_drops + f.reply_softnet_drops,
            Case::SoftnetBacklog,
        ),
        (f.nic_drops, Case::NicDrops),
        (f.no_ports, Case::ListenerGone),
        (
            f.kernel_drops.iter().map(|k| k.1 + k.2).sum(),
            Case::KernelDrop,
        ),
        (f.not_answered, Case::NotAnswered),
        (f.reply_failed, Case::ReplySendFailed),
        (
            (f.unattributed.unwrap_or(0).max(0) + f.reply_unattributed.unwrap_or(0).max(0)) as u64,
            Case::Unexplained,
        ),
    ]
}

/// The server's threads used (nearly) all the CPU they could, or waited for one most of
/// the time: more readers on this host would not read more.
fn cpu_bound(f: &Facts) -> bool {
    let threads = usable_threads(f);
    f.backlog_cpu_pct.unwrap_or(f.server_cpu_mean_pct) >= 85.0 * threads as f64 || server_starved(f)
}

/// Socket-buffer drops in some sockets of an uneven SO_REUSEPORT group while others had
/// room, from a server with CPU to spare (else its idle sockets' readers could not have
/// read more: it is too slow, and the imbalance is evidence beside it).
fn uneven_group(f: &Facts) -> bool {
    top_layer(f) == Some(Case::SocketBufferBursts)
        && !cpu_bound(f)
        && crate::reuseport::judge(&f.group, f.flows, f.steer).is_some_and(|i| i.explains_drops())
}

/// Socket-buffer drops from a server too slow for the mean rate: the queue never
/// drains; or more is offered than the server drains and its queue does not empty
/// between bursts; or the queue is pinned while the server's threads are busy; or at
/// full CPU it could not read 80 % of the mean rate. A queue that drains most of the
/// time is a burst problem even when the capacity estimate (noisy on a busy host) is low.
/// Without the server's read count only the first and the queue-and-CPU terms apply.
fn too_slow(f: &Facts) -> bool {
    let pinned = f.rxq_share_full >= 0.5;
    let never_drains = pinned && f.rxq_share_low < 0.1;
    let cpu_bound = cpu_bound(f);
    if f.reads_unknown.is_some() {
        // Without the server's reads only the queue and the CPU speak: a queue that never
        // drains, or one pinned while its threads are busy.
        return never_drains || (pinned && cpu_bound);
    }
    let over_capacity = f.capacity_pps.is_some_and(|c| f.offered_pps >= c);
    // Reads per CPU-second it used: no buffer can hold a mean rate it cannot read, however
    // often its queue empties. Not when the queue sat nearly empty in 80 % of samples or
    // more: a server that waits for datagrams that often kept up with the mean.
    let below_mean =
        f.cpu_capacity_pps.is_some_and(|c| c < 0.8 * f.offered_pps) && f.rxq_share_low < 0.8;
    never_drains || below_mean || (over_capacity && f.rxq_share_low < 0.5) || (pinned && cpu_bound)
}
