//! `/proc/net/softnet_stat`: per-CPU packet backlog statistics.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use crate::common::{for_each_line, hex_u64, ParseError};

/// One line (one online CPU) of `/proc/net/softnet_stat`. All columns are
/// hex; column numbers below are 0-based. Counters are cumulative since boot.
///
/// Layout by kernel: 3.10 has 11 columns (0..=10), 5.10 has 13 (adds
/// `backlog_len`, `cpu`), 6.x has 15 (adds input/process queue lengths,
/// ignored here). Columns 3..=8 are historical zeros / `cpu_collision`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SoftnetCpu {
    /// 0-based line index. Equals the CPU id only if all CPUs are online;
    /// prefer [`SoftnetCpu::cpu`] when present.
    pub row: usize,
    /// Packets taken off the backlog/processed by NAPI on this CPU (column 0).
    pub processed: u64,
    /// Packets dropped because the per-CPU input backlog
    /// (`net.core.netdev_max_backlog`) was full (column 1).
    pub dropped: u64,
    /// Times `net_rx_action` ran out of budget or time with work left
    /// (`net.core.netdev_budget{,_usecs}`) (column 2).
    pub time_squeeze: u64,
    /// RPS inter-processor interrupts received (column 9; `None` if absent).
    pub received_rps: Option<u64>,
    /// Packets dropped by the RPS flow limit (column 10; `None` if absent).
    pub flow_limit_count: Option<u64>,
    /// Packets currently in the backlog queues (column 11, Linux >= 5.10;
    /// `None` if absent). A gauge, not a counter.
    pub backlog_len: Option<u64>,
    /// The real CPU id (column 12, Linux >= 5.10; `None` if absent).
    pub cpu: Option<u64>,
}

/// Parse `/proc/net/softnet_stat`. Each non-empty line needs at least 3
/// hex columns; every column (including unknown extra ones) must be hex.
pub fn parse_softnet<R: BufRead>(r: R, file: &str) -> Result<Vec<SoftnetCpu>, ParseError> {
    let mut out = Vec::new();
    let mut vals: Vec<u64> = Vec::with_capacity(16);
    for_each_line(r, file, |n, line| {
        if line.trim().is_empty() {
            return Ok(());
        }
        vals.clear();
        for (i, f) in line.split_whitespace().enumerate() {
            let v = hex_u64(f)
                .ok_or_else(|| ParseError::new(file, n, format!("field {i} {f:?} is not hex")))?;
            vals.push(v);
        }
        if vals.len() < 3 {
            return Err(ParseError::new(
                file,
                n,
                format!("expected at least 3 fields, got {}", vals.len()),
            ));
        }
        out.push(SoftnetCpu {
            row: out.len(),
            processed: vals[0],
            dropped: vals[1],
            time_squeeze: vals[2],
            received_rps: vals.get(9).copied(),
            flow_limit_count: vals.get(10).copied(),
            backlog_len: vals.get(11).copied(),
            cpu: vals.get(12).copied(),
        });
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns() {
        let s = "00000012 00000001 00000002 0 0 0 0 0 0 0000000a 0000000b 0000000c 00000003 0 0\n\
                 00000005 0 0\n";
        let v = parse_softnet(s.as_bytes(), "softnet").unwrap();
        assert_eq!(v[0].processed, 0x12);
        assert_eq!(v[0].received_rps, Some(10));
        assert_eq!(v[0].flow_limit_count, Some(11));
        assert_eq!(v[0].backlog_len, Some(12));
        assert_eq!(v[0].cpu, Some(3));
        assert_eq!(v[1].row, 1);
        assert_eq!(v[1].received_rps, None);
    }

    #[test]
    fn not_hex() {
        let e = parse_softnet("0 0 0\n0 1 zz\n".as_bytes(), "/proc/net/softnet_stat").unwrap_err();
        assert_eq!(
            e.to_string(),
            "/proc/net/softnet_stat line 2: field 2 \"zz\" is not hex"
        );
    }
}
