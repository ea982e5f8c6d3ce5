//! How a stream's messages end (`--framing`): tpslab's length prefix, a fixed size, or a
//! delimiter.

use serde::{Deserialize, Serialize};

use crate::PlanError;

/// Largest frame tpslab reads, bytes.
pub const MAX_FRAME: usize = 16 << 20;

/// How a reply (or request) ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Framing {
    /// A 4-byte big-endian length, then that many bytes (tpslab's protocol).
    Length,
    /// Exactly this many bytes.
    Fixed(usize),
    /// Up to and including this delimiter (e.g. `\r\n`).
    Delimiter(Vec<u8>),
}

/// The forms a framing is written in, for errors.
fn allowed() -> String {
    format!("length, fixed:BYTES (1..={MAX_FRAME}) or delim:TEXT (e.g. delim:\\r\\n)")
}

impl Framing {
    /// Parses `length`, `fixed:N` or `delim:TEXT` (TEXT with `\r`, `\n`, `\t`, `\\`
    /// escapes). Errors name the value and the forms allowed.
    pub fn parse(s: &str) -> Result<Framing, String> {
        let bad = || format!("framing \"{s}\": allowed {}", allowed());
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

impl Framing {
    /// The framing as `--framing` takes it: `length`, `fixed:N` or `delim:TEXT` (the
    /// delimiter's CR, LF, tab and backslash escaped; bytes that are not UTF-8 shown as
    /// U+FFFD). [`Framing::parse`] of it gives the framing back when the delimiter is text.
    pub fn spec(&self) -> String {
        match self {
            Framing::Length => "length".into(),
            Framing::Fixed(n) => format!("fixed:{n}"),
            Framing::Delimiter(d) => {
                let mut out = String::from("delim:");
                for c in String::from_utf8_lossy(d).chars() {
                    match c {
                        '\r' => out.push_str("\\r"),
                        '\n' => out.push_str("\\n"),
                        '\t' => out.push_str("\\t"),
                        '\\' => out.push_str("\\\\"),
                        c => out.push(c),
                    }
                }
                out
            }
        }
    }

    /// Checks a framing made other than by [`Framing::parse`] (a plan read back, built by
    /// code) against what `parse` accepts: a fixed size of 1..=[`MAX_FRAME`] bytes, a
    /// delimiter of at least one byte. The error is `--framing "SPEC": allowed ...`, as
    /// the flag's.
    pub fn check(&self) -> Result<(), PlanError> {
        let ok = match self {
            Framing::Length => true,
            Framing::Fixed(n) => (1..=MAX_FRAME).contains(n),
            Framing::Delimiter(d) => !d.is_empty(),
        };
        if ok {
            Ok(())
        } else {
            Err(PlanError::value(
                "--framing",
                format!("\"{}\"", self.spec()),
                allowed(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_parses_back_to_its_framing() {
        for s in [
            "length",
            "fixed:12",
            "delim:\\r\\n",
            "delim:END\\t\\\\",
            "delim:é",
        ] {
            let f = Framing::parse(s).unwrap();
            assert_eq!(f.spec(), s);
            assert_eq!(f.check(), Ok(()));
        }
    }

    #[test]
    fn check_refuses_what_parse_refuses_with_the_flags_text() {
        for (f, spec) in [
            (Framing::Fixed(0), "fixed:0"),
            (Framing::Fixed(MAX_FRAME + 1), "fixed:16777217"),
            (Framing::Delimiter(vec![]), "delim:"),
        ] {
            let e = f.check().unwrap_err().to_string();
            assert_eq!(e, format!("--{}", Framing::parse(spec).unwrap_err()));
        }
    }
}
