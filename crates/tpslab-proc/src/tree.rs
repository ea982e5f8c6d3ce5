//! A process and its descendants (a multi-process server: nginx's master and workers, a
//! prefork server's parent and children): each process's parent and CPU time from its
//! `/proc/PID/stat`, and the tree under a PID found from those parents.

use crate::ParseError;

/// The fields of a `/proc/PID/stat` line a process tree needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcTimes {
    /// Parent's PID (field 4).
    pub ppid: u32,
    /// User-mode CPU time, USER_HZ ticks (field 14).
    pub utime: u64,
    /// Kernel-mode CPU time, USER_HZ ticks (field 15).
    pub stime: u64,
    /// User-mode CPU time of its children that ended and were waited for, ticks (field
    /// 16): a worker that exits leaves its time here, in its parent.
    pub cutime: u64,
    /// Kernel-mode CPU time of those children, ticks (field 17).
    pub cstime: u64,
}

impl ProcTimes {
    /// Its CPU time with its waited-for children's: utime + stime + cutime + cstime,
    /// ticks.
    pub fn with_children(&self) -> u64 {
        self.utime + self.stime + self.cutime + self.cstime
    }
}

/// Parses a `stat` line (fields after the last `)` of the command name). Errors: fewer
/// than 17 fields, or one of them not a number; `file` names the file in the error.
pub fn parse_times(s: &str, file: &str) -> Result<ProcTimes, ParseError> {
    let line = s.lines().next().unwrap_or("");
    let err = |msg: String| ParseError::new(file, 1, msg);
    let close = line
        .rfind(')')
        .ok_or_else(|| err("no ')' after comm".to_string()))?;
    // rest[0] is field 3 (the state).
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let num = |no: usize| -> Result<u64, ParseError> {
        let v = rest.get(no - 3).ok_or_else(|| {
            err(format!(
                "expected at least 17 fields, got {}",
                rest.len() + 2
            ))
        })?;
        v.parse()
            .map_err(|_| err(format!("field {no} {v:?} is not a number")))
    };
    Ok(ProcTimes {
        ppid: u32::try_from(num(4)?).map_err(|_| err("field 4 (ppid) out of range".into()))?,
        utime: num(14)?,
        stime: num(15)?,
        cutime: num(16)?,
        cstime: num(17)?,
    })
}

/// `root` and its descendants among `procs` (each a PID and its parent's), `root` first,
/// then by depth; a PID listed twice or a cycle is followed once.
pub fn descendants(root: u32, procs: &[(u32, u32)]) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        let mut kids: Vec<u32> = procs
            .iter()
            .filter(|&&(pid, ppid)| ppid == p && pid != p && !out.contains(&pid))
            .map(|&(pid, _)| pid)
            .collect();
        kids.sort_unstable();
        kids.dedup();
        out.extend(kids);
        i += 1;
    }
    out
}

/// The process `pid` and its descendants now, each with its [`ProcTimes`], `pid` first
/// (from every `/proc/N/stat`: a process that ends while they are read is left out).
/// Empty when `pid` itself cannot be read.
///
/// The reads are not one snapshot: a child reaped after its parent's stat was read and
/// before its own would be in neither (its time moves into the parent's cutime/cstime
/// only when it is reaped), so a step would lose it and the next gain it. Each member's
/// cutime and cstime are read again after the scan; when one moved, the tree is read
/// again (at most [`TREE_READS`] times; the last read is returned either way).
pub fn read_tree(pid: u32) -> Vec<(u32, ProcTimes)> {
    let mut tree = vec![];
    for _ in 0..TREE_READS {
        tree = read_tree_once(pid);
        let settled = tree.iter().all(|(p, t)| {
            read_times(*p).is_none_or(|n| (n.cutime, n.cstime) == (t.cutime, t.cstime))
        });
        if settled {
            break;
        }
    }
    tree
}

/// How many times [`read_tree`] reads the tree at most while children are being reaped.
pub const TREE_READS: usize = 3;

/// One process's [`ProcTimes`] from `/proc/PID/stat`; None when it cannot be read.
fn read_times(p: u32) -> Option<ProcTimes> {
    let text = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
    parse_times(&text, "stat").ok()
}

/// [`read_tree`]'s one pass: `pid`'s stat, then every other process's, then the tree.
fn read_tree_once(pid: u32) -> Vec<(u32, ProcTimes)> {
    let Some(me) = read_times(pid) else {
        return vec![];
    };
    let mut all: Vec<(u32, ProcTimes)> = std::fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|&p| p != pid)
                .filter_map(|p| read_times(p).map(|t| (p, t)))
                .collect()
        })
        .unwrap_or_default();
    all.push((pid, me));
    let links: Vec<(u32, u32)> = all.iter().map(|(p, t)| (*p, t.ppid)).collect();
    descendants(pid, &links)
        .into_iter()
        .filter_map(|p| all.iter().find(|(x, _)| *x == p).copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_parent_and_times_with_a_command_name_holding_parens() {
        let line = "4242 (nginx: (worker) x) S 4200 4200 4200 0 -1 4194624 1 0 0 0 \
                    120 35 7 3 20 0 1 0 100 1000 10";
        let t = parse_times(line, "stat").unwrap();
        assert_eq!(
            t,
            ProcTimes {
                ppid: 4200,
                utime: 120,
                stime: 35,
                cutime: 7,
                cstime: 3
            }
        );
        assert_eq!(t.with_children(), 165);
        let e = parse_times("1 (x) S 0 1 1", "/proc/1/stat").unwrap_err();
        assert!(e.to_string().contains("expected at least 17 fields"), "{e}");
        let bad = "1 (x) S 0 1 1 0 -1 0 0 0 0 0 ten 0 0 0";
        assert!(parse_times(bad, "stat").is_err());
    }

    #[test]
    fn descendants_follow_parents_breadth_first_once() {
        // 10 -> 11, 12; 12 -> 13; 20 unrelated; 14 claims itself as parent.
        let procs = [(11, 10), (12, 10), (13, 12), (20, 1), (14, 14), (12, 10)];
        assert_eq!(descendants(10, &procs), vec![10, 11, 12, 13]);
        assert_eq!(descendants(13, &procs), vec![13]);
        // A cycle (impossible in the kernel, possible in racing reads) ends.
        assert_eq!(descendants(1, &[(2, 1), (1, 2)]), vec![1, 2]);
    }

    #[test]
    fn the_tree_of_this_process_holds_a_child_it_started() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        let me = std::process::id();
        let tree = read_tree(me);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(tree[0].0, me);
        assert!(
            tree.iter().any(|(p, t)| *p == child.id() && t.ppid == me),
            "{tree:?}"
        );
        assert!(read_tree(u32::MAX).is_empty());
    }
}
