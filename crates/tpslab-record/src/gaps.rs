//! When each reply's bytes came, as a stream protocol's client saw them: the first bytes
//! read of a reply against its last, per request (two clock reads the users' loop already
//! makes), summed per ramp step or per `load http` run. A small reply whose last byte
//! comes tens of milliseconds after its first was held on the way: the classic case is
//! Nagle's algorithm on the server holding the last part of a reply written in two sends
//! until the client acknowledges the first, which a client with delayed ACKs does only
//! when its delayed-ACK timer fires (~40 ms on Linux). `tpslab_analysis::nagle` judges it.

use serde::{Deserialize, Serialize};

/// The replies of a step (or a run) by the time from their first byte read to their last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReplyGaps {
    /// Replies counted (answered, not failed), with or without both times.
    pub replies: u64,
    /// Their response times summed (request written to reply read), ns: what the held
    /// time is a share of.
    pub response_ns: u64,
    /// Replies of at most [`ReplyGaps::SMALL_BYTES`] whose first and last byte times were
    /// both taken (the reply's bytes not already read with an earlier one's).
    pub small: u64,
    /// Of those, replies whose last byte came [`ReplyGaps::HELD_MIN_NS`] or more (and
    /// less than [`ReplyGaps::HELD_MAX_NS`]) after their first: held on the way.
    pub held: u64,
    /// The held replies' gaps (first byte read to last) summed, ns.
    pub held_gap_ns: u64,
    /// The largest of them, ns.
    pub held_gap_max_ns: u64,
    /// `TcpExt: DelayedACKs` of the client's network namespace (/proc/net/netstat,
    /// namespace-wide: every connection of it, the server's too when it is in the same
    /// namespace) over the step or run: delayed ACKs sent when their timer fired. None:
    /// not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_acks: Option<u64>,
    /// The path's round-trip time under the held replies, ns: the lowest `tcpi_min_rtt`
    /// (TCP_INFO, the least RTT the kernel measured on the connection) of the connections
    /// whose replies were held, read when each held reply ended. A reply Nagle held waits
    /// for the client's delayed ACK and then one round trip more (the ACK to the server,
    /// the held segment back), so its gap is the timer plus this. None: nothing held, the
    /// kernel's TCP_INFO without it (before 4.6), or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_rtt_min_ns: Option<u64>,
    /// The run's re-timing with the client acknowledging at once (TCP_QUICKACK), made
    /// once a run when its held replies looked like Nagle x delayed ACK and kept in each
    /// step (or run) that looked so: whether the holds went with the client's delayed
    /// ACK. None: not re-timed (nothing looked like it, or an older record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quickack: Option<QuickackRetime>,
}

/// A short re-timing of the target on one new connection (one request in flight, no
/// think time) whose client sets TCP_QUICKACK before each read (Linux clears it as it
/// goes: re-armed per read), so every segment of a reply is acknowledged at once and a
/// server's Nagle never waits for a delayed ACK. Bounded: at most
/// [`QuickackRetime::MAX_REQUESTS`] requests and [`QuickackRetime::MAX_NS`], whichever
/// comes first. Held replies that vanish here were Nagle x delayed ACK; held replies that
/// stay are the server pausing between its sends (`tpslab_analysis::nagle` judges it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QuickackRetime {
    /// Requests written.
    pub requests: u64,
    /// Replies counted (answered, not failed).
    pub replies: u64,
    /// Requests failed (a failure's reply, a timeout, a connect or connection error).
    pub failed: u64,
    /// From the first request written to the last reply (or failure), ns.
    pub duration_ns: u64,
    /// The replies' response times summed, ns.
    pub response_ns: u64,
    /// Replies of at most [`ReplyGaps::SMALL_BYTES`] with both their first and last byte
    /// times taken.
    pub small: u64,
    /// Their gaps from first byte read to last, summed, ns: with `small`, what a small
    /// reply's first-to-last-byte gap was on average with the client acknowledging at once.
    pub gap_ns: u64,
    /// Of them, replies held as [`ReplyGaps::is_held`] counts them.
    pub held: u64,
    /// The held replies' gaps summed, ns.
    pub held_gap_ns: u64,
    /// `TcpExt: DelayedACKs` of the client's namespace over the re-timing (the whole
    /// namespace's); None: not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_acks: Option<u64>,
}

