//! `/proc/net/udp` and `/proc/net/udp6` (also `udplite`, `udplite6`): one line per socket.

use std::io::BufRead;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::common::{dec_u64, for_each_line, hex_u64, ParseError};

/// One UDP socket line of `/proc/net/udp{,6}`.
///
/// Columns (whitespace separated): `sl local_address rem_address st
/// tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ref pointer drops`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UdpSocket {
    /// Bound address and port (column 2 `local_address`, `ADDR:PORT` in hex).
    /// IPv6 sockets bound to a v4-mapped address stay `SocketAddr::V6`
    /// (e.g. `[::ffff:127.0.0.1]:9002`).
    pub local: SocketAddr,
    /// Connected peer (column 3 `rem_address`); all-zero when unconnected.
    pub remote: SocketAddr,
    /// Socket state (column 4 `st`, hex): 7 = TCP_CLOSE (unconnected),
    /// 1 = TCP_ESTABLISHED (connected).
    pub state: u8,
    /// Bytes queued for sending (column 5, hex before the `:`).
    pub tx_queue: u64,
    /// Bytes queued for receiving (column 5, hex after the `:`). This is the
    /// kernel's memory accounting (skb truesize), not payload bytes.
    pub rx_queue: u64,
    /// Owner UID (column 8 `uid`, decimal).
    pub uid: u32,
    /// Socket inode (column 10 `inode`, decimal); matches `socket:[INODE]`
    /// links in `/proc/PID/fd`.
    pub inode: u64,
    /// Socket reference count (column 11 `ref`, decimal).
    pub refcnt: u64,
    /// Datagrams dropped on this socket since creation (column 13 `drops`,
    /// decimal); `None` on kernels without that column (< 2.6.33).
    pub drops: Option<u64>,
}

impl Default for UdpSocket {
    fn default() -> Self {
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        UdpSocket {
            local: any,
            remote: any,
            state: 0,
            tx_queue: 0,
            rx_queue: 0,
            uid: 0,
            inode: 0,
            refcnt: 0,
            drops: None,
        }
    }
}

/// Parse `/proc/net/udp` or `/proc/net/udp6` (format detected per address:
/// 8 hex digits = IPv4, 32 = IPv6).
///
/// Addresses are decoded assuming the file was produced by a kernel of the
/// same byte order as this process (the kernel prints network-order words
/// as native integers).
/// Lines whose first token is `sl` (the header) and blank lines are skipped.
pub fn parse_udp<R: BufRead>(r: R, file: &str) -> Result<Vec<UdpSocket>, ParseError> {
    let mut out = Vec::new();
    for_each_line(r, file, |n, line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() || f[0] == "sl" {
            return Ok(());
        }
        let err = |msg: String| ParseError::new(file, n, msg);
        if f.len() < 11 {
            return Err(err(format!(
                "expected at least 11 fields (sl .. ref), got {}",
                f.len()
            )));
        }
        if !f[0].ends_with(':') || dec_u64(&f[0][..f[0].len() - 1]).is_none() {
            return Err(err(format!("field 1 (sl) {:?} is not \"N:\"", f[0])));
        }
        let local = parse_addr(f[1]).map_err(|m| err(format!("field 2 (local_address): {m}")))?;
        let remote = parse_addr(f[2]).map_err(|m| err(format!("field 3 (rem_address): {m}")))?;
        let state = hex_u64(f[3])
            .and_then(|v| u8::try_from(v).ok())
            .ok_or_else(|| err(format!("field 4 (st) {:?} is not a hex byte", f[3])))?;
        let (tx, rx) = f[4]
            .split_once(':')
            .and_then(|(a, b)| Some((hex_u64(a)?, hex_u64(b)?)))
            .ok_or_else(|| {
                err(format!(
                    "field 5 (tx_queue:rx_queue) {:?} is not HEX:HEX",
                    f[4]
                ))
            })?;
        let uid = dec_u64(f[7])
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| err(format!("field 8 (uid) {:?} is not a decimal u32", f[7])))?;
        let inode = dec_u64(f[9])
            .ok_or_else(|| err(format!("field 10 (inode) {:?} is not decimal", f[9])))?;
        let refcnt = dec_u64(f[10])
            .ok_or_else(|| err(format!("field 11 (ref) {:?} is not decimal", f[10])))?;
        let drops = match f.get(12) {
            None => None,
            Some(d) => Some(
                dec_u64(d).ok_or_else(|| err(format!("field 13 (drops) {d:?} is not decimal")))?,
            ),
        };
        out.push(UdpSocket {
            local,
            remote,
            state,
            tx_queue: tx,
            rx_queue: rx,
            uid,
            inode,
            refcnt,
            drops,
        });
        Ok(())
    })?;
    Ok(out)
}

/// Decode `0100007F:2328` (IPv4) or 32 hex digits + `:PORT` (IPv6).
fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let (a, p) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not ADDR:PORT"))?;
    let port = hex_u64(p)
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(|| format!("port {p:?} is not a hex u16"))?;
    if !a.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("address {a:?} is not hex"));
    }
    let ip = match a.len() {
        8 => {
            let w = u32::from_str_radix(a, 16).map_err(|e| format!("address {a:?}: {e}"))?;
            IpAddr::V4(Ipv4Addr::from(w.to_ne_bytes()))
        }
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                let w = u32::from_str_radix(&a[i * 8..i * 8 + 8], 16)
                    .map_err(|e| format!("address {a:?}: {e}"))?;
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        l => return Err(format!("address {a:?} has {l} hex digits (want 8 or 32)")),
    };
    Ok(SocketAddr::new(ip, port))
}

#[cfg(all(test, target_endian = "little"))]
mod tests {
    use super::*;

    const V6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
 6757: 00000000000000000000000001000000:2329 00000000000000000000000000000000:0000 07 00000000:00000340 00:00000000 00000000     0        0 6709 2 000000003dff5e2a 0
 6758: 0000000000000000FFFF00000100007F:232A 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 6710 2 000000005fd68680 5
";

    #[test]
    fn v6_loopback_and_mapped() {
        let s = parse_udp(V6.as_bytes(), "/proc/net/udp6").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].local, "[::1]:9001".parse().unwrap());
        assert_eq!(s[0].remote, "[::]:0".parse().unwrap());
        assert_eq!(s[0].rx_queue, 0x340);
        assert_eq!(s[0].state, 7);
        assert_eq!(s[0].inode, 6709);
        assert_eq!(s[0].drops, Some(0));
        assert_eq!(s[1].local, "[::ffff:127.0.0.1]:9002".parse().unwrap());
        assert_eq!(s[1].uid, 1000);
        assert_eq!(s[1].drops, Some(5));
    }

    #[test]
    fn v4_without_drops() {
        let s = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer\n\
                 11050: 0100007F:B3EE 0100007F:2328 01 00000010:00000000 00:00000000 00000000     0        0 6711 2 ffff88003a1b2c00\n";
        let s = parse_udp(s.as_bytes(), "udp").unwrap();
        assert_eq!(s[0].local, "127.0.0.1:46062".parse().unwrap());
        assert_eq!(s[0].remote, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(s[0].tx_queue, 16);
        assert_eq!(s[0].refcnt, 2);
        assert_eq!(s[0].drops, None);
    }

    #[test]
    fn bad_address() {
        let s = "1: 0100007:2328 00000000:0000 07 0:0 00:0 0 0 0 1 2 0 0\n";
        let e = parse_udp(s.as_bytes(), "udp").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.msg.contains("local_address"), "{e}");
    }
}
