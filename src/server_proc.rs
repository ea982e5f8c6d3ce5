//! The one handle for a server tpslab starts for a run and stops afterwards, by its PID
//! only: the user's own server from a shell command with `{port}` (`sweep --server-cmd`,
//! `diagnose udp --server-cmd`), or tpslab's reference server in a child process (`ramp
//! tcp` without a target). A server tpslab did not start is named by `--pid` instead and
//! never stopped.

use anyhow::{anyhow, bail, Context, Result};
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tpslab_net::sched::SchedPolicy;

/// A server started for one run and stopped (SIGTERM, then SIGKILL after a second, by
/// PID) when dropped.
pub(crate) struct ServerProcess {
    child: Child,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Its stderr, kept to explain a server that exits early; removed on drop.
    log: Option<PathBuf>,
}

/// The last lines of a server's stderr, on one line, for an error message.
fn tail(log: &std::path::Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = lines[lines.len().saturating_sub(2)..].join(" | ");
    if last.is_empty() {
        "it wrote nothing to stderr".into()
    } else {
        format!("its stderr ends: {last}")
    }
}

impl ServerProcess {
    /// Its process ID.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts tpslab's own executable with `args` (a `serve` command that binds port 0,
    /// with a `--duration` so it ends by itself even if tpslab is killed) and reads the
    /// address it listens on from the first line it prints. Its stderr is the terminal's
    /// (quiet: only its errors).
    pub(crate) fn tpslab(args: &[String]) -> Result<ServerProcess> {
        let exe = std::env::current_exe().context("finding tpslab's own executable")?;
        // -q: its progress and its "stopping" at the SIGTERM that ends it are not the user's.
        let mut child = Command::new(exe)
            .arg("-q")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the reference server")?;
        let out = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("no stdout of the server"))?;
        // Stopped by drop from here on, whatever happens next.
        let mut srv = ServerProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log: None,
        };
        let mut line = String::new();
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .context("reading the server's first line")?;
        srv.addr = line
            .split_whitespace()
            .find_map(|w| w.parse::<SocketAddr>().ok())
            .ok_or_else(|| anyhow!("the reference server did not start: {line:?}"))?;
        Ok(srv)
    }

    /// Starts `template` with a free port and waits (at most 20 s: a JVM compiling a
    /// single-file source takes seconds) until it listens;
    /// applies the cell's cpus/sched to every thread of it, like taskset -p / chrt -p.
    pub(crate) fn user_udp(
        template: &str,
        cpus: &[usize],
        sched: SchedPolicy,
    ) -> Result<ServerProcess> {
        let port = tpslab_net::UdpSock::bind("127.0.0.1:0".parse().unwrap(), false)?
            .local_addr()
            .port();
        let cmd = template.replace("{port}", &port.to_string());
        // A new file only (never through an existing name or symlink), removed on drop.
        let log = std::env::temp_dir().join(format!(
            "tpslab-server-{}-{port}-{}.log",
            std::process::id(),
            tpslab_net::mono_ns()
        ));
        let err = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&log)
            .with_context(|| format!("--server-cmd: {}", log.display()))?;
        let child = std::process::Command::new("sh")
            .args(["-c", &format!("exec {cmd}")])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(err)
            .spawn()
            .with_context(|| format!("--server-cmd \"{cmd}\""))?;
        let mut srv = ServerProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log: Some(log),
        };
        let pid = srv.child.id();
        let target = tpslab_engine::observe::SocketMatch {
            port: Some(port),
            ..Default::default()
        };
        let root = PathBuf::from(format!("/proc/{pid}"));
        let t0 = std::time::Instant::now();
        while tpslab_engine::observe::socket_queue(&root, &target).0 == 0 {
            if let Some(st) = srv.child.try_wait()? {
                bail!(
                    "--server-cmd \"{cmd}\" exited ({st}) before listening on port {port}; {}",
                    srv.log.as_deref().map_or(String::new(), tail)
                );
            }
            if t0.elapsed() > Duration::from_secs(20) {
                bail!("--server-cmd \"{cmd}\": no UDP socket on port {port} after 20 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for tid in tpslab_proc::live::task_ids(pid) {
            if !cpus.is_empty() {
                tpslab_net::sched::set_affinity_of(tid, cpus)?;
            }
            if sched != SchedPolicy::Other {
                tpslab_net::sched::set_policy_of(tid, sched)?;
            }
        }
        Ok(srv)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(log) = &self.log {
            let _ = std::fs::remove_file(log);
        }
        tpslab_proc::live::forget_under(&PathBuf::from(format!("/proc/{}", self.child.id())));
        // SIGTERM, then SIGKILL after a second: only the process we started, by PID.
        let _ = tpslab_net::process::terminate(&self.child);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_secs(1) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
