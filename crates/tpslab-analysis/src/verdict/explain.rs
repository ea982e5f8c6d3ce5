//! What each case says: its evidence, its recommendations and the fix a verification run
//! applies. One function per case, called through the rule table in [`super::rules`].

use super::facts::usable_threads;
use super::words::{
    cpu, ev, loss_text, on_wire, pct, raise_lines, rxq, server_starved, server_waits, sysctl_lines,
};
use crate::buffer::{buffer_need, BACKLOG_MARGIN};
use crate::runtime;
use tpslab_record::buffer::BufferNeed;
use tpslab_record::runtime::Runtime;
use tpslab_record::verdict::{Evidence, Facts, Fix, Recommendation};

mod buffer;
mod slow;

pub(super) use buffer::{socket_buffer_bursts, socket_buffer_unjudged};
pub(super) use slow::app_too_slow;

/// What the explanations fill in.
#[derive(Default)]
pub(super) struct Draft {
    pub(super) evidence: Vec<Evidence>,
    pub(super) recs: Vec<Recommendation>,
    pub(super) buffer: Option<BufferNeed>,
    pub(super) fix: Option<Fix>,
    /// Sysctls the recommendations set with `sysctl -w`, to persist in one file
    /// ([`super::words::persist_lines`]): (key, value).
    pub(super) persist: Vec<(String, u64)>,
}

/// Why a foreign server's runtime is unknown: the record has no process for it.
const RUNTIME_UNKNOWN: &str =
    "no PID: its process was not found on this host, or it runs on another";

/// The lines of `what` in the runtime of the server in front of us; for a server whose
/// runtime is unknown, those of every common runtime, each named.
fn in_its_runtime(f: &Facts, what: impl Fn(Runtime) -> Vec<String>) -> Vec<String> {
    match f.runtime {
        Some(rt) => what(rt),
        None => runtime::every_runtime(RUNTIME_UNKNOWN, what),
    }
}

/// What reads in parallel in the server: (plural, singular).
fn readers(f: &Facts) -> (&'static str, &'static str) {
    match (f.ours, f.runtime) {
        (true, _) => ("threads", "thread"),
        (false, Some(rt)) => (rt.readers(), rt.reader()),
        (false, None) => ("readers (threads; processes for Python or Node)", "reader"),
    }
}

/// [`super::Case::GeneratorInvalid`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn generator_invalid(f: &Facts, d: &mut Draft) -> (String, String) {
    for r in &f.gen_reasons {
        d.evidence.push(ev(r.clone(), "generator self-check"));
    }
    d.recs.push(Recommendation {
            what: "make the generator keep up before judging the server".into(),
            why: "the loss or latency measured here may be the tool's, not the server's".into(),
            lines: vec![
                "lower --rate, or spread the load: --threads N (load) / --load-threads N (run)".into(),
                "keep the generator off the server's CPU (taskset the generator, --cpus for our server)".into(),
            ],
        });
    (
        "the generator (tpslab itself)".to_string(),
        "The run is NOT valid evidence against the server: the generator was a bottleneck."
            .to_string(),
    )
}

/// [`super::Case::Inconsistent`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn inconsistent(f: &Facts, d: &mut Draft) -> (String, String) {
    let why = f.inconsistent.clone().unwrap_or_default();
    d.evidence.push(ev(
        why.clone(),
        "ledger: attempted minus every counted layer < 0",
    ));
    d.recs.push(Recommendation {
            what: "measure where only this run's datagrams are counted".into(),
            why: "a counter that other traffic shares cannot place this run's datagrams".into(),
            lines: if f.exact_server {
                vec![
                    "the server's own threads were counted: other clients of the server, or other UDP sockets of its process, share its counts; test it where this load is its only traffic".into(),
                    "e.g. a network namespace of its own (ip netns add ...; ip netns exec ...)".into(),
                ]
            } else {
                vec![
                    "run as root on kernel 6.4+ with --pid PID of the server: its own threads' reads are counted exactly".into(),
                    "or run the server and tpslab in a network namespace of their own (ip netns add ...; ip netns exec ...)".into(),
                ]
            },
        });
    (
        "unknown: the measurement is inconsistent".to_string(),
        format!("NO VERDICT: the measurement is inconsistent ({why})."),
    )
}

