//! Shared error type and small strict number parsers.

use std::fmt;
use std::io::BufRead;

/// A malformed `/proc` file.
///
/// `line` is 1-based; `0` means the problem concerns the file as a whole
/// (for example a required line is missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The label passed to the parser, e.g. `"/proc/net/snmp"`.
    pub file: String,
    /// 1-based line number, or 0 for whole-file problems.
    pub line: usize,
    /// What was wrong.
    pub msg: String,
}

impl ParseError {
    /// Build an error for `file` at 1-based `line` (0 = whole file).
    pub fn new(file: &str, line: usize, msg: impl Into<String>) -> Self {
        ParseError {
            file: file.to_string(),
            line,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.msg)
        } else {
            write!(f, "{} line {}: {}", self.file, self.line, self.msg)
        }
    }
}

impl std::error::Error for ParseError {}

/// Call `f(line_no, line)` for every line (1-based, without the trailing
/// newline), reusing one buffer. Read errors (including invalid UTF-8) are
/// reported as a `ParseError` on the line being read.
pub(crate) fn for_each_line<R: BufRead>(
    mut r: R,
    file: &str,
    mut f: impl FnMut(usize, &str) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    let mut buf = String::new();
    let mut n = 0usize;
    loop {
        buf.clear();
        match r.read_line(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {
                n += 1;
                let line = buf.trim_end_matches(['\n', '\r']);
                f(n, line)?;
            }
            Err(e) => {
                return Err(ParseError::new(file, n + 1, format!("read error: {e}")));
            }
        }
    }
}

/// Strict unsigned hex: non-empty, only `[0-9a-fA-F]`, fits in u64.
pub(crate) fn hex_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// Strict unsigned decimal: non-empty, only `[0-9]`, fits in u64.
pub(crate) fn dec_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Strict signed decimal: optional leading `-`, then digits, fits in i64.
pub(crate) fn dec_i64(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Any integer counter as printed by the kernel (signed or unsigned 64-bit).
pub(crate) fn is_integer(s: &str) -> bool {
    dec_u64(s).is_some() || dec_i64(s).is_some()
}
