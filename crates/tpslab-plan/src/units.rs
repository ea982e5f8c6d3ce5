//! Values as users write them: bit rates, byte sizes, packet rates, durations, sequence
//! fields. One parser per kind of value, used by every flag and plan key of that kind (the
//! command line's wrappers are in the binary's `flags`), each refusing with one line,
//! `LABEL VALUE: allowed FORMS`.
//! Every parser returns an error for any input it cannot read exactly (no wrap, no
//! rounding a user did not ask for, no panic); property tests in `tests/` hold them to it.

use crate::limits::{MAX_RATE_PPS, SEQ_FIELD_BYTES};
use crate::PlanError;

/// A plan file's value of a size, rate or duration key as written: a TOML number
/// (`size = 1024`) or a string (`size = "1KiB"`); its text ([`std::fmt::Display`]) is read by
/// the parser of the key's kind, so a plan takes the forms the flag takes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Written {
    /// A whole number.
    Int(u64),
    /// A number with a fraction (or a negative one, which every parser refuses).
    Float(f64),
    /// A string.
    Text(String),
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Written::Int(n) => write!(f, "{n}"),
            Written::Float(x) => write!(f, "{x}"),
            Written::Text(s) => f.write_str(s),
        }
    }
}

/// What a size flag or plan key takes, as its refusal says it ([`parse_size`]).
pub const SIZE_FORMS: &str = "bytes (65536) or a size with a unit: KiB, MiB, GiB (binary; K, M, G the same) or KB, MB, GB (decimal), e.g. 64KiB, 2MiB";

/// What a duration flag or plan key takes, as its refusal says it ([`parse_duration`]).
pub const DURATION_FORMS: &str =
    "a duration with a unit: ns, us, ms, s, m (minutes), h, d, e.g. 200us, 10ms, 1.5s, 1m, 1h30m";

/// What a bit-rate flag takes, as its refusal says it ([`parse_rate`]).
pub const BITRATE_FORMS: &str = "a number with a unit: bit, kbit, mbit, gbit (or bps, kbps, mbps, gbps, Mb/s; kB/s, MB/s, GB/s for bytes), e.g. 80mbit";

/// What a packet-rate flag or plan key takes, as its refusal says it ([`parse_pps`]).
pub fn pps_forms() -> String {
    format!("a rate above 0 up to {MAX_RATE_PPS:.0} pps (10000, 10k, 1.5M, 100kpps), or max")
}

/// Parses a bit rate for `label` such as `80mbit`, `622Mbit`, `1gbit`, `500kbit`,
/// `100Mbps` or `100Mb/s` (megabits per second, as networks count), `10MB/s` (megabytes
/// per second: a capital `B` is bytes), `1500bit`. A unit is required: a bare number is
/// ambiguous (`80` read as 80 bit/s surprised users). Decimal units. Returns bits per
/// second, finite and above 0; the error is `LABEL VALUE: allowed` [`BITRATE_FORMS`].
pub fn parse_rate(label: &str, s: &str) -> Result<f64, PlanError> {
    let bad = || PlanError::value(label, s, BITRATE_FORMS);
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let unit = unit.trim();
    // "B/s" with a capital B counts bytes; "b/s" bits.
    let bytes = unit.ends_with("B/s");
    let mult = match unit.to_ascii_lowercase().as_str() {
        "bit" | "bit/s" | "bps" => 1.0,
        "kbit" | "kbit/s" | "kbps" => 1e3,
        "mbit" | "mbit/s" | "mbps" => 1e6,
        "gbit" | "gbit/s" | "gbps" => 1e9,
        "b/s" => 1.0,
        "kb/s" => 1e3,
        "mb/s" => 1e6,
        "gb/s" => 1e9,
        _ => return Err(bad()),
    } * if bytes { 8.0 } else { 1.0 };
    let r = v * mult;
    if !(r.is_finite() && r > 0.0) {
        return Err(bad());
    }
    Ok(r)
}