/// [`super::Case::NoListener`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn no_listener(f: &Facts, d: &mut Draft) -> (String, String) {
    for r in f.gen_reasons.iter().filter(|_| !f.gen_valid) {
        d.evidence.push(ev(
                format!("{r} (the generator fell behind too; that does not change where the datagrams went)"),
                "generator self-check",
            ));
    }
    d.evidence.push(ev(
        format!(
            "{} datagrams arrived for port {} where no socket listened",
            f.no_ports, f.port
        ),
        "/proc/net/snmp Udp: NoPorts, delta",
    ));
    d.recs.push(Recommendation {
            what: format!("start the server on port {}, or point the load at the right address", f.port),
            why: "the kernel discarded every datagram: nothing was bound to the port (in this network namespace; pass --pid for a server in another one)".into(),
            lines: vec![format!("ss -uapn 'sport = :{}'", f.port)],
        });
    (
        "no listener (Udp: NoPorts)".to_string(),
        format!(
            "Nothing listens on port {}: {:.1} % of the datagrams were discarded on arrival.",
            f.port,
            pct(f.no_ports, on_wire(f))
        ),
    )
}

/// [`super::Case::ListenerGone`]: its evidence and recommendation; no fix. Returns
/// (layer, headline).
pub(super) fn listener_gone(f: &Facts, d: &mut Draft) -> (String, String) {
    d.evidence.push(ev(
        format!(
            "{} datagrams arrived for port {} when no socket listened there, while {} replies came back: the socket was there for part of the run",
            f.no_ports, f.port, f.replies_read
        ),
        "ledger: /proc/net/snmp Udp: NoPorts delta (charged up to the path's gap); the generator's replies",
    ));
    d.recs.push(Recommendation {
        what: format!("find why the server on port {} stopped listening during the run", f.port),
        why: "it closed its socket or exited (a crash, a restart, an OOM kill, a worker recycled): the datagrams after that were discarded on arrival, which no buffer or thread count changes".into(),
        lines: vec![
            format!("ss -uapn 'sport = :{}'", f.port),
            "journalctl -k --since '-10 min' | grep -i -e oom -e killed".into(),
        ],
    });
    (
        "no listener for part of the run (Udp: NoPorts)".to_string(),
        format!(
            "The server stopped listening on port {} during the run: {:.1} % of the datagrams found no socket, after it had answered {}.",
            f.port,
            pct(f.no_ports, on_wire(f)),
            f.replies_read
        ),
    )
}

/// [`super::Case::NoLoss`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn no_loss(f: &Facts, d: &mut Draft) -> (String, String) {
    let att = f.attempted;
    let what = if f.replies {
        "were read by the server and answered"
    } else {
        "were read by the server"
    };
    d.evidence.push(ev(
        format!("all {att} datagrams {what}{}", loss_text(f)),
        "ledger",
    ));
    (
        "none".to_string(),
        format!("No loss: all {att} datagrams {what}. Nothing to fix at this load."),
    )
}

