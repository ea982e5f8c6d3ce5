//! The terminal a live view reads its keys from, and whether it was hung up (poll(2) on
//! its descriptor: a hung-up terminal is never read).

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

/// Whether `fd` is a terminal that was hung up (poll(2) says HUP or ERR at once).
pub fn gone(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::OUT)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut fds, Some(&zero)).is_ok()
        && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
}

/// The terminal the view reads keys from, as crossterm picks it: standard input when it
/// is a terminal, else `/dev/tty`. The view waits on it and reads it itself
/// ([`KeysTty::read_pending`]), never through crossterm's event reader: that one retries a
/// hung-up terminal's end of file or EIO in a loop inside `event::poll`, which then never
/// returns (the view's thread spinning, the run never ending), and it reads at most 1 KiB
/// per readiness edge, so after a long paste a `q` waited for the next key.
pub enum KeysTty {
    /// Standard input.
    Stdin,
    /// `/dev/tty`.
    DevTty(std::fs::File),
}

impl KeysTty {
    /// Errors: standard input is not a terminal and `/dev/tty` cannot be opened.
    pub fn open() -> std::io::Result<KeysTty> {
        Ok(if std::io::stdin().is_terminal() {
            KeysTty::Stdin
        } else {
            KeysTty::DevTty(std::fs::File::open("/dev/tty")?)
        })
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            KeysTty::Stdin => rustix::stdio::stdin(),
            KeysTty::DevTty(f) => f.as_fd(),
        }
    }

    /// Polls the terminal for `timeout` at most, `IN` asked; returns the events seen
    /// (empty: nothing came). EINTR (a signal) counts as nothing. Errors: poll(2) fails.
    fn poll(&self, timeout: Duration) -> std::io::Result<rustix::event::PollFlags> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::from_borrowed_fd(self.fd(), PollFlags::IN)];
        let t = Timespec::try_from(timeout).map_err(std::io::Error::other)?;
        match rustix::event::poll(&mut fds, Some(&t)) {
            Ok(_) => Ok(fds[0].revents()),
            Err(rustix::io::Errno::INTR) => Ok(PollFlags::empty()),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits up to `timeout` for the terminal to be readable (a key, or a hangup).
    pub fn wait(&self, timeout: Duration) -> std::io::Result<bool> {
        Ok(!self.poll(timeout)?.is_empty())
    }

    /// Reads what the terminal has pending into `buf` (appended), at most `max` bytes a
    /// call: reads while poll(2) says it is readable (so a read never blocks, and standard
    /// input keeps its blocking mode, shared with the shell). Returns false when the
    /// terminal was hung up (poll says HUP or ERR, a read gives end of file or EIO): it is
    /// not read again. Errors: poll(2) or read(2) fails otherwise.
    pub fn read_pending(&self, buf: &mut Vec<u8>, max: usize) -> std::io::Result<bool> {
        use rustix::event::PollFlags;
        let mut chunk = [0u8; 4096];
        while buf.len() < max {
            let ev = self.poll(Duration::ZERO)?;
            if ev.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
                return Ok(false);
            }
            if !ev.contains(PollFlags::IN) {
                break;
            }
            let want = chunk.len().min(max - buf.len());
            match rustix::io::read(self.fd(), &mut chunk[..want]) {
                Ok(0) | Err(rustix::io::Errno::IO) => return Ok(false),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }

    /// Whether the terminal was hung up (or its descriptor is no longer valid).
    pub fn hung_up(&self) -> std::io::Result<bool> {
        use rustix::event::PollFlags;
        let ev = self.poll(Duration::ZERO)?;
        Ok(ev.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL))
    }
}

/// Points a standard descriptor (`dup2`: stdout's or stderr's) at /dev/null, as nohup
/// does, best effort.
pub fn to_dev_null(dup2: fn(&std::fs::File) -> rustix::io::Result<()>) {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = dup2(&null);
    }
}

/// Standard error while a view holds the terminal: (the real one, duplicated; the file
/// that takes its place), so that no line (the signal thread's "stopping", a warning, a
/// `--server-cmd` server's own) lands on the view's screen.
static STDERR: Mutex<Option<(std::os::fd::OwnedFd, std::fs::File)>> = Mutex::new(None);

/// Points standard error at an unnamed file until [`give_back_stderr`]. Errors: the
/// descriptor cannot be duplicated or the file made.
pub fn hold_stderr() -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let real = rustix::io::dup(std::io::stderr().as_fd())?;
    let file = tempfile::tempfile()?;
    rustix::stdio::dup2_stderr(&file)?;
    *STDERR.lock().unwrap_or_else(|e| e.into_inner()) = Some((real, file));
    Ok(())
}

/// Gives standard error back (when held) and writes there what was written to it
/// meanwhile; `hung_up`: the view found its terminal hung up.
pub fn give_back_stderr(hung_up: bool) {
    use std::io::Seek;
    let held = STDERR.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some((real, mut file)) = held else {
        return;
    };
    use std::os::fd::AsFd;
    if hung_up && gone(real.as_fd()) {
        // Standard error was the terminal that hung up: a line written there would fail
        // (and eprintln! panic); what was held is lost with the terminal.
        to_dev_null(|f| rustix::stdio::dup2_stderr(f));
        return;
    }
    if rustix::stdio::dup2_stderr(&real).is_err() {
        return;
    }
    // Copied in pieces: what a chatty --server-cmd server wrote is not held in memory.
    if file.rewind().is_ok() {
        let _ = std::io::copy(&mut file, &mut std::io::stderr().lock());
    }
}
