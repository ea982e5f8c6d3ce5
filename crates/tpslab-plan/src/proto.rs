//! The request/reply protocols of the load: [`Proto`], one variant per protocol, each with
//! its name, its [`Transport`], the request its flags make and its checks. This file is
//! tpslab-plan's registry of them: the one place in the crate that matches on a
//! [`Proto`] (the engine's is `tpslab-engine/src/client/proto/mod.rs`, where each variant gets
//! its `Exchange`; `tests/suite/architecture.rs` checks there are no others outside the
//! renderers). A ramp ([`crate::ramp::RampPlan`]: closed-loop steps of users) and a
//! capacity search over TCP ([`crate::capacity::TcpStep`]: open-loop steps at the rates
//! the search chooses) both take a [`Proto`], and both hand the engine a [`Wire`].

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::framing::Framing;
use crate::http::HttpRequest;
use crate::limits::{MAX_UDP_PAYLOAD, PAYLOAD_BYTES};
use crate::units::{parse_seq_field, seq_field_allowed, seq_field_fits};
use crate::PlanError;

/// Largest `ramp http --body`, bytes (1 MiB): a request is written whole per request.
pub const HTTP_BODY_BYTES: u64 = 1 << 20;

/// Bytes at the start of a UDP request that carry the user and its sequence number when the
/// plan has no sequence field: the user's index, then the request's sequence number (each a
/// 4-byte big-endian integer), echoed back by the server.
pub const UDP_TAG_BYTES: usize = 8;

/// A request/reply protocol: what each user (or each open-loop connection) sends and how
/// its reply is found. Serialised as the ramp's record always wrote its `proto`: `"tcp"`,
/// `"udp"`, `{"http": {"url": ..}}` (its schema is still named `RampProto`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(rename = "RampProto", description = "Protocol of the ramp.")
)]
#[serde(rename_all = "snake_case")]
pub enum Proto {
    /// One TCP connection per user; replies delimited by [`Framing`].
    Tcp,
    /// One UDP socket per user; a reply matches its request by the sequence field.
    Udp,
    /// HTTP/1.1 keep-alive, one connection per user: the request made of these and the
    /// plan's `request` as its body (a record says `{"http": {"url": ..}}`).
    Http(HttpRequest),
    /// Redis's RESP (`--protocol redis[:COMMAND]`): one TCP connection per user, the
    /// command's words (`["GET", "key"]`; `["PING"]` by default) sent as a RESP array of
    /// bulk strings, each reply read as one RESP value (an error reply is a failure).
    Redis(Vec<String>),
}

/// Most words in a `--protocol redis:COMMAND`.
pub const REDIS_WORDS: usize = 64;

/// Most bytes of a Redis command as sent (RESP-encoded), 64 KiB.
pub const REDIS_COMMAND_BYTES: usize = 64 * 1024;

/// `words` as a RESP array of bulk strings, as Redis takes a command.
fn resp_command(words: &[String]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        v.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
        v.extend_from_slice(w.as_bytes());
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// How a protocol's requests and replies travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A connection per user (TCP): made before its first request, closed after a failed
    /// request (its unread reply would be taken for the next one's) and made again. The
    /// replies arrive as a byte stream: bytes read are kept across reads until the
    /// protocol finds a whole reply in them; the peer closing the connection fails the
    /// request in flight (`closed by peer`).
    Stream,
    /// A socket per user (UDP), kept for the whole ramp, failures or not. Each read is one
    /// datagram, decoded alone; datagrams that arrive while the user waits for no reply
    /// (late replies) are read and dropped undecoded.
    Datagram,
}