/// [`super::Case::SoftnetBacklog`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn softnet_backlog(f: &Facts, d: &mut Draft) -> (String, String) {
    let cur = f.netdev_max_backlog.unwrap_or(1000);
    let want = (f.burst.max(1) * 2)
        .max(cur * 2)
        .max(1000)
        .next_power_of_two();
    d.evidence.push(ev(
            format!(
                "{} packets dropped in the per-CPU softnet backlog (net.core.netdev_max_backlog = {cur})",
                f.softnet_drops + f.reply_softnet_drops
            ),
            "/proc/net/softnet_stat column 2, delta, per CPU",
        ));
    d.recs.push(Recommendation {
            what: format!("raise net.core.netdev_max_backlog to {want}"),
            why: "packets wait in the receiving CPU's backlog before the stack processes them; bursts larger than the backlog are dropped there, before any socket".into(),
            lines: sysctl_lines(&[("net.core.netdev_max_backlog", want)]),
        });
    d.persist.push(("net.core.netdev_max_backlog".into(), want));
    d.fix = Some(Fix {
        sysctls: vec![("net.core.netdev_max_backlog".into(), want.to_string())],
        ..Default::default()
    });
    (
        "the softnet backlog (net.core.netdev_max_backlog)".to_string(),
        format!(
            "Packets die in the per-CPU softnet backlog before reaching any socket ({} dropped).",
            f.softnet_drops + f.reply_softnet_drops
        ),
    )
}

/// [`super::Case::NicDrops`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn nic_drops(f: &Facts, d: &mut Draft) -> (String, String) {
    d.evidence.push(ev(
        format!("{} drops counted by the network interfaces", f.nic_drops),
        "/proc/net/dev rx/tx drop, delta",
    ));
    d.recs.push(Recommendation {
        what: "check the NIC's ring buffers and interrupt distribution".into(),
        why: "the interface dropped before the kernel's stack saw the packets".into(),
        lines: vec![
            "ethtool -g IFACE; ethtool -G IFACE rx 4096".into(),
            "ethtool -S IFACE | grep -i drop".into(),
        ],
    });
    (
        "the NIC".to_string(),
        format!(
            "Packets die at the network interface ({} drops).",
            f.nic_drops
        ),
    )
}

/// [`super::Case::KernelDrop`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn kernel_drop(f: &Facts, d: &mut Draft) -> (String, String) {
    let (reason, req, rep) = f.kernel_drops.first().cloned().unwrap_or_default();
    let n = req + rep;
    // Each path's share of what entered it: the reply path starts from what the server
    // sent (frames, with a frame header), the replies those frames left incomplete said
    // beside them.
    let unit = if f.frames.is_some() {
        "reply frames"
    } else {
        "replies"
    };
    let shares = |req: u64, rep: u64| {
        let mut v = vec![];
        if req > 0 && req <= f.attempted {
            v.push(format!("{:.1} % of requests", pct(req, f.attempted)));
        }
        if rep > 0 && rep <= f.reply_attempted {
            v.push(format!("{:.1} % of {unit}", pct(rep, f.reply_attempted)));
        }
        v.join(", ")
    };
    for (r, q, p) in &f.kernel_drops {
        d.evidence.push(ev(
            format!(
                "{} datagrams {}: {q} on the request path, {p} on the reply path ({})",
                q + p,
                crate::drop_reason::label(r),
                shares(*q, *p)
            ),
            &format!("skb:kfree_skb reason {r}, charged to this run up to what the counters left unexplained (the tracepoint is host-wide)"),
        ));
    }
    let share = match shares(req, rep) {
        s if s.is_empty() => String::new(),
        s => format!(", {s}"),
    };
    let share = match f.frames.as_ref().filter(|_| rep > 0) {
        Some(fr) => format!(
            "{share}: {} of {} replies incomplete",
            fr.replies_incomplete,
            fr.replies_complete + fr.replies_incomplete
        ),
        None => share,
    };
    if let Some(fr) = f.frames.as_ref().filter(|_| rep > 0) {
        d.evidence.push(ev(
            incomplete_words(fr),
            &format!(
                "the generator's count of frames per request id ({} frame header)",
                fr.header
            ),
        ));
    }
    // Where a netfilter rule struck, from the ledger row that holds the drops: a drop
    // after the send call succeeded is on the way in (a prerouting, input or forward
    // hook); the tracepoint names no hook, so none is named.
    let side = match (req > 0, rep > 0) {
        (true, false) => " on the way to the server, after the generator's sends succeeded (a prerouting, input or forward hook)",
        (false, true) => " on the way back, after the server's sends succeeded (a prerouting, input or forward hook)",
        _ => " on both paths, after the sends succeeded (prerouting, input or forward hooks)",
    };
    let (layer, headline, what, lines) = by_class(&reason, &share, side);
    d.recs.push(Recommendation {
        what: what.into(),
        why: format!(
            "{n} datagrams were dropped with reason {reason} on their way; no buffer or thread setting changes that"
        ),
        lines,
    });
    (layer, headline)
}

