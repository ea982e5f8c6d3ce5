//! An HTTP run's counts by status class and by failure kind: what `load http`'s result,
//! its time series and its live samples count (`load_http` and `http_series` both hold
//! them; a module of their own so that neither imports the other's).

use serde::{Deserialize, Serialize};

/// Final replies by status class (1xx interim replies are skipped, not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatusClasses {
    /// 2xx.
    pub s2xx: u64,
    /// 3xx.
    pub s3xx: u64,
    /// 4xx.
    pub s4xx: u64,
    /// 5xx.
    pub s5xx: u64,
    /// Any other code (below 200 final, 600 and above).
    pub other: u64,
}

impl StatusClasses {
    /// All final replies.
    pub fn total(&self) -> u64 {
        self.s2xx + self.s3xx + self.s4xx + self.s5xx + self.other
    }
}

/// Requests (or connects) that failed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorKinds {
    /// A connect refused (nothing listening).
    pub refused: u64,
    /// A connection reset (RST, or a write to a connection the peer had closed).
    pub reset: u64,
    /// No reply (or no connect) within the timeout.
    pub timeout: u64,
    /// The server closed the connection with a request in flight.
    pub closed: u64,
    /// Bytes that were not an HTTP/1.1 reply (or one this client cannot delimit).
    pub protocol: u64,
    /// Anything else (an OS error).
    pub other: u64,
    /// TLS (`https://`): a handshake that failed (a certificate not trusted, no common
    /// version or cipher, the peer's alert) or a record that did not decrypt.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub tls: u64,
    /// A protocol error of its own kind, [`UNSOLICITED`]: an HTTP/1.1 response no request
    /// asked for. In `errors`: bytes after a whole reply, failing the request it followed;
    /// in `connect_errors`: bytes on a connection with no request in flight, failing no
    /// request. Each closed its connection. 0 in older records.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub unsolicited: u64,
}

/// The failure of an HTTP/1.1 response no request asked for (one request is in flight
/// per connection): counted as [`ErrorKinds::unsolicited`].
pub const UNSOLICITED: &str = "http: a response with no request in flight";

impl ErrorKinds {
    /// No failure of any kind.
    pub fn is_none(&self) -> bool {
        self.total() == 0
    }

    /// All failures.
    pub fn total(&self) -> u64 {
        self.list().iter().map(|(_, n)| n).sum()
    }

    /// Each kind with its count, as the report names them, in the report's order.
    pub fn list(&self) -> [(&'static str, u64); 8] {
        [
            ("refused", self.refused),
            ("reset", self.reset),
            ("timeout", self.timeout),
            ("closed by peer", self.closed),
            ("tls", self.tls),
            ("protocol", self.protocol),
            ("unsolicited response", self.unsolicited),
            ("other", self.other),
        ]
    }

    /// The kinds that occurred, `refused 3, tls 2`, or `none`.
    pub fn summary(&self) -> String {
        let s: Vec<String> = self
            .list()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if s.is_empty() {
            "none".into()
        } else {
            s.join(", ")
        }
    }

    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &ErrorKinds) {
        self.refused += o.refused;
        self.reset += o.reset;
        self.timeout += o.timeout;
        self.closed += o.closed;
        self.protocol += o.protocol;
        self.other += o.other;
        self.tls += o.tls;
        self.unsolicited += o.unsolicited;
    }
}

/// Final replies by status code (200, 404, 503, ...): a small table kept by value (copied
/// with each loop thread's running counts), the first [`StatusCodes::CAP`] distinct codes
/// in the order of the code, each with its count; replies with a code beyond those in
/// [`StatusCodes::more`]. Codes are three digits (100..=999); a reply without one (not
/// HTTP) is not counted here. JSON: `{"codes": [{"code": 200, "count": 950}, ...],
/// "more": 0}` (`more` absent when 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "StatusCodesJson", try_from = "StatusCodesJson")]
pub struct StatusCodes {
    /// The codes, ascending; the first `len` are used.
    codes: [u16; StatusCodes::CAP],
    /// Each code's replies.
    counts: [u64; StatusCodes::CAP],
    len: u8,
    /// Replies whose code found the table full.
    more: u64,
}

/// One status code and its replies, as [`StatusCodes`] is written in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CodeCount {
    /// The status code (100..=999).
    pub code: u16,
    /// Final replies with it.
    pub count: u64,
}

/// [`StatusCodes`] as JSON: its codes ascending, each once, at most [`StatusCodes::CAP`],
/// and the replies whose code did not fit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatusCodesJson {
    /// The codes, ascending.
    pub codes: Vec<CodeCount>,
    /// Replies with a code beyond the table's [`StatusCodes::CAP`] (0 when absent).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub more: u64,
}

impl From<StatusCodes> for StatusCodesJson {
    fn from(s: StatusCodes) -> StatusCodesJson {
        StatusCodesJson {
            codes: s
                .iter()
                .map(|(code, count)| CodeCount { code, count })
                .collect(),
            more: s.more,
        }
    }
}

impl TryFrom<StatusCodesJson> for StatusCodes {
    type Error = String;

