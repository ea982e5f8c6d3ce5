//! `load http --http3`: the open loop ([`crate::client::openloop`]'s `Schedule`) over HTTP/3
//! connections (QUIC: quinn, HTTP/3: h3, TLS 1.3: rustls; see [`crate::client::proto::h3`]),
//! several streams in flight on each, and `--rate max`'s closed loop on the same
//! schedules.
//!
//! The schedules are HTTP/2's: `connections * streams` of them, schedule `u` on
//! connection `u % connections`, each with one request in flight at a time, latency from
//! its intended send (corrected) and from its actual send (uncorrected). A request counts
//! as sent once its stream is finished (headers and body handed to QUIC): a stream the
//! server's MAX_STREAMS holds back waits before that, in the latency from the intended
//! send. A request without its reply within `--timeout` of its send fails (`timeout`; its
//! stream is reset).
//!
//! quinn is asynchronous: each loop thread runs its connections on a tokio runtime of its
//! own (one thread: the loop's), each connection with its own UDP socket (a quinn
//! endpoint). A connection made: its schedules run until the plan's end or until it dies,
//! when those with a request in flight count it failed by kind and the connection is made
//! again after a back-off (1 ms doubling to 1 s while no reply comes, as HTTP/1.1's and
//! HTTP/2's). A schedule due while its connection is being made sends once it is, late
//! (its latency from the intended time says so). The counts go into the loop's own
//! `Books::Local` as HTTP/1.1's and HTTP/2's do.
//!
//! Nothing at the URL speaking HTTP/3 (no reply to the handshake, no QUIC version in
//! common, a TLS alert or QUIC error from the server) is found by one handshake before the
//! run ([`preflight`]), which then does not start: one line
//! ([`crate::client::proto::h3::handshake_failure`]). Bytes
//! in and out are the UDP payloads of the QUIC connections (packets with their headers,
//! frames and encryption), read from each connection's statistics at its end; those
//! statistics (RTT, congestion window, packets sent and lost) are the record's `http3`,
//! whose datagrams and UDP bytes are counted at the client's sockets instead
//! ([`counted`]: a handshake that failed has no statistics to read).

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use bytes::{Buf, Bytes};
use futures_util::future::join_all;
use tpslab_net::mono_ns;
use tpslab_record::quic::QuicPaths;

use crate::client::books::Books;
use crate::client::proto::h3;
use crate::client::proto::Reply;

mod beneath;
mod clock;
mod counted;
mod load;
mod preflight;
mod ramp;

pub(crate) use load::client;
pub(in crate::client::openloop) use load::run_load_h3;
pub use load::wait_http3_ready;
use preflight::any_port;
pub(crate) use preflight::preflight;
pub(crate) use ramp::ramp_users;

/// What every loop of a run shares.
pub(crate) struct H3Run<'a, B: Books> {
    /// The clock and the counts.
    pub(crate) sched: &'a B,
    /// The URL's address.
    pub(crate) target: SocketAddr,
    /// The QUIC client's configuration (TLS, ALPN h3, the transport's limits).
    pub(crate) client: quinn::ClientConfig,
    /// The name the certificate is verified against (the URL's host).
    pub(crate) server_name: String,
    /// The request (without its body).
    pub(crate) request: http::Request<()>,
    /// The request's body.
    pub(crate) body: Bytes,
    /// Connections in all.
    pub(crate) connections: usize,
    /// Schedules (streams) per connection.
    pub(crate) streams: usize,
    /// The QUIC figures of every connection, each loop's merged as it ends.
    pub(crate) quic: Mutex<QuicPaths>,
    /// What every client socket of the run moved (its datagrams and bytes, failed
    /// handshakes' too): the record's in place of the connections' sums.
    pub(crate) sockets: std::sync::Arc<counted::SocketCounts>,
    /// How long a closed connection is given to send its CONNECTION_CLOSE before its
    /// figures are read: [`CLOSE_SENT`] when the server's socket is watched (its ledger
    /// counts that datagram), else zero (a reconnect is not held up).
    pub(crate) close_sent: Duration,
}

