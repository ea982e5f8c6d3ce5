//! The loop with a protocol of the tests' own, over a stream: replies that report a
//! failure, replies after which the server closes, interim (stale) messages, several
//! messages in one read, and bytes that are not the protocol, as an HTTP/1.1 keep-alive
//! protocol would give them.

use super::*;
use crate::client::proto::Decoded;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tpslab_analysis::stats::new_ns_histogram;
use tpslab_plan::framing::Framing;
use tpslab_plan::proto::Proto;
use tpslab_plan::ramp::RampPlan;

use crate::client::proto::connect;
use crate::client::tally::{StepAcc, Tally};
use std::sync::atomic::Ordering::Relaxed;

/// Lines: each request is `ping\n`; a reply `ok` answers it, `err` reports a failure,
/// `bye` answers it and closes the connection, `note` is an interim line (stale); any
/// other line is not the protocol.
struct Lines {
    target: SocketAddr,
    /// Closings seen by [`Exchange::closed`].
    closed: AtomicU64,
}

impl Exchange for Lines {
    type User = u64;
    const TRANSPORT: Transport = Transport::Stream;

    fn for_plan(plan: &tpslab_plan::proto::Wire<'_>) -> Self {
        Lines {
            target: plan.target,
            closed: AtomicU64::new(0),
        }
    }
    fn user(&self, _id: usize) -> u64 {
        0
    }
    fn open(&self) -> Result<Opened, String> {
        connect(self.target)
    }
    fn encode(&self, sent: &mut u64) {
        *sent += 1;
    }
    fn request<'a>(&'a self, _u: &'a u64) -> &'a [u8] {
        b"ping\n"
    }
    fn decode(&self, _u: &mut u64, bytes: &[u8]) -> Decoded {
        let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
            return Decoded::NeedMore;
        };
        let len = end + 1;
        match &bytes[..end] {
            b"ok" => Decoded::Reply(Reply::ok(len)),
            b"err" => Decoded::Reply(Reply {
                len,
                failed: Some("server error"),
                close: false,
                status: 0,
            }),
            b"bye" => Decoded::Reply(Reply {
                len,
                failed: None,
                close: true,
                status: 0,
            }),
            b"note" => Decoded::Stale(len),
            _ => Decoded::Invalid("bad line".into()),
        }
    }
    fn closed(&self, _u: &mut u64) {
        self.closed.fetch_add(1, Relaxed);
    }
}

