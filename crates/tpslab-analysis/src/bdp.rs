//! Bandwidth-delay product arithmetic (S4): the window a TCP flow needs for a rate over an
//! RTT, the buffers that give that window, and the ceiling a given buffer imposes.

use tpslab_record::bdp::{BufferPlan, Ceiling, HostBuffers, Need};

/// The bandwidth-delay product: bytes in flight to fill `rate_bps` over `rtt_s`.
pub fn bdp_bytes(rate_bps: f64, rtt_s: f64) -> u64 {
    (rate_bps / 8.0 * rtt_s).ceil() as u64
}

/// The most a window of `window_bytes` carries over `rtt_s`: window / RTT, bits/s.
pub fn window_ceiling_bps(window_bytes: u64, rtt_s: f64) -> f64 {
    window_bytes as f64 * 8.0 / rtt_s
}

/// The buffer plan for `rate_bps` over `rtt_s`.
pub fn buffer_plan(rate_bps: f64, rtt_s: f64) -> BufferPlan {
    let bdp = bdp_bytes(rate_bps, rtt_s);
    BufferPlan {
        bdp_bytes: bdp,
        buffer_bytes: bdp.saturating_mul(2).div_ceil(65536).saturating_mul(65536),
    }
}

/// The sysctls to raise so a flow can have `p`'s buffer, from the host's values
/// (`tcp_rmem`/`tcp_wmem` as read, three fields; `rmem_max`/`wmem_max` in bytes; None when
/// unknown): the last field of tcp_rmem/tcp_wmem (what autotuning may reach) below the
/// buffer, with the first two kept; rmem_max/wmem_max below what setsockopt must ask (half
/// the buffer, which the kernel doubles). (dotted key, value) in that order; empty when
/// the host already allows the buffer. `tpslab bdp` and `tpslab doctor --for tcp` both
/// use it.
pub fn host_fixes(
    p: &BufferPlan,
    tcp_rmem: Option<&str>,
    tcp_wmem: Option<&str>,
    rmem_max: Option<u64>,
    wmem_max: Option<u64>,
) -> Vec<(&'static str, String)> {
    let mut lines = vec![];
    let raise3 = |v: Option<&str>| -> Option<String> {
        let parts: Vec<&str> = v?.split_whitespace().collect();
        let max: u64 = parts.get(2)?.parse().ok()?;
        (parts.len() == 3 && max < p.buffer_bytes)
            .then(|| format!("{} {} {}", parts[0], parts[1], p.buffer_bytes))
    };
    if let Some(v) = raise3(tcp_rmem) {
        lines.push(("net.ipv4.tcp_rmem", v));
    }
    if let Some(v) = raise3(tcp_wmem) {
        lines.push(("net.ipv4.tcp_wmem", v));
    }
    let ask = p.setsockopt_bytes();
    if rmem_max.is_some_and(|m| m < ask) {
        lines.push(("net.core.rmem_max", ask.to_string()));
    }
    if wmem_max.is_some_and(|m| m < ask) {
        lines.push(("net.core.wmem_max", ask.to_string()));
    }
    lines
}

/// The largest window TCP can advertise: 65535 << 14 (window scale 14), bytes.
pub const MAX_TCP_WINDOW: u64 = 65535 << 14;

/// The buffers `rate_bps` over `rtt_s` needs, and what `host` must raise for them
/// ([`buffer_plan`], [`host_fixes`]).
pub fn need(rate_bps: f64, rtt_s: f64, host: HostBuffers) -> Need {
    let plan = buffer_plan(rate_bps, rtt_s);
    let fixes = host_fixes(
        &plan,
        host.tcp_rmem.as_deref(),
        host.tcp_wmem.as_deref(),
        host.rmem_max,
        host.wmem_max,
    )
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Need {
        rate_bps,
        rtt_s,
        plan,
        host,
        fixes,
    }
}

/// The ceiling a window of `window_bytes` puts on a flow over `rtt_s`.
pub fn ceiling(window_bytes: u64, rtt_s: f64) -> Ceiling {
    Ceiling {
        window_bytes,
        rtt_s,
        ceiling_bps: window_ceiling_bps(window_bytes, rtt_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_plan::units::{parse_rate, parse_size};

    #[test]
    fn s4_64k_window_over_30ms_caps_at_17_mbit() {
        let c = window_ceiling_bps(parse_size("--buffer", "64KiB").unwrap(), 0.030);
        // 65536 B * 8 / 0.03 s = 17.476 Mbit/s: S4's "~17 Mbit/s".
        assert!((c / 1e6 - 17.476).abs() < 0.001, "{c}");
        // Below the vendor's 30 Mbit/s minimum on a 622 Mbit/s link.
        assert!(c < parse_rate("--rate", "30mbit").unwrap());
    }

    #[test]
    fn s4_fix_for_80_mbit() {
        let p = buffer_plan(parse_rate("--rate", "80mbit").unwrap(), 0.030);
        assert_eq!(p.bdp_bytes, 300_000);
        assert_eq!(p.buffer_bytes, 655_360); // 600000 rounded up to 64 KiB
                                             // That window carries the rate; the old 64 KiB would not.
        assert!(window_ceiling_bps(p.bdp_bytes, 0.030) >= 80e6);
    }

    #[test]
    fn host_fixes_raise_only_what_is_short() {
        let p = buffer_plan(1e9, 0.1); // 12.5 MB in flight, a 25034752-byte buffer
        assert_eq!(p.buffer_bytes, 25_034_752);
        let fixes = host_fixes(
            &p,
            Some("4096 131072 6291456"),
            Some("4096 16384 33554432"),
            Some(212_992),
            Some(16_777_216),
        );
        assert_eq!(
            fixes,
            [
                ("net.ipv4.tcp_rmem", "4096 131072 25034752".to_string()),
                ("net.core.rmem_max", "12517376".to_string())
            ]
        );
        assert_eq!(host_fixes(&p, None, Some("bad"), None, None), vec![]);
    }

    #[test]
    fn units_and_errors() {
        assert_eq!(parse_rate("--rate", "1gbit").unwrap(), 1e9);
        assert_eq!(parse_rate("--rate", "100Mbps").unwrap(), 100e6);
        assert_eq!(parse_rate("--rate", "10MB/s").unwrap(), 80e6);
        assert_eq!(parse_rate("--rate", "622Mbit").unwrap(), 622e6);
        assert_eq!(parse_rate("--rate", "1500bit").unwrap(), 1500.0);
        assert_eq!(parse_rate("--rate", "100Mb/s").unwrap(), 100e6);
        // A bare number is ambiguous: refused with the units allowed.
        assert!(parse_rate("--rate", "80")
            .unwrap_err()
            .to_string()
            .contains("with a unit"));
        assert!(parse_rate("--rate", "fast").is_err());
        assert!(parse_rate("--rate", "0mbit").is_err());
        assert!(parse_rate("--rate", "80 furlongs").is_err());
        assert_eq!(parse_size("--buffer", "1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("--buffer", "64KB").unwrap(), 64_000);
        assert_eq!(parse_size("--buffer", "65536").unwrap(), 65536);
        assert!(parse_size("--buffer", "-1").is_err());
        assert!(parse_size("--buffer", "0").is_err());
        assert!(parse_size("--buffer", "99999999999GiB").is_err());
    }
}
