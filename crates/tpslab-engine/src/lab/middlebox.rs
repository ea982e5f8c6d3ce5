//! The lab's middlebox: a flow table that forgets idle flows, like the proxies, load
//! balancers, firewalls and NATs of S5. A flow (protocol and both ends) idle for longer
//! than the timeout is forgotten; a later TCP segment of it that is not a SYN is dropped
//! silently or answered with a RST in both directions; a UDP datagram of a forgotten
//! mapping from the far side (B) is dropped. With [`OnIdle::Fin`] the table ends a TCP
//! flow itself when it times out ([`FlowTable::expire`]: a FIN to both ends, as a proxy's
//! idle timeout does). What counts as activity is its [`IdleTimer`]: every packet, only
//! payload, or only the near side's payload. Flows are created by a TCP SYN (either side)
//! or a UDP datagram from the near side (A). IPv4 only (the delay line's addresses).

use std::collections::HashMap;
use std::net::Ipv4Addr;

use tpslab_plan::tcp::{IdleTimer, OnIdle};

/// A flow: protocol, then the near side's (A) address and port, then the far side's.
type FlowKey = (u8, Ipv4Addr, u16, Ipv4Addr, u16);

/// The most flows remembered at once; beyond it new flows are refused (dropped).
pub const MAX_FLOWS: usize = 65_536;

/// What happens to a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Forwarded.
    Pass,
    /// Dropped silently (a forgotten flow, or a table full).
    Drop,
    /// Dropped, and these RSTs are written: to the sender (back into the TUN the packet
    /// came from) and to the receiver (on to the other side).
    Reset {
        /// RST for the packet's sender.
        to_sender: Vec<u8>,
        /// RSTs for the packet's receiver, in order (one of them carries exactly the
        /// sequence number it expects).
        to_receiver: Vec<Vec<u8>>,
    },
}

/// The fields of an IPv4 TCP or UDP packet the table needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packet {
    proto: u8,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    /// TCP only: sequence and acknowledgement numbers, flags, payload length.
    seq: u32,
    ack: u32,
    flags: u8,
    payload: u32,
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;
const TCP: u8 = 6;
const UDP: u8 = 17;

fn parse(p: &[u8]) -> Option<Packet> {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return None;
    }
    // A fragment after the first has no ports: it passes.
    if u16::from_be_bytes([p[6], p[7]]) & 0x1fff != 0 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len());
    let proto = p[9];
    let l4 = p.get(ihl..total)?;
    let ip = |o: usize| Ipv4Addr::new(p[o], p[o + 1], p[o + 2], p[o + 3]);
    let be16 = |o: usize| u16::from_be_bytes([l4[o], l4[o + 1]]);
    let be32 = |o: usize| u32::from_be_bytes([l4[o], l4[o + 1], l4[o + 2], l4[o + 3]]);
    let mut pk = Packet {
        proto,
        src: ip(12),
        dst: ip(16),
        sport: 0,
        dport: 0,
        seq: 0,
        ack: 0,
        flags: 0,
        payload: 0,
    };
    match proto {
        TCP if l4.len() >= 20 => {
            let off = usize::from(l4[12] >> 4) * 4;
            pk.sport = be16(0);
            pk.dport = be16(2);
            pk.seq = be32(4);
            pk.ack = be32(8);
            pk.flags = l4[13];
            pk.payload = l4.len().saturating_sub(off) as u32;
            Some(pk)
        }
        UDP if l4.len() >= 8 => {
            pk.sport = be16(0);
            pk.dport = be16(2);
            Some(pk)
        }
        _ => None,
    }
}

/// The Internet checksum of `data` added to `sum`.
fn checksum(mut sum: u32, data: &[u8]) -> u16 {
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A 40-byte IPv4 TCP segment with no payload and both checksums.
fn segment(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&40u16.to_be_bytes());
    p[6] = 0x40; // DF
    p[8] = 64;
    p[9] = TCP;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let c = checksum(0, &p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&src.octets());
    pseudo[4..8].copy_from_slice(&dst.octets());
    pseudo[9] = TCP;
    pseudo[10..12].copy_from_slice(&20u16.to_be_bytes());
    let sum: u32 = pseudo
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let c = checksum(sum, &p[20..]);
    p[36..38].copy_from_slice(&c.to_be_bytes());
    p
}

