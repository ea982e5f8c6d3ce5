//! Nagle x delayed ACK: a server that writes a reply in two or more sends (an HTTP
//! server's headers, then its body) with Nagle's algorithm on (no TCP_NODELAY) sends the
//! first part at once and holds the last, a segment smaller than a full one, until the
//! first is acknowledged; a client with delayed ACKs acknowledges it only when its
//! delayed-ACK timer fires (40 ms at least on Linux). Each such reply takes ~40 ms more
//! while the server's CPU idles. Judged from the replies' gaps between their first byte
//! read and their last ([`ReplyGaps`], per ramp step or `load http` run) and the client
//! namespace's `TcpExt: DelayedACKs`: a pure function of the record.

use tpslab_record::gaps::ReplyGaps;

use tpslab_record::ramp::RampRecord;

/// Fewest held replies the rule names (one or two are noise: a stall in the network).
pub const MIN_HELD: u64 = 3;
/// Least share of the small replies held, 0..=1: a reply written in two sends is held
/// each time its client's ACK is delayed, not now and then.
pub const MIN_HELD_REPLIES: f64 = 0.1;
/// Least share of the response time the held gaps take, 0..=1: below it the stall
/// explains too little to name.
pub const MIN_SHARE: f64 = 0.1;

/// The delayed-ACK timer's window, ns: a reply Nagle held waits for the client's delayed
/// ACK, which Linux sends after its 40 ms minimum (TCP_DELACK_MIN) rounded up to a timer
/// tick (4 ms at HZ 250, 10 ms at HZ 100) plus the wake-up of both ends; the held gaps'
/// mean of real runs was 45.8 ms (python3 http.server, most 50.5 ms). Compared with the
/// held gaps' mean less the path's round trip ([`ReplyGaps::held_rtt_min_ns`]: the ACK
/// goes to the server and the held segment comes back after the timer, so on a 30 ms
/// path a held reply's gap is ~70 ms). A mean outside it is a server pausing between its
/// sends (with TCP_NODELAY or not): the client's timer fires during the pause
/// (DelayedACKs rises too) but does not end it.
pub const AT_TIMER_NS: std::ops::RangeInclusive<f64> = 39e6..=60e6;

/// Replies held by Nagle until a delayed ACK, with the figures that show it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NagleStall {
    /// Replies held ([`ReplyGaps::held`]) and the small replies they are of.
    pub held: u64,
    /// Small replies with both times taken.
    pub small: u64,
    /// The held gaps' mean and largest, ns.
    pub mean_gap_ns: f64,
    /// The largest held gap, ns.
    pub max_gap_ns: u64,
    /// The held gaps' share of the response time summed, 0..=1.
    pub share: f64,
    /// `TcpExt: DelayedACKs` of the client's namespace over the same window, when read.
    pub delayed_acks: Option<u64>,
    /// The path's round trip under the held replies (TCP_INFO min_rtt), ns, when read:
    /// the part of each gap that is not the delayed-ACK timer.
    pub rtt_ns: Option<u64>,
}

/// Whether `g` shows replies held by Nagle until a delayed ACK: at least [`MIN_HELD`]
/// held replies, [`MIN_HELD_REPLIES`] of the small ones, taking [`MIN_SHARE`] of the
/// response time, and, when the client's `DelayedACKs` were read, at least one delayed
/// ACK per two held replies (each held reply waits for one; without them the gaps are
/// a server pausing between its sends, not Nagle), their mean less the path's round trip
/// (when read) at the delayed-ACK timer ([`AT_TIMER_NS`]: a server pausing 100 ms
/// between its sends, whose client's delayed ACK fires during the pause, is not Nagle).
/// None otherwise.
pub fn judge(g: &ReplyGaps) -> Option<NagleStall> {
    let mean = g.mean_held_gap_ns()?;
    let share = g.held_share();
    let enough = g.held >= MIN_HELD
        && g.held as f64 >= MIN_HELD_REPLIES * g.small as f64
        && share >= MIN_SHARE;
    let acked_late = g.delayed_acks.is_none_or(|d| 2 * d >= g.held);
    let at_timer = AT_TIMER_NS.contains(&(mean - g.held_rtt_min_ns.unwrap_or(0) as f64));
    (enough && acked_late && at_timer).then_some(NagleStall {
        held: g.held,
        small: g.small,
        mean_gap_ns: mean,
        max_gap_ns: g.held_gap_max_ns,
        share,
        delayed_acks: g.delayed_acks,
        rtt_ns: g.held_rtt_min_ns,
    })
}

