use super::*;
use crate::run::{Environment, GeneratorReport, RunRecord};

fn run() -> RunRecord {
    RunRecord {
        tool_version: "0.1.0".into(),
        argv: vec!["tpslab".into(), "run".into(), "udp".into()],
        started_unix_ms: 1,
        elapsed_s: 2.5,
        environment: Environment {
            kernel: "6.18.0".into(),
            hostname: "h".into(),
            cpus: 2,
            ..Default::default()
        },
        generator: Some(GeneratorReport {
            sent: 7,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_record_round_trips_with_its_body_fields_at_the_top_level() {
    let rec = Record::new(Body::UdpRun(run()));
    let text = serde_json::to_string_pretty(&rec).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], RECORD_SCHEMA);
    assert_eq!(v["kind"], "udp_run");
    assert_eq!(v["meta"]["cpus"], 2);
    assert_eq!(v["generator"]["sent"], 7);
    let back = Record::from_json(&text).unwrap();
    assert_eq!(back.kind(), "udp_run");
    assert_eq!(back.meta, rec.meta);
    assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
}

#[test]
fn the_previous_releases_records_are_read() {
    let mut v = serde_json::to_value(run()).unwrap();
    v["schema"] = RUN_SCHEMA_V1.into();
    let rec = Record::from_json(&v.to_string()).unwrap();
    assert_eq!(rec.kind(), "udp_run");
    assert_eq!(rec.meta.kernel, "6.18.0");
    v["argv"] = serde_json::json!(["tpslab", "watch", "--port", "53"]);
    assert_eq!(Record::from_json(&v.to_string()).unwrap().kind(), "watch");
    // An untyped plan of the previous release does not stop the rest from reading.
    v["plan"] = serde_json::json!({"kind": "udp", "load": {"rate_pps": 5}});
    let rec = Record::from_json(&v.to_string()).unwrap();
    let Body::Watch(r) = rec.body else {
        panic!("watch")
    };
    assert!(r.plan.is_none());
    assert_eq!(r.generator.unwrap().sent, 7);
}

#[test]
fn a_record_holding_what_no_run_writes_is_refused() {
    let mut v = serde_json::to_value(Record::new(Body::UdpRun(run()))).unwrap();
    v["plan"] = serde_json::json!({"kind": "udp", "load": {"rate_pps": 5}});
    let e = Record::from_json(&v.to_string()).unwrap_err().to_string();
    assert!(
        e.starts_with("not a tpslab record"),
        "a bad plan in this release's record: {e}"
    );
    // A tcp record whose runs do not fit its mode would render what never ran.
    let tcp = include_str!("../../tpslab-report/tests/fixtures/tcp_lab.json");
    assert!(Record::from_json(tcp).is_ok());
    let mut v: serde_json::Value = serde_json::from_str(tcp).unwrap();
    v["plan"] = serde_json::json!({"mode": "send", "target": "127.0.0.1:5001",
        "duration_ns": 3_000_000_000u64, "interval_ns": 250_000_000u64, "skip_ns": 500_000_000u64,
        "sndbuf": null, "rcvbuf": null, "write_bytes": 131072, "target_rate_bps": null});
    let e = Record::from_json(&v.to_string()).unwrap_err().to_string();
    assert!(e.contains("with 2 run(s)"), "{e}");
    let sweep = include_str!("../../tpslab-report/tests/fixtures/ramp.json");
    let mut v: serde_json::Value = serde_json::from_str(sweep).unwrap();
    v["steps"][0]["users"] = 1_000_000_000.into();
    let e = Record::from_json(&v.to_string()).unwrap_err().to_string();
    assert!(e.contains("at most 10000"), "{e}");
}

#[test]
fn figures_no_run_could_write_are_refused_naming_the_field() {
    let fixture = |n: &str| {
        let p = format!(
            "{}/../tpslab-report/tests/fixtures/{n}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let refused = |v: &serde_json::Value, want: &str| {
        let e = Record::from_json(&v.to_string()).unwrap_err();
        assert!(matches!(e, RecordError::Invalid(_)), "{e}");
        let e = e.to_string();
        assert!(e.contains(want), "{e} (want {want})");
    };
    let run = fixture("udp_run.json");
    assert!(Record::from_json(&run.to_string()).is_ok());
    let mut v = run.clone();
    v["generator"]["window_loss_pct"] = 1e308.into();
    refused(
        &v,
        "at generator.window_loss_pct: allowed figures up to 9007199254740992",
    );
    v["generator"]["window_loss_pct"] = 100.5.into();
    refused(&v, "generator.window_loss_pct 100.5 %: allowed 0..=100 %");
    let mut v = run.clone();
    v["generator"]["attempted"] = u64::MAX.into();
    refused(&v, "18446744073709551615 at generator.attempted");
    let mut v = run.clone();
    v["ledger"]["request"]["attempted"] = (1u64 << 54).into();
    refused(&v, "at ledger.request.attempted");
    let mut v = run.clone();
    v["meta"]["cpus"] = 0.into();
    refused(&v, "meta.cpus 0: allowed 1..=8192");
    let mut v = run.clone();
    v["environment"]["cpus"] = 0.into();
    refused(&v, "environment.cpus 0: allowed 1..=8192");
    let mut v = run.clone();
    v["observer"]["series"]["t_ms"] = serde_json::json!([]);
    refused(&v, "values beside 0 sample times");
    let mut v = run.clone();
    v["observer"]["cpu_pct"]["cpu0"]["busy"] = 250.0.into();
    refused(&v, "observer.cpu_pct.cpu0.busy 250 %");
    let mut v = run.clone();
    v["elapsed_s"] = (-1.0).into();
    refused(&v, "elapsed_s -1 s");
    // An agent outside its fleet.
    let mut v = run.clone();
    let plan = tpslab_plan::fleet::FleetPlan::parse("target = \"10.0.0.1:9000\"\n").unwrap();
    v["agent"] = serde_json::json!({"index": 0, "of": 0, "plan_hash": plan.hash(),
        "plan": plan, "start_at_unix_ms": 1, "start_error_us": 0, "clock": null});
    refused(&v, "agent of 0: allowed 1..=1024 agents");
    v["agent"]["of"] = 2000.into();
    refused(&v, "agent of 2000: allowed 1..=1024 agents");
    v["agent"]["of"] = 2.into();
    v["agent"]["index"] = 2.into();
    refused(&v, "agent 2 of 2: allowed 0..=1");
    v["agent"]["index"] = 1.into();
    assert!(Record::from_json(&v.to_string()).is_ok());
    // A histogram whose header asks for more than tpslab's bounds.
    let mut v = run.clone();
    let h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 62, 5).unwrap();
    let text = crate::histogram::encode_histogram(&h);
    v["generator"]["histograms"] = serde_json::json!({"intended": text, "actual": text});
    refused(
        &v,
        "its intended latency histogram does not decode: a histogram of 1..=4611686018427387904 at 5 digits",
    );
    // An estimate of several runs without its spread (null is NaN); ramp steps of no time.
    let mut v = fixture("sweep.json");
    v["result"]["cells"][0]["figures"]["tps"]["stddev"] = serde_json::Value::Null;
    refused(&v, "without its stddev at result.cells.figures.tps");
    // Two runs have a spread and no interval (too few); three have both.
    let mut v = fixture("sweep.json");
    let tps = &mut v["result"]["cells"][0]["figures"]["tps"];
    tps["n"] = 2.into();
    tps["ci_lo"] = serde_json::Value::Null;
    tps["ci_hi"] = serde_json::Value::Null;
    assert!(Record::from_json(&v.to_string()).is_ok());
    v["result"]["cells"][0]["figures"]["tps"]["n"] = 3.into();
    refused(&v, "an estimate of 3 run(s) without its ci_lo");
    let mut v = fixture("sweep.json");
    v["runs"][0]["metrics"]["loss_pct"] = 101.into();
    refused(&v, "loss or CPU share of 101 %");
    let mut v = fixture("ramp.json");
    v["steps"][0]["measured_s"] = 0.into();
    refused(&v, "a ramp step measured for 0 s");
    // Identifiers are not figures: any u64 is one.
    let mut v = fixture("sweep.json");
    v["plan"]["seed"] = u64::MAX.into();
    assert!(Record::from_json(&v.to_string()).is_ok());
}

#[test]
fn an_unread_schema_is_named_with_the_ones_read() {
    let e = Record::from_json(r#"{"schema": "tpslab.ramp/1"}"#)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "schema \"tpslab.ramp/1\" is not read by this release; it reads tpslab.record/2, tpslab.run/1, tpslab.diagnose/1"
    );
    assert!(Record::from_json("{}")
        .unwrap_err()
        .to_string()
        .contains("schema \"\""));
    assert!(Record::from_json("not json")
        .unwrap_err()
        .to_string()
        .starts_with("not a tpslab record"));
}

#[test]
fn figures_not_measured_round_trip_as_null() {
    // One run: a mean, no spread, no interval (as `Estimate::of` gives it in analysis).
    let e = crate::estimate::Estimate {
        n: 1,
        mean: 5.0,
        min: 5.0,
        max: 5.0,
        ci_lo: f64::NAN,
        ci_hi: f64::NAN,
        ..Default::default()
    };
    let text = serde_json::to_string(&e).unwrap();
    assert!(text.contains("\"ci_lo\":null"), "{text}");
    let back: crate::estimate::Estimate = serde_json::from_str(&text).unwrap();
    assert!(back.ci_lo.is_nan() && back.ci_hi.is_nan());
    assert_eq!(back.mean, 5.0);
}

#[test]
fn a_bdp_record_with_a_fix_no_run_writes_is_refused() {
    // Its fixes are printed as `sysctl -w` lines: a hand-edited one is an error on read.
    let bdp = include_str!("../../tpslab-report/tests/fixtures/bdp.json");
    assert!(Record::from_json(bdp).is_ok());
    let v: serde_json::Value = serde_json::from_str(bdp).unwrap();
    for (path, value, want) in [
        ("/need/fixes/0/1", "4096 $(reboot) 1", "a bdp fix"),
        ("/need/fixes/0/0", "kernel.core_pattern", "a bdp fix"),
        ("/need/fixes/0/1", " ", "a bdp fix"),
        ("/rtt_s", "0", "a bdp record with an RTT"),
    ] {
        let mut v = v.clone();
        *v.pointer_mut(path).unwrap() = match value.parse::<f64>() {
            Ok(x) => x.into(),
            Err(_) => value.into(),
        };
        let e = Record::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(e.contains(want), "{path} = {value:?}: {e}");
    }
}
