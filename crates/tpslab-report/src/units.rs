//! How the renderers write figures every format shares: a duration in ns with a readable
//! unit, a wall-clock time in UTC. Its own module so that the terminal and HTML renderers
//! (the page embeds the terminal text) both use it without depending on each other.

/// Formats nanoseconds with a readable unit.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// When a record's command started, in UTC, or "(not recorded)" for a record that does
/// not carry it (0: a watch written by an older release), never 1970-01-01.
pub fn started(ms: u64) -> String {
    if ms == 0 {
        "(not recorded)".into()
    } else {
        utc(ms)
    }
}

/// `2026-11-23 21:42:38 UTC` from ms since the Unix epoch (civil-from-days, Howard
/// Hinnant's algorithm).
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2026-11-23 21:42:38 UTC
        assert_eq!(utc(1_795_470_158_000), "2026-11-23 21:42:38 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
    }
}
