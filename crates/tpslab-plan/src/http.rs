//! An HTTP/1.1 request as `ramp http URL` sends it: the URL (parsed by the `http` crate's
//! `Uri`; `http://`, or `https://` with its [`TlsSettings`]), the method, the user's
//! headers, and the request's bytes built once from them (the body is the plan's
//! `request`).

use serde::{Deserialize, Serialize};

use crate::PlanError;

/// Most headers a user may add (`--header`, repeatable).
pub const MAX_HEADERS: usize = 64;

/// Longest method, bytes.
const MAX_METHOD: usize = 32;

/// Longest URL, bytes.
const MAX_URL: usize = 8192;

/// What `ramp http` sends besides its body: kept in the plan (and the record) as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HttpRequest {
    /// The URL as given, `http://HOST[:PORT][/PATH][?QUERY]`.
    pub url: String,
    /// The method, e.g. `GET` (an HTTP token, case kept).
    pub method: String,
    /// Headers added to `Host` (and `Content-Length` when there is a body), in order, as
    /// (name, value); `Host` among them replaces tpslab's.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// How an `https://` URL's server is verified (absent from a record when default).
    #[serde(default, skip_serializing_if = "TlsSettings::is_default")]
    pub tls: TlsSettings,
}

/// Most bytes of a `--cacert` file (PEM certificates).
pub const CACERT_BYTES: u64 = 1 << 20;

/// How the server of an `https://` URL is verified: by the system's roots (default), by
/// the certificates of `--cacert FILE`, or not at all (`--insecure`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TlsSettings {
    /// `--insecure`: the server's certificate is not verified (any certificate, any name).
    #[serde(default)]
    pub insecure: bool,
    /// `--cacert FILE` as given: the only roots trusted (None: the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacert: Option<String>,
    /// The `--cacert` file's bytes (PEM, at most [`CACERT_BYTES`]), read when the plan is
    /// made; not kept in a record.
    #[serde(skip)]
    pub ca_pem: Vec<u8>,
}

impl TlsSettings {
    /// Neither `--insecure` nor `--cacert`.
    pub fn is_default(&self) -> bool {
        !self.insecure && self.cacert.is_none()
    }
}

/// A URL's parts that make the request and its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    /// Host as written (a name, an IPv4 address, or `[IPv6]`), without the port.
    pub host: String,
    /// The port: the URL's, else 80.
    pub port: u16,
    /// The authority as written (`host[:port]`): the `Host` header.
    pub authority: String,
    /// Path and query, `/` when the URL has none.
    pub path: String,
    /// `https://`: the connection is TLS (the host is the name verified and sent as SNI).
    pub tls: bool,
}

/// Parses `url` as `ramp http` accepts it: `http[s]://HOST[:PORT][/PATH][?QUERY]`, no user
/// info, no fragment. Errors (one line, naming the URL): not a URL, another scheme, no
/// host, port 0.
pub fn parse_url(url: &str) -> Result<HttpUrl, PlanError> {
    let bad = |why: &str| PlanError::value("URL", format!("\"{url}\""), why);
    if url.len() > MAX_URL {
        return Err(bad(&format!("at most {MAX_URL} bytes")));
    }
    if url.contains('#') {
        return Err(bad("a URL without a #fragment (it is not sent)"));
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&format!("http://HOST[:PORT]/PATH ({e})")))?;
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => {
            return Err(bad(
                "http[s]://HOST[:PORT]/PATH, e.g. http://127.0.0.1:8080/",
            ))
        }
    };
    let Some(auth) = uri.authority() else {
        return Err(bad("http://HOST[:PORT]/PATH, e.g. http://127.0.0.1:8080/"));
    };
    if auth.as_str().contains('@') {
        return Err(bad("a URL without user info (USER@HOST)"));
    }
    if auth.host().is_empty() {
        return Err(bad("a URL with a host"));
    }
    let port_text = auth.as_str()[auth.host().len()..].trim_start_matches(':');
    let port = match auth.port_u16() {
        Some(p) => p,
        None if port_text.is_empty() && tls => 443,
        None if port_text.is_empty() => 80,
        None => return Err(bad("a port 1..=65535")),
    };
    if port == 0 {
        return Err(bad("a port 1..=65535"));
    }
    let path = match uri.path_and_query() {
        Some(p) if !p.as_str().is_empty() => p.as_str().to_string(),
        _ => "/".to_string(),
    };
    if !path.starts_with('/') {
        return Err(bad("http://HOST[:PORT]/PATH, e.g. http://127.0.0.1:8080/"));
    }
    Ok(HttpUrl {
        host: auth.host().to_string(),
        port,
        authority: auth.as_str().to_string(),
        path,
        tls,
    })
}

