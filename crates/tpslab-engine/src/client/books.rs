//! What the users' loop ([`crate::client::users`]) counts into and the clock it follows, apart from
//! the loop itself: a closed-loop ramp's [`crate::client::tally::Tally`] or an open loop's
//! schedule ([`crate::client::openloop`]).

use crate::client::proto::Reply;

/// What the users' loop counts into and the clock it follows: a closed-loop ramp's
/// [`crate::client::tally::Tally`] (users stepping up, think times, counts per step) or an open
/// loop's schedule ([`crate::client::openloop`]: each user sends at its own intended times, latency
/// from them). Each loop thread keeps its own [`Books::Local`] (no shared write per
/// request), handed to [`Books::finish`] when the loop ends.
pub(crate) trait Books: Sync {
    /// A loop's own counts.
    type Local;
    /// Whether a stream's client acknowledges at once: TCP_QUICKACK set before each read
    /// of a reply (a re-timing of held replies, [`crate::client::quickack`]). False by default:
    /// the kernel's delayed ACKs, as a client normally has them.
    const QUICKACK: bool = false;
    /// A loop's counts before its first request.
    fn local(&self) -> Self::Local;
    /// Set at the end: the loops return.
    fn done(&self) -> bool;
    /// Users that run at `now` (ids below it).
    fn users_at(&self, now: u64) -> usize;
    /// Whether a request may start at `now` (before the plan's end and the stop).
    fn may_send(&self, now: u64) -> bool;
    /// A request is about to start (after [`Books::may_send`]): false when a cap on the
    /// requests (`load http --rate max --requests`) is used up, and the user stops. True
    /// by default (no cap).
    fn claim(&self) -> bool {
        true
    }
    /// A request claimed was not sent and will be claimed again (an HTTP/2 stream above a
    /// GOAWAY's last stream, started anew). Nothing by default.
    fn unclaim(&self) {}
    /// A request's timeout, ns.
    fn timeout_ns(&self) -> u64;
    /// When user `id`'s first request is intended, ns (0: at once).
    fn first_due(&self, id: usize) -> u64;
    /// When user `id` joins the load, ns: 0 at once (the default), `u64::MAX` never. For a
    /// loop that runs a user before [`Books::users_at`] counts it (HTTP/2's streams are
    /// laid out on their connections from the start).
    fn starts_at(&self, _id: usize) -> u64 {
        0
    }
    /// Where the steps an HTTP/2 loop splits its stream counts at begin, ns (increasing;
    /// the first also holds what came before it, the last what came after): a ramp's
    /// steps, warm-up included. One step by default (an open loop's run).
    fn step_starts(&self) -> Vec<u64> {
        vec![0]
    }
    /// When the request after one intended at `intended` (ns, the send's own time in a
    /// closed loop) is due, its predecessor having ended (answered or failed) at `now`:
    /// `now` or earlier goes at once.
    fn next_due(&self, intended: u64, now: u64) -> u64;
    /// A request intended at `intended` was written whole at `now` (`bytes` long); its
    /// user was free to send it from `ready` (its previous reply, its connect), ns.
    fn sent(&self, l: &mut Self::Local, intended: u64, ready: u64, now: u64, bytes: usize);
    /// `bytes` read from a connection.
    fn read(&self, _l: &mut Self::Local, _bytes: usize) {}
    /// `bytes` of a connection's own (no request's) written: HTTP/2's preface, SETTINGS,
    /// acks, WINDOW_UPDATE, RST_STREAM.
    fn wrote(&self, _l: &mut Self::Local, _bytes: usize) {}
    /// A connection was made (or a datagram socket opened).
    fn opened(&self, _l: &mut Self::Local) {}
    /// A user backed off at `now` (ns) before its next connect (after a failed connect,
    /// or a connection closed for bytes no request asked for). Nothing by default.
    fn backed_off(&self, _l: &mut Self::Local, _now: u64) {}
    /// The reply `r` to a request intended at `intended` and written at `t0` arrived at
    /// `now`, its first bytes read at `first` (a stream's; 0: not taken: a datagram, an
    /// HTTP/2 stream, bytes read with an earlier reply's), ns.
    fn answered(
        &self,
        l: &mut Self::Local,
        intended: u64,
        t0: u64,
        first: u64,
        now: u64,
        r: &Reply,
    );
    /// A reply just [`Books::answered`] at `now` was held on the way (its last byte
    /// [`ReplyGaps::HELD_MIN_NS`](tpslab_record::gaps::ReplyGaps::HELD_MIN_NS) or more
    /// after its first) on a connection whose least RTT the kernel measured is `rtt_ns`
    /// (TCP_INFO min_rtt). Nothing by default.
    fn held_rtt(&self, _l: &mut Self::Local, _now: u64, _rtt_ns: u64) {}
    /// A request (or a connect) failed at `now` with `kind`; `in_flight`: a request
    /// written whole was waiting for its reply.
    fn failed(&self, l: &mut Self::Local, now: u64, kind: &str, in_flight: bool);
    /// The request that just [`Books::failed`] had been started (claimed) and was still
    /// being written: it ended unsent. Nothing by default.
    fn abandoned(&self) {}
    /// The loop ended with `in_flight` requests started and neither answered nor failed
    /// (still being written, or waiting for their reply, when the run's end, or its
    /// grace, came): an open
    /// loop counts each as unanswered at the end (`load http`'s `unanswered`, a failure of
    /// its own kind); a ramp, whose steps count what lands in their windows, leaves them
    /// out.
    fn finish(&self, l: Self::Local, in_flight: u64);
    /// Ends the run now (a failure no request can get past: the server does not speak
    /// the protocol): every loop returns.
    fn abort(&self);
    /// A request counted sent was not processed by the server (above an HTTP/2 GOAWAY's
    /// last stream) and will be sent again: it no longer counts as sent. Nothing by
    /// default.
    fn unsent(&self, _l: &mut Self::Local) {}
}
