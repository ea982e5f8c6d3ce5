//! Tests of the parent module: the working/idle split and the thread rules on synthetic
//! threads and on real /proc/PID/task/TID/stat fixtures of redis-server (real ramp
//! records: `ramp_threads_real_tests.rs`).

use super::*;
use crate::waits::FdKind;

const SECOND: u64 = 1_000_000_000;

/// A thread with `samples` samples of one kind and `cpu_ns` of CPU time (schedstat too).
fn thread(tid: u32, comm: &str, cpu_ns: u64, sample: &[(char, Option<&str>, u64)]) -> StepThread {
    let mut states = ThreadStates::default();
    for &(state, call, n) in sample {
        for _ in 0..n {
            let fd = if call == Some("read") {
                FdKind::Socket
            } else {
                FdKind::Unknown
            };
            crate::waits::add_sample(&mut states, state, None, call, fd);
        }
    }
    states.on_cpu_ns = cpu_ns;
    StepThread {
        tid,
        comm: comm.into(),
        cpu_ns: cpu_ns / 10_000_000 * 10_000_000,
        states,
        span_ns: 0,
        futex_timed: 0,
        peer_by_syscall: None,
        pid: 0,
        born: false,
    }
}

fn step(users: usize, per_thread: Vec<StepThread>) -> StepResult {
    StepResult {
        users,
        measured_s: 1.0,
        completed: 100,
        tps: 100.0,
        response: Default::default(),
        errors: Default::default(),
        server_cpu_cores: None,
        threads: None,
        tcp: None,
        accept_queue_max: None,
        accept_queue_mean: None,
        listener_drops: None,
        drop_reasons: None,
        load_sent_s: None,
        load_end_s: None,
        per_thread,
        tree_sampling: None,
        http2: None,
        reply_gaps: None,
        reconnect_backoffs: 0,
    }
}

fn helpers() -> Vec<StepThread> {
    [
        "bio_close_file",
        "bio_aof_fsync",
        "bio_lazy_free",
        "jemalloc_bg_thd",
    ]
    .iter()
    .enumerate()
    .map(|(i, c)| thread(10 + i as u32, c, 0, &[('S', Some("futex"), 100)]))
    .collect()
}

#[test]
fn idle_is_no_cpu_and_parked_in_one_wait_the_whole_step() {
    let w = SECOND;
    // Parked in a futex, no CPU: idle.
    assert!(is_idle(
        &thread(1, "bio", 0, &[('S', Some("futex"), 100)]),
        w
    ));
    // A timer thread waking briefly (1 ms of CPU in 1 s), always seen in its wait: idle.
    assert!(is_idle(
        &thread(1, "timer", 1_000_000, &[('S', Some("futex"), 100)]),
        w
    ));
    // CPU time that grew materially: working, whatever the samples saw.
    assert!(!is_idle(
        &thread(1, "w", 20_000_000, &[('S', Some("futex"), 100)]),
        w
    ));
    // Seen running once: working.
    assert!(!is_idle(
        &thread(1, "w", 0, &[('S', Some("futex"), 99), ('R', None, 1)]),
        w
    ));
    // In two waits (a lock, then the work's sleep): not parked, working.
    assert!(!is_idle(
        &thread(
            1,
            "w",
            0,
            &[('S', Some("futex"), 90), ('S', Some("nanosleep"), 10)]
        ),
        w
    ));
    // In a futex all the step, but some samples with a timeout and the rest without
    // (a pool thread sleeping in a lock, then waiting for it, with the JVM's CPU time
    // too little to see): two waits, working.
    let mut t = thread(1, "pool-1-thread-6", 0, &[('S', Some("futex"), 200)]);
    t.futex_timed = 14;
    assert!(!is_idle(&t, w));
    t.futex_timed = 200;
    assert!(is_idle(&t, w));
    // Without schedstat, utime+stime decides: one tick of 10 ms is 1 % of a second.
    let mut t = thread(1, "w", 0, &[('S', Some("futex"), 100)]);
    t.cpu_ns = 10_000_000;
    assert!(!is_idle(&t, w));
}

