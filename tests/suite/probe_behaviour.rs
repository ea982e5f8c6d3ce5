//! `tpslab probe idle` names the lab middlebox's behaviour in each of its modes: what
//! resets its idle timer (any packet, TCP keepalive included, or payload only) and how it
//! ends a flow (silent drop, a RST to the next packet, a FIN to both ends at the timeout).
//! Each study runs in throwaway namespaces of its own (a 2.5 s timeout, idle intervals of
//! 1..5 s): the bracket contains the true timeout within the 1 s resolution, the
//! behaviour line says what the lab was set to, and a control connection the timeout
//! ended is never reported as a failed path.
//! Every test here is `common::quiet()`: it mostly waits out idle intervals, so it runs
//! beside any other test (tests/common/turn.rs).

use crate::common;

const TIMEOUT_S: f64 = 2.5;

/// Runs a lab study with `on_idle` and `timer` and returns the record and the text.
fn study(test: &str, on_idle: &str, timer: &str) -> Option<(serde_json::Value, String)> {
    study_with(test, on_idle, timer, &[])
}

/// [`study`] with more flags.
fn study_with(
    test: &str,
    on_idle: &str,
    timer: &str,
    extra: &[&str],
) -> Option<(serde_json::Value, String)> {
    if !common::can_netns(test) {
        return None;
    }
    let json = common::tmp(&format!("{test}.json"));
    let mut c = common::tpslab();
    c.args(["probe", "idle", "--lab-idle-timeout", "2500ms"])
        .args(["--lab-on-idle", on_idle, "--lab-timer", timer])
        .args(extra)
        .args(["--min", "1s", "--max", "5s", "--resolution", "1s"])
        .args(["--connections", "8", "--json"])
        .arg(&json);
    let out = common::run(c);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    common::assert_report_reproduces(&json, &out.stdout);
    assert!(!text.contains("NOT EVIDENCE"), "{text}");
    Some((common::record(&json), text))
}

/// The behaviour line's bracket, seconds.
fn behaviour_bracket(text: &str) -> (f64, f64) {
    let line = text
        .lines()
        .find(|l| l.starts_with("Behaviour: times out after ("))
        .unwrap_or_else(|| panic!("no behaviour line: {text}"));
    let inner = line
        .split_once('(')
        .and_then(|(_, r)| r.split_once(']'))
        .unwrap()
        .0;
    let (lo, hi) = inner.split_once(", ").unwrap();
    let s = |v: &str| v.trim_end_matches(" s").parse::<f64>().unwrap();
    (s(lo), s(hi))
}

/// The bracket holds the true timeout, allowing the middlebox's own timer granularity
/// (its flow table is swept every 20 ms) and the probe's poll (50 ms), and is no wider
/// than the resolution.
fn assert_brackets_the_timeout(text: &str) {
    let (lo, hi) = behaviour_bracket(text);
    assert!(
        lo <= TIMEOUT_S + 0.1 && hi >= TIMEOUT_S && hi - lo <= 1.0,
        "({lo}, {hi}]: {text}"
    );
}

#[test]
fn payload_timer_with_fins_is_a_proxy_keepalive_does_not_count() {
    common::quiet();
    let Some((j, text)) = study(
        "payload_timer_with_fins_is_a_proxy_keepalive_does_not_count",
        "fin",
        "payload",
    ) else {
        return;
    };
    assert_brackets_the_timeout(&text);
    assert!(j["active_ends"].is_object(), "{text}");
    assert_eq!(j["keepalive_counts"], "no", "{text}");
    assert!(
        text.contains("; TCP keepalive does not count;")
            && text.contains("ends flows itself with a FIN"),
        "{text}"
    );
    assert!(text.contains("as unprobed connections were"), "{text}");
}

#[test]
fn any_packet_timer_with_fins_keepalive_counts() {
    common::quiet();
    let Some((j, text)) = study("any_packet_timer_with_fins_keepalive_counts", "fin", "any") else {
        return;
    };
    assert_brackets_the_timeout(&text);
    assert_eq!(j["keepalive_counts"], "yes", "{text}");
    assert_eq!(j["control"], "alive");
    assert!(
        text.contains("; TCP keepalive counts (resets its timer);")
            && text.contains("ends flows itself with a FIN"),
        "{text}"
    );
}

#[test]
fn payload_timer_dropping_silently_keepalive_does_not_count() {
    common::quiet();
    let Some((j, text)) = study(
        "payload_timer_dropping_silently_keepalive_does_not_count",
        "drop",
        "payload",
    ) else {
        return;
    };
    assert_brackets_the_timeout(&text);
    assert_eq!(j["bracket"]["alive_s"], 2, "{text}");
    assert_eq!(j["bracket"]["dead_s"], 3, "{text}");
    // The control, probed every second, went unanswered once the middlebox forgot it:
    // dated by its first unanswered probe, inside the bracket.
    assert_eq!(j["keepalive_counts"], "no", "{text}");
    assert!(
        text.contains("; TCP keepalive does not count;") && text.contains("forgets flows silently"),
        "{text}"
    );
}