    /// Errors: more than [`StatusCodes::CAP`] codes, a code outside 100..=999, codes not
    /// ascending (or one twice).
    fn try_from(j: StatusCodesJson) -> Result<StatusCodes, String> {
        if j.codes.len() > StatusCodes::CAP {
            return Err(format!(
                "{} status codes (at most {})",
                j.codes.len(),
                StatusCodes::CAP
            ));
        }
        if let Some(c) = j.codes.iter().find(|c| !(100..=999).contains(&c.code)) {
            return Err(format!("status code {} (100..=999)", c.code));
        }
        if !j.codes.windows(2).all(|w| w[0].code < w[1].code) {
            return Err("status codes not in ascending order, or one twice".into());
        }
        let mut s = StatusCodes {
            more: j.more,
            ..StatusCodes::default()
        };
        for (i, c) in j.codes.iter().enumerate() {
            s.codes[i] = c.code;
            s.counts[i] = c.count;
        }
        s.len = j.codes.len() as u8;
        Ok(s)
    }
}

impl StatusCodes {
    /// Distinct codes kept at most.
    pub const CAP: usize = 10;

    /// No reply counted.
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.more == 0
    }

    /// Each code with its replies, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        let n = self.len as usize;
        self.codes[..n]
            .iter()
            .copied()
            .zip(self.counts[..n].iter().copied())
    }

    /// Replies whose code did not fit the table.
    pub fn more(&self) -> u64 {
        self.more
    }

    /// Every reply counted (`more` included).
    pub fn total(&self) -> u64 {
        self.iter().fold(self.more, |t, (_, n)| t.saturating_add(n))
    }

    /// The replies with `code` (0: none, or it did not fit).
    pub fn get(&self, code: u16) -> u64 {
        self.iter().find(|c| c.0 == code).map_or(0, |c| c.1)
    }

    /// Counts `n` replies with `code` (one without a three-digit code is not counted; one
    /// whose code finds the table full goes to `more`).
    pub fn add(&mut self, code: u16, n: u64) {
        if !(100..=999).contains(&code) || n == 0 {
            return;
        }
        let len = self.len as usize;
        let at = self.codes[..len].partition_point(|&c| c < code);
        if at < len && self.codes[at] == code {
            self.counts[at] += n;
            return;
        }
        if len == Self::CAP {
            self.more += n;
            return;
        }
        self.codes.copy_within(at..len, at + 1);
        self.counts.copy_within(at..len, at + 1);
        (self.codes[at], self.counts[at]) = (code, n);
        self.len += 1;
    }

    /// Adds `o`'s replies to these (its codes that do not fit go to `more`).
    pub fn merge(&mut self, o: &StatusCodes) {
        for (code, n) in o.iter() {
            self.add(code, n);
        }
        self.more += o.more;
    }

    /// The replies counted since `was` (an earlier reading of the same running counts),
    /// code by code.
    pub fn since(&self, was: &StatusCodes) -> StatusCodes {
        let mut d = StatusCodes::default();
        for (code, n) in self.iter() {
            d.add(code, n.saturating_sub(was.get(code)));
        }
        d.more = self.more.saturating_sub(was.more);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kept_ascending_and_the_eleventh_goes_to_more() {
        let mut s = StatusCodes::default();
        for code in [503, 200, 404, 200, 200, 99, 1000] {
            s.add(code, 1);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), [(200, 3), (404, 1), (503, 1)]);
        assert_eq!(s.total(), 5, "codes 99 and 1000 are not HTTP's");
        let was = s;
        for code in 300..=308 {
            s.add(code, 2);
        }
        assert_eq!(s.iter().count(), StatusCodes::CAP);
        // 300..=306 fit (10 in all), 307 and 308 do not.
        assert_eq!((s.get(306), s.get(307), s.more()), (2, 0, 4));
        s.add(404, 5);
        let d = s.since(&was);
        assert_eq!((d.get(200), d.get(404), d.get(300), d.more()), (0, 5, 2, 4));
        assert_eq!(d.total(), 5 + 7 * 2 + 4);
        let mut m = was;
        m.merge(&d);
        assert_eq!(m.total(), s.total());
    }

    #[test]
    fn codes_read_back_are_checked() {
        let mut s = StatusCodes::default();
        s.add(200, 7);
        s.add(503, 1);
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(
            j,
            r#"{"codes":[{"code":200,"count":7},{"code":503,"count":1}]}"#
        );
        assert_eq!(serde_json::from_str::<StatusCodes>(&j).unwrap(), s);
        for bad in [
            r#"{"codes":[{"code":503,"count":1},{"code":200,"count":7}]}"#,
            r#"{"codes":[{"code":200,"count":1},{"code":200,"count":7}]}"#,
            r#"{"codes":[{"code":42,"count":1}]}"#,
        ] {
            assert!(serde_json::from_str::<StatusCodes>(bad).is_err(), "{bad}");
        }
        let eleven: Vec<String> = (200..211)
            .map(|c| format!(r#"{{"code":{c},"count":1}}"#))
            .collect();
        let j = format!(r#"{{"codes":[{}]}}"#, eleven.join(","));
        assert!(serde_json::from_str::<StatusCodes>(&j).is_err());
    }
}
