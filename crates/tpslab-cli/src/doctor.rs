//! `tpslab doctor`: audits the sysctl files a host applies at boot, the network settings
//! it runs with and its NICs, for the workload stated with `--for`. Reads only; changes
//! nothing (`--write-snippet` writes a sysctl.d file for a person to review).

use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tpslab_plan::doctor::{Workload, WorkloadFlags};
use tpslab_record::doctor::Severity;
use tpslab_run::doctor::DoctorSetup;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The tree whose sysctl files to audit (a container image, a config repository);
    /// running values always come from this host's /proc/sys.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The workload the host is for: udp (--rate PPS --burst N --size BYTES [--sockets
    /// N]), tcp (--rtt DUR --rate RATE), pool (--idle-timeout DUR [--pool-validate DUR]
    /// [--pool-max-idle DUR] [--keepalive-counts yes|no]).
    #[arg(long = "for", value_name = "udp|tcp|pool")]
    pub workload: Option<String>,
    /// Rate: datagrams per second for udp (200000, 200k), bits per second for tcp (80mbit).
    #[arg(long, value_name = crate::flags::RATE_OR_BITRATE, value_parser = crate::flags::rate_or_bitrate())]
    pub rate: Option<String>,
    /// Datagrams that arrive back to back in one burst (udp; 1 for a steady load).
    #[arg(long)]
    pub burst: Option<u64>,
    /// UDP payload, bytes or a size such as 1KiB (udp).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub size: Option<u64>,
    /// Sockets receiving at once, each with its own buffer (udp; default 1).
    #[arg(long)]
    pub sockets: Option<u64>,
    /// Round-trip time of the path (tcp), e.g. 30ms.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub rtt: Option<Duration>,
    /// Idle time after which a middlebox on the path forgets a connection (pool), e.g. 350s.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub idle_timeout: Option<Duration>,
    /// How often the pool tests idle connections (pool), e.g. 50m.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub pool_validate: Option<Duration>,
    /// How long the pool keeps an idle connection (pool), e.g. 83m.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub pool_max_idle: Option<Duration>,
    /// Whether TCP keepalive resets the middlebox's idle timer, as `probe idle` measured
    /// it (pool; default: not known). yes: a keepalive below the timeout is offered as a
    /// fix; no, or not given: it is not, the pool's own test query or idle lifetime is.
    #[arg(long, value_name = "yes|no", value_parser = clap::builder::BoolishValueParser::new())]
    pub keepalive_counts: Option<bool>,
    /// A connection pool's configuration to judge against --idle-timeout (pool;
    /// repeatable): hibernate.cfg.xml, c3p0.properties, HikariCP .properties,
    /// pgbouncer.ini.
    #[arg(long, value_name = "FILE")]
    pub pool_config: Vec<PathBuf>,
    /// Exit 1 when a finding is this severe or more: warn or error.
    #[arg(long, value_name = "warn|error")]
    pub fail_on: Option<String>,
    /// Write the sysctl.d file that applies every sysctl fix found, for review (refuses
    /// to overwrite a file).
    #[arg(long, value_name = "FILE")]
    pub write_snippet: Option<PathBuf>,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
}

/// A validated `doctor`: the audit and the gate.
#[derive(Debug)]
pub struct DoctorPlan {
    /// What to audit.
    pub setup: DoctorSetup,
    /// The least severe finding that fails the run (`--fail-on`).
    pub fail_on: Option<Severity>,
}

impl DoctorArgs {
    /// The `--for` workload, validated (None without `--for`).
    fn workload(&self) -> Result<Option<Workload>> {
        let f = WorkloadFlags {
            rate: self.rate.clone(),
            burst: self.burst,
            size: self.size,
            sockets: self.sockets,
            rtt: self.rtt,
            idle_timeout: self.idle_timeout,
            pool_validate: self.pool_validate,
            pool_max_idle: self.pool_max_idle,
            keepalive_counts: self.keepalive_counts,
        };
        Ok(f.workload(self.workload.as_deref())?)
    }

    /// The validated plan: the gate, the workload, the pool files (read and checked), the
    /// output files, a `--write-snippet` that does not exist yet, a `--root` folder.
    pub fn plan(&self) -> Result<DoctorPlan> {
        let a = self;
        let fail_on =
            tpslab_analysis::doctor::fail_on(a.fail_on.as_deref()).map_err(|e| anyhow!(e))?;
        let workload = a.workload()?;
        if !a.pool_config.is_empty() && !matches!(workload, Some(Workload::Pool { .. })) {
            bail!("--pool-config is judged against a timeout: give --for pool --idle-timeout DUR");
        }
        let pools = a
            .pool_config
            .iter()
            .map(|p| tpslab_run::pool_config::read(p))
            .collect::<Result<Vec<_>>>()?;
        a.record.check(false)?;
        if let Some(p) = &a.write_snippet {
            // Its folders first: whether a file exists is not asked through a planted link.
            crate::flags::check_output("--write-snippet", p, false)?;
            if std::fs::symlink_metadata(p).is_ok() {
                bail!(
                    "--write-snippet {}: exists; doctor does not overwrite (give a new file name)",
                    p.display()
                );
            }
        }
        if !a.root.is_dir() {
            bail!("--root {}: not a folder", a.root.display());
        }
        let setup = DoctorSetup {
            root: a.root.clone(),
            workload,
            pools,
        };
        Ok(DoctorPlan { setup, fail_on })
    }
}
