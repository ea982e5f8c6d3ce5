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
    match attempt(test, attempts, f) {
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
    attempt(test, attempts, f).unwrap_or_else(|last| {
        panic!("{test}: every one of {attempts} attempts failed; the last: {last}")
    })
}

/// Up to `attempts` calls of `f`, each failure's reason printed: the first value, or the
/// last reason.
fn attempt<T>(
    test: &str,
    attempts: usize,
    mut f: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let mut last = String::new();
    for i in 1..=attempts {
        match f() {
            Ok(v) => return Ok(v),
            Err(why) => {
                eprintln!("{test}: attempt {i} of {attempts} spoiled: {why}");
                last = why;
            }
        }
    }
    Err(last)
}

/// The share of the last 10 s in which some runnable task waited for a CPU, percent
/// (/proc/pressure/cpu `some avg10`; None without PSI): how loaded the host is, from the
/// kernel, for tests whose figures a CPU hog beside them can spoil.
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
