//! Nagle x delayed ACK: a server that writes a reply in two or more sends (an HTTP
//! server's headers, then its body) with Nagle's algorithm on (no TCP_NODELAY) sends the
//! first part at once and holds the last, a segment smaller than a full one, until the
//! first is acknowledged; a client with delayed ACKs acknowledges it only when its
//! delayed-ACK timer fires (40 ms at least on Linux). Each such reply takes ~40 ms more
//! while the server's CPU idles. Judged from the replies' gaps between their first byte
//! read and their last ([`ReplyGaps`], per ramp step or `load http` run) and the client
//! namespace's `TcpExt: DelayedACKs`: a pure function of the record. When a run's held
//! replies look so ([`looks_like`]), the client re-times a short sample with TCP_QUICKACK
//! set before each read ([`QuickackRetime`]): holds that vanish confirm Nagle x delayed
//! ACK; holds that stay are the server pausing between its sends ([`Paused`]), whatever
//! the ACKs do (a server pausing 70-90 ms on a 30 ms path reads, once the round trip is
//! taken off, as a hold at the delayed-ACK timer).

use tpslab_record::gaps::{QuickackRetime, ReplyGaps};

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
    /// The run's re-timing with the client acknowledging at once, when made.
    pub retime: Option<QuickackRetime>,
}

/// Fewest small replies a re-timing needs to say anything (a server failing the re-timed
/// requests leaves the finding as the gaps alone name it).
pub const MIN_RETIMED: u64 = 5;

/// What a re-timing with the client acknowledging at once said of the holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retimed {
    /// Fewer than [`MIN_HELD_REPLIES`] of its small replies held: the holds went with
    /// the client's delayed ACK (Nagle x delayed ACK confirmed).
    Gone,
    /// [`MIN_HELD_REPLIES`] or more held: the holds stayed (the server pauses between its
    /// sends).
    Stayed,
    /// Fewer than [`MIN_RETIMED`] small replies: nothing said.
    TooFew,
}

/// What the re-timing `q` says: see [`Retimed`].
pub fn retimed(q: &QuickackRetime) -> Retimed {
    if q.small < MIN_RETIMED {
        Retimed::TooFew
    } else if (q.held as f64) < MIN_HELD_REPLIES * q.small as f64 {
        Retimed::Gone
    } else {
        Retimed::Stayed
    }
}

/// Whether `g` shows replies held by Nagle until a delayed ACK: [`looks_like`], unless
/// the run's re-timing with the client acknowledging at once ([`ReplyGaps::quickack`])
/// saw the holds stay ([`Retimed::Stayed`]: the server pauses between its sends, see
/// [`paused`]). With a re-timing that saw them go, the finding is confirmed
/// ([`NagleStall::retime`]). None otherwise.
pub fn judge(g: &ReplyGaps) -> Option<NagleStall> {
    let n = looks_like(g)?;
    match g.quickack.as_ref().map(retimed) {
        Some(Retimed::Stayed) => None,
        _ => Some(n),
    }
}

/// Replies held between a server's sends that looked like Nagle x delayed ACK and stayed
/// held with the client acknowledging at once: the server pauses between its sends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paused {
    /// The holds as the run saw them.
    pub stall: NagleStall,
    /// The re-timing that kept them.
    pub retime: QuickackRetime,
}

/// The holds of `g` when they looked like Nagle x delayed ACK ([`looks_like`]) and the
/// re-timing saw them stay ([`Retimed::Stayed`]); None otherwise.
pub fn paused(g: &ReplyGaps) -> Option<Paused> {
    let stall = looks_like(g)?;
    let retime = g.quickack.filter(|q| retimed(q) == Retimed::Stayed)?;
    Some(Paused { stall, retime })
}

/// The re-timing's bounds and what it took: `50 requests in 0.03 s, at most 50 or 2 s`.
fn retime_size(q: &QuickackRetime) -> String {
    format!(
        "TCP_QUICKACK set before each read, {} request(s) in {:.2} s on one new connection, at most {} or {} s",
        q.requests,
        q.duration_ns as f64 / 1e9,
        QuickackRetime::MAX_REQUESTS,
        QuickackRetime::MAX_NS / 1_000_000_000
    )
}

/// A small reply's mean first-to-last-byte gap in the re-timing, ms (0 without one).
fn retime_gap_ms(q: &QuickackRetime) -> f64 {
    q.mean_gap_ns().unwrap_or(0.0) / 1e6
}

