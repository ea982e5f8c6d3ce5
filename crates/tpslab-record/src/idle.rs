//! `tpslab probe idle` and `probe pool` records: each idle connection and its fate, the
//! bracket the path's idle timeout lies in, and a pool's requests. Choosing the intervals
//! and narrowing the bracket is `tpslab_analysis::idle`.

use crate::doctor::{Finding, Running};
use serde::{Deserialize, Serialize};
use tpslab_plan::probe::IdlePlan;

/// What became of a connection left idle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
            Fate::Closed => "closed with a FIN (by the server, or a proxy on the path)".into(),
            Fate::Error(e) => format!("error {e}"),
            Fate::Abandoned => "not judged".into(),
        }
    }
}

/// One idle connection of the study.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Conn {
    /// Round of the study (1: the ladder, then the bisection rounds).
    pub round: u32,
    /// Idle interval: its first keepalive probe was due this long after it went quiet, s.
    pub idle_s: u64,
    /// What became of it.
    pub fate: Fate,
    /// When its fate was known, ms after it was opened.
    pub decided_ms: u64,
    /// The path (or the server) ended it by itself: a FIN, or a RST that was not the
    /// answer to its keepalive probe. Then `decided_ms` dates the end from its last
    /// application data (none was sent after the connect: its open), whatever its probe
    /// schedule: it lived that long without data, and no longer. False in records
    /// written before this was measured (and left out of the JSON when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub active_end: bool,
    /// The last time it was seen still open, ms after it was opened: an end came after
    /// it (in (seen_open_ms, decided_ms]). Written for connections the path ended by
    /// itself; 0 in records written before this was measured.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub seen_open_ms: u64,
    /// What the server said before it ended the connection (`probe idle --protocol`: a
    /// PostgreSQL or pgbouncer ErrorResponse, a MySQL error packet, a Redis error); None:
    /// it said nothing, or no protocol was spoken (left out of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodbye: Option<Goodbye>,
}

/// A server's last words on a connection it ended (`probe idle --protocol`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Goodbye {
    /// The error's code: PostgreSQL's SQLSTATE (e.g. `57P05`), MySQL's error number
    /// (e.g. `4031`), Redis's first word (e.g. `ERR`); empty when it had none.
    pub code: String,
    /// Its message as the server wrote it (at most [`Goodbye::MAX_MESSAGE`] bytes, cut
    /// at a character boundary), with PostgreSQL's severity before it (`FATAL: ...`).
    pub message: String,
}

impl Goodbye {
    /// The most bytes of a message kept.
    pub const MAX_MESSAGE: usize = 240;

    /// A goodbye with `message` cut to [`Goodbye::MAX_MESSAGE`] bytes.
    pub fn new(code: &str, message: &str) -> Goodbye {
        let mut end = message.len().min(Self::MAX_MESSAGE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
        Goodbye {
            code: cut(code, 16),
            message: message[..end].to_string(),
        }
    }
}

/// A server's own idle-timeout setting as it stated it when a logged-in probe asked
/// (`probe idle --protocol`): Redis `CONFIG GET timeout`, MySQL/MariaDB
/// `SELECT @@wait_timeout, @@interactive_timeout`, PostgreSQL `SHOW idle_session_timeout`
/// and `SHOW idle_in_transaction_session_timeout`. Through a pooler (pgbouncer) the answer
/// is the server's behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatedSetting {
    /// The setting as the server names it (`timeout`, `wait_timeout`,
    /// `idle_session_timeout`, ...).
    pub name: String,
    /// What was sent to ask for it (`CONFIG GET timeout`, `SELECT @@wait_timeout`, ...).
    pub asked: String,
    /// Its value, ms (0: off, the server never ends an idle connection by it); None: the
    /// server did not answer it (no permission, an unknown setting: `said` has its
    /// words).
    pub value_ms: Option<u64>,
    /// The value as the server wrote it (`2s`, `28800`), or its refusal, at most
    /// [`Goodbye::MAX_MESSAGE`] bytes.
    pub said: String,
}

impl StatedSetting {
    /// A setting asked with `asked`: its value in ms, or the server's refusal in `said`
    /// (cut to [`Goodbye::MAX_MESSAGE`] bytes at a character boundary).
    pub fn new(name: &str, asked: &str, value_ms: Option<u64>, said: &str) -> StatedSetting {
        StatedSetting {
            name: name.into(),
            asked: asked.into(),
            value_ms,
            said: Goodbye::new("", said).message,
        }
    }
}

/// What the study found so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Bracket {
    /// Longest idle interval a connection survived, s (None: none survived).
    pub alive_s: Option<u64>,
    /// Shortest idle interval that killed one, s (None: none died).
    pub dead_s: Option<u64>,
}

