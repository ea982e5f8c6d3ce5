//! The wait sampler's tests: futex calls with and without a timeout, a step's peer
//! sockets told from the load's, kept-open task files read like fresh reads, exited
//! threads folded, and threads past the kept-open ones sampled by fresh reads.

use super::*;

/// Captured on Linux 6.18 (x86_64) from a JVM's threads under load: a pool thread
/// waiting for work or for a monitor (FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME,
/// no timeout) and one in `Thread.sleep` (FUTEX_WAIT_PRIVATE with a timeout).
#[test]
fn futex_waits_with_a_timeout_are_told_from_those_without() {
    let args = |l: &str| parse_syscall_args(l).unwrap().1;
    let parked =
        args("202 0x7f229c007f7c 0x189 0x0 0x0 0x0 0xffffffff 0x7f2308c6acb0 0x7f233ecb3f16");
    let sleeping = args(
        "202 0x7f03040c8ee0 0x89 0x0 0x7f0308420d60 0x0 0xffffffff 0x7f0308420c50 0x7f030a6ddf16",
    );
    assert!(!futex_timed("futex", &parked));
    assert!(futex_timed("futex", &sleeping));
    // FUTEX_WAKE_OP's fourth argument is a count, not a timeout (and it never blocks).
    assert!(!futex_timed("futex", &[1, 5, 1, 1, 2, 0]));
    // A PI lock (FUTEX_LOCK_PI, FUTEX_LOCK_PI2 | PRIVATE) is a lock wait, timeout or not.
    assert!(!futex_timed("futex", &[1, 6, 0, 0x7ff0, 0, 0]));
    assert!(!futex_timed("futex", &[1, 13 | 128, 0, 0x7ff0, 0, 0]));
    // futex_waitv's timeout is its fourth argument, futex_wait's its fifth.
    assert!(futex_timed("futex_waitv", &[1, 2, 0, 0x7ff0, 1, 0]));
    assert!(!futex_timed("futex_wait", &[1, 2, 3, 0x82, 0, 1]));
    assert!(futex_timed("futex_wait", &[1, 2, 3, 0x82, 0x7ff0, 1]));
    assert!(!futex_timed("read", &sleeping));
    assert_eq!(socket_inode("socket:[123]"), Some(123));
    assert_eq!(socket_inode("pipe:[123]"), None);
    assert_eq!(socket_inode("anon_inode:[eventfd]"), None);
}

