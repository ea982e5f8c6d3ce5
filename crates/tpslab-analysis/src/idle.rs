//! `tpslab probe idle`: the idle intervals each round tries ([`ladder`]), what became of
//! each connection ([`Fate`]), and the bracket the study narrows the path's idle timeout
//! to ([`bracket`]). Pure: the engine opens the connections and reports their fates.

use tpslab_record::idle::{
    ActiveEnds, Bracket, Conn, Fate, IdleRecord, KeepaliveCounts, Outcome, PayloadConn, PayloadWay,
    PoolRecord,
};

/// How often the engine looks at its connections, ms: an end is dated to within this.
pub const POLL_MS: u64 = 50;

/// The idle intervals to try, whole seconds, ascending, distinct: up to `n` from `lo` to
/// `hi` inclusive (`inclusive`, the first round: every second when they fit, else
/// log-spaced), or up to `n` evenly spaced strictly between them (a bisection round).
/// Empty when nothing fits.
pub fn ladder(lo: u64, hi: u64, n: usize, inclusive: bool) -> Vec<u64> {
    let mut v: Vec<u64> = if inclusive && hi.saturating_sub(lo) < n as u64 {
        // Every whole second fits.
        (lo.max(1)..=hi).collect()
    } else if inclusive {
        let (a, b) = (lo.max(1) as f64, hi.max(lo.max(1)) as f64);
        (0..n.max(2))
            .map(|i| (a * (b / a).powf(i as f64 / (n.max(2) - 1) as f64)).round() as u64)
            .collect()
    } else {
        (1..=n as u64)
            .map(|i| lo + (hi - lo) * i / (n as u64 + 1))
            .filter(|&t| t > lo && t < hi)
            .collect()
    };
    v.sort_unstable();
    v.dedup();
    v
}

/// The bracket of `conns`, whole seconds: the path's idle timeout lies in
/// (alive_s, dead_s]. A connection whose keepalive was answered is alive at its interval;
/// one dropped or reset at its probe is dead at its interval; one the path ended by
/// itself ([`Conn::active_end`], at `decided_ms` without data) lived until it was last
/// seen open (alive at the whole seconds below that) and died at its end (dead at the
/// whole second at or above it), whatever its interval.
pub fn bracket(conns: &[Conn]) -> Bracket {
    let ends = conns.iter().filter(|c| c.active_end && c.fate.dead());
    Bracket {
        alive_s: conns
            .iter()
            .filter(|c| c.fate == Fate::Alive)
            .map(|c| c.idle_s)
            .chain(ends.clone().map(|c| seen_open(c) / 1000))
            .max(),
        dead_s: conns
            .iter()
            .filter(|c| c.fate.dead() && !c.active_end)
            .map(|c| c.idle_s)
            .chain(ends.map(|c| c.decided_ms.div_ceil(1000)))
            .min(),
    }
}

/// When a connection the path ended by itself was last seen open, ms after its open
/// (records without it: its end less [`POLL_MS`]).
fn seen_open(c: &Conn) -> u64 {
    if c.seen_open_ms > 0 {
        c.seen_open_ms
    } else {
        c.decided_ms.saturating_sub(POLL_MS)
    }
}

/// The connections the path ended by itself, dated by their end (None: none did).
pub fn active_ends(conns: &[Conn]) -> Option<ActiveEnds> {
    let ended: Vec<&Conn> = conns
        .iter()
        .filter(|c| c.active_end && c.fate.dead())
        .collect();
    Some(ActiveEnds {
        n: ended.len(),
        open_ms: ended.iter().map(|c| seen_open(c)).min()?,
        first_ms: ended.iter().map(|c| c.decided_ms).min()?,
        last_ms: ended.iter().map(|c| c.decided_ms).max()?,
    })
}

/// A control connection sends its first keepalive probe 1 s after its open; an end
/// before this (ms after its open) came before any probe was answered and says nothing
/// of keepalive (a server that closes connections that send nothing, at once or after a
/// handshake timeout).
pub const CONTROL_PROBED_MS: u64 = 2000;

