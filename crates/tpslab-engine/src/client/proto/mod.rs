//! The request/reply protocols of a closed-loop ramp, each behind [`Exchange`]: how a
//! user's socket is opened, how its next request is written, how replies are cut out of the
//! bytes read and matched to the request in flight, and which replies count as failures.
//!
//! The users' event loop (`users.rs`: epoll, timers, think times, time-outs, counting) is
//! generic over [`Exchange`] and knows of a protocol only its [`Transport`]: a connection
//! per user whose replies are a byte stream, or a socket per user whose replies are
//! datagrams. A protocol is one file here, implementing [`Exchange`], plus its `mod` line
//! and one line in the list at the end of this file naming the [`Proto`] variant it
//! serves: this list is the engine's one match on a [`Proto`] (the plan crate's is
//! `tpslab-plan/src/proto.rs`). The modules are declared plainly, not by the list's
//! macro, so that the workspace's checks (`tests/suite/import_graph.rs`) read them.
//!
//! One request is in flight per user at a time (no pipelining): a reply decoded is the
//! reply to the request being waited for, or one the protocol says is stale.

use std::net::SocketAddr;

// The transport is the plan's (each `Proto` variant has one); the users' loop knows of a
// protocol only it: a stream's bytes kept across reads, or one datagram per read.
use tpslab_plan::proto::{Proto, Transport, Wire};

pub mod h2;
pub mod h3;
pub mod hpack;
mod huffman;
pub mod tls;

// The request/reply protocols of the list at the end of this file.
pub mod http1;
pub mod resp;
pub mod tcp_framed;
pub mod udp_seq;

/// A user's new socket.
#[derive(Debug)]
pub struct Opened {
    /// Non-blocking, connected (or connecting) to the target.
    pub socket: socket2::Socket,
    /// Whether it can send now; else a connect is in progress, and the socket turns
    /// writable when it is done (its error, if any, in SO_ERROR).
    pub ready: bool,
}

/// A complete reply to the request in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Its length: the first `len` bytes of those given to [`Exchange::decode`] (the rest
    /// are kept for the next reply on a stream).
    pub len: usize,
    /// None: answered, counted in the step's replies and response times. Some(kind): a
    /// reply saying the request failed (an HTTP 5xx, an error line), counted as a failure
    /// of that kind, not a reply.
    pub failed: Option<&'static str>,
    /// The server closes the connection after this reply (HTTP `Connection: close`): the
    /// next request is sent on a new one.
    pub close: bool,
    /// The reply's status code where the protocol has one (HTTP: 200, 404, ...; the open
    /// loop counts status classes by it), else 0.
    pub status: u16,
}

impl Reply {
    /// An answer of `len` bytes, the connection kept, no status code.
    pub fn ok(len: usize) -> Reply {
        Reply {
            len,
            failed: None,
            close: false,
            status: 0,
        }
    }
}

/// What [`Exchange::decode`] found at the start of the bytes it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// The reply to the request in flight.
    Reply(Reply),
    /// A complete message of this many bytes that answers no request in flight (a late
    /// reply to an earlier request, an interim HTTP 1xx): skipped, and the rest decoded.
    Stale(usize),
    /// Not a whole message yet: more bytes are read (on a datagram socket: this datagram
    /// is skipped).
    NeedMore,
    /// Bytes that are not this protocol (a frame longer than allowed, a malformed status
    /// line): the request fails with this kind and a connection is closed.
    Invalid(String),
}

/// A request/reply protocol of the closed-loop users, sans I/O: the users' loop owns the
/// sockets and reads and writes them; a protocol says what to write and what was read.
///
/// The loop is generic over it (monomorphised: no dynamic dispatch per request), and calls
/// it on every request: [`Exchange::encode`], [`Exchange::request`] and
/// [`Exchange::decode`] must not allocate (an error's text may).
pub trait Exchange: Sync + Sized {
    /// What the protocol keeps per user: its sequence number, its own copy of a request,
    /// a reply's parse state.
    type User: Send;

    /// How the requests and replies travel.
    const TRANSPORT: Transport;

    /// On a [`Transport::Stream`]: the failure bytes read while no request is in flight
    /// on the connection count as (HTTP/1.1: a response no request asked for). Some: the
    /// users' loop watches an idle connection for bytes, and any it reads are a failure
    /// of this kind (not a request's: none was in flight) that closes the connection, the
    /// user reconnecting after a back-off. None (the default): bytes read while idle are
    /// kept for the next request's [`Exchange::decode`].
    const UNSOLICITED: Option<&'static str> = None;