/// A loop thread's state, shared by its connections' tasks (one thread: no task holds a
/// borrow across an await).
struct Shared<B: Books> {
    local: RefCell<B::Local>,
    /// Requests claimed and neither answered, failed nor given back (written, or still
    /// being written): what the run's end leaves unanswered.
    unsettled: Cell<u64>,
    /// The connections open now, by the loop's index (their figures are read at the end).
    open: RefCell<Vec<Option<quinn::Connection>>>,
    /// The loop's connections' QUIC figures, and its requests' waits for a stream.
    quic: RefCell<QuicPaths>,
    /// The thread's timer to the microsecond.
    clock: clock::Clock,
}

/// How often a loop checks for the run's end, ns.
const DONE_POLL: Duration = Duration::from_millis(5);

/// How long a closed connection's endpoint is given to send its CONNECTION_CLOSE
/// before the connection's figures are read (its driver runs on this loop's thread).
pub(crate) const CLOSE_SENT: Duration = Duration::from_millis(2);

/// Runs the connections `ids` (their schedules with them) on this thread until the run
/// is done.
pub(crate) fn run_loop<B: Books>(run: &H3Run<B>, ids: Vec<usize>) {
    let sched = run.sched;
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let mut l = sched.local();
            sched.failed(&mut l, mono_ns(), &format!("tokio runtime: {e}"), false);
            sched.finish(l, 0);
            return;
        }
    };
    let clock = match rt.block_on(async { clock::Clock::new() }) {
        Ok(c) => c,
        Err(e) => {
            let mut l = sched.local();
            sched.failed(&mut l, mono_ns(), &format!("timerfd: {e}"), false);
            sched.finish(l, 0);
            return;
        }
    };
    let shared = Shared::<B> {
        local: RefCell::new(sched.local()),
        unsettled: Cell::new(0),
        open: RefCell::new(vec![None; ids.len()]),
        quic: RefCell::new(QuicPaths::default()),
        clock,
    };
    rt.block_on(async {
        let conns = join_all(
            ids.iter()
                .enumerate()
                .map(|(k, &cid)| connection(run, &shared, k, cid)),
        );
        tokio::select! {
            _ = conns => {}
            _ = shared.clock.run() => {}
            _ = async {
                while !sched.done() {
                    tokio::time::sleep(DONE_POLL).await;
                }
            } => {}
        }
    });
    // The run's end (or its abort) came with connections open: closed, then their
    // figures once the CONNECTION_CLOSE went out.
    let open: Vec<quinn::Connection> = shared
        .open
        .borrow_mut()
        .iter_mut()
        .filter_map(Option::take)
        .collect();
    if !open.is_empty() {
        for c in &open {
            c.close(0u32.into(), b"done");
        }
        if !run.close_sent.is_zero() {
            rt.block_on(async { tokio::time::sleep(run.close_sent).await });
        }
    }
    for c in &open {
        harvest(run, &shared, c);
    }
    let Shared {
        local,
        unsettled,
        quic,
        clock,
        ..
    } = shared;
    drop(clock);
    drop(rt);
    run.quic
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .add_connection(&quic.borrow());
    // Requests still being written when the run's end dropped their tasks count too.
    sched.finish(local.into_inner(), unsettled.get());
}

/// A connection's figures into the loop's sums, its UDP bytes into the counts (the
/// record's datagram and byte totals are the sockets' in the end: [`counted`]).
fn harvest<B: Books>(run: &H3Run<B>, sh: &Shared<B>, c: &quinn::Connection) {
    let s = c.stats();
    let rtt = s.path.rtt.as_nanos() as u64;
    sh.quic.borrow_mut().add_connection(&QuicPaths {
        connections: 1,
        datagrams_sent: s.udp_tx.datagrams,
        datagrams_received: s.udp_rx.datagrams,
        udp_bytes_sent: s.udp_tx.bytes,
        udp_bytes_received: s.udp_rx.bytes,
        packets_sent: s.path.sent_packets,
        packets_lost: s.path.lost_packets,
        bytes_lost: s.path.lost_bytes,
        congestion_events: s.path.congestion_events,
        rtt_min_ns: rtt,
        rtt_mean_ns: rtt,
        rtt_max_ns: rtt,
        cwnd_min_bytes: s.path.cwnd,
        cwnd_max_bytes: s.path.cwnd,
        ..QuicPaths::default()
    });
    let mut l = sh.local.borrow_mut();
    run.sched.read(&mut l, s.udp_rx.bytes as usize);
    run.sched.wrote(&mut l, s.udp_tx.bytes as usize);
}

