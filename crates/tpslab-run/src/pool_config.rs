//! A connection pool's configuration file as `probe idle --pool-config` and `doctor
//! --pool-config` take it: read safely, parsed, its settings checked.

use anyhow::{anyhow, Result};
use std::path::Path;
use tpslab_analysis::doctor::pool;
use tpslab_proc::pool_conf::{parse_pool_conf, PoolConf};

/// Reads and parses a connection pool's configuration (hibernate.cfg.xml,
/// c3p0.properties, HikariCP .properties, pgbouncer.ini: a regular file of at most
/// [`crate::input::PLAN_MAX_BYTES`]), and checks that every setting judged is a number.
/// Errors (one line, naming `--pool-config` and the file): unreadable, not a pool file,
/// malformed (with its line).
pub fn read(p: &Path) -> Result<PoolConf> {
    let text = crate::input::read_text("--pool-config", p, crate::input::PLAN_MAX_BYTES, false)?;
    let conf = parse_pool_conf(&p.display().to_string(), &text)?;
    pool::judge(
        &conf,
        1,
        None,
        tpslab_analysis::doctor::workload::PathSeen::UNKNOWN,
    )
    .map_err(|e| anyhow!(e))?;
    Ok(conf)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pool_file_is_read_and_a_setting_not_a_number_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("hikari.properties");
        std::fs::write(&ok, "idleTimeout=600000\nmaxLifetime=1800000\n").unwrap();
        let conf = super::read(&ok).unwrap();
        assert_eq!(conf.kind, tpslab_proc::pool_conf::PoolKind::Hikari);
        assert_eq!(conf.get("idleTimeout").unwrap().value, "600000");
        let bad = dir.path().join("bad.properties");
        std::fs::write(&bad, "keepaliveTime=ten minutes\n").unwrap();
        let e = super::read(&bad).unwrap_err().to_string();
        assert!(e.contains("keepaliveTime"), "{e}");
        let e = super::read(&dir.path().join("missing.ini"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--pool-config "), "{e}");
    }
}
