//! `load http --http3`: the open loop's [`super::Schedule`] over the HTTP/3 loop
//! ([`super::run_loop`]), and its record.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use bytes::Bytes;
use tpslab_plan::load_http::LoadHttpPlan;
use tpslab_record::load_http::LoadHttpRecord;
use tpslab_record::quic::QuicPaths;

use super::{run_loop, H3Run};
use crate::client::openloop::{loops_for, record, run_schedule, HttpLiveSink, OpenAsk};
use crate::client::proto::h3;
use crate::EngineError;

/// The QUIC client of `req` (TLS 1.3 with ALPN h3, [`h3::transport`]'s limits), the name
/// its certificate is verified against, and the request as h3 sends it, once one
/// handshake with `target` within `timeout` showed it speaks HTTP/3
/// ([`super::preflight`]). Errors (one line): the URL not `https://`, its TLS settings, the
/// request, nothing at the URL speaking HTTP/3.
pub(crate) fn client(
    req: &tpslab_plan::http::HttpRequest,
    target: std::net::SocketAddr,
    timeout: std::time::Duration,
) -> Result<(quinn::ClientConfig, String, http::Request<()>), EngineError> {
    let tls = crate::client::proto::tls::client_for(req, h3::ALPN)
        .map_err(EngineError::Other)?
        .ok_or_else(|| EngineError::Other("--http3 needs an https:// URL".into()))?;
    let (config, server_name) = tls.quic_parts();
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(config)
        .map_err(|e| EngineError::Other(format!("--http3: TLS for QUIC: {e}")))?;
    let mut client = quinn::ClientConfig::new(std::sync::Arc::new(quic));
    client.transport_config(h3::transport());
    let request = h3::request(req).map_err(EngineError::Other)?;
    super::preflight(&client, target, &server_name, &req.url, timeout)
        .map_err(EngineError::Other)?;
    Ok((client, server_name, request))
}

/// `load http --http3`'s run: as [`crate::client::openloop::run_load_http`]'s, over
/// `connections` QUIC connections with `streams` schedules each. Errors: as
/// [`crate::client::openloop::run_load_http`]'s; the URL not `https://`, its TLS settings; nothing
/// at the URL speaking HTTP/3 (one line naming what a handshake before the run got:
/// [`super::preflight`]).
pub(in crate::client::openloop) fn run_load_h3(
    plan: &LoadHttpPlan,
    stop: &AtomicBool,
    live: Option<&HttpLiveSink>,
) -> Result<LoadHttpRecord, EngineError> {
    let (client, server_name, request) = client(&plan.request, plan.target, plan.timeout)?;
    // The server's socket on this host, watched from before the first connection to
    // after the last one closed.
    let c = plan.connections;
    let loops = loops_for(c, plan.load_threads)?;
    let beneath = super::beneath::Beneath::start(plan.target).map_err(EngineError::Other)?;
    let (start, sched, intended) = OpenAsk::of_http(plan).schedule(plan.schedules(), stop, live);
    let run = H3Run {
        sched: &sched,
        target: plan.target,
        client,
        server_name,
        request,
        body: Bytes::from(plan.body.clone()),
        connections: c,
        streams: plan.streams.max(1),
        quic: Mutex::new(QuicPaths::default()),
        sockets: Default::default(),
        // Only a watched server's ledger counts the CONNECTION_CLOSE datagram.
        close_sent: if beneath.is_some() {
            super::CLOSE_SENT
        } else {
            std::time::Duration::ZERO
        },
    };
    let l = match run_schedule(&sched, c, loops, &|ids| run_loop(&run, ids)) {
        Ok(l) => l,
        Err(e) => {
            // The observer's thread and its tracepoints stopped, not left to the exit.
            if let Some(b) = beneath {
                b.finish(&QuicPaths::default(), 0);
            }
            return Err(e);
        }
    };
    let mut rec = record(plan, start, intended, l);
    // Every loop thread (its runtime, endpoints and sockets) has ended: the sockets'
    // counts are whole.
    let mut quic = *run.quic.lock().unwrap_or_else(|e| e.into_inner());
    run.sockets.fill(&mut quic);
    let send_failed = run
        .sockets
        .send_failed_datagrams
        .load(std::sync::atomic::Ordering::Relaxed);
    rec.result.server_udp = beneath.map(|b| Box::new(b.finish(&quic, send_failed)));
    rec.result.http3 = Some(quic);
    // Reply gaps are TCP's (Nagle x delayed ACK): none over QUIC.
    rec.result.reply_gaps = None;
    Ok(rec)
}

/// Waits until the server at `plan`'s URL (`--http3`) completes one HTTP/3 handshake, as
/// the one before a run does, trying again every 100 ms while it fails as a server still
/// starting fails it (no reply, or a TLS alert: Caddy sends `internal_error` until its
/// `tls internal` certificate is issued, after its UDP port is bound), for at most
/// `within` or until `stop`. For a server `--server-cmd` just started. Errors: the last
/// handshake's line once `within` has passed; the URL's TLS settings or the request, at
/// once (one line each).
pub fn wait_http3_ready(
    plan: &LoadHttpPlan,
    within: std::time::Duration,
    stop: &AtomicBool,
) -> Result<(), EngineError> {
    let deadline = std::time::Instant::now() + within;
    loop {
        match client(&plan.request, plan.target, plan.timeout) {
            Ok(_) => return Ok(()),
            Err(EngineError::Other(line))
                if line.contains(": no HTTP/3 connection: ")
                    && std::time::Instant::now() < deadline
                    && !stop.load(std::sync::atomic::Ordering::Relaxed) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}
