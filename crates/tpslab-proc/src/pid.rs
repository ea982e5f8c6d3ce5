//! Per-process / per-thread files: `/proc/PID[/task/TID]/{status,stat,schedstat}`.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use crate::common::{dec_i64, dec_u64, for_each_line, ParseError};

/// Selected fields of `/proc/PID/status` or `/proc/PID/task/TID/status`
/// (`Key:\tvalue` lines).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskStatus {
    /// Command name (`Name:`; the kernel escapes `\n` and `\\`). Required.
    pub name: String,
    /// State letter, e.g. `R`, `S`, `D` (first char of `State:`). Required.
    pub state: char,
    /// Voluntary context switches, i.e. the task blocked (`voluntary_ctxt_switches:`; 0 if absent).
    pub voluntary_ctxt_switches: u64,
    /// Involuntary context switches, i.e. the task was preempted
    /// (`nonvoluntary_ctxt_switches:`; 0 if absent).
    pub nonvoluntary_ctxt_switches: u64,
    /// CPU affinity as a list like `0-3,5` (`Cpus_allowed_list:`; empty if
    /// absent). Use [`parse_cpu_list`] to expand it.
    pub cpus_allowed_list: String,
    /// Threads in the thread group (`Threads:`; `None` if absent).
    pub threads: Option<u64>,
}

/// Parse a `status` file. `Name:` and `State:` are required; the numeric
/// fields listed in [`TaskStatus`] must be decimal; other keys are ignored.
pub fn parse_status<R: BufRead>(r: R, file: &str) -> Result<TaskStatus, ParseError> {
    let mut out = TaskStatus::default();
    let (mut saw_name, mut saw_state) = (false, false);
    for_each_line(r, file, |n, line| {
        if line.trim().is_empty() {
            return Ok(());
        }
        let Some((key, raw)) = line.split_once(':') else {
            return Err(ParseError::new(file, n, "expected \"Key:\\tvalue\""));
        };
        let value = raw.trim();
        let num = || {
            dec_u64(value)
                .ok_or_else(|| ParseError::new(file, n, format!("{key}: {value:?} is not decimal")))
        };
        match key {
            "Name" => {
                out.name = raw
                    .strip_prefix('\t')
                    .unwrap_or(raw.trim_start())
                    .to_string();
                saw_name = true;
            }
            "State" => {
                out.state = value
                    .chars()
                    .next()
                    .ok_or_else(|| ParseError::new(file, n, "State: empty"))?;
                saw_state = true;
            }
            "voluntary_ctxt_switches" => out.voluntary_ctxt_switches = num()?,
            "nonvoluntary_ctxt_switches" => out.nonvoluntary_ctxt_switches = num()?,
            "Cpus_allowed_list" => out.cpus_allowed_list = value.to_string(),
            "Threads" => out.threads = Some(num()?),
            _ => {}
        }
        Ok(())
    })?;
    if !saw_name {
        return Err(ParseError::new(file, 0, "no \"Name:\" line"));
    }
    if !saw_state {
        return Err(ParseError::new(file, 0, "no \"State:\" line"));
    }
    Ok(out)
}

/// Selected fields of `/proc/PID/stat` or `/proc/PID/task/TID/stat`.
/// Field numbers are 1-based as in proc(5).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskStat {
    /// Command name without the parentheses (field 2; may contain spaces and `)`).
    pub comm: String,
    /// State letter (field 3).
    pub state: char,
    /// User-mode CPU time in USER_HZ ticks (field 14).
    pub utime: u64,
    /// Kernel-mode CPU time in USER_HZ ticks (field 15).
    pub stime: u64,
    /// CPU the task last ran on (field 39; 0 if absent).
    pub processor: i64,
    /// Real-time priority, 0 for non-RT (field 40; 0 if absent).
    pub rt_priority: u64,
    /// Scheduling policy: 0 OTHER, 1 FIFO, 2 RR, 3 BATCH, 5 IDLE, 6 DEADLINE
    /// (field 41; 0 if absent).
    pub policy: u64,
    /// Threads in the process (field 20).
    pub num_threads: i64,
}

