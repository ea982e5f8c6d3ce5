//! `probe idle` in tpslab's lab: the far side of the delay line's middlebox.

use super::{responder, study, Study};
use crate::link::{Link, ADDR_B};
use crate::EngineError;
use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tpslab_net::ns::NetNs;
use tpslab_plan::probe::IdlePlan;
use tpslab_plan::tcp::{LinkConfig, OnIdle};

/// The study in tpslab's lab: two throwaway namespaces joined by the delay line, whose
/// middlebox forgets flows idle for `idle_timeout_ns` and then drops or resets; on the
/// far side a listener accepts and holds the connections (reads nothing), or (UDP) the
/// responder answers.
pub fn lab_study(
    plan: &IdlePlan,
    idle_timeout_ns: u64,
    on_idle: OnIdle,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Study, EngineError> {
    let ns = |what| NetNs::create().map_err(|e| EngineError::os(format!("creating {what}"), e));
    let (a, b) = (ns("the near namespace")?, ns("the far namespace")?);
    let link = Link::start(
        &a,
        &b,
        LinkConfig {
            idle_timeout_ns: Some(idle_timeout_ns),
            on_idle,
            ..Default::default()
        },
    )?;
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let (addr, far) = if plan.udp || plan.server_first {
        let (s, l) = b
            .run(|| -> std::io::Result<(UdpSocket, TcpListener)> {
                let l = TcpListener::bind((ADDR_B, 0))?;
                let s = UdpSocket::bind(l.local_addr()?)?;
                Ok((s, l))
            })
            .and_then(|r| r)
            .map_err(|e| EngineError::os("binding the responder in the far namespace", e))?;
        let addr = s
            .local_addr()
            .map_err(|e| EngineError::os("responder", e))?;
        let h = std::thread::Builder::new()
            .name("idle-responder".into())
            .spawn(move || {
                let _ = responder(&s, Some(&l), &d);
            });
        (addr, h)
    } else {
        let listener = b
            .run(|| TcpListener::bind((ADDR_B, 0)))
            .and_then(|r| r)
            .map_err(|e| EngineError::os("listening in the far namespace", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| EngineError::os("listener", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| EngineError::os("listener", e))?;
        let max_held = plan.connections * 64;
        let h = std::thread::Builder::new()
            .name("idle-listener".into())
            .spawn(move || {
                let mut held = vec![];
                while !d.load(Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) if held.len() < max_held => held.push(s),
                        Ok(_) => {}
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            });
        (addr, h)
    };
    let holder = far.map_err(|e| EngineError::os("spawning the far side's thread", e))?;
    let result = a
        .run(|| study(plan, addr, stop, progress))
        .map_err(|e| EngineError::os("entering the near namespace", e))
        .and_then(|r| r);
    done.store(true, Relaxed);
    let _ = holder.join();
    drop(link);
    result
}
