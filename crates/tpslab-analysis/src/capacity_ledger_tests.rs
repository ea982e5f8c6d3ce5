use super::*;
use crate::capacity_stream::{diagnose, StreamFacts, ThreadFacts};
use crate::rt_ledger::{open_loop, parked};
use tpslab_record::ramp::{RampRecord, StepResult};
use tpslab_record::rt_ledger::LedgerPart;
use tpslab_record::{Body, Record};

fn ramp(text: &str) -> RampRecord {
    match Record::from_json(text).expect("a record").body {
        Body::Ramp(r) => r.run,
        _ => panic!("a ramp record"),
    }
}

/// The last step of a real `ramp http` of the locked Python service (4 ms under one
/// lock, 64 users), as the open loop's window would hold it.
fn locked_step() -> (StepResult, std::collections::BTreeSet<u32>) {
    let rec = ramp(include_str!("../tests/fixtures/ramp_python_lock.json"));
    let p = parked(&rec.steps[0]);
    (rec.steps.last().unwrap().clone(), p)
}

/// What the stream rules said of that service's threads: all waiting.
fn waiting() -> Diagnosis {
    diagnose(&StreamFacts {
        threads: Some(ThreadFacts {
            processes: 1,
            threads: 63,
            busiest_run_pct: 4.0,
            busiest_wait_pct: 1.0,
            all_wanted_pct: 30.0,
            cpus: Some(2),
        }),
        ..Default::default()
    })
}

#[test]
fn an_open_loop_ledger_has_nothing_outside_a_request() {
    let (s, p) = locked_step();
    let l = open_loop(&s, &p).expect("a ledger");
    // The closed loop's ledger of the same step has time outside a request; the open
    // loop sends on its schedule, so it has none.
    assert!(crate::rt_ledger::step_ledger(&s, 0.0).unwrap().outside_ms > 0.0);
    assert_eq!(l.outside_ms, 0.0);
    assert!(
        l.ms(RtPart::Lock) >= 0.8 * l.mean_ms,
        "{}",
        line_at(&l, "x")
    );
}

#[test]
fn waiting_threads_are_named_by_their_largest_wait_with_its_share() {
    let (s, p) = locked_step();
    let l = open_loop(&s, &p).unwrap();
    let mut d = waiting();
    assert_eq!(d.case, Case::ServerWaiting);
    let before = d.headline.clone();
    with_ledger(&mut d, &l, s.reply_gaps.as_ref(), "240 requests/s");
    assert_eq!(case_parts(Case::ServerWaiting, &l), vec![RtPart::Lock]);
    let head = before.trim_end_matches('.');
    assert!(
        d.headline.starts_with(head)
            && d.headline
                .contains("; ledger: server threads waiting on a lock ")
            && d.headline
                .contains(" mean response time at 240 requests/s ("),
        "{}",
        d.headline
    );
    let e = d.evidence.last().unwrap();
    assert!(
        e.text
            .starts_with("response-time ledger at 240 requests/s: mean "),
        "{}",
        e.text
    );
    assert!(e.source.contains("futex without a timeout"), "{}", e.source);
}

#[test]
fn a_stall_that_explains_the_response_time_heads_the_capacity_verdict() {
    // A real ramp http of python3 http.server at 1 user (headers and body in two sends).
    let rec = ramp(include_str!(
        "../../tpslab-report/tests/fixtures/ramp_python_nagle.json"
    ));
    let s = rec.steps.last().unwrap();
    let l = open_loop(s, &parked(&rec.steps[0])).unwrap();
    let mut d = waiting();
    let layer = d.layer.clone();
    with_ledger(&mut d, &l, s.reply_gaps.as_ref(), "20 requests/s");
    assert!(
        d.headline
            .starts_with("At the first failing rate, what gave: Nagle x delayed ACK: "),
        "{}",
        d.headline
    );
    assert!(d
        .headline
        .contains("[ledger: replies held between their first and last byte "));
    assert!(d.recommendations[0].what.contains("TCP_NODELAY"));
    assert!(d
        .evidence
        .iter()
        .any(|e| e.text == format!("side finding: {layer}")));
    // Without the gaps there is no Nagle finding.
    let mut d = waiting();
    with_ledger(&mut d, &l, None, "20 requests/s");
    assert!(!d.headline.contains("Nagle"), "{}", d.headline);
}

#[test]
fn a_stall_smaller_than_the_case_part_is_a_side_finding() {
    let rec = ramp(include_str!(
        "../../tpslab-report/tests/fixtures/ramp_python_nagle.json"
    ));
    let s = rec.steps.last().unwrap();
    let mut l = open_loop(s, &parked(&rec.steps[0])).unwrap();
    // The same stall under a lock that holds nine tenths of a mean ten times longer.
    l.mean_ms *= 10.0;
    l.parts.push(LedgerPart {
        part: RtPart::Lock,
        ms: 0.9 * l.mean_ms,
        pm_ms: 0.0,
    });
    l.parts.sort_by_key(|p| p.part);
    l.unattributed_ms = l.mean_ms - l.attributed_ms();
    let mut d = waiting();
    with_ledger(&mut d, &l, s.reply_gaps.as_ref(), "20 requests/s");
    assert!(!d.headline.contains("Nagle"), "{}", d.headline);
    assert!(d.headline.contains("waiting on a lock"), "{}", d.headline);
    assert!(d
        .evidence
        .iter()
        .any(|e| e.text.starts_with("side finding: Nagle x delayed ACK")));
}
