//! The run history: every record a command writes is also appended (unless
//! `--no-history`) to a SQLite database, `$XDG_DATA_HOME/tpslab/history.sqlite`
//! (`~/.local/share/tpslab/` without XDG_DATA_HOME): when, kind, target, host, the command
//! line, a one-line headline and the full record. `tpslab history` lists runs,
//! `history show ID` renders one again, `compare` takes `history:ID`.
//!
//! Appends are single transactions in WAL mode with a busy timeout, so runs finishing at
//! once all land and a killed tpslab leaves the database as it was. A database that is
//! not a tpslab history, or one of a newer schema, gives a clear error and is never
//! changed or replaced.

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;
use tpslab_record::{Body, Record};

/// The schema this release writes and reads.
const SCHEMA_VERSION: i64 = 1;

/// The database path: `$XDG_DATA_HOME/tpslab/history.sqlite`, else
/// `$HOME/.local/share/tpslab/history.sqlite`.
pub fn path() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    anyhow!("history: neither XDG_DATA_HOME nor HOME is set; use --no-history")
                })?,
        )
        .join(".local/share"),
    };
    Ok(base.join("tpslab").join("history.sqlite"))
}

fn not_ours(p: &std::path::Path, why: impl std::fmt::Display) -> anyhow::Error {
    anyhow!(
        "history database {}: {why}; it is left as it is (move it away, or use --no-history)",
        p.display()
    )
}

/// Checks the history's folder `dir` (making it, 0700, when `create`): reached without a
/// planted link, every folder on the way one only this user or root can change (SQLite
/// opens the database by name, so the path must name the same file when it does: see
/// [`crate::walk::chain_ok`]), the folder itself this user's and writable by
/// neither group nor others (another user could plant the database, its `-wal` or its
/// `-shm` there). Errors: one line naming the folder and why; the history is then not
/// used (a run says so on stderr and keeps its exit code).
fn folder_ours(dir: &std::path::Path, create: bool) -> Result<()> {
    use crate::walk;
    let no = |why: &dyn std::fmt::Display| {
        anyhow!(
            "history folder {}: {why}; the history is not used there (make the folder this \
             user's alone, or use --no-history)",
            dir.display()
        )
    };
    let how = walk::How {
        create: create.then_some(0o700),
        chain: true,
    };
    let f = match walk::folder(None, dir, how) {
        Err(walk::Refused::Missing(_)) if !create => {
            bail!(
                "no history yet at {}: runs are recorded as they finish",
                dir.display()
            )
        }
        // The folder itself: its own name is in the line already.
        Err(walk::Refused::Chain(p, why)) if walk::same_path(&p, dir) => return Err(no(&why)),
        r => r.map_err(|r| no(&r))?,
    };
    let st = rustix::fs::fstat(&f.fd).map_err(|e| no(&std::io::Error::from(e)))?;
    let euid = rustix::process::geteuid().as_raw();
    if st.st_uid != euid {
        return Err(no(&format_args!(
            "owned by uid {}, not this user",
            st.st_uid
        )));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(no(&format_args!(
            "mode {:o}: group or others can write it",
            st.st_mode & 0o7777
        )));
    }
    Ok(())
}

/// The database was busy past the busy timeout's reach (SQLITE_BUSY returned at once,
/// as when several runs create the file and turn on WAL together): worth another try.
#[derive(Debug)]
struct Busy(String);

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Busy {}

/// `not_ours`, or [`Busy`] when SQLite said the database is busy or locked.
fn busy_or_not_ours(p: &std::path::Path, e: rusqlite::Error) -> anyhow::Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            anyhow::Error::new(Busy(not_ours(p, e).to_string()))
        }
        _ => not_ours(p, e),
    }
}

/// Opens (creating when absent) the history and checks it is ours and not newer. Runs
/// that finish together and find SQLite busy where its busy timeout does not wait (the
/// file being created and switched to WAL by another) try again, up to 50 times 100 ms.
fn open(create: bool) -> Result<(Connection, PathBuf)> {
    let mut tries = 0;
    loop {
        match open_once(create) {
            Err(e) if e.downcast_ref::<Busy>().is_some() && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            r => return r,
        }
    }
}