/// Threads of this process blocked five ways, sampled as a ramp step samples a
/// server: a read on a pipe, a read on a connection accepted from "the load" (a
/// listener on the load's port), a read on a connection to another peer, a timed
/// condition wait and a mutex held elsewhere. Only the peer's socket counts as
/// waiting for a peer; only the mutex as an untimed futex wait.
#[test]
fn a_step_tells_peer_sockets_from_the_loads_and_timed_futex_waits_from_locks() {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::sync::{Arc, Condvar, Mutex};
    let _one = THREAD_COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let load = TcpListener::bind("127.0.0.1:0").unwrap();
    let load_port = load.local_addr().unwrap().port();
    let client = TcpStream::connect(load.local_addr().unwrap()).unwrap();
    let (accepted, _) = load.accept().unwrap();
    let backend = TcpListener::bind("127.0.0.1:0").unwrap();
    let to_peer = TcpStream::connect(backend.local_addr().unwrap()).unwrap();
    let (at_backend, _) = backend.accept().unwrap();
    let (pipe_r, pipe_w) = std::io::pipe().unwrap();
    let held = Arc::new(Mutex::new(()));
    let guard = held.lock().unwrap();
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let (tx, rx) = std::sync::mpsc::channel::<(&str, u32)>();
    let tid = || -> u32 {
        let me = std::fs::read_link("/proc/thread-self").unwrap();
        me.file_name().unwrap().to_str().unwrap().parse().unwrap()
    };
    let mut hs = vec![];
    for (what, mut r) in [
        ("pipe", Box::new(pipe_r) as Box<dyn Read + Send>),
        ("load", Box::new(accepted.try_clone().unwrap())),
        ("peer", Box::new(to_peer.try_clone().unwrap())),
    ] {
        let tx = tx.clone();
        hs.push(std::thread::spawn(move || {
            tx.send((what, tid())).unwrap();
            let _ = r.read(&mut [0u8; 1]);
        }));
    }
    {
        let (tx, stop) = (tx.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            tx.send(("timed", tid())).unwrap();
            let (m, cv) = &*stop;
            let mut done = m.lock().unwrap();
            while !*done {
                done = cv
                    .wait_timeout(done, std::time::Duration::from_secs(30))
                    .unwrap()
                    .0;
            }
        }));
    }
    {
        let (tx, held) = (tx.clone(), held.clone());
        hs.push(std::thread::spawn(move || {
            tx.send(("lock", tid())).unwrap();
            drop(held.lock());
        }));
    }
    let tids: BTreeMap<&str, u32> = (0..5).map(|_| rx.recv().unwrap()).collect();
    // Until each is blocked in its call.
    let t0 = std::time::Instant::now();
    while tids.values().any(|t| {
        let st = std::fs::read_to_string(format!("/proc/self/task/{t}/stat"));
        !st.is_ok_and(|s| {
            tpslab_proc::pid::parse_task_stat(&s, "stat").is_ok_and(|s| s.state == 'S')
        })
    }) && t0.elapsed() < std::time::Duration::from_secs(5)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut sm =
        crate::observe::step_sampler::StepSampler::start(std::process::id(), Some(load_port));
    // This test process has more threads than a tick reads (the harness's, the other
    // tests'): every one read at every tick here, so each of the five has 5 samples.
    sm.per_tick = usize::MAX;
    for _ in 0..5 {
        sm.sample();
    }
    let (_, per) = sm.finish();
    // Release them all.
    drop(guard);
    *stop.0.lock().unwrap() = true;
    stop.1.notify_all();
    drop(pipe_w);
    drop(client);
    drop(at_backend);
    for h in hs {
        h.join().unwrap();
    }
    let of = |w: &str| per.iter().find(|t| t.tid == tids[w]).unwrap();
    let peer = |w: &str| -> u64 { of(w).peer_by_syscall.iter().flatten().map(|(_, n)| n).sum() };
    use tpslab_record::waits::WaitClass;
    let class = |w: &str, c: WaitClass| of(w).states.by_class.get(&c).copied().unwrap_or(0);
    assert_eq!(of("peer").states.samples, 5);
    assert_eq!(peer("peer"), 5, "{:?}", of("peer"));
    assert_eq!(peer("load"), 0, "{:?}", of("load"));
    assert_eq!(class("load", WaitClass::Network), 5, "{:?}", of("load"));
    assert_eq!(peer("pipe"), 0, "{:?}", of("pipe"));
    assert_eq!(class("pipe", WaitClass::File), 5, "{:?}", of("pipe"));
    assert_eq!(class("timed", WaitClass::Lock), 5, "{:?}", of("timed"));
    assert_eq!(of("timed").futex_timed, 5);
    assert_eq!(class("lock", WaitClass::Lock), 5, "{:?}", of("lock"));
    assert_eq!(of("lock").futex_timed, 0);
    // Each thread's span is what was sampled: from start to finish, not a plan's.
    for w in ["pipe", "load", "peer", "timed", "lock"] {
        let span = of(w).span_ns;
        assert!(span > 0 && span < 5_000_000_000, "{w}: {span}");
    }
}

