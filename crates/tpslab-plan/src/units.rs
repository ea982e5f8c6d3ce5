//! Values as users write them: bit rates, byte sizes, packet rates, sequence fields.
//! Every parser returns an error for any input it cannot read exactly (no wrap, no
//! rounding a user did not ask for, no panic); property tests in `tests/` hold them to it.

use crate::limits::{MAX_RATE_PPS, SEQ_FIELD_BYTES};
use crate::PlanError;

/// Parses a rate such as `80mbit`, `622Mbit`, `1gbit`, `500kbit`, `100Mbps` or `100Mb/s`
/// (megabits per second, as networks count), `10MB/s` (megabytes per second: a capital
/// `B` is bytes), `1500bit`. A unit is required: a bare number is ambiguous (`80` read
/// as 80 bit/s surprised users). Decimal units. Returns bits per second.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let bad = || {
        format!("rate \"{s}\": allowed a number with a unit: bit, kbit, mbit, gbit (or bps, kbps, mbps, gbps, Mb/s; kB/s, MB/s, GB/s for bytes), e.g. 80mbit")
    };
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

/// Parses a size such as `64KiB`, `1MiB`, `65536`, `64KB` (decimal), returns bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("size \"{s}\": allowed bytes with B, KiB, MiB, GiB (binary) or KB, MB, GB (decimal), e.g. 64KiB")
    };
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

/// Parses an open-loop rate in datagrams per second: a positive number up to
/// [`MAX_RATE_PPS`] (fractions allowed: `0.5` is one datagram every 2 s), or `max` (back to
/// back, returned as infinity).
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
        .ok_or_else(|| {
            PlanError::value(
                label,
                s,
                format!(
                    "a rate above 0 up to {MAX_RATE_PPS:.0} pps (10000, 10k, 1.5M, 100kpps), or max"
                ),
            )
        })
}

/// Parses a sequence field `OFFSET:LEN` (LEN 1..=8 bytes) that must lie inside a payload of
/// `payload_len` bytes, with checked arithmetic: an offset near the integer limit is an
/// error, not a wrap. Returns (offset, len) in bytes.
pub fn parse_seq_field(
    label: &str,
    s: &str,
    payload_len: usize,
) -> Result<(usize, usize), PlanError> {
    let bad = || {
        PlanError::value(
            label,
            format!("\"{s}\""),
            format!(
                "OFFSET:LEN with LEN {}..={} inside the {payload_len}-byte payload, e.g. 0:2",
                SEQ_FIELD_BYTES.min, SEQ_FIELD_BYTES.max
            ),
        )
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_need_a_unit_and_sizes_are_exact() {
        assert_eq!(parse_rate("80mbit").unwrap(), 80e6);
        assert_eq!(parse_rate("10MB/s").unwrap(), 80e6);
        assert!(parse_rate("80").unwrap_err().contains("with a unit"));
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
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
        assert!(parse_size("99999999999GiB").is_err());
    }

    #[test]
    fn pps_accepts_fractions_and_max_and_refuses_the_rest() {
        assert_eq!(parse_pps("--rate", "1.5").unwrap(), 1.5);
        assert!(parse_pps("--rate", "max").unwrap().is_infinite());
        for bad in ["0", "-1", "NaN", "inf", "1e9", "", "10kbit", "10m"] {
            let e = parse_pps("--rate", bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--rate {bad}: allowed")), "{e}");
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