#[test]
fn an_event_loop_at_100_percent_beside_idle_helpers_is_saturated_not_a_lock() {
    // redis at 64 users (as the real fixture's last step): the main thread running or
    // runnable at every sample, on a CPU 60 % and waiting for one 39 %; its 4 helpers
    // parked in a futex.
    let mut main = thread(1, "redis-server", 600_000_000, &[('R', None, 100)]);
    main.states.runqueue_ns = 390_000_000;
    let mut threads = vec![main];
    threads.extend(helpers());
    let f = facts(&step(64, threads)).unwrap();
    assert_eq!(f.working, vec![("redis-server".to_string(), 1)]);
    assert_eq!(f.idle.len(), 4);
    assert_eq!(f.futex_threads, 0);
    assert_eq!(judge(&f), Some(ThreadCase::Saturated));
    let b = f.busiest.as_ref().unwrap();
    // Every sample saw it running or runnable: busy all the step, whatever schedstat
    // missed (a vCPU the hypervisor held).
    assert!((b.2 - 1.0).abs() < 1e-9, "{b:?}");
    assert_eq!(
        evidence_line(&f),
        "working server threads at 64 users: 1 of 5; the busiest, redis-server (tid 1), running or runnable 100 % of the step (on a CPU 60 %, waiting for a CPU 39 % by schedstat); 4 other threads idle (bio_close_file, bio_aof_fsync, bio_lazy_free, jemalloc_bg_thd)"
    );
    // All five counted as before, the helpers' futex samples were 80 % of the process's:
    // what the old verdict read as "waiting on a lock".
    let mut all = ThreadStates::default();
    for t in &step(64, helpers()).per_thread {
        all.merge(&t.states);
    }
    all.merge(&f.states);
    assert_eq!(all.by_class[&WaitClass::Lock] * 100 / all.samples, 80);
    // Many threads each busy: the CPU's saturation (judged on the process), not one thread.
    let busy: Vec<StepThread> = (0..4)
        .map(|i| thread(i, "worker", 950_000_000, &[('R', None, 100)]))
        .collect();
    assert_eq!(judge(&facts(&step(64, busy)).unwrap()), None);
}

/// A thread busy all the step but on a CPU less than half of it is kept off the CPUs by
/// other work: contention, not the server's own saturation (the old rule called both
/// "saturated").
#[test]
fn a_thread_runnable_but_mostly_waiting_for_a_cpu_is_contended_not_saturated() {
    // On a CPU 49 %, in the run queue 50 %: half its busy time and more was waiting.
    let mut main = thread(1, "redis-server", 490_000_000, &[('R', None, 100)]);
    main.states.runqueue_ns = 500_000_000;
    let mut threads = vec![main];
    threads.extend(helpers());
    let f = facts(&step(64, threads)).unwrap();
    assert_eq!(judge(&f), Some(ThreadCase::Contended));
    // A real step on a contended VM: schedstat saw 14 % on a CPU and 26 % in the run
    // queue, yet 86 of 100 samples saw the thread running or runnable (its vCPU held by
    // the hypervisor the rest): busy by its samples, but its own work took 14 %.
    let mut stolen = thread(
        1,
        "redis-server",
        137_512_809,
        &[('R', None, 86), ('S', Some("epoll_wait"), 14)],
    );
    stolen.states.runqueue_ns = 258_128_431;
    let mut threads = vec![stolen];
    threads.extend(helpers());
    let f = facts(&step(64, threads.clone())).unwrap();
    assert_eq!(judge(&f), Some(ThreadCase::Contended));
    // The ramp's verdict says so, with the run queue and the hypervisor's share apart:
    // the real redis ramp with this last step.
    let mut rec = super::real_tests::real(include_str!(
        "../../tpslab-report/tests/fixtures/ramp_redis.json"
    ));
    rec.steps.last_mut().unwrap().per_thread = threads;
    let a = crate::ramp::analyse(&rec, 2);
    assert!(
        a.verdict.starts_with(
            "VERDICT: CPU contention: one thread runnable ~100 % of the step but mostly waiting for a CPU"
        ),
        "{}",
        a.verdict
    );
    assert!(
        a.verdict.contains("on a CPU only 14 % (waiting for a CPU 26 % by schedstat's run-queue delay, and 46 % runnable on a vCPU the hypervisor held)"),
        "{}",
        a.verdict
    );
    // On a CPU 60 %, waiting 39 %: its own work filled most of it: saturated.
    let mut main = thread(1, "redis-server", 600_000_000, &[('R', None, 100)]);
    main.states.runqueue_ns = 390_000_000;
    assert_eq!(
        judge(&facts(&step(64, vec![main])).unwrap()),
        Some(ThreadCase::Saturated)
    );
}