/// Whether a control connection's end at `end_ms` after its open is the path's idle
/// timeout rather than a failure of the server or the path: it came after its keepalive
/// probes started ([`CONTROL_PROBED_MS`]), and after as long without data as the
/// connections the path ended by itself (within 1 s or a tenth of it), or inside the
/// bracket the probes found (a path that resets a forgotten flow's next packet: the
/// control's next keepalive, within a second).
pub fn control_end_explained(end_ms: u64, ends: Option<ActiveEnds>, b: Bracket) -> bool {
    if end_ms < CONTROL_PROBED_MS {
        return false;
    }
    let by_ends = ends.is_some_and(|e| {
        let tol = 1000.max(e.first_ms / 10);
        end_ms + tol >= e.first_ms && end_ms <= e.last_ms + tol
    });
    let by_bracket = match (b.alive_s, b.dead_s) {
        (Some(a), Some(d)) if !b.inconsistent() => end_ms > a * 1000 && end_ms <= (d + 1) * 1000,
        _ => false,
    };
    by_ends || by_bracket
}

/// Whether TCP keepalive resets the path's idle timer, from a TCP study (not UDP, not
/// server-first: there the control is not a keepalive-only connection): no, when every
/// control connection that ended did so after as long without data as the connections
/// the path ended by itself (its keepalive every second changed nothing); yes, when no
/// control ended and the path killed a connection (the control, opened first and silent
/// but for its keepalives, outlived it). None otherwise.
pub fn keepalive_counts(rec: &IdleRecord) -> Option<KeepaliveCounts> {
    if rec.plan.udp || rec.plan.server_first {
        return None;
    }
    if !rec.control_ends_ms.is_empty() {
        let all = rec
            .control_ends_ms
            .iter()
            .all(|&t| control_end_explained(t, rec.active_ends, rec.bracket));
        return all.then_some(KeepaliveCounts::No);
    }
    let killed = rec.conns.iter().any(|c| c.fate.dead());
    (rec.control == Fate::Alive && killed && !rec.interrupted).then_some(KeepaliveCounts::Yes)
}

/// How a path ends the flows it times out, as a TCP study saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It ended them itself with a FIN (seen on the near side).
    Fin,
    /// It ended them itself with a RST (not in answer to a probe).
    Rst,
    /// It forgot them and answered their next packet (a keepalive probe) with a RST.
    RstNextPacket,
    /// It forgot them silently: their next packets went unanswered.
    Silent,
}

/// What a TCP study measured of the path's behaviour, for one line: its timeout, whether
/// TCP keepalive resets its timer, how it ends flows. Each part None when not measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Behaviour {
    /// The timeout's bracket, seconds: (lower, upper]; dated by the connections the
    /// path ended itself when there are any, else by the probes' intervals.
    pub timeout_s: Option<(f64, f64)>,
    /// Whether TCP keepalive (from the near side) resets the timer ([`keepalive_counts`]).
    pub keepalive: Option<KeepaliveCounts>,
    /// How it ends flows.
    pub ending: Option<Ending>,
}

/// The behaviour `rec` measured (None for UDP studies and inconsistent brackets: no
/// single behaviour was seen). A connection the path ended by itself says FIN or RST
/// by its fate; without one, the fate of the connections that died at their probe.
pub fn behaviour(rec: &IdleRecord) -> Option<Behaviour> {
    if rec.plan.udp || rec.bracket.inconsistent() {
        return None;
    }
    let active = rec.conns.iter().find(|c| c.active_end && c.fate.dead());
    let ending = match active.map(|c| &c.fate) {
        Some(Fate::Closed) => Some(Ending::Fin),
        Some(Fate::Reset) => Some(Ending::Rst),
        _ => match rec.how {
            Some(Fate::Reset) => Some(Ending::RstNextPacket),
            Some(Fate::Dropped) => Some(Ending::Silent),
            Some(Fate::Closed) => Some(Ending::Fin),
            _ => None,
        },
    };
    let timeout_s = match (rec.active_ends, rec.bracket.alive_s, rec.bracket.dead_s) {
        (Some(e), _, _) => Some((seen_open_lower(e) as f64 / 1e3, e.last_ms as f64 / 1e3)),
        (None, Some(a), Some(d)) => Some((a as f64, d as f64)),
        (None, None, Some(d)) => Some((0.0, d as f64)),
        _ => None,
    };
    Some(Behaviour {
        timeout_s,
        keepalive: rec.keepalive_counts,
        ending,
    })
}

