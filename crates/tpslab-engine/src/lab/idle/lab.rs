//! `probe idle` in tpslab's lab: the far side of the delay line's middlebox.

use super::{responder, study, Study};
use crate::EngineError;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tpslab_plan::probe::IdlePlan;
use tpslab_plan::tcp::{IdleTimer, OnIdle};

/// The study in tpslab's lab: two throwaway namespaces joined by the delay line, whose
/// middlebox forgets flows idle for `idle_timeout_ns` (as `timer` counts activity) and
/// then drops, resets or ends them with FINs; on the
/// far side a listener accepts and holds the connections (reads nothing), or (UDP) the
/// responder answers.
pub fn lab_study(
    plan: &IdlePlan,
    idle_timeout_ns: u64,
    on_idle: OnIdle,
    timer: IdleTimer,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Study, EngineError> {
    let (a, b, link, listener) = crate::lab::link::middlebox_lab(idle_timeout_ns, on_idle, timer)?;
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let (addr, far) = if plan.udp || plan.server_first {
        let l = listener;
        let s = b
            .run(|| l.local_addr().and_then(UdpSocket::bind))
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
        let addr = listener
            .local_addr()
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
        .run(|| study(plan, addr, None, stop, progress))
        .map_err(|e| EngineError::os("entering the near namespace", e))
        .and_then(|r| r);
    done.store(true, Relaxed);
    let _ = holder.join();
    drop(link);
    result
}
