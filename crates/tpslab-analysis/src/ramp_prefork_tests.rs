//! A prefork server's workers judged by their CPU shares (nginx's master apart).

use super::*;

/// An nginx process's one thread over a 1 s step: its time on a CPU and in the run queue,
/// and its samples (state, system call, count).
fn nginx_thread(
    pid: u32,
    cpu_ns: u64,
    runq_ns: u64,
    samples: &[(char, Option<&str>, u64)],
) -> tpslab_record::waits::StepThread {
    use crate::waits::FdKind;
    let mut states = ThreadStates::default();
    for &(st, call, n) in samples {
        for _ in 0..n {
            crate::waits::add_sample(&mut states, st, None, call, FdKind::Unknown);
        }
    }
    states.on_cpu_ns = cpu_ns;
    states.runqueue_ns = runq_ns;
    tpslab_record::waits::StepThread {
        tid: pid,
        comm: "nginx".into(),
        cpu_ns,
        states,
        span_ns: 1_000_000_000,
        futex_timed: 0,
        peer_by_syscall: Some(Default::default()),
        pid,
        born: false,
    }
}

/// nginx's 2 workers beside a CPU hog (`stress-ng --cpu 2` and the generator on 2 CPUs):
/// runnable most of the step but on a CPU a third of that, one of them under the 80 % that
/// makes "CPU-bound workers" (or both over it). Their top state is "running": not "a
/// concurrency cap" of threads that wait (what main said), nor "CPU-bound workers", but
/// CPU contention, with its figures.
#[test]
fn prefork_workers_kept_off_the_cpus_by_a_hog_are_contention_not_a_cap() {
    let mut r = ramp(
        &[20_000.0, 11_000.0, 11_500.0, 11_600.0],
        0.52,
        ThreadStates {
            samples: 300,
            running: 180,
            ..Default::default()
        },
    );
    r.plan.server_pid = Some(4200);
    r.steps.last_mut().unwrap().per_thread = vec![
        nginx_thread(
            4201,
            300_000_000,
            600_000_000,
            &[('R', None, 90), ('S', Some("epoll_wait"), 10)],
        ),
        nginx_thread(
            4202,
            220_000_000,
            480_000_000,
            &[('R', None, 70), ('S', Some("epoll_wait"), 30)],
        ),
        nginx_thread(4200, 0, 0, &[('S', Some("rt_sigsuspend"), 100)]),
    ];
    let a = analyse(&r, 2);
    assert_eq!(
        a.verdict,
        "VERDICT: CPU contention: TPS stops at the knee (1 user) while the server's 2 working threads in 2 processes were running or runnable 80 % of the last step on average but on a CPU only 26 % (waiting for a CPU 54 % by schedstat), and the server used 0.52 of 2 CPUs; 1 other thread idle (nginx). Other work on the CPUs they may run on (the load generator on this host, other processes) kept them off: this ramp measures the host's contention more than the server. Give the server CPUs of its own (taskset, cpusets) or send the load from another host, then ramp again"
    );
    // Both busy 92 %, on a CPU 32 % and waiting 57 % (a real run beside `stress-ng --cpu
    // 2` here said "CPU-bound workers" with these figures): contention still, the CPU
    // time they got was other work's to give.
    let last = r.steps.last_mut().unwrap();
    for t in &mut last.per_thread[..2] {
        t.states.on_cpu_ns = 320_000_000;
        t.cpu_ns = 320_000_000;
        t.states.runqueue_ns = 600_000_000;
    }
    let a = analyse(&r, 2);
    assert!(
        a.verdict.starts_with("VERDICT: CPU contention: TPS stops at the knee (1 user) while the server's 2 working threads in 2 processes were running or runnable 92 % of the last step on average but on a CPU only 32 % (waiting for a CPU 60 % by schedstat)"),
        "{}",
        a.verdict
    );
    // The same workers on a CPU most of their busy time (the server's own work): not
    // contention.
    let last = r.steps.last_mut().unwrap();
    last.per_thread[0].states.on_cpu_ns = 600_000_000;
    last.per_thread[0].cpu_ns = 600_000_000;
    last.per_thread[0].states.runqueue_ns = 100_000_000;
    last.per_thread[1].states.on_cpu_ns = 500_000_000;
    last.per_thread[1].cpu_ns = 500_000_000;
    last.per_thread[1].states.runqueue_ns = 100_000_000;
    let a = analyse(&r, 2);
    assert!(!a.verdict.contains("contention"), "{}", a.verdict);
}