/// Parse a `stat` file (one line). `comm` is delimited by the first `(` and
/// the LAST `)`. Fields through 20 (`num_threads`) are required.
pub fn parse_task_stat(s: &str, file: &str) -> Result<TaskStat, ParseError> {
    let line = s.lines().next().unwrap_or("");
    let err = |msg: String| ParseError::new(file, 1, msg);
    let open = line
        .find('(')
        .ok_or_else(|| err("no '(' before comm".to_string()))?;
    let close = line
        .rfind(')')
        .filter(|&c| c > open)
        .ok_or_else(|| err("no ')' after comm".to_string()))?;
    let comm = line[open + 1..close].to_string();
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    // rest[0] is field 3.
    let field = |no: usize| rest.get(no - 3).copied();
    if rest.len() < 18 {
        return Err(err(format!(
            "expected at least 20 fields, got {}",
            rest.len() + 2
        )));
    }
    let state_s = rest[0];
    let mut chars = state_s.chars();
    let state = match (chars.next(), chars.next()) {
        (Some(c), None) => c,
        _ => return Err(err(format!("field 3 (state) {state_s:?} is not one char"))),
    };
    let u = |no: usize, name: &str| -> Result<u64, ParseError> {
        match field(no) {
            None => Ok(0),
            Some(v) => {
                dec_u64(v).ok_or_else(|| err(format!("field {no} ({name}) {v:?} is not decimal")))
            }
        }
    };
    let i = |no: usize, name: &str| -> Result<i64, ParseError> {
        match field(no) {
            None => Ok(0),
            Some(v) => {
                dec_i64(v).ok_or_else(|| err(format!("field {no} ({name}) {v:?} is not decimal")))
            }
        }
    };
    Ok(TaskStat {
        comm,
        state,
        utime: u(14, "utime")?,
        stime: u(15, "stime")?,
        num_threads: i(20, "num_threads")?,
        processor: i(39, "processor")?,
        rt_priority: u(40, "rt_priority")?,
        policy: u(41, "policy")?,
    })
}

/// `/proc/PID/task/TID/schedstat` (or `/proc/PID/schedstat`): one line of
/// three decimal numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SchedStat {
    /// Time spent running on a CPU, nanoseconds (column 1).
    pub run_ns: u64,
    /// Time spent runnable but waiting for a CPU (run-queue latency),
    /// nanoseconds (column 2).
    pub wait_ns: u64,
    /// Number of times the task was scheduled in (column 3; 0 if absent).
    pub timeslices: u64,
}

/// Parse a `schedstat` file. The first two columns are required.
pub fn parse_schedstat<R: BufRead>(r: R, file: &str) -> Result<SchedStat, ParseError> {
    let mut out: Option<SchedStat> = None;
    for_each_line(r, file, |n, line| {
        if out.is_some() || line.trim().is_empty() {
            return Ok(());
        }
        let mut v = [0u64; 3];
        let mut count = 0;
        for (i, f) in line.split_whitespace().enumerate() {
            let x = dec_u64(f).ok_or_else(|| {
                ParseError::new(file, n, format!("column {} {f:?} is not decimal", i + 1))
            })?;
            if let Some(slot) = v.get_mut(i) {
                *slot = x;
            }
            count += 1;
        }
        if count < 2 {
            return Err(ParseError::new(
                file,
                n,
                format!("expected at least 2 columns, got {count}"),
            ));
        }
        out = Some(SchedStat {
            run_ns: v[0],
            wait_ns: v[1],
            timeslices: v[2],
        });
        Ok(())
    })?;
    out.ok_or_else(|| ParseError::new(file, 0, "empty file"))
}