/// A kernel drop `reason`'s layer, headline (with the drops' `share`), what to do and the
/// commands that show it; a netfilter rule's layer says on which `side` it struck.
fn by_class(reason: &str, share: &str, side: &str) -> (String, String, &'static str, Vec<String>) {
    use crate::drop_reason::{classify, ReasonClass as C};
    match classify(reason) {
        C::Firewall if reason == "NETFILTER_DROP" => (
            format!("a netfilter rule (firewall){side}"),
            format!("Datagrams were dropped by a netfilter rule ({reason}{share})."),
            "find the rule that drops the flow and allow it",
            vec![
                "nft list ruleset | grep -n -B3 drop".into(),
                "iptables-save -c | grep -E 'DROP|REJECT'".into(),
            ],
        ),
        C::Firewall => (
            "a firewall rule".into(),
            format!("Datagrams were dropped by a firewall rule ({reason}{share})."),
            "find the rule that drops the flow and allow it",
            vec![
                "nft list ruleset | grep -n -B3 drop".into(),
                "iptables-save -c | grep -E 'DROP|REJECT'".into(),
                "sysctl net.ipv4.conf.all.rp_filter".into(),
            ],
        ),
        C::Route => (
            "routing".into(),
            format!("Datagrams were dropped for lack of a route or neighbour ({reason}{share})."),
            "check the route and the neighbour entry for the destination",
            vec!["ip route get DEST".into(), "ip neigh show".into()],
        ),
        C::Checksum => (
            "checksum verification".into(),
            format!("Datagrams were dropped for bad checksums ({reason}{share})."),
            "find what corrupts or mis-offloads the datagrams",
            vec![
                "nstat -az Udp:InCsumErrors".into(),
                "ethtool -k IFACE | grep checksum".into(),
            ],
        ),
        C::Qdisc => (
            "a queueing discipline".into(),
            format!(
                "Datagrams were dropped by a queueing discipline or tc filter ({reason}{share})."
            ),
            "check the qdisc's limit and the tc filters on the path",
            vec![
                "tc -s qdisc show".into(),
                "tc -s filter show dev IFACE ingress".into(),
            ],
        ),
        _ => (
            "the kernel".into(),
            format!(
                "The kernel dropped datagrams for a reason no counter covers ({reason}{share})."
            ),
            "look the reason up in the kernel's include/net/dropreason-core.h",
            vec![],
        ),
    }
}

/// How many replies were complete and incomplete, and the frames behind them.
fn incomplete_words(fr: &tpslab_record::ReplyFrames) -> String {
    let replies = fr.replies_complete + fr.replies_incomplete;
    format!(
        "{} of {replies} replies arrived incomplete ({:.1} %: some of their frames never arrived), {} complete; {} of {} frames arrived",
        fr.replies_incomplete,
        pct(fr.replies_incomplete, replies),
        fr.replies_complete,
        fr.frames_received,
        fr.frames_expected
    ) + &match fr.frames_misnumbered {
        0 => String::new(),
        n => format!("; {n} more were numbered at or past their reply's total (sent again after a failed send and numbered anew)"),
    }
}

