//! What `probe idle` saw of a middlebox ([`PathSeen`]) and the pool settings that follow
//! when its idle timer counts application data only (`data_only_fix`).

/// The pool settings that keep connections alive (or retire them) behind a path that
/// counts application data only and times out after `t` s; HikariCP's only where its
/// floors allow (keepaliveTime at least 30 s, idleTimeout at least 10 s, HikariConfig).
pub(super) fn data_only_fix(t: u64) -> String {
    let every = (t / 2).max(1);
    let mut test = format!(
        "a test query every {every} s or less (c3p0 idle_test_period with preferredTestQuery"
    );
    if t > 30 {
        test += &format!(", HikariCP keepaliveTime = {}", (every * 1000).max(30_000));
    }
    let mut retire = "c3p0 maxIdleTime, pgbouncer server_idle_timeout".to_string();
    if t > 10 {
        retire += ", HikariCP idleTimeout";
    }
    let mut line = format!("in the pool: {test}), or an idle lifetime below {t} s ({retire})");
    if t <= 30 {
        line += "; HikariCP cannot test more often than every 30 s: behind this path only a longer idle timeout (the proxy's or the server's) keeps its idle connections";
    }
    line
}

/// What `probe idle` saw of a middlebox, for `pool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSeen {
    /// TCP keepalive resets its idle timer: `Some(true)` shown (a probe's silent control
    /// outlived the timeout, or `doctor --keepalive-counts yes`); `Some(false)` shown not
    /// to (it counts application data only); None not measured. Keepalive is recommended
    /// only on `Some(true)`; otherwise the pool's own test query or idle lifetime is.
    pub keepalive_counts: Option<bool>,
    /// It may forget a flow without a word (false: it was seen ending flows with a FIN or
    /// RST, so a request on a dead connection fails at once instead of being
    /// retransmitted until tcp_retries2 gives up, and that finding is left out).
    pub may_drop_silently: bool,
}

impl PathSeen {
    /// Nothing measured: whether keepalive counts not known, a silent drop possible.
    pub const UNKNOWN: PathSeen = PathSeen {
        keepalive_counts: None,
        may_drop_silently: true,
    };

    /// What `doctor --for pool --keepalive-counts` states (None: [`PathSeen::UNKNOWN`]).
    pub fn stated(keepalive_counts: Option<bool>) -> PathSeen {
        PathSeen {
            keepalive_counts,
            ..PathSeen::UNKNOWN
        }
    }
}
