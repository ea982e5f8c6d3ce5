//! `/proc/stat`: CPU time and scheduler totals.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use crate::common::{dec_u64, for_each_line, ParseError};

/// CPU time from a `cpu`/`cpuN` line of `/proc/stat`, in USER_HZ ticks
/// (normally 1/100 s), cumulative since boot. Value columns are 1-based after
/// the label; missing trailing columns are 0. `guest`/`guest_nice`
/// (columns 9, 10) are already included in `user`/`nice` and are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CpuTimes {
    /// Normal user mode (column 1).
    pub user: u64,
    /// Niced user mode (column 2).
    pub nice: u64,
    /// Kernel mode (column 3).
    pub system: u64,
    /// Idle (column 4).
    pub idle: u64,
    /// Idle while waiting for I/O (column 5).
    pub iowait: u64,
    /// Hard interrupts (column 6).
    pub irq: u64,
    /// Soft interrupts, where most network receive processing runs (column 7).
    pub softirq: u64,
    /// Stolen by the hypervisor (column 8).
    pub steal: u64,
}

impl CpuTimes {
    /// Non-idle ticks: user + nice + system + irq + softirq + steal.
    pub fn busy(&self) -> u64 {
        self.user
            .saturating_add(self.nice)
            .saturating_add(self.system)
            .saturating_add(self.irq)
            .saturating_add(self.softirq)
            .saturating_add(self.steal)
    }

    /// All ticks: busy + idle + iowait.
    pub fn total(&self) -> u64 {
        self.busy()
            .saturating_add(self.idle)
            .saturating_add(self.iowait)
    }
}

/// Parsed `/proc/stat` (the parts tpslab uses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelStat {
    /// Aggregate of all CPUs (the `cpu ` line).
    pub total: CpuTimes,
    /// `(cpu id, times)` from each `cpuN` line, in file order (offline CPUs
    /// are absent, so ids may have gaps).
    pub per_cpu: Vec<(usize, CpuTimes)>,
    /// Context switches since boot, all CPUs (`ctxt` line; 0 if absent).
    pub ctxt: u64,
    /// Forks since boot (`processes` line; 0 if absent).
    pub processes: u64,
    /// Runnable tasks right now, a gauge (`procs_running` line; 0 if absent).
    pub procs_running: u64,
}

/// Parse `/proc/stat`. The aggregate `cpu` line is required; unknown lines
/// (`intr`, `softirq`, `btime`, ...) are ignored without validation.
pub fn parse_stat<R: BufRead>(r: R, file: &str) -> Result<KernelStat, ParseError> {
    let mut out = KernelStat::default();
    let mut saw_total = false;
    for_each_line(r, file, |n, line| {
        let mut it = line.split_whitespace();
        let Some(key) = it.next() else {
            return Ok(());
        };
        let single = |it: &mut std::str::SplitWhitespace<'_>| -> Result<u64, ParseError> {
            let v = it
                .next()
                .ok_or_else(|| ParseError::new(file, n, format!("{key}: missing value")))?;
            dec_u64(v)
                .ok_or_else(|| ParseError::new(file, n, format!("{key}: {v:?} is not decimal")))
        };
        if let Some(id) = key.strip_prefix("cpu") {
            let mut v = [0u64; 8];
            for (i, f) in it.enumerate() {
                let x = dec_u64(f).ok_or_else(|| {
                    ParseError::new(
                        file,
                        n,
                        format!("{key}: column {} {f:?} is not decimal", i + 1),
                    )
                })?;
                if let Some(slot) = v.get_mut(i) {
                    *slot = x;
                }
            }
            let t = CpuTimes {
                user: v[0],
                nice: v[1],
                system: v[2],
                idle: v[3],
                iowait: v[4],
                irq: v[5],
                softirq: v[6],
                steal: v[7],
            };
            if id.is_empty() {
                out.total = t;
                saw_total = true;
            } else {
                let cpu = dec_u64(id)
                    .and_then(|c| usize::try_from(c).ok())
                    .ok_or_else(|| ParseError::new(file, n, format!("bad cpu label {key:?}")))?;
                out.per_cpu.push((cpu, t));
            }
        } else {
            match key {
                "ctxt" => out.ctxt = single(&mut it)?,
                "processes" => out.processes = single(&mut it)?,
                "procs_running" => out.procs_running = single(&mut it)?,
                _ => {}
            }
        }
        Ok(())
    })?;
    if !saw_total {
        return Err(ParseError::new(file, 0, "no aggregate \"cpu\" line"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_cpu_lines() {
        let s = "cpu  10 1 5 100\ncpu3 10 1 5 100 2 3 4 5 6 7 8\nctxt 9\n";
        let k = parse_stat(s.as_bytes(), "stat").unwrap();
        assert_eq!(k.total.iowait, 0);
        assert_eq!(k.total.busy(), 16);
        assert_eq!(k.total.total(), 116);
        assert_eq!(k.per_cpu[0].0, 3);
        assert_eq!(k.per_cpu[0].1.steal, 5);
        assert_eq!(k.ctxt, 9);
        assert!(parse_stat("ctxt 1\n".as_bytes(), "stat").is_err());
    }
}