#[test]
fn kept_open_task_files_read_like_a_fresh_read() {
    let dir = PathBuf::from(format!(
        "/proc/{}/task/{}",
        std::process::id(),
        // This thread's id.
        std::fs::read_link("/proc/thread-self")
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
    ));
    let mut f = TaskFiles::default();
    for name in ["stat", "wchan", "syscall"] {
        // Read twice through the same descriptor: the second read is generated anew.
        for _ in 0..2 {
            let kept = f.read(&dir, name).expect(name);
            let fresh = std::fs::read_to_string(dir.join(name)).unwrap();
            if name == "syscall" {
                // The thread reading its own syscall file is in the read: pread64
                // through the kept descriptor, read for std's fresh one. Generated
                // at each read, not cached.
                let call = |s: &str| match parse_syscall(s) {
                    Some(SyscallState::In { nr, .. }) => syscall_name(nr),
                    other => panic!("{s:?}: {other:?}"),
                };
                assert_eq!(call(&kept), "pread64");
                assert_eq!(call(&fresh), "read");
                continue;
            }
            // The running thread's own stat moves between the two reads (times,
            // counters); its pid, name and state field agree.
            let head = |s: &str| s.split(' ').take(3).collect::<Vec<_>>().join(" ");
            assert_eq!(head(&kept), head(&fresh), "{name}");
        }
    }
    assert_eq!(f.open.len(), 3);
    // A thread that exits while its file is open: None, and its descriptor closed.
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        let me = std::fs::read_link("/proc/thread-self").unwrap();
        tid_tx
            .send(me.file_name().unwrap().to_string_lossy().to_string())
            .unwrap();
        let _ = go_rx.recv();
    });
    let tid = tid_rx.recv().unwrap();
    let dir = PathBuf::from(format!("/proc/{}/task/{tid}", std::process::id()));
    let mut g = TaskFiles::default();
    assert!(g.read(&dir, "stat").is_some());
    assert_eq!(g.open.len(), 1);
    go_tx.send(()).unwrap();
    h.join().unwrap();
    // The kernel wakes the joiner before it releases the task: wait until it is gone.
    let t0 = std::time::Instant::now();
    while dir.exists() && t0.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(g.read(&dir, "stat"), None);
    assert!(g.open.is_empty());
}

/// The tests that count this process's threads run one at a time (the many-thread
/// test would push the other past the kept-open cap).
static THREAD_COUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn exited_threads_are_folded_not_kept() {
    let _one = THREAD_COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let mut w = WaitSampler::new(std::process::id(), None, 100);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let hs: Vec<_> = (0..8)
        .map(|_| {
            let stop = stop.clone();
            let tid_tx = tid_tx.clone();
            std::thread::spawn(move || {
                let me = std::fs::read_link("/proc/thread-self").unwrap();
                let tid: u32 = me.file_name().unwrap().to_str().unwrap().parse().unwrap();
                tid_tx.send(tid).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            })
        })
        .collect();
    let ours: Vec<u32> = (0..8).map(|_| tid_rx.recv().unwrap()).collect();
    w.sample();
    let with_them = w.threads.len();
    assert!(with_them >= 9, "{with_them} threads seen");
    // Each sampled thread's files are kept open between ticks (ours; a thread of another
    // test may end between the listing and the opening)...
    for t in &ours {
        assert!(w.files.contains_key(t), "{t} has no files");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    // A joined thread may stay listed in /proc/PID/task a moment longer (the kernel
    // wakes the joiner before it releases the task): wait until all eight are gone.
    let t0 = std::time::Instant::now();
    while ours.iter().any(|t| tids(std::process::id()).contains(t))
        && t0.elapsed() < std::time::Duration::from_secs(2)
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    w.sample();
    // Other tests of this binary may start threads meanwhile: at least the eight left.
    assert!(w.exited.1 >= 8, "{} folded", w.exited.1);
    // ...and closed with the thread: a long watch of a process whose threads come
    // and go holds descriptors of the live ones only.
    for t in w.files.keys() {
        assert!(w.threads.contains_key(t), "files of {t}, not a thread seen");
    }
    for t in &ours {
        assert!(
            !w.files.contains_key(t) && !w.threads.contains_key(t),
            "{t} kept"
        );
    }
    assert!(w.threads.len() + w.exited.1 >= with_them);
    let tw = w.finish();
    let exited = tw
        .threads
        .iter()
        .find(|t| t.tid == 0)
        .expect("the exited threads' row");
    assert!(exited.comm.ends_with("exited threads)"), "{}", exited.comm);
    assert!(exited.states.samples >= 8);
    // Nothing is lost: the process's samples are every row's.
    let sum: u64 = tw.threads.iter().map(|t| t.states.samples).sum();
    assert_eq!(tw.process.samples, sum);
}

#[test]
fn threads_past_the_kept_open_ones_are_sampled_by_fresh_reads() {
    let _one = THREAD_COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let n = KEEP_OPEN_THREADS + 40;
    // The threads block on a lock held here (no CPU taken from the tests beside
    // this one, some of which keep a schedule) until it is released.
    let gate = std::sync::Arc::new(std::sync::RwLock::new(()));
    let held = gate.write().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let (gate, ready) = (gate.clone(), ready_tx.clone());
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    ready.send(()).unwrap();
                    drop(gate.read());
                })
                .unwrap()
        })
        .collect();
    for _ in 0..n {
        ready_rx.recv().unwrap();
    }
    let mut w = WaitSampler::new(std::process::id(), None, 100);
    w.sample();
    w.sample();
    drop(held);
    for h in hs {
        h.join().unwrap();
    }
    // Every thread sampled at both ticks, descriptors kept for the first 256 only.
    assert!(w.threads.len() > n, "{} threads seen", w.threads.len());
    assert_eq!(w.files.len(), KEEP_OPEN_THREADS);
    let twice = w.threads.values().filter(|t| t.states.samples == 2).count();
    assert!(twice >= n, "{twice} threads sampled at both ticks");
}

