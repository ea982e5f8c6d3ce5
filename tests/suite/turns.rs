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

/// Whether process `pid` holds a flock on `path` (shared or exclusive; not one it waits
/// for), by /proc/locks ("ID: FLOCK ADVISORY READ|WRITE PID MAJ:MIN:INODE 0 EOF"; a
/// waiter's line has "->"): another suite on this host may hold the same lock files, so
/// "held by someone" would not say who (a second clone's serial test held the gate once
/// and the second reader here went in first).
fn held_by(path: &std::path::Path, pid: u32) -> bool {
    let id = lock_id(path);
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"FLOCK")
            && f.get(4) == Some(&pid.to_string().as_str())
            && f.get(5) == Some(&id.as_str())
    })
}

/// `path`'s file as /proc/locks names it: `MAJ:MIN:INODE`, the device's numbers in hex
/// (two digits at least) and the inode in decimal (an inode number alone may be another
/// file system's).
fn lock_id(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let (dev, ino) = std::fs::metadata(path).map_or((0, 0), |m| (m.dev(), m.ino()));
    format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev))
}

/// The processes that wait for an exclusive flock of `path` (/proc/locks' blocked
/// requests: `N: -> FLOCK ADVISORY WRITE PID DEV:INODE ...`): of this process, only a
/// serial test asks the turn lock for one, and it holds the gate while it waits; another
/// process's is another suite's serial test (a second clone's, sharing the lock files).
fn writers_waiting(path: &std::path::Path) -> Vec<u32> {
    let id = lock_id(path);
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let on_path = f.get(6) == Some(&id.as_str());
            let write_wait =
                f.get(1) == Some(&"->") && f.get(2) == Some(&"FLOCK") && f.get(4) == Some(&"WRITE");
            (write_wait && on_path).then(|| f.get(5)?.parse().ok())?
        })
        .collect()
}

/// How long a flock(1) of the turn lock may wait for it, s: serial tests of this suite
/// (or of another clone's) hold it exclusively one after another, one for 37 s beside
/// stress-ng (capacity's rate test with a retry, 2026-12-07), and flock(1) competes with
/// each waiting one at every hand-over: it once waited past the 30 s this was.
const HELD_WITHIN_S: u64 = 300;

