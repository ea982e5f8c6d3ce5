use super::*;
use std::io::ErrorKind;
use std::sync::Arc;

use crate::serve::rr::{frame, RrConfig, RrMode, RrServer};
use tpslab_plan::framing::Framing;
use tpslab_plan::proto::Proto;

/// One ramp at a time: thousands of users on two CPUs would measure each other.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn tcp_ramp_counts_every_step_and_littles_law_holds() {
    let _serial = serial();
    let srv = RrServer::start(RrConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        mode: RrMode::Echo,
        work_ns: 0,
        serial_ns: 2_000_000,
        serialize: false,
        threads: 0,
    })
    .unwrap();
    let plan = RampPlan {
        proto: Proto::Tcp,
        target: srv.local_addr(),
        steps: vec![1, 4],
        step: Duration::from_millis(400),
        warmup: Duration::from_millis(100),
        think: Duration::ZERO,
        timeout: Duration::from_secs(1),
        request: frame(b"hello"),
        framing: Framing::Length,
        seq_field: None,
        knee_gain: 0.2,
        builtin_server: None,
        server_pid: Some(std::process::id()),
        sample_interval: Duration::from_millis(10),
        load_threads: 0,
        connections: tpslab_plan::ramp::UserConnections::PerUser,
    };
    let r = run_ramp(&plan, &AtomicBool::new(false)).unwrap();
    assert_eq!(r.steps.len(), 2);
    for s in &r.steps {
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        // Each request sleeps 2 ms on the server: X ~= N / 2 ms; Little: N = X R.
        let n = s.tps * s.response.mean_ns / 1e9;
        assert!(
            (n / s.users as f64 - 1.0).abs() < 0.1,
            "N {n} for {} users",
            s.users
        );
        assert!(s.response.p50_ns >= 2_000_000);
        let th = s.threads.as_ref().unwrap();
        assert!(th.samples > 0);
        // The users and the server run here; on-CPU time was measured.
        assert!(th.on_cpu_ns > 0, "{th:?}");
    }
    // Four users in parallel (no lock): about four times the TPS of one.
    let gain = r.steps[1].tps / r.steps[0].tps;
    assert!(gain > 3.0, "{gain}");
}

