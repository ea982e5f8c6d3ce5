//! The one handle for a server tpslab starts for a run and stops afterwards: the user's
//! own server from a shell command with `{port}` (`sweep --server-cmd`, `diagnose udp
//! --server-cmd`), run by `sh -c` as a process group bound to tpslab's life and stopped as
//! a whole ([`tpslab_net::process::Group`]), or tpslab's reference server in a child
//! process (`ramp tcp` without a target), stopped by its PID. A server tpslab did not start
//! is named by `--pid` instead and never stopped.

use anyhow::{anyhow, bail, Context, Result};
use std::io::BufRead;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tpslab_net::process::Group;
use tpslab_net::sched::SchedPolicy;

/// What was started: tpslab's own server (one child) or the user's command (a group).
enum Started {
    Child(Child),
    Group(Group),
}

/// A server started for one run and stopped (SIGTERM, then SIGKILL after a second: the
/// child by its PID, the user's command as a whole group) when dropped.
pub struct ServerProcess {
    started: Started,
    /// The server's PID: the child's, or for a user's command the process of its group
    /// that owns the UDP socket on the port (not the shell running it).
    pid: u32,
    /// Where it listens.
    pub addr: SocketAddr,
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
    /// The server's process ID (see [`ServerProcess`]'s `pid`).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Starts tpslab's own executable with `args` (a `serve` command that binds port 0,
    /// with a `--duration` so it ends by itself even if tpslab is killed) and reads the
    /// address it listens on from the first line it prints. Its stderr is the terminal's
    /// (quiet: only its errors).
    pub fn tpslab(args: &[String]) -> Result<ServerProcess> {
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
            pid: child.id(),
            started: Started::Child(child),
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

    /// Starts `template` with a free port for `{port}`, as `sh -c` (so `cd DIR && srv`,
    /// `VAR=1 srv`, `a; b` and pipelines work as in a shell) in a process group bound to
    /// tpslab ([`Group`]: stopped with tpslab even when it is SIGKILLed), and waits (at
    /// most 20 s: a JVM compiling a single-file source takes seconds) until a process of
    /// that group owns a UDP socket on the port: that process is the server (its PID is
    /// watched and reported). Applies the cell's cpus/sched to every thread of it, like
    /// taskset -p / chrt -p.
    /// Errors: the command cannot start, its group ends before listening, or no process
    /// of it listens within 20 s (naming a process outside the group that holds the port,
    /// e.g. a server that daemonized).
    pub fn user_udp(template: &str, cpus: &[usize], sched: SchedPolicy) -> Result<ServerProcess> {
        let port = tpslab_net::UdpSock::bind("127.0.0.1:0".parse().unwrap(), false)?
            .local_addr()
            .port();
        Self::user(template, port, false, cpus, sched)
    }

    /// As [`ServerProcess::user_udp`] on a port the caller names (`load http --http3
    /// --server-cmd`: the URL's port). Errors: as `user_udp`'s.
    pub fn user_udp_on(template: &str, port: u16) -> Result<ServerProcess> {
        Self::user(template, port, false, &[], SchedPolicy::Other)
    }

    /// As [`ServerProcess::user_udp`] for a TCP server (`capacity tcp --server-cmd`): a
    /// free TCP port for `{port}`, and the server is the process of the group that owns a
    /// TCP socket on it (its listening socket). Errors: as `user_udp`'s.
    pub fn user_tcp(template: &str) -> Result<ServerProcess> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .context("finding a free TCP port")?
            .local_addr()?
            .port();
        Self::user(template, port, true, &[], SchedPolicy::Other)
    }

