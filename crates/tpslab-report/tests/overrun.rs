//! A ramp whose load ran past its plan says so (issue 35, "a plan is a promise"): one
//! OVERRUN line under the steps table, everything else byte for byte as without it. The
//! record is the ramp fixture (a real run, on time) with an overrun set, since a run of
//! this release does not overrun on demand.

use tpslab_record::ramp::Overrun;
use tpslab_record::{Body, Record};
use tpslab_report::{render, Format};

fn term(rec: &Record) -> String {
    let mut out = Vec::new();
    render(&mut out, rec, Format::Term, false).expect("render");
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn an_overrun_is_one_line_under_the_steps() {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ramp.json");
    let on_time = Record::from_json(&std::fs::read_to_string(p).unwrap()).unwrap();
    let mut late = on_time.clone();
    let Body::Ramp(r) = &mut late.body else {
        panic!("not a ramp")
    };
    r.run.load_sent_s = Some(12.4);
    r.run.overrun = Overrun::judge(11.0, Some(12.4), Some(17.3), Some(2));
    let (a, b) = (term(&on_time), term(&late));
    let line =
        "OVERRUN: load ran 12.4 s, planned 11.0 s: the host was busy (load average 17.3 on 2 CPUs)";
    assert!(!a.contains("OVERRUN"), "{a}");
    assert_eq!(b.matches("OVERRUN").count(), 1, "{b}");
    // Right after the table, before the generator and sources lines.
    let at = b.find(line).expect("the line");
    assert!(b[..at].ends_with("┘\n"), "{b}");
    assert_eq!(b.replacen(&format!("{line}\n"), "", 1), a);
    // The JSON keeps it (additive fields) and reads back the same.
    let mut json = Vec::new();
    render(&mut json, &late, Format::Json, false).unwrap();
    let back = Record::from_json(std::str::from_utf8(&json).unwrap()).unwrap();
    let Body::Ramp(r) = &back.body else {
        panic!("not a ramp")
    };
    assert_eq!(r.run.load_sent_s, Some(12.4));
    assert_eq!(r.run.overrun.as_ref().map(|o| o.load_end_s), Some(12.4));
    assert_eq!(term(&back), b);
}
