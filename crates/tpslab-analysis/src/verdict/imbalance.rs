//! [`super::Case::ReuseportImbalance`]: drops at some sockets of a SO_REUSEPORT group
//! while others had room ([`crate::reuseport`]).

use super::explain::{self as x, Draft};
use super::words::{ev, pct, rxq};
use super::{Facts, Recommendation};

/// Where the per-socket figures come from.
pub(super) const SOURCE: &str = "per socket of the group: drops and deepest rx_queue from <net_root>/net/udp{,6} at every sample; reads: tpslab's server's count per thread (one socket each); limit: each socket's own SO_RCVBUF (sock_diag SK_MEMINFO_RCVBUF)";

/// The group's sockets one by one: reads (when counted), drops, deepest queue and its
/// limit (when known).
fn per_socket(f: &Facts) -> String {
    f.group
        .iter()
        .map(|s| {
            let reads = s.reads.map_or(String::new(), |r| format!("{r} read, "));
            let limit = s
                .rcvbuf_bytes
                .map_or(String::new(), |l| format!(" of {l} B"));
            format!(
                "{reads}{} dropped, queue max {} B{limit}",
                s.drops, s.rx_queue_max_bytes
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(super) fn reuseport_imbalance(f: &Facts, d: &mut Draft) -> (String, String) {
    let Some(i) = crate::reuseport::judge(&f.group, f.flows, f.steer) else {
        // The rule checked it; should the facts disagree, the plain buffer case speaks.
        return x::socket_buffer_bursts(f, d);
    };
    d.evidence.push(ev(i.sentence(), SOURCE));
    d.evidence.push(ev(
        format!("sockets of the group: {}", per_socket(f)),
        SOURCE,
    ));
    d.evidence.push(rxq(f));
    d.recs.push(Recommendation {
        what: "spread the load over the group's sockets before adding buffer or threads".into(),
        why: format!(
            "{} of {} sockets dropped while {} had room, and the server had CPU to spare: the group as a whole had buffer and readers enough, but {}",
            i.dropping,
            i.sockets,
            i.spare,
            match i.steer {
                tpslab_record::verdict::Steer::Cpu => "each datagram went to the socket of the CPU that received it, and few CPUs received",
                _ => "the kernel sends every datagram of a flow to the socket its hash picks",
            }
        ),
        lines: i.fixes(),
    });
    (
        "the server's SO_REUSEPORT group (uneven: flows hashed to a few sockets)".to_string(),
        format!(
            "Datagrams die at the receive buffer of {} of the server's {} SO_REUSEPORT sockets ({:.1} % of those attempted) while {} others had room: the load is not spread over the group.",
            i.dropping,
            i.sockets,
            pct(f.socket_drops, f.attempted),
            i.spare
        ),
    )
}
