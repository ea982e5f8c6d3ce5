//! `load http URL --rate R`: an open loop of HTTP/1.1 requests at a fixed rate (the
//! engine's [`tpslab_engine::client::openloop`]), as one record of kind `load_http`. With
//! `--http3 --server-cmd` the user's server is started for the run, and with `--verify`
//! the host sysctls the verdict on its socket names are applied through the host guard,
//! the server started again, the run repeated and the host restored.

use anyhow::Result;
use std::sync::atomic::Ordering::Relaxed;
use tpslab_engine::host::guard::HostGuard;
use tpslab_plan::load_http::LoadHttpPlan;
use tpslab_record::load_http::LoadHttpRecord;
use tpslab_record::load_http::{FoundBy, QuicVerification, WatchedServer};
use tpslab_record::{Body, Record};

use crate::capacity::watch::StreamWatch;
use crate::server_proc::ServerProcess;
use crate::{Ctx, Started};

/// Runs the plan until its end (or `ctx.stop`: the counts so far, the record marked
/// interrupted), its per-interval samples handed to `ctx.http_live`; with `--verify`, a
/// second run with the fix. Errors: as [`tpslab_engine::client::openloop::run_load_http`] (one
/// line); `--server-cmd`'s server did not start or never bound the URL's UDP port.
pub fn run(plan: &LoadHttpPlan, ctx: &Ctx) -> Result<Record> {
    let started = Started::now();
    let what = if plan.max_rate {
        "load http at max rate (closed loop)".to_string()
    } else {
        format!("load http at {} requests/s", plan.rate)
    };
    let mut rec = once(plan, ctx, &what)?;
    if plan.verify && !ctx.stopped() {
        rec.result.verification = Some(Box::new(verify(plan, &rec, ctx)));
    }
    let interrupted = ctx.stop.load(Relaxed);
    Ok(Record::with_meta(
        started.meta(interrupted),
        Body::LoadHttp(rec),
    ))
}

/// How long a server `--server-cmd` started is given to complete an HTTP/3 handshake.
const SERVER_READY: std::time::Duration = std::time::Duration::from_secs(30);

/// One run as the phase `what`, the `--server-cmd` server started for it and stopped
/// after.
fn once(plan: &LoadHttpPlan, ctx: &Ctx, what: &str) -> Result<LoadHttpRecord> {
    let server = match &plan.server_cmd {
        Some(cmd) => Some(ServerProcess::user_udp_on(cmd, plan.target.port())?),
        None => None,
    };
    // Its UDP port bound is not yet HTTP/3 served (a certificate may come later): one
    // handshake first, within 30 s.
    if server.is_some() {
        tpslab_engine::client::openloop::wait_http3_ready(plan, SERVER_READY, &ctx.stop)?;
    }
    let secs = plan.duration.as_nanos() as f64 / 1e9;
    let watched = watched_server(plan);
    // Over TCP only (`watched_server`): HTTP/3's socket is watched by the run itself.
    let watch = watched.map(|(pid, _)| StreamWatch::start(plan.target, Some(pid), true));
    let rec = ctx.phase(what, secs, || {
        let mut rec = tpslab_engine::client::openloop::run_load_http_live(
            plan,
            &ctx.stop,
            ctx.http_live.as_ref(),
        )?;
        // The server's threads over the load alone, before the re-timing's requests.
        // Requests in flight at once: each connection's streams with --http2.
        let step = watch.and_then(|w| w.end(&rec.result, plan.schedules()).1);
        // Replies that look held by Nagle until a delayed ACK: re-timed with the client
        // acknowledging at once (at most 50 requests or 2 s), the server still up.
        tpslab_engine::client::quickack::retime_load_http(plan, &ctx.stop, &mut rec)?;
        Ok::<_, tpslab_engine::EngineError>((rec, step))
    });
    drop(server);
    let (mut rec, step) = rec?;
    if let Some((pid, found_by)) = watched {
        // One run: no earlier step's parked threads to leave out.
        let ledger = step.and_then(|s| {
            tpslab_analysis::rt_ledger::open_loop(&s, &std::collections::BTreeSet::new())
        });
        rec.result.server = Some(Box::new(WatchedServer {
            pid,
            found_by,
            ledger,
        }));
    }
    Ok(rec)
}

/// The server whose threads a TCP run (HTTP/1.1, HTTP/2) watches for its response-time
/// ledger: `--pid`, or the process holding the URL's listening socket on this host
/// ([`tpslab_engine::observe::listen::listener_owner`]); None over HTTP/3 (its UDP socket is
/// watched apart) or when neither is known.
fn watched_server(plan: &LoadHttpPlan) -> Option<(u32, FoundBy)> {
    if plan.version.is_http3() {
        return None;
    }
    match plan.pid {
        Some(p) => Some((p, FoundBy::Pid)),
        None => tpslab_engine::observe::listen::listener_owner(plan.target)
            .map(|p| (p, FoundBy::Address)),
    }
}

/// `--verify`: the verdict's sysctls through the host guard, the run again (its server
/// started after the change), the host restored; or why not, never the first run lost.
fn verify(plan: &LoadHttpPlan, first: &LoadHttpRecord, ctx: &Ctx) -> QuicVerification {
    let mut v = QuicVerification {
        applied: vec![],
        restored: vec![],
        after: None,
        not_verified: None,
        notes: vec![],
    };
    let Some(verdict) = tpslab_analysis::quic_server::judge(&first.result) else {
        v.not_verified = Some("the server's QUIC socket was not judged (not seen on this host, or its datagrams did not balance): nothing to verify".into());
        return v;
    };
    if verdict.sysctls.is_empty() {
        v.not_verified = Some(format!(
            "nothing tpslab can apply: {} (no host limit to raise)",
            verdict.headline
        ));
        return v;
    }
    let mut guard = match HostGuard::apply(&verdict.sysctls) {
        Ok(g) => g,
        Err(e) => {
            v.not_verified = Some(format!(
                "the fix could not be applied ({e}): nothing was verified"
            ));
            return v;
        }
    };
    v.applied = verdict
        .sysctls
        .iter()
        .map(|(k, val)| format!("sysctl {k}={val} (host-wide; restored afterwards)"))
        .collect();
    v.applied
        .push("the server started again after the change (--server-cmd)".into());
    let r = once(plan, ctx, "run 2: with the fix, the server restarted");
    let done = guard.restore();
    v.restored = done.restored;
    v.notes.extend(
        done.skipped
            .into_iter()
            .map(|s| format!("not restored: {s}")),
    );
    match r {
        Ok(rec) => {
            // A second run cut short proves nothing: kept, and said.
            if ctx.stopped() {
                v.not_verified =
                    Some("the second run was interrupted: its counts prove nothing".into());
            }
            v.after = Some(Box::new(rec.result))
        }
        Err(e) => v.notes.push(format!("verification run failed: {e}")),
    }
    v
}