/// A schedule: one request at a time on its connection.
struct Sched {
    /// When its next request is due, ns (0: at once, a closed loop's).
    next_at: u64,
    /// Since when it could send (its last reply, its connection), ns.
    ready: u64,
    /// Its request in hand has had its stream wait counted already (it is sent again
    /// after a GOAWAY): counted once, as HTTP/2's.
    wait_counted: bool,
}

/// A request's wait for its stream: when it began (the request not ready at its first
/// poll) and when the stream opened (None: still waiting when the request ended, timed
/// out or dropped).
#[derive(Default)]
struct StreamWait {
    since: Cell<Option<u64>>,
    opened: Cell<Option<u64>>,
}

/// How a schedule's run on a connection ended.
enum End {
    /// No more requests may start (the plan's end, the stop, `--requests`).
    Finished,
    /// The connection failed or the server is closing it (GOAWAY): made again.
    Gone,
}

type SendRequest = ::h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// Connection slot `k` (the run's connection `cid`) and its schedules: connects, runs
/// the schedules on the connection until they finish or it dies, and again after a
/// back-off, until no request may start.
async fn connection<B: Books>(run: &H3Run<'_, B>, sh: &Shared<B>, k: usize, cid: usize) {
    let sched = run.sched;
    let (c, s) = (run.connections, run.streams);
    let mut scheds: Vec<Sched> = (0..s)
        .map(|j| {
            let id = cid + j * c;
            Sched {
                next_at: sched.first_due(id).max(sched.starts_at(id)),
                ready: 0,
                wait_counted: false,
            }
        })
        .collect();
    let mut backoff_ns = 0u64;
    loop {
        if !sched.may_send(mono_ns()) {
            return;
        }
        let Some((conn, send, mut driver)) = connect(run, sh, k).await else {
            backoff_ns = crate::client::users::next_backoff(backoff_ns);
            sched.backed_off(&mut sh.local.borrow_mut(), mono_ns());
            tokio::time::sleep(Duration::from_nanos(backoff_ns)).await;
            continue;
        };
        let now = mono_ns();
        for u in &mut scheds {
            u.ready = now;
        }
        let answered = Cell::new(false);
        let gone = Gone::default();
        let work = async {
            let ends = join_all(
                scheds
                    .iter_mut()
                    .map(|u| schedule(run, sh, u, send.clone(), &answered, &gone)),
            )
            .await;
            drop(send);
            ends.iter().all(|e| matches!(e, End::Finished))
        };
        // The connection's end wakes the schedules waiting for their next send; those
        // with a request in flight see it fail. The schedules run on until each returns:
        // every request written is answered or counted failed.
        let drive = async {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            gone.set();
            std::future::pending::<()>().await;
        };
        let finished = tokio::select! {
            f = work => f,
            _ = drive => false,
        };
        // Closed first, its figures read once the CONNECTION_CLOSE is sent: the ledger
        // of the server's socket counts that datagram too. It stays among the open ones
        // until read: the run's end may drop this task during the wait, and the loop
        // then reads it with the others (once: no await between the read and the slot's
        // clearing).
        conn.close(0u32.into(), b"");
        if !run.close_sent.is_zero() {
            tokio::time::sleep(run.close_sent).await;
        }
        harvest(run, sh, &conn);
        sh.open.borrow_mut()[k] = None;
        if finished {
            return;
        }
        // A connection that answered is made again at once; else after a back-off.
        backoff_ns = if answered.get() {
            0
        } else {
            crate::client::users::next_backoff(backoff_ns)
        };
        if backoff_ns > 0 {
            sched.backed_off(&mut sh.local.borrow_mut(), mono_ns());
            tokio::time::sleep(Duration::from_nanos(backoff_ns)).await;
        }
    }
}

/// A connection's end, as its schedules learn of it.
#[derive(Default)]
struct Gone {
    is: Cell<bool>,
    notify: tokio::sync::Notify,
}

impl Gone {
    fn set(&self) {
        self.is.set(true);
        self.notify.notify_waiters();
    }

    /// Waits until `at` (monotonic ns) on `clock`: true, or false when the connection
    /// ended first.
    async fn sleep_until(&self, clock: &clock::Clock, at: u64) -> bool {
        // Made before the flag is read: a notice between the two is not missed.
        let notified = self.notify.notified();
        if self.is.get() {
            return false;
        }
        tokio::select! {
            _ = clock.sleep_until(at) => true,
            _ = notified => false,
        }
    }
}

type Driver = ::h3::client::Connection<h3_quinn::Connection, Bytes>;