/// The inode of this process's descriptor `fd` (`socket:[INODE]`).
fn inode_of(fd: i32) -> u64 {
    let l = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
    socket_inode(&l.to_string_lossy()).unwrap()
}

#[test]
fn a_thread_blocked_reading_a_socket_or_an_epoll_of_one_socket_is_seen_reading_it() {
    use std::os::fd::AsRawFd;
    let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (ia, ib) = (inode_of(a.as_raw_fd()), inode_of(b.as_raw_fd()));
    let (addr_a, addr_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let me = || -> u32 {
        let l = std::fs::read_link("/proc/thread-self").unwrap();
        l.file_name().unwrap().to_str().unwrap().parse().unwrap()
    };
    // Thread A blocked in recvfrom on socket a.
    let tx = tid_tx.clone();
    let ha = std::thread::spawn(move || {
        tx.send(('a', me())).unwrap();
        let mut buf = [0u8; 16];
        a.recv_from(&mut buf).unwrap();
    });
    // Thread B blocked in an epoll wait on an epoll watching socket b alone.
    let hb = std::thread::spawn(move || {
        let mut ep = tpslab_net::poll::Epoll::new(4).unwrap();
        ep.add(&b, 1, tpslab_net::poll::READABLE).unwrap();
        tid_tx.send(('b', me())).unwrap();
        let mut out = vec![];
        ep.wait(&mut out, 10_000).unwrap();
    });
    // Either thread may get there first.
    let mut two = [tid_rx.recv().unwrap(), tid_rx.recv().unwrap()];
    two.sort();
    let [(_, ta), (_, tb)] = two;
    let mut w = WaitSampler::new(std::process::id(), Some(vec![ta, tb]), 100);
    // Until both are blocked (the epoll thread adds its socket first): a few ticks.
    let t0 = std::time::Instant::now();
    while w.read_sockets().len() < 2 && t0.elapsed() < std::time::Duration::from_secs(5) {
        w.sample();
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let seen = w.read_sockets().clone();
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"x", addr_a).unwrap();
    tx.send_to(b"x", addr_b).unwrap();
    ha.join().unwrap();
    hb.join().unwrap();
    assert_eq!(
        seen.get(&ta).map(|m| m.keys().copied().collect::<Vec<_>>()),
        Some(vec![ia]),
        "{seen:?}"
    );
    assert_eq!(
        seen.get(&tb).map(|m| m.keys().copied().collect::<Vec<_>>()),
        Some(vec![ib]),
        "{seen:?}"
    );
}