    /// [`ServerProcess::user_udp`] (or with `tcp`, [`ServerProcess::user_tcp`]) on `port`.
    fn user(
        template: &str,
        port: u16,
        tcp: bool,
        cpus: &[usize],
        sched: SchedPolicy,
    ) -> Result<ServerProcess> {
        let proto = if tcp { "TCP" } else { "UDP" };
        let cmd = template.replace("{port}", &port.to_string());
        // A new file only (never through an existing name or symlink), removed on drop.
        let log = std::env::temp_dir().join(format!(
            "tpslab-server-{}-{port}-{}.log",
            std::process::id(),
            tpslab_net::mono_ns()
        ));
        // The user's alone: a server's stderr may name hosts, paths, credentials.
        let err = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&log)
            .with_context(|| format!("--server-cmd: {}", log.display()))?;
        let mut sh = Command::new("sh");
        sh.args(["-c", &cmd])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        let group = match Group::spawn(sh) {
            Ok(g) => g,
            Err(e) => {
                let _ = std::fs::remove_file(&log);
                return Err(e).with_context(|| format!("--server-cmd \"{cmd}\""));
            }
        };
        let mut srv = ServerProcess {
            pid: group.pid(),
            started: Started::Group(group),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log: Some(log),
        };
        let Started::Group(group) = &srv.started else {
            unreachable!("started as a group above")
        };
        let t0 = std::time::Instant::now();
        let pid = loop {
            let members = group.members();
            let (owner, outside) = socket_owner(&members, port, tcp);
            if let Some(pid) = owner {
                break pid;
            }
            if members.is_empty() {
                if let Some(end) = group.ended() {
                    let (st, ok) = match end {
                        Ok(st) => (st.to_string(), st.success()),
                        Err(e) => (format!("status unknown: {e}"), false),
                    };
                    // A server that forks into the background and exits leaves no one.
                    let hint = if ok {
                        "; a server that daemonizes must be kept in the foreground"
                    } else {
                        ""
                    };
                    bail!(
                        "--server-cmd \"{cmd}\" exited ({st}) before listening on port {port}{hint}; {}",
                        srv.log.as_deref().map_or(String::new(), tail)
                    );
                }
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let held = outside.map_or(String::new(), |p| {
                    format!(
                        " (process {p}, outside the command's process group, holds it: did the \
                         server daemonize? keep it in the foreground)"
                    )
                });
                bail!(
                    "--server-cmd \"{cmd}\": no process of it has a {proto} socket on port {port} \
                     after 20 s{held}"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        srv.pid = pid;
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

/// Which process owns a UDP (with `tcp`, TCP) socket bound to `port`: the first (lowest
/// PID) of `members` holding one (from the socket inodes in `/proc/PID/fd` matched against
/// the UDP tables of that process's network namespace, `/proc/PID/net/udp{,6}`, or its
/// TCP tables); else, if a socket on the port exists there but none of `members` holds
/// it, some process outside them that does (for the error message), if one can be seen.
fn socket_owner(members: &[u32], port: u16, tcp: bool) -> (Option<u32>, Option<u32>) {
    let Some(first) = members.first() else {
        return (None, None);
    };
    let root = PathBuf::from(format!("/proc/{first}"));
    let socks = if tcp {
        tpslab_proc::live::tcp(&root).unwrap_or_default()
    } else {
        let mut v = tpslab_proc::live::udp(&root).unwrap_or_default();
        v.extend(tpslab_proc::live::udp6(&root).unwrap_or_default());
        v
    };
    let mut on_port: Vec<u64> = socks
        .iter()
        .filter(|s| s.inode != 0 && s.local.port() == port)
        .map(|s| s.inode)
        .collect();
    if on_port.is_empty() {
        return (None, None);
    }
    on_port.sort_unstable();
    let holds = |pid: u32| {
        tpslab_proc::live::socket_inodes(pid)
            .iter()
            .any(|i| on_port.binary_search(i).is_ok())
    };
    if let Some(&pid) = members.iter().find(|&&p| holds(p)) {
        return (Some(pid), None);
    }
    let outside = std::fs::read_dir("/proc").ok().and_then(|rd| {
        rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|&p| !members.contains(&p) && holds(p))
    });
    (None, outside)
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(log) = &self.log {
            let _ = std::fs::remove_file(log);
        }
        tpslab_proc::live::forget_under(&PathBuf::from(format!("/proc/{}", self.pid)));
        match &mut self.started {
            // Every process of the group: SIGTERM, then SIGKILL after a second.
            Started::Group(g) => g.stop(Duration::from_secs(1)),
            Started::Child(child) => {
                // SIGTERM, then SIGKILL after a second: only the process we started, by PID.
                let _ = tpslab_net::process::terminate(child);
                let t0 = std::time::Instant::now();
                while t0.elapsed() < Duration::from_secs(1) {
                    if matches!(child.try_wait(), Ok(Some(_))) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
