//! /proc/PID/task/TID/syscall: the system call a blocked thread is in, and its arguments;
//! and the names of the calls a thread waits in, by number, for the architectures tpslab
//! builds for (x86_64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64 and others on the
//! generic table: include/uapi/asm-generic/unistd.h).

/// What /proc/PID/task/TID/syscall says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallState {
    /// `running`: the thread is on a CPU.
    Running,
    /// `-1 SP PC`: blocked, not in a system call (a page fault, a kernel thread).
    NotInSyscall,
    /// `NR ARG1..ARG6 SP PC`: blocked in system call NR.
    In {
        /// The call's number.
        nr: u64,
        /// Its first argument (the fd of read/write/poll-family calls).
        arg1: u64,
    },
}

/// Parses the file's one line; None when it has neither form.
pub fn parse_syscall(s: &str) -> Option<SyscallState> {
    let s = s.trim();
    if s == "running" {
        return Some(SyscallState::Running);
    }
    let mut f = s.split_whitespace();
    let nr = f.next()?;
    if nr == "-1" {
        return Some(SyscallState::NotInSyscall);
    }
    let nr = nr.parse().ok()?;
    let arg1 = f.next()?;
    let arg1 = u64::from_str_radix(arg1.trim_start_matches("0x"), 16).ok()?;
    Some(SyscallState::In { nr, arg1 })
}

/// The call number and its six arguments of the `NR ARG1..ARG6 SP PC` form (what a
/// blocked thread's futex op and timeout are read from); None for the other forms or an
/// unparseable line.
pub fn parse_syscall_args(s: &str) -> Option<(u64, [u64; 6])> {
    let mut f = s.split_whitespace();
    let nr: u64 = f.next()?.parse().ok()?;
    let mut args = [0u64; 6];
    for a in &mut args {
        *a = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
    }
    Some((nr, args))
}

/// x86_64 numbers of the calls a thread commonly blocks in.
const X86_64: &[(u64, &str)] = &[
    (0, "read"),
    (1, "write"),
    (7, "poll"),
    (17, "pread64"),
    (18, "pwrite64"),
    (19, "readv"),
    (20, "writev"),
    (23, "select"),
    (34, "pause"),
    (35, "nanosleep"),
    (42, "connect"),
    (43, "accept"),
    (44, "sendto"),
    (45, "recvfrom"),
    (46, "sendmsg"),
    (47, "recvmsg"),
    (61, "wait4"),
    (74, "fsync"),
    (75, "fdatasync"),
    (162, "sync"),
    (202, "futex"),
    (208, "io_getevents"),
    (230, "clock_nanosleep"),
    (232, "epoll_wait"),
    (247, "waitid"),
    (270, "pselect6"),
    (271, "ppoll"),
    (277, "sync_file_range"),
    (281, "epoll_pwait"),
    (288, "accept4"),
    (299, "recvmmsg"),
    (306, "syncfs"),
    (307, "sendmmsg"),
    (426, "io_uring_enter"),
    (441, "epoll_pwait2"),
    (449, "futex_waitv"),
    (455, "futex_wait"),
];

/// The generic table (aarch64, riscv64, loongarch64).
const GENERIC: &[(u64, &str)] = &[
    (4, "io_getevents"),
    (22, "epoll_pwait"),
    (63, "read"),
    (64, "write"),
    (65, "readv"),
    (66, "writev"),
    (67, "pread64"),
    (68, "pwrite64"),
    (72, "pselect6"),
    (73, "ppoll"),
    (81, "sync"),
    (82, "fsync"),
    (83, "fdatasync"),
    (84, "sync_file_range"),
    (95, "waitid"),
    (98, "futex"),
    (101, "nanosleep"),
    (115, "clock_nanosleep"),
    (202, "accept"),
    (203, "connect"),
    (206, "sendto"),
    (207, "recvfrom"),
    (211, "sendmsg"),
    (212, "recvmsg"),
    (242, "accept4"),
    (243, "recvmmsg"),
    (260, "wait4"),
    (267, "syncfs"),
    (269, "sendmmsg"),
    (426, "io_uring_enter"),
    (441, "epoll_pwait2"),
    (449, "futex_waitv"),
    (455, "futex_wait"),
];

/// The table of this build's architecture.
fn table() -> &'static [(u64, &'static str)] {
    if cfg!(target_arch = "x86_64") {
        X86_64
    } else {
        GENERIC
    }
}

