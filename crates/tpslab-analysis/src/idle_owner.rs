//! Whose idle timeout `probe idle` measured ([`owner`]): the server's own goodbye when it
//! said one (PostgreSQL's SQLSTATE, pgbouncer's message, MySQL's error number), else how
//! the connection ended and what the protocol's servers do, so that the report names the
//! setting that governs the timeout; an owner the ending leaves ambiguous (Redis or a
//! proxy, MariaDB or a middlebox) is settled by the server's own stated setting
//! ([`crate::idle_stated`]). Pure.

use crate::idle::{behaviour, Ending};
use tpslab_plan::login::DbProtocol;
use tpslab_record::idle::{Goodbye, IdleRecord};

/// Who ended the idle connections, and the setting that governs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Who: `PostgreSQL`, `pgbouncer`, `MySQL`, `a middlebox on the path`, ...
    pub who: String,
    /// The setting that governs it, e.g. `idle_session_timeout`.
    pub setting: String,
    /// Whether the server named itself (its goodbye); false: inferred from how the
    /// connection ended and what this protocol's servers do.
    pub named_by_server: bool,
    /// Whether the server's stated setting settled who it was ([`crate::idle_stated`]):
    /// the end on the setting (the server), or before it (the path).
    pub by_setting: bool,
    /// What it rests on, for the report (the goodbye, or the ending).
    pub evidence: String,
}

fn own(who: &str, setting: &str, named: bool, evidence: String) -> Owner {
    Owner {
        who: who.into(),
        setting: setting.into(),
        named_by_server: named,
        by_setting: false,
        evidence,
    }
}

/// Owners the ending leaves between the server and the path: (who, the server alone,
/// the path alone).
const AMBIGUOUS: [(&str, &str, &str); 3] = [
    (
        "Redis, or a proxy on the path",
        "Redis",
        "a proxy on the path",
    ),
    (
        "MariaDB, or a middlebox on the path",
        "MariaDB",
        "a middlebox on the path",
    ),
    (
        "a proxy on the path, or the MySQL server",
        "the MySQL server",
        "a proxy on the path",
    ),
];

/// Whose timeout `rec` measured ([`by_ending`]), an ambiguous owner settled by the
/// server's stated setting: its end on the setting is the server's, before it (or the
/// setting off) the path's. None: no connection died, or the bracket is inconsistent.
pub fn owner(rec: &IdleRecord) -> Option<Owner> {
    use crate::idle_stated::{stated, value_words, Verdict};
    let o = by_ending(rec)?;
    let Some(st) = stated(rec) else {
        return Some(o);
    };
    let Some(&(_, server, path)) = AMBIGUOUS.iter().find(|a| a.0 == o.who) else {
        return Some(o);
    };
    let (name, asked) = (&st.setting.name, &st.setting.asked);
    let Some(value) = st.setting.value_ms.map(value_words) else {
        return Some(o);
    };
    let mut settled = match st.verdict {
        Verdict::Server => own(server, &format!("its {name} = {value} ({asked})"), false, o.evidence),
        Verdict::PathFirst => own(path, "its idle timeout (haproxy timeout client/server, nginx proxy_timeout, a load balancer's, a pooler's)", false, format!("{}; the server states {name} = {value} ({asked}), which did not end them", o.evidence)),
        _ => return Some(o),
    };
    settled.by_setting = true;
    Some(settled)
}

/// The owner a goodbye names (None: a message this does not know).
fn by_goodbye(g: &Goodbye) -> Option<Owner> {
    let ev = || {
        if g.code.is_empty() {
            format!("the server said \"{}\"", g.message)
        } else {
            format!("the server said \"{}\" ({})", g.message, g.code)
        }
    };
    let m = g.message.as_str();
    // pgbouncer's own ends (src/janitor.c: "client_idle_timeout", "client_login_timeout").
    for s in [
        "client_idle_timeout",
        "client_login_timeout",
        "idle_transaction_timeout",
        "query_wait_timeout",
    ] {
        if m.contains(s) {
            return Some(own("pgbouncer", s, true, ev()));
        }
    }
    let (who, setting) = match g.code.as_str() {
        "57P05" => ("PostgreSQL", "idle_session_timeout"),
        "25P03" => ("PostgreSQL", "idle_in_transaction_session_timeout"),
        // MySQL 8.0.24+: ER_CLIENT_INTERACTION_TIMEOUT before it closes.
        "4031" => (
            "MySQL",
            "wait_timeout (interactive_timeout for interactive clients)",
        ),
        _ => return None,
    };
    Some(own(who, setting, true, ev()))
}

