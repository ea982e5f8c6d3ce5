//! A connection pool's settings against a path's idle timeout (S5): which setting lets a
//! connection sit idle past the timeout before it is tested, kept alive or retired, and
//! the value that fixes it. c3p0 (seconds), HikariCP (milliseconds), pgbouncer (seconds).

use super::workload::PathSeen;
use tpslab_proc::pool_conf::{PoolConf, PoolKind, PoolSetting};
use tpslab_record::doctor::{Finding, Fix, Severity};

/// A whole-number setting (`path:line: key "x" is not a whole number` when it is not).
fn num(conf: &PoolConf, s: Option<&PoolSetting>) -> Result<Option<(u64, String)>, String> {
    let Some(s) = s else { return Ok(None) };
    let v = s.value.parse::<u64>().map_err(|_| {
        format!(
            "{}:{}: {} \"{}\" is not a whole number",
            conf.path, s.line, s.key, s.value
        )
    })?;
    Ok(Some((
        v,
        format!("{}:{}: {} = {}", conf.path, s.line, s.key, s.value),
    )))
}

/// The first of `names` the file sets.
fn first<'a>(conf: &'a PoolConf, names: &[&str]) -> Option<&'a PoolSetting> {
    names.iter().find_map(|n| conf.get(n))
}

/// A value to write below `timeout_s` with a margin: half of it (at least `floor`).
fn below(timeout_s: u64, floor: u64) -> u64 {
    (timeout_s / 2).max(floor)
}

/// The findings for `conf` behind a path that forgets connections idle for `timeout_s`;
/// `os_keepidle_s` is this host's net.ipv4.tcp_keepalive_time (for pgbouncer's
/// `tcp_keepidle = 0`); `seen`: what `probe idle` measured of the path (TCP keepalive
/// counted only where it resets the path's timer). Errors: a setting judged here that is
/// not a whole number.
pub fn judge(
    conf: &PoolConf,
    timeout_s: u64,
    os_keepidle_s: Option<u64>,
    seen: PathSeen,
) -> Result<Vec<Finding>, String> {
    match conf.kind {
        PoolKind::C3p0 => c3p0(conf, timeout_s),
        PoolKind::Hikari => hikari(conf, timeout_s, seen),
        PoolKind::Pgbouncer => pgbouncer(conf, timeout_s, os_keepidle_s, seen),
    }
}

/// HikariCP's smallest keepaliveTime, ms: HikariConfig.validateNumerics disables a
/// smaller one ("keepaliveTime is less than 30000ms, disabling it").
const HIKARI_MIN_KEEPALIVE_MS: u64 = 30_000;

fn c3p0(conf: &PoolConf, t: u64) -> Result<Vec<Finding>, String> {
    let mut out = vec![];
    let test = num(
        conf,
        first(conf, &["idle_test_period", "idleConnectionTestPeriod"]),
    )?;
    let idle = num(conf, first(conf, &["timeout", "maxIdleTime"]))?;
    let min = num(conf, first(conf, &["min_size", "minPoolSize"]))?;
    let on_checkout = first(conf, &["testConnectionOnCheckout"])
        .is_some_and(|s| s.value.eq_ignore_ascii_case("true"));
    // A connection is exposed when nothing touches it before the path forgets it:
    // no test below the timeout (a test is traffic that keeps the flow alive) and no
    // expiry below it.
    let within = |v: &Option<(u64, String)>| v.as_ref().is_some_and(|(x, _)| *x > 0 && *x < t);
    if on_checkout || within(&test) || within(&idle) {
        out.push(Finding {
            severity: Severity::Info,
            what: format!(
                "{}: idle connections are {} before the path's {t} s",
                conf.path,
                if within(&test) {
                    "tested (kept alive)"
                } else if within(&idle) {
                    "retired"
                } else {
                    "tested on every checkout (on a path that drops silently that test itself waits for the driver's timeout, then the connection is replaced)"
                }
            ),
            evidence: [&test, &idle]
                .iter()
                .filter_map(|v| v.as_ref().map(|(_, e)| e.clone()))
                .collect(),
            fix: None,
        });
        return Ok(out);
    }
    let shown = |v: &Option<(u64, String)>, name: &str| {
        v.as_ref()
            .map_or(format!("{name} not set (0: never)"), |(x, _)| {
                format!("{name} {x} s")
            })
    };
    out.push(Finding {
        severity: Severity::Warn,
        what: format!(
            "{}: a connection can sit idle past the path's {t} s timeout before it is tested ({}) or retired ({}): the pool hands out dead connections, and queries on them hang until the driver's timeout (S5){}",
            conf.path,
            shown(&test, "idle_test_period"),
            shown(&idle, "timeout"),
            match &min {
                Some((m, _)) if *m > 0 => format!("; min_size {m} keeps that many open however idle"),
                _ => String::new(),
            }
        ),
        evidence: [&test, &idle, &min].iter().filter_map(|v| v.as_ref().map(|(_, e)| e.clone())).collect(),
        fix: Some(Fix::action(format!(
            "hibernate.c3p0.idle_test_period = {} (with a preferredTestQuery), hibernate.c3p0.timeout = {}, hibernate.c3p0.min_size = 0",
            below(t, 1),
            (t * 2 / 3).max(1)
        ))),
    });
    Ok(out)
}