#[test]
fn dead_server_gives_errors_not_a_hang() {
    let _serial = serial();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = l.local_addr().unwrap();
    // Accepts, reads nothing, closes each connection at once.
    let h = std::thread::spawn(move || {
        l.set_nonblocking(true).unwrap();
        let end = std::time::Instant::now() + Duration::from_millis(900);
        while std::time::Instant::now() < end {
            if let Ok((s, _)) = l.accept() {
                drop(s);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let plan = RampPlan {
        proto: Proto::Tcp,
        target,
        steps: vec![2],
        step: Duration::from_millis(500),
        warmup: Duration::ZERO,
        think: Duration::ZERO,
        timeout: Duration::from_millis(200),
        request: frame(b"x"),
        framing: Framing::Length,
        seq_field: None,
        knee_gain: 0.2,
        builtin_server: None,
        server_pid: None,
        sample_interval: Duration::from_millis(10),
        load_threads: 0,
        connections: tpslab_plan::ramp::UserConnections::PerUser,
    };
    let t = std::time::Instant::now();
    let r = run_ramp(&plan, &AtomicBool::new(false)).unwrap();
    assert!(t.elapsed() < Duration::from_secs(3));
    h.join().unwrap();
    let s = &r.steps[0];
    assert_eq!(s.completed, 0);
    let errs: u64 = s.errors.values().sum();
    assert!(errs > 0, "{:?}", s.errors);
}

fn plan(target: std::net::SocketAddr, steps: Vec<usize>) -> RampPlan {
    RampPlan {
        proto: Proto::Tcp,
        target,
        steps,
        step: Duration::from_millis(600),
        warmup: Duration::from_millis(400),
        think: Duration::ZERO,
        timeout: Duration::from_secs(1),
        request: frame(b"hello"),
        framing: Framing::Length,
        seq_field: None,
        knee_gain: 0.2,
        builtin_server: None,
        server_pid: None,
        sample_interval: Duration::from_millis(10),
        load_threads: 2,
        connections: tpslab_plan::ramp::UserConnections::PerUser,
    }
}

#[test]
fn users_follow_the_plans_clock() {
    let _serial = serial();
    let p = plan("127.0.0.1:9".parse().unwrap(), vec![1, 4, 9]);
    // Windows of 600 ms after 400 ms of warm-up, from 1000 ns on.
    let windows = (0..3u64)
        .map(|k| {
            (
                1000 + k * 1_000_000_000 + 400_000_000,
                1000 + (k + 1) * 1_000_000_000,
            )
        })
        .collect();
    let sh = Tally {
        plan: &p,
        done: AtomicBool::new(false),
        stop: &AtomicBool::new(false),
        sent: crate::client::tally::no_sends(3),
        windows,
        acc: vec![],
    };
    assert_eq!(sh.users_at(0), 0);
    assert_eq!(sh.users_at(1000), 1);
    assert_eq!(sh.users_at(1000 + 999_999_999), 1);
    // Step 2's warm-up starts where step 1's window ends.
    assert_eq!(sh.users_at(1000 + 1_000_000_000), 4);
    assert_eq!(sh.users_at(1000 + 2_500_000_000), 9);
    assert_eq!(sh.users_at(u64::MAX), 9);
}

fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn a_thousand_tcp_users_on_two_threads_all_answered() {
    let _serial = serial();
    let srv = RrServer::start(RrConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        mode: RrMode::Echo,
        work_ns: 0,
        serial_ns: 0,
        serialize: false,
        threads: 2,
    })
    .unwrap();
    let p = plan(srv.local_addr(), vec![1000]);
    let before = threads_now();
    let most = std::sync::atomic::AtomicUsize::new(0);
    let r = run_ramp_with(&p, &AtomicBool::new(false), &|_| {
        most.fetch_max(threads_now(), Relaxed);
    })
    .unwrap();
    let s = &r.steps[0];
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert!(s.completed > 1000, "{} replies", s.completed);
    // Little's law with 1000 users in the loop: N = X R.
    let n = s.tps * s.response.mean_ns / 1e9;
    assert!((n / 1000.0 - 1.0).abs() < 0.15, "N {n}");
    // Two loop threads, not a thread per user (the server's and the test harness's
    // threads come and go beside them).
    let grew = most.load(Relaxed).saturating_sub(before);
    assert!(grew < 20, "{grew} threads more during the ramp");
}

#[test]
fn think_time_is_kept_and_counted_in_littles_law() {
    let _serial = serial();
    let srv = RrServer::start(RrConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        mode: RrMode::Echo,
        work_ns: 0,
        serial_ns: 0,
        serialize: false,
        threads: 1,
    })
    .unwrap();
    let mut p = plan(srv.local_addr(), vec![20]);
    p.think = Duration::from_millis(20);
    let r = run_ramp(&p, &AtomicBool::new(false)).unwrap();
    let s = &r.steps[0];
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    // 20 users, 20 ms think, sub-ms replies: X = N / (R + Z), about 1000 per second.
    let x = 20.0 / (s.response.mean_ns / 1e9 + 0.020);
    assert!((s.tps / x - 1.0).abs() < 0.1, "TPS {} vs {x}", s.tps);
    assert!(s.tps < 1000.0 * 1.05, "think time not kept: {}", s.tps);
}

#[test]
fn a_thousand_users_of_a_server_that_never_answers_time_out() {
    let _serial = serial();
    // Accepts every connection and reads what comes, never answering; a connection
    // its user gives up on (closes) is closed here too, as a server would.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = l.local_addr().unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let h = std::thread::spawn(move || {
        use std::io::Read;
        l.set_nonblocking(true).unwrap();
        let mut held: Vec<std::net::TcpStream> = vec![];
        let mut buf = [0u8; 256];
        while !st.load(Relaxed) {
            while let Ok((c, _)) = l.accept() {
                c.set_nonblocking(true).unwrap();
                held.push(c);
            }
            held.retain_mut(|c| match c.read(&mut buf) {
                Ok(0) => false,
                Ok(_) => true,
                Err(e) => e.kind() == ErrorKind::WouldBlock,
            });
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let mut p = plan(target, vec![1000]);
    p.timeout = Duration::from_millis(200);
    p.step = Duration::from_secs(1);
    let t = std::time::Instant::now();
    let r = run_ramp(&p, &AtomicBool::new(false)).unwrap();
    stop.store(true, Relaxed);
    h.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    let s = &r.steps[0];
    assert_eq!(s.completed, 0);
    // Each user times out every 200 ms (then reconnects): about 5 per user per second.
    let timeouts = s.errors.get("timeout").copied().unwrap_or(0);
    assert!(
        (3000..=6000).contains(&timeouts),
        "{timeouts} timeouts: {:?}",
        s.errors
    );
}

#[test]
fn udp_users_match_their_replies_and_refused_ones_are_errors() {
    let _serial = serial();
    let srv = crate::serve::server::UdpServer::start(tpslab_plan::udp::ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        mode: tpslab_plan::udp::Mode::Echo,
        ..Default::default()
    })
    .unwrap();
    let mut p = plan(srv.local_addr(), vec![1, 200]);
    p.proto = Proto::Udp;
    p.request = vec![7u8; 64];
    let r = run_ramp(&p, &AtomicBool::new(false)).unwrap();
    for s in &r.steps {
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        assert!(s.completed > 100, "{}", s.completed);
    }
    drop(srv.stop());
    // Nobody on the port any more: each request is refused (ICMP), an error, no hang.
    let mut p = plan(p.target, vec![10]);
    p.proto = Proto::Udp;
    p.request = vec![7u8; 64];
    p.step = Duration::from_millis(300);
    p.warmup = Duration::from_millis(100);
    let r = run_ramp(&p, &AtomicBool::new(false)).unwrap();
    let errs: u64 = r.steps[0].errors.values().sum();
    assert_eq!(r.steps[0].completed, 0);
    assert!(errs > 0, "{:?}", r.steps[0].errors);
}

/// A UDP echo server on a thread of its own that notes when it last read a request
/// (monotonic ns): when load really stopped, seen from the server's side.
struct LastRead {
    addr: std::net::SocketAddr,
    last: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LastRead {
    fn start() -> LastRead {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let last = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (last.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !s.load(Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    l.store(mono_ns(), Relaxed);
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
        });
        LastRead {
            addr,
            last,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for LastRead {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_slow_bookkeeper_does_not_stretch_the_load() {
    let _serial = serial();
    let srv = LastRead::start();
    let mut p = plan(srv.addr, vec![2, 4]);
    p.proto = Proto::Udp;
    p.request = vec![7u8; 64];
    p.step = Duration::from_millis(400);
    p.warmup = Duration::from_millis(100);
    let t = mono_ns();
    // Each step's results take 1.5 s to hand over (a stuck live feed, a busy host): the
    // thread that keeps the books is late for every step and for the end.
    let r = run_ramp_with(&p, &AtomicBool::new(false), &|_| {
        std::thread::sleep(Duration::from_millis(1500))
    })
    .unwrap();
    // The plan starts 50 ms after the call and lasts 2 x 500 ms.
    let plan_end = t + 50_000_000 + 1_000_000_000;
    let last = srv.last.load(Relaxed);
    assert!(last > 0, "no request read");
    assert!(
        last <= plan_end + 100_000_000,
        "the server read requests {} ms after the plan's end",
        (last as i64 - plan_end as i64) / 1_000_000
    );
    assert_eq!(r.steps.len(), 2);
    for (k, s) in r.steps.iter().enumerate() {
        let end = s.load_end_s.expect("load_end_s");
        let sent = s.load_sent_s.expect("load_sent_s");
        let planned = (k + 1) as f64 * 0.5;
        assert!(
            end <= planned + 0.1 && end > planned - 0.25,
            "step {k}: {end}"
        );
        assert!(sent > 0.25 && sent <= 0.5 + 0.1, "step {k}: {sent}");
    }
    let total = r.load_sent_s.expect("load_sent_s");
    assert!(total > 0.75 && total <= 1.1, "{total}");
    assert_eq!(r.overrun, None);
}

#[test]
fn a_stop_reaches_the_users_while_the_books_are_kept() {
    let _serial = serial();
    let srv = LastRead::start();
    let mut p = plan(srv.addr, vec![2, 4]);
    p.proto = Proto::Udp;
    p.request = vec![7u8; 64];
    p.step = Duration::from_millis(400);
    p.warmup = Duration::from_millis(100);
    let stop = AtomicBool::new(false);
    let stopped_at = std::sync::atomic::AtomicU64::new(0);
    let r = run_ramp_with(&p, &stop, &|_| {
        // Stopped (SIGINT) as the first step is handed over; the books take a while.
        stop.store(true, Relaxed);
        stopped_at.store(mono_ns(), Relaxed);
        std::thread::sleep(Duration::from_millis(1000));
    })
    .unwrap();
    assert!(r.interrupted);
    assert_eq!(r.steps.len(), 1);
    let (last, at) = (srv.last.load(Relaxed), stopped_at.load(Relaxed));
    assert!(
        last <= at + 50_000_000,
        "requests read {} ms after the stop",
        (last as i64 - at as i64) / 1_000_000
    );
}

#[test]
fn a_late_sampler_skips_the_ticks_it_missed() {
    // On time: the next tick.
    assert_eq!(super::next_tick(1_000, 10, 1_005), 1_010);
    // Woken 35 ns late (at 1_045): the next tick ahead is 1_050, not 1_010, 1_020, ...
    // taken back to back.
    assert_eq!(super::next_tick(1_000, 10, 1_045), 1_050);
    // Exactly on a tick: the one after it.
    assert_eq!(super::next_tick(1_000, 10, 1_010), 1_020);
    // A zero interval cannot spin.
    assert!(super::next_tick(1_000, 0, 1_000) > 1_000);
}