/// The fix, in the server's runtime, and the client's part.
pub const FIX: &str = "set TCP_NODELAY on the server's connections, or write each reply (headers and body) in one send. C: setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); Python: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1), in http.server / socketserver a handler with disable_nagle_algorithm = True, or wbufsize = -1 so headers and body leave in one write; Java: Socket.setTcpNoDelay(true); Go sets TCP_NODELAY by default (net.TCPConn.SetNoDelay), so from Go this is a custom connection that turned it off; Node: socket.setNoDelay(true) (http's default since Node 18). The client's part: tpslab does not set TCP_QUICKACK, so this is what a client with delayed ACKs sees; a client that acknowledges at once hides the stall, which is why load tools disagree on it";

impl NagleStall {
    /// The finding's first words.
    pub const NAME: &'static str = "Nagle x delayed ACK";
    /// A round trip this long or longer is said in the evidence, ns (loopback's and a
    /// LAN's are well under it and change nothing).
    pub const RTT_SHOWN_NS: u64 = 1_000_000;

    /// The evidence: `12 of 40 small replies (at most 14480 bytes) had their last byte
    /// 40.2 ms after their first (mean; max 41.0 ms), 83 % of the response time; TcpExt
    /// DelayedACKs rose by 13 in the client's namespace`; on a path of 1 ms or more of
    /// round trip, `(mean; max 71.0 ms; 30.1 ms of it the path's round trip, TCP_INFO
    /// min_rtt)`.
    pub fn evidence(&self) -> String {
        let rtt = match self.rtt_ns {
            Some(r) if r >= Self::RTT_SHOWN_NS => format!(
                "; {:.1} ms of it the path's round trip, TCP_INFO min_rtt",
                r as f64 / 1e6
            ),
            _ => String::new(),
        };
        let acks = match self.delayed_acks {
            Some(d) => {
                format!("; TcpExt DelayedACKs rose by {d} in the client's network namespace")
            }
            None => String::new(),
        };
        format!(
            "{} of {} small replies (at most {} bytes) had their last byte {:.1} ms after their first (mean; max {:.1} ms{rtt}), {:.0} % of the response time{acks}",
            self.held,
            self.small,
            ReplyGaps::SMALL_BYTES,
            self.mean_gap_ns / 1e6,
            self.max_gap_ns as f64 / 1e6,
            self.share * 100.0
        )
    }

    /// The whole finding: what happens, the evidence, the fix.
    pub fn line(&self) -> String {
        format!(
            "{}: the server writes a reply in two or more sends; Nagle holds the last until the client's delayed ACK (~40 ms): {}. Fix: {FIX}",
            Self::NAME,
            self.evidence()
        )
    }
}

/// A ramp's finding: the steps whose replies were held (their users), with the figures
/// of the one where the held time took the largest share; None when no step's were.
pub fn ramp_line(rec: &RampRecord) -> Option<String> {
    let held: Vec<(usize, NagleStall)> = rec
        .steps
        .iter()
        .filter_map(|s| Some((s.users, judge(s.reply_gaps.as_ref()?)?)))
        .collect();
    let (users, worst) = held.iter().max_by(|a, b| a.1.share.total_cmp(&b.1.share))?;
    let steps: Vec<String> = held.iter().map(|(u, _)| u.to_string()).collect();
    Some(format!(
        "{} at {} user(s): the server writes a reply in two or more sends; Nagle holds the last until the client's delayed ACK (~40 ms): at {users} user(s) {}. Fix: {FIX}",
        NagleStall::NAME,
        steps.join(", "),
        worst.evidence()
    ))
}

#[cfg(test)]
#[path = "nagle_tests.rs"]
mod tests;