/// The RSTs that end the flow of `pk` on both ends. The sender's: sequence = the
/// packet's ACK (what the sender expects us to use), else an ACK of what it sent. The
/// receiver's must carry exactly the sequence number it expects (RFC 5961: an inexact RST
/// only draws a challenge ACK): the packet's own for data and FIN; for a segment with
/// neither it is the packet's + 1 for a keepalive probe (which carries snd_una - 1) or the
/// packet's for a pure ACK: both are sent, + 1 first (the receiver ignores the other once
/// reset).
fn resets(pk: &Packet) -> (Vec<u8>, Vec<Vec<u8>>) {
    let to_sender = if pk.flags & ACK != 0 {
        segment(pk.dst, pk.src, pk.dport, pk.sport, pk.ack, 0, RST)
    } else {
        let len = pk.payload + u32::from(pk.flags & (SYN | FIN) != 0);
        segment(
            pk.dst,
            pk.src,
            pk.dport,
            pk.sport,
            0,
            pk.seq.wrapping_add(len),
            RST | ACK,
        )
    };
    let rst = |seq: u32| segment(pk.src, pk.dst, pk.sport, pk.dport, seq, 0, RST);
    let to_receiver = if pk.payload == 0 && pk.flags & FIN == 0 {
        vec![rst(pk.seq.wrapping_add(1)), rst(pk.seq)]
    } else {
        vec![rst(pk.seq)]
    };
    (to_sender, to_receiver)
}

/// One flow the table knows.
#[derive(Debug, Clone, Copy)]
struct Flow {
    /// When activity (as the table's [`IdleTimer`] counts it) was last seen, ns.
    last_ns: u64,
    /// The acknowledgement number of the latest TCP segment from the near side (A) with
    /// ACK set: what A expects from B next (None: none seen).
    ack_from_a: Option<u32>,
    /// The same from the far side (B): what B expects from A next.
    ack_from_b: Option<u32>,
}

/// Flows seen, with when each was last active (ns).
#[derive(Debug)]
pub struct FlowTable {
    timeout_ns: u64,
    on_idle: OnIdle,
    timer: IdleTimer,
    flows: HashMap<FlowKey, Flow>,
}

/// A FIN (with ACK) the table writes when it ends a flow ([`FlowTable::expire`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// The segment, IPv4 with both checksums.
    pub packet: Vec<u8>,
    /// Addressed to the near side (A; else the far side, B).
    pub to_a: bool,
}

impl FlowTable {
    /// A table that forgets flows idle for more than `timeout_ns`; every packet resets
    /// a flow's timer ([`FlowTable::with_timer`] for others).
    pub fn new(timeout_ns: u64, on_idle: OnIdle) -> FlowTable {
        FlowTable {
            timeout_ns,
            on_idle,
            timer: IdleTimer::Any,
            flows: HashMap::new(),
        }
    }

    /// The same table with `timer` deciding what resets a flow's idle timer.
    pub fn with_timer(mut self, timer: IdleTimer) -> FlowTable {
        self.timer = timer;
        self
    }

    /// Flows remembered now.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether no flow is remembered.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Whether `pk` (from the near side if `from_a`) resets its flow's idle timer.
    fn counts(&self, pk: &Packet, from_a: bool) -> bool {
        let payload = pk.proto != TCP || pk.payload > 0;
        match self.timer {
            IdleTimer::Any => true,
            IdleTimer::Payload => payload,
            IdleTimer::NearPayload => payload && from_a,
        }
    }