/// Waits (up to `secs`) until process `pid` holds `path`; `who` names it.
fn wait_held(path: &std::path::Path, pid: u32, who: &str, secs: u64) {
    // The file exists before its inode is looked up.
    let _ = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path);
    let t = Instant::now();
    while !held_by(path, pid) {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{who} never took {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
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
    let path = common::turn::lock_path();
    // Another suite's ordinary test: flock(1) holding the file shared for 1.5 s, from
    // when it has it.
    let mut other = std::process::Command::new("/usr/bin/flock")
        .args(["--shared"])
        .arg(&path)
        .args(["sleep", "1.5"])
        .spawn()
        .unwrap();
    wait_held(&path, other.id(), "flock(1)", HELD_WITHIN_S);
    let t = Instant::now();
    let waited = test_thread("serial_beside_a_process", move || {
        let _s = common::serial();
        t.elapsed()
    })
    .join()
    .unwrap();
    other.wait().unwrap();
    assert!(
        waited > Duration::from_millis(1200),
        "serial() took its turn after {waited:?} while another process held the lock shared"
    );
}

/// Another process's ordinary test that comes while a serial test waits queues behind it
/// (flock alone would let it in, and a stream of them would starve the serial test).
#[test]
fn another_processs_ordinary_test_queues_behind_a_waiting_serial_one() {
    const T: &str = "turns::another_processs_ordinary_test_queues_behind_a_waiting_serial_one";
    common::quiet();
    if !common::need(T, "/usr/bin/flock") {
        return;
    }
    // The serial thread is known in flock(2) by its system call (/proc/PID/task/TID/syscall:
    // a kernel with the arch's syscall tracing, a known call number).
    let readable = std::fs::read_to_string("/proc/thread-self/syscall").is_ok();
    if FLOCK_NR.is_none() || !readable {
        common::skip(
            T,
            "no flock(2) number for this architecture, or /proc/PID/task/TID/syscall unreadable",
        );
        return;
    }
    // Another serial test of this suite may come to the turn lock while the first reader
    // holds it and wait there (holding this process's serial turn, so the test's own
    // serial thread cannot reach the lock): that attempt is let go and tried again.
    let Some(got) = common::retry(T, 5, queue_behind_a_waiting_serial_test) else {
        return;
    };
    assert_eq!(
        got, "serial\nreader\n",
        "the second reader got in before the waiting serial test"
    );
}

/// One attempt: a first reader (another process) holds the turn lock shared; a serial test
/// of this process comes and waits at it; a second reader comes through the gate as
/// another process's ordinary test does; the first reader leaves. Ok: the order in which
/// the serial test and the second reader got the lock, as lines of one file. Err: another
/// serial test of this suite was the one waiting at the lock.
fn queue_behind_a_waiting_serial_test() -> Result<String, String> {
    let path = common::turn::lock_path();
    let gate = common::turn::gate_path();
    // The first reader: held until its stdin closes, so the serial test below waits at
    // the turn lock, holding the gate, however long it first waits for this suite's other
    // tests.
    let mut first = std::process::Command::new("/usr/bin/flock")
        .arg("--shared")
        .arg(&path)
        .args(["sh", "-c", "read x"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_held(&path, first.id(), "flock(1)", HELD_WITHIN_S);
    // Who got in first, by the order of their lines appended to one file (O_APPEND):
    // no clock read in two processes (wall-clock times put the second reader 0.25 ms
    // before the serial test once beside stress-ng, which the locks rule out unless the
    // clock moved back).
    let order = common::tmp("turn-order.txt");
    let _ = std::fs::remove_file(&order);
    let (tid_tx, tid_rx) = mpsc::channel();
    let serial = test_thread("serial_waiting", {
        let order = order.clone();
        move || {
            tid_tx.send(this_tid()).unwrap();
            let _s = common::serial();
            let mut f = std::fs::File::options()
                .create(true)
                .append(true)
                .open(&order)
                .unwrap();
            std::io::Write::write_all(&mut f, b"serial\n").unwrap();
        }
    });
    let tid = tid_rx.recv().unwrap();
    // Once the serial test waits at the turn lock holding the gate, a second reader goes
    // through the gate as an ordinary test does. (The serial turn waits first for this
    // suite's ordinary tests running beside.) Known by its own thread blocked in flock(2)
    // on the turn lock, not by the gate held by this process (an ordinary test of this
    // suite holds the gate for a moment as it takes its turn), nor by a blocked exclusive
    // request of this process alone: another serial test of this suite may be the one
    // waiting there, and when it ended the reader, already past the gate, got in before
    // this one (both seen beside stress-ng).
    let t = Instant::now();
    let mut other_waits = 0;
    loop {
        // The kernel's queue first: the thread cannot leave flock while the first reader
        // holds the lock, so a blocked request seen before the thread is not in flock is
        // another thread's.
        let writers = writers_waiting(&path);
        let me = std::process::id();
        if let Some(pid) = writers.iter().find(|&&p| p != me) {
            // Another suite's serial test waits for the first reader, holding the gate
            // this serial thread needs: held on, the two would wait for each other (two
            // clones' suites at once, 2026-12-07, until 300 s ran out).
            drop(first.stdin.take());
            first.wait().unwrap();
            serial.join().unwrap();
            return Err(format!(
                "another suite's serial test (PID {pid}) waited at the turn lock for the first reader"
            ));
        }
        let queued = writers.contains(&me);
        let ours = in_flock_on(&tid, &path);
        if queued && ours {
            break;
        }
        other_waits = if queued { other_waits + 1 } else { 0 };
        if other_waits >= 10 {
            // Another serial test of this suite waits for the first reader: let it in,
            // then this serial thread after it.
            drop(first.stdin.take());
            first.wait().unwrap();
            serial.join().unwrap();
            return Err(
                "another serial test of this suite waited at the turn lock before this one"
                    .to_string(),
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "serial() never waited for {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        held_by(&gate, std::process::id()),
        "serial() waits without the gate"
    );
    let script = format!(
        "flock {} true && flock --shared {} sh -c 'echo reader >> \"$0\"' {}",
        shell_words(&gate),
        shell_words(&path),
        shell_words(&order)
    );
    let second = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(first.stdin.take());
    first.wait().unwrap();
    let second = second.wait_with_output().unwrap();
    assert!(second.status.success(), "{second:?}");
    serial.join().unwrap();
    Ok(std::fs::read_to_string(&order).unwrap())
}

/// `p` quoted for sh (the lock paths are test.sh's or /tmp's: no quote inside).
fn shell_words(p: &std::path::Path) -> String {
    let s = p.to_string_lossy();
    assert!(!s.contains('\''), "{s}");
    format!("'{s}'")
}

/// This thread's id, from /proc/thread-self ("PID/task/TID").
fn this_tid() -> String {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    let tid = link.file_name().expect("PID/task/TID").to_string_lossy();
    tid.into_owned()
}

/// flock(2)'s system call number, as /proc/PID/task/TID/syscall gives it (None: not known
/// here; the test that needs it is skipped).
#[cfg(target_arch = "x86_64")]
const FLOCK_NR: Option<u64> = Some(73);
#[cfg(target_arch = "aarch64")]
const FLOCK_NR: Option<u64> = Some(32);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const FLOCK_NR: Option<u64> = None;

/// Whether thread `tid` of this process is blocked in flock(2) on `path`, by
/// /proc/self/task/TID/syscall ("NR FD ..." in hex after the number; "running" or
/// another call otherwise) and the fd's link in /proc/self/fd.
fn in_flock_on(tid: &str, path: &std::path::Path) -> bool {
    let Ok(line) = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")) else {
        return false;
    };
    let mut f = line.split_whitespace();
    let (Some(nr), Some(fd)) = (f.next(), f.next()) else {
        return false;
    };
    if FLOCK_NR.is_none() || nr.parse::<u64>().ok() != FLOCK_NR {
        return false;
    }
    let Ok(fd) = u64::from_str_radix(fd.trim_start_matches("0x"), 16) else {
        return false;
    };
    let (Ok(target), Ok(want)) = (
        std::fs::read_link(format!("/proc/self/fd/{fd}")),
        std::fs::canonicalize(path),
    ) else {
        return false;
    };
    target == want
}

/// The machine signal retries rely on (`common::Neighbour`): a CPU hog that is no child of
/// the test (stress-ng left to init by a shell that exits) is another process's CPU time;
/// a busy child the test waited for is the test's own. Each against a baseline second; a
/// host whose other processes already take half a CPU spoils it (tried 3 times).
#[test]
fn a_neighbours_cpu_time_is_seen_and_the_tests_own_is_not() {
    const T: &str = "turns::a_neighbours_cpu_time_is_seen_and_the_tests_own_is_not";
    let _g = common::serial();
    if !common::need(T, "/usr/bin/stress-ng") {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let one_cpu = 100.0 / cpus;
    let Some((base, own, other)) = common::retry(T, 3, || {
        let b = common::Neighbour::start(&[]);
        std::thread::sleep(Duration::from_secs(1));
        let base = b.share_pct();
        if base > 0.5 * one_cpu {
            return Err(format!(
                "other processes already take {base:.0} % of all CPUs"
            ));
        }
        // Own: one CPU busy for 1 s in a child waited for.
        let own = common::Neighbour::start(&[]);
        let ok = std::process::Command::new("timeout")
            .args(["1", "sh", "-c", "while :; do :; done"])
            .status()
            .unwrap();
        assert!(!ok.success(), "timeout ends the loop");
        let own = own.share_pct();
        // A neighbour: one CPU busy for 1 s, not this process's child.
        let other = common::Neighbour::start(&[]);
        let ok = std::process::Command::new("sh")
            .args([
                "-c",
                "setsid stress-ng --cpu 1 --timeout 1s --quiet </dev/null >/dev/null 2>&1 &",
            ])
            .status()
            .unwrap();
        assert!(ok.success());
        std::thread::sleep(Duration::from_millis(1200));
        Ok((base, own, other.share_pct()))
    }) else {
        return;
    };
    let says = format!("baseline {base:.0} %, own child {own:.0} %, neighbour {other:.0} % of all CPUs (one CPU is {one_cpu:.0} %)");
    assert!(own - base < 0.5 * one_cpu, "{says}");
    assert!(other - base > 0.5 * one_cpu, "{says}");
}
