//! Thin wrappers that read the real `/proc` files (one `read_to_string` each)
//! and call the pure parsers.
//!
//! `root` is a procfs directory such as `/proc`, or `/proc/1234` to see the
//! network namespace of process 1234 (`<root>/net/...`).

use std::io;
use std::path::{Path, PathBuf};

use crate::common::ParseError;
use crate::dev::{parse_dev, NetDev};
use crate::pid::{parse_schedstat, parse_status, parse_task_stat, SchedStat, TaskStat, TaskStatus};
use crate::snmp::{parse_snmp, parse_snmp6, Snmp, Snmp6};
use crate::softnet::{parse_softnet, SoftnetCpu};
use crate::stat::{parse_stat, KernelStat};
use crate::udp::{parse_udp, UdpSocket};

/// Error reading or parsing a live `/proc` file.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// The file could not be read.
    #[error("reading {}: {source}", path.display())]
    Io {
        /// The path that was read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file was read but its content is malformed.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

impl ProcError {
    /// True if this is an I/O error of kind `NotFound` (file or process gone).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ProcError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

thread_local! {
    // Open /proc files of this thread: reading again from offset 0 regenerates them
    // without walking the path and opening the file again (half the cost of a read).
    static FILES: std::cell::RefCell<std::collections::HashMap<PathBuf, std::fs::File>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Reads a /proc file in as few read(2) calls as the kernel allows. Files such as
/// /proc/net/udp are generated a page at a time: between two read calls the kernel
/// restarts its walk by position, so sockets created or closed in between can shift the
/// listing and an entry can be skipped. std's read_to_string starts with a 32-byte probe
/// read, which makes that far more likely; large reads keep the restarts to one a page
/// (the observer follows its sockets by sock_diag lookups between scans, and keeps a
/// socket a scan missed until a lookup says it is gone).
fn read_whole(path: &Path) -> io::Result<String> {
    thread_local! {
        // Reused across calls: a sampler at 1 ms must not map and fault in 256 KiB each
        // time.
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    FILES.with(|f| -> io::Result<()> {
        let mut files = f.borrow_mut();
        if !files.contains_key(path) {
            files.insert(path.to_path_buf(), std::fs::File::open(path)?);
        }
        Ok(())
    })?;
    let result = FILES.with(|f| {
        let files = f.borrow();
        let file = &files[path];
        BUF.with(|b| read_into(file, &mut b.borrow_mut(), shown_whole(path)))
    });
    if result.is_err() {
        // A task that exited, a namespace that went away: open afresh next time.
        FILES.with(|f| f.borrow_mut().remove(path));
    }
    result
}

/// Whether the kernel generates this /proc file in one piece (`single_open`: snmp, snmp6,
/// netstat, /proc/stat, a task's stat/status/schedstat/io), so that a read shorter than
/// the buffer returned all of it. A table such as /proc/net/udp or softnet_stat comes a
/// page of records at a time and is read until a read returns 0. A second read of a
/// one-piece file at a non-zero offset generates it all again only to say "end": for
/// /proc/net/snmp6 that doubled the cost of the observer's host-wide sample.
fn shown_whole(path: &Path) -> bool {
    matches!(
        path.file_name().and_then(|n| n.to_str()),
        Some("snmp" | "snmp6" | "netstat" | "stat" | "status" | "schedstat" | "io")
    )
}

fn read_into(file: &std::fs::File, buf: &mut Vec<u8>, whole: bool) -> io::Result<String> {
    use std::os::unix::fs::FileExt;
    if buf.len() < 256 * 1024 {
        buf.resize(256 * 1024, 0);
    }
    let mut len = 0;
    loop {
        if len == buf.len() {
            let n = len * 2;
            buf.resize(n, 0);
        }
        // pread from 0 makes the kernel generate the file anew.
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if whole && len < buf.len() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(buf[..len].to_vec())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Closes this thread's cached handles of files under `prefix` (e.g. `/proc/1234` once that
/// process's run is over), so long sweeps do not keep descriptors of gone processes.
pub fn forget_under(prefix: &Path) {
    FILES.with(|f| f.borrow_mut().retain(|p, _| !p.starts_with(prefix)));
}

fn read(path: &Path) -> Result<String, ProcError> {
    read_whole(path).map_err(|source| ProcError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Like [`read`] but a missing file is `Ok(None)`.
fn read_opt(path: &Path) -> Result<Option<String>, ProcError> {
    match read_whole(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ProcError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Read a per-task file given either the file itself or the task directory
/// (`/proc/PID` or `/proc/PID/task/TID`, in which case `name` is appended).
fn read_task_file(path: &Path, name: &str) -> Result<(String, PathBuf), ProcError> {
    match read_whole(path) {
        Ok(s) => Ok((s, path.to_path_buf())),
        Err(e) if e.kind() == io::ErrorKind::IsADirectory || path.is_dir() => {
            let p = path.join(name);
            Ok((read(&p)?, p))
        }
        Err(source) => Err(ProcError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn label(p: &Path) -> String {
    p.display().to_string()
}

/// Read and parse `<root>/net/snmp`.
pub fn snmp(root: &Path) -> Result<Snmp, ProcError> {
    let p = root.join("net/snmp");
    Ok(parse_snmp(read(&p)?.as_bytes(), &label(&p))?)
}

/// The TCP counters of `<root>/net/snmp` and `<root>/net/netstat`.
pub fn tcp_counters(root: &Path) -> Result<crate::netstat::TcpCounters, ProcError> {
    use crate::netstat::{parse_pairs, TcpCounters};
    let (ps, pn) = (root.join("net/snmp"), root.join("net/netstat"));
    let s = parse_pairs(read(&ps)?.as_bytes(), &label(&ps))?;
    let n = parse_pairs(read(&pn)?.as_bytes(), &label(&pn))?;
    Ok(TcpCounters::from_pairs(&s, &n))
}

/// `TcpExt: DelayedACKs` of `<root>/net/netstat`: delayed ACKs the namespace's TCP
/// sent when their timer fired (a monotonic count; 0 when the kernel has no such
/// counter). Errors: the file unreadable or not pairs of lines.
pub fn delayed_acks(root: &Path) -> Result<u64, ProcError> {
    let pn = root.join("net/netstat");
    let n = crate::netstat::parse_pairs(read(&pn)?.as_bytes(), &label(&pn))?;
    Ok(n.get("TcpExt.DelayedACKs").copied().unwrap_or(0).max(0) as u64)
}

/// Read and parse `<root>/net/snmp6`; `Ok(None)` if the file does not exist
/// (IPv6 disabled).
pub fn snmp6(root: &Path) -> Result<Option<Snmp6>, ProcError> {
    let p = root.join("net/snmp6");
    match read_opt(&p)? {
        None => Ok(None),
        Some(s) => Ok(Some(parse_snmp6(s.as_bytes(), &label(&p))?)),
    }
}

/// Read and parse `<root>/net/udp` (IPv4 UDP sockets).
pub fn udp(root: &Path) -> Result<Vec<UdpSocket>, ProcError> {
    let p = root.join("net/udp");
    Ok(parse_udp(read(&p)?.as_bytes(), &label(&p))?)
}

/// Read and parse `<root>/net/tcp` and `tcp6` (TCP sockets): their first eleven columns
/// are those of the UDP tables (state, tx_queue:rx_queue, inode; for a listening socket
/// rx_queue is its accept queue, in connections); `drops` is not a TCP column and is None.
pub fn tcp(root: &Path) -> Result<Vec<UdpSocket>, ProcError> {
    let mut v = vec![];
    for f in ["net/tcp", "net/tcp6"] {
        let p = root.join(f);
        if let Some(s) = read_opt(&p)? {
            v.extend(
                parse_udp(s.as_bytes(), &label(&p))?
                    .into_iter()
                    .map(|mut s| {
                        s.drops = None;
                        s
                    }),
            );
        }
    }
    Ok(v)
}

/// Read and parse `<root>/net/udp6` (IPv6 UDP sockets); an empty list if the
/// file does not exist (IPv6 disabled).
pub fn udp6(root: &Path) -> Result<Vec<UdpSocket>, ProcError> {
    let p = root.join("net/udp6");
    match read_opt(&p)? {
        None => Ok(Vec::new()),
        Some(s) => Ok(parse_udp(s.as_bytes(), &label(&p))?),
    }
}

/// Read and parse `<root>/net/softnet_stat`.
pub fn softnet(root: &Path) -> Result<Vec<SoftnetCpu>, ProcError> {
    let p = root.join("net/softnet_stat");
    Ok(parse_softnet(read(&p)?.as_bytes(), &label(&p))?)
}

/// Read and parse `<root>/net/dev`.
pub fn dev(root: &Path) -> Result<Vec<NetDev>, ProcError> {
    let p = root.join("net/dev");
    Ok(parse_dev(read(&p)?.as_bytes(), &label(&p))?)
}

/// Read and parse `<root>/stat` (use `root = /proc`).
pub fn stat(root: &Path) -> Result<KernelStat, ProcError> {
    let p = root.join("stat");
    Ok(parse_stat(read(&p)?.as_bytes(), &label(&p))?)
}

/// Read and parse a `status` file. `path` is either the file
/// (`/proc/PID/task/TID/status`) or the task directory (`/proc/PID/task/TID`).
pub fn task_status(path: &Path) -> Result<TaskStatus, ProcError> {
    let (s, p) = read_task_file(path, "status")?;
    Ok(parse_status(s.as_bytes(), &label(&p))?)
}

/// Read and parse a `stat` file. `path` is either the file or the task directory.
pub fn task_stat(path: &Path) -> Result<TaskStat, ProcError> {
    let (s, p) = read_task_file(path, "stat")?;
    Ok(parse_task_stat(&s, &label(&p))?)
}

/// Read and parse a `schedstat` file. `path` is either the file or the task
/// directory.
pub fn schedstat(path: &Path) -> Result<SchedStat, ProcError> {
    let (s, p) = read_task_file(path, "schedstat")?;
    Ok(parse_schedstat(s.as_bytes(), &label(&p))?)
}

/// Thread ids of process `pid` (entries of `/proc/PID/task`), sorted.
/// Empty if the process does not exist or is not readable.
pub fn task_ids(pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut v: Vec<u32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// Socket inodes held open by process `pid`: targets `socket:[INODE]` of the
/// symlinks in `/proc/PID/fd`, sorted and deduplicated. Empty if the process
/// does not exist or its fds are not readable (needs same user or
/// CAP_SYS_PTRACE).
pub fn socket_inodes(pid: u32) -> Vec<u64> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut v: Vec<u64> = rd
        .filter_map(|e| {
            let target = std::fs::read_link(e.ok()?.path()).ok()?;
            let t = target.to_str()?;
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_errors_name_path() {
        let e = snmp(Path::new("/nonexistent-proc")).unwrap_err();
        assert!(e.is_not_found());
        assert!(e.to_string().contains("/nonexistent-proc/net/snmp"), "{e}");
        assert_eq!(snmp6(Path::new("/nonexistent-proc")).unwrap(), None);
        assert!(udp6(Path::new("/nonexistent-proc")).unwrap().is_empty());
    }

    /// read(2) calls this thread has made (from /proc/thread-self/io `syscr`).
    fn reads_so_far() -> Option<u64> {
        let s = std::fs::read_to_string("/proc/thread-self/io").ok()?;
        s.lines()
            .find_map(|l| l.strip_prefix("syscr: "))
            .and_then(|v| v.trim().parse().ok())
    }

    #[test]
    fn one_piece_files_take_one_read_tables_read_to_the_end() {
        let Some(r0) = reads_so_far() else {
            eprintln!("skipped: no /proc/thread-self/io (task I/O accounting)");
            return;
        };
        // What reading the counter itself costs between two readings.
        let own = reads_so_far().unwrap() - r0;
        let root = Path::new("/proc/self");
        // First reads open the files (kept open after).
        snmp(root).unwrap();
        stat(Path::new("/proc")).unwrap();
        udp(root).unwrap();
        let a = reads_so_far().unwrap();
        for _ in 0..10 {
            snmp(root).unwrap();
            stat(Path::new("/proc")).unwrap();
        }
        let whole = reads_so_far().unwrap() - a - own;
        assert_eq!(whole, 20, "one read(2) each for snmp and stat");
        let b = reads_so_far().unwrap();
        for _ in 0..10 {
            udp(root).unwrap();
        }
        // A table is read until a read returns 0: at least two each.
        let table = reads_so_far().unwrap() - b - own;
        assert!(table >= 20, "{table} reads for 10 readings of net/udp");
    }
}
