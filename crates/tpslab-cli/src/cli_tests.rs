//! The command line as a whole: every size, rate and duration flag of every command takes
//! its kind's forms and refuses with its kind's line; errors on flags given in the wrong
//! place or left at a default say so.

use super::*;
use crate::flags::units::RATE;
use crate::flags::{BITRATE, DURATION, RATE_OR_BITRATE, SIZE};
use clap::CommandFactory;
use std::any::TypeId;
use std::ffi::OsString;
use std::time::Duration;
use tpslab_plan::units;

/// Every argument of the command tree, with the command it is on (`tpslab probe idle`).
fn all_args() -> Vec<(String, clap::Arg)> {
    fn walk(c: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg)>) {
        for a in c.get_arguments() {
            out.push((path.to_string(), a.clone()));
        }
        for s in c.get_subcommands() {
            walk(s, &format!("{path} {}", s.get_name()), out);
        }
    }
    let mut out = vec![];
    walk(&Cli::command(), "tpslab", &mut out);
    out
}

/// Words of a flag's name that say it holds a size, a rate or a duration.
const SIZE_WORDS: &[&str] = &["size", "buf", "rcvbuf", "sndbuf", "buffer", "bytes"];
const RATE_WORDS: &[&str] = &["rate", "pps"];
const DURATION_WORDS: &[&str] = &[
    "duration",
    "interval",
    "timeout",
    "rtt",
    "warmup",
    "drain",
    "every",
    "slack",
    "think",
    "work",
    "serial",
    "skip",
    "wait",
    "resolution",
    "in",
    "min",
    "max",
    "validate",
    "idle",
    "delay",
    "age",
];

/// Flags whose name looks like one of the kinds but are not, and why.
const NOT_OF_A_KIND: &[(&str, &str)] = &[
    ("pacing-slack", "auto, 0 (exact) or a DURATION"),
    ("min-idle", "a count of connections"),
    (
        "resolution",
        "capacity's: a percentage (5%); probe idle's is a DURATION",
    ),
    (
        "lab-on-idle",
        "what the middlebox does: drop, reset or reopen",
    ),
    (
        "work-ns",
        "hidden previous name of --work: nanoseconds or a duration",
    ),
    (
        "serial-ns",
        "hidden previous name of --serial: nanoseconds or a duration",
    ),
];

fn value_name(a: &clap::Arg) -> Option<&str> {
    match a.get_value_names() {
        Some([n]) => Some(n.as_str()),
        _ => None,
    }
}

/// Parses `--LONG=VALUE` with the parser of `a` alone: the value, or tpslab's error line.
fn parse_with(a: &clap::Arg, value: &str) -> Result<clap::ArgMatches, String> {
    let long = a.get_long().expect("a flag");
    let mut cmd = clap::Command::new("t").arg(
        clap::Arg::new("v")
            .long(&*Box::leak(long.to_string().into_boxed_str()))
            .value_parser(a.get_value_parser().clone()),
    );
    // `--rcvbuf=-1`: as a separate word clap would read -1 as a flag.
    let args: Vec<OsString> = ["t".into(), format!("--{long}={value}").into()].into();
    cmd.try_get_matches_from_mut(&args)
        .map_err(|e| usage_error(&cmd, e, &args))
}

