//! `/proc/net/snmp` and `/proc/net/snmp6` (UDP and UDP-Lite MIB counters).

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use crate::common::{dec_u64, for_each_line, is_integer, ParseError};

/// UDP MIB counters for one protocol (Udp, UdpLite, Udp6 or UdpLite6).
///
/// Sources: in `/proc/net/snmp` the `Udp:`/`UdpLite:` header line names the
/// column (e.g. `InDatagrams`) and the following value line holds the value;
/// in `/proc/net/snmp6` the line `Udp6<Name> <value>` (or `UdpLite6<Name>`).
/// All values are cumulative counts since boot (per network namespace).
/// A counter missing on this kernel is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UdpCounters {
    /// Datagrams delivered to applications (column `InDatagrams`). Counted
    /// when the application *reads* the datagram, not when it is queued.
    pub in_datagrams: u64,
    /// Datagrams for a port with no listener (column `NoPorts`).
    pub no_ports: u64,
    /// Datagrams dropped on receive for any reason, including rcvbuf
    /// overflow and checksum errors (column `InErrors`).
    pub in_errors: u64,
    /// Datagrams sent (column `OutDatagrams`).
    pub out_datagrams: u64,
    /// Datagrams dropped because the socket receive buffer was full
    /// (column `RcvbufErrors`; missing before Linux 2.6.27 -> 0).
    pub rcvbuf_errors: u64,
    /// Sends failed because the socket send buffer was full
    /// (column `SndbufErrors`; missing before Linux 2.6.27 -> 0).
    pub sndbuf_errors: u64,
    /// Datagrams with a bad checksum (column `InCsumErrors`; Linux >= 3.10, else 0).
    pub in_csum_errors: u64,
    /// Broadcast/multicast datagrams nobody listened to
    /// (column `IgnoredMulti`; Linux >= 3.19, else 0).
    pub ignored_multi: u64,
    /// Datagrams dropped because of socket memory accounting limits
    /// (column `MemErrors`; Linux >= 5.7, else 0).
    pub mem_errors: u64,
}

impl UdpCounters {
    /// Set the counter named `name` (as in `/proc/net/snmp`, e.g.
    /// `"InDatagrams"`). Returns false for unknown names (ignored).
    fn set(&mut self, name: &str, v: u64) -> bool {
        let slot = match name {
            "InDatagrams" => &mut self.in_datagrams,
            "NoPorts" => &mut self.no_ports,
            "InErrors" => &mut self.in_errors,
            "OutDatagrams" => &mut self.out_datagrams,
            "RcvbufErrors" => &mut self.rcvbuf_errors,
            "SndbufErrors" => &mut self.sndbuf_errors,
            "InCsumErrors" => &mut self.in_csum_errors,
            "IgnoredMulti" => &mut self.ignored_multi,
            "MemErrors" => &mut self.mem_errors,
            _ => return false,
        };
        *slot = v;
        true
    }
}

/// Parsed `/proc/net/snmp` (only the UDP parts are kept).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Snmp {
    /// The `Udp:` line pair; `None` if absent.
    pub udp: Option<UdpCounters>,
    /// The `UdpLite:` line pair; `None` if absent (kernels < 2.6.20).
    pub udplite: Option<UdpCounters>,
}

/// Parsed `/proc/net/snmp6` (only the UDP parts are kept).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Snmp6 {
    /// `Udp6*` lines; `Some` if at least one `Udp6` line exists.
    pub udp6: Option<UdpCounters>,
    /// `UdpLite6*` lines; `Some` if at least one `UdpLite6` line exists.
    pub udplite6: Option<UdpCounters>,
}