impl QuickackRetime {
    /// The most requests a re-timing writes.
    pub const MAX_REQUESTS: u64 = 50;
    /// The longest a re-timing runs, ns (2 s: 50 replies held ~40 ms each fit in it).
    pub const MAX_NS: u64 = 2_000_000_000;

    /// Counts one reply as [`ReplyGaps::add`] does: its response time `rt_ns`, its first-
    /// to-last-byte gap `gap_ns` (None: not taken), its length in bytes.
    pub fn add(&mut self, rt_ns: u64, gap_ns: Option<u64>, len: usize) {
        self.replies += 1;
        self.response_ns = self.response_ns.saturating_add(rt_ns);
        let Some(gap) = gap_ns.filter(|_| len <= ReplyGaps::SMALL_BYTES) else {
            return;
        };
        self.small += 1;
        self.gap_ns = self.gap_ns.saturating_add(gap);
        if ReplyGaps::is_held(gap, len) {
            self.held += 1;
            self.held_gap_ns = self.held_gap_ns.saturating_add(gap);
        }
    }

    /// The small replies' mean first-to-last-byte gap, ns (None: none).
    pub fn mean_gap_ns(&self) -> Option<f64> {
        (self.small > 0).then(|| self.gap_ns as f64 / self.small as f64)
    }

    /// The replies' mean response time, ns (None: none).
    pub fn mean_response_ns(&self) -> Option<f64> {
        (self.replies > 0).then(|| self.response_ns as f64 / self.replies as f64)
    }
}

impl ReplyGaps {
    /// A reply this small arrives in one flight (ten segments of 1,448 bytes: Linux's
    /// initial congestion window, RFC 6928, on an Ethernet path), bytes: a gap between
    /// its first and last byte is no transfer time.
    pub const SMALL_BYTES: usize = 14_480;
    /// A gap this long or longer is counted held, ns (30 ms: below the shortest
    /// delayed-ACK timeout, Linux's 40 ms, with room for its jitter).
    pub const HELD_MIN_NS: u64 = 30_000_000;
    /// A gap this long or longer is not counted held, ns (500 ms: above the longest
    /// delayed-ACK timeouts, 200 ms on Linux and Windows, plus a round trip): a server
    /// that waits that long between sends is slow, not held.
    pub const HELD_MAX_NS: u64 = 500_000_000;

    /// Counts one reply: its response time `rt_ns`, the time from its first byte read to
    /// its last `gap_ns` (None: not taken), its length in bytes.
    #[inline]
    pub fn add(&mut self, rt_ns: u64, gap_ns: Option<u64>, len: usize) {
        self.replies += 1;
        self.response_ns = self.response_ns.saturating_add(rt_ns);
        let Some(gap) = gap_ns.filter(|_| len <= Self::SMALL_BYTES) else {
            return;
        };
        self.small += 1;
        if Self::is_held(gap, len) {
            self.held += 1;
            self.held_gap_ns = self.held_gap_ns.saturating_add(gap);
            self.held_gap_max_ns = self.held_gap_max_ns.max(gap);
        }
    }

    /// A reply of `len` bytes whose last byte came `gap_ns` after its first is held: small
    /// ([`Self::SMALL_BYTES`] at most) and its gap within [`Self::HELD_MIN_NS`] ..
    /// [`Self::HELD_MAX_NS`] (what [`Self::add`] counts in `held`).
    #[inline]
    pub fn is_held(gap_ns: u64, len: usize) -> bool {
        len <= Self::SMALL_BYTES && (Self::HELD_MIN_NS..Self::HELD_MAX_NS).contains(&gap_ns)
    }

    /// Notes the RTT (`tcpi_min_rtt`, ns) of the connection a held reply came on: the
    /// lowest is kept.
    #[inline]
    pub fn held_rtt(&mut self, rtt_ns: u64) {
        self.held_rtt_min_ns = Some(self.held_rtt_min_ns.map_or(rtt_ns, |r| r.min(rtt_ns)));
    }

