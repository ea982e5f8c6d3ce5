//! Process-level system calls the binary needs: the SIGPIPE disposition at start-up,
//! terminating a child by PID, and [`Group`]: a command tpslab starts for a run, bound to
//! tpslab's life, stopped as a whole. Kept here so `unsafe` stays in this crate.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Restores the default action of SIGPIPE (terminate quietly), as other command-line
/// tools have it: `tpslab ... | head` then ends without a panic in `println!`. Call at
/// start-up, before any thread exists.
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL touches no memory of ours.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Runs `f` with SIGPIPE blocked on this thread, so a write to a pipe or FIFO whose
/// reader has gone fails with EPIPE instead of ending the process (SIGPIPE's default action,
/// which [`default_sigpipe`] keeps for standard output: `tpslab ... | head`). A SIGPIPE
/// raised meanwhile (it is sent to the writing thread) is consumed before the thread's mask
/// is restored, also when `f` panics.
pub fn without_sigpipe<T>(f: impl FnOnce() -> T) -> T {
    struct Restore {
        old: libc::sigset_t,
        set: libc::sigset_t,
    }
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: sigsets initialised by sigemptyset/pthread_sigmask below; the calls
            // write only into locals.
            unsafe {
                let already = libc::sigismember(&self.old, libc::SIGPIPE) == 1;
                let mut pending: libc::sigset_t = std::mem::zeroed();
                if !already
                    && libc::sigpending(&mut pending) == 0
                    && libc::sigismember(&pending, libc::SIGPIPE) == 1
                {
                    let zero = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    libc::sigtimedwait(&self.set, std::ptr::null_mut(), &zero);
                }
                libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
            }
        }
    }
    // SAFETY: zeroed sigset_t values are filled by sigemptyset/pthread_sigmask before use;
    // pthread_sigmask changes this thread's mask only.
    let _restore = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        Restore { old, set }
    };
    f()
}

