//! Timing tests on a busy host: a measurement the machine spoiled is repeated a bounded
//! number of times, then counted as a skip ("spoiled by the machine"), never a failure nor
//! a silent pass; a 95 % test's chance difference is retried likewise.

use super::skip;

/// Runs a timing-dependent measurement up to `attempts` times: `f` returns Err(why) when
/// the machine, not the code, spoiled it (the generator fell behind its schedule on a
/// loaded 2-CPU host, say); the reason of each retry is printed. When every attempt was
/// spoiled the test is skipped, counted in [`skip_list`] as "spoiled by the machine" with
/// the last reason, and None is returned for the test to end: a busy host gives a pass or
/// a counted skip, never a failure of the product nor a silent pass. Checks that must hold
/// whatever the load stay outside `f`, or panic inside it.
#[must_use = "None: the test was skipped (recorded); end it there"]
pub fn retry<T>(test: &str, attempts: usize, f: impl FnMut() -> Result<T, String>) -> Option<T> {
    match attempt(test, attempts, true, f) {
        Ok(v) => Some(v),
        Err(last) => {
            skip(
                test,
                &format!("spoiled by the machine in all {attempts} attempts; the last: {last}"),
            );
            None
        }
    }
}

/// Runs a measurement that a 95 % test calls different by chance one time in twenty up to
/// `attempts` times (`f` returns Err(why) for such a draw); every attempt failing fails the
/// test: chance alone does that one time in 20^attempts.
pub fn retry_chance<T>(test: &str, attempts: usize, f: impl FnMut() -> Result<T, String>) -> T {
    attempt(test, attempts, false, f).unwrap_or_else(|last| {
        panic!("{test}: every one of {attempts} attempts failed; the last: {last}")
    })
}

/// Up to `attempts` calls of `f`, each failure's reason printed (and noted, when `machine`:
/// the machine spoiled it, not a chance draw): the first value, or the last reason.
fn attempt<T>(
    test: &str,
    attempts: usize,
    machine: bool,
    mut f: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let mut last = String::new();
    for i in 1..=attempts {
        match f() {
            Ok(v) => return Ok(v),
            Err(why) => {
                eprintln!("{test}: attempt {i} of {attempts} spoiled: {why}");
                if machine {
                    note_retry(test, i, attempts, &why);
                }
                last = why;
            }
        }
    }
    Err(last)
}

/// Appends `name<TAB>attempt i of n<TAB>why` (the reason cut at 300 bytes, on one line)
/// to [`super::retries_file`] when there is one: test.sh prints the spoiled attempts after
/// the run, since a retry doubles a test's time and a quiet machine should need none.
fn note_retry(test: &str, i: usize, attempts: usize, why: &str) {
    use std::io::Write;
    let Some(path) = super::retries_file() else {
        return;
    };
    let mut why: String = why.split_whitespace().collect::<Vec<_>>().join(" ");
    if why.len() > 300 {
        let mut cut = 300;
        while !why.is_char_boundary(cut) {
            cut -= 1;
        }
        why.truncate(cut);
        why.push_str(" ...");
    }
    let test = super::full_name(test);
    let line = format!("{test}\tattempt {i} of {attempts}\t{why}\n");
    // One write of a short line to a file opened for appending: whole lines even with
    // several test threads and processes.
    if let Ok(mut f) = std::fs::File::options()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The share of the last 10 s in which some runnable task waited for a CPU, percent
/// (/proc/pressure/cpu `some avg10`; None without PSI): how loaded the host is, from the
/// kernel, printed with a retry's reason. It counts tasks at idle priority too (test.sh's
/// build of the other test binaries), which give way to the tests: [`Neighbour`], which
/// leaves them out, is what a retry should decide on (compare's noise test still reads
/// this, and is lenient while that build runs: the compare's model misses run-to-run
/// variance, a finding of 2026-12-07 not yet fixed).
#[allow(dead_code)]
pub fn cpu_pressure_pct() -> Option<f64> {
    let t = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = t.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// Ok when a `load http` record's generator sent its whole plan (`result.sent` =
/// `result.intended`); else Err naming how far behind it was: on a busy host the plan
/// ends on time with the late requests unsent, which spoils a test of exact counts.
pub fn plan_sent(r: &serde_json::Value) -> Result<(), String> {
    let res = &r["result"];
    let (sent, intended) = (res["sent"].as_u64(), res["intended"].as_u64());
    if sent.is_some() && sent == intended {
        return Ok(());
    }
    Err(format!(
        "the generator sent {} of {} planned requests ({} late, the latest by {} ns)",
        res["sent"], res["intended"], res["behind"], res["behind_max_ns"]
    ))
}

/// What other processes on this host did with the CPUs over a window: `/proc/stat`'s busy
/// time (user, system, irq, softirq, steal; not nice) of all CPUs less this test process's own
/// (every thread: the quiet tests beside it too) and its children's that were waited for
/// (`/proc/self/stat` utime, stime, cutime, cstime), less that of `pids` still running (a
/// server the test started). A machine signal independent of the product: a retry may call
/// a run spoiled by the machine only when a neighbour took CPU time ([`Neighbour::busy`]).
#[allow(dead_code)]
pub struct Neighbour {
    start: std::time::Instant,
    others0: f64,
    pids: Vec<u32>,
}

/// Busy ticks of all CPUs (/proc/stat's `cpu` line, `CpuTimes::busy` less nice: a niced
/// process, a build at idle priority, gives way to the tests, which run at the default
/// priority), less this process's with its waited-for children's and `pids`' (their
/// /proc/PID/stat utime + stime + cutime + cstime), USER_HZ ticks.
fn others_ticks(pids: &[u32]) -> f64 {
    let stat = std::fs::read("/proc/stat").unwrap_or_default();
    let busy = tpslab_proc::parse_stat(&stat[..], "/proc/stat")
        .map_or(0, |k| k.total.busy() - k.total.nice);
    let times = |file: String| {
        std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| tpslab_proc::tree::parse_times(&t, &file).ok())
            .map_or(0, |t| t.with_children())
    };
    let own = times("/proc/self/stat".into());
    let theirs: u64 = pids.iter().map(|p| times(format!("/proc/{p}/stat"))).sum();
    busy as f64 - own as f64 - theirs as f64
}

#[allow(dead_code)]
impl Neighbour {
    /// Starts the window; `pids`: processes the test started that run through it.
    pub fn start(pids: &[u32]) -> Neighbour {
        Neighbour {
            start: std::time::Instant::now(),
            others0: others_ticks(pids),
            pids: pids.to_vec(),
        }
    }

    /// Other processes' share of all CPUs' time since the start, percent.
    pub fn share_pct(&self) -> f64 {
        let wall = self.start.elapsed().as_secs_f64();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let ticks = (others_ticks(&self.pids) - self.others0).max(0.0);
        100.0 * ticks / 100.0 / (wall * cpus).max(1e-3)
    }

    /// `Some(why)` when other processes took 10 % or more of all CPUs' time in the window
    /// (a quiet host here: under 2 %), for a retry's reason; `None` when the host was quiet
    /// enough that a bad figure is the product's.
    pub fn busy(&self) -> Option<String> {
        let pct = self.share_pct();
        (pct >= 10.0).then(|| format!("other processes used {pct:.0} % of the CPUs' time"))
    }
}