/// The name of system call `nr` on this architecture: from the table, else `syscall NR`.
pub fn syscall_name(nr: u64) -> String {
    table()
        .iter()
        .find(|(n, _)| *n == nr)
        .map_or_else(|| format!("syscall {nr}"), |(_, s)| (*s).to_string())
}

/// The descriptors an epoll instance watches, from its /proc/PID/fdinfo/EPFD (one
/// `tfd: FD events: ... data: ... pos: ... ino: ... sdev: ...` line each), at most `max`
/// of them (the rest are not parsed: a caller that wants one socket stops at two).
pub fn parse_epoll_tfds(s: &str, max: usize) -> Vec<u32> {
    s.lines()
        .filter_map(|l| l.strip_prefix("tfd:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .take(max)
        .collect()
}

/// Whether a call named `name` waits on an epoll instance given as its first argument.
pub fn is_epoll_wait(name: &str) -> bool {
    matches!(name, "epoll_wait" | "epoll_pwait" | "epoll_pwait2")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epolls_watched_descriptors_are_read_from_its_fdinfo() {
        // Python's select.epoll on Linux 6.1, watching one UDP socket, then two.
        let one = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1039\ntfd:        3 events:       19 data:                3  pos:0 ino:4e7220 sdev:9\n";
        let two = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1039\ntfd:        4 events:       19 data:     7fb500000004  pos:0 ino:4e7221 sdev:9\ntfd:        3 events:       19 data:                3  pos:0 ino:4e7220 sdev:9\n";
        assert_eq!(parse_epoll_tfds(one, 2), vec![3]);
        assert_eq!(parse_epoll_tfds(two, 2), vec![4, 3]);
        assert_eq!(parse_epoll_tfds(two, 1), vec![4]);
        // Not an epoll (a socket's fdinfo): nothing.
        assert!(parse_epoll_tfds("pos:\t0\nflags:\t02\nmnt_id:\t9\nino:\t5141024\n", 2).is_empty());
        assert!(is_epoll_wait("epoll_pwait") && !is_epoll_wait("poll"));
    }

    #[test]
    fn the_three_forms_of_the_file() {
        // Captured on this kernel (x86_64): python3 in poll(fds, 1, 3000); then one on a
        // CPU, and one blocked outside a call.
        let poll = "7 0x7fa41a6c4750 0x1 0xbb8 0x1 0x0 0x0 0x7ffc487c2d48 0x7fa41a91a230\n";
        let n = if cfg!(target_arch = "x86_64") { 7 } else { 73 };
        assert_eq!(
            parse_syscall(&poll.replacen('7', &n.to_string(), 1)),
            Some(SyscallState::In {
                nr: n,
                arg1: 0x7fa41a6c4750
            })
        );
        assert_eq!(parse_syscall("running\n"), Some(SyscallState::Running));
        assert_eq!(
            parse_syscall("-1 0x7ffd6c1c2a18 0x55d0c0ffee00\n"),
            Some(SyscallState::NotInSyscall)
        );
        assert_eq!(parse_syscall(""), None);
        assert_eq!(parse_syscall("x 0x1"), None);
        // A JVM pool thread parked without a timeout (FUTEX_WAIT_BITSET_PRIVATE with
        // FUTEX_CLOCK_REALTIME, timeout NULL), captured on Linux 6.18, x86_64.
        let parked =
            "202 0x7f229c007f7c 0x189 0x0 0x0 0x0 0xffffffff 0x7f2308c6acb0 0x7f233ecb3f16";
        assert_eq!(
            parse_syscall_args(parked),
            Some((202, [0x7f229c007f7c, 0x189, 0, 0, 0, 0xffffffff]))
        );
        assert_eq!(parse_syscall_args("running"), None);
        assert_eq!(parse_syscall_args("-1 0x7ffd6c1c2a18 0x55d0c0ffee00"), None);
        assert_eq!(parse_syscall_args("202 0x1 0x2"), None);
    }

    #[test]
    fn names_by_number_for_this_architecture() {
        let (poll, futex) = if cfg!(target_arch = "x86_64") {
            (7, 202)
        } else {
            (73, 98)
        };
        assert_eq!(syscall_name(poll), if poll == 7 { "poll" } else { "ppoll" });
        assert_eq!(syscall_name(futex), "futex");
        assert_eq!(syscall_name(99_999), "syscall 99999");
        // No number twice in a table.
        for t in [X86_64, GENERIC] {
            let mut v: Vec<u64> = t.iter().map(|x| x.0).collect();
            v.sort();
            v.dedup();
            assert_eq!(v.len(), t.len());
        }
    }
}