/// nginx at 8 users as a real run on this 2-CPU host showed it (a generator beside it):
/// the master parked in rt_sigsuspend, both workers running or runnable all the step,
/// half of it waiting for a CPU. Not "a concurrency cap" of threads that wait, nor the
/// master's wait: CPU-bound workers, with the master apart.
#[test]
fn prefork_workers_all_busy_are_cpu_bound_with_the_idle_master_apart() {
    let thread = nginx_thread;
    let mut r = ramp(
        &[94_000.0, 48_000.0, 58_000.0, 58_500.0],
        0.73,
        ThreadStates {
            samples: 300,
            running: 200,
            ..Default::default()
        },
    );
    r.plan.server_pid = Some(4200);
    r.steps.last_mut().unwrap().per_thread = vec![
        thread(
            4201,
            500_000_000,
            480_000_000,
            &[('R', None, 97), ('S', Some("epoll_wait"), 3)],
        ),
        thread(
            4202,
            500_000_000,
            470_000_000,
            &[('R', None, 95), ('S', Some("epoll_wait"), 5)],
        ),
        thread(4200, 0, 0, &[('S', Some("rt_sigsuspend"), 100)]),
    ];
    let a = analyse(&r, 2);
    assert!(
        a.verdict.starts_with("VERDICT: CPU-bound workers: TPS stops at the knee (1 users) while all 2 of the server's working threads in 2 processes were running or runnable 97 % of the last step or more, on a CPU 50 % and waiting for one 48 % on average (schedstat); 1 other thread idle (nginx). None spent more than 3 % of it waiting on anything else (a lock, a peer, a timer): the CPU time they get is the limit."),
        "{}",
        a.verdict
    );
    assert!(
        a.lines.iter().any(|l| l
            == "server processes at 8 users: nginx: 1 master (the PID 4200) + 2 workers (its descendants); the master idle"),
        "{:?}",
        a.lines
    );
}

/// The same two workers in a record without schedstat (written before it was kept, or
/// schedstat unreadable): their time on a CPU is their utime + stime, and their wait for
/// one is not measured, so no figure is given for it; a top state R is not called
/// running, since it may have been a wait for a CPU.
#[test]
fn without_schedstat_no_wait_for_a_cpu_is_figured_and_state_r_is_not_called_running() {
    let mut r = ramp(
        &[20_000.0, 11_000.0, 11_500.0, 11_600.0],
        0.52,
        ThreadStates {
            samples: 300,
            running: 180,
            ..Default::default()
        },
    );
    r.plan.server_pid = Some(4200);
    let mut workers = vec![
        nginx_thread(
            4201,
            0,
            0,
            &[('R', None, 90), ('S', Some("epoll_wait"), 10)],
        ),
        nginx_thread(
            4202,
            0,
            0,
            &[('R', None, 70), ('S', Some("epoll_wait"), 30)],
        ),
        nginx_thread(4200, 0, 0, &[('S', Some("rt_sigsuspend"), 100)]),
    ];
    workers[0].cpu_ns = 300_000_000;
    workers[1].cpu_ns = 220_000_000;
    r.steps.last_mut().unwrap().per_thread = workers;
    let a = analyse(&r, 2);
    assert!(
        a.verdict.starts_with("VERDICT: CPU contention: TPS stops at the knee (1 user) while the server's 2 working threads in 2 processes were running or runnable 80 % of the last step on average but on a CPU only 26 % (on a CPU by their utime + stime; this record has no schedstat to measure their wait for one), and the server used 0.52 of 2 CPUs"),
        "{}",
        a.verdict
    );
    assert!(!a.verdict.contains("by schedstat"), "{}", a.verdict);
    // On a CPU most of their busy time by utime + stime: a cap, its threads in state R.
    let last = r.steps.last_mut().unwrap();
    last.per_thread[0].cpu_ns = 600_000_000;
    last.per_thread[1].cpu_ns = 500_000_000;
    let a = analyse(&r, 2);
    assert!(!a.verdict.contains("contention"), "{}", a.verdict);
    assert!(!a.verdict.contains("mostly running"), "{}", a.verdict);
    assert!(
        a.verdict.starts_with("VERDICT: a concurrency cap")
            && a.verdict.contains("its threads are mostly in state R (")
            && a.verdict.contains(
                "running or waiting for a CPU, which this record has no schedstat to tell apart)"
            ),
        "{}",
        a.verdict
    );
}
