//! HTTP/3's QUIC connections as a `load http --http3` run saw them: quinn's path
//! counters of each connection (`Connection::stats()`), read when the connection ended
//! (closed by either side, or at the run's end), summed over the run's connections; the
//! UDP datagrams and bytes counted at the client's sockets.

use serde::{Deserialize, Serialize};

/// The QUIC figures of a run's connections (quinn's `ConnectionStats`, read at each
/// connection's end): counts summed over every connection; round-trip time and
/// congestion window as each connection last had them, their smallest, mean and largest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QuicPaths {
    /// Connections whose figures are here (every connection whose handshake completed).
    pub connections: u64,
    /// UDP datagrams the client's sockets handed to the kernel, every endpoint's:
    /// handshakes that failed or timed out included, a GSO send counted by its datagrams.
    pub datagrams_sent: u64,
    /// UDP datagrams the client's sockets read (a GRO read counted by its datagrams).
    pub datagrams_received: u64,
    /// UDP payload bytes sent (QUIC packets: headers, frames and encryption included),
    /// counted at the sockets as the datagrams are.
    pub udp_bytes_sent: u64,
    /// UDP payload bytes received, counted at the sockets.
    pub udp_bytes_received: u64,
    /// QUIC packets sent (`path.sent_packets`).
    pub packets_sent: u64,
    /// Packets declared lost (`path.lost_packets`: by the ACKs that followed them, RFC
    /// 9002 6.1); their frames were sent again in new packets.
    pub packets_lost: u64,
    /// Bytes of the packets lost (`path.lost_bytes`).
    pub bytes_lost: u64,
    /// Congestion events (`path.congestion_events`: a loss or ECN-CE that cut the window).
    pub congestion_events: u64,
    /// Smoothed round-trip time at each connection's end, ns: the smallest.
    pub rtt_min_ns: u64,
    /// Their mean, ns.
    pub rtt_mean_ns: u64,
    /// Their largest, ns.
    pub rtt_max_ns: u64,
    /// Congestion window at each connection's end, bytes: the smallest.
    pub cwnd_min_bytes: u64,
    /// Their largest, bytes.
    pub cwnd_max_bytes: u64,
    /// Requests whose stream could not be opened at once: the server's MAX_STREAMS
    /// (RFC 9000 4.6) had no stream left on their connection, or, rarely, the
    /// connection's send window held the request's headers back (counted on the client:
    /// the request future was not ready when first polled). Absent in older records: 0.
    #[serde(default)]
    pub waited_for_stream: u64,
    /// The longest of those waits, ns (from asking for the stream to the request
    /// written).
    #[serde(default)]
    pub stream_wait_max_ns: u64,
}

impl QuicPaths {
    /// Adds the figures of `o` (one connection's, or a sum's): counts added, the RTT's
    /// mean weighted by connections, the bounds kept. The stream waits are added whatever
    /// the connections (a loop's sums may hold waits of connections that then failed).
    pub fn add_connection(&mut self, o: &QuicPaths) {
        let waits = (
            self.waited_for_stream.saturating_add(o.waited_for_stream),
            self.stream_wait_max_ns.max(o.stream_wait_max_ns),
        );
        let n = self.connections;
        let m = o.connections;
        if m != 0 && n == 0 {
            *self = *o;
        } else if m != 0 {
            self.add_paths(o, n, m);
        }
        (self.waited_for_stream, self.stream_wait_max_ns) = waits;
    }

    /// [`Self::add_connection`]'s sums of `o`'s `m` connections into these `n`.
    fn add_paths(&mut self, o: &QuicPaths, n: u64, m: u64) {
        self.rtt_mean_ns = ((self.rtt_mean_ns as u128 * n as u128
            + o.rtt_mean_ns as u128 * m as u128)
            / (n + m) as u128) as u64;
        self.rtt_min_ns = self.rtt_min_ns.min(o.rtt_min_ns);
        self.rtt_max_ns = self.rtt_max_ns.max(o.rtt_max_ns);
        self.cwnd_min_bytes = self.cwnd_min_bytes.min(o.cwnd_min_bytes);
        self.cwnd_max_bytes = self.cwnd_max_bytes.max(o.cwnd_max_bytes);
        self.connections += m;
        self.datagrams_sent += o.datagrams_sent;
        self.datagrams_received += o.datagrams_received;
        self.udp_bytes_sent += o.udp_bytes_sent;
        self.udp_bytes_received += o.udp_bytes_received;
        self.packets_sent += o.packets_sent;
        self.packets_lost += o.packets_lost;
        self.bytes_lost += o.bytes_lost;
        self.congestion_events += o.congestion_events;
    }

    /// Packets lost of those sent, percent (0 with none sent).
    pub fn loss_pct(&self) -> f64 {
        if self.packets_sent == 0 {
            return 0.0;
        }
        self.packets_lost as f64 * 100.0 / self.packets_sent as f64
    }
}

#[cfg(test)]
mod tests {
    use super::QuicPaths;

    fn one(rtt: u64, cwnd: u64, sent: u64, lost: u64) -> QuicPaths {
        QuicPaths {
            connections: 1,
            packets_sent: sent,
            packets_lost: lost,
            rtt_min_ns: rtt,
            rtt_mean_ns: rtt,
            rtt_max_ns: rtt,
            cwnd_min_bytes: cwnd,
            cwnd_max_bytes: cwnd,
            ..QuicPaths::default()
        }
    }

    /// Counts add; RTT's mean is over connections, its bounds and the window's are the
    /// extremes; a sum of none is taken whole by the first.
    #[test]
    fn connections_sum_counts_and_keep_rtt_and_window_bounds() {
        let mut s = QuicPaths::default();
        s.add_connection(&QuicPaths::default());
        assert_eq!(s, QuicPaths::default());
        s.add_connection(&one(100, 12_000, 10, 1));
        s.add_connection(&one(400, 30_000, 30, 0));
        let mut t = one(700, 9_000, 60, 3);
        t.add_connection(&one(100, 9_000, 0, 0));
        s.add_connection(&t);
        assert_eq!(s.connections, 4);
        assert_eq!((s.packets_sent, s.packets_lost), (100, 4));
        assert_eq!((s.rtt_min_ns, s.rtt_mean_ns, s.rtt_max_ns), (100, 325, 700));
        assert_eq!((s.cwnd_min_bytes, s.cwnd_max_bytes), (9_000, 30_000));
        assert!((s.loss_pct() - 4.0).abs() < 1e-9);
    }

    /// Stream waits add up (the longest kept) with or without connections on either side:
    /// a loop whose connections all failed still gives its waits.
    #[test]
    fn stream_waits_add_whatever_the_connections() {
        let waits = |n: u64, max: u64| QuicPaths {
            waited_for_stream: n,
            stream_wait_max_ns: max,
            ..QuicPaths::default()
        };
        let mut s = waits(2, 500);
        s.add_connection(&one(100, 12_000, 10, 1));
        assert_eq!((s.connections, s.packets_sent), (1, 10));
        assert_eq!((s.waited_for_stream, s.stream_wait_max_ns), (2, 500));
        s.add_connection(&waits(3, 900));
        assert_eq!(
            (s.connections, s.waited_for_stream, s.stream_wait_max_ns),
            (1, 5, 900)
        );
        let mut t = one(300, 9_000, 5, 0);
        t.waited_for_stream = 1;
        t.stream_wait_max_ns = 100;
        s.add_connection(&t);
        assert_eq!(
            (s.connections, s.waited_for_stream, s.stream_wait_max_ns),
            (2, 6, 900)
        );
        assert_eq!(s.rtt_mean_ns, 200);
    }
}