/// Sends SIGTERM to `child`, a process this program started and has not reaped yet (by
/// its PID, never by name; after `wait` the PID may belong to another process).
/// Errors: the process is gone (ESRCH) or not ours to signal (EPERM).
pub fn terminate(child: &Child) -> std::io::Result<()> {
    let pid =
        i32::try_from(child.id()).map_err(|_| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: kill() on a PID we own; it reads no memory of ours.
    if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A command started in its own process group and bound to this process's life; stopped
/// as a whole (SIGTERM to the group, SIGKILL after the grace) by [`Group::stop`] or on
/// drop.
///
/// How it is bound to tpslab, even when tpslab is SIGKILLed:
/// - The command runs as the first process of a new PID namespace (when the kernel allows
///   it: as root). When that process ends, the kernel SIGKILLs every other process of the
///   namespace, whatever their process group or session (`sh -c 'cd /x && srv | cat'`:
///   the shell's children too, which a parent-death signal alone would not reach).
/// - That first process has PR_SET_PDEATHSIG = SIGKILL. The kernel sends it when the
///   *thread* that forked it ends, not the process; so a dedicated thread spawns the
///   command and lives until the command has ended and is reaped (the choice: no caller
///   thread, which could end before the server, is ever its parent). That thread also
///   makes the namespace: `unshare(CLONE_NEWPID)` acts on its own later children only.
/// - A process SIGKILLed between fork and that prctl would leave the command unbound: the
///   child checks, after the prctl, that this process is still alive (a pidfd of it), and
///   fails the spawn otherwise.
///
/// Without the namespace (not root: EPERM), a SIGKILL of tpslab kills the first process
/// only; its own children, e.g. the stages of a pipeline, outlive it. A normal stop
/// reaches every process still in the group either way.
///
/// A namespace's first process ignores signals it has no handler for unless they come as
/// SIGKILL from outside: at a stop, a first process that would have died at SIGTERM (no
/// handler, not ignored) and has no one left in its group is SIGKILLed at once, as SIGTERM
/// would have ended it outside a namespace.
///
/// PIDs here are as this process sees them (its namespace), in `/proc` too.
pub struct Group {
    pid: u32,
    in_pid_ns: bool,
    /// The leader's end, once it ended (it stays unreaped, a zombie holding its PID and so
    /// the group's ID, until the keeper is released).
    ended: Arc<(Mutex<Option<Ended>>, Condvar)>,
    /// Dropped to let the keeper reap the leader and end.
    release: Option<mpsc::Sender<()>>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

/// How the first process ended: its wait status, or the errno of a waitid that failed.
type Ended = Result<ExitStatus, i32>;

/// The leader's wait status once it has ended, without reaping it (waitid WNOWAIT);
/// blocks until then.
fn wait_nowait(pid: u32) -> std::io::Result<ExitStatus> {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid value to be filled by waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes only into `info`, which lives for the call.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            // SAFETY: waitid succeeded with WEXITED, so the CLD_* fields are set.
            let status = unsafe { info.si_status() };
            let raw = match info.si_code {
                libc::CLD_EXITED => (status & 0xff) << 8,
                libc::CLD_DUMPED => status | 0x80,
                _ => status,
            };
            return Ok(ExitStatus::from_raw(raw));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A pidfd of this process (None where the kernel has none, before 5.3).
fn pidfd_of_self() -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    // SAFETY: a descriptor the kernel just gave us and nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn send(pid: i32, sig: i32) -> bool {
    // SAFETY: kill() reads no memory of ours; callers pass the group's own IDs.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Reads at most 64 KiB of a /proc file (None if it cannot be read).
fn read_proc(path: &str) -> Option<String> {
    let mut s = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(64 << 10)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

/// (state letter, process group ID) from the text of `/proc/PID/stat` (fields 3 and 5;
/// the command name in parentheses may hold spaces and parentheses). None if malformed.
pub fn stat_state_pgrp(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    Some((state, f.next()?.parse().ok()?))
}

/// Whether SIGTERM would end the process whose `/proc/PID/status` text this is: neither
/// caught (`SigCgt`) nor ignored (`SigIgn`, both hex masks, bit n-1 for signal n).
/// None if a mask is missing or malformed.
pub fn dies_at_sigterm(status: &str) -> Option<bool> {
    let mask = |key: &str| {
        let v = status.lines().find_map(|l| l.strip_prefix(key))?;
        u64::from_str_radix(v.trim(), 16).ok()
    };
    let bit = 1u64 << (libc::SIGTERM - 1);
    Some((mask("SigCgt:")? | mask("SigIgn:")?) & bit == 0)
}

impl Group {
    /// Spawns `cmd` as described on [`Group`] (its stdio, environment and arguments as
    /// set by the caller; this sets its process group, its parent-death signal and
    /// namespace) and returns once it has been exec'd.
    /// Errors: the spawn's (the program cannot be run), or ESRCH if this process was
    /// being killed at that moment.
    pub fn spawn(mut cmd: Command) -> std::io::Result<Group> {
        let ended: Arc<(Mutex<Option<Ended>>, Condvar)> = Arc::default();
        let (started_tx, started_rx) = mpsc::sync_channel::<std::io::Result<(u32, bool)>>(1);
        let (release, released) = mpsc::channel::<()>();
        let ended2 = Arc::clone(&ended);
        let keeper = std::thread::Builder::new()
            .name("tpslab-group".into())
            .spawn(move || {
                // Later children of this thread only; this thread makes no threads.
                // SAFETY: unshare takes flags only.
                let in_pid_ns = unsafe { libc::unshare(libc::CLONE_NEWPID) } == 0;
                let alive = pidfd_of_self();
                let alive_fd = alive.as_ref().map(|f| f.as_raw_fd());
                cmd.process_group(0);
                // SAFETY: the closure runs in the child between fork and exec and calls
                // only async-signal-safe functions (prctl, poll), allocating nothing.
                unsafe {
                    cmd.pre_exec(move || {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        if let Some(fd) = alive_fd {
                            let mut p = libc::pollfd {
                                fd,
                                events: libc::POLLIN,
                                revents: 0,
                            };
                            // Readable: this process has ended, the signal will not come.
                            if libc::poll(&mut p, 1, 0) != 0 {
                                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                            }
                        }
                        Ok(())
                    })
                };
                let mut child = match cmd.spawn() {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        return;
                    }
                };
                drop(alive);
                let pid = child.id();
                let _ = started_tx.send(Ok((pid, in_pid_ns)));
                let st = wait_nowait(pid);
                let (lock, cv) = &*ended2;
                *lock.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(st.map_err(|e| e.raw_os_error().unwrap_or(0)));
                cv.notify_all();
                // Reaped only when released: until then the PID, the group's ID, cannot
                // be reused, so signals to the group reach no one else.
                let _ = released.recv();
                let _ = child.wait();
            })?;
        match started_rx.recv() {
            Ok(Ok((pid, in_pid_ns))) => Ok(Group {
                pid,
                in_pid_ns,
                ended,
                release: Some(release),
                keeper: Some(keeper),
            }),
            Ok(Err(e)) => {
                let _ = keeper.join();
                Err(e)
            }
            Err(_) => {
                let _ = keeper.join();
                Err(std::io::Error::other(
                    "the thread starting the command ended",
                ))
            }
        }
    }

    /// The first process's PID, which is also the group's ID.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the command runs in its own PID namespace (see [`Group`]).
    pub fn in_pid_ns(&self) -> bool {
        self.in_pid_ns
    }

    /// How the first process ended, or None while it runs. Other processes of the group
    /// may remain (see [`Group::members`]). Errors: its status could not be read
    /// (waitid's error, e.g. ECHILD where SIGCHLD is ignored).
    pub fn ended(&self) -> Option<std::io::Result<ExitStatus>> {
        let e = *self.ended.0.lock().unwrap_or_else(|e| e.into_inner());
        e.map(|r| r.map_err(std::io::Error::from_raw_os_error))
    }

    /// Waits at most `timeout` for the first process to end; true if it has.
    fn wait_ended(&self, timeout: Duration) -> bool {
        let (lock, cv) = &*self.ended;
        let g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = cv
            .wait_timeout_while(g, timeout, |s| s.is_none())
            .unwrap_or_else(|e| e.into_inner());
        g.is_some()
    }

    /// PIDs of the processes of the group that have not ended (not zombies), sorted: from
    /// the process group field of each `/proc/PID/stat`.
    pub fn members(&self) -> Vec<u32> {
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return vec![];
        };
        let mut v: Vec<u32> = rd
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                read_proc(&format!("/proc/{pid}/stat"))
                    .and_then(|s| stat_state_pgrp(&s))
                    .is_some_and(|(state, pgrp)| pgrp == self.pid && state != 'Z' && state != 'X')
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// Stops every process of the group: SIGTERM to the group, SIGKILL to what remains
    /// after `grace` (and at once to a namespace's first process that SIGTERM would have
    /// ended, see [`Group`]); returns once none remains (or after `grace` plus a second
    /// more, if one cannot be killed). Idempotent.
    pub fn stop(&mut self, grace: Duration) {
        if self.release.is_none() {
            return;
        }
        let pgid = self.pid as i32;
        let t0 = Instant::now();
        send(-pgid, libc::SIGTERM);
        let mut killed = false;
        loop {
            let left = self.members();
            if left.is_empty() && self.wait_ended(Duration::ZERO) {
                break;
            }
            let lone_leader = left == [self.pid];
            if self.in_pid_ns
                && lone_leader
                && read_proc(&format!("/proc/{}/status", self.pid))
                    .and_then(|s| dies_at_sigterm(&s))
                    == Some(true)
            {
                send(pgid, libc::SIGKILL);
            }
            if !killed && t0.elapsed() >= grace {
                send(-pgid, libc::SIGKILL);
                send(pgid, libc::SIGKILL);
                killed = true;
            }
            if t0.elapsed() >= grace + Duration::from_secs(1) {
                break;
            }
            self.wait_ended(Duration::from_millis(10));
        }
        // Release the keeper: it reaps the first process and ends.
        self.release = None;
        if let Some(k) = self.keeper.take() {
            if self.wait_ended(Duration::ZERO) {
                let _ = k.join();
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminate_ends_a_child_we_started() {
        let mut c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        terminate(&c).unwrap();
        let st = c.wait().unwrap();
        assert_eq!(st.signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn stat_fields_past_a_name_with_parentheses() {
        assert_eq!(
            stat_state_pgrp("42 (a) b (c)) S 1 40 40 0 -1"),
            Some(('S', 40))
        );
        assert_eq!(stat_state_pgrp("42 (x) Z 1"), None);
        assert_eq!(stat_state_pgrp("garbage"), None);
    }

    #[test]
    fn sigterm_disposition_from_the_masks() {
        let st = |cgt: &str, ign: &str| format!("Name:\tx\nSigIgn:\t{ign}\nSigCgt:\t{cgt}\n");
        assert_eq!(
            dies_at_sigterm(&st("0000000000000000", "0000000000000000")),
            Some(true)
        );
        // SIGTERM is 15: bit 14, 0x4000.
        assert_eq!(dies_at_sigterm(&st("0000000000004000", "0")), Some(false));
        assert_eq!(dies_at_sigterm(&st("0", "0000000000004002")), Some(false));
        assert_eq!(dies_at_sigterm(&st("0000000000000002", "0")), Some(true));
        assert_eq!(dies_at_sigterm("Name:\tx\n"), None);
    }

    /// A pipeline's stages, forked by the shell, are stopped with it.
    #[test]
    fn stop_reaches_every_process_of_a_pipeline() {
        let mut c = Command::new("sh");
        c.args(["-c", "sleep 30 | sleep 31"]);
        let mut g = Group::spawn(c).unwrap();
        let t0 = Instant::now();
        while g.members().len() < 3 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let members = g.members();
        assert_eq!(members.len(), 3, "sh and two sleeps: {members:?}");
        g.stop(Duration::from_secs(1));
        assert!(g.ended().is_some());
        for pid in members {
            let st = read_proc(&format!("/proc/{pid}/stat"))
                .and_then(|s| stat_state_pgrp(&s))
                .map(|(s, _)| s);
            assert!(matches!(st, None | Some('Z')), "{pid} still runs: {st:?}");
        }
    }

    /// As the first process of its namespace, `sleep` would ignore SIGTERM (no handler):
    /// it is SIGKILLed at once, not after the grace, as SIGTERM ends it elsewhere.
    #[test]
    fn stop_ends_a_lone_first_process_without_a_handler_at_once() {
        let mut c = Command::new("sh");
        c.args(["-c", "exec sleep 30"]);
        let mut g = Group::spawn(c).unwrap();
        let t0 = Instant::now();
        // Wait for the exec (the comm changes from sh to sleep).
        while read_proc(&format!("/proc/{}/comm", g.pid())).as_deref() != Some("sleep\n") {
            assert!(t0.elapsed() < Duration::from_secs(5), "sleep did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        let t1 = Instant::now();
        g.stop(Duration::from_secs(3));
        assert!(g.ended().is_some());
        assert!(
            t1.elapsed() < Duration::from_secs(2),
            "took {:?}: the grace was waited out",
            t1.elapsed()
        );
    }
}