/// A rate in bits/s as [`parse_rate`] reads it back: the largest decimal unit that
/// writes it whole (`80Mbit`, `1Gbit`, `1500bit`), else Mbit with decimals.
pub fn format_rate(bps: f64) -> String {
    for (unit, m) in [("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)] {
        let v = bps / m;
        if v >= 1.0 && v.fract() == 0.0 {
            return format!("{v}{unit}");
        }
    }
    if bps.fract() == 0.0 && bps < 1e3 {
        return format!("{bps}bit");
    }
    format!("{}Mbit", bps / 1e6)
}

/// Parses a size for `label` such as `64KiB`, `2MiB`, `65536` (bytes), `64KB` (decimal);
/// returns bytes, above 0, exactly (a product past `u64` is refused, never wrapped). The
/// error is `LABEL VALUE: allowed` [`SIZE_FORMS`].
pub fn parse_size(label: &str, s: &str) -> Result<u64, PlanError> {
    let bad = || PlanError::value(label, s, SIZE_FORMS);
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: u64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(bad()),
    };
    v.checked_mul(mult).filter(|&b| b > 0).ok_or_else(bad)
}

/// A size in bytes as [`parse_size`] reads it back: the largest binary unit that writes
/// it whole (`64KiB`, `2MiB`, `1GiB`), else bytes (`1000000`).
pub fn format_size(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Parses a duration for `label` such as `200us`, `10ms`, `1.5s`, `1m` (a minute),
/// `1h30m`, or `0`, as humantime reads them; a bare number other than 0 has no unit and is
/// refused. The error is `LABEL VALUE: allowed` [`DURATION_FORMS`].
pub fn parse_duration(label: &str, s: &str) -> Result<std::time::Duration, PlanError> {
    humantime::parse_duration(s.trim()).map_err(|_| PlanError::value(label, s, DURATION_FORMS))
}

/// Parses an open-loop rate in datagrams per second: a positive number up to
/// [`MAX_RATE_PPS`] (fractions allowed: `0.5` is one datagram every 2 s), or `max` (back to
/// back, returned as infinity). The error is `LABEL VALUE: allowed` [`pps_forms`].
pub fn parse_pps(label: &str, s: &str) -> Result<f64, PlanError> {
    if s.trim() == "max" {
        return Ok(f64::INFINITY);
    }
    // `10k`, `1.5M`, `100kpps`: SI multipliers (k = 1000, M = 10^6, G = 10^9), `pps` optional.
    let t = s.trim();
    let t = t
        .strip_suffix("pps")
        .or_else(|| t.strip_suffix("PPS"))
        .unwrap_or(t);
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        Some((i, 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|r| r.is_finite())
        .map(|r| r * mult)
        .filter(|r| r.is_finite() && *r > 0.0 && *r <= MAX_RATE_PPS)
        .ok_or_else(|| PlanError::value(label, s, pps_forms()))
}

/// Parses a sequence field `OFFSET:LEN` (LEN 1..=8 bytes) that must lie inside a payload of
/// `payload_len` bytes, with checked arithmetic: an offset near the integer limit is an
/// error, not a wrap. Returns (offset, len) in bytes.
pub fn parse_seq_field(
    label: &str,
    s: &str,
    payload_len: usize,
) -> Result<(usize, usize), PlanError> {
    let bad = || PlanError::value(label, format!("\"{s}\""), seq_field_allowed(payload_len));
    let (o, l) = s.split_once(':').ok_or_else(bad)?;
    let (o, l): (usize, usize) = (
        o.trim().parse().map_err(|_| bad())?,
        l.trim().parse().map_err(|_| bad())?,
    );
    if !seq_field_fits(o, l, payload_len) {
        return Err(bad());
    }
    Ok((o, l))
}

/// What a sequence field in a payload of `payload_len` bytes may be, for errors.
pub fn seq_field_allowed(payload_len: usize) -> String {
    format!(
        "OFFSET:LEN with LEN {}..={} inside the {payload_len}-byte payload, e.g. 0:2",
        SEQ_FIELD_BYTES.min, SEQ_FIELD_BYTES.max
    )
}

/// Whether a sequence field (offset, len) fits: len within [`SEQ_FIELD_BYTES`], and
/// offset + len (checked) within the payload.
pub fn seq_field_fits(offset: usize, len: usize, payload_len: usize) -> bool {
    let len_ok = (SEQ_FIELD_BYTES.min..=SEQ_FIELD_BYTES.max).contains(&(len as u64));
    offset
        .checked_add(len)
        .is_some_and(|end| len_ok && end <= payload_len)
}

/// Parses a CPU list such as `0-1,3` (or `all`) for `label` on a host with `ncpu` online
/// CPUs; every CPU must exist.
pub fn parse_cpus(label: &str, s: &str, ncpu: usize) -> Result<Vec<usize>, PlanError> {
    if s == "all" {
        return Ok((0..ncpu).collect());
    }
    let v = tpslab_proc::pid::parse_cpu_list(s)
        .map_err(|e| PlanError::Conflict(format!("{label} \"{s}\": {e}")))?;
    if let Some(c) = v.iter().find(|&&c| c >= ncpu) {
        return Err(PlanError::Conflict(format!(
            "{label} \"{s}\": CPU {c} does not exist; allowed 0..={} or all",
            ncpu.saturating_sub(1)
        )));
    }
    Ok(v)
}

/// What a sweep's `busy_poll` level (SO_BUSY_POLL) takes, as its refusal says it
/// ([`parse_busy_poll_us`]).
pub const BUSY_POLL_FORMS: &str =
    "microseconds (50) or a duration in whole microseconds, e.g. 50us or 1ms";

/// Parses an SO_BUSY_POLL time for `label` (a sweep's `busy_poll` level), in
/// microseconds: a bare whole number is microseconds (the socket option's unit); a duration (`50us`, `1ms`)
/// must be whole microseconds up to `u32::MAX`. The error is `LABEL VALUE: allowed`
/// [`BUSY_POLL_FORMS`].
pub fn parse_busy_poll_us(label: &str, s: &str) -> Result<u32, PlanError> {
    let bad = || PlanError::value(label, s, BUSY_POLL_FORMS);
    let t = s.trim();
    let us = match t.parse::<u64>() {
        Ok(n) => n,
        Err(_) => {
            let d = humantime::parse_duration(t).map_err(|_| bad())?;
            if !d.subsec_nanos().is_multiple_of(1000) {
                return Err(bad());
            }
            u64::try_from(d.as_micros()).map_err(|_| bad())?
        }
    };
    u32::try_from(us).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_poll_takes_microseconds_or_a_duration_in_whole_microseconds() {
        let l = "--factor busy_poll: level";
        assert_eq!(parse_busy_poll_us(l, "50").unwrap(), 50);
        assert_eq!(parse_busy_poll_us(l, "50us").unwrap(), 50);
        assert_eq!(parse_busy_poll_us(l, "1ms").unwrap(), 1000);
        assert_eq!(parse_busy_poll_us(l, "0").unwrap(), 0);
        for bad in ["1500ns", "-1", "5000s", "fast", "x1", "4294967296"] {
            assert_eq!(
                parse_busy_poll_us(l, bad).unwrap_err().to_string(),
                format!("{l} {bad}: allowed {BUSY_POLL_FORMS}"),
                "{bad}"
            );
        }
    }

    #[test]
    fn rates_need_a_unit_and_sizes_are_exact() {
        assert_eq!(parse_rate("--x", "80mbit").unwrap(), 80e6);
        assert_eq!(parse_rate("--x", "10MB/s").unwrap(), 80e6);
        assert_eq!(
            parse_rate("--lab-rate", "80").unwrap_err().to_string(),
            format!("--lab-rate 80: allowed {BITRATE_FORMS}")
        );
        assert_eq!(parse_size("--x", "64KiB").unwrap(), 65536);
        assert_eq!(parse_pps("--rate", "10k").unwrap(), 10_000.0);
        assert_eq!(parse_pps("--rate", "1.5M").unwrap(), 1_500_000.0);
        assert_eq!(parse_pps("--rate", "100kpps").unwrap(), 100_000.0);
        assert_eq!(parse_pps("--rate", "2500").unwrap(), 2_500.0);
        assert_eq!(parse_pps("--rate", "0.5").unwrap(), 0.5);
        for bad in [
            "10m", "k", "1e3k", "-1k", "0k", "200M", "10 kbit", "nan", "infk",
        ] {
            if bad == "1e3k" {
                // 1e3 x 1000 = 10^6: a number with an exponent is still a number.
                assert_eq!(parse_pps("--rate", bad).unwrap(), 1e6);
                continue;
            }
            let e = parse_pps("--rate", bad).unwrap_err().to_string();
            assert!(e.contains("10k, 1.5M"), "{bad}: {e}");
        }
        assert!(parse_size("--x", "99999999999GiB").is_err());
    }

    /// A value as an error shows it: quoted when empty.
    fn shown(v: &str) -> String {
        if v.is_empty() {
            "\"\"".into()
        } else {
            v.into()
        }
    }

    #[test]
    fn sizes_and_durations_take_their_forms_and_refuse_in_one_shape() {
        for (s, b) in [
            ("2MiB", 2 << 20),
            ("64KiB", 65536),
            ("1000000", 1_000_000),
            ("1MB", 1_000_000),
            ("2m", 2 << 20),
            (" 4096 ", 4096),
            ("1GiB", 1 << 30),
        ] {
            assert_eq!(parse_size("--rcvbuf", s), Ok(b), "{s}");
        }
        for bad in [
            "2x",
            "",
            "0",
            "-1",
            "1.5MiB",
            "2 MiBs",
            "18446744073709551616",
        ] {
            assert_eq!(
                parse_size("--rcvbuf", bad).unwrap_err().to_string(),
                format!("--rcvbuf {}: allowed {SIZE_FORMS}", shown(bad)),
                "{bad:?}"
            );
        }
        use std::time::Duration;
        for (s, d) in [
            ("200us", Duration::from_micros(200)),
            ("10ms", Duration::from_millis(10)),
            ("2s", Duration::from_secs(2)),
            ("1.5s", Duration::from_millis(1500)),
            ("1m", Duration::from_secs(60)),
            ("1h30m", Duration::from_secs(5400)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
        ] {
            assert_eq!(parse_duration("--duration", s), Ok(d), "{s}");
        }
        for bad in ["5", "", "2x", "-1s", "ms", "1.5"] {
            assert_eq!(
                parse_duration("--duration", bad).unwrap_err().to_string(),
                format!("--duration {}: allowed {DURATION_FORMS}", shown(bad)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn sizes_format_back_to_what_parses_to_them() {
        for b in [
            1,
            1000,
            1024,
            65536,
            1_000_000,
            2 << 20,
            3 << 30,
            (1 << 30) + 1,
        ] {
            assert_eq!(parse_size("--x", &format_size(b)), Ok(b));
        }
        assert_eq!(format_size(2 << 30), "2GiB");
        assert_eq!(format_size(1 << 20), "1MiB");
        assert_eq!(format_size(1_000_000), "1000000");
    }

    #[test]
    fn pps_accepts_fractions_and_max_and_refuses_the_rest() {
        assert_eq!(parse_pps("--rate", "1.5").unwrap(), 1.5);
        assert!(parse_pps("--rate", "max").unwrap().is_infinite());
        for bad in ["0", "-1", "NaN", "inf", "1e9", "", "10kbit", "10m"] {
            let e = parse_pps("--rate", bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--rate {}: allowed", shown(bad))),
                "{e}"
            );
        }
    }

    #[test]
    fn seq_field_bounds_are_checked_without_wrapping() {
        assert_eq!(parse_seq_field("--seq-field", "0:2", 29).unwrap(), (0, 2));
        assert_eq!(parse_seq_field("--seq-field", "27:2", 29).unwrap(), (27, 2));
        for bad in [
            "28:2",
            "0:0",
            "0:9",
            "18446744073709551615:2",
            "x",
            "1:",
            ":1",
        ] {
            let e = parse_seq_field("--seq-field", bad, 29)
                .unwrap_err()
                .to_string();
            assert!(e.contains("inside the 29-byte payload"), "{bad}: {e}");
        }
    }
}