fn hikari(conf: &PoolConf, t: u64, seen: PathSeen) -> Result<Vec<Finding>, String> {
    let mut out = vec![];
    let ka = num(conf, first(conf, &["keepaliveTime", "keepalive-time"]))?;
    let t_ms = t * 1000;
    match &ka {
        Some((k, e)) if *k > 0 && *k < HIKARI_MIN_KEEPALIVE_MS => out.push(Finding {
            severity: Severity::Warn,
            what: format!(
                "{}: keepaliveTime {k} ms is below HikariCP's minimum of {HIKARI_MIN_KEEPALIVE_MS} ms: HikariCP disables it (it logs \"keepaliveTime is less than 30000ms, disabling it\"), so idle connections outlive the path's {t} s untested",
                conf.path
            ),
            evidence: vec![e.clone()],
            fix: Some(Fix::action(hikari_fix(t_ms, seen))),
        }),
        Some((k, e)) if *k > 0 && *k < t_ms => out.push(Finding {
            severity: Severity::Info,
            what: format!("{}: keepaliveTime {k} ms pings idle connections before the path's {t} s", conf.path),
            evidence: vec![e.clone()],
            fix: None,
        }),
        _ => out.push(Finding {
            severity: Severity::Warn,
            what: format!(
                "{}: {}: idle connections outlive the path's {t} s; HikariCP tests one when it is taken, and on a path that drops silently that test waits for validationTimeout (5 s) or the driver's socket timeout (HikariCP issue 683: about 200 s) before a new connection is made",
                conf.path,
                match &ka {
                    Some((k, _)) => format!("keepaliveTime {k} ms is not below the timeout"),
                    None => "keepaliveTime is not set (0, off, in HikariCP's documentation; some releases default to 2 minutes: set it)".into(),
                }
            ),
            evidence: ka.iter().map(|(_, e)| e.clone()).collect(),
            fix: Some(Fix::action(hikari_fix(t_ms, seen))),
        }),
    }
    Ok(out)
}

/// The keepaliveTime line for a path timing out after `t_ms`, and what to do where it
/// cannot reach below the timeout.
fn hikari_fix(t_ms: u64, seen: PathSeen) -> String {
    format!(
        "keepaliveTime = {} (ms; HikariCP's minimum is 30000){}",
        below(t_ms, HIKARI_MIN_KEEPALIVE_MS),
        match (t_ms <= HIKARI_MIN_KEEPALIVE_MS, seen.keepalive_counts) {
            (false, _) => "",
            (true, Some(true)) => "; the timeout is below what keepaliveTime can reach: use TCP keepalive on the socket (shown to reset this path's timer)",
            (true, Some(false)) => "; the timeout is below what keepaliveTime can reach, and TCP keepalive does not reset this path's timer: raise the idle timeout of the path (the proxy's or the server's) above 30 s",
            (true, None) => "; the timeout is below what keepaliveTime can reach (whether TCP keepalive resets this path's timer was not measured): raise the idle timeout of the path (the proxy's or the server's) above 30 s",
        }
    )
}

