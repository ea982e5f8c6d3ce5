//! Every parser must return Ok or Err on arbitrary input, never panic.

use proptest::prelude::*;
use tpslab_proc::*;

fn all(s: &str) {
    let _ = parse_snmp(s.as_bytes(), "f");
    let _ = parse_snmp6(s.as_bytes(), "f");
    let _ = parse_udp(s.as_bytes(), "f");
    let _ = parse_softnet(s.as_bytes(), "f");
    let _ = parse_dev(s.as_bytes(), "f");
    let _ = parse_stat(s.as_bytes(), "f");
    let _ = parse_status(s.as_bytes(), "f");
    let _ = parse_task_stat(s, "f");
    let _ = parse_schedstat(s.as_bytes(), "f");
    let _ = parse_cpu_list(s);
}

proptest! {
    #[test]
    fn arbitrary_strings(s in any::<String>()) {
        all(&s);
    }

    // Strings made of /proc-ish characters hit deeper code paths.
    #[test]
    fn procish_strings(s in "[0-9a-fA-F:() \\-,\t\n\\[\\]UdpIcmTcpsl]{0,200}") {
        all(&s);
    }

    #[test]
    fn arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_snmp(&b[..], "f");
        let _ = parse_udp(&b[..], "f");
        let _ = parse_softnet(&b[..], "f");
        let _ = parse_dev(&b[..], "f");
        let _ = parse_stat(&b[..], "f");
        let _ = parse_status(&b[..], "f");
        let _ = parse_schedstat(&b[..], "f");
        let _ = parse_snmp6(&b[..], "f");
    }

    // Mutations of real fixtures: truncate at an arbitrary byte and splice junk.
    #[test]
    fn mutated_fixtures(cut in 0usize..4000, junk in "[ -~]{0,8}", pos in 0usize..4000) {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/linux-6.18/");
        for f in ["snmp", "snmp6", "udp", "udp6", "softnet_stat", "dev", "stat", "pid_status", "pid_stat", "schedstat"] {
            let text = std::fs::read_to_string(format!("{dir}{f}")).unwrap();
            let mut t: String = text.chars().take(cut).collect();
            let p = t.char_indices().nth(pos).map(|(i, _)| i).unwrap_or(t.len());
            t.insert_str(p, &junk);
            all(&t);
        }
    }
}