#[test]
fn every_size_rate_and_duration_flag_takes_its_kinds_forms_and_refuses_alike() {
    let size_ok: &[(&str, u64)] = &[
        ("2MiB", 2 << 20),
        ("64KiB", 65536),
        ("1000000", 1_000_000),
        ("1MB", 1_000_000),
        ("4k", 4096),
    ];
    let rate_ok: &[(&str, f64)] = &[
        ("10000", 1e4),
        ("10k", 1e4),
        ("1.5M", 1.5e6),
        ("100kpps", 1e5),
        ("max", f64::INFINITY),
    ];
    let bitrate_ok: &[(&str, f64)] = &[("80mbit", 80e6), ("1gbit", 1e9), ("10MB/s", 80e6)];
    let duration_ok: &[(&str, Duration)] = &[
        ("200us", Duration::from_micros(200)),
        ("10ms", Duration::from_millis(10)),
        ("2s", Duration::from_secs(2)),
        ("1.5s", Duration::from_millis(1500)),
        ("1m", Duration::from_secs(60)),
        ("1h30m", Duration::from_secs(5400)),
    ];
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut untagged = vec![];
    for (path, a) in all_args() {
        let Some(long) = a.get_long() else { continue };
        let flag = format!("{path} --{long}");
        let words: Vec<&str> = long.split('-').collect();
        let looks = |kind: &[&str]| words.iter().any(|w| kind.contains(w));
        let exempt = NOT_OF_A_KIND.iter().any(|(n, _)| *n == long);
        let is_duration_type = a.get_value_parser().type_id() == TypeId::of::<Duration>();
        let kind = value_name(&a)
            .filter(|n| [SIZE, RATE, BITRATE, DURATION, RATE_OR_BITRATE].contains(n))
            .map(str::to_string);
        let Some(kind) = kind.as_deref() else {
            let takes = a.get_action().takes_values();
            if !exempt
                && takes
                && (is_duration_type
                    || looks(SIZE_WORDS)
                    || looks(RATE_WORDS)
                    || looks(DURATION_WORDS))
            {
                untagged.push(flag);
            }
            continue;
        };
        *seen.entry(kind.to_string()).or_default() += 1;
        // The parser returns the kind's type: the flag uses the kind's parser.
        let want_type = match kind {
            SIZE => TypeId::of::<u64>(),
            RATE | BITRATE => TypeId::of::<f64>(),
            DURATION => TypeId::of::<Duration>(),
            _ => TypeId::of::<String>(),
        };
        assert!(
            a.get_value_parser().type_id() == want_type,
            "{flag} <{kind}>: not the {kind} parser's type"
        );
        let ok = |v: &str| parse_with(&a, v).unwrap_or_else(|e| panic!("{flag} {v}: refused: {e}"));
        let forms: String = match kind {
            SIZE => {
                for (v, b) in size_ok {
                    assert_eq!(ok(v).get_one::<u64>("v"), Some(b), "{flag} {v}");
                }
                units::SIZE_FORMS.into()
            }
            RATE => {
                for (v, r) in rate_ok {
                    assert_eq!(ok(v).get_one::<f64>("v"), Some(r), "{flag} {v}");
                }
                units::pps_forms()
            }
            BITRATE => {
                for (v, r) in bitrate_ok {
                    assert_eq!(ok(v).get_one::<f64>("v"), Some(r), "{flag} {v}");
                }
                units::BITRATE_FORMS.into()
            }
            DURATION => {
                for (v, d) in duration_ok {
                    assert_eq!(ok(v).get_one::<Duration>("v"), Some(d), "{flag} {v}");
                }
                units::DURATION_FORMS.into()
            }
            _ => {
                for v in ["10k", "1.5M", "100kpps", "80mbit", "10MB/s"] {
                    assert_eq!(
                        ok(v).get_one::<String>("v").map(String::as_str),
                        Some(v),
                        "{flag} {v}"
                    );
                }
                format!(
                    "{} (--for udp), or {} (--for tcp)",
                    units::pps_forms(),
                    units::BITRATE_FORMS
                )
            }
        };
        // Its default is one of its forms.
        for d in a.get_default_values() {
            ok(&d.to_string_lossy());
        }
        let bad: &[&str] = match kind {
            SIZE => &["2x", "1.5MiB", "-1", "0", "2 MiBs"],
            RATE => &["10m", "fast", "0", "-5k", "80mbit"],
            BITRATE => &["80", "10k", "fast", "0mbit"],
            DURATION => &["5", "2x", "1.5", "-1s", "10 parsecs"],
            _ => &["fast", "10x", "0"],
        };
        for v in bad {
            let e = parse_with(&a, v)
                .err()
                .unwrap_or_else(|| panic!("{flag} {v}: accepted"));
            assert_eq!(
                e,
                format!("tpslab: error: --{long} {v}: allowed {forms}\n"),
                "{flag}"
            );
        }
    }
    assert!(
        untagged.is_empty(),
        "flags that look like a size, rate or duration without the kind's value name and \
         parser (or a reason in NOT_OF_A_KIND): {untagged:#?}"
    );
    // The table reached every kind (a rename of the value names would empty it).
    for (kind, at_least) in [(SIZE, 10), (RATE, 3), (BITRATE, 3), (DURATION, 40)] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) >= at_least,
            "{kind}: {seen:?}"
        );
    }
}

/// The error tpslab prints for `words` (after `tpslab`), from the real command tree.
fn usage(words: &[&str]) -> String {
    let mut cmd = Cli::command();
    let args: Vec<OsString> = std::iter::once("tpslab")
        .chain(words.iter().copied())
        .map(OsString::from)
        .collect();
    match cmd.try_get_matches_from_mut(&args) {
        Ok(_) => panic!("{words:?}: accepted"),
        Err(e) => usage_error(&cmd, e, &args),
    }
}

#[test]
fn a_flag_of_a_subcommand_given_above_it_names_where_it_belongs() {
    for (words, tip) in [
        (
            &["diagnose", "--pid", "42"][..],
            "tip: --pid is a flag of 'tpslab diagnose udp', not of 'tpslab diagnose': write it after 'udp'",
        ),
        (
            &["diagnose", "--port=9000", "--json", "udp"][..],
            "tip: --port is a flag of 'tpslab diagnose udp', not of 'tpslab diagnose'",
        ),
        (
            &["load", "--rate", "10k", "udp", "127.0.0.1:9"][..],
            "tip: --rate is a flag of 'tpslab load udp' and 'tpslab load http', not of 'tpslab load'",
        ),
        (
            &["ramp", "--users", "1..8", "tcp"][..],
            "tip: --users is a flag of 'tpslab ramp tcp', 'tpslab ramp udp' and 'tpslab ramp http', not of 'tpslab ramp': write it after the subcommand",
        ),
        (
            &["--pid", "42", "watch"][..],
            "tip: --pid is a flag of 'tpslab load udp', 'tpslab load http', 'tpslab watch', 'tpslab ramp tcp', 'tpslab ramp udp', 'tpslab ramp http', 'tpslab capacity udp', 'tpslab capacity http', 'tpslab capacity tcp' and 'tpslab diagnose udp', not of 'tpslab'",
        ),
    ] {
        let e = usage(words);
        assert!(e.contains("unexpected argument"), "{words:?}: {e}");
        assert!(e.contains(tip), "{words:?}: {e}");
    }
    // A flag no command below takes gets clap's message alone, no invented tip.
    let e = usage(&["diagnose", "--no-such-flag"]);
    assert!(!e.contains("is a flag of"), "{e}");
    // The value of a flag that happens to be a command's name does not move the search.
    let e = usage(&["serve", "udp", "--bind", "127.0.0.1:1", "--pid", "3"]);
    assert!(!e.contains("is a flag of"), "{e}");
}