    /// What happens to `packet` arriving at `now_ns` from the near side (`from_a`) or the
    /// far side. Packets that are not IPv4 TCP or UDP pass.
    pub fn judge(&mut self, packet: &[u8], from_a: bool, now_ns: u64) -> Verdict {
        let Some(pk) = parse(packet) else {
            return Verdict::Pass;
        };
        let key = if from_a {
            (pk.proto, pk.src, pk.sport, pk.dst, pk.dport)
        } else {
            (pk.proto, pk.dst, pk.dport, pk.src, pk.sport)
        };
        let counts = self.counts(&pk, from_a);
        if let Some(flow) = self.flows.get_mut(&key) {
            if now_ns.saturating_sub(flow.last_ns) <= self.timeout_ns {
                if counts {
                    flow.last_ns = now_ns;
                }
                if pk.proto == TCP && pk.flags & ACK != 0 {
                    *if from_a {
                        &mut flow.ack_from_a
                    } else {
                        &mut flow.ack_from_b
                    } = Some(pk.ack);
                }
                return Verdict::Pass;
            }
            self.flows.remove(&key);
        }
        let opens = match pk.proto {
            TCP => {
                (pk.flags & SYN != 0 && pk.flags & ACK == 0)
                    || (from_a && self.on_idle == OnIdle::Reopen && pk.flags & RST == 0)
            }
            _ => from_a,
        };
        if opens {
            if self.flows.len() >= MAX_FLOWS {
                let t = self.timeout_ns;
                self.flows
                    .retain(|_, f| now_ns.saturating_sub(f.last_ns) <= t);
                if self.flows.len() >= MAX_FLOWS {
                    return Verdict::Drop;
                }
            }
            let ack = (pk.proto == TCP && pk.flags & ACK != 0).then_some(pk.ack);
            self.flows.insert(
                key,
                Flow {
                    last_ns: now_ns,
                    ack_from_a: ack.filter(|_| from_a),
                    ack_from_b: ack.filter(|_| !from_a),
                },
            );
            return Verdict::Pass;
        }
        match self.on_idle {
            OnIdle::Reset if pk.proto == TCP && pk.flags & RST == 0 => {
                let (to_sender, to_receiver) = resets(&pk);
                Verdict::Reset {
                    to_sender,
                    to_receiver,
                }
            }
            _ => Verdict::Drop,
        }
    }

