//! `/proc/net/dev`: per-interface counters.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use crate::common::{dec_u64, for_each_line, ParseError};

/// One interface line of `/proc/net/dev`: `name: 8 receive columns 8 transmit
/// columns`, all decimal and cumulative since the interface was created.
/// Column numbers below count the values after the `name:` (1-based).
/// Missing trailing columns are 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NetDev {
    /// Interface name (text before the `:`).
    pub name: String,
    /// Bytes received (column 1).
    pub rx_bytes: u64,
    /// Packets received (column 2).
    pub rx_packets: u64,
    /// Receive errors (column 3).
    pub rx_errs: u64,
    /// Received packets dropped, e.g. no buffer/ring full or unknown protocol (column 4).
    pub rx_drop: u64,
    /// Receive FIFO/overrun errors (column 5).
    pub rx_fifo: u64,
    /// Receive framing errors (column 6).
    pub rx_frame: u64,
    /// Compressed packets received (column 7).
    pub rx_compressed: u64,
    /// Multicast packets received (column 8).
    pub rx_multicast: u64,
    /// Bytes transmitted (column 9).
    pub tx_bytes: u64,
    /// Packets transmitted (column 10).
    pub tx_packets: u64,
    /// Transmit errors (column 11).
    pub tx_errs: u64,
    /// Transmitted packets dropped, e.g. qdisc full (column 12).
    pub tx_drop: u64,
    /// Transmit FIFO errors (column 13).
    pub tx_fifo: u64,
    /// Collisions (column 14).
    pub tx_colls: u64,
    /// Carrier errors (column 15).
    pub tx_carrier: u64,
    /// Compressed packets transmitted (column 16).
    pub tx_compressed: u64,
}

/// Parse `/proc/net/dev`. Header lines (those containing `|`) and blank lines
/// are skipped; every other line must be `name: decimal...`.
pub fn parse_dev<R: BufRead>(r: R, file: &str) -> Result<Vec<NetDev>, ParseError> {
    let mut out = Vec::new();
    for_each_line(r, file, |n, line| {
        if line.trim().is_empty() || line.contains('|') {
            return Ok(());
        }
        let Some((name, rest)) = line.split_once(':') else {
            return Err(ParseError::new(file, n, "expected \"name: counters...\""));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(ParseError::new(file, n, "empty interface name"));
        }
        let mut v = [0u64; 16];
        for (i, f) in rest.split_whitespace().enumerate() {
            let x = dec_u64(f).ok_or_else(|| {
                ParseError::new(
                    file,
                    n,
                    format!("{name}: column {} {f:?} is not decimal", i + 1),
                )
            })?;
            if let Some(slot) = v.get_mut(i) {
                *slot = x;
            }
        }
        out.push(NetDev {
            name: name.to_string(),
            rx_bytes: v[0],
            rx_packets: v[1],
            rx_errs: v[2],
            rx_drop: v[3],
            rx_fifo: v[4],
            rx_frame: v[5],
            rx_compressed: v[6],
            rx_multicast: v[7],
            tx_bytes: v[8],
            tx_packets: v[9],
            tx_errs: v[10],
            tx_drop: v[11],
            tx_fifo: v[12],
            tx_colls: v[13],
            tx_carrier: v[14],
            tx_compressed: v[15],
        });
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic() {
        let s = "Inter-|   Receive |  Transmit\n face |bytes packets|bytes\n  eth0:123456789012 5 0 1 0 0 0 2 9 8 0 3\n";
        let d = parse_dev(s.as_bytes(), "dev").unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].name, "eth0");
        assert_eq!(d[0].rx_bytes, 123456789012);
        assert_eq!(d[0].rx_drop, 1);
        assert_eq!(d[0].tx_drop, 3);
        assert_eq!(d[0].tx_compressed, 0);
    }
}