    /// The protocol of a plan of its [`Proto`] variant, one that passed its `validate`
    /// (a ramp's or a capacity step's).
    fn for_plan(w: &Wire<'_>) -> Self;

    /// The state of user `id` (unique in the ramp, 0-based) before its first request.
    fn user(&self, id: usize) -> Self::User;

    /// A new non-blocking socket to the target for a user: at its first request, and
    /// after its connection was closed. Errors: the failure as it is counted, e.g.
    /// `connect: connection refused` (see [`connect`], [`udp_socket`]).
    fn open(&self) -> Result<Opened, String>;

    /// Makes the user's next request (a new sequence number written into its copy, ...):
    /// [`Exchange::request`] gives its bytes until the next call. Called once per request,
    /// before its first byte is written.
    fn encode(&self, u: &mut Self::User);

    /// The bytes of the user's request being sent (whole; the loop writes what is left of
    /// it after a partial write).
    fn request<'a>(&'a self, u: &'a Self::User) -> &'a [u8];

    /// Decodes the start of `bytes` (a stream's bytes read and not yet consumed, or one
    /// datagram) while the user waits for the reply to its request: a whole reply (and
    /// whether it matches the request), a stale one, not enough bytes yet, or not the
    /// protocol.
    fn decode(&self, u: &mut Self::User, bytes: &[u8]) -> Decoded;

    /// The user's socket was closed (a failure, a reply that closes, a hang-up): forget
    /// state tied to that connection. Nothing by default.
    fn closed(&self, _u: &mut Self::User) {}

    /// The TLS client of this protocol's connections (`https://`): the users' loop runs
    /// a session of it over each new connection (handshake before the first request,
    /// requests and replies as its plaintext). None (the default): the bytes are sent
    /// and read as they are. Only a [`Transport::Stream`] protocol may have one.
    fn tls(&self) -> Option<&tls::TlsClient> {
        None
    }
}

/// The kind of a socket error as failures are counted: `timeout`, `closed by peer`,
/// `connection reset`, `connection refused`, `broken pipe`, else the error's text.
pub fn io_kind(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => "timeout".into(),
        ErrorKind::UnexpectedEof => "closed by peer".into(),
        ErrorKind::ConnectionReset => "connection reset".into(),
        ErrorKind::ConnectionRefused => "connection refused".into(),
        ErrorKind::BrokenPipe => "broken pipe".into(),
        _ => e.to_string(),
    }
}

/// A non-blocking TCP connect to `target` (TCP_NODELAY): ready when the connect finished
/// at once (loopback often does), else in progress. Errors: `connect: KIND` ([`io_kind`]).
pub fn connect(target: SocketAddr) -> Result<Opened, String> {
    let open = || -> std::io::Result<Opened> {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(target),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        s.set_nonblocking(true)?;
        s.set_nodelay(true)?;
        let ready = match s.connect(&target.into()) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
            Err(e) => return Err(e),
        };
        Ok(Opened { socket: s, ready })
    };
    open().map_err(|e| format!("connect: {}", io_kind(&e)))
}

/// A non-blocking UDP socket on an ephemeral port, connected to `target` (only its
/// datagrams are read; an ICMP port unreachable fails the next send or receive).
/// Errors: `socket: ERROR`.
pub fn udp_socket(target: SocketAddr) -> Result<Opened, String> {
    let open = || -> std::io::Result<Opened> {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(target),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        let any: SocketAddr = if target.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        s.bind(&any.into())?;
        s.connect(&target.into())?;
        s.set_nonblocking(true)?;
        Ok(Opened {
            socket: s,
            ready: true,
        })
    };
    open().map_err(|e| format!("socket: {e}"))
}

/// Work done with the plan's protocol whatever its type (the users' loop, monomorphised
/// for it): see [`Protocol::with`].
pub(crate) trait WithExchange {
    /// What the work gives back.
    type Out;
    /// Does the work with protocol `p`.
    fn with<P: Exchange>(self, p: &P) -> Self::Out;
}

/// Lists the protocols: `Proto variant => module::type implementing Exchange`, one a line
/// (each module, `proto/MODULE.rs`, declared above).
macro_rules! protocols {
    ($($proto:ident => $module:ident :: $ty:ident,)*) => {
        /// The plan's protocol, made from the plan.
        pub(crate) enum Protocol {
            $(
                #[doc = concat!("`", stringify!($proto), "`: [`", stringify!($ty), "`].")]
                $proto($module::$ty),
            )*
        }

        impl Protocol {
            /// The protocol of a validated plan's wire (`RampPlan::wire`, `TcpStep::wire`).
            pub(crate) fn for_plan(w: &Wire<'_>) -> Protocol {
                match w.proto {
                    $(Proto::$proto { .. } => Protocol::$proto(<$module::$ty as Exchange>::for_plan(w)),)*
                }
            }

            /// How its requests travel.
            pub(crate) fn transport(&self) -> Transport {
                match self {
                    $(Protocol::$proto(_) => <$module::$ty as Exchange>::TRANSPORT,)*
                }
            }

            /// Runs `w` with the protocol as its own type.
            pub(crate) fn with<W: WithExchange>(&self, w: W) -> W::Out {
                match self {
                    $(Protocol::$proto(p) => w.with(p),)*
                }
            }
        }
    };
}

protocols! {
    Tcp => tcp_framed::TcpFramed,
    Udp => udp_seq::UdpSeq,
    Http => http1::Http1,
    Redis => resp::Resp,
}