/// A line server on loopback: the n-th request of each connection (from 0) is answered
/// with `script(n)` (a `|` in it: the part before it written, 40 ms waited, then the
/// rest); the connection is closed after a reply ending in `bye\n`. Counts the
/// connections accepted.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicU64>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(script: fn(u64) -> &'static [u8]) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicU64::new(0));
        let (st, co) = (stop.clone(), connections.clone());
        let accept = std::thread::spawn(move || {
            while !st.load(Relaxed) {
                let Ok((c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                co.fetch_add(1, Relaxed);
                c.set_nonblocking(false).unwrap();
                std::thread::spawn(move || {
                    let mut w = c.try_clone().unwrap();
                    let mut r = BufReader::new(c);
                    let mut line = String::new();
                    for n in 0.. {
                        line.clear();
                        if !matches!(r.read_line(&mut line), Ok(k) if k > 0) {
                            return;
                        }
                        let reply = script(n);
                        let (a, b) = match reply.iter().position(|&c| c == b'|') {
                            Some(k) => (&reply[..k], &reply[k + 1..]),
                            None => (reply, &b""[..]),
                        };
                        if w.write_all(a).is_err() {
                            return;
                        }
                        if !b.is_empty() {
                            std::thread::sleep(Duration::from_millis(40));
                            if w.write_all(b).is_err() {
                                return;
                            }
                        }
                        if reply.ends_with(b"bye\n") {
                            return;
                        }
                    }
                });
            }
        });
        Server {
            addr,
            stop,
            connections,
            accept: Some(accept),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// Runs `users` users of `Lines` against `target` for `ms`, every reply and failure
/// counted (the window outlasts the run): (replies, failures by kind, closings).
fn run(target: SocketAddr, users: usize, ms: u64) -> (u64, BTreeMap<String, u64>, u64) {
    let (replies, errors, closed, _) = run_gaps(target, users, ms);
    (replies, errors, closed)
}

/// [`run`], with the replies' gaps from first byte to last.
fn run_gaps(
    target: SocketAddr,
    users: usize,
    ms: u64,
) -> (
    u64,
    BTreeMap<String, u64>,
    u64,
    tpslab_record::gaps::ReplyGaps,
) {
    let plan = RampPlan {
        proto: Proto::Tcp,
        target,
        steps: vec![users],
        step: Duration::from_millis(ms),
        warmup: Duration::ZERO,
        think: Duration::ZERO,
        timeout: Duration::from_secs(1),
        request: b"ping\n".to_vec(),
        framing: Framing::Delimiter(b"\n".to_vec()),
        seq_field: None,
        knee_gain: 0.2,
        builtin_server: None,
        server_pid: None,
        sample_interval: Duration::from_millis(10),
        load_threads: 1,
        connections: tpslab_plan::ramp::UserConnections::PerUser,
    };
    let proto = Lines::for_plan(&plan.wire());
    let t0 = mono_ns();
    let tally = Tally {
        plan: &plan,
        done: AtomicBool::new(false),
        stop: &AtomicBool::new(false),
        sent: crate::client::tally::no_sends(1),
        windows: vec![(t0, t0 + 60_000_000_000)],
        acc: vec![Mutex::new(StepAcc {
            hist: new_ns_histogram(),
            errors: BTreeMap::new(),
            gaps: Default::default(),
            backoffs: 0,
        })],
    };
    std::thread::scope(|s| {
        let (sh, p) = (&tally, &proto);
        s.spawn(move || {
            Users {
                sh,
                ids: (0..users).collect(),
            }
            .with(p)
        });
        std::thread::sleep(Duration::from_millis(ms));
        tally.done.store(true, Relaxed);
    });
    // The server's accept thread counts the last connections made.
    std::thread::sleep(Duration::from_millis(50));
    let a = tally.acc[0].lock().unwrap();
    (
        a.hist.len(),
        a.errors.clone(),
        proto.closed.load(Relaxed),
        a.gaps,
    )
}

/// A reply written in two parts 40 ms apart has its last byte read 40 ms after its first
/// (held, by the gaps' count); one written whole has none; a reply after an interim
/// line is dated by its own first byte, not the interim line's.
#[test]
fn each_replys_first_and_last_byte_are_dated() {
    let srv = Server::start(|n| match n % 2 {
        0 => b"o|k\n",
        _ => b"ok\n",
    });
    let (replies, errors, _, g) = run_gaps(srv.addr, 1, 500);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(replies >= 8, "{replies} replies");
    assert_eq!((g.replies, g.small), (replies, replies), "{g:?}");
    // Every other reply held; one at the end may be either.
    assert!(g.held.abs_diff(replies / 2) <= 1, "{g:?}");
    let mean = g.mean_held_gap_ns().unwrap();
    assert!((40e6..60e6).contains(&mean), "{g:?}");
    // The held time is most of the response time.
    assert!(g.held_share() > 0.8, "{g:?}");
    // The held replies' connection's least RTT (TCP_INFO min_rtt): loopback's.
    assert!(
        g.held_rtt_min_ns.is_some_and(|r| r > 0 && r < 1_000_000),
        "{g:?}"
    );

    let srv = Server::start(|_| b"note\nok\n");
    let (replies, _, _, g) = run_gaps(srv.addr, 1, 200);
    assert!(replies > 10 && g.held == 0, "{replies} replies, {g:?}");
    assert_eq!(g.held_rtt_min_ns, None, "nothing held, no RTT read");
}

#[test]
fn failed_replies_closing_replies_and_interim_lines_are_counted_as_such() {
    // Per connection: an interim line with its answer in one write, a failure, an
    // answer, then an answer after which the server closes.
    let srv = Server::start(|n| match n % 4 {
        0 => b"note\nok\n",
        1 => b"err\n",
        2 => b"ok\n",
        _ => b"bye\n",
    });
    let users = 4;
    let (replies, errors, closed) = run(srv.addr, users, 400);
    let failed = errors.get("server error").copied().unwrap_or(0);
    // Only the failures the server reported: no "closed by peer" (the loop reconnected
    // after "bye" itself), no "bad line" (the interim line was skipped).
    assert_eq!(
        errors.keys().collect::<Vec<_>>(),
        ["server error"],
        "{errors:?}"
    );
    assert!(failed > 50, "{failed} failures");
    // Three answers per failure; a user stopped inside its connection's four requests
    // is off by at most 2.
    let off = replies as i64 - 3 * failed as i64;
    assert!(
        off.abs() <= 2 * users as i64,
        "{replies} replies, {failed} failures"
    );
    // A connection per four requests (each user's last one open at the end): the loop
    // closed each after its "bye", and told the protocol.
    let conns = srv.connections.load(Relaxed) as i64;
    let requests = (replies + failed) as i64;
    assert!(
        (conns - requests / 4 - users as i64).abs() <= users as i64,
        "{conns} connections for {requests} requests"
    );
    assert!(
        closed as i64 >= conns - users as i64,
        "{closed} closings, {conns} connections"
    );
}

#[test]
fn bytes_that_are_not_the_protocol_fail_the_request_and_drop_the_connection() {
    let srv = Server::start(|_| b"HTTP/1.1 200 OK\r\n");
    let users = 2;
    let (replies, errors, closed) = run(srv.addr, users, 300);
    assert_eq!(replies, 0);
    let bad = errors.get("bad line").copied().unwrap_or(0);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(bad > 20, "{bad}");
    // Each failure closed its connection: one connection per failed request, and each
    // user's last one (waiting for a reply) open at the end.
    let conns = srv.connections.load(Relaxed);
    assert!(
        (bad..=bad + users as u64).contains(&conns),
        "{conns} connections, {bad} failures"
    );
    assert_eq!(closed, bad, "a closing per failure");
}

#[test]
fn back_offs_double_from_1_ms_to_1_s_then_stay() {
    let mut b = 0;
    let mut seen = vec![];
    for _ in 0..13 {
        b = next_backoff(b);
        seen.push(b / 1_000_000);
    }
    assert_eq!(
        seen,
        vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000, 1000]
    );
    // After a reply the next run of failures starts again at 1 ms.
    assert_eq!(next_backoff(0), BACKOFF_FIRST_NS);
}