/// Shares are of the time the sampler covered: a step planned at 1 s whose sampler read
/// the thread over 0.5 s (a late start on a busy host) has its CPU time over 0.5 s.
#[test]
fn shares_are_of_the_sampled_span_not_the_planned_window() {
    let mut t = thread(
        1,
        "loop",
        450_000_000,
        &[('R', None, 20), ('S', Some("epoll_wait"), 30)],
    );
    t.states.runqueue_ns = 10_000_000;
    // Of the planned second: 46 %, not busy enough for "saturated"...
    assert!((busy_share(&t, SECOND) - 0.46).abs() < 1e-9);
    assert_eq!(judge(&facts(&step(8, vec![t.clone()])).unwrap()), None);
    // ...of the half second sampled: 92 %.
    t.span_ns = SECOND / 2;
    assert!((busy_share(&t, SECOND) - 0.92).abs() < 1e-9);
    let f = facts(&step(8, vec![t.clone()])).unwrap();
    let b = f.busiest.clone().unwrap();
    assert!(
        (b.3 - 0.9).abs() < 1e-9 && (b.4 - 0.02).abs() < 1e-9,
        "{b:?}"
    );
    assert_eq!(judge(&f), Some(ThreadCase::Saturated));
    // Idle is judged on the span too: 4 ms of CPU is 0.4 % of a second, 0.8 % of half.
    let mut timer = thread(2, "timer", 4_000_000, &[('S', Some("futex"), 50)]);
    assert!(is_idle(&timer, SECOND));
    timer.span_ns = SECOND / 2;
    assert!(!is_idle(&timer, SECOND));
}

/// HotSpot's `Thread.sleep` (the S3 miniature's stand-in for a database round trip)
/// parks in a futex with a timeout; a lock's waiters park without one. Counting every
/// futex sample as a lock made a pool of threads sleeping side by side "serialised".
#[test]
fn timed_futex_waits_are_sleeps_not_a_lock() {
    let pool = |timed: u64| -> Vec<StepThread> {
        (0..8)
            .map(|i| {
                let mut t = thread(
                    i,
                    "pool",
                    3_000_000,
                    &[('S', Some("futex"), 95), ('R', None, 5)],
                );
                t.futex_timed = timed;
                t
            })
            .collect()
    };
    // No lock: 8 pool threads each sleeping (timed futex) 80 % of the step, waiting for
    // the next request (untimed) 15 %.
    let f = facts(&step(8, pool(80))).unwrap();
    assert_eq!(f.futex_threads, 0, "{f:?}");
    assert!((f.lock_share - 0.15).abs() < 1e-9);
    assert_eq!(judge(&f), None);
    // The same threads read as before (no timeouts known): all "waiting on a lock".
    assert_eq!(
        judge(&facts(&step(8, pool(0))).unwrap()),
        Some(ThreadCase::Serialised)
    );
    // One lock: one thread sleeps in it (timed), seven wait for it (untimed), turn by
    // turn: each thread 1/8 of the step timed, 7/8 untimed.
    let f = facts(&step(8, pool(12))).unwrap();
    assert_eq!(f.futex_threads, 8);
    assert_eq!(judge(&f), Some(ThreadCase::Serialised));
}

