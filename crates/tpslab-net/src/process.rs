//! Process-level system calls the binary needs: the SIGPIPE disposition at start-up and
//! terminating a child by PID. Kept here so `unsafe` stays in this crate.

use std::process::Child;

/// Restores the default action of SIGPIPE (terminate quietly), as other command-line
/// tools have it: `tpslab ... | head` then ends without a panic in `println!`. Call at
/// start-up, before any thread exists.
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL touches no memory of ours.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Sends SIGTERM to `child`, a process this program started and has not reaped yet (by
/// its PID, never by name; after `wait` the PID may belong to another process).
/// Errors: the process is gone (ESRCH) or not ours to signal (EPERM).
pub fn terminate(child: &Child) -> std::io::Result<()> {
    let pid =
        i32::try_from(child.id()).map_err(|_| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: kill() on a PID we own; it reads no memory of ours.
    if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminate_ends_a_child_we_started() {
        let mut c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        terminate(&c).unwrap();
        let st = c.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(libc::SIGTERM));
    }
}