fn open_once(create: bool) -> Result<(Connection, PathBuf)> {
    let p = path()?;
    if !create && !p.exists() {
        bail!(
            "no history yet at {}: runs are recorded as they finish",
            p.display()
        );
    }
    if let Some(dir) = p.parent() {
        folder_ours(dir, create)?;
    }
    if create {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(not_ours(&p, e)),
        }
        if let Ok(m) = std::fs::symlink_metadata(&p) {
            use std::os::unix::fs::MetadataExt;
            if m.uid() != rustix::process::geteuid().as_raw() {
                return Err(not_ours(
                    &p,
                    format_args!("owned by uid {}, not this user", m.uid()),
                ));
            }
        }
        // One made before tpslab set these modes (0755/0644): narrowed when it is ours.
        for (at, mode) in [(p.parent(), 0o700), (Some(p.as_path()), 0o600)] {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            let Some(at) = at else { continue };
            if let Ok(m) = std::fs::symlink_metadata(at) {
                if !m.file_type().is_symlink()
                    && m.uid() == rustix::process::geteuid().as_raw()
                    && m.mode() & 0o077 != 0
                {
                    let _ = std::fs::set_permissions(at, std::fs::Permissions::from_mode(mode));
                }
            }
        }
    }
    // A symbolic link at the database's name is refused (SQLITE_OPEN_NOFOLLOW).
    let flags = OpenFlags::SQLITE_OPEN_NOFOLLOW
        | if create {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } else {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        };
    let c = Connection::open_with_flags(&p, flags).map_err(|e| not_ours(&p, e))?;
    c.busy_timeout(Duration::from_secs(20))
        .map_err(|e| not_ours(&p, e))?;
    // What is in the file decides: a tpslab history of this schema or older, or empty.
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| busy_or_not_ours(&p, e))?;
    if tables.is_empty() {
        if !create {
            bail!("no history yet at {}", p.display());
        }
        c.execute_batch(
            "PRAGMA journal_mode = WAL;
             BEGIN IMMEDIATE;
             CREATE TABLE IF NOT EXISTS tpslab_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT OR IGNORE INTO tpslab_meta VALUES ('schema_version', '1');
             CREATE TABLE IF NOT EXISTS runs (
                 id INTEGER PRIMARY KEY,
                 started_unix_ms INTEGER NOT NULL,
                 kind TEXT NOT NULL,
                 target TEXT NOT NULL,
                 host TEXT NOT NULL,
                 command TEXT NOT NULL,
                 headline TEXT NOT NULL,
                 interrupted INTEGER NOT NULL,
                 record TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS runs_started ON runs (started_unix_ms);
             COMMIT;",
        )
        .map_err(|e| busy_or_not_ours(&p, e))?;
        return Ok((c, p));
    }
    if !tables.iter().any(|t| t == "tpslab_meta") || !tables.iter().any(|t| t == "runs") {
        return Err(not_ours(
            &p,
            format!(
                "a SQLite database without tpslab's tables (it has {})",
                tables.join(", ")
            ),
        ));
    }
    let v: Option<String> = c
        .query_row(
            "SELECT value FROM tpslab_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| not_ours(&p, e))?;
    match v.as_deref().and_then(|v| v.parse::<i64>().ok()) {
        Some(v) if v <= SCHEMA_VERSION => Ok((c, p)),
        Some(v) => Err(not_ours(
            &p,
            format!("schema version {v}, newer than this tpslab's {SCHEMA_VERSION} (written by a later release)"),
        )),
        None => Err(not_ours(&p, "no schema version")),
    }
}

/// One line that says what the run found.
fn headline(rec: &Record) -> String {
    match &rec.body {
        Body::UdpRun(r) | Body::Watch(r) => r.generator.as_ref().map_or(String::new(), |g| {
            format!(
                "{}{:.0} TPS, loss {}",
                if g.valid { "" } else { "INVALID, " },
                g.tps,
                g.window_loss_pct
                    .map_or("-".into(), |l| format!("{l:.2} %"))
            )
        }),
        Body::Diagnose(d) => d.diagnosis.headline.clone(),
        Body::Ramp(r) => r
            .analysis
            .verdict
            .trim_start_matches("VERDICT: ")
            .to_string(),
        Body::Tcp(t) => t
            .runs
            .iter()
            .find_map(|r| r.verdict.clone())
            .unwrap_or_default(),
        Body::Sweep(s) => s.result.findings.last().cloned().unwrap_or_default(),
        Body::Compare(c) => format!("{} {} records", c.labels.len(), c.of_kind),
        Body::Serve(s) => format!(
            "read {} datagrams, answered {}",
            s.server.received, s.server.answered
        ),
        Body::ServeTcp(s) => format!(
            "{} connections, {} requests, {} bytes",
            s.connections, s.requests, s.bytes
        ),
        Body::Doctor(d) => {
            let n = tpslab_analysis::doctor::judge(d).len();
            format!("{n} finding(s) in {} file(s)", d.files.len())
        }
        Body::Bdp(b) => match (&b.ceiling, &b.need) {
            (_, Some(n)) => format!(
                "{:.1} Mbit/s needs a {} byte buffer ({} to raise)",
                n.rate_bps / 1e6,
                n.plan.buffer_bytes,
                n.fixes.len()
            ),
            (Some(c), None) => format!(
                "a {} byte window carries at most {:.1} Mbit/s",
                c.window_bytes,
                c.ceiling_bps / 1e6
            ),
            (None, None) => "nothing asked".into(),
        },
        Body::ProbeIdle(i) => match (i.bracket.alive_s, i.bracket.dead_s) {
            (_, None) => "no idle timeout found".into(),
            (a, Some(d)) => format!("idle timeout in ({} s, {d} s]", a.unwrap_or(0)),
        },
        Body::ProbePool(p) => format!("{} requests, {} failed", p.requests.len(), p.failed()),
        Body::LoadHttp(l) => format!(
            "{:.1}/s of {}/s, p99 {:.2} ms corrected ({:.2} ms uncorrected), {} failed",
            l.sent_rate(rec.meta.interrupted),
            l.plan.rate,
            l.result.corrected.p99_ns as f64 / 1e6,
            l.result.uncorrected.p99_ns as f64 / 1e6,
            l.result.errors.total()
        ),
        Body::Capacity(c) => tpslab_analysis::capacity::headline(c),
    }
}

/// Appends a record (one transaction). Errors name the database and leave it unchanged.
pub fn append(rec: &Record) -> Result<i64> {
    let (c, p) = open(true)?;
    let json = serde_json::to_string(rec).context("the record as JSON")?;
    let first = |s: String| {
        s.lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect::<String>()
    };
    c.execute(
        "INSERT INTO runs (started_unix_ms, kind, target, host, command, headline, interrupted, record)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            rec.meta.started_unix_ms as i64,
            rec.kind(),
            rec.target(),
            rec.meta.hostname,
            rec.meta.argv.iter().skip(1).cloned().collect::<Vec<_>>().join(" "),
            first(headline(rec)),
            rec.meta.interrupted,
            json
        ],
    )
    .map_err(|e| anyhow!("history database {}: {e}", p.display()))?;
    Ok(c.last_insert_rowid())
}