/// What a protocol's exchange is made of besides its variant, as the engine is given it
/// (borrowed from a [`crate::ramp::RampPlan`] or a [`crate::capacity::TcpStep`] that
/// passed its `validate`).
#[derive(Debug, Clone, Copy)]
pub struct Wire<'a> {
    /// The protocol.
    pub proto: &'a Proto,
    /// The server.
    pub target: SocketAddr,
    /// The bytes of one request as sent ([`Proto::request`]'s; HTTP: the body).
    pub request: &'a [u8],
    /// How a framed reply ends ([`Proto::Tcp`]).
    pub framing: &'a Framing,
    /// UDP: (offset, length) of the sequence field; None: the first [`UDP_TAG_BYTES`].
    pub seq_field: Option<(usize, usize)>,
}

/// A sequence field in a UDP request: (offset, length), bytes.
pub type SeqField = (usize, usize);

/// What tpslab's reference server speaks when started for a protocol without a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `serve tcp --mode replace`: tpslab's length-prefixed frames.
    Framed,
    /// `serve http`.
    Http,
}

/// The values of `--protocol` (`ramp tcp`, `capacity tcp`): the request/reply protocols
/// over a TCP connection that take their request from the flags.
pub const PROTOCOL_FLAG_VALUES: &str = "framed, redis or redis:COMMAND (e.g. 'redis:GET key')";

/// `--protocol`'s help (`ramp tcp`, `capacity tcp`), with its values.
pub const PROTOCOL_FLAG_HELP: &str = "TCP: the request/reply protocol over each connection: \
framed (tpslab's length-prefixed request, or --payload-file's bytes; replies end by --framing), \
redis[:COMMAND] (Redis's RESP: the command, PING by default, e.g. 'redis:GET key'; each reply one RESP value)";

