//! Every parser of user input in the plan crate returns a value or a one-line error on any
//! input, never panics, and accepts only what its limits allow.

use proptest::prelude::*;
use std::time::Duration;
use tpslab_plan::limits::*;
use tpslab_plan::udp::{LoadConfig, ServerConfig};
use tpslab_plan::units::*;
use tpslab_plan::PlanError;

fn one_line(e: &PlanError) -> bool {
    let s = e.to_string();
    !s.is_empty() && !s.contains('\n')
}

proptest! {
    #[test]
    fn sizes_rates_and_pps_never_panic(s in "(\\PC|[\n\r\t]){0,40}") {
        for e in [
            parse_size("--x", &s).err(),
            parse_rate("--x", &s).err(),
            parse_pps("--x", &s).err(),
            parse_duration("--x", &s).err(),
        ]
        .into_iter()
        .flatten()
        {
            prop_assert!(one_line(&e));
        }
    }

    #[test]
    fn unit_like_strings_parse_to_positive_finite_values(
        s in "[0-9]{0,25}(\\.[0-9]{0,5})? ?(b|B|k|K|m|M|g|G|KiB|MiB|GiB|kbit|mbit|gbit|Mbps|MB/s|bit|x)?"
    ) {
        if let Ok(b) = parse_size("--x", &s) {
            prop_assert!(b > 0);
        }
        if let Ok(r) = parse_rate("--x", &s) {
            prop_assert!(r.is_finite() && r > 0.0);
        }
        if let Ok(r) = parse_pps("--rate", &s) {
            prop_assert!(r > 0.0 && r <= MAX_RATE_PPS);
        }
    }

    #[test]
    fn a_size_in_bytes_round_trips(v in 1u64..u64::MAX) {
        prop_assert_eq!(parse_size("--x", &v.to_string()), Ok(v));
        // KiB multiplies exactly or refuses (no wrap).
        let kib = parse_size("--x", &format!("{}KiB", v));
        match v.checked_mul(1024) {
            Some(b) => prop_assert_eq!(kib, Ok(b)),
            None => prop_assert!(kib.is_err()),
        }
    }

    #[test]
    fn a_seq_field_is_accepted_only_inside_the_payload(
        o in prop_oneof![0usize..70_000, any::<usize>()], l in prop_oneof![0usize..10, any::<usize>()], len in 0usize..70_000, junk in "[0-9:x -]{0,12}"
    ) {
        let spec = format!("{}:{}", o, l);
        let r = parse_seq_field("--seq-field", &spec, len);
        let fits = (1..=8).contains(&l) && o.checked_add(l).is_some_and(|e| e <= len);
        prop_assert_eq!(r.is_ok(), fits);
        if let Ok((a, b)) = r {
            prop_assert!(a + b <= len);
        }
        if let Err(e) = parse_seq_field("--seq-field", &junk, len) {
            prop_assert!(one_line(&e));
        }
    }

    #[test]
    fn a_limit_accepts_exactly_its_range(v in any::<u64>(), s in any::<String>()) {
        for lim in [SERVER_THREADS, BATCH, RCVBUF_BYTES, BUSY_POLL_US, LOAD_THREADS, SIZE_BYTES, BURST, REPEAT] {
            prop_assert_eq!(lim.check("--x", v).is_ok(), (lim.min..=lim.max).contains(&v));
            prop_assert_eq!(lim.parse("--x", &v.to_string()).is_ok(), (lim.min..=lim.max).contains(&v));
            if let Err(e) = lim.parse("--x", &s) {
                prop_assert!(one_line(&e));
            }
        }
    }

    #[test]
    fn kept_samples_never_panic(d in any::<u64>(), i in any::<u64>()) {
        let _ = check_kept_samples(Duration::from_nanos(d), Duration::from_nanos(i));
    }

    #[test]
    fn any_server_config_validates_without_panic(
        threads in any::<usize>(), batch in any::<usize>(), rcvbuf in any::<Option<u64>>(),
        work_ns in any::<u64>(), busy in any::<Option<u32>>()
    ) {
        let c = ServerConfig { threads, batch, rcvbuf, work: std::time::Duration::from_nanos(work_ns), busy_poll_us: busy, ..Default::default() };
        let ok = c.validate().is_ok();
        prop_assert_eq!(ok, (1..=1024).contains(&threads) && (1..=1024).contains(&batch)
            && rcvbuf.is_none_or(|b| (1..=(i32::MAX / 2) as u64).contains(&b))
            && work_ns <= 1_000_000_000 && busy.is_none_or(|b| b <= 1_000_000));
    }

    #[test]
    fn any_load_config_validates_without_panic(
        rate in any::<f64>(), size in any::<usize>(), dur in any::<u64>(), warm in any::<u64>(),
        burst in any::<u64>(), threads in any::<usize>(), plen in proptest::option::of(0usize..70_000),
        seq in any::<Option<(usize, usize)>>(), drain in any::<u64>()
    ) {
        let c = LoadConfig {
            rate_pps: rate,
            size_bytes: size,
            duration: Duration::from_nanos(dur),
            warmup: Duration::from_nanos(warm),
            burst,
            threads,
            payload: plen.map(|n| vec![0; n]),
            seq_field: seq,
            drain: Duration::from_nanos(drain),
            ..Default::default()
        };
        if let Err(e) = c.validate() {
            prop_assert!(one_line(&e));
        } else {
            // What passes is something the engine can run: a positive rate, a payload that
            // fits a datagram, a sequence field inside it.
            prop_assert!(rate > 0.0 && c.datagram_len() >= 1 && c.datagram_len() <= MAX_UDP_PAYLOAD);
            if let Some((o, l)) = c.seq_field {
                prop_assert!(o + l <= c.datagram_len());
            }
        }
    }
}
