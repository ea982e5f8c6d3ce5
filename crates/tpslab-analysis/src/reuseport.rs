//! A SO_REUSEPORT group's balance: the kernel hashes each flow (source address and port)
//! to one socket of the group, so a load of a few flows can leave some sockets idle while
//! others fill and drop. Pure functions of the per-socket facts
//! ([`tpslab_record::verdict::GroupSocket`]: reads from tpslab's own server, drops and
//! deepest queue from `/proc/net/udp`).

use tpslab_record::verdict::{GroupSocket, Steer};

/// How uneven a group was, when it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Imbalance {
    /// Sockets in the group.
    pub sockets: usize,
    /// Sockets that read nothing (only when reads were counted).
    pub idle: usize,
    /// The busiest socket's share of the group's reads, percent (only when reads were
    /// counted).
    pub busiest_pct: Option<f64>,
    /// Sockets that dropped datagrams.
    pub dropping: usize,
    /// Drops of the whole group.
    pub drops: u64,
    /// Sockets that had room while others dropped: no drops and a queue never above half
    /// their limit (never above zero when the limit is unknown).
    pub spare: usize,
    /// Flows the generator sent, when known.
    pub flows: Option<usize>,
    /// How tpslab's server spread datagrams (hash for a foreign server).
    pub steer: Steer,
    /// Whether every socket's limit was known (room judged against half of it; else only a
    /// queue that stayed empty counts as room).
    pub limits_known: bool,
}

/// A socket reading less than this multiple of the group's mean makes the group uneven
/// (a load with enough flows keeps every socket within about ±20 % of the mean; a finding
/// needs a clear departure).
const LOW_SHARE: f64 = 0.5;
/// A socket reading more than this multiple of the group's mean makes the group uneven.
const HIGH_SHARE: f64 = 1.5;

/// The group's imbalance, or None when it has fewer than two sockets, nothing was read or
/// dropped, the sockets were even (every socket's reads within [0.5, 1.5] x the mean;
/// without reads: drops in every socket, or none with room), or datagrams were spread at
/// random (`--reuseport-steer random`: unevenness is then not the group's doing).
pub fn judge(group: &[GroupSocket], flows: Option<usize>, steer: Steer) -> Option<Imbalance> {
    let n = group.len();
    if n < 2 || steer == Steer::Random {
        return None;
    }
    let reads: Option<Vec<u64>> = group.iter().map(|s| s.reads).collect();
    let drops: u64 = group.iter().map(|s| s.drops).sum();
    let dropping = group.iter().filter(|s| s.drops > 0).count();
    let had_room = |s: &GroupSocket| {
        s.drops == 0
            && match s.rcvbuf_bytes.filter(|&l| l > 0) {
                Some(limit) => s.rx_queue_max_bytes * 2 <= limit,
                None => s.rx_queue_max_bytes == 0,
            }
    };
    let mut out = Imbalance {
        sockets: n,
        idle: 0,
        busiest_pct: None,
        dropping,
        drops,
        spare: 0,
        flows,
        steer,
        limits_known: group.iter().all(|s| s.rcvbuf_bytes.is_some_and(|l| l > 0)),
    };
    match reads {
        Some(r) => {
            let total: u64 = r.iter().sum();
            if total == 0 {
                return None;
            }
            let mean = total as f64 / n as f64;
            let low = |x: u64| (x as f64) < LOW_SHARE * mean;
            let uneven = r.iter().any(|&x| low(x) || x as f64 > HIGH_SHARE * mean);
            if !uneven {
                return None;
            }
            out.idle = r.iter().filter(|&&x| x == 0).count();
            out.busiest_pct = r.iter().max().map(|&m| 100.0 * m as f64 / total as f64);
            out.spare = group.iter().filter(|s| had_room(s)).count();
        }
        None => {
            // Without reads only drops and queues speak: some sockets dropped while
            // others never came near their limit.
            out.spare = group.iter().filter(|s| had_room(s)).count();
            if dropping == 0 || out.spare == 0 {
                return None;
            }
        }
    }
    Some(out)
}

