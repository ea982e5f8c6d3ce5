//! Who runs beside whom (issue 55). test.sh runs the suite on several threads, and two
//! suites of two clones may run on one host at once, so every test takes one of three turns:
//! - **serial** ([`serial`]): a test whose figures another test's CPU or traffic would
//!   spoil (pps against a plan, a CPU share, a rate found by a ramp) runs with no ordinary
//!   or serial test beside it, of this suite or of another suite on this host (quiet ones
//!   may run).
//! - **ordinary** (the default): taken by the entry points of tests/common ([`super::tpslab`],
//!   [`super::run`], [`super::NetNs::new`], [`super::tmp`], [`super::need`], [`super::host_lock`], ...)
//!   on the test's own thread, held until that thread ends: beside other ordinary and quiet
//!   tests, never beside a serial one.
//! - **quiet** ([`quiet`]): a test that mostly waits (an idle timeout probed over seconds)
//!   and whose figures a busy CPU does not spoil at its resolution: beside anything.
//!
//! In this process the turns are one writer-preferring `RwLock` (a waiting serial test stops
//! new ordinary ones, so it is not starved); across processes the same modes are `flock`s
//! on `$TPSLAB_TURN_LOCK` (test.sh sets one path for every clone on this host), else
//! /tmp/tpslab-turn.lock, taken after the in-process lock. `flock` lets a shared lock in
//! while an exclusive one waits, so a gate (`flock` on the same path + `.gate`) is held
//! exclusive by whoever takes the turn lock, and by a serial test until it has it: another
//! clone's ordinary tests queue at the gate behind it instead of starving it. Order with
//! the host lock: a turn first, [`super::host_lock`] after (on an ordinary thread it takes
//! the ordinary turn itself when the thread has none; a quiet thread takes none), and never
//! `serial()` while the host lock is held.
//!
//! Only a test's own thread takes a turn: libtest names it after the test
//! (`module::test_name`); threads a test spawns run under their test's turn.

use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

static TURN: RwLock<()> = RwLock::new(());

/// What this test thread holds.
enum Held {
    Nothing,
    Ordinary(
        #[allow(dead_code)] RwLockReadGuard<'static, ()>,
        #[allow(dead_code)] File,
    ),
    Serial,
    Quiet,
}

thread_local! {
    static HELD: RefCell<Held> = const { RefCell::new(Held::Nothing) };
    static CLOCK: RefCell<Option<Clock>> = const { RefCell::new(None) };
}

/// A test thread's time from its first turn to its end, and how much of it went waiting
/// for a turn: appended as one line (`seconds_total<TAB>seconds_waiting<TAB>turn<TAB>name`)
/// to `$TPSLAB_TEST_TIMES` when the thread ends (test.sh sets it and prints the longest
/// running, total less waiting;
/// issue 55). Unset: nothing is kept.
struct Clock {
    start: Instant,
    waited: Duration,
    turn: &'static str,
    name: String,
}

impl Drop for Clock {
    fn drop(&mut self) {
        let Some(path) = std::env::var_os("TPSLAB_TEST_TIMES") else {
            return;
        };
        let line = format!(
            "{:.1}\t{:.1}\t{}\t{}\n",
            self.start.elapsed().as_secs_f64(),
            self.waited.as_secs_f64(),
            self.turn,
            self.name
        );
        // One write of a short line to a file opened for appending: whole lines even
        // with several test threads and processes.
        if let Ok(mut f) = File::options().create(true).append(true).open(path) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Starts this test thread's clock (once) and notes the turn it runs in; `waited` is
/// time spent queueing for that turn.
fn clock(turn: &'static str, waited: Duration) {
    CLOCK.with(|c| {
        let mut c = c.borrow_mut();
        let clock = c.get_or_insert_with(|| Clock {
            start: Instant::now() - waited,
            waited: Duration::ZERO,
            turn,
            name: std::thread::current().name().unwrap_or("?").to_string(),
        });
        clock.waited += waited;
        // A serial turn taken after an ordinary one names the test serial.
        if turn != "ordinary" {
            clock.turn = turn;
        }
    });
}

/// The turn lock's path, shared by every suite on this host.
pub fn lock_path() -> PathBuf {
    std::env::var_os("TPSLAB_TURN_LOCK")
        .map_or_else(|| PathBuf::from("/tmp/tpslab-turn.lock"), PathBuf::from)
}

/// The gate's path: the turn lock's + `.gate`.
pub fn gate_path() -> PathBuf {
    let mut p = lock_path().into_os_string();
    p.push(".gate");
    PathBuf::from(p)
}

/// The turn lock file, or its gate (`gate`), opened anew (a lock of its own).
fn lock_file(gate: bool) -> File {
    let path = if gate { gate_path() } else { lock_path() };
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open the turn lock {}: {e}", path.display()))
}

/// Whether this is a test's own thread (libtest names it `module::test`).
fn test_thread() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.contains("::"))
}

/// The ordinary turn for this test thread unless it holds one (any): a no-op on other
/// threads.
pub fn ordinary() {
    if !test_thread() {
        return;
    }
    HELD.with(|h| {
        if !matches!(*h.borrow(), Held::Nothing) {
            return;
        }
        let asked = Instant::now();
        let r = TURN.read().unwrap_or_else(|e| e.into_inner());
        let gate = lock_file(true);
        gate.lock().expect("flock the turn gate");
        let f = lock_file(false);
        f.lock_shared().expect("flock the turn lock shared");
        drop(gate);
        *h.borrow_mut() = Held::Ordinary(r, f);
        clock("ordinary", asked.elapsed());
    });
}

/// This test runs alone (see the module's doc): hold the guard for the test's whole
/// measurement. Gives up the thread's ordinary turn first (taken by a helper called
/// earlier). Never call it while holding [`super::host_lock`].
pub fn serial() -> Serial {
    HELD.with(|h| *h.borrow_mut() = Held::Nothing);
    let asked = Instant::now();
    let w = TURN.write().unwrap_or_else(|e| e.into_inner());
    let gate = lock_file(true);
    gate.lock().expect("flock the turn gate");
    let f = lock_file(false);
    f.lock().expect("flock the turn lock exclusive");
    drop(gate);
    if test_thread() {
        HELD.with(|h| *h.borrow_mut() = Held::Serial);
        clock("serial", asked.elapsed());
    }
    Serial { _w: w, _f: f }
}

/// The serial turn; dropping it lets other tests run again.
pub struct Serial {
    _w: RwLockWriteGuard<'static, ()>,
    _f: File,
}

impl Drop for Serial {
    fn drop(&mut self) {
        HELD.with(|h| *h.borrow_mut() = Held::Nothing);
    }
}

/// This test runs beside anything (see the module's doc): call it first. Gives up the
/// thread's ordinary turn if a helper took one already.
pub fn quiet() {
    if test_thread() {
        HELD.with(|h| *h.borrow_mut() = Held::Quiet);
        clock("quiet", Duration::ZERO);
    }
}