/// [`super::Case::ReplySendFailed`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn reply_send_failed(f: &Facts, d: &mut Draft) -> (String, String) {
    let n = f.reply_failed;
    // With a frame header the failed sends are frames: the replies they cost are those
    // that stayed incomplete (a server may send a refused frame again).
    let (what, lost) = match &f.frames {
        Some(fr) => (
            format!("{n} reply frames"),
            format!(" ({} replies incomplete)", fr.replies_incomplete),
        ),
        None => (format!("{n} replies"), String::new()),
    };
    d.evidence.push(ev(
        format!("the server failed to send {what}{lost}"),
        "server's sendto/sendmmsg errors",
    ));
    if let Some(fr) = &f.frames {
        d.evidence.push(ev(
            incomplete_words(fr),
            &format!(
                "the generator's count of frames per request id ({} frame header)",
                fr.header
            ),
        ));
    }
    let Some((reason, drops)) = &f.sends_refused_by else {
        return (
            "the server's reply sends".to_string(),
            format!("The server could not send {what}{lost}."),
        );
    };
    d.evidence.push(ev(
        format!("{drops} drops with reason {reason} during the run, as many as the failed sends or more: a rule on the sending side refuses them and the send call fails"),
        "skb:kfree_skb reason (host-wide)",
    ));
    d.recs.push(Recommendation {
        what: "find the rule that drops the server's replies and allow them".into(),
        why: format!("{n} of the server's reply sends were refused by a firewall rule ({reason}); no buffer or thread setting changes that"),
        lines: vec![
            "nft list ruleset | grep -n -B3 drop".into(),
            "iptables-save -c | grep -E 'DROP|REJECT'".into(),
        ],
    });
    let (layer, head) = if reason == "NETFILTER_DROP" {
        (
            "a netfilter rule (firewall) on the server's sending side (an output or postrouting hook: its sends failed)",
            "A netfilter rule refused",
        )
    } else {
        (
            "a firewall rule on the server's sending side (its sends failed)",
            "A firewall rule refused",
        )
    };
    (
        layer.to_string(),
        format!("{head} the server's sends: it could not send {what}{lost}."),
    )
}

/// [`super::Case::NotAnswered`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn not_answered(f: &Facts, d: &mut Draft) -> (String, String) {
    d.evidence.push(ev(
        format!(
            "the server read {} datagrams it never answered ({:.1} % of those it read)",
            f.not_answered,
            pct(f.not_answered, f.delivered)
        ),
        "ledger reply path: read minus replies attempted",
    ));
    d.recs.push(Recommendation {
            what: "check what the application does with requests it does not answer".into(),
            why: "the kernel delivered them: malformed or unexpected requests, rate limiting or an application-level queue limit drop them inside the server".into(),
            lines: vec![],
        });
    (
        "the application (read, never answered)".to_string(),
        format!(
            "The server read {} datagrams and did not answer them.",
            f.not_answered
        ),
    )
}

/// [`super::Case::Unexplained`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn unexplained(f: &Facts, d: &mut Draft) -> (String, String) {
    let unknown = f.unattributed.is_none() || (f.replies && f.reply_unattributed.is_none());
    d.evidence.push(ev(
            if unknown {
                format!(
                    "the server's side was not observable (its socket was not found): {} of the window unanswered with no counter to say where",
                    f.window_loss_pct.map_or("loss".to_string(), |l| format!("{l:.2} %"))
                )
            } else {
                format!(
                    "{} datagrams on the request path and {} on the reply path lost where no counter saw them",
                    f.unattributed.unwrap_or(0),
                    f.reply_unattributed.unwrap_or(0)
                )
            },
            "ledger: attempted minus every counted layer",
        ));
    if unknown {
        d.recs.push(Recommendation {
            what: "run diagnose where the server's socket can be seen".into(),
            why: "without the server's socket counters the loss cannot be placed".into(),
            lines: vec!["tpslab diagnose udp HOST:PORT --pid PID_OF_THE_SERVER".into()],
        });
    }
    (
        "unknown (no counter explains the loss)".to_string(),
        "Datagrams were lost where no kernel counter saw them.".to_string(),
    )
}
