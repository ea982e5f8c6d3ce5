//! The values that name something outside the plan: a target `HOST:PORT` (resolved once,
//! before a run) and a process ID (checked to exist).

use crate::PlanError;
use std::net::{SocketAddr, ToSocketAddrs};

/// `target` (`HOST:PORT`, a name looked up by the system's resolver) as its first
/// address. Errors: one line naming the target (not a `HOST:PORT`, no address, port 0).
pub fn resolve(target: &str) -> Result<SocketAddr, PlanError> {
    let c = |m: String| PlanError::Conflict(m);
    let mut addrs = target.to_socket_addrs().map_err(|e| {
        c(format!(
            "target \"{target}\": {e}; allowed HOST:PORT, e.g. 127.0.0.1:9000"
        ))
    })?;
    let addr = addrs
        .next()
        .ok_or_else(|| c(format!("target \"{target}\" resolves to no address")))?;
    if addr.port() == 0 {
        return Err(c(format!(
            "target \"{target}\": port 0 is not a port a server listens on; allowed 1..=65535"
        )));
    }
    Ok(addr)
}

/// Checks that process `pid`, given with `flag` (`--pid`, `--watch-pid`), exists now
/// (`/proc/PID`). Errors: `FLAG PID: no such process`.
pub fn check_pid(flag: &str, pid: u32) -> Result<(), PlanError> {
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(PlanError::Conflict(format!(
            "{flag} {pid}: no such process"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_resolve_or_say_why_not() {
        assert_eq!(resolve("127.0.0.1:9").unwrap().port(), 9);
        assert_eq!(
            resolve("127.0.0.1:0").unwrap_err().to_string(),
            "target \"127.0.0.1:0\": port 0 is not a port a server listens on; allowed 1..=65535"
        );
        assert!(resolve("nocolon")
            .unwrap_err()
            .to_string()
            .starts_with("target \"nocolon\": "));
        assert!(check_pid("--pid", std::process::id()).is_ok());
        assert_eq!(
            check_pid("--watch-pid", u32::MAX).unwrap_err().to_string(),
            format!("--watch-pid {}: no such process", u32::MAX)
        );
    }
}
