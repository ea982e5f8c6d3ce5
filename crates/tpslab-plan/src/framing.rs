//! How a stream's messages end (`--framing`): tpslab's length prefix, a fixed size, or a
//! delimiter.

use serde::{Deserialize, Serialize};

/// Largest frame tpslab reads, bytes.
pub const MAX_FRAME: usize = 16 << 20;

/// How a reply (or request) ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Framing {
    /// A 4-byte big-endian length, then that many bytes (tpslab's protocol).
    Length,
    /// Exactly this many bytes.
    Fixed(usize),
    /// Up to and including this delimiter (e.g. `\r\n`).
    Delimiter(Vec<u8>),
}

impl Framing {
    /// Parses `length`, `fixed:N` or `delim:TEXT` (TEXT with `\r`, `\n`, `\t`, `\\`
    /// escapes). Errors name the value and the forms allowed.
    pub fn parse(s: &str) -> Result<Framing, String> {
        let bad = || {
            format!("framing \"{s}\": allowed length, fixed:BYTES (1..={MAX_FRAME}) or delim:TEXT (e.g. delim:\\r\\n)")
        };
        if s == "length" {
            return Ok(Framing::Length);
        }
        if let Some(n) = s.strip_prefix("fixed:") {
            let n: usize = n.parse().map_err(|_| bad())?;
            if !(1..=MAX_FRAME).contains(&n) {
                return Err(bad());
            }
            return Ok(Framing::Fixed(n));
        }
        if let Some(t) = s.strip_prefix("delim:") {
            let mut out = vec![];
            let mut it = t.bytes();
            while let Some(b) = it.next() {
                if b == b'\\' {
                    out.push(match it.next() {
                        Some(b'r') => b'\r',
                        Some(b'n') => b'\n',
                        Some(b't') => b'\t',
                        Some(b'\\') => b'\\',
                        _ => return Err(bad()),
                    });
                } else {
                    out.push(b);
                }
            }
            if out.is_empty() {
                return Err(bad());
            }
            return Ok(Framing::Delimiter(out));
        }
        Err(bad())
    }
}