    /// Adds another loop's (or step's) counts; the delayed ACKs are added when both
    /// have them, else kept from whichever has; the lower held RTT is kept.
    pub fn merge(&mut self, o: &ReplyGaps) {
        self.replies += o.replies;
        self.response_ns = self.response_ns.saturating_add(o.response_ns);
        self.small += o.small;
        self.held += o.held;
        self.held_gap_ns = self.held_gap_ns.saturating_add(o.held_gap_ns);
        self.held_gap_max_ns = self.held_gap_max_ns.max(o.held_gap_max_ns);
        self.delayed_acks = match (self.delayed_acks, o.delayed_acks) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        if let Some(r) = o.held_rtt_min_ns {
            self.held_rtt(r);
        }
        self.quickack = self.quickack.or(o.quickack);
    }

    /// The held replies' mean gap, ns (None: none held).
    pub fn mean_held_gap_ns(&self) -> Option<f64> {
        (self.held > 0).then(|| self.held_gap_ns as f64 / self.held as f64)
    }

    /// The held gaps' share of the response time summed, 0..=1 (0 without replies).
    pub fn held_share(&self) -> f64 {
        if self.response_ns == 0 {
            return 0.0;
        }
        (self.held_gap_ns as f64 / self.response_ns as f64).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::ReplyGaps;

    #[test]
    fn only_small_replies_with_a_gap_in_the_band_are_held() {
        let mut g = ReplyGaps::default();
        g.add(41_000_000, Some(40_000_000), 200);
        g.add(1_000_000, Some(0), 200);
        // Too big: transfer time, not a hold.
        g.add(60_000_000, Some(50_000_000), ReplyGaps::SMALL_BYTES + 1);
        // No first byte taken.
        g.add(45_000_000, None, 200);
        // Under the band, and over it.
        g.add(30_000_000, Some(29_999_999), 10);
        g.add(900_000_000, Some(600_000_000), 10);
        g.add(33_000_000, Some(30_000_000), ReplyGaps::SMALL_BYTES);
        assert_eq!((g.replies, g.small, g.held), (7, 5, 2));
        assert_eq!(g.held_gap_ns, 70_000_000);
        assert_eq!(g.held_gap_max_ns, 40_000_000);
        assert_eq!(g.mean_held_gap_ns(), Some(35_000_000.0));
        let rt = 41 + 1 + 60 + 45 + 30 + 900 + 33;
        assert_eq!(g.response_ns, rt * 1_000_000);
        assert!((g.held_share() - 70.0 / rt as f64).abs() < 1e-12);
        assert_eq!(ReplyGaps::default().held_share(), 0.0);
        assert_eq!(ReplyGaps::default().mean_held_gap_ns(), None);
    }

    #[test]
    fn a_retiming_counts_every_small_gap_and_the_held_ones() {
        let mut q = super::QuickackRetime::default();
        q.add(1_000_000, Some(200_000), 200);
        q.add(46_000_000, Some(45_000_000), 200);
        // Too big for a gap to mean anything, and no first byte taken.
        q.add(60_000_000, Some(50_000_000), ReplyGaps::SMALL_BYTES + 1);
        q.add(2_000_000, None, 200);
        assert_eq!((q.replies, q.small, q.held), (4, 2, 1));
        assert_eq!((q.gap_ns, q.held_gap_ns), (45_200_000, 45_000_000));
        assert_eq!(q.mean_gap_ns(), Some(22_600_000.0));
        assert_eq!(q.mean_response_ns(), Some(27_250_000.0));
        assert_eq!(super::QuickackRetime::default().mean_gap_ns(), None);
    }

    #[test]
    fn merging_adds_counts_and_keeps_the_largest_gap() {
        let mut a = ReplyGaps::default();
        a.add(41_000_000, Some(40_000_000), 200);
        let mut b = ReplyGaps::default();
        b.add(90_000_000, Some(80_000_000), 200);
        b.delayed_acks = Some(3);
        b.held_rtt(30_000_000);
        b.held_rtt(31_000_000);
        a.merge(&b);
        assert_eq!((a.replies, a.held, a.held_gap_max_ns), (2, 2, 80_000_000));
        assert_eq!(a.delayed_acks, Some(3));
        assert_eq!(a.held_rtt_min_ns, Some(30_000_000));
        a.held_rtt(20_000_000);
        a.merge(&b);
        assert_eq!(a.delayed_acks, Some(6));
        assert_eq!(a.held_rtt_min_ns, Some(20_000_000));
    }
}