/// A QUIC connection and HTTP/3 on it, within the timeout, in slot `k` of the loop's open
/// connections from its handshake on (the run's end may drop this task while HTTP/3 is
/// set up: the loop then reads its figures); its failure counted (`connect: KIND`).
async fn connect<B: Books>(
    run: &H3Run<'_, B>,
    sh: &Shared<B>,
    k: usize,
) -> Option<(quinn::Connection, SendRequest, Driver)> {
    let sched = run.sched;
    let fail = |kind: String, _line: Option<String>| {
        let mut l = sh.local.borrow_mut();
        sched.failed(&mut l, mono_ns(), &format!("connect: {kind}"), false);
    };
    let ep = match counted::client(any_port(run.target), &run.sockets) {
        Ok(ep) => ep,
        Err(e) => {
            fail(crate::client::proto::io_kind(&e).to_string(), None);
            return None;
        }
    };
    let connecting = match ep.connect_with(run.client.clone(), run.target, &run.server_name) {
        Ok(c) => c,
        Err(e) => {
            fail(format!("http3: {e}"), None);
            return None;
        }
    };
    let timeout = Duration::from_nanos(sched.timeout_ns().max(1_000_000));
    let conn = match tokio::time::timeout(timeout, connecting).await {
        Err(_) => {
            fail("timeout".into(), Some(h3::no_reply(run.target)));
            return None;
        }
        Ok(Err(e)) => {
            let (kind, line) = h3::handshake_failure(run.target, &e);
            fail(kind, line);
            return None;
        }
        Ok(Ok(c)) => c,
    };
    sched.opened(&mut sh.local.borrow_mut());
    sh.open.borrow_mut()[k] = Some(conn.clone());
    let mut b = ::h3::client::builder();
    b.max_field_section_size(h3::FIELD_SECTION);
    // No GREASE (RFC 9114 7.2.8 and 9: reserved settings, frames and stream types a peer
    // must ignore): the h3 crate sends a GREASE frame at the end of a request stream, and
    // aioquic 1.2 (Hypercorn's HTTP/3) then never sees the request's end, so a server that
    // reads the request whole never answers. A load is not an extensibility probe.
    b.send_grease(false);
    let h = b.build::<_, _, Bytes>(h3_quinn::Connection::new(conn.clone()));
    match tokio::time::timeout(timeout, h).await {
        Ok(Ok((driver, send))) => Some((conn, send, driver)),
        Ok(Err(e)) => {
            harvest(run, sh, &conn);
            sh.open.borrow_mut()[k] = None;
            fail(format!("http3: {e}"), None);
            None
        }
        Err(_) => {
            harvest(run, sh, &conn);
            sh.open.borrow_mut()[k] = None;
            fail("timeout".into(), None);
            None
        }
    }
}

/// One schedule's requests on a connection, one at a time, until no request may start
/// or the connection is gone.
async fn schedule<B: Books>(
    run: &H3Run<'_, B>,
    sh: &Shared<B>,
    u: &mut Sched,
    mut send: SendRequest,
    answered: &Cell<bool>,
    gone: &Gone,
) -> End {
    let sched = run.sched;
    let timeout = Duration::from_nanos(sched.timeout_ns().max(1_000_000));
    loop {
        if !gone.sleep_until(&sh.clock, u.next_at).await {
            return End::Gone;
        }
        let now = mono_ns();
        if !sched.may_send(now) || !sched.claim() {
            return End::Finished;
        }
        sh.unsettled.set(sh.unsettled.get() + 1);
        let intended = if u.next_at == 0 { now } else { u.next_at };
        let t0 = now;
        let sent = Cell::new(false);
        let first = Cell::new(0u64);
        let wait = StreamWait::default();
        let out = tokio::time::timeout(
            timeout,
            exchange(
                run,
                sh,
                &mut send,
                (intended, u.ready),
                (&sent, &first, &wait),
            ),
        )
        .await;
        let now = mono_ns();
        let in_flight = sent.get();
        // A wait for a stream, counted whatever ended the request (a timeout while still
        // waiting too), once a request.
        if let Some(since) = wait.since.get() {
            let mut q = sh.quic.borrow_mut();
            if !std::mem::replace(&mut u.wait_counted, true) {
                q.waited_for_stream += 1;
            }
            let until = wait.opened.get().unwrap_or(now);
            q.stream_wait_max_ns = q.stream_wait_max_ns.max(until.saturating_sub(since));
        }
        if !matches!(out, Ok(Err(Failure::Closing))) {
            u.wait_counted = false;
        }
        // Settled here, whatever the outcome (given back, answered or failed).
        sh.unsettled.set(sh.unsettled.get() - 1);
        let failure = match out {
            Ok(Ok((status, len))) => {
                // A 4xx or 5xx says the request failed, as HTTP/1.1's decoder says: a
                // ramp's tally counts it a failure; the open loop counts it by its
                // status class.
                let r = Reply {
                    status,
                    failed: crate::client::proto::http1::status_failure(status),
                    ..Reply::ok(len)
                };
                let mut l = sh.local.borrow_mut();
                sched.answered(&mut l, intended, t0, first.get(), now, &r);
                answered.set(true);
                None
            }
            Ok(Err(Failure::Closing)) => {
                // GOAWAY before the request went: not sent, started anew.
                sched.unclaim();
                return End::Gone;
            }
            Ok(Err(Failure::Stream(kind, gone))) => Some((kind, gone)),
            Err(_) => Some(("timeout".to_string(), false)),
        };
        u.ready = now;
        u.next_at = sched.next_due(intended, now);
        if let Some((kind, gone)) = failure {
            let mut l = sh.local.borrow_mut();
            sched.failed(&mut l, now, &kind, in_flight);
            if !in_flight {
                // Claimed and never written whole: the books may settle without it.
                sched.abandoned();
            }
            if gone {
                return End::Gone;
            }
        }
    }
}

