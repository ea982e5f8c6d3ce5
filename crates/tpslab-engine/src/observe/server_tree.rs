//! A server's processes at a moment: the PID given (`--pid`) and its descendants (a
//! prefork server's master and workers: nginx, gunicorn, php-fpm, apache prefork), found
//! by [`tpslab_proc::tree::read_tree`], with each process's CPU time and, when asked,
//! each thread's schedstat. Two reads' CPU times give the tree's CPU use between them,
//! with the processes that started between them (all of their time) and those that
//! ended and were waited for (their time moved to their parent's cutime+cstime).
//! Shared by `ramp` (each step's server CPU) and `capacity tcp|http` (each step's
//! threads).

use tpslab_proc::pid::SchedStat;

/// The server's processes (the PID and its descendants) and their threads at a moment.
#[derive(Debug, Clone, Default)]
pub struct ServerTree {
    /// Each process's CPU time with its waited-for children's (utime + stime + cutime +
    /// cstime of /proc/PID/stat), USER_HZ ticks; the PID first. Empty when the PID could
    /// not be read.
    pub cpu: Vec<(u32, u64)>,
    /// Each thread of each process with its schedstat (/proc/PID/task/TID/schedstat;
    /// those readable); empty when read by [`ServerTree::processes`].
    pub threads: Vec<(u32, SchedStat)>,
}

impl ServerTree {
    /// The processes of `pid`'s tree and every thread's schedstat.
    pub fn read(pid: u32) -> ServerTree {
        let mut t = ServerTree::processes(pid);
        t.threads = t.cpu.iter().flat_map(|(p, _)| schedstats(*p)).collect();
        t
    }

    /// The processes of `pid`'s tree and their CPU times only (no thread is read).
    pub fn processes(pid: u32) -> ServerTree {
        let procs = tpslab_proc::tree::read_tree(pid);
        ServerTree {
            cpu: procs.iter().map(|(p, t)| (*p, t.with_children())).collect(),
            threads: vec![],
        }
    }

    /// The processes' PIDs, the PID first.
    pub fn pids(&self) -> Vec<u32> {
        self.cpu.iter().map(|(p, _)| *p).collect()
    }

    /// The CPU time of the whole tree, USER_HZ ticks.
    pub fn cpu_ticks(&self) -> u64 {
        self.cpu.iter().map(|(_, c)| c).sum()
    }

    /// CPU time the tree used from `before` to this read, seconds; None when either read
    /// found no process. A process that ended between the reads and was not waited for by
    /// a process of the tree (reparented away) takes its time with it.
    pub fn cpu_s_since(&self, before: &ServerTree) -> Option<f64> {
        if self.cpu.is_empty() || before.cpu.is_empty() {
            return None;
        }
        Some(
            self.cpu_ticks().saturating_sub(before.cpu_ticks()) as f64
                / tpslab_net::clock_ticks_per_s(),
        )
    }

    /// The CPUs any of the processes may run on (the union of their
    /// Cpus_allowed_list), counted; None when none was readable.
    pub fn cpus(&self) -> Option<usize> {
        let mut cpus: Vec<usize> = self
            .cpu
            .iter()
            .filter_map(|(p, _)| allowed_cpus(*p))
            .flatten()
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        (!cpus.is_empty()).then_some(cpus.len())
    }
}

/// The CPUs `pid` may run on (its Cpus_allowed_list), when readable.
fn allowed_cpus(pid: u32) -> Option<Vec<usize>> {
    let st = tpslab_proc::live::task_status(std::path::Path::new(&format!("/proc/{pid}/status")))
        .ok()?;
    tpslab_proc::pid::parse_cpu_list(&st.cpus_allowed_list).ok()
}

/// Each thread of `pid` with its schedstat (those readable).
fn schedstats(pid: u32) -> Vec<(u32, SchedStat)> {
    tpslab_proc::live::task_ids(pid)
        .into_iter()
        .filter_map(|tid| {
            tpslab_proc::live::schedstat(std::path::Path::new(&format!("/proc/{pid}/task/{tid}")))
                .ok()
                .map(|s| (tid, s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_burns_cpu_counts_in_its_parents_tree() {
        let me = std::process::id();
        let t0 = ServerTree::read(me);
        assert_eq!(t0.pids()[0], me);
        assert!(!t0.threads.is_empty());
        assert!(t0.cpus().is_some_and(|n| n >= 1));
        // A child busy for about 100 ms of CPU, then ended and waited for: its time is
        // in this process's cutime+cstime, so in the tree's.
        let ok = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .expect("run sh");
        assert!(ok.success());
        let t1 = ServerTree::processes(me);
        let own = |t: &ServerTree| t.cpu[0].1;
        let used = t1.cpu_s_since(&t0).unwrap();
        assert!(used > 0.0, "{used}");
        assert!(own(&t1) > own(&t0));
        assert_eq!(ServerTree::processes(u32::MAX).cpu_s_since(&t0), None);
    }
}
