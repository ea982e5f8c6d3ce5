//! The live view of the commands made of several UDP runs (`diagnose`, `sweep`,
//! `capacity` with `--live`) drawn from recorded inputs (`testdata/live/`, see its README;
//! `tests/fixtures/sweep.json`) into ratatui's TestBackend at 80x24 and 160x48, against
//! saved screens (`BLESS_LIVE=1` writes them again), with the figures a wrong view would
//! get wrong checked on their own: each run's drops, the table's rows, the bracket.

use crate::snap::{assert_screen, data, frames};
use tpslab_analysis::capacity::bounds_so_far;
use tpslab_record::capacity::CapacityStep;
use tpslab_record::{Body, Record};
use tpslab_report::live::{draw_runs, LiveHeader, RunsKind, RunsLiveState};

/// The SO_RCVBUF limits the two recorded runs' records gave (`observer.target_rcvbuf_bytes`).
const LIMIT_64K: u64 = 131072;
const LIMIT_16M: u64 = 33554432;

fn header(command: &str, target: &str, planned_s: f64) -> LiveHeader {
    LiveHeader {
        command: command.into(),
        target: target.into(),
        planned_s: Some(planned_s),
        planned_requests: None,
        no_latency: None,
    }
}

/// A count or rate as the view writes it: `850`, `8.73k`, `10.0k`.
fn si(v: f64) -> String {
    if v >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{:.2}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Feeds the recorded run `name` (each line given its record's limit) into `st`.
fn feed(st: &mut RunsLiveState, name: &str, limit: u64) {
    for mut f in frames(name) {
        f.rcvbuf_limit_bytes = Some(limit);
        st.push(f);
    }
}

#[test]
fn a_diagnosis_shows_each_runs_drops_by_layer_above_the_run_going_now() {
    let mut st = RunsLiveState::new(
        RunsKind::Diagnose,
        header("diagnose", "127.0.0.1:19977", 4.0),
    );
    st.start_run("run 1: as is");
    feed(&mut st, "load_udp_paused.ndjson", LIMIT_64K);
    let as_is = frames("load_udp_paused.ndjson").pop().unwrap();
    st.start_run("run 2: with the fix");
    // Half the second run: its row so far under the first's.
    let fixed = frames("load_udp_paused_rcvbuf16m.ndjson");
    let half = fixed.len() / 2;
    for mut f in fixed.into_iter().take(half) {
        f.rcvbuf_limit_bytes = Some(LIMIT_16M);
        st.push(f);
    }
    // The first run's row: its drops since its start, as its last line counts them.
    assert_eq!(st.rows.len(), 1);
    let row = &st.rows[0];
    assert_eq!(row.label, "run 1: as is");
    assert!(as_is.socket_drops > 0 && row.bad);
    // The view below is the second run's alone: no drops carried over.
    assert_eq!(st.run.total_drops.socket, 0);
    for (w, h) in [(80, 24), (160, 48)] {
        let s = crate::snap::screen(w, h, |f| draw_runs(f, &st));
        assert!(
            s.contains("diagnosis: now run 2: with the fix"),
            "{w}x{h}:\n{s}"
        );
        let line = |label: &str| {
            s.lines()
                .find(|l| l.starts_with(&format!("│{label}")))
                .unwrap_or_else(|| panic!("{w}x{h}: no {label:?}:\n{s}"))
                .to_string()
        };
        let first = line("run 1: as is");
        assert!(
            first
                .split_whitespace()
                .any(|c| c == si(as_is.socket_drops as f64)),
            "{w}x{h}: {first}"
        );
        assert!(line("run 2: with the fix").contains(" 0 "), "{w}x{h}:\n{s}");
        assert!(s.contains("rx_queue / SO_RCVBUF"), "{w}x{h}:\n{s}");
        assert_screen(&s, &format!("diagnose_{w}x{h}.txt"));
    }
}

/// The recorded search's steps.
fn steps() -> Vec<CapacityStep> {
    data("capacity_rcvbuf64k.steps.ndjson")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_capacity_search_shows_its_steps_and_the_bracket_so_far() {
    let all = steps();
    assert_eq!(all.len(), 6);
    let mut st = RunsLiveState::new(
        RunsKind::Capacity,
        header("capacity udp", "127.0.0.1:19979", 1.2),
    );
    // After four steps: 5k fails, 2.5k and 3.75k pass, 4.375k fails.
    st.set_steps(&all[..4]);
    st.start_run("capacity step 5: 4,300 pps");
    feed(&mut st, "capacity_step_4300.ndjson", LIMIT_64K);
    // The bracket the search itself would give on these steps.
    let (lo, hi) = bounds_so_far(&all[..4]);
    assert_eq!((lo, hi), (Some(3750.0), Some(4375.0)));
    for (w, h) in [(80, 24), (160, 48)] {
        let s = crate::snap::screen(w, h, |f| draw_runs(f, &st));
        assert!(
            s.contains("bracket so far: sustains 3.75k pps, fails at 4.38k pps"),
            "{w}x{h}:\n{s}"
        );
        let calls: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("│step "))
            .map(|l| if l.contains("FAIL") { "FAIL" } else { "pass" })
            .collect();
        assert_eq!(calls, ["FAIL", "pass", "pass", "FAIL"], "{w}x{h}:\n{s}");
        assert!(
            s.contains("now capacity step 5: 4,300 pps"),
            "{w}x{h}:\n{s}"
        );
        assert_screen(&s, &format!("capacity_{w}x{h}.txt"));
    }
    // Once the search narrowed it: the last step's bracket.
    st.set_steps(&all);
    assert_eq!(
        st.bracket_line(),
        "bracket so far: sustains 4.22k pps, fails at 4.38k pps"
    );
}

#[test]
fn a_sweep_fills_its_table_in_run_by_run() {
    let p = format!("{}/tests/fixtures/sweep.json", env!("CARGO_MANIFEST_DIR"));
    let rec = Record::from_json(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let Body::Sweep(sw) = &rec.body else {
        panic!("{p}: not a sweep")
    };
    let cells = tpslab_plan::sweep::cells(&sw.plan.factors, sw.plan.design);
    let planned = sw.runs.len();
    let mut st = RunsLiveState::new(
        RunsKind::Sweep { planned },
        header("sweep", "tpslab's server", 2.0),
    );
    // Five runs done, the sixth going (its lines: a run of tpslab's server).
    for (i, r) in sw.runs.iter().take(5).enumerate() {
        let label = cells[r.cell].label();
        st.start_run(&label);
        st.sweep_done(i + 1, &label, &r.metrics);
    }
    let next = cells[sw.runs[5].cell].label();
    st.start_run(&next);
    feed(&mut st, "run_udp_sink.ndjson", LIMIT_64K);
    for (w, h) in [(80, 24), (160, 48)] {
        let s = crate::snap::screen(w, h, |f| draw_runs(f, &st));
        assert!(s.contains(&format!("sweep: now {next}")), "{w}x{h}:\n{s}");
        // The newest rows that fit, in the order they ran, each its run's TPS.
        let rows: Vec<&str> = s
            .lines()
            .filter(|l| l.contains(&format!("/{planned} ")))
            .collect();
        assert!(!rows.is_empty() && rows.len() <= 5, "{w}x{h}:\n{s}");
        let last = rows.last().unwrap();
        assert!(
            last.contains(&format!("5/{planned} {}", cells[sw.runs[4].cell].label())),
            "{last}"
        );
        let tps = sw.runs[4].metrics.tps;
        assert!(last.contains(&si(tps)), "{last} (tps {tps})");
        assert_screen(&s, &format!("sweep_{w}x{h}.txt"));
    }
}