#[test]
fn payload_timer_resetting_the_next_packet_keepalive_does_not_count() {
    common::quiet();
    let Some((j, text)) = study(
        "payload_timer_resetting_the_next_packet_keepalive_does_not_count",
        "reset",
        "payload",
    ) else {
        return;
    };
    assert_brackets_the_timeout(&text);
    assert_eq!(j["keepalive_counts"], "no", "{text}");
    assert!(
        text.contains("; TCP keepalive does not count;")
            && text.contains("answers their next packet with a RST"),
        "{text}"
    );
    // No connection was ended by the path itself: the control's ends are dated against
    // the probes' bracket, not "as unprobed connections were".
    assert!(j.get("active_ends").is_none_or(|e| e.is_null()), "{j}");
    assert!(!text.contains("as unprobed connections were"), "{text}");
    assert!(
        text.contains("inside the bracket the probes found"),
        "{text}"
    );
}

#[test]
fn any_packet_timer_dropping_silently_keepalive_counts() {
    common::quiet();
    let Some((j, text)) = study(
        "any_packet_timer_dropping_silently_keepalive_counts",
        "drop",
        "any",
    ) else {
        return;
    };
    assert_brackets_the_timeout(&text);
    assert_eq!(j["keepalive_counts"], "yes", "{text}");
    assert!(
        text.contains("; TCP keepalive counts (resets its timer);")
            && text.contains("forgets flows silently"),
        "{text}"
    );
}

/// The payload connections of `--probe-data` with `--server-first` (tpslab's responder
/// on the far side): the near side's payload alone, the far side's alone, both ways.
/// Returns the record's payload connections by way: (fate, decided_ms).
fn payload_by_way(j: &serde_json::Value) -> std::collections::HashMap<String, (String, u64)> {
    j["payload"]
        .as_array()
        .unwrap_or_else(|| panic!("no payload connections: {j}"))
        .iter()
        .map(|c| {
            (
                c["way"].as_str().unwrap().to_string(),
                (
                    c["fate"].as_str().unwrap_or("error").to_string(),
                    c["decided_ms"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

#[test]
fn near_payload_timer_only_the_clients_payload_counts() {
    common::quiet();
    let Some((j, text)) = study_with(
        "near_payload_timer_only_the_clients_payload_counts",
        "fin",
        "near-payload",
        &["--server-first", "--probe-data", "x"],
    ) else {
        return;
    };
    assert_brackets_the_timeout(&text);
    let p = payload_by_way(&j);
    // The far side's payload did not keep its flow: ended with a FIN at the timeout.
    let (fate, at) = &p["far"];
    assert_eq!(fate, "closed", "{text}");
    assert!(
        (*at as f64) >= TIMEOUT_S * 1e3 - 100.0 && (*at as f64) < TIMEOUT_S * 1e3 + 1000.0,
        "{text}"
    );
    assert_eq!(p["near"].0, "alive", "{text}");
    assert_eq!(p["both"].0, "alive", "{text}");
    assert!(
        text.contains("; only payload from the client side counts;")
            && text.contains("without payload from the client side;"),
        "{text}"
    );
}

#[test]
fn payload_timer_payload_from_either_side_counts() {
    common::quiet();
    let Some((j, text)) = study_with(
        "payload_timer_payload_from_either_side_counts",
        "fin",
        "payload",
        &["--server-first", "--probe-data", "x"],
    ) else {
        return;
    };
    assert_brackets_the_timeout(&text);
    let p = payload_by_way(&j);
    for way in ["near", "far", "both"] {
        let (fate, at) = &p[way];
        assert_eq!(fate, "alive", "{way}: {text}");
        // Alive past the timeout by its next payload and the silence that would end it.
        assert!(*at >= 3000 + 3500, "{way}: {text}");
    }
    assert!(
        text.contains("; payload from either side counts (resets its timer);"),
        "{text}"
    );
}

/// Without `--server-first`, `--probe-data` against a far side that reads and never
/// answers (the lab's listener) is the near side's payload alone: it keeps the flow on a
/// timer that counts payload; the far side's is not measured.
#[test]
fn probe_data_against_a_silent_server_is_the_clients_payload() {
    common::quiet();
    let Some((j, text)) = study_with(
        "probe_data_against_a_silent_server_is_the_clients_payload",
        "drop",
        "payload",
        &["--probe-data", "PING\\r\\n"],
    ) else {
        return;
    };
    assert_brackets_the_timeout(&text);
    assert_eq!(j["plan"]["probe_data"], "PING\\r\\n", "{j}");
    let p = payload_by_way(&j);
    assert_eq!(p.len(), 1, "{text}");
    assert_eq!(p["near"].0, "alive", "{text}");
    assert!(
        text.contains("; payload from the client side alone counts; whether payload from the server side alone counts: not measured;"),
        "{text}"
    );
}