impl Imbalance {
    /// Whether the imbalance explains the group's drops: some sockets dropped while others
    /// had room (more buffer on every socket is then not the fix; spreading the load is).
    pub fn explains_drops(&self) -> bool {
        self.drops > 0 && self.dropping > 0 && self.spare > 0
    }

    /// One sentence: what was uneven, and why (the flow count when known).
    pub fn sentence(&self) -> String {
        let n = self.sockets;
        let room = if self.limits_known {
            "no drops, queue below half the limit"
        } else {
            "no drops, queue never above 0"
        };
        let what = match self.busiest_pct {
            Some(b) if self.idle > 0 => format!(
                "{} of its {n} sockets read nothing and the busiest read {b:.0} % of the datagrams",
                self.idle
            ),
            Some(b) => format!(
                "its {n} sockets read unevenly: the busiest read {b:.0} % of the datagrams ({:.0} % each if even)",
                100.0 / n as f64
            ),
            None => format!(
                "{} of its {n} sockets dropped {} datagrams while {} had room ({room})",
                self.dropping, self.drops, self.spare
            ),
        };
        let why = match (self.steer, self.flows) {
            (Steer::Cpu, _) => "; each datagram went to the socket of the CPU that received it (--reuseport-steer cpu), so sockets of CPUs that received nothing stay idle".to_string(),
            (_, Some(f)) if f < 4 * n => format!(
                "; the load came in {f} flow{} and SO_REUSEPORT hashes each flow (source address and port) to one socket",
                if f == 1 { "" } else { "s" }
            ),
            _ => "; SO_REUSEPORT hashes each flow (source address and port) to one socket, unless the server attached a BPF program of its own".into(),
        };
        format!("the server's SO_REUSEPORT group is uneven: {what}{why}")
    }