/// A payload connection of `--probe-data` sends its payload (or, from the far side,
/// receives the responder's) this often, ms.
pub const PAYLOAD_EVERY_MS: u64 = 1000;

/// A payload connection whose payload stays unacknowledged (TCP_USER_TIMEOUT), or whose
/// far side's payload stops coming, this long is dead (dropped), ms.
pub const PAYLOAD_SILENCE_MS: u64 = 2500;

/// How long after the timeout's upper end a payload connection must still be alive to
/// show that its payload resets the timer, ms: its next payload and the silence that
/// would have killed it.
pub const PAYLOAD_PROVEN_MS: u64 = PAYLOAD_EVERY_MS + PAYLOAD_SILENCE_MS;

/// What payload does to the path's idle timer, by direction, as the payload
/// connections of `--probe-data` showed it: `Some(true)` it resets it (the connection
/// outlived the timeout by [`PAYLOAD_PROVEN_MS`]), `Some(false)` it does not (the
/// connection ended at about the timeout though its payload flowed every second), None
/// not measured (no such connection, too young at the end, or ended unlike the timeout:
/// a far side that does not accept these bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PayloadCounts {
    /// Payload from the near side (the client) alone.
    pub client: Option<bool>,
    /// Payload from the far side (the server) alone.
    pub server: Option<bool>,
    /// Payload both ways (a near-side probe the far side answered).
    pub both: Option<bool>,
}

/// What one payload connection shows against the timeout (lo, hi], s: see
/// [`PayloadCounts`].
fn payload_verdict(c: &PayloadConn, (lo, hi): (f64, f64)) -> Option<bool> {
    let (lo_ms, hi_ms) = ((lo * 1e3) as u64, (hi * 1e3).ceil() as u64);
    match c.fate {
        Fate::Alive => (c.decided_ms >= hi_ms + PAYLOAD_PROVEN_MS).then_some(true),
        _ if c.fate.dead() => (c.decided_ms + PAYLOAD_EVERY_MS >= lo_ms
            && c.decided_ms <= hi_ms + PAYLOAD_PROVEN_MS + POLL_MS)
            .then_some(false),
        _ => None,
    }
}

/// What the payload connections of `rec` show ([`PayloadCounts`]; None: there are none,
/// or no timeout was measured to hold them against).
pub fn payload_counts(rec: &IdleRecord) -> Option<PayloadCounts> {
    if rec.payload.is_empty() {
        return None;
    }
    let t = behaviour(rec)?.timeout_s?;
    let of = |way: PayloadWay| {
        let v: Vec<Option<bool>> = rec
            .payload
            .iter()
            .filter(|c| c.way == way)
            .map(|c| payload_verdict(c, t))
            .collect();
        // Every connection of that way must agree.
        let first = *v.first()?;
        v.iter().all(|x| *x == first).then_some(first).flatten()
    };
    Some(PayloadCounts {
        client: of(PayloadWay::Near),
        server: of(PayloadWay::Far),
        both: of(PayloadWay::Both),
    })
}

/// The lower end of the timeout that active ends date, ms (records without `open_ms`:
/// the first end less [`POLL_MS`]).
pub fn seen_open_lower(e: ActiveEnds) -> u64 {
    if e.open_ms > 0 {
        e.open_ms
    } else {
        e.first_ms.saturating_sub(POLL_MS)
    }
}

