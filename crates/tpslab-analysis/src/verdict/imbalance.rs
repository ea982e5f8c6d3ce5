//! [`super::Case::ReuseportImbalance`]: drops at some sockets of a SO_REUSEPORT group
//! while others had room ([`crate::reuseport`]): uneven hashing, or a slow reader.

use super::explain::{self as x, Draft};
use super::words::{ev, pct, rxq};
use crate::reuseport::{reader_name, Imbalance, Kind};
use tpslab_record::verdict::{Facts, Recommendation};

/// Where the per-socket figures come from.
pub(super) const SOURCE: &str = "per socket of the group: drops and deepest rx_queue from <net_root>/net/udp{,6} at every sample; reads: tpslab's server's count per thread (one socket each), or a foreign server's: the exact UDP reads (tracepoint sock:sock_recv_length) of the threads of the process holding that socket alone (/proc/PID/fd); offered: read + dropped; its reader's waits: /proc/TID/task/TID/stat, syscall and wchan every 100 ms; limit: each socket's own SO_RCVBUF (sock_diag SK_MEMINFO_RCVBUF)";

/// The group's sockets one by one: who read it (when known), offered and share (when
/// reads are known), reads, drops, deepest queue and its limit (when known).
fn per_socket(f: &Facts, i: &Imbalance) -> String {
    f.group
        .iter()
        .zip(&i.figures)
        .map(|(s, fig)| {
            let who = s
                .reader
                .as_ref()
                .map_or(String::new(), |r| format!("{}: ", reader_name(r)));
            let offered = match (fig.offered, fig.share_pct) {
                (Some(o), Some(sh)) => format!("{o} offered ({sh:.0} %), "),
                _ => String::new(),
            };
            let reads = s.reads.map_or(String::new(), |r| format!("{r} read, "));
            let limit = s
                .rcvbuf_bytes
                .map_or(String::new(), |l| format!(" of {l} B"));
            format!(
                "{who}{offered}{reads}{} dropped, queue max {} B{limit}",
                s.drops, s.rx_queue_max_bytes
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The run's length as the generator offered it, seconds (attempted / offered rate);
/// None without a rate.
fn offered_s(f: &Facts) -> Option<f64> {
    (f.offered_pps > 0.0).then(|| f.attempted as f64 / f.offered_pps)
}

pub(super) fn reuseport_imbalance(f: &Facts, d: &mut Draft) -> (String, String) {
    let Some(i) = crate::reuseport::judge(&f.group, f.flows, f.steer) else {
        // The rule checked it; should the facts disagree, the plain buffer case speaks.
        return x::socket_buffer_bursts(f, d);
    };
    d.evidence.push(ev(i.sentence(), SOURCE));
    d.evidence.push(ev(
        format!("sockets of the group: {}", per_socket(f, &i)),
        SOURCE,
    ));
    d.evidence.push(rxq(f));
    if let Kind::SlowReader { sockets } = &i.kind {
        return slow_reader(f, d, &i, sockets);
    }
    d.recs.push(Recommendation {
        what: "spread the load over the group's sockets before adding buffer or threads".into(),
        why: format!(
            "{} of {} sockets dropped while {} had room, and the server had CPU to spare: the group as a whole had buffer and readers enough, but {}",
            i.dropping,
            i.sockets,
            i.spare,
            match i.steer {
                tpslab_plan::udp::Steer::Cpu => "each datagram went to the socket of the CPU that received it, and few CPUs received",
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

/// A slow reader: the worker is the fix, named by its PID and where it waited.
fn slow_reader(f: &Facts, d: &mut Draft, i: &Imbalance, sockets: &[usize]) -> (String, String) {
    let names = i.slow_names();
    let rates: Vec<String> = sockets
        .iter()
        .filter_map(|&k| {
            let secs = offered_s(f)?;
            let s = &f.group[k];
            let offered = i.figures[k].offered?;
            Some(format!(
                "socket {} read {:.0} datagrams per second of the {:.0} it was offered",
                k + 1,
                s.reads? as f64 / secs,
                offered as f64 / secs
            ))
        })
        .collect();
    let slow_drops: u64 = sockets.iter().map(|&k| f.group[k].drops).sum();
    // One process's threads, a socket each: the reader is a thread, not a worker process.
    let threads = sockets
        .iter()
        .any(|&k| i.readers[k].as_ref().is_some_and(|r| !r.tids.is_empty()));
    let who = if threads { "reader" } else { "worker" };
    d.recs.push(Recommendation {
        what: format!("fix the slow {who} {names} before spreading the load or adding buffer"),
        why: format!(
            "its socket's share of the datagrams was no larger than an even one, yet it dropped {slow_drops} of them while the other workers, waiting for datagrams most of the run, kept up{}: the kernel hashes the same share to it whatever the flows, so more flows or steering do not help, and a larger buffer only delays the drops of a reader slower than its share",
            if rates.is_empty() {
                String::new()
            } else {
                format!(" ({})", rates.join("; "))
            }
        ),
        lines: i.fixes(),
    });
    let wait = sockets
        .first()
        .and_then(|&k| i.readers[k].as_ref())
        .and_then(crate::reuseport::reader_wait)
        .map_or(String::new(), |w| format!(", {w}"));
    (
        format!("the server's SO_REUSEPORT group (a slow reader: {names})"),
        format!(
            "Datagrams die at the receive buffer of {} of the server's {} SO_REUSEPORT sockets ({:.1} % of those attempted): its reader, {names}, drains less than its share{wait}, while the others kept up.",
            sockets.len(),
            i.sockets,
            pct(f.socket_drops, f.attempted),
        ),
    )
}
