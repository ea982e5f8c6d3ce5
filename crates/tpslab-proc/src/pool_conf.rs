//! Connection-pool configuration files, read as written: Hibernate's `hibernate.cfg.xml`
//! (`<property name="hibernate.c3p0...">`), `c3p0.properties`, HikariCP `.properties`
//! (plain or Spring's `spring.datasource.hikari.*`), and pgbouncer's `pgbouncer.ini`
//! (`[pgbouncer]` section). Each setting keeps its line for the evidence. The format is
//! chosen from the file name and, for `.properties`, the keys.

use serde::{Deserialize, Serialize};

/// The pool a file configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    /// c3p0 (through Hibernate's XML or c3p0.properties).
    C3p0,
    /// HikariCP.
    Hikari,
    /// pgbouncer.
    Pgbouncer,
}

/// One setting as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolSetting {
    /// 1-based line.
    pub line: usize,
    /// Key as written (`hibernate.c3p0.idle_test_period`).
    pub key: String,
    /// Value as written, trimmed.
    pub value: String,
}

/// A pool configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolConf {
    /// Its path as given.
    pub path: String,
    /// The pool it configures.
    pub kind: PoolKind,
    /// Its pool settings, in file order (other keys left out).
    pub settings: Vec<PoolSetting>,
}

impl PoolConf {
    /// The last setting whose key's last part (after the last `.`) is `name`, compared
    /// without case, `-` or `_` (c3p0's `hibernate.c3p0.timeout`; Spring's
    /// `spring.datasource.hikari.keepalive-time` for `keepaliveTime`).
    pub fn get(&self, name: &str) -> Option<&PoolSetting> {
        let want = norm(name);
        self.settings
            .iter()
            .rev()
            .find(|s| norm(s.key.rsplit('.').next().unwrap_or(&s.key)) == want)
    }
}

