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
        listener_drops: None,
        drop_reasons: None,
        load_sent_s: None,
        load_end_s: None,
        per_thread: vec![],
        tree_sampling,
    }
}

fn record(steps: Vec<StepResult>) -> RampRecord {
    use std::time::Duration;
    RampRecord {
        plan: tpslab_record::ramp::RampPlan {
            proto: tpslab_record::ramp::RampProto::Tcp,
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
            http2_connections: 0,
        },
        steps,
        interrupted: false,
        server_cpus: None,
        listener: None,
        generator_peak_rss_kib: None,
        load_sent_s: None,
        overrun: None,
        http2: None,
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
