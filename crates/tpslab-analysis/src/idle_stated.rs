//! Whether the server's own idle-timeout setting, as it stated it when a logged-in probe
//! asked (`IdleRecord::stated`: Redis `CONFIG GET timeout`, MySQL/MariaDB
//! `@@wait_timeout`, PostgreSQL `idle_session_timeout`), is what ended the idle
//! connections ([`stated`]): the measured end on the setting names the server; an end
//! before it (or a setting that is off) is something in the path (a proxy, the pooler)
//! ending them first. Pure.

use crate::idle::behaviour;
use tpslab_plan::login::DbProtocol;
use tpslab_record::idle::{IdleRecord, StatedSetting};

/// An end this much before the stated setting still counts as the server's, ms: the probe
/// dates the end from its own last data, the server from when it read it.
pub const EARLY_MS: u64 = 100;

/// An end this much after the stated setting still counts as the server's, ms (plus a
/// twentieth of the setting): Redis looks at idle clients 10 times a second and counts
/// whole seconds, so it ends them up to a second and a tenth late.
pub const LATE_MS: u64 = 1100;

/// What the server's stated setting says about the measured timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The measured end falls on the setting: the server's own timeout.
    Server,
    /// The connections ended before the setting would have ended them, or it is off:
    /// something in the path (a proxy, the pooler) ended them first.
    PathFirst,
    /// The connections outlived the setting: it did not apply to them (a per-user or
    /// per-database value, interactive clients', another server behind a pooler).
    NotApplied,
    /// No connection ended, and the setting is off or beyond the longest interval tried.
    NotReached,
    /// The server did not answer (no permission, no such setting): which conclusion that
    /// leaves open is in the line.
    Unknown,
}

/// The server's setting held against the measured timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stated {
    /// What it says.
    pub verdict: Verdict,
    /// The setting (its name, how it was asked, its value or the server's refusal).
    pub setting: StatedSetting,
    /// The server, as the report names it (`PostgreSQL`, `Redis`, `MariaDB/MySQL`).
    pub server: &'static str,
    /// The report's line: the setting with its value, what it means for the timeout.
    pub line: String,
}

/// The setting that governs an idle connection outside a transaction, per protocol.
pub fn governing(p: DbProtocol) -> (&'static str, &'static str) {
    match p {
        DbProtocol::Postgres => ("PostgreSQL", "idle_session_timeout"),
        DbProtocol::Mysql => ("MariaDB/MySQL", "wait_timeout"),
        DbProtocol::Redis => ("Redis", "timeout"),
    }
}

/// A setting's value in words: `2 s`, `0 (off)`.
pub fn value_words(ms: u64) -> String {
    if ms == 0 {
        "0 (off)".into()
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.3} s", ms as f64 / 1e3)
    }
}

/// The governing setting of `rec`'s protocol held against the measured timeout (None:
/// no protocol, or the server was not asked). The end is the behaviour's bracket
/// (dated by the connections the server or the path ended, else by the probes).
pub fn stated(rec: &IdleRecord) -> Option<Stated> {
    let proto = rec.plan.protocol?;
    let (server, name) = governing(proto);
    let setting = rec.stated.iter().find(|s| s.name == name)?.clone();
    let asked = &setting.asked;
    let ended = rec.bracket.dead_s.is_some();
    let bracket = behaviour(rec).and_then(|b| b.timeout_s);
    let (verdict, line) = match (setting.value_ms, bracket) {
        (None, _) => {
            let open = if ended {
                format!("whether {server} or something in the path (a proxy, a pooler) ended them stays open unless the server's goodbye named itself")
            } else {
                format!("whether {server} would end idle connections is not known")
            };
            (
                Verdict::Unknown,
                format!("{server} did not say its {name} ({asked}: {}): {open}", setting.said),
            )
        }
        (Some(0), _) if ended => (
            Verdict::PathFirst,
            format!("{server} states {name} = {} ({asked}): it does not end idle connections; something in the path (a proxy, the pooler) ended them", value_words(0)),
        ),
        (Some(0), _) => (
            Verdict::NotReached,
            format!("{server} states {name} = {} ({asked}): it does not end idle connections", value_words(0)),
        ),
        (Some(s), Some((lo, hi))) if ended => {
            let (lo, hi) = ((lo * 1e3) as u64, (hi * 1e3) as u64);
            let late = LATE_MS + s / 20;
            let v = |what: &str| format!("{server} states {name} = {} ({asked}); the connections ended in ({:.2} s, {:.2} s]: {what}", value_words(s), lo as f64 / 1e3, hi as f64 / 1e3);
            if hi + EARLY_MS < s {
                (Verdict::PathFirst, v("before it, so something in the path (a proxy, the pooler) ended them first"))
            } else if lo > s + late {
                (Verdict::NotApplied, v("after it, so it did not apply to these connections (a per-user or per-database value? another server behind a pooler?)"))
            } else {
                (Verdict::Server, v(&format!("the server's own {name}")))
            }
        }
        (Some(s), _) => {
            let max_ms = rec.plan.max_s * 1000;
            if s <= max_ms && !rec.interrupted {
                (Verdict::NotApplied, format!("{server} states {name} = {} ({asked}), yet connections idle up to {} s lived: it did not apply to them", value_words(s), rec.bracket.alive_s.unwrap_or(rec.plan.max_s)))
            } else {
                (Verdict::NotReached, format!("{server} states {name} = {} ({asked}): beyond the longest interval tried ({} s)", value_words(s), rec.plan.max_s))
            }
        }
    };
    Some(Stated {
        verdict,
        setting,
        server,
        line,
    })
}

#[cfg(test)]
#[path = "idle_stated_tests.rs"]
mod tests;