/// A key compared without case, `-` or `_`.
fn norm(k: &str) -> String {
    k.chars()
        .filter(|c| *c != '-' && *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// A file that is not a pool configuration tpslab reads: `path:line: what`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}: {what}")]
pub struct PoolConfError {
    /// The file.
    pub path: String,
    /// 1-based line (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

fn line_of(text: &str, byte: usize) -> usize {
    text.as_bytes()[..byte.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Parses `text`, the contents of `path`.
pub fn parse_pool_conf(path: &str, text: &str) -> Result<PoolConf, PoolConfError> {
    let err = |line: usize, what: String| PoolConfError {
        path: path.to_string(),
        line,
        what,
    };
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".xml") {
        return xml(path, text).map_err(|(l, w)| err(l, w));
    }
    if lower.ends_with(".ini") {
        return ini(path, text).map_err(|(l, w)| err(l, w));
    }
    if lower.ends_with(".properties") {
        return properties(path, text).map_err(|(l, w)| err(l, w));
    }
    Err(err(
        0,
        "not a pool configuration tpslab reads (hibernate.cfg.xml, c3p0.properties, HikariCP .properties, pgbouncer.ini)".into(),
    ))
}

/// Hibernate's XML: every `<property name="hibernate.c3p0.X">value</property>`.
fn xml(path: &str, text: &str) -> Result<PoolConf, (usize, String)> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(text);
    let mut settings = vec![];
    // The property being read: its line, name and text so far.
    let mut open: Option<(usize, String, String)> = None;
    loop {
        let at = r.buffer_position() as usize;
        let ev = r.read_event().map_err(|e| {
            (
                line_of(text, r.error_position() as usize),
                format!("not well-formed XML: {e}"),
            )
        })?;
        match ev {
            Event::Start(e) if e.name().as_ref() == "property" => {
                let name = e.try_get_attribute("name").ok().flatten().and_then(|a| {
                    a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .ok()
                        .map(|v| v.into_owned())
                });
                open = name.map(|n| (line_of(text, at), n, String::new()));
            }
            Event::Text(t) => {
                if let Some((_, _, v)) = open.as_mut() {
                    v.push_str(&t.xml10_content());
                }
            }
            Event::End(_) => {
                if let Some((line, key, v)) = open.take() {
                    settings.push(PoolSetting {
                        line,
                        key,
                        value: v.trim().to_string(),
                    });
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    settings.retain(|s| s.key.contains("c3p0"));
    if settings.is_empty() {
        return Err((0, "no hibernate.c3p0.* property: not a c3p0 pool".into()));
    }
    Ok(PoolConf {
        path: path.to_string(),
        kind: PoolKind::C3p0,
        settings,
    })
}

/// `.properties`: c3p0 (`c3p0.*` keys) or HikariCP (its key names, plain or under
/// `spring.datasource.hikari.`).
fn properties(path: &str, text: &str) -> Result<PoolConf, (usize, String)> {
    use java_properties::{LineContent, PropertiesIter};
    let mut all = vec![];
    for l in PropertiesIter::new(text.as_bytes()) {
        let l = l.map_err(|e| (e.line_number().unwrap_or(0), e.to_string()))?;
        let n = l.line_number();
        if let LineContent::KVPair(k, v) = l.consume_content() {
            all.push(PoolSetting {
                line: n,
                key: k,
                value: v.trim().to_string(),
            });
        }
    }
    const HIKARI: [&str; 6] = [
        "keepalivetime",
        "maxlifetime",
        "idletimeout",
        "minimumidle",
        "maximumpoolsize",
        "validationtimeout",
    ];
    let c3p0: Vec<PoolSetting> = all
        .iter()
        .filter(|s| s.key.starts_with("c3p0.") || s.key.starts_with("hibernate.c3p0."))
        .cloned()
        .collect();
    let hikari: Vec<PoolSetting> = all
        .iter()
        .filter(|s| {
            let last = norm(s.key.rsplit('.').next().unwrap_or(&s.key));
            s.key.contains("hikari") || HIKARI.contains(&last.as_str())
        })
        .cloned()
        .collect();
    let (kind, settings) =
        match (c3p0.is_empty(), hikari.is_empty()) {
            (false, true) => (PoolKind::C3p0, c3p0),
            (true, false) => (PoolKind::Hikari, hikari),
            (false, false) => {
                return Err((
                    0,
                    "both c3p0 and HikariCP keys: give one pool per file".into(),
                ))
            }
            (true, true) => return Err((
                0,
                "no c3p0.* or HikariCP key (keepaliveTime, maxLifetime, idleTimeout, minimumIdle)"
                    .into(),
            )),
        };
    Ok(PoolConf {
        path: path.to_string(),
        kind,
        settings,
    })
}

/// pgbouncer.ini: the `[pgbouncer]` section.
fn ini(path: &str, text: &str) -> Result<PoolConf, (usize, String)> {
    let conf = ini::Ini::load_from_str(text).map_err(|e| (e.line, e.msg.to_string()))?;
    let sec = conf
        .section(Some("pgbouncer"))
        .ok_or((0, "no [pgbouncer] section".to_string()))?;
    // The parser keeps no line numbers: find each key's line (the last one that sets it).
    let line_for = |key: &str| {
        text.lines()
            .enumerate()
            .filter(|(_, l)| {
                l.trim_start()
                    .strip_prefix(key)
                    .is_some_and(|r| r.trim_start().starts_with('='))
            })
            .map(|(i, _)| i + 1)
            .last()
            .unwrap_or(0)
    };
    let mut settings: Vec<PoolSetting> = sec
        .iter()
        .map(|(k, v)| PoolSetting {
            line: line_for(k),
            key: k.to_string(),
            value: v.trim().to_string(),
        })
        .collect();
    settings.sort_by_key(|s| s.line);
    Ok(PoolConf {
        path: path.to_string(),
        kind: PoolKind::Pgbouncer,
        settings,
    })
}