/// A stored record by id.
pub fn get(id: i64) -> Result<Record> {
    let (c, p) = open(false)?;
    let json: Option<String> = c
        .query_row("SELECT record FROM runs WHERE id = ?1", [id], |r| r.get(0))
        .optional()
        .map_err(|e| anyhow!("history database {}: {e}", p.display()))?;
    let json =
        json.ok_or_else(|| anyhow!("history: no run with id {id} (tpslab history lists them)"))?;
    Record::from_json(&json).map_err(|e| anyhow!("history run {id}: {e}"))
}

/// Days since 1970-01-01 of YYYY-MM-DD (proleptic Gregorian); `None` for anything else,
/// a day the month does not have included.
pub fn day(s: &str) -> Option<i64> {
    let mut it = s.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, d) = (it.next()??, it.next()??, it.next()??);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days_in_month = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if it.next().is_some() || !(1..=12).contains(&m) || !(1..=days_in_month).contains(&d) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// Which stored runs [`list`] gives: every field narrows the list.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Only runs of this kind (`Record::kind()`: udp_run, diagnose, ...).
    pub kind: Option<String>,
    /// Only runs whose target contains this text.
    pub target: Option<String>,
    /// Only runs started at or after this time, ms since the Unix epoch.
    pub since_unix_ms: i64,
    /// At most this many runs, the latest.
    pub limit: u32,
}