    /// With [`OnIdle::Fin`]: ends the flows idle for longer than the timeout at `now_ns`
    /// and returns the FINs to write, to each end of each TCP flow whose other end's
    /// acknowledgement was seen (its sequence number is then exactly what that end
    /// expects). Other modes forget flows only when their next packet comes: nothing.
    pub fn expire(&mut self, now_ns: u64) -> Vec<Ending> {
        if self.on_idle != OnIdle::Fin {
            return vec![];
        }
        let t = self.timeout_ns;
        let mut out = vec![];
        self.flows.retain(|&(proto, a, aport, b, bport), f| {
            if now_ns.saturating_sub(f.last_ns) <= t {
                return true;
            }
            if proto == TCP {
                if let (Some(aa), Some(ab)) = (f.ack_from_a, f.ack_from_b) {
                    // To A from B: B's next sequence number is what A acknowledged.
                    out.push(Ending {
                        packet: segment(b, a, bport, aport, aa, ab, FIN | ACK),
                        to_a: true,
                    });
                    out.push(Ending {
                        packet: segment(a, b, aport, bport, ab, aa, FIN | ACK),
                        to_a: false,
                    });
                }
            }
            false
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

    fn tcp(from_a: bool, seq: u32, ack: u32, flags: u8) -> Vec<u8> {
        if from_a {
            segment(A, B, 40000, 9000, seq, ack, flags)
        } else {
            segment(B, A, 9000, 40000, seq, ack, flags)
        }
    }

    fn udp(from_a: bool) -> Vec<u8> {
        let mut p = tcp(from_a, 0, 0, 0);
        p[9] = UDP;
        p.truncate(28);
        p[2..4].copy_from_slice(&28u16.to_be_bytes());
        p
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_flow_idle_past_the_timeout_is_forgotten() {
        let mut t = FlowTable::new(20 * S, OnIdle::Drop);
        // Not a SYN: an unknown flow.
        assert_eq!(t.judge(&tcp(true, 1, 1, ACK), true, 0), Verdict::Drop);
        assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        assert_eq!(
            t.judge(&tcp(false, 500, 101, SYN | ACK), false, S),
            Verdict::Pass
        );
        assert_eq!(t.judge(&tcp(true, 101, 501, ACK), true, S), Verdict::Pass);
        // Idle exactly the timeout: still known; each packet refreshes it.
        assert_eq!(
            t.judge(&tcp(true, 100, 501, ACK), true, 21 * S),
            Verdict::Pass
        );
        assert_eq!(
            t.judge(&tcp(false, 501, 101, ACK), false, 41 * S),
            Verdict::Pass
        );
        // Idle longer: forgotten, both directions.
        assert_eq!(
            t.judge(&tcp(true, 100, 501, ACK), true, 61 * S + 1),
            Verdict::Drop
        );
        assert_eq!(
            t.judge(&tcp(false, 501, 101, ACK), false, 61 * S + 2),
            Verdict::Drop
        );
        assert!(t.is_empty());
        // A new connection with the same ends opens it again.
        assert_eq!(t.judge(&tcp(true, 7, 0, SYN), true, 62 * S), Verdict::Pass);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn reset_mode_answers_both_ends_with_exact_sequence_numbers() {
        let mut t = FlowTable::new(S, OnIdle::Reset);
        assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        // A's keepalive probe after 5 s: seq = snd_una - 1 = 100, no payload, ACK 501.
        let Verdict::Reset {
            to_sender,
            to_receiver,
        } = t.judge(&tcp(true, 100, 501, ACK), true, 5 * S)
        else {
            panic!("a reset");
        };
        let s = parse(&to_sender).unwrap();
        assert_eq!((s.src, s.dst, s.sport, s.dport), (B, A, 9000, 40000));
        assert_eq!((s.seq, s.flags), (501, RST), "A expects 501 from B");
        let r = parse(&to_receiver[0]).unwrap();
        assert_eq!((r.src, r.dst, r.sport, r.dport), (A, B, 40000, 9000));
        assert_eq!(
            (r.seq, r.flags),
            (101, RST),
            "B expects 101 from A after a probe"
        );
        assert_eq!(
            parse(&to_receiver[1]).unwrap().seq,
            100,
            "or 100 after a pure ACK"
        );
        // A FIN carries exactly what the receiver expects.
        let Verdict::Reset {
            to_receiver: fin, ..
        } = t.judge(&tcp(true, 101, 501, FIN | ACK), true, 10 * S)
        else {
            panic!("a reset");
        };
        assert_eq!(fin.len(), 1);
        assert_eq!(parse(&fin[0]).unwrap().seq, 101);
        // Both are valid IPv4 and TCP checksums (the sum over each, with the pseudo
        // header for TCP, folds to zero).
        for p in [&to_sender, &to_receiver[0], &to_receiver[1]] {
            assert_eq!(checksum(0, &p[..20]), 0);
            let mut pseudo = p[12..20].to_vec();
            pseudo.extend_from_slice(&[0, TCP, 0, 20]);
            let sum: u32 = pseudo
                .chunks(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .sum();
            assert_eq!(checksum(sum, &p[20..]), 0);
        }
        // A RST of a forgotten flow is not answered.
        assert_eq!(t.judge(&tcp(true, 101, 0, RST), true, 6 * S), Verdict::Drop);
    }

    #[test]
    fn reopen_mode_lets_the_near_side_pick_a_flow_up_again() {
        let mut t = FlowTable::new(S, OnIdle::Reopen);
        assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        // Forgotten: the far side's probe is dropped; the near side's opens it again.
        assert_eq!(
            t.judge(&tcp(false, 500, 101, ACK), false, 5 * S),
            Verdict::Drop
        );
        assert_eq!(
            t.judge(&tcp(true, 100, 501, ACK), true, 6 * S),
            Verdict::Pass
        );
        assert_eq!(
            t.judge(&tcp(false, 501, 101, ACK), false, 6 * S),
            Verdict::Pass
        );
    }

    #[test]
    fn udp_mappings_open_from_the_near_side_only() {
        let mut t = FlowTable::new(30 * S, OnIdle::Reset);
        assert_eq!(
            t.judge(&udp(false), false, 0),
            Verdict::Drop,
            "no mapping yet"
        );
        assert_eq!(t.judge(&udp(true), true, 0), Verdict::Pass);
        assert_eq!(t.judge(&udp(false), false, 29 * S), Verdict::Pass);
        assert_eq!(
            t.judge(&udp(false), false, 60 * S),
            Verdict::Drop,
            "UDP is never reset"
        );
        // Anything else passes untouched.
        assert_eq!(t.judge(&[0x60, 0, 0, 0], true, 0), Verdict::Pass);
        assert_eq!(t.judge(&[], true, 0), Verdict::Pass);
    }

    #[test]
    fn a_payload_timer_ignores_keepalive_and_bare_acks() {
        let data = |from_a: bool, seq: u32, ack: u32| {
            let mut p = tcp(from_a, seq, ack, ACK);
            p.extend_from_slice(b"x");
            p[2..4].copy_from_slice(&41u16.to_be_bytes());
            p
        };
        for timer in [IdleTimer::Payload, IdleTimer::NearPayload] {
            let mut t = FlowTable::new(2 * S, OnIdle::Drop).with_timer(timer);
            assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
            // Keepalive probes and bare ACKs pass while the flow is known, but do not
            // keep it: idle since its SYN at 0, it is forgotten after 2 s.
            assert_eq!(t.judge(&tcp(true, 100, 501, ACK), true, S), Verdict::Pass);
            assert_eq!(
                t.judge(&tcp(false, 500, 101, ACK), false, 2 * S),
                Verdict::Pass
            );
            assert_eq!(
                t.judge(&tcp(true, 100, 501, ACK), true, 2 * S + 1),
                Verdict::Drop,
                "{timer:?}"
            );
            // Payload from the near side counts for both.
            assert_eq!(t.judge(&tcp(true, 7, 0, SYN), true, 10 * S), Verdict::Pass);
            assert_eq!(t.judge(&data(true, 8, 1), true, 11 * S), Verdict::Pass);
            assert_eq!(t.judge(&tcp(true, 9, 1, ACK), true, 12 * S), Verdict::Pass);
            // Payload from the far side only for `Payload`.
            assert_eq!(t.judge(&data(false, 1, 9), false, 13 * S), Verdict::Pass);
            let far_counts = t.judge(&tcp(true, 9, 2, ACK), true, 14 * S + S / 2) == Verdict::Pass;
            assert_eq!(far_counts, timer == IdleTimer::Payload, "{timer:?}");
        }
        // Any packet counts for `Any`: a keepalive every second keeps the flow.
        let mut t = FlowTable::new(2 * S, OnIdle::Drop);
        assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        for i in 1..10 {
            assert_eq!(
                t.judge(&tcp(true, 100, 501, ACK), true, i * S),
                Verdict::Pass
            );
        }
    }

    #[test]
    fn fin_mode_ends_a_timed_out_flow_on_both_ends_with_exact_numbers() {
        let mut t = FlowTable::new(2 * S, OnIdle::Fin).with_timer(IdleTimer::Payload);
        assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        assert_eq!(
            t.judge(&tcp(false, 500, 101, SYN | ACK), false, 0),
            Verdict::Pass
        );
        assert_eq!(t.judge(&tcp(true, 101, 501, ACK), true, 0), Verdict::Pass);
        // Not yet: idle exactly the timeout; keepalive (no payload) does not count.
        assert_eq!(t.judge(&tcp(true, 100, 501, ACK), true, S), Verdict::Pass);
        assert!(t.expire(2 * S).is_empty());
        let ends = t.expire(2 * S + 1);
        assert_eq!(ends.len(), 2);
        assert!(t.is_empty());
        let to_a = ends.iter().find(|e| e.to_a).unwrap();
        let p = parse(&to_a.packet).unwrap();
        assert_eq!((p.src, p.dst, p.sport, p.dport), (B, A, 9000, 40000));
        assert_eq!(
            (p.seq, p.ack, p.flags),
            (501, 101, FIN | ACK),
            "A expects 501 from B; B had 101 from A"
        );
        let to_b = ends.iter().find(|e| !e.to_a).unwrap();
        let p = parse(&to_b.packet).unwrap();
        assert_eq!((p.src, p.dst, p.sport, p.dport), (A, B, 40000, 9000));
        assert_eq!((p.seq, p.ack, p.flags), (101, 501, FIN | ACK));
        // The ends' answers (ACKs of the FINs) belong to a flow ended: dropped.
        assert_eq!(
            t.judge(&tcp(true, 101, 502, ACK), true, 3 * S),
            Verdict::Drop
        );
        // Other modes end nothing by themselves.
        let mut d = FlowTable::new(S, OnIdle::Reset);
        assert_eq!(d.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        assert!(d.expire(10 * S).is_empty());
        assert_eq!(d.len(), 1);
    }
}