fn pgbouncer(
    conf: &PoolConf,
    t: u64,
    os_keepidle: Option<u64>,
    seen: PathSeen,
) -> Result<Vec<Finding>, String> {
    let mut out = vec![];
    let idle = num(conf, conf.get("server_idle_timeout"))?;
    let check = num(conf, conf.get("server_check_delay"))?;
    let keepalive_on = conf.get("tcp_keepalive").is_none_or(|s| s.value != "0");
    let keepidle = num(conf, conf.get("tcp_keepidle"))?;
    // pgbouncer's defaults: server_idle_timeout 600 s, server_check_delay 30 s; keepalive
    // on with the OS's timers when tcp_keepidle is 0 or unset.
    let idle_s = idle.as_ref().map_or(600, |v| v.0);
    let kidle = keepidle
        .as_ref()
        .map(|v| v.0)
        .filter(|&k| k > 0)
        .or(os_keepidle);
    // TCP keepalive keeps the flow only on a path whose timer it resets.
    let kept_alive =
        seen.keepalive_counts == Some(true) && keepalive_on && kidle.is_some_and(|k| k < t);
    let closed_first = idle_s > 0 && idle_s < t;
    if !(closed_first || kept_alive) {
        out.push(Finding {
            severity: Severity::Warn,
            what: format!(
                "{}: server connections can sit idle past the path's {t} s: server_idle_timeout {} and TCP keepalive {} neither close nor refresh them first",
                conf.path,
                if idle_s == 0 { "0 (never)".to_string() } else { format!("{idle_s} s{}", if idle.is_none() { " (default)" } else { "" }) },
                match (keepalive_on, kidle) {
                    (false, _) => "off (tcp_keepalive = 0)".to_string(),
                    (true, Some(k)) => format!("probes first after {k} s{}", if keepidle.as_ref().is_none_or(|v| v.0 == 0) { " (the OS's tcp_keepalive_time)" } else { "" }),
                    (true, None) => "with unknown timers".to_string(),
                }
            ),
            evidence: [&idle, &keepidle].iter().filter_map(|v| v.as_ref().map(|(_, e)| e.clone())).collect(),
            // tcp_keepidle only where keepalive was shown to reset the path's timer.
            fix: Some(Fix::action(if seen.keepalive_counts == Some(true) {
                format!("server_idle_timeout = {} (or tcp_keepidle = {})", below(t, 1), below(t, 1))
            } else {
                format!("server_idle_timeout = {}", below(t, 1))
            })),
        });
    }
    let check_s = check.as_ref().map_or(30, |v| v.0);
    if check_s >= t {
        out.push(Finding {
            severity: Severity::Warn,
            what: format!(
                "{}: server_check_delay {check_s} s: a server connection idle for up to that long is reused without a check, past the path's {t} s",
                conf.path
            ),
            evidence: check.iter().map(|(_, e)| e.clone()).collect(),
            fix: Some(Fix::action(format!("server_check_delay = {}", below(t, 1)))),
        });
    }
    if out.is_empty() {
        out.push(Finding {
            severity: Severity::Info,
            what: format!(
                "{}: server connections are closed or kept alive before the path's {t} s",
                conf.path
            ),
            evidence: [&idle, &keepidle]
                .iter()
                .filter_map(|v| v.as_ref().map(|(_, e)| e.clone()))
                .collect(),
            fix: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_proc::pool_conf::parse_pool_conf;

    fn fixture(name: &str) -> PoolConf {
        let p = format!(
            "{}/../tpslab-proc/tests/fixtures/pool/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&p).unwrap();
        parse_pool_conf(name, &text).unwrap()
    }

    /// S5: a 30-minute proxy. The original pool (tested every 50 min, kept 83) is
    /// flagged with the settings that fix it; the fixed one (5 and 20 min, no minimum)
    /// passes.
    #[test]
    fn s5_before_is_flagged_and_after_passes() {
        let before = judge(
            &fixture("s5-before.hibernate.cfg.xml"),
            1800,
            Some(7200),
            PathSeen::UNKNOWN,
        )
        .unwrap();
        assert_eq!(before.len(), 1);
        assert_eq!(before[0].severity, Severity::Warn);
        assert!(
            before[0].what.contains("idle_test_period 3000 s"),
            "{}",
            before[0].what
        );
        assert!(before[0].what.contains("timeout 4980 s"));
        assert!(before[0].what.contains("min_size 5 keeps"));
        assert_eq!(
            before[0].evidence[0],
            "s5-before.hibernate.cfg.xml:14: hibernate.c3p0.idle_test_period = 3000"
        );
        assert_eq!(
            before[0].fix,
            Some(Fix::action("hibernate.c3p0.idle_test_period = 900 (with a preferredTestQuery), hibernate.c3p0.timeout = 1200, hibernate.c3p0.min_size = 0"))
        );
        let after = judge(
            &fixture("s5-after.hibernate.cfg.xml"),
            1800,
            Some(7200),
            PathSeen::UNKNOWN,
        )
        .unwrap();
        assert!(
            after.iter().all(|f| f.severity == Severity::Info),
            "{after:#?}"
        );
        // Behind a 4-minute timeout even the fixed pool is too slow.
        let short = judge(
            &fixture("s5-after.hibernate.cfg.xml"),
            240,
            Some(7200),
            PathSeen::UNKNOWN,
        )
        .unwrap();
        assert_eq!(short[0].severity, Severity::Warn);
    }

    #[test]
    fn hikari_and_pgbouncer_behind_an_nlb() {
        // AWS NLB: 350 s.
        let h = judge(
            &fixture("application.properties"),
            350,
            None,
            PathSeen::UNKNOWN,
        )
        .unwrap();
        assert_eq!(h[0].severity, Severity::Warn);
        assert!(h[0].what.contains("keepaliveTime is not set"));
        assert_eq!(
            h[0].fix.as_ref().unwrap().to_string(),
            "keepaliveTime = 175000 (ms; HikariCP's minimum is 30000)"
        );
        let p = judge(
            &fixture("pgbouncer.ini"),
            350,
            Some(7200),
            PathSeen::UNKNOWN,
        )
        .unwrap();
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(p[0].what.contains("server_idle_timeout 600 s and TCP keepalive probes first after 7200 s (the OS's tcp_keepalive_time)"), "{}", p[0].what);
        assert_eq!(
            p[0].evidence,
            ["pgbouncer.ini:9: server_idle_timeout = 600"]
        );
        // Keepalive not measured: no tcp_keepidle in the fix.
        assert_eq!(
            p[0].fix.as_ref().unwrap().to_string(),
            "server_idle_timeout = 175"
        );
        // With the OS's keepalive below the timeout, pgbouncer's keepalive keeps them
        // only where keepalive was shown to reset the path's timer.
        let shown = PathSeen::stated(Some(true));
        let ok = judge(&fixture("pgbouncer.ini"), 350, Some(120), shown).unwrap();
        assert_eq!(ok[0].severity, Severity::Info);
        let unknown = judge(&fixture("pgbouncer.ini"), 350, Some(120), PathSeen::UNKNOWN).unwrap();
        assert_eq!(unknown[0].severity, Severity::Warn, "{unknown:#?}");
        let p = judge(&fixture("pgbouncer.ini"), 350, Some(7200), shown).unwrap();
        assert_eq!(
            p[0].fix.as_ref().unwrap().to_string(),
            "server_idle_timeout = 175 (or tcp_keepidle = 175)"
        );
    }

    /// haproxy with `timeout client 5s` (measured: TCP keepalive does not reset its
    /// timer, it ends flows with a FIN). HikariCP cannot test below 30 s and disables a
    /// keepaliveTime under it; TCP keepalive is not offered as the way out; pgbouncer's
    /// keepalive keeps nothing.
    #[test]
    fn a_proxy_that_counts_data_only() {
        let data_only = PathSeen {
            keepalive_counts: Some(false),
            may_drop_silently: false,
        };
        let c = |text: &str| parse_pool_conf("hikari.properties", text).unwrap();
        let h = judge(&c("keepaliveTime=2000\n"), 5, None, data_only).unwrap();
        assert_eq!(h[0].severity, Severity::Warn);
        assert!(
            h[0].what.contains("below HikariCP's minimum"),
            "{}",
            h[0].what
        );
        let fix = h[0].fix.as_ref().unwrap().to_string();
        assert!(fix.contains("TCP keepalive does not reset"), "{fix}");
        assert!(!fix.contains("use TCP keepalive"), "{fix}");
        // Behind a 40 s proxy, 30 s passes; unset is flagged.
        let ok = judge(&c("keepaliveTime=30000\n"), 40, None, data_only).unwrap();
        assert_eq!(ok[0].severity, Severity::Info, "{ok:#?}");
        let unset = judge(&c("idleTimeout=600000\n"), 40, None, data_only).unwrap();
        assert_eq!(unset[0].severity, Severity::Warn);
        // 30 s reaches below a 40 s timeout: the fix says so, with no way out needed.
        assert_eq!(
            unset[0].fix.as_ref().unwrap().to_string(),
            "keepaliveTime = 30000 (ms; HikariCP's minimum is 30000)"
        );
        // pgbouncer with the OS's keepalive at 2 s: kept alive only where it counts.
        let pgb = judge(&fixture("pgbouncer.ini"), 350, Some(120), data_only).unwrap();
        assert_eq!(pgb[0].severity, Severity::Warn, "{pgb:#?}");
        // ... and its fix offers no tcp_keepidle right after saying keepalive does not
        // count here (issue 59).
        let fix = pgb[0].fix.as_ref().unwrap().to_string();
        assert!(!fix.contains("tcp_keepidle"), "{fix}");
        // HikariCP below 30 s with keepalive not measured: no TCP keepalive offered.
        let h = judge(&c("keepaliveTime=2000\n"), 5, None, PathSeen::UNKNOWN).unwrap();
        let fix = h[0].fix.as_ref().unwrap().to_string();
        assert!(
            !fix.contains("use TCP keepalive") && fix.contains("not measured"),
            "{fix}"
        );
    }

    #[test]
    fn a_value_that_is_not_a_number_names_its_line() {
        let c =
            parse_pool_conf("c3p0.properties", "c3p0.idleConnectionTestPeriod = soon\n").unwrap();
        assert_eq!(
            judge(&c, 1800, None, PathSeen::UNKNOWN).unwrap_err(),
            "c3p0.properties:1: c3p0.idleConnectionTestPeriod \"soon\" is not a whole number"
        );
    }
}