/// Largest CPU id accepted by [`parse_cpu_list`] (guards against huge ranges).
pub const MAX_CPU_ID: usize = 65535;

/// Expand a CPU list such as `"0-3,5,7-8"` (the `Cpus_allowed_list` /
/// `--cpus` syntax) into CPU ids, in the order written.
///
/// Whitespace around items is ignored. Rejects an empty list or item,
/// non-numbers, reversed ranges (`5-3`), duplicates and ids above
/// [`MAX_CPU_ID`].
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty CPU list".to_string());
    }
    let num = |t: &str| -> Result<usize, String> {
        let t = t.trim();
        let v = dec_u64(t).ok_or_else(|| format!("{t:?} is not a CPU number in CPU list {s:?}"))?;
        if v > MAX_CPU_ID as u64 {
            return Err(format!("CPU {v} is above the maximum {MAX_CPU_ID}"));
        }
        Ok(v as usize)
    };
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for item in s.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(format!("empty item in CPU list {s:?}"));
        }
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let v = num(item)?;
                (v, v)
            }
        };
        if lo > hi {
            return Err(format!(
                "reversed range {item:?} in CPU list (want low-high)"
            ));
        }
        for c in lo..=hi {
            if !seen.insert(c) {
                return Err(format!("CPU {c} listed twice in {s:?}"));
            }
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_list() {
        assert_eq!(
            parse_cpu_list("0-3,5,7-8").unwrap(),
            vec![0, 1, 2, 3, 5, 7, 8]
        );
        assert_eq!(parse_cpu_list(" 3, 1 ").unwrap(), vec![3, 1]);
        assert_eq!(parse_cpu_list("4").unwrap(), vec![4]);
        for bad in [
            "",
            " ",
            "1,,2",
            "3-1",
            "a",
            "1-",
            "-1",
            "1-2-3",
            "0,0",
            "0-99999999999",
        ] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_cpu_list("3-1").unwrap_err().contains("reversed"));
    }

    #[test]
    fn weird_comm() {
        let s = "42 (a) b) (c) S 1 1 1 0 -1 4194304 0 0 0 0 7 8 0 0 20 0 3 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 2 50 1 0 0 0\n";
        let t = parse_task_stat(s, "stat").unwrap();
        assert_eq!(t.comm, "a) b) (c");
        assert_eq!(t.state, 'S');
        assert_eq!(t.utime, 7);
        assert_eq!(t.stime, 8);
        assert_eq!(t.num_threads, 3);
        assert_eq!(t.processor, 2);
        assert_eq!(t.rt_priority, 50);
        assert_eq!(t.policy, 1);
    }

    #[test]
    fn short_stat() {
        let s = "42 (x) R 1 1 1 0 -1 0 0 0 0 0 7 8 0 0 20 0 3\n";
        let t = parse_task_stat(s, "stat").unwrap();
        assert_eq!(t.num_threads, 3);
        assert_eq!(t.processor, 0);
        let e = parse_task_stat("42 (x) R 1 2", "/proc/1/stat").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn status_and_schedstat() {
        let s = "Name:\tmy prog\nState:\tS (sleeping)\nThreads:\t4\nvoluntary_ctxt_switches:\t10\n";
        let t = parse_status(s.as_bytes(), "status").unwrap();
        assert_eq!(t.name, "my prog");
        assert_eq!(t.state, 'S');
        assert_eq!(t.threads, Some(4));
        assert_eq!(t.voluntary_ctxt_switches, 10);
        assert_eq!(t.nonvoluntary_ctxt_switches, 0);
        let st = parse_schedstat("1 2\n".as_bytes(), "schedstat").unwrap();
        assert_eq!(
            st,
            SchedStat {
                run_ns: 1,
                wait_ns: 2,
                timeslices: 0
            }
        );
        assert!(parse_schedstat("".as_bytes(), "schedstat").is_err());
    }
}
