use super::*;
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    let p = format!(
        "{}/../tpslab-report/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Every record fixture (one or more of every kind).
fn fixtures() -> Vec<String> {
    let dir = format!(
        "{}/../tpslab-report/tests/fixtures",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// `v`'s top-level keys in reverse order of their names (`jq -S` and its reverse).
fn reordered(v: &Value, reverse: bool) -> String {
    let m = v.as_object().unwrap();
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    if reverse {
        keys.reverse();
    }
    let parts: Vec<String> = keys
        .iter()
        .map(|k| format!("{}:{}", Value::from(k.as_str()), m[*k]))
        .collect();
    format!("{{{}}}", parts.join(","))
}

#[test]
fn every_kind_reads_back_as_written_whatever_the_order_of_its_fields() {
    let mut kinds = std::collections::BTreeSet::new();
    for name in fixtures() {
        let rec = Record::from_json(&fixture(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        kinds.insert(rec.kind());
        let text = serde_json::to_string(&rec).unwrap();
        let back = Record::from_json(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text, "{name}");
        // The envelope after the body's fields, or first: the same record.
        let v: Value = serde_json::from_str(&text).unwrap();
        for reverse in [false, true] {
            let moved = Record::from_json(&reordered(&v, reverse)).unwrap();
            assert_eq!(serde_json::to_string(&moved).unwrap(), text, "{name}");
        }
    }
    let all: std::collections::BTreeSet<&str> = KINDS.iter().copied().collect();
    assert_eq!(
        kinds, all,
        "a fixture of every kind, and KINDS as kind() names them"
    );
}

#[test]
fn an_envelope_without_its_kind_or_meta_is_named() {
    let v: Value = serde_json::from_str(&fixture("serve_udp.json")).unwrap();
    let err = |v: &Value| Record::from_json(&v.to_string()).unwrap_err().to_string();
    let mut w = v.clone();
    w["kind"] = "nope".into();
    let e = err(&w);
    assert!(
        e.contains("unknown variant `nope`, expected one of `udp_run`"),
        "{e}"
    );
    w.as_object_mut().unwrap().remove("kind");
    assert!(err(&w).contains("missing field `kind`"), "{}", err(&w));
    let mut w = v.clone();
    w.as_object_mut().unwrap().remove("meta");
    assert!(err(&w).contains("missing field `meta`"), "{}", err(&w));
    // A body of another kind's shape is not that kind.
    let mut w = v.clone();
    w["kind"] = "tcp".into();
    assert!(
        err(&w).starts_with("not a tpslab record: missing field"),
        "{}",
        err(&w)
    );
}

#[test]
fn the_previous_releases_diagnosis_is_read_with_its_runs_plans_skipped() {
    let rec = Record::from_json(&fixture("diagnose.json")).unwrap();
    let mut v = serde_json::to_value(&rec).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("meta");
    o.remove("kind");
    o.insert("schema".into(), DIAGNOSE_SCHEMA_V1.into());
    // The previous release's untyped plans, which this release's plan type refuses.
    for k in ["before", "after"] {
        if let Some(r) = o.get_mut(k).and_then(Value::as_object_mut) {
            r.insert(
                "plan".into(),
                json!({"kind": "udp", "load": {"rate_pps": 5}}),
            );
        }
    }
    let old = Record::from_json(&v.to_string()).unwrap();
    let Body::Diagnose(d) = &old.body else {
        panic!("a diagnosis")
    };
    assert!(d.before.plan.is_none());
    let Body::Diagnose(was) = &rec.body else {
        panic!("a diagnosis")
    };
    assert_eq!(d.scenario, was.scenario);
    assert_eq!(d.after.is_some(), was.after.is_some());
    assert_eq!(old.meta.hostname, was.before.environment.hostname);
    // A plan is skipped only where the previous release had one.
    v["facts"] = json!({"plan": 1});
    assert!(Record::from_json(&v.to_string()).is_err());
}

/// The error of `v` read, which must be a parse error.
fn parse_error(v: &Value) -> String {
    match Record::from_json(&v.to_string()) {
        Err(e @ RecordError::Parse(_)) => e.to_string(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn series_longer_than_any_command_writes_are_refused_naming_the_field_and_the_limit() {
    use tpslab_plan::limits::{FLOW_SAMPLES, OBSERVER_SAMPLES, OBSERVER_SERIES, RAMP_STEPS};
    let run: Value = serde_json::from_str(&fixture("watch.json")).unwrap();
    let n = run["observer"]["series"]["t_ms"].as_array().unwrap().len();
    assert!(n > 1);
    // At the limit: read.
    let mut v = run.clone();
    let times: Vec<f64> = (0..OBSERVER_SAMPLES).map(|i| i as f64).collect();
    v["observer"]["series"]["t_ms"] = times.into();
    assert!(Record::from_json(&v.to_string()).is_ok());
    let mut v = run.clone();
    let times: Vec<f64> = (0..=OBSERVER_SAMPLES).map(|i| i as f64).collect();
    v["observer"]["series"]["t_ms"] = times.into();
    let e = parse_error(&v);
    assert!(
        e.contains("observer series t_ms of more than 20000 items: allowed up to 20000 (the samples an observer keeps)"),
        "{e}"
    );
    let mut v = run.clone();
    v["observer"]["series"]["values"]["x"] = vec![0.0; OBSERVER_SAMPLES + 1].into();
    let e = parse_error(&v);
    assert!(
        e.contains("an observer series of more than 20000 items"),
        "{e}"
    );
    let mut v = run.clone();
    for i in 0..=OBSERVER_SERIES {
        v["observer"]["series"]["values"][format!("s{i}")] = json!([]);
    }
    let e = parse_error(&v);
    assert!(
        e.contains("observer series values of more than 64 items: allowed up to 64"),
        "{e}"
    );

    let tcp: Value = serde_json::from_str(&fixture("tcp_lab.json")).unwrap();
    let mut v = tcp.clone();
    let s = v["runs"][0]["flow"]["samples"][0].clone();
    v["runs"][0]["flow"]["samples"] = Value::Array(vec![s; FLOW_SAMPLES + 1]);
    let e = parse_error(&v);
    assert!(
        e.contains("a flow's samples of more than 360002 items: allowed up to 360002 (the TCP_INFO samples `tcp` keeps of one flow)"),
        "{e}"
    );
    let watched: Value = serde_json::from_str(&fixture("tcp_watched.json")).unwrap();
    let mut v = watched.clone();
    let s = v["watched"][0]["flow"]["samples"][0].clone();
    v["watched"][0]["flow"]["samples"] = Value::Array(vec![s; FLOW_SAMPLES + 1]);
    assert!(parse_error(&v).contains("a flow's samples of more than 360002 items"));

    let ramp: Value = serde_json::from_str(&fixture("ramp.json")).unwrap();
    let mut v = ramp.clone();
    let s = v["steps"][0].clone();
    v["steps"] = Value::Array(vec![s; RAMP_STEPS + 1]);
    assert!(parse_error(&v).contains("a ramp's steps of more than 200 items"));
}

#[test]
fn a_histogram_over_2_53_values_or_unlike_its_summary_is_refused() {
    use crate::histogram::encode_histogram;
    let run: Value = serde_json::from_str(&fixture("udp_run.json")).unwrap();
    let with = |n: u64, count: u64| {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        h.record_n(1_000, n).unwrap();
        let mut v = run.clone();
        let text = encode_histogram(&h);
        v["generator"]["histograms"] = json!({"intended": text, "actual": text});
        v["generator"]["latency_intended"]["count"] = count.into();
        v["generator"]["latency_actual"]["count"] = count.into();
        Record::from_json(&v.to_string())
    };
    assert!(with(7, 7).is_ok());
    let e = with(7, 8).unwrap_err().to_string();
    assert!(
        e.contains(
            "its intended latency histogram holds 7 values, generator.latency_intended.count 8"
        ),
        "{e}"
    );
    let e = with(1 << 60, 5).unwrap_err().to_string();
    assert!(
        e.contains("a histogram of 1152921504606846976 values; allowed up to 9007199254740992"),
        "{e}"
    );
}

#[test]
fn check_refuses_series_longer_than_a_command_writes_in_a_record_made_in_memory() {
    use tpslab_plan::limits::{FLOW_SAMPLES, OBSERVER_SAMPLES, RAMP_STEPS};
    let mut rec = Record::from_json(&fixture("watch.json")).unwrap();
    let Body::Watch(r) = &mut rec.body else {
        panic!("a watch")
    };
    r.observer.as_mut().unwrap().series.t_ms = (0..=OBSERVER_SAMPLES).map(|i| i as f64).collect();
    let e = rec.check().unwrap_err().to_string();
    assert!(e.contains("observer series of 20001 samples and"), "{e}");

    let mut rec = Record::from_json(&fixture("tcp_lab.json")).unwrap();
    let Body::Tcp(t) = &mut rec.body else {
        panic!("a tcp record")
    };
    t.runs[0].flow.samples = vec![t.runs[0].flow.samples[0]; FLOW_SAMPLES + 1];
    let e = rec.check().unwrap_err().to_string();
    assert!(
        e.contains("a flow's samples (360003) of more than 360002 items"),
        "{e}"
    );

    let mut rec = Record::from_json(&fixture("ramp.json")).unwrap();
    let Body::Ramp(r) = &mut rec.body else {
        panic!("a ramp")
    };
    r.run.steps = vec![r.run.steps[0].clone(); RAMP_STEPS + 1];
    let e = rec.check().unwrap_err().to_string();
    assert!(
        e.contains("a ramp's steps (201) of more than 200 items"),
        "{e}"
    );
}