/// One stored run as listed: the columns, not the record (`get` reads that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Its id (`history show ID`, `compare history:ID`).
    pub id: i64,
    /// When it started, ms since the Unix epoch (0: not recorded).
    pub started_unix_ms: i64,
    /// `Record::kind()`.
    pub kind: String,
    /// `Record::target()` (empty when it has none).
    pub target: String,
    /// The first line of what it found, at most 300 characters.
    pub headline: String,
    /// Whether it was interrupted.
    pub interrupted: bool,
}

/// The runs `q` selects, oldest first, and the database they came from. Errors name the
/// database (none yet, not a tpslab history, a newer schema).
pub fn list(q: &Query) -> Result<(Vec<Run>, PathBuf)> {
    let (c, p) = open(false)?;
    let mut s = c
        .prepare(
            "SELECT id, started_unix_ms, kind, target, headline, interrupted FROM runs
             WHERE started_unix_ms >= ?1 AND (?2 IS NULL OR kind = ?2)
               AND (?3 IS NULL OR instr(target, ?3) > 0)
             ORDER BY id DESC LIMIT ?4",
        )
        .map_err(|e| anyhow!("history database {}: {e}", p.display()))?;
    let mut rows: Vec<Run> = s
        .query_map(params![q.since_unix_ms, q.kind, q.target, q.limit], |r| {
            Ok(Run {
                id: r.get(0)?,
                started_unix_ms: r.get(1)?,
                kind: r.get(2)?,
                target: r.get(3)?,
                headline: r.get(4)?,
                interrupted: r.get(5)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| anyhow!("history database {}: {e}", p.display()))?;
    rows.reverse();
    Ok((rows, p))
}

/// `--since YYYY-MM-DD` as ms since the Unix epoch (0 without it; a day before 1970 is 0).
/// Errors: not a day.
pub fn since_ms(s: Option<&str>) -> Result<i64> {
    Ok(match s {
        None => 0,
        Some(s) => {
            day(s)
                .ok_or_else(|| anyhow!("--since {s}: allowed a day as YYYY-MM-DD"))?
                .max(0)
                * 86_400_000
        }
    })
}

/// When a run started, UTC to the second; `not recorded` for a start not kept (never
/// dated 1970).
pub fn started(ms: i64) -> String {
    if ms <= 0 {
        "not recorded".into()
    } else {
        tpslab_report::html::utc(ms as u64)
            .trim_end_matches(" UTC")
            .to_string()
    }
}

/// Prints `rows`, listed from the database at `from`, as `tpslab history` shows them
/// ([`tpslab_report::term::history::list`]).
pub fn print_list(w: &mut dyn std::io::Write, rows: &[Run], from: &std::path::Path) -> Result<()> {
    use tpslab_report::term::history::{list, Listed};
    let started: Vec<String> = rows.iter().map(|r| started(r.started_unix_ms)).collect();
    let listed: Vec<Listed> = rows
        .iter()
        .zip(&started)
        .map(|(r, started)| Listed {
            id: r.id,
            started,
            kind: &r.kind,
            target: &r.target,
            interrupted: r.interrupted,
            headline: &r.headline,
        })
        .collect();
    Ok(list(w, &listed, &from.display().to_string())?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_start_not_recorded_is_said_not_dated_1970() {
        assert_eq!(super::started(0), "not recorded");
        assert_eq!(super::started(1_795_470_158_000), "2026-11-23 21:42:38");
    }

    #[test]
    fn days_from_dates() {
        assert_eq!(super::day("1970-01-01"), Some(0));
        assert_eq!(super::day("2026-11-23"), Some(20_780));
        assert_eq!(super::day("2000-03-01"), Some(11_017));
        assert_eq!(super::day("2026-13-01"), None);
        assert_eq!(super::day("yesterday"), None);
        // Days a month does not have (2026-02-30 was accepted as 2026-03-02).
        assert_eq!(super::day("2026-02-30"), None);
        assert_eq!(super::day("2026-04-31"), None);
        assert_eq!(super::day("2100-02-29"), None);
        assert_eq!(super::day("2000-02-29"), Some(11_016));
        assert_eq!(
            super::day("2024-02-29").map(|d| d + 1),
            super::day("2024-03-01")
        );
    }
}