    /// The fixes, in the order to try them: more flows, steering by CPU, a reuseport BPF
    /// program; each a line for the user's server and tpslab's own.
    pub fn fixes(&self) -> Vec<String> {
        let random = "spread per datagram: a reuseport BPF program that returns a random socket (SKF_AD_RANDOM; order within a flow is no longer kept) (tpslab: serve udp --reuseport-steer random)".to_string();
        if self.steer == Steer::Cpu {
            return vec![
                "spread the receive work over as many CPUs as the group has sockets: RSS queues on the NIC, or RPS (/sys/class/net/DEV/queues/rx-N/rps_cpus)".into(),
                random,
            ];
        }
        vec![
            format!(
                "more flows from the clients: more source ports (sockets) per client, {} or more in all (4 per server socket: a hash of 4n flows over n sockets leaves about 2 % of them idle, of n flows 37 %) (tpslab: load udp --flows N sends from N ports; 32 by default)",
                4 * self.sockets
            ),
            "steer by CPU: a reuseport BPF program that returns the receiving CPU (SO_ATTACH_REUSEPORT_CBPF with SKF_AD_CPU), one socket per CPU, with RSS/RPS spreading packets over the CPUs (tpslab: serve udp --reuseport-steer cpu)".into(),
            format!("or {random}"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(reads: Option<u64>, drops: u64, q: u64, limit: Option<u64>) -> GroupSocket {
        GroupSocket {
            reads,
            drops,
            rx_queue_max_bytes: q,
            rcvbuf_bytes: limit,
        }
    }

    #[test]
    fn one_socket_or_nothing_read_is_no_finding() {
        assert_eq!(
            judge(&[s(Some(10), 5, 100, None)], Some(1), Steer::Hash),
            None
        );
        assert_eq!(
            judge(
                &[s(Some(0), 0, 0, None), s(Some(0), 0, 0, None)],
                Some(1),
                Steer::Hash
            ),
            None
        );
    }

    #[test]
    fn even_reads_are_no_finding() {
        let g = [
            s(Some(1000), 0, 10, None),
            s(Some(1200), 0, 10, None),
            s(Some(900), 0, 10, None),
            s(Some(1100), 0, 10, None),
        ];
        assert_eq!(judge(&g, Some(16), Steer::Hash), None);
    }

    #[test]
    fn idle_sockets_beside_a_dropping_one_explain_its_drops() {
        // The 4-sender case: [1834112, 0, 4987889, 0].
        let g = [
            s(Some(1_834_112), 0, 1000, Some(425_984)),
            s(Some(0), 0, 0, Some(425_984)),
            s(Some(4_987_889), 7000, 425_000, Some(425_984)),
            s(Some(0), 0, 0, Some(425_984)),
        ];
        let i = judge(&g, Some(4), Steer::Hash).unwrap();
        assert_eq!((i.idle, i.dropping, i.spare, i.drops), (2, 1, 3, 7000));
        assert!((i.busiest_pct.unwrap() - 73.1).abs() < 0.1);
        assert!(i.explains_drops());
        let line = i.sentence();
        assert!(line.contains("2 of its 4 sockets read nothing"), "{line}");
        assert!(line.contains("busiest read 73 %"), "{line}");
        assert!(line.contains("4 flows"), "{line}");
    }

    #[test]
    fn uneven_without_drops_is_said_but_explains_nothing() {
        let g = [s(Some(100), 0, 0, None), s(Some(0), 0, 0, None)];
        let i = judge(&g, Some(1), Steer::Hash).unwrap();
        assert!(!i.explains_drops());
        assert!(i.sentence().contains("1 flow and"), "{}", i.sentence());
    }

    #[test]
    fn every_socket_dropping_is_not_an_imbalance_of_room() {
        // Uneven reads, but every socket dropped: all were full, so more buffer or more
        // readers, not only spreading.
        let g = [
            s(Some(400), 10, 9000, Some(10_000)),
            s(Some(100), 50, 9000, Some(10_000)),
        ];
        let i = judge(&g, Some(2), Steer::Hash).unwrap();
        assert_eq!(i.spare, 0);
        assert!(!i.explains_drops());
    }

    #[test]
    fn without_reads_drops_beside_room_are_an_imbalance() {
        let g = [
            s(None, 500, 212_000, Some(212_992)),
            s(None, 0, 4_000, Some(212_992)),
            s(None, 0, 0, None),
        ];
        let i = judge(&g, None, Steer::Hash).unwrap();
        assert_eq!((i.dropping, i.spare, i.busiest_pct), (1, 2, None));
        assert!(i.explains_drops());
        assert!(i
            .sentence()
            .contains("1 of its 3 sockets dropped 500 datagrams while 2 had room"));
        // A socket whose queue reached more than half its limit had no room.
        let g = [
            s(None, 500, 212_000, Some(212_992)),
            s(None, 0, 150_000, Some(212_992)),
        ];
        assert_eq!(judge(&g, None, Steer::Hash), None);
        // Nothing dropped: nothing to say without reads.
        let g = [s(None, 0, 0, None), s(None, 0, 0, None)];
        assert_eq!(judge(&g, None, Steer::Hash), None);
    }

    #[test]
    fn steering_changes_what_is_said_or_silences_it() {
        let g = [
            s(Some(24_000), 300, 200_000, Some(212_992)),
            s(Some(0), 0, 0, Some(212_992)),
            s(Some(0), 0, 0, Some(212_992)),
            s(Some(0), 0, 0, Some(212_992)),
        ];
        // Random steering: unevenness is not the group's doing.
        assert_eq!(judge(&g, Some(2), Steer::Random), None);
        // By CPU: the CPUs that received, not the flows, and no "more flows" fix.
        let i = judge(&g, Some(2), Steer::Cpu).unwrap();
        assert!(
            i.sentence().contains("CPU that received it"),
            "{}",
            i.sentence()
        );
        assert!(!i.sentence().contains("flow"), "{}", i.sentence());
        assert!(i.fixes()[0].contains("RPS"), "{:?}", i.fixes());
        assert!(!i.fixes().iter().any(|f| f.contains("more flows")));
        // Hash: the flows.
        let i = judge(&g, Some(2), Steer::Hash).unwrap();
        assert!(i.fixes()[0].contains("more flows"), "{:?}", i.fixes());
        // Without known limits, room is an empty queue, and the sentence says so.
        let g = [s(None, 500, 9_000, None), s(None, 0, 0, None)];
        let i = judge(&g, None, Steer::Hash).unwrap();
        assert!(
            i.sentence().contains("queue never above 0"),
            "{}",
            i.sentence()
        );
    }
}