/// How a request failed.
enum Failure {
    /// The server is closing the connection (GOAWAY) and the request was not sent.
    Closing,
    /// Its kind, and whether the connection is gone with it.
    Stream(String, bool),
}

/// One request and its reply: (status, body bytes). `at`: its intended time and since
/// when its schedule could send (ns). `sent` is set once the request is written whole
/// (counted sent), `first` when its reply's headers came (ns), `wait` when its stream
/// was not to be had at once.
async fn exchange<B: Books>(
    run: &H3Run<'_, B>,
    sh: &Shared<B>,
    send: &mut SendRequest,
    (intended, ready): (u64, u64),
    (sent, first, wait): (&Cell<bool>, &Cell<u64>, &StreamWait),
) -> Result<(u16, usize), Failure> {
    let fail = |e: ::h3::error::StreamError| {
        let gone = matches!(
            e,
            ::h3::error::StreamError::ConnectionError { .. }
                | ::h3::error::StreamError::RemoteClosing { .. }
        );
        if !sent.get() && matches!(e, ::h3::error::StreamError::RemoteClosing { .. }) {
            return Failure::Closing;
        }
        Failure::Stream(h3::stream_failure(&e), gone)
    };
    // Not ready at its first poll: no stream was left under the server's MAX_STREAMS
    // (or, rarely, the connection's send window held the headers back): a wait from
    // here until the stream opened, counted by the caller.
    let asked = mono_ns();
    let mut first_poll = true;
    let mut request = std::pin::pin!(send.send_request(run.request.clone()));
    let opened = std::future::poll_fn(|cx| {
        let p = std::future::Future::poll(request.as_mut(), cx);
        if std::mem::take(&mut first_poll) && p.is_pending() {
            wait.since.set(Some(asked));
        }
        p
    })
    .await;
    if wait.since.get().is_some() {
        wait.opened.set(Some(mono_ns()));
    }
    let mut stream = opened.map_err(fail)?;
    if !run.body.is_empty() {
        stream.send_data(run.body.clone()).await.map_err(fail)?;
    }
    stream.finish().await.map_err(fail)?;
    sent.set(true);
    // It waited for its stream, not for the generator: ready from when the stream opened
    // (as HTTP/2 counts a request that waited for one), so the wait is not the
    // generator's lateness.
    let ready = wait.opened.get().map_or(ready, |o| ready.max(o));
    run.sched
        .sent(&mut sh.local.borrow_mut(), intended, ready, mono_ns(), 0);
    let resp = stream.recv_response().await.map_err(fail)?;
    first.set(mono_ns());
    let mut len = 0usize;
    // The body is read and dropped as it comes: never more than the stream's window held.
    while let Some(chunk) = stream.recv_data().await.map_err(fail)? {
        len += chunk.remaining();
    }
    Ok((resp.status().as_u16(), len))
}