impl Paused {
    /// The finding: `Replies held between the server's sends, not Nagle x delayed ACK: ...`.
    pub fn line(&self) -> String {
        self.line_at("")
    }

    /// [`Paused::line`] with `at` (` at 1 user(s)`) after its first words.
    pub fn line_at(&self, at: &str) -> String {
        format!(
            "Replies held between the server's sends{at}, not Nagle x delayed ACK: {}; with the client acknowledging at once ({}) the stall stayed: {:.1} ms -> {:.1} ms (a small reply's first-to-last-byte gap, mean; {} of {} re-timed replies held). The server pauses between its sends (work, a sleep or a flush timer between the headers and the body): look there, not at TCP_NODELAY",
            self.stall.evidence_gaps(),
            retime_size(&self.retime),
            self.stall.mean_gap_ns / 1e6,
            retime_gap_ms(&self.retime),
            self.retime.held,
            self.retime.small
        )
    }
}

/// Whether `g` looks like replies held by Nagle until a delayed ACK: at least [`MIN_HELD`]
/// held replies, [`MIN_HELD_REPLIES`] of the small ones, taking [`MIN_SHARE`] of the
/// response time, and, when the client's `DelayedACKs` were read, at least one delayed
/// ACK per two held replies (each held reply waits for one; without them the gaps are
/// a server pausing between its sends, not Nagle), their mean less the path's round trip
/// (when read) at the delayed-ACK timer ([`AT_TIMER_NS`]: a server pausing 100 ms
/// between its sends, whose client's delayed ACK fires during the pause, is not Nagle).
/// None otherwise.
pub fn looks_like(g: &ReplyGaps) -> Option<NagleStall> {
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
        retime: g.quickack,
    })
}

/// The fix, in the server's runtime, and the client's part.
pub const FIX: &str = "set TCP_NODELAY on the server's connections, or write each reply (headers and body) in one send. C: setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); Python: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1), in http.server / socketserver a handler with disable_nagle_algorithm = True, or wbufsize = -1 so headers and body leave in one write; Java: Socket.setTcpNoDelay(true); Go sets TCP_NODELAY by default (net.TCPConn.SetNoDelay), so from Go this is a custom connection that turned it off; Node: socket.setNoDelay(true) (http's default since Node 18). The client's part: tpslab's load does not set TCP_QUICKACK, so this is what a client with delayed ACKs sees; a client that acknowledges at once (TCP_QUICKACK re-armed before each read, as tpslab's re-timing does) hides the stall, which is why load tools disagree on it";

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
        let retime = match self.retime {
            Some(q) => match retimed(&q) {
                Retimed::Gone => format!(
                    "; confirmed: with the client acknowledging at once ({}) the stall went from {:.1} ms to {:.1} ms (a small reply's first-to-last-byte gap, mean; {} of {} re-timed replies held)",
                    retime_size(&q),
                    self.mean_gap_ns / 1e6,
                    retime_gap_ms(&q),
                    q.held,
                    q.small
                ),
                _ => format!(
                    "; not confirmed: the re-timing with the client acknowledging at once ({}) had {} small replies, {} failed",
                    retime_size(&q),
                    q.small,
                    q.failed
                ),
            },
            None => String::new(),
        };
        format!("{}{retime}", self.evidence_gaps())
    }

    /// The evidence of the gaps alone (the run's, without its re-timing).
    fn evidence_gaps(&self) -> String {
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

/// A ramp's steps whose holds looked like Nagle x delayed ACK and stayed when re-timed
/// ([`paused`]), with the figures of the one where they took the largest share; None
/// when no step's did.
pub fn ramp_pause_line(rec: &RampRecord) -> Option<String> {
    let held: Vec<(usize, Paused)> = rec
        .steps
        .iter()
        .filter_map(|s| Some((s.users, paused(s.reply_gaps.as_ref()?)?)))
        .collect();
    let (users, worst) = held
        .iter()
        .max_by(|a, b| a.1.stall.share.total_cmp(&b.1.stall.share))?;
    let steps: Vec<String> = held.iter().map(|(u, _)| u.to_string()).collect();
    Some(format!(
        "{} [figures at {users} user(s)]",
        worst.line_at(&format!(" at {} user(s)", steps.join(", ")))
    ))
}

#[cfg(test)]
#[path = "nagle_tests.rs"]
mod tests;
