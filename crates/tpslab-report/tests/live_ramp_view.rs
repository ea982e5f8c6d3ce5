//! The ramp's live view (`ramp tcp|udp|http --live`) drawn from the steps of a real ramp
//! (`testdata/live/ramp_tcp_lock.steps.ndjson`, see its README) into ratatui's TestBackend
//! at 80x24 and 160x48, against saved screens (`BLESS_LIVE=1` writes them again), with
//! the figures a wrong view would get wrong checked on their own: the step count, the last
//! step's TPS bar, the knee line, the timeouts.

use crate::snap::{assert_screen, data};
use tpslab_record::ramp::StepResult;
use tpslab_report::live::{draw_ramp, RampHeader, RampLiveState};

fn steps() -> Vec<StepResult> {
    data("ramp_tcp_lock.steps.ndjson")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The recorded ramp's plan.
fn header() -> RampHeader {
    RampHeader {
        command: "ramp tcp".into(),
        target: "127.0.0.1:36615 (tpslab's server)".into(),
        users: vec![1, 2, 4, 8, 16],
        warmup_s: 0.2,
        window_s: 0.5,
        think_s: 0.0,
        knee_gain: 0.2,
    }
}

/// The view after `n` steps, `elapsed_s` into the ramp.
fn after(n: usize, elapsed_s: f64) -> RampLiveState {
    let mut st = RampLiveState::new(header());
    st.set_steps(&steps()[..n]);
    st.elapsed_s = elapsed_s;
    st
}

/// The line of the TPS panel for `users` (its label right-aligned in 12 columns).
fn bar_line<'a>(s: &'a str, users: &str) -> &'a str {
    s.lines()
        .find(|l| l.starts_with(&format!("│{users:>12} ")))
        .unwrap_or_else(|| panic!("no bar for {users}:\n{s}"))
}

/// Full blocks in a line.
fn blocks(l: &str) -> usize {
    l.chars().filter(|&c| c == '█').count()
}

#[test]
fn the_whole_ramp_at_80x24_and_160x48() {
    let st = after(5, 3.6);
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let s = crate::snap::screen(w, h, |f| draw_ramp(f, &st));
        assert_screen(&s, &format!("ramp_tcp_lock_{w}x{h}.txt"));
        let mut lines = s.lines();
        let status = lines.next().unwrap();
        assert!(status.contains("tpslab ramp tcp"), "{status}");
        assert!(status.contains("127.0.0.1:36615"), "{status}");
        let step = lines.next().unwrap();
        assert!(step.starts_with("step 5 of 5: done"), "{step}");
        assert!(step.contains("elapsed 3.5 s / 3.5 s"), "{step}");
        // The knee: 1 user, as the record's analysis finds it (TPS flat from 1 to 2).
        assert!(
            lines
                .next()
                .unwrap()
                .starts_with("knee: at 1 user (50.0 TPS)"),
            "{s}"
        );
        // A bar per step, the last one at 8 TPS: 8/50 of the first's length.
        let first = blocks(bar_line(&s, "1 user"));
        let last = bar_line(&s, "16 users");
        assert!(last.contains(" 8.0 TPS"), "{last}");
        let bar_w = w as usize - 2 - 13 - 20 - 1;
        assert_eq!(first, bar_w, "the largest TPS fills the bar: {s}");
        assert_eq!(blocks(last), (8.0 / 50.0 * bar_w as f64).round() as usize);
        assert!(bar_line(&s, "1 user").contains("<- knee"));
        // 8 users: no reply at all, an empty bar.
        assert_eq!(blocks(bar_line(&s, "8 users")), 0);
        // The table: one row per step, the timeouts of the last.
        let rows: Vec<&str> = s
            .lines()
            .skip_while(|l| !l.contains("users         TPS"))
            .skip(1)
            .take_while(|l| {
                l.starts_with("│") && l.chars().nth(6).is_some_and(|c| c.is_ascii_digit())
            })
            .collect();
        assert_eq!(rows.len(), 5, "{s}");
        let cols: Vec<&str> = rows[4].trim_matches('│').split_whitespace().collect();
        assert_eq!(cols, ["16", "8.0", "35.8ms", "67.7ms", "0", "78"], "{s}");
        // No reply at 8 users: no response time to show, not a 0.
        let cols: Vec<&str> = rows[3].trim_matches('│').split_whitespace().collect();
        assert_eq!(cols, ["8", "0.0", "-", "-", "0", "40"], "{s}");
    }
}