/// A pool of 8 threads serving 2 users: 6 threads' worth of waiting for work on a
/// condition (an untimed futex, like a lock's) is spare capacity, not a lock.
#[test]
fn a_pool_waiting_for_work_is_spare_capacity_not_a_lock() {
    let pool = |users: usize, untimed: u64| {
        let threads: Vec<StepThread> = (0..8)
            .map(|i| {
                let mut t = thread(
                    i,
                    "pool",
                    3_000_000,
                    &[('S', Some("futex"), 98), ('R', None, 2)],
                );
                t.futex_timed = 98 - untimed;
                t
            })
            .collect();
        facts(&step(users, threads)).unwrap()
    };
    // 2 users, no lock: each thread sleeps in the work 1/4 of the step (timed), waits
    // for the next request 3/4 (untimed): 6 threads' worth of waiting, 6 spare threads.
    let f = pool(2, 74);
    assert_eq!((f.futex_threads, f.working.len()), (8, 8));
    assert!(f.lock_share >= 0.5 && f.lock_excess < 1.0, "{f:?}");
    assert_eq!(judge(&f), None);
    // 2 users, one lock: one sleeps in it, one waits for it, six wait for work: one
    // thread's worth of waiting beyond the spare ones (7/8 of each thread untimed, less
    // the moments on a CPU).
    let f = pool(2, 86);
    assert!(f.lock_excess >= LOCK_EXCESS, "{f:?}");
    assert_eq!(judge(&f), Some(ThreadCase::Serialised));
}

/// Blocked reads and writes on a pipe, an eventfd or the load's own connections are not
/// waiting for a peer: only sockets to other peers are (as the sampler tells them apart).
#[test]
fn peer_wait_counts_only_sockets_to_other_peers() {
    let pool = |peer: Option<u64>| {
        let threads: Vec<StepThread> = (0..8)
            .map(|i| {
                let mut t = thread(
                    i,
                    "pool",
                    3_000_000,
                    &[
                        ('S', Some("read"), 90),
                        ('S', Some("futex"), 7),
                        ('R', None, 3),
                    ],
                );
                t.peer_by_syscall = peer.map(|n| [("read".to_string(), n)].into());
                t
            })
            .collect();
        facts(&step(8, threads)).unwrap()
    };
    // A thread per connection blocked reading the next request from the load: its reads
    // are on the load's sockets, none to a peer.
    let f = pool(Some(0));
    assert_eq!(f.peer_share, 0.0);
    assert_eq!(judge(&f), None);
    // Reading a backend's replies: a peer.
    let f = pool(Some(90));
    assert_eq!(judge(&f), Some(ThreadCase::PeerWait));
    assert_eq!(f.peer_call.as_deref(), Some("read"));
    // An older record (sockets not told apart): its socket reads stand in, as before.
    assert_eq!(judge(&pool(None)), Some(ThreadCase::PeerWait));
}

#[test]
fn pool_threads_waiting_on_one_futex_are_serialised_and_sockets_a_peer() {
    // 8 pool threads: one sleeps in the lock, seven wait for it; a JIT thread parked.
    let mut threads: Vec<StepThread> = (0..8)
        .map(|i| {
            thread(
                i,
                "pool",
                3_000_000,
                &[
                    ('S', Some("futex"), 85),
                    ('S', Some("nanosleep"), 12),
                    ('R', None, 3),
                ],
            )
        })
        .collect();
    threads.push(thread(
        99,
        "C2 CompilerThre",
        0,
        &[('S', Some("futex"), 100)],
    ));
    let f = facts(&step(8, threads)).unwrap();
    assert_eq!((f.working.len(), f.idle.len(), f.futex_threads), (8, 1, 8));
    assert_eq!(judge(&f), Some(ThreadCase::Serialised));
    // The same pool blocked reading from a backend's socket: waiting for a peer.
    let peer: Vec<StepThread> = (0..8)
        .map(|i| {
            thread(
                i,
                "pool",
                3_000_000,
                &[
                    ('S', Some("read"), 90),
                    ('S', Some("futex"), 7),
                    ('R', None, 3),
                ],
            )
        })
        .collect();
    let f = facts(&step(8, peer)).unwrap();
    assert_eq!(judge(&f), Some(ThreadCase::PeerWait));
    assert_eq!(f.peer_call.as_deref(), Some("read"));
    // An event loop waiting for its clients in epoll is not waiting for a peer.
    let lp = vec![thread(
        1,
        "loop",
        300_000_000,
        &[('S', Some("epoll_wait"), 70), ('R', None, 30)],
    )];
    assert_eq!(judge(&facts(&step(8, lp)).unwrap()), None);
    // No per-thread samples (an old record): no facts, the old judgement stands.
    assert_eq!(facts(&step(8, vec![])), None);
}

