//! The suite's turns (tests/common/turn.rs): a serial test waits for every ordinary one,
//! in this process and in another (a second clone's suite holding the lock file shared),
//! and a quiet one runs beside it.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// A thread named as libtest names a test's thread, so the turns treat it as one.
fn test_thread<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(format!("turns::{name}"))
        .spawn(f)
        .unwrap()
}

#[test]
fn a_serial_test_waits_for_ordinary_ones_and_a_quiet_one_does_not_wait_for_it() {
    common::quiet();
    // An ordinary test in this process, holding its turn until told to end.
    let (taken_tx, taken) = mpsc::channel();
    let (end_tx, end) = mpsc::channel::<()>();
    let ordinary = test_thread("ordinary", move || {
        let _ = common::tmp("ordinary-turn");
        taken_tx.send(()).unwrap();
        end.recv().unwrap();
    });
    taken.recv().unwrap();
    let serial_in = Arc::new(AtomicBool::new(false));
    let (held_tx, held) = mpsc::channel();
    let (done_tx, done) = mpsc::channel::<()>();
    let flag = serial_in.clone();
    let serial = test_thread("serial", move || {
        let _s = common::serial();
        flag.store(true, Ordering::SeqCst);
        held_tx.send(()).unwrap();
        done.recv().unwrap();
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !serial_in.load(Ordering::SeqCst),
        "serial() ran beside an ordinary test"
    );
    end_tx.send(()).unwrap();
    ordinary.join().unwrap();
    // Other tests of this suite may hold ordinary turns too: serial waits for them.
    held.recv_timeout(Duration::from_secs(300))
        .expect("serial() given its turn once the ordinary tests ended");
    // A quiet test runs beside the serial one.
    let quiet = test_thread("quiet", || {
        common::quiet();
        let _ = common::tmp("quiet-turn");
    });
    let t = Instant::now();
    quiet.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    done_tx.send(()).unwrap();
    serial.join().unwrap();
}

#[test]
fn a_serial_test_waits_for_another_processs_shared_turn() {
    common::quiet();
    if !common::need(
        "a_serial_test_waits_for_another_processs_shared_turn",
        "/usr/bin/flock",
    ) {
        return;
    }
    let path = std::env::var("TPSLAB_TURN_LOCK").unwrap_or("/tmp/tpslab-turn.lock".into());
    // Another suite's ordinary test: flock(1) holding the file shared for 1.5 s.
    let mut other = std::process::Command::new("/usr/bin/flock")
        .args(["--shared", &path, "sleep", "1.5"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let waited = test_thread("serial_beside_a_process", move || {
        let _s = common::serial();
        t.elapsed()
    })
    .join()
    .unwrap();
    other.wait().unwrap();
    assert!(
        waited > Duration::from_millis(900),
        "serial() took its turn after {waited:?} while another process held the lock shared"
    );
}
