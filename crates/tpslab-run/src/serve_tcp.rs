//! `serve tcp`: the sink, the source, and the request/response server that `ramp tcp`
//! loads (echo or S1's replace, with CPU work, waiting and a global lock), started
//! ([`start`]) and then served until stopped or its duration is over ([`serve`]).

use crate::{Ctx, Started};
use anyhow::Result;
use std::time::Duration;
use tpslab_engine::lab::tcpflow::{SinkConfig, SinkServer};
use tpslab_engine::serve::rr::{RrConfig, RrMode, RrServer};
use tpslab_plan::tcp::{ServeTcpMode, ServeTcpPlan};
use tpslab_record::tcp::ServeTcpRecord;
use tpslab_record::{Body, Record};

/// The server running: the stream kind or the request/response kind.
enum Running {
    Stream(SinkServer),
    Rr(RrServer),
}

/// A server listening, not yet served to its end.
pub struct Serving {
    /// What is known at the start (its address, the SO_RCVBUF granted); the counts are
    /// zero until [`serve`] ends (a terminal prints its header from it).
    pub record: ServeTcpRecord,
    srv: Running,
    started: Started,
}

/// Starts the server of `plan` (raising the descriptor limit first: one descriptor per
/// connection, so a ramp to thousands of users does not hit EMFILE). Errors: the bind
/// (address in use, not this host's).
pub fn start(plan: &ServeTcpPlan) -> Result<Serving> {
    tpslab_net::raise_nofile();
    let started = Started::now();
    let srv = if plan.request_response() {
        Running::Rr(RrServer::start(RrConfig {
            listen: plan.listen,
            mode: match plan.mode {
                ServeTcpMode::Echo => RrMode::Echo,
                ServeTcpMode::Http => RrMode::Http,
                _ => RrMode::Replace,
            },
            work_ns: tpslab_plan::time::nanos(&plan.work),
            serial_ns: tpslab_plan::time::nanos(&plan.serial),
            serialize: plan.serialize,
            threads: plan.threads,
        })?)
    } else {
        Running::Stream(SinkServer::start(SinkConfig {
            listen: plan.listen,
            rcvbuf: plan.rcvbuf,
            source: plan.mode == ServeTcpMode::Source,
            sndbuf: plan.sndbuf,
        })?)
    };
    let record = ServeTcpRecord {
        plan: *plan,
        addr: match &srv {
            Running::Rr(s) => s.local_addr(),
            Running::Stream(s) => s.local_addr(),
        },
        rcvbuf_granted: match &srv {
            Running::Stream(s) => s.rcvbuf_granted,
            Running::Rr(_) => 0,
        },
        connections: 0,
        bytes: 0,
        requests: 0,
        errors: 0,
        elapsed_s: 0.0,
        interrupted: false,
    };
    Ok(Serving {
        record,
        srv,
        started,
    })
}

/// Serves until `ctx.stop` or the plan's duration (checked every 50 ms), stops the server
/// and returns the record (kind serve_tcp): connections, bytes or requests and errors, the
/// time served; interrupted when stopped early.
pub fn serve(s: Serving, ctx: &Ctx) -> Record {
    let Serving {
        mut record,
        srv,
        started,
    } = s;
    let t0 = std::time::Instant::now();
    let until = record.plan.duration;
    while !ctx.stopped() && until.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    record.interrupted = ctx.stopped();
    match srv {
        Running::Stream(s) => {
            record.connections = s.connections();
            record.bytes = s.stop();
        }
        Running::Rr(s) => {
            let r = s.stop();
            (record.connections, record.requests, record.errors) =
                (r.connections, r.requests, r.errors);
        }
    }
    record.elapsed_s = t0.elapsed().as_secs_f64();
    let meta = started.meta_for(record.elapsed_s, record.interrupted);
    Record::with_meta(meta, Body::ServeTcp(record))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(mode: ServeTcpMode, duration_ms: u64) -> ServeTcpPlan {
        ServeTcpPlan {
            listen: "127.0.0.1:0".parse().unwrap(),
            mode,
            rcvbuf: None,
            sndbuf: None,
            work: Duration::ZERO,
            serial: Duration::ZERO,
            serialize: false,
            threads: 0,
            duration: Some(Duration::from_millis(duration_ms)),
        }
    }

    #[test]
    fn a_sink_counts_what_it_read_until_its_duration() {
        let s = start(&plan(ServeTcpMode::Sink, 300)).unwrap();
        let addr = s.record.addr;
        assert_ne!(addr.port(), 0);
        let t = std::thread::spawn(move || {
            use std::io::Write;
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(&[7u8; 10_000]).unwrap();
        });
        let rec = serve(s, &Ctx::silent());
        t.join().unwrap();
        let Body::ServeTcp(r) = rec.body else {
            panic!("not a serve_tcp record")
        };
        assert_eq!((r.connections, r.bytes, r.interrupted), (1, 10_000, false));
        assert!(r.elapsed_s >= 0.3, "{}", r.elapsed_s);
    }

    #[test]
    fn a_stop_ends_the_serving_as_interrupted() {
        let s = start(&plan(ServeTcpMode::Echo, 60_000)).unwrap();
        let ctx = Ctx::silent();
        ctx.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rec = serve(s, &ctx);
        let Body::ServeTcp(r) = rec.body else {
            panic!("not a serve_tcp record")
        };
        assert!(r.interrupted && r.elapsed_s < 1.0, "{r:?}");
        assert_eq!((r.connections, r.requests), (0, 0));
    }
}
