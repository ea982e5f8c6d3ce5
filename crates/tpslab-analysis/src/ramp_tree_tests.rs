//! Tests of the parent module on big process trees: partial sampling (a tree read in
//! turns) and processes born during a step.

use super::*;
use tpslab_record::ramp::{RampRecord, TreeSampling};

fn step(users: usize, tree_sampling: Option<TreeSampling>) -> StepResult {
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
        per_thread: vec![],
        tree_sampling,
        http2: None,
        reply_gaps: None,
        reconnect_backoffs: 0,
    }
}

fn record(steps: Vec<StepResult>) -> RampRecord {
    use std::time::Duration;
    RampRecord {
        plan: tpslab_plan::ramp::RampPlan {
            proto: tpslab_plan::proto::Proto::Tcp,
            target: "127.0.0.1:1".parse().unwrap(),
            steps: steps.iter().map(|s| s.users).collect(),
            step: Duration::from_secs(1),
            warmup: Duration::ZERO,
            think: Duration::ZERO,
            timeout: Duration::from_secs(1),
            request: vec![],
            framing: tpslab_plan::framing::Framing::Length,
            seq_field: None,
            knee_gain: 0.2,
            builtin_server: None,
            server_pid: Some(1),
            sample_interval: Duration::from_millis(10),
            load_threads: 0,
            connections: tpslab_plan::ramp::UserConnections::PerUser,
        },
        steps,
        interrupted: false,
        server_cpus: None,
        listener: None,
        generator_peak_rss_kib: None,
        load_sent_s: None,
        overrun: None,
        http2: None,
        http3: None,
    }
}

/// A tree of 201 threads read 8 a tick: the report says the sampling was partial, at
/// which steps; a tree read whole says nothing.
#[test]
fn partial_sampling_of_a_big_tree_is_told() {
    let cov = |threads: u32, sampled: u32| TreeSampling {
        processes: threads,
        threads,
        per_tick: 8,
        ticks: 100,
        sampled,
        samples: 800,
    };
    let r = record(vec![
        step(1, Some(cov(5, 5))),
        step(8, Some(cov(201, 201))),
        step(16, Some(cov(180, 170))),
    ]);
    let line = sampling_line(&r).expect("partial");
    assert!(
        line.starts_with("thread sampling was partial: the server's tree had up to 201 threads in 201 processes, 8 read per tick in turns (each thread at about 4 % of the ticks) at 8, 16 users, up to 10 threads never sampled in a step"),
        "{line}"
    );
    assert!(crate::ramp::analyse(&r, 2).lines.contains(&line));
    let whole = record(vec![step(1, Some(cov(5, 5))), step(2, None)]);
    assert_eq!(sampling_line(&whole), None);
}

/// A worker forked late in a 1 s step, first sampled at a tree read 300 ms before the
/// step's end while its schedstat counts from its birth 500 ms before it: 450 ms on a
/// CPU and 50 ms waiting for one over a span of 300 ms. Its shares are of the time it
/// existed (at least its schedstat time), never over 100 %, and the processes line says
/// it was born during the step.
#[test]
fn a_worker_born_during_the_step_has_shares_of_its_own_life() {
    use crate::waits::FdKind;
    let worker = |pid: u32, on_cpu_ms: u64, runq_ms: u64, span_ms: u64, born: bool| {
        let mut states = ThreadStates::default();
        for _ in 0..30 {
            crate::waits::add_sample(&mut states, 'R', None, None, FdKind::Unknown);
        }
        states.on_cpu_ns = on_cpu_ms * 1_000_000;
        states.runqueue_ns = runq_ms * 1_000_000;
        StepThread {
            tid: pid,
            comm: "php-fpm".into(),
            cpu_ns: on_cpu_ms * 1_000_000,
            states,
            span_ns: span_ms * 1_000_000,
            futex_timed: 0,
            peer_by_syscall: Some(Default::default()),
            pid,
            born,
        }
    };
    let mut master = worker(100, 0, 0, 1000, false);
    master.states = ThreadStates::default();
    for _ in 0..100 {
        crate::waits::add_sample(
            &mut master.states,
            'S',
            None,
            Some("rt_sigsuspend"),
            FdKind::Unknown,
        );
    }
    let mut s = step(8, None);
    s.per_thread = vec![
        master,
        worker(101, 900, 100, 1000, false),
        worker(102, 450, 50, 300, true),
    ];
    let f = facts(&s).expect("facts");
    let (_, tid, busy, cpu, runq) = f.busiest.clone().unwrap();
    assert!(busy <= 1.0 && cpu + runq <= 1.0 + 1e-9, "{:?}", f.busiest);
    // The born worker: 450 of its 500 ms on a CPU, 50 waiting (not 100 % and 17 %).
    let born = &s.per_thread[2];
    let w = span_ns(born, 1_000_000_000) as f64;
    assert_eq!(w, 500e6);
    assert!((cpu_ns(born) as f64 / w - 0.9).abs() < 1e-9);
    let (_, procs, mean_cpu, mean_runq, _) = f.all_busy.expect("both workers busy");
    assert_eq!(procs, 2);
    assert!(mean_cpu + mean_runq <= 1.0 + 1e-9, "{mean_cpu} {mean_runq}");
    assert!((mean_cpu - 0.9).abs() < 1e-9, "{mean_cpu}");
    assert!(tid == 101 || tid == 102);
    let line = processes_line(&s, 100).expect("line");
    assert!(
        line.ends_with("; 1 of the workers born during the step (their shares are of the time since their birth)"),
        "{line}"
    );
}