/// Whose timeout `rec` measured: the goodbye of a connection the path ended by itself
/// when one names its sender, else by its ending: another ErrorResponse before the close
/// is the PostgreSQL server's (or pgbouncer's) own; a FIN or RST without a word from a
/// PostgreSQL-protocol server is a proxy's (PostgreSQL and pgbouncer say why before they
/// close); from a Redis server, Redis's `timeout` or a proxy's (Redis closes without a
/// word); a RST from a MySQL server, MariaDB's `wait_timeout` or a middlebox's (MariaDB
/// resets without a word); a flow forgotten (reset at its next packet, or silently) a
/// middlebox's. None: no connection died, or the bracket is inconsistent.
fn by_ending(rec: &IdleRecord) -> Option<Owner> {
    let b = behaviour(rec)?;
    rec.bracket.dead_s?;
    let said = rec
        .conns
        .iter()
        .filter(|c| c.fate.dead())
        .find_map(|c| c.goodbye.as_ref());
    if let Some(o) = said.and_then(by_goodbye) {
        return Some(o);
    }
    let proxy =
        "its idle timeout (haproxy timeout client/server, nginx proxy_timeout, a load balancer's)";
    let flow = "its flow table's idle timeout (conntrack's, a NAT's, a cloud load balancer's)";
    let ev = |what: &str| match said {
        Some(g) => format!("{what}; the server said \"{}\" ({})", g.message, g.code),
        None => format!("{what} without a word from the server"),
    };
    Some(match (b.ending, rec.plan.protocol) {
        // PostgreSQL (or pgbouncer) said why in words the rules above do not know
        // (57P01, an admin's shutdown, say): the server's own, by its words.
        (Some(Ending::Fin | Ending::Rst), Some(DbProtocol::Postgres)) if said.is_some() => own("the PostgreSQL server (or pgbouncer) itself", "the setting its message names", true, ev("it sent an ErrorResponse, then closed")),
        (Some(Ending::Fin), Some(DbProtocol::Postgres)) => own("a proxy on the path", proxy, false, ev("ended with a FIN (PostgreSQL and pgbouncer send an ErrorResponse before they close)")),
        (Some(Ending::Rst), Some(DbProtocol::Postgres)) => own("a proxy or middlebox on the path", proxy, false, ev("ended with a RST (PostgreSQL and pgbouncer send an ErrorResponse before they close)")),
        (Some(Ending::Fin), Some(DbProtocol::Redis)) => own("Redis, or a proxy on the path", "Redis's timeout (CONFIG GET timeout), or the proxy's idle timeout", false, ev("ended with a FIN (Redis closes idle clients so)")),
        (Some(Ending::Rst), Some(DbProtocol::Mysql)) => own("MariaDB, or a middlebox on the path", "MariaDB's wait_timeout (SELECT @@wait_timeout), or the middlebox's idle timeout", false, ev("ended with a RST (MariaDB resets idle connections so)")),
        (Some(Ending::Fin), Some(DbProtocol::Mysql)) => own("a proxy on the path, or the MySQL server", "the proxy's idle timeout, or wait_timeout", false, ev("ended with a FIN")),
        (Some(Ending::Fin), None) => own("the server or a proxy on the path", "the server's idle timeout, or the proxy's", false, ev("ended with a FIN")),
        (Some(Ending::Rst), _) => own("a proxy or middlebox on the path", proxy, false, ev("ended with a RST")),
        (Some(Ending::RstNextPacket), _) => own("a middlebox that forgot the flow", flow, false, ev("its next packet drew a RST")),
        (Some(Ending::Silent), _) => own("a middlebox that forgot the flow silently", flow, false, ev("its next packets went unanswered")),
        (None, _) => return None,
    })
}

#[cfg(test)]
#[path = "idle_owner_tests.rs"]
mod tests;