/// Parse `/proc/net/snmp`.
///
/// The file is a sequence of line pairs `Proto: Name1 Name2 ...` /
/// `Proto: v1 v2 ...`. UDP values are matched by column name, so extra or
/// missing columns are tolerated. Other protocols are skipped but their value
/// line must have as many fields as the header and every value must be an
/// integer (signed values such as `Tcp MaxConn -1` are accepted).
pub fn parse_snmp<R: BufRead>(r: R, file: &str) -> Result<Snmp, ParseError> {
    let mut out = Snmp::default();
    for_each_pair(r, file, |n, prefix, names, values| {
        let target = match prefix {
            "Udp" => Some(out.udp.get_or_insert_with(UdpCounters::default)),
            "UdpLite" => Some(out.udplite.get_or_insert_with(UdpCounters::default)),
            _ => None,
        };
        for (i, (name, v)) in names.iter().zip(values).enumerate() {
            match target.as_deref() {
                Some(_) if dec_u64(v).is_some() => {}
                None if is_integer(v) => {}
                t => {
                    let kind = if t.is_some() {
                        "an unsigned integer"
                    } else {
                        "an integer"
                    };
                    return Err(ParseError::new(
                        file,
                        n,
                        format!("{prefix} field {} ({name}) {v:?} is not {kind}", i + 1),
                    ));
                }
            }
        }
        if let Some(c) = target {
            for (name, v) in names.iter().zip(values) {
                c.set(name, dec_u64(v).unwrap_or(0));
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// Walks a file of line pairs `Proto: Name1 Name2 ...` / `Proto: v1 v2 ...`
/// (/proc/net/snmp, /proc/net/netstat), handing `f` each pair as (value line number,
/// prefix, names, values) once the two lines agree. Errors: a line without `Proto:`, a
/// value line whose prefix or field count differs from its header, a header without its
/// value line, or what `f` returns.
pub(crate) fn for_each_pair<R: BufRead>(
    r: R,
    file: &str,
    mut f: impl FnMut(usize, &str, &[String], &[&str]) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    // Pending header: (line number, prefix, names).
    let mut header: Option<(usize, String, Vec<String>)> = None;
    for_each_line(r, file, |n, line| {
        if line.trim().is_empty() {
            return Ok(());
        }
        let Some((prefix, rest)) = line.split_once(':') else {
            return Err(ParseError::new(
                file,
                n,
                format!("expected \"Proto: ...\", got {:?}", truncate(line)),
            ));
        };
        let prefix = prefix.trim();
        match header.take() {
            None => {
                let names: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
                header = Some((n, prefix.to_string(), names));
                Ok(())
            }
            Some((hn, hprefix, names)) => {
                if hprefix != prefix {
                    return Err(ParseError::new(
                        file,
                        n,
                        format!(
                            "expected value line for {hprefix:?} (header on line {hn}), got {prefix:?}"
                        ),
                    ));
                }
                let values: Vec<&str> = rest.split_whitespace().collect();
                if values.len() != names.len() {
                    return Err(ParseError::new(
                        file,
                        n,
                        format!(
                            "{prefix} value line has {} fields but header on line {hn} has {}",
                            values.len(),
                            names.len()
                        ),
                    ));
                }
                f(n, prefix, &names, &values)
            }
        }
    })?;
    if let Some((hn, prefix, _)) = header {
        return Err(ParseError::new(
            file,
            hn,
            format!("{prefix} header line has no value line (truncated file?)"),
        ));
    }
    Ok(())
}

/// Parse `/proc/net/snmp6`: lines of `Name value`.
///
/// `Udp6<X>` lines fill [`Snmp6::udp6`], `UdpLite6<X>` lines fill
/// [`Snmp6::udplite6`], where `<X>` is the `/proc/net/snmp` column name.
/// Every non-empty line must have a name and an integer value; unknown names
/// are ignored.
pub fn parse_snmp6<R: BufRead>(r: R, file: &str) -> Result<Snmp6, ParseError> {
    let mut out = Snmp6::default();
    for_each_line(r, file, |n, line| {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else {
            return Ok(());
        };
        let Some(v) = it.next() else {
            return Err(ParseError::new(file, n, format!("{name}: missing value")));
        };
        let (target, field) = if let Some(f) = name.strip_prefix("UdpLite6") {
            (Some(&mut out.udplite6), f)
        } else if let Some(f) = name.strip_prefix("Udp6") {
            (Some(&mut out.udp6), f)
        } else {
            (None, name)
        };
        match target {
            Some(t) => {
                let Some(x) = dec_u64(v) else {
                    return Err(ParseError::new(
                        file,
                        n,
                        format!("{name}: value {v:?} is not an unsigned integer"),
                    ));
                };
                t.get_or_insert_with(UdpCounters::default).set(field, x);
            }
            None => {
                if !is_integer(v) {
                    return Err(ParseError::new(
                        file,
                        n,
                        format!("{name}: value {v:?} is not an integer"),
                    ));
                }
            }
        }
        Ok(())
    })?;
    Ok(out)
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(60) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_by_name_and_negative_tcp() {
        let s =
            "Tcp: RtoAlgorithm MaxConn\nTcp: 1 -1\nUdp: NoPorts InDatagrams Future\nUdp: 5 7 9\n";
        let p = parse_snmp(s.as_bytes(), "snmp").unwrap();
        let u = p.udp.unwrap();
        assert_eq!(u.in_datagrams, 7);
        assert_eq!(u.no_ports, 5);
        assert_eq!(u.mem_errors, 0);
        assert!(p.udplite.is_none());
    }

    #[test]
    fn count_mismatch_in_other_protocol() {
        let s = "Ip: A B C\nIp: 1 2\n";
        let e = parse_snmp(s.as_bytes(), "/proc/net/snmp").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("/proc/net/snmp line 2:"), "{e}");
    }

    #[test]
    fn header_without_values() {
        let e = parse_snmp("Udp: InDatagrams\n".as_bytes(), "f").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn snmp6_udp() {
        let s = "Ip6InReceives  3\nUdp6InDatagrams\t4\nUdpLite6NoPorts 2\nUdp6Whatever 1\n";
        let p = parse_snmp6(s.as_bytes(), "snmp6").unwrap();
        assert_eq!(p.udp6.unwrap().in_datagrams, 4);
        assert_eq!(p.udplite6.unwrap().no_ports, 2);
        assert_eq!(p.udplite6.unwrap().in_datagrams, 0);
        assert!(parse_snmp6("Udp6InDatagrams x".as_bytes(), "f").is_err());
        assert_eq!(parse_snmp6("".as_bytes(), "f").unwrap(), Snmp6::default());
    }
}