#[test]
fn mid_ramp_shows_the_step_being_run_from_the_plan() {
    // One step in, 0.8 s into the ramp: step 2 (2 users) is 0.1 s in, still warming up.
    let st = after(1, 0.8);
    let s = crate::snap::screen(80, 24, |f| draw_ramp(f, &st));
    assert_screen(&s, "ramp_tcp_lock_step2_80x24.txt");
    let step = s.lines().nth(1).unwrap();
    assert!(
        step.starts_with("step 2 of 5: 2 users, 0.1 s of 0.7 s"),
        "{step}"
    );
    assert!(step.contains("elapsed 0.8 s / 3.5 s"), "{step}");
    assert!(
        s.lines()
            .nth(2)
            .unwrap()
            .starts_with("knee: judged at the end"),
        "{s}"
    );
    assert!(bar_line(&s, "2 users").contains("warming up, 0.1 s of 0.7 s"));
    // Steps to come are not drawn yet.
    assert!(!s.contains("4 users"), "{s}");
    // Later in the same step: measuring.
    let st = after(1, 1.2);
    assert!(bar_line(
        &crate::snap::screen(80, 24, |f| draw_ramp(f, &st)),
        "2 users"
    )
    .contains("measuring, 0.5 s of 0.7 s"));
    // Past the step's planned end, its figures not in yet.
    let st = after(1, 1.6);
    let s = crate::snap::screen(80, 24, |f| draw_ramp(f, &st));
    assert!(s
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("step 2 of 5: 2 users, 0.7 s of 0.7 s"));
    assert!(bar_line(&s, "2 users").contains("measured, its figures coming"));
}

#[test]
fn the_knee_on_the_steps_so_far_is_the_analysis_knee() {
    // Every recorded ramp of the report's fixtures: from the step after its knee on, the
    // live knee is the one the analysis finds in its run (today's analysis: a fixture's
    // stored one may be older, e.g. redis's "knee at 1 user" before a knee needed TPS to
    // stop growing); before, none.
    for f in ["ramp.json", "ramp_redis.json", "ramp_java_http_lock.json"] {
        let p = format!("{}/tests/fixtures/{f}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let steps: Vec<StepResult> = serde_json::from_value(v["steps"].clone()).unwrap();
        let rec = tpslab_record::Record::from_json(&text).unwrap();
        let tpslab_record::Body::Ramp(r) = &rec.body else {
            panic!("{f}: not a ramp")
        };
        let knee = tpslab_analysis::ramp::analyse(&r.run, 2).knee_index;
        let mut st = RampLiveState::new(RampHeader {
            command: "ramp tcp".into(),
            target: "t".into(),
            users: steps.iter().map(|s| s.users).collect(),
            warmup_s: 0.1,
            window_s: 0.3,
            think_s: 0.0,
            knee_gain: v["plan"]["knee_gain"].as_f64().unwrap(),
        });
        for n in 0..=steps.len() {
            st.set_steps(&steps[..n]);
            match knee {
                // The knee needs the step after it; until then it is not shown (a knee
                // shown earlier is provisional: a later step whose TPS grows again
                // takes it back, as redis's second step shows).
                Some(k) if n < k + 2 => assert_ne!(st.knee(), Some(k), "{f} after {n} steps"),
                _ if n == steps.len() => assert_eq!(st.knee(), knee, "{f} at its end"),
                _ => {}
            }
        }
        assert!(knee.is_some(), "{f}: a fixture with a knee");
    }
    // A ramp whose TPS doubles with the users has none, and says so once it is done.
    let mut s = steps()[0].clone();
    let mut grow = vec![];
    for (i, u) in [1usize, 2, 4, 8, 16].into_iter().enumerate() {
        s.users = u;
        s.tps = 50.0 * u as f64;
        s.response.mean_ns = 20e6 + i as f64;
        grow.push(s.clone());
    }
    let mut st = after(0, 3.6);
    st.set_steps(&grow);
    assert_eq!(st.knee(), None);
    assert!(st.knee_line().starts_with("no knee: TPS kept growing"));
    st.set_steps(&grow[..3]);
    assert!(st
        .knee_line()
        .starts_with("knee: none in the 3 steps so far"));
}