/// Real /proc/PID/task/TID/stat files of redis-server 7 on Linux 6.18, read before and
/// after one second of 16 users sending PING: the main thread's utime+stime grew by 36
/// ticks, bio_close_file's not at all.
#[test]
fn real_task_stat_fixtures_split_redis_main_thread_from_its_helpers() {
    let fx = |n: &str| {
        let p = format!(
            "{}/../tpslab-proc/tests/fixtures/linux-6.18/{n}",
            env!("CARGO_MANIFEST_DIR")
        );
        let s = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
        tpslab_proc::pid::parse_task_stat(&s, n).unwrap()
    };
    let hz = 100;
    let grown = |a: &str, b: &str| {
        let (a, b) = (fx(a), fx(b));
        assert_eq!(a.comm, b.comm);
        (
            a.comm.clone(),
            (b.utime + b.stime - a.utime - a.stime) * SECOND / hz,
        )
    };
    let (main_comm, main_ns) = grown("task_stat_redis_main_t0", "task_stat_redis_main_t1");
    let (bio_comm, bio_ns) = grown("task_stat_redis_bio_t0", "task_stat_redis_bio_t1");
    assert_eq!((main_comm.as_str(), main_ns), ("redis-server", 360_000_000));
    assert_eq!((bio_comm.as_str(), bio_ns), ("bio_close_file", 0));
    let with = |comm: String, cpu_ns: u64, sample: &[(char, Option<&str>, u64)]| {
        let mut t = thread(0, &comm, 0, sample);
        t.states.on_cpu_ns = 0;
        t.cpu_ns = cpu_ns;
        t
    };
    let main = with(main_comm, main_ns, &[('S', Some("epoll_wait"), 100)]);
    let bio = with(bio_comm, bio_ns, &[('S', Some("futex"), 100)]);
    assert!(!is_idle(&main, SECOND));
    assert!(is_idle(&bio, SECOND));
}

/// nginx with 2 workers, given by its master's PID: the master parked in
/// rt_sigsuspend all the step, the workers in epoll_wait and running.
#[test]
fn a_prefork_servers_processes_are_told_with_the_idle_master_apart() {
    let mut master = thread(4200, "nginx", 0, &[('S', Some("rt_sigsuspend"), 100)]);
    master.pid = 4200;
    let mut workers: Vec<StepThread> = [4201, 4202]
        .iter()
        .map(|&p| {
            let mut t = thread(
                p,
                "nginx",
                400_000_000,
                &[('R', None, 40), ('S', Some("epoll_wait"), 60)],
            );
            t.pid = p;
            t
        })
        .collect();
    let mut all = vec![master.clone()];
    all.append(&mut workers.clone());
    let s = step(8, all);
    assert_eq!(
        processes_line(&s, 4200).as_deref(),
        Some("server processes at 8 users: nginx: 1 master (the PID 4200) + 2 workers (its descendants); the master idle")
    );
    let f = facts(&s).unwrap();
    assert_eq!(f.working.len(), 2, "{f:?}");
    assert_eq!(f.idle, vec!["nginx".to_string()]);
    // Given a worker's PID (not in the step) or with one process: no such line.
    assert_eq!(processes_line(&s, 9999), None);
    assert_eq!(processes_line(&step(8, vec![master.clone()]), 4200), None);
    // A worker idle too, and the master working.
    workers[1].cpu_ns = 0;
    workers[1].states = ThreadStates::default();
    crate::waits::add_sample(
        &mut workers[1].states,
        'S',
        None,
        Some("epoll_wait"),
        FdKind::Unknown,
    );
    crate::waits::add_sample(&mut master.states, 'R', None, None, FdKind::Unknown);
    let s = step(8, vec![master, workers[0].clone(), workers[1].clone()]);
    assert_eq!(
        processes_line(&s, 4200).as_deref(),
        Some("server processes at 8 users: nginx: 1 master (the PID 4200) + 2 workers (its descendants); the master working, 1 of the workers idle")
    );
}