impl Proto {
    /// Its name as the command and the record write it: `tcp`, `udp`, `http`.
    pub fn name(&self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Http(_) => "http",
            Proto::Redis(_) => "redis",
        }
    }

    /// The words after `ramp` or `capacity` that run it, as output names the command:
    /// `tcp`, `udp`, `http`, `tcp --protocol redis` (Redis runs over `ramp tcp` and
    /// `capacity tcp`; there is no `ramp redis`).
    pub fn command(&self) -> &'static str {
        match self {
            Proto::Redis(_) => "tcp --protocol redis",
            p => p.name(),
        }
    }

    /// How its requests and replies travel.
    pub fn transport(&self) -> Transport {
        match self {
            Proto::Tcp | Proto::Http(_) | Proto::Redis(_) => Transport::Stream,
            Proto::Udp => Transport::Datagram,
        }
    }

    /// The protocol `--protocol VALUE` names (`ramp tcp`, `capacity tcp`): `framed`
    /// (tpslab's frames, or `--payload-file` with `--framing`). Errors: any other value,
    /// naming those allowed ([`PROTOCOL_FLAG_VALUES`]).
    pub fn from_flag(value: &str) -> Result<Proto, PlanError> {
        match value {
            "framed" => Ok(Proto::Tcp),
            "redis" => Ok(Proto::Redis(vec!["PING".into()])),
            v if v.starts_with("redis:") => Ok(Proto::Redis(
                v[6..].split_whitespace().map(String::from).collect(),
            )),
            _ => Err(PlanError::value(
                "--protocol",
                format!("\"{value}\""),
                PROTOCOL_FLAG_VALUES,
            )),
        }
    }

    /// How its replies are found, in words (a capacity step's plan line): `replies framed
    /// length` (TCP, by `framing`), `replies matched by sequence` (UDP), `HTTP/1.1 replies`.
    pub fn replies(&self, framing: &Framing) -> String {
        match self {
            Proto::Tcp => format!("replies framed {}", framing.spec()),
            Proto::Udp => "replies matched by sequence".into(),
            Proto::Http(_) => "HTTP/1.1 replies".into(),
            Proto::Redis(_) => "replies read as RESP values".into(),
        }
    }

    /// The HTTP request of an HTTP protocol (None for the others).
    pub fn http_request(&self) -> Option<&HttpRequest> {
        match self {
            Proto::Http(h) => Some(h),
            _ => None,
        }
    }

    /// The server tpslab starts for it when no target is given. Errors: a protocol the
    /// reference server does not speak (`ramp udp needs TARGET ...`).
    pub fn builtin(&self) -> Result<Builtin, PlanError> {
        match self {
            Proto::Tcp => Ok(Builtin::Framed),
            Proto::Http(_) => Ok(Builtin::Http),
            Proto::Redis(_) => Err(PlanError::Conflict(
                "--protocol redis needs the Redis server's HOST:PORT (tpslab's own server speaks framed requests)".into(),
            )),
            Proto::Udp => Err(PlanError::Conflict(
                "ramp udp needs TARGET (HOST:PORT), e.g. of `tpslab serve udp --mode echo`".into(),
            )),
        }
    }

    /// The HOST:PORT to resolve for a target given as `given` (HTTP: the URL's host and
    /// port; the others: `given`). Errors: a URL [`HttpRequest::check`] refuses.
    pub fn target_text(&self, given: &str) -> Result<String, PlanError> {
        match self {
            Proto::Http(h) => {
                let u = h.check()?;
                Ok(format!("{}:{}", u.host, u.port))
            }
            _ => Ok(given.to_string()),
        }
    }

    /// The protocol pointed at a server tpslab started at `addr` (HTTP: the URL becomes
    /// `http://ADDR/`; the others have nothing to change).
    pub fn on_server(&mut self, addr: SocketAddr) {
        if let Proto::Http(h) = self {
            h.url = format!("http://{addr}/");
        }
    }

    /// The request every user sends and, for UDP with a payload file, the sequence field
    /// that matches replies: `payload` (a `--payload-file`'s bytes; TCP: sent verbatim with
    /// its own framing) or `body` (tpslab's own: length-prefixed for TCP); HTTP: the
    /// `--body`, none without one (the request is built by the protocol).
    /// `framing_given`: `--framing` was given other than `length`; `seq_field`:
    /// `--seq-field OFF:LEN` as written. Errors (one line) name the flag.
    pub fn request(
        &self,
        payload: Option<Vec<u8>>,
        body: Vec<u8>,
        framing_given: bool,
        seq_field: Option<&str>,
    ) -> Result<(Vec<u8>, Option<SeqField>), PlanError> {
        let conflict = |m: &str| Err(PlanError::Conflict(m.into()));
        Ok(match self {
            Proto::Tcp => {
                if seq_field.is_some() {
                    return conflict("--seq-field applies to ramp udp");
                }
                let framed = || {
                    let mut v = (body.len() as u32).to_be_bytes().to_vec();
                    v.extend_from_slice(&body);
                    v
                };
                (payload.unwrap_or_else(framed), None)
            }
            Proto::Udp => {
                if framing_given {
                    return conflict("--framing applies to ramp tcp");
                }
                match (payload, seq_field) {
                    (Some(p), Some(s)) => {
                        let f = parse_seq_field("--seq-field", s, p.len())?;
                        (p, Some(f))
                    }
                    (Some(_), None) => return conflict("ramp udp --payload-file needs --seq-field OFF:LEN (a field the server echoes, e.g. 0:2 for a DNS id) to match replies"),
                    (None, Some(_)) => return conflict("--seq-field needs --payload-file"),
                    (None, None) => (body, None),
                }
            }
            Proto::Http(_) => {
                if framing_given {
                    return conflict("--framing applies to ramp tcp");
                }
                if seq_field.is_some() {
                    return conflict("--seq-field applies to ramp udp");
                }
                (payload.unwrap_or_default(), None)
            }
            Proto::Redis(words) => {
                if payload.is_some() || body.len() != 1024 {
                    return conflict(
                        "--payload-file and --size apply to --protocol framed: redis sends its command",
                    );
                }
                if framing_given {
                    return conflict("--framing applies to --protocol framed");
                }
                if seq_field.is_some() {
                    return conflict("--seq-field applies to ramp udp");
                }
                (resp_command(words), None)
            }
        })
    }

    /// Checks the protocol's part of a plan, with the flags' error texts: `request_len`
    /// the request's bytes, `framing` and `seq_field` as the plan holds them, `target` the
    /// server's address.
    /// - TCP: a framing `--framing` accepts, no sequence field, a request of at least one
    ///   byte;
    /// - UDP: length framing (the flag does not apply), a request of 8..=65507 bytes
    ///   without a sequence field, with one a request of 1..=65507 bytes holding the field;
    /// - HTTP: no framing or sequence field, a body of at most [`HTTP_BODY_BYTES`], a URL,
    ///   method and headers [`HttpRequest::check`] passes, the URL's port the target's;
    /// - Redis: no framing or sequence field, 1..=[`REDIS_WORDS`] words of at most
    ///   [`REDIS_COMMAND_BYTES`] as RESP, the request their encoding.
    ///
    /// Errors: the first setting out of bounds, as one line.
    pub fn validate(
        &self,
        request_len: usize,
        framing: &Framing,
        seq_field: Option<(usize, usize)>,
        target: SocketAddr,
    ) -> Result<(), PlanError> {
        let conflict = |m: &str| Err(PlanError::Conflict(m.into()));
        let len = request_len;
        match self {
            Proto::Tcp => {
                framing.check()?;
                if seq_field.is_some() {
                    return conflict("--seq-field applies to ramp udp");
                }
                if len == 0 {
                    return conflict(
                        "the request is empty: each user sends at least one byte (--size, --payload-file)",
                    );
                }
            }
            Proto::Udp => {
                if *framing != Framing::Length {
                    return conflict("--framing applies to ramp tcp");
                }
                match seq_field {
                    None => {
                        if !(UDP_TAG_BYTES..=MAX_UDP_PAYLOAD).contains(&len) {
                            return Err(PlanError::value(
                                "--size",
                                len,
                                format!("{UDP_TAG_BYTES}..={MAX_UDP_PAYLOAD} bytes"),
                            ));
                        }
                    }
                    Some((o, l)) => {
                        PAYLOAD_BYTES.check("--payload-file", len as u64)?;
                        if !seq_field_fits(o, l, len) {
                            return Err(PlanError::value(
                                "--seq-field",
                                format!("\"{o}:{l}\""),
                                seq_field_allowed(len),
                            ));
                        }
                    }
                }
            }
            Proto::Http(h) => {
                if *framing != Framing::Length {
                    return conflict("--framing applies to ramp tcp");
                }
                if seq_field.is_some() {
                    return conflict("--seq-field applies to ramp udp");
                }
                if len as u64 > HTTP_BODY_BYTES {
                    return Err(PlanError::value(
                        "--body",
                        format!("{len} bytes"),
                        format!("at most {HTTP_BODY_BYTES} bytes"),
                    ));
                }
                let u = h.check()?;
                if u.port != target.port() {
                    return Err(PlanError::Conflict(format!(
                        "URL \"{}\" has port {}, the target {} another",
                        h.url, u.port, target
                    )));
                }
            }
            Proto::Redis(words) => {
                if *framing != Framing::Length {
                    return conflict("--framing applies to --protocol framed");
                }
                if seq_field.is_some() {
                    return conflict("--seq-field applies to ramp udp");
                }
                let bytes = resp_command(words).len();
                if words.is_empty() || words.len() > REDIS_WORDS || bytes > REDIS_COMMAND_BYTES {
                    return Err(PlanError::value(
                        "--protocol",
                        format!("\"redis:{}\"", words.join(" ")),
                        format!("redis:COMMAND of 1..={REDIS_WORDS} words, at most {REDIS_COMMAND_BYTES} bytes as RESP"),
                    ));
                }
                if len != bytes {
                    return Err(PlanError::Conflict(format!(
                        "the request has {len} bytes, the command {bytes} as RESP: the plan's request is its command"
                    )));
                }
            }
        }
        Ok(())
    }
}
