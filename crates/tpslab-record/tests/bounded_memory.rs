//! A record is read in memory proportional to its text (issue 53: a 196 MB record took
//! 6.4 GB through serde's buffered content and a JSON value of the whole record). The test
//! writes a `tcp --lab` record of about 60 MB (2 flows of 85 000 TCP_INFO samples), then
//! reads it in a child process of its own and takes the child's peak RSS (VmHWM).

use std::process::Command;
use tpslab_record::{Body, Record};

/// The tcp fixture with `n` samples per flow (the fixture's, repeated at later times).
fn big_tcp_record(n: usize) -> String {
    let p = format!(
        "{}/../tpslab-report/tests/fixtures/tcp_lab.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut rec = Record::from_json(&std::fs::read_to_string(p).unwrap()).unwrap();
    let Body::Tcp(t) = &mut rec.body else {
        panic!("a tcp record")
    };
    for run in &mut t.runs {
        let base = run.flow.samples.clone();
        let step = base.last().unwrap().t_ns + 1;
        run.flow.samples = (0..n)
            .map(|i| {
                let mut s = base[i % base.len()];
                s.t_ns += (i / base.len()) as u64 * step;
                s
            })
            .collect();
    }
    serde_json::to_string(&rec).unwrap()
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The child: reads the record named by `TPSLAB_BIG_RECORD` and prints its peak RSS.
#[test]
#[ignore = "run by a_big_record_is_read_in_memory_proportional_to_its_text"]
fn read_big_record_child() {
    let path = std::env::var("TPSLAB_BIG_RECORD").expect("run by the parent test");
    let text = std::fs::read_to_string(path).unwrap();
    let rec = Record::from_json(&text).unwrap();
    assert_eq!(rec.kind(), "tcp");
    println!("VmHWM_KIB={}", vm_hwm_kib());
}

#[test]
fn a_big_record_is_read_in_memory_proportional_to_its_text() {
    let text = big_tcp_record(85_000);
    let dir = std::env::temp_dir().join(format!("tpslab-bounded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.json");
    std::fs::write(&path, &text).unwrap();
    let size_kib = text.len() as u64 / 1024;
    drop(text);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "bounded_memory::read_big_record_child",
            "--ignored",
            "--nocapture",
        ])
        .env("TPSLAB_BIG_RECORD", &path)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hwm: u64 = stdout
        .lines()
        // libtest running one test at a time (RUST_TEST_THREADS=1) prints the test's
        // output on the line of its name: the figure is looked for anywhere in a line.
        .find_map(|l| l.split_once("VmHWM_KIB=").map(|(_, v)| v.trim()))
        .expect("the child's peak")
        .parse()
        .unwrap();
    eprintln!("a record of {size_kib} KiB read with a peak RSS of {hwm} KiB");
    assert!(size_kib > 50 << 10, "{size_kib} KiB: the record is big");
    // The text, the typed record (a sample is some 250 bytes typed, 370 as text) and the
    // test harness: well under 3x the text.
    assert!(
        hwm < 3 * size_kib,
        "a record of {size_kib} KiB read with a peak RSS of {hwm} KiB (allowed under 3x)"
    );
}