/// The connections the path ended by itself ([`Conn::active_end`]), dated by their end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ActiveEnds {
    /// How many.
    pub n: usize,
    /// The earliest time one of them was last seen open, ms after its last data: the
    /// lower end of the timeout they date (0 in records written before this was
    /// measured: then `first_ms` less the engine's poll interval).
    #[serde(default)]
    pub open_ms: u64,
    /// The earliest end, ms after the connection's last data.
    pub first_ms: u64,
    /// The latest end, ms after the connection's last data.
    pub last_ms: u64,
}

/// Which way a payload connection of `--probe-data` carried payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PayloadWay {
    /// From the near side (the client) only: the far side read it and sent nothing.
    Near,
    /// From the far side (tpslab's responder) only: the near side sent nothing.
    Far,
    /// Both ways: the far side answered (an echo, tpslab's responder).
    Both,
}

/// A connection of `--probe-data`, open for the whole study, carrying payload every
/// second in one direction or both: whether payload resets the path's idle timer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PayloadConn {
    /// Which way its payload went (a near-side probe whose far side answered is `both`).
    pub way: PayloadWay,
    /// Alive at the end of the study, or how it ended (dropped: its payload went
    /// unacknowledged, or the far side's stopped coming, for 2.5 s).
    pub fate: Fate,
    /// When its fate was known, ms after it was opened (alive: its age at the end).
    pub decided_ms: u64,
    /// Payload bytes the far side sent it.
    pub answered_bytes: u64,
}

/// What resets the path's idle timer, as far as the study can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum KeepaliveCounts {
    /// TCP keepalive resets it: the control connection, probed every second and silent
    /// otherwise, outlived connections the path killed.
    Yes,
    /// TCP keepalive does not reset it (a proxy that counts application data only): the
    /// control connection, probed every second, was ended after as long without data as
    /// unprobed connections were, or (a path that resets or drops a forgotten flow's next
    /// packet) inside the bracket the probes found.
    No,
}

impl Bracket {
    /// Whether the fates contradict a fixed timeout: a connection died at an interval
    /// no longer than one that survived.
    pub fn inconsistent(&self) -> bool {
        matches!((self.alive_s, self.dead_s), (Some(a), Some(d)) if d <= a)
    }
}

/// Everything `tpslab probe idle` did and found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IdleRecord {
    /// The plan.
    pub plan: IdlePlan,
    /// Every idle connection, in the order opened.
    pub conns: Vec<Conn>,
    /// The control connection, kept busy by keepalive every second: alive at the end, or
    /// the path (or server) failed during the study and the result is not evidence.
    pub control: Fate,
    /// Each control connection the path ended by itself (a FIN or RST while probed every
    /// second): ms after that control was opened (its last data). A control so ended is
    /// opened again and the study goes on. Empty in records written before this was
    /// measured (and left out of the JSON when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub control_ends_ms: Vec<u64>,
    /// The bracket at the end.
    pub bracket: Bracket,
    /// The connections the path ended by itself, dated by their end (None: none did;
    /// left out of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_ends: Option<ActiveEnds>,
    /// Whether TCP keepalive resets the path's idle timer (None: not shown by the study;
    /// left out of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive_counts: Option<KeepaliveCounts>,
    /// How the path ended the shortest-lived dead connection.
    pub how: Option<Fate>,
    /// The payload connections of `--probe-data` (empty without it; left out of the
    /// JSON).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payload: Vec<PayloadConn>,
    /// This host's keepalive and retransmission settings (/proc/sys/net/ipv4), as
    /// doctor reads them.
    pub running: Running,
    /// Connection-pool files given with `--pool-config`.
    #[serde(default)]
    pub pools: Vec<tpslab_proc::pool_conf::PoolConf>,
    /// The server's own idle-timeout settings, asked on a logged-in connection before
    /// the study (`--protocol`; empty without it, or in records written before this was
    /// asked; left out of the JSON when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stated: Vec<StatedSetting>,
    /// What an application on this host suffers with the measured timeout
    /// (doctor's `--for pool` judgement with the upper end of the bracket, and each
    /// pool file's).
    pub findings: Vec<Finding>,
    /// The study ended early (Ctrl-C): the bracket is what was found so far.
    pub interrupted: bool,
}

/// What became of one request of `probe pool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolRequest {
    /// Sent this long after the run started, ms.
    pub at_ms: u64,
    /// The pooled connection it used (numbered in the order opened).
    pub conn: u64,
    /// How long that connection had been idle (no request, no validation), ms.
    pub idle_ms: u64,
    /// What became of it.
    pub outcome: Outcome,
    /// What the server said before it ended the connection (`--protocol`: pgbouncer's
    /// "client_idle_timeout", PostgreSQL's FATAL with its SQLSTATE, ...); None: nothing
    /// (left out of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodbye: Option<Goodbye>,
}

/// Everything `tpslab probe pool` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