/// Whether `s` is an HTTP token (a method, a header name): RFC 9110 `tchar`s, not empty.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses one `--header 'NAME: VALUE'`. Errors: no colon, a name that is not a token, a
/// value with control characters, `Content-Length` or `Transfer-Encoding` (tpslab frames
/// the body itself).
pub fn parse_header(h: &str) -> Result<(String, String), PlanError> {
    let bad = |why: &str| PlanError::value("--header", format!("\"{h}\""), why);
    let Some((name, value)) = h.split_once(':') else {
        return Err(bad("NAME: VALUE, e.g. 'Accept: */*'"));
    };
    let (name, value) = (name.trim(), value.trim());
    check_header(name, value).map_err(|w| bad(&w))?;
    Ok((name.to_string(), value.to_string()))
}

fn check_header(name: &str, value: &str) -> Result<(), String> {
    if !is_token(name) {
        return Err("NAME: VALUE with NAME an HTTP token, e.g. 'Accept: */*'".into());
    }
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err("a value without control characters".into());
    }
    for framed in ["content-length", "transfer-encoding"] {
        if name.eq_ignore_ascii_case(framed) {
            return Err(format!(
                "other headers: {name} is written by tpslab from the body (--body)"
            ));
        }
    }
    Ok(())
}

impl HttpRequest {
    /// The request's bytes: `METHOD PATH HTTP/1.1`, `Host` (the URL's authority unless a
    /// header gives one), the headers, `Content-Length` when there is a body or the method
    /// usually has one (POST, PUT, PATCH), a blank line, the body. Errors: as
    /// [`HttpRequest::check`].
    pub fn bytes(&self, body: &[u8]) -> Result<Vec<u8>, PlanError> {
        let u = self.check()?;
        let mut r = Vec::with_capacity(128 + body.len());
        r.extend_from_slice(format!("{} {} HTTP/1.1\r\n", self.method, u.path).as_bytes());
        if !self
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("host"))
        {
            r.extend_from_slice(format!("Host: {}\r\n", u.authority).as_bytes());
        }
        for (n, v) in &self.headers {
            r.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        let has_body = ["POST", "PUT", "PATCH"].contains(&self.method.as_str());
        if !body.is_empty() || has_body {
            r.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        r.extend_from_slice(b"\r\n");
        r.extend_from_slice(body);
        Ok(r)
    }

    /// Checks the URL ([`parse_url`]), the method (an HTTP token of at most 32 bytes,
    /// `CONNECT` refused), the headers (at most [`MAX_HEADERS`], as [`parse_header`]) and
    /// the TLS settings (`--insecure` or `--cacert`, not both, only with `https://`);
    /// gives the URL's parts.
    pub fn check(&self) -> Result<HttpUrl, PlanError> {
        let u = parse_url(&self.url)?;
        if self.tls.insecure && self.tls.cacert.is_some() {
            return Err(PlanError::Conflict(
                "--insecure verifies nothing, --cacert verifies by FILE: give one".into(),
            ));
        }
        if !u.tls && !self.tls.is_default() {
            let flag = if self.tls.insecure {
                "--insecure"
            } else {
                "--cacert"
            };
            return Err(PlanError::Conflict(format!(
                "{flag} applies to an https:// URL, not \"{}\"",
                self.url
            )));
        }
        if !is_token(&self.method) || self.method.len() > MAX_METHOD {
            return Err(PlanError::value(
                "--method",
                &self.method,
                format!("an HTTP method (a token of at most {MAX_METHOD} bytes), e.g. GET"),
            ));
        }
        if self.method.eq_ignore_ascii_case("CONNECT") {
            return Err(PlanError::value(
                "--method",
                &self.method,
                "a method with a reply (CONNECT opens a tunnel)",
            ));
        }
        if self.headers.len() > MAX_HEADERS {
            return Err(PlanError::value(
                "--header",
                format!("x{}", self.headers.len()),
                format!("at most {MAX_HEADERS} headers"),
            ));
        }
        for (n, v) in &self.headers {
            check_header(n, v)
                .map_err(|w| PlanError::value("--header", format!("\"{n}: {v}\""), w))?;
        }
        Ok(u)
    }
}

/// Checks the headers of an HTTP/2 or HTTP/3 request (RFC 9113 8.2.2, RFC 9114 4.2): none of HTTP/1.1's
/// connection-specific headers (`Connection`, `Keep-Alive`, `Proxy-Connection`,
/// `Upgrade`, `TE` other than `trailers`). Errors: one line naming the header.
pub fn check_h2_headers(headers: &[(String, String)]) -> Result<(), PlanError> {
    for (n, v) in headers {
        let l = n.to_ascii_lowercase();
        let bad = ["connection", "keep-alive", "proxy-connection", "upgrade"].contains(&l.as_str())
            || (l == "te" && !v.eq_ignore_ascii_case("trailers"));
        if bad {
            return Err(PlanError::value(
                "--header",
                format!("\"{n}: {v}\""),
                "no connection-specific header with --http2 or --http3 (they have none: RFC 9113 8.2.2, RFC 9114 4.2)",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version between two fields, as in a plan.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        a: u8,
        #[serde(flatten, with = "version_keys")]
        v: HttpVersion,
        b: u8,
    }

    /// Each version writes the keys records always had, in the field's place, and reads
    /// back as itself; both keys are refused, `false` is HTTP/1.1.
    #[test]
    fn a_version_is_written_as_the_keys_records_had_and_read_back() {
        for (v, json) in [
            (HttpVersion::Http1, r#"{"a":1,"b":2}"#),
            (HttpVersion::Http2, r#"{"a":1,"http2":true,"b":2}"#),
            (HttpVersion::Http3, r#"{"a":1,"http3":true,"b":2}"#),
        ] {
            let h = Holder { a: 1, v, b: 2 };
            assert_eq!(serde_json::to_string(&h).unwrap(), json);
            assert_eq!(serde_json::from_str::<Holder>(json).unwrap(), h);
        }
        let e = serde_json::from_str::<Holder>(r#"{"a":1,"http2":true,"http3":true,"b":2}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--http2 and --http3"), "{e}");
        let h: Holder = serde_json::from_str(r#"{"a":1,"http2":false,"b":2}"#).unwrap();
        assert_eq!(h.v, HttpVersion::Http1);
        assert!(HttpVersion::from_flags(true, true).is_err());
        assert!(!HttpVersion::Http1.multiplexed() && HttpVersion::Http3.multiplexed());
    }

    fn req(url: &str, method: &str, headers: &[(&str, &str)]) -> HttpRequest {
        HttpRequest {
            url: url.into(),
            method: method.into(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            tls: TlsSettings::default(),
        }
    }

    #[test]
    fn urls_that_pass_and_their_parts() {
        let u = parse_url("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(
            (
                u.host.as_str(),
                u.port,
                u.authority.as_str(),
                u.path.as_str()
            ),
            ("127.0.0.1", 8080, "127.0.0.1:8080", "/a/b?x=1")
        );
        let u = parse_url("http://localhost").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        let u = parse_url("http://[::1]:81/").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.tls), ("[::1]", 81, false));
        let u = parse_url("https://localhost/x").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.tls), ("localhost", 443, true));
        let u = parse_url("https://127.0.0.1:8443").unwrap();
        assert_eq!((u.port, u.path.as_str(), u.tls), (8443, "/", true));
    }

    #[test]
    fn bad_urls_are_one_line_errors() {
        let e = |u: &str| parse_url(u).unwrap_err().to_string();
        for u in [
            "ftp://h/",
            "127.0.0.1:80",
            "/path",
            "http://",
            "http://h:0/",
            "http://u:p@h/",
            "http://h/#x",
            "http://h:99999/",
            "not a url",
        ] {
            let m = e(u);
            assert!(m.starts_with(&format!("URL \"{u}\": allowed ")), "{u}: {m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }

    #[test]
    fn request_bytes() {
        let r = req("http://h:8080/p?q", "GET", &[("Accept", "*/*")]);
        assert_eq!(
            r.bytes(b"").unwrap(),
            b"GET /p?q HTTP/1.1\r\nHost: h:8080\r\nAccept: */*\r\n\r\n"
        );
        let r = req("http://h/", "POST", &[("Host", "other")]);
        assert_eq!(
            r.bytes(b"abc").unwrap(),
            b"POST / HTTP/1.1\r\nHost: other\r\nContent-Length: 3\r\n\r\nabc"
        );
        assert_eq!(
            req("http://h/", "PUT", &[]).bytes(b"").unwrap(),
            b"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
        );
    }

    #[test]
    fn bad_methods_and_headers() {
        let e = |r: HttpRequest| r.check().unwrap_err().to_string();
        assert!(
            e(req("http://h/", "G ET", &[])).starts_with("--method G ET: allowed an HTTP method")
        );
        assert!(e(req("http://h/", "", &[])).starts_with("--method \"\""));
        assert!(e(req("http://h/", "CONNECT", &[])).contains("tunnel"));
        assert!(
            e(req("http://h/", "GET", &[("Content-Length", "3")])).contains("written by tpslab")
        );
        assert!(e(req("http://h/", "GET", &[("X", "a\r\nB: c")])).contains("control"));
        for h in [
            "NoColon",
            "Bad Name: v",
            ": v",
            "transfer-encoding: chunked",
        ] {
            let m = parse_header(h).unwrap_err().to_string();
            assert!(m.starts_with("--header \""), "{m}");
        }
        assert_eq!(
            parse_header("X-A:  b c ").unwrap(),
            ("X-A".to_string(), "b c".to_string())
        );
        let many: Vec<(String, String)> = (0..65).map(|i| (format!("X{i}"), "v".into())).collect();
        let r = HttpRequest {
            headers: many,
            ..req("http://h/", "GET", &[])
        };
        assert!(e(r).contains("at most 64 headers"));
    }

    #[test]
    fn tls_flags_need_an_https_url_and_one_of_them() {
        let e = |r: HttpRequest| r.check().unwrap_err().to_string();
        let with = |url: &str, insecure: bool, cacert: Option<&str>| HttpRequest {
            tls: TlsSettings {
                insecure,
                cacert: cacert.map(String::from),
                ca_pem: vec![],
            },
            ..req(url, "GET", &[])
        };
        assert_eq!(
            e(with("http://h/", true, None)),
            "--insecure applies to an https:// URL, not \"http://h/\""
        );
        assert!(e(with("http://h/", false, Some("ca.pem"))).starts_with("--cacert applies"));
        assert!(e(with("https://h/", true, Some("ca.pem"))).contains("give one"));
        assert!(with("https://h/", true, None).check().unwrap().tls);
        assert!(with("https://h/", false, Some("ca.pem")).check().is_ok());
        // Default settings stay out of a record (records of http:// runs are unchanged).
        let j = serde_json::to_string(&req("http://h/", "GET", &[])).unwrap();
        assert!(!j.contains("tls"), "{j}");
        let j = serde_json::to_string(&with("https://h/", false, Some("ca.pem"))).unwrap();
        assert!(
            j.contains(r#""tls":{"insecure":false,"cacert":"ca.pem"}"#),
            "{j}"
        );
    }
}

/// The HTTP version a load speaks: one value where plans had a `http2` and a `http3`
/// flag (both set was a state to refuse; now it cannot be made).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HttpVersion {
    /// HTTP/1.1 keep-alive: one request in flight per connection.
    #[default]
    Http1,
    /// HTTP/2 (`--http2`): h2c with prior knowledge for `http://`, ALPN `h2` over TLS.
    Http2,
    /// HTTP/3 (`--http3`) over QUIC, `https://` only (ALPN `h3`).
    Http3,
}

impl HttpVersion {
    /// The version the flags `--http2` and `--http3` ask for. Error: both given (one
    /// line, a conflict).
    pub fn from_flags(http2: bool, http3: bool) -> Result<HttpVersion, PlanError> {
        match (http2, http3) {
            (true, true) => Err(PlanError::Conflict(
                "--http2 and --http3 are two protocols: give one".into(),
            )),
            (true, false) => Ok(HttpVersion::Http2),
            (false, true) => Ok(HttpVersion::Http3),
            (false, false) => Ok(HttpVersion::Http1),
        }
    }

    /// Requests share a connection as streams (HTTP/2 and HTTP/3): `--streams` applies
    /// and connection-specific headers are refused.
    pub fn multiplexed(self) -> bool {
        self != HttpVersion::Http1
    }

    /// HTTP/2.
    pub fn is_http2(self) -> bool {
        self == HttpVersion::Http2
    }

    /// HTTP/3.
    pub fn is_http3(self) -> bool {
        self == HttpVersion::Http3
    }
}

/// An [`HttpVersion`] as records have always carried it: the keys `http2` and `http3`,
/// each `true` or absent (`#[serde(flatten, with = "crate::http::version_keys")]`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VersionKeys {
    /// `--http2`: HTTP/2 instead of HTTP/1.1 (h2c with prior knowledge for `http://`, ALPN
    /// `h2` over TLS for `https://`); absent from records of HTTP/1.1 runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub http2: bool,
    /// `--http3`: HTTP/3 over QUIC instead (RFC 9114; ALPN `h3`, `https://` only: QUIC
    /// is always TLS 1.3); absent from records of other runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub http3: bool,
}

/// serde of an [`HttpVersion`] as [`VersionKeys`]. A record with both keys `true` is
/// refused on reading.
pub mod version_keys {
    use super::{HttpVersion, VersionKeys};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// The keys of `v`: none for HTTP/1.1, `http2: true` or `http3: true`.
    pub fn serialize<S: Serializer>(v: &HttpVersion, s: S) -> Result<S::Ok, S::Error> {
        VersionKeys {
            http2: v.is_http2(),
            http3: v.is_http3(),
        }
        .serialize(s)
    }

    /// The version the keys name; an error for both.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<HttpVersion, D::Error> {
        let k = VersionKeys::deserialize(d)?;
        HttpVersion::from_flags(k.http2, k.http3).map_err(serde::de::Error::custom)
    }
}
