//! Where a watched process's threads spent the run: the headline, then one row per
//! thread with its share of samples by class and the system call it blocked in most.

use std::io::{self, Write};
use tpslab_record::waits::{ThreadStates, ThreadWaits, WaitClass};

/// Threads listed at most (the process row always sums them all).
const MAX_ROWS: usize = 16;

/// Prints the thread waits of an observed run.
pub fn print_thread_waits(w: &mut dyn Write, tw: &ThreadWaits) -> io::Result<()> {
    let Some(head) = tpslab_analysis::waits::headline(tw) else {
        return writeln!(
            w,
            "Where the threads waited: no sample of process {} (gone, or /proc not readable)",
            tw.pid
        );
    };
    let steal = if tw.process.stolen_ns > 0 {
        ", time on a vCPU the hypervisor held estimated from /proc/stat steal"
    } else {
        ""
    };
    writeln!(
        w,
        "Where the threads waited (% of time: on a CPU and waiting for one from schedstat{steal}, the rest split by {} samples, one per thread every {} ms, of .../stat and .../syscall): {head}",
        tw.process.samples, tw.interval_ms
    )?;
    // The classes some sample fell in, and the time-only ones (from schedstat and
    // steal) that took half a percent of the process's time or more.
    let classes: Vec<WaitClass> = WaitClass::ALL
        .into_iter()
        .filter(|&c| {
            let timed = matches!(c, WaitClass::Runnable | WaitClass::Stolen);
            tw.process.by_class.get(&c).is_some_and(|&n| n > 0)
                || (timed && tw.process.share_pct(c).is_some_and(|p| p >= 0.5))
        })
        .collect();
    let mut header = vec!["thread", "samples"];
    header.extend(classes.iter().map(|c| c.label()));
    header.push("blocked most in");
    let mut t = super::table(&header);
    let row = |name: String, s: &ThreadStates| {
        let mut r = vec![name, s.samples.to_string()];
        r.extend(
            classes
                .iter()
                .map(|&c| s.share_pct(c).map_or("-".into(), |p| format!("{p:.0} %"))),
        );
        r.push(
            s.by_syscall
                .iter()
                .max_by_key(|(_, n)| **n)
                .map_or("-".into(), |(sc, _)| sc.clone()),
        );
        r
    };
    t.add_row(row(format!("process {}", tw.pid), &tw.process));
    for th in tw.threads.iter().take(MAX_ROWS) {
        // tid 0: the threads that exited during the run, folded into one row.
        let name = if th.tid == 0 {
            format!("  {}", th.comm)
        } else {
            format!("  {} {}", th.tid, th.comm)
        };
        t.add_row(row(name, &th.states));
    }
    // Narrow: the samples, then the classes from the right; where they blocked stays.
    let n = header.len();
    let order: Vec<usize> = std::iter::once(1).chain((2..n - 1).rev()).collect();
    crate::term::fit::put_dropping(w, t, &order)?;
    if tw.threads.len() > MAX_ROWS {
        writeln!(
            w,
            "  ({} more threads in the record)",
            tw.threads.len() - MAX_ROWS
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_analysis::waits::FdKind;
    use tpslab_record::waits::ThreadWait;

    #[test]
    fn the_headline_and_a_row_per_thread() {
        let mut a = ThreadStates::default();
        for _ in 0..9 {
            tpslab_analysis::waits::add_sample(
                &mut a,
                'S',
                Some("do_sys_poll"),
                Some("poll"),
                FdKind::Unknown,
            );
        }
        tpslab_analysis::waits::add_sample(&mut a, 'R', None, None, FdKind::Unknown);
        let mut tw = ThreadWaits {
            pid: 7,
            interval_ms: 100,
            ticks: 10,
            threads: vec![ThreadWait {
                tid: 7,
                comm: "python3".into(),
                states: a.clone(),
                pid: 7,
                futex_timed: 0,
            }],
            ..Default::default()
        };
        tw.process = a;
        let mut out = vec![];
        print_thread_waits(&mut out, &tw).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains(
                "process 7's threads spent 90 % of the run waiting for the network (in poll)"
            ),
            "{s}"
        );
        assert!(s.contains("7 python3"), "{s}");
        assert!(s.contains("on CPU"), "{s}");
        assert!(!s.contains("waiting on a lock"), "{s}");
        let mut out = vec![];
        print_thread_waits(&mut out, &ThreadWaits::default()).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("no sample"));
    }
}