/// How a real path's stated timeout (`probe pool HOST:PORT --path-idle-timeout`) disagrees
/// with what the pool's own requests met: `Shorter` when a request failed on a connection
/// idle for less than the stated timeout (the path forgot it sooner), `Longer` when one
/// was answered on a connection idle for more (the path kept it longer), each with that
/// request's idle time, ms. Within a tolerance of 200 ms or a twentieth of the timeout
/// (the pool's own clock and the path's timer granularity); None: they agree, or the lab
/// (whose timeout is set, not stated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatedTimeout {
    /// A request failed on a connection idle this long, below the stated timeout.
    Shorter(u64),
    /// A request was answered on a connection idle this long, past the stated timeout.
    Longer(u64),
}

/// Whether `rec`'s requests contradict its stated path timeout ([`StatedTimeout`]).
pub fn stated_timeout_disagrees(rec: &PoolRecord) -> Option<StatedTimeout> {
    rec.plan.target?;
    let stated = rec.plan.idle_timeout.as_millis() as u64;
    let tol = 200.max(stated / 20);
    let failed_below = rec
        .requests
        .iter()
        .filter(|q| !matches!(q.outcome, Outcome::Answered { .. }) && q.idle_ms + tol < stated)
        .map(|q| q.idle_ms)
        .min();
    if let Some(ms) = failed_below {
        return Some(StatedTimeout::Shorter(ms));
    }
    rec.requests
        .iter()
        .filter(|q| matches!(q.outcome, Outcome::Answered { .. }) && q.idle_ms > stated + tol)
        .map(|q| q.idle_ms)
        .max()
        .map(StatedTimeout::Longer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::idle::PoolRequest;

    #[test]
    fn a_stated_path_timeout_is_held_against_the_requests() {
        let s = std::time::Duration::from_secs;
        let plan = tpslab_plan::probe::PoolPlan {
            idle_timeout: s(4),
            validate_every: None,
            max_idle: None,
            min_idle: 1,
            requests: 3,
            request_every: s(3),
            query_timeout: s(2),
            target: Some("127.0.0.1:1".parse().unwrap()),
            protocol: None,
        };
        let q = |idle_ms, ok: bool| PoolRequest {
            at_ms: 0,
            conn: 1,
            idle_ms,
            goodbye: None,
            outcome: if ok {
                Outcome::Answered { latency_us: 100 }
            } else {
                Outcome::Failed("ECONNRESET".into())
            },
        };
        let mut rec = PoolRecord {
            plan,
            requests: vec![q(0, true), q(3000, true), q(6000, false)],
            opened: 1,
            validations: 0,
            validations_failed: 0,
            expired: 0,
            interrupted: false,
        };
        // A path that forgets after 4 s, stated 4 s: they agree.
        assert_eq!(stated_timeout_disagrees(&rec), None);
        // The path really forgets after 2 s: the 3 s request failed below the stated 4 s.
        rec.requests[1] = q(3000, false);
        assert_eq!(
            stated_timeout_disagrees(&rec),
            Some(StatedTimeout::Shorter(3000))
        );
        // The path keeps them 10 s: the 6 s request was answered past the stated 4 s.
        rec.requests[1] = q(3000, true);
        rec.requests[2] = q(6000, true);
        assert_eq!(
            stated_timeout_disagrees(&rec),
            Some(StatedTimeout::Longer(6000))
        );
        // Within the tolerance (200 ms): no disagreement; the lab states nothing.
        rec.requests[2] = q(4150, true);
        assert_eq!(stated_timeout_disagrees(&rec), None);
        rec.requests[2] = q(6000, true);
        rec.plan.target = None;
        assert_eq!(stated_timeout_disagrees(&rec), None);
    }

    #[test]
    fn ladders() {
        assert_eq!(ladder(1, 10, 15, true), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(
            ladder(10, 3600, 15, true),
            [10, 15, 23, 35, 54, 82, 125, 190, 289, 440, 670, 1020, 1553, 2364, 3600]
        );
        assert_eq!(ladder(283, 430, 15, false).len(), 15);
        assert_eq!(ladder(2, 4, 15, false), [3]);
        assert_eq!(ladder(2, 3, 15, false), Vec::<u64>::new());
    }

    #[test]
    fn bracket_of_fates() {
        let c = |idle_s, fate| Conn {
            round: 1,
            idle_s,
            fate,
            decided_ms: 0,
            active_end: false,
            seen_open_ms: 0,
            goodbye: None,
        };
        let conns = [
            c(1, Fate::Alive),
            c(2, Fate::Alive),
            c(3, Fate::Dropped),
            c(4, Fate::Abandoned),
        ];
        let b = bracket(&conns);
        assert_eq!(
            b,
            Bracket {
                alive_s: Some(2),
                dead_s: Some(3)
            }
        );
        assert!(!b.inconsistent());
        let odd = bracket(&[c(2, Fate::Reset), c(5, Fate::Alive)]);
        assert!(odd.inconsistent());
        assert!(!Fate::Error("EHOSTUNREACH".into()).dead());
    }

    /// haproxy in TCP mode, `timeout client 5s`, probed 1..12 s (measured on this
    /// machine): the 1 s connection's probe is answered; every other one, probed or not
    /// yet, gets haproxy's FIN 5.0 s after its open; so does the control, probed every
    /// second. Dated by their FINs, the timeout is (4 s, 5 s] (from the probe schedule the
    /// 2 s connection's FIN made it (1 s, 2 s]), and keepalive does not reset it.
    #[test]
    fn a_proxy_that_ends_flows_itself_is_timed_by_its_ends() {
        let c = |idle_s, fate, decided_ms, active_end| Conn {
            round: 1,
            idle_s,
            fate,
            decided_ms,
            active_end,
            seen_open_ms: 0,
            goodbye: None,
        };
        let mut conns = vec![c(1, Fate::Alive, 4000, false)];
        for i in 2..=12 {
            conns.push(c(i, Fate::Closed, 5000 + i * 3, true));
        }
        assert_eq!(
            bracket(&conns),
            Bracket {
                alive_s: Some(4),
                dead_s: Some(6)
            }
        );
        // Ends within one second: (4 s, 5 s].
        for c in conns.iter_mut().skip(1) {
            c.decided_ms = 5000;
        }
        let b = bracket(&conns);
        assert_eq!((b.alive_s, b.dead_s), (Some(4), Some(5)));
        let ends = active_ends(&conns).unwrap();
        assert_eq!(
            (ends.n, ends.open_ms, ends.first_ms, ends.last_ms),
            (11, 4950, 5000, 5000)
        );
        let none = bracket(&[]);
        assert!(control_end_explained(5010, Some(ends), none));
        assert!(!control_end_explained(2000, Some(ends), none));
        assert!(!control_end_explained(5010, None, none));
        // A server that closes every connection at once (or after a short handshake
        // timeout): its ends say nothing of keepalive, the control's first probe never
        // went.
        let at_once = ActiveEnds {
            n: 5,
            open_ms: 0,
            first_ms: 40,
            last_ms: 60,
        };
        assert!(!control_end_explained(50, Some(at_once), none));
        // A path that resets a forgotten flow's next packet and ignores keepalive: the
        // probes' RSTs answer their probes (no active ends), the control's comes with its
        // next keepalive after the timeout, inside the bracket.
        let b = Bracket {
            alive_s: Some(4),
            dead_s: Some(5),
        };
        assert!(control_end_explained(5400, None, b));
        assert!(!control_end_explained(3000, None, b));

        let target = tpslab_plan::probe::IdleTarget::Server {
            addr: "127.0.0.1:1".parse().unwrap(),
        };
        let s = std::time::Duration::from_secs;
        let plan = tpslab_plan::probe::IdlePlan::new(target, s(1), s(12), s(1), 16).unwrap();
        let mut rec = IdleRecord {
            plan,
            conns: conns.clone(),
            control: Fate::Alive,
            control_ends_ms: vec![5010],
            bracket: b,
            active_ends: Some(ends),
            keepalive_counts: None,
            how: None,
            payload: vec![],
            running: Default::default(),
            pools: vec![],
            stated: vec![],
            findings: vec![],
            interrupted: false,
        };
        assert_eq!(keepalive_counts(&rec), Some(KeepaliveCounts::No));
        // The behaviour: dated by the FINs, keepalive as judged, ended with a FIN.
        rec.keepalive_counts = keepalive_counts(&rec);
        rec.how = Some(Fate::Closed);
        assert_eq!(
            behaviour(&rec),
            Some(Behaviour {
                timeout_s: Some((4.95, 5.0)),
                keepalive: Some(KeepaliveCounts::No),
                ending: Some(Ending::Fin),
            })
        );
        // A path that resets the next packet: no active end, the probes' bracket.
        let mut reset = rec.clone();
        reset.conns = vec![
            c(4, Fate::Alive, 4100, false),
            c(5, Fate::Reset, 5100, false),
        ];
        reset.active_ends = active_ends(&reset.conns);
        reset.bracket = bracket(&reset.conns);
        reset.how = Some(Fate::Reset);
        let b = behaviour(&reset).unwrap();
        assert_eq!(b.timeout_s, Some((4.0, 5.0)));
        assert_eq!(b.ending, Some(Ending::RstNextPacket));
        reset.how = Some(Fate::Dropped);
        assert_eq!(behaviour(&reset).unwrap().ending, Some(Ending::Silent));
        reset.how = None;
        reset.keepalive_counts = None;
        let b = behaviour(&reset).unwrap();
        assert_eq!((b.ending, b.keepalive), (None, None));
        // Payload connections against the (4.95 s, 5.0 s] the FINs dated.
        let pc = |way, fate, decided_ms| PayloadConn {
            way,
            fate,
            decided_ms,
            answered_bytes: 0,
        };
        let mut p = rec.clone();
        assert_eq!(payload_counts(&p), None);
        // A path counting the client's payload only: the far side's ended at the timeout.
        p.payload = vec![
            pc(PayloadWay::Near, Fate::Alive, 8600),
            pc(PayloadWay::Far, Fate::Closed, 5010),
            pc(PayloadWay::Both, Fate::Alive, 8600),
        ];
        assert_eq!(
            payload_counts(&p),
            Some(PayloadCounts {
                client: Some(true),
                server: Some(false),
                both: Some(true)
            })
        );
        // Too young at the end to tell; ended long before the timeout (a far side that
        // refused the bytes): neither is a verdict.
        p.payload = vec![
            pc(PayloadWay::Near, Fate::Alive, 7000),
            pc(PayloadWay::Far, Fate::Closed, 1200),
        ];
        assert_eq!(payload_counts(&p), Some(PayloadCounts::default()));
        // Payload that does not count: dropped 2.5 s after its first unacknowledged send.
        p.payload = vec![pc(PayloadWay::Both, Fate::Dropped, 8400)];
        assert_eq!(payload_counts(&p).unwrap().both, Some(false));
        reset.plan.udp = true;
        assert_eq!(behaviour(&reset), None);
        // A control that died at another time: a failure, not the timeout.
        rec.control_ends_ms = vec![5010, 900];
        assert_eq!(keepalive_counts(&rec), None);
        // A conntrack-like path: probes dropped at 6 s, the control alive throughout.
        rec.control_ends_ms.clear();
        rec.conns = vec![
            c(5, Fate::Alive, 8000, false),
            c(6, Fate::Dropped, 9000, false),
        ];
        rec.active_ends = active_ends(&rec.conns);
        assert_eq!(keepalive_counts(&rec), Some(KeepaliveCounts::Yes));
        rec.control = Fate::Dropped;
        assert_eq!(keepalive_counts(&rec), None);
        rec.control = Fate::Alive;
        rec.plan.udp = true;
        assert_eq!(keepalive_counts(&rec), None);
    }
}
