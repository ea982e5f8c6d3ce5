//! `tpslab probe idle`: the idle intervals each round tries ([`ladder`]), what became of
//! each connection ([`Fate`]), and the bracket the study narrows the path's idle timeout
//! to ([`bracket`]). Pure: the engine opens the connections and reports their fates.

use crate::doctor::{Finding, Running};
use serde::{Deserialize, Serialize};
use tpslab_plan::probe::IdlePlan;

/// What became of a connection left idle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// Its keepalive probe was answered: the path still knew it.
    Alive,
    /// Its keepalive probes went unanswered until the kernel gave up (ETIMEDOUT): the
    /// path dropped it silently.
    Dropped,
    /// A RST ended it (ECONNRESET): the path (or the server) reset it.
    Reset,
    /// The server closed it (FIN) while idle.
    Closed,
    /// Another error (errno name).
    Error(String),
    /// Not judged: the study stopped before (a shorter interval already died, or Ctrl-C).
    Abandoned,
}

impl Fate {
    /// Whether the path killed it (dropped, reset or closed).
    pub fn dead(&self) -> bool {
        matches!(self, Fate::Dropped | Fate::Reset | Fate::Closed)
    }

    /// In words, for the report (`udp`: a mapping's fate).
    pub fn words(&self, udp: bool) -> String {
        match self {
            Fate::Alive => "alive".into(),
            Fate::Dropped if udp => {
                "dropped silently (the reply due after the idle time never came)".into()
            }
            Fate::Dropped => "dropped silently (keepalive unanswered, ETIMEDOUT)".into(),
            Fate::Reset => "reset (RST, ECONNRESET)".into(),
            Fate::Closed => "closed by the server (FIN)".into(),
            Fate::Error(e) => format!("error {e}"),
            Fate::Abandoned => "not judged".into(),
        }
    }
}

/// One idle connection of the study.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conn {
    /// Round of the study (1: the ladder, then the bisection rounds).
    pub round: u32,
    /// Idle interval: its first keepalive probe was due this long after it went quiet, s.
    pub idle_s: u64,
    /// What became of it.
    pub fate: Fate,
    /// When its fate was known, ms after it was opened.
    pub decided_ms: u64,
}

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

/// What the study found so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bracket {
    /// Longest idle interval a connection survived, s (None: none survived).
    pub alive_s: Option<u64>,
    /// Shortest idle interval that killed one, s (None: none died).
    pub dead_s: Option<u64>,
}

impl Bracket {
    /// Whether the fates contradict a fixed timeout: a connection died at an interval
    /// no longer than one that survived.
    pub fn inconsistent(&self) -> bool {
        matches!((self.alive_s, self.dead_s), (Some(a), Some(d)) if d <= a)
    }
}

/// The bracket of `conns`: the path's idle timeout lies in (alive_s, dead_s].
pub fn bracket(conns: &[Conn]) -> Bracket {
    Bracket {
        alive_s: conns
            .iter()
            .filter(|c| c.fate == Fate::Alive)
            .map(|c| c.idle_s)
            .max(),
        dead_s: conns
            .iter()
            .filter(|c| c.fate.dead())
            .map(|c| c.idle_s)
            .min(),
    }
}

/// Everything `tpslab probe idle` did and found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleRecord {
    /// The plan.
    pub plan: IdlePlan,
    /// Every idle connection, in the order opened.
    pub conns: Vec<Conn>,
    /// The control connection, kept busy by keepalive every second: alive at the end, or
    /// the path (or server) failed during the study and the result is not evidence.
    pub control: Fate,
    /// The bracket at the end.
    pub bracket: Bracket,
    /// How the path ended the shortest-lived dead connection.
    pub how: Option<Fate>,
    /// This host's keepalive and retransmission settings (/proc/sys/net/ipv4), as
    /// doctor reads them.
    pub running: Running,
    /// Connection-pool files given with `--pool-config`.
    #[serde(default)]
    pub pools: Vec<tpslab_proc::pool_conf::PoolConf>,
    /// What an application on this host suffers with the measured timeout
    /// (doctor's `--for pool` judgement with the upper end of the bracket, and each
    /// pool file's).
    pub findings: Vec<Finding>,
    /// The study ended early (Ctrl-C): the bracket is what was found so far.
    pub interrupted: bool,
}

/// What became of one request of `probe pool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Answered, after this many microseconds.
    Answered {
        /// Request to answer, us.
        latency_us: u64,
    },
    /// No answer within the query timeout (S5's "Operation timed out").
    TimedOut,
    /// The connection failed (errno name); no connection could be had.
    Failed(String),
}

/// One request of `probe pool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRequest {
    /// Sent this long after the run started, ms.
    pub at_ms: u64,
    /// The pooled connection it used (numbered in the order opened).
    pub conn: u64,
    /// How long that connection had been idle (no request, no validation), ms.
    pub idle_ms: u64,
    /// What became of it.
    pub outcome: Outcome,
}

/// Everything `tpslab probe pool` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolRecord {
    /// The plan.
    pub plan: tpslab_plan::probe::PoolPlan,
    /// Every request, in order.
    pub requests: Vec<PoolRequest>,
    /// Connections opened (the first `min_idle` and every replacement).
    pub opened: u64,
    /// Validations run, and how many found a dead connection (it was closed).
    pub validations: u64,
    /// Validations that found a dead connection.
    pub validations_failed: u64,
    /// Connections closed for being idle longer than max_idle.
    pub expired: u64,
    /// Ended early (Ctrl-C).
    pub interrupted: bool,
}

impl PoolRecord {
    /// Requests that did not get their answer.
    pub fn failed(&self) -> usize {
        self.requests
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Answered { .. }))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
