//! Exit-code gates for CI pipelines: `--fail-on loss>0.1%,invalid,errors` and `--strict`,
//! and thresholds on figures (`p99<20ms`, `errors<0.1%`, `rps>=5000`: [`gate_bound`]).
//! Pure: a condition list is parsed from text and judged against a run record.

use tpslab_record::RunRecord;

#[path = "gate_bound.rs"]
pub mod gate_bound;
pub use gate_bound::{Bound, Figure, Figures};

/// One `--fail-on` condition.
#[derive(Debug, Clone, PartialEq)]
pub enum FailOn {
    /// Loss above this share, percent: datagrams unanswered in the measurement window
    /// (UDP runs), requests failed or timed out (ramp).
    LossAbove(f64),
    /// The run was not valid evidence (the generator was a bottleneck; no reply at all).
    Invalid,
    /// Any failure: send errors or reply failures, or nothing arrived (UDP: no reply to
    /// any datagram sent, or all of them to a port with no socket), failed requests
    /// (ramp), runs with either (sweep).
    Errors,
    /// A `--target-rate` was not reached (tcp).
    Target,
    /// A threshold on a figure (`p99<20ms`, `errors<0.1%`, `rps>=5000`): the condition
    /// that must hold (k6's meaning); fails when it does not, or was not measured.
    Bound(Bound),
}

impl FailOn {
    /// The condition's name as written in `--fail-on` (`loss` for every `loss>PCT%`).
    pub fn name(&self) -> &'static str {
        match self {
            FailOn::LossAbove(_) => "loss",
            FailOn::Invalid => "invalid",
            FailOn::Errors => "errors",
            FailOn::Target => "target",
            FailOn::Bound(b) => b.figure.kind(),
        }
    }

    /// As written in `--fail-on` (`loss>1%`, `p99<20ms`, `errors`).
    pub fn text(&self) -> String {
        match self {
            FailOn::LossAbove(v) => format!("loss>{v}%"),
            FailOn::Bound(b) => b.text.clone(),
            c => c.name().into(),
        }
    }
}

/// The `--fail-on` conditions each command can judge.
pub mod applies {
    /// load, run, diagnose.
    pub const UDP_RUN: &[&str] = &["loss", "invalid", "errors"];
    /// ramp tcp|udp.
    pub const RAMP: &[&str] = &["loss", "invalid", "errors"];
    /// tcp.
    pub const TCP: &[&str] = &["target", "invalid"];
    /// sweep.
    pub const SWEEP: &[&str] = &["invalid", "errors"];
    /// load http: thresholds on latency, the error share and the rate, and any failure.
    pub const LOAD_HTTP: &[&str] = &["latency", "error_share", "rps", "errors"];
    /// capacity udp|tcp|http: a floor on the rate the search sustained (`rps>=N`).
    pub const CAPACITY: &[&str] = &["rps"];
}

/// `--fail-on VALUE` as a shell reads it back: the value quoted (`--fail-on
/// 'loss>1%'`), since `>` unquoted is a redirection and `%`, `*` or spaces may be special.
pub fn shown(value: &str) -> String {
    match shlex::try_quote(value) {
        Ok(q) => format!("--fail-on {q}"),
        // A NUL byte cannot be quoted for a shell: shown escaped.
        Err(_) => format!("--fail-on {value:?}"),
    }
}

/// Parses a comma-separated list of the conditions in `allowed` (names from
/// [`applies`]): `loss>PCT%`, `invalid`, `errors`, `target`. The error names the bad item
/// as a shell would need it written ([`shown`]: `--fail-on 'loss>0.1'`) and what is
/// allowed; `loss` alone (what the shell passes of an unquoted `--fail-on loss>1%`,
/// writing a file named `1%`) says to quote it and why.
pub fn parse(s: &str, allowed: &[&str]) -> Result<Vec<FailOn>, String> {
    let list = allowed
        .iter()
        .map(|a| match *a {
            "loss" => "'loss>PCT%' (e.g. --fail-on 'loss>0.1%')",
            "latency" => "'pNN<DURATION' (p50, p90, p99, p99.9, max; e.g. 'p99<20ms')",
            "error_share" => "'errors<PCT%'",
            "rps" => "'rps>=N' (requests/s)",
            a => a,
        })
        .collect::<Vec<_>>()
        .join(", ");
    let allowed_text = format!("allowed {list}, comma-separated");
    s.split(',')
        .map(|item| {
            let t = item.trim();
            let c = match Bound::parse(t) {
                Some(Ok(b)) => FailOn::Bound(b),
                Some(Err(why)) => return Err(format!("{}: {why}; {allowed_text}", shown(t))),
                None => match t {
                "invalid" => FailOn::Invalid,
                "errors" => FailOn::Errors,
                "target" => FailOn::Target,
                "loss" if allowed.contains(&"loss") => {
                    return Err(format!(
                        "{}: no threshold; write it in quotes, --fail-on 'loss>1%': unquoted, the shell reads > as a redirection, passes only 'loss' and writes a file named after the threshold (1%)",
                        shown(s)
                    ))
                }
                _ => {
                    let v = t
                        .strip_prefix("loss>")
                        .and_then(|v| v.strip_suffix('%'))
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .filter(|v| v.is_finite() && (0.0..100.0).contains(v))
                        .ok_or_else(|| format!("{}: {allowed_text}", shown(t)))?;
                    FailOn::LossAbove(v)
                }
                },
            };
            if !allowed.contains(&c.name()) {
                return Err(format!(
                    "{}: this command cannot judge it; {allowed_text}",
                    shown(t)
                ));
            }
            Ok(c)
        })
        .collect()
}

/// A loss share, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Loss {
    /// Percent, and what it counts ("in the window", "of requests failed or timed out").
    Measured(f64, String),
    /// Why the loss was not measured.
    NotMeasured(String),
}

impl Default for Loss {
    fn default() -> Self {
        Loss::NotMeasured("no loss is measured by this command".into())
    }
}

/// What a finished run says for the gates, whatever its kind: each field a judgement with
/// the figure behind it, made by the kind's pure function ([`udp_outcome`], and the ramp,
/// tcp and sweep ones beside their records).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Ended by SIGINT/SIGTERM before its planned end.
    pub interrupted: bool,
    /// Why the run is not valid evidence (empty: valid).
    pub invalid: Vec<String>,
    /// The loss.
    pub loss: Loss,
    /// Failures, as a sentence with their counts (None: none).
    pub errors: Option<String>,
    /// The target: None when none was set; Some(None) reached; Some(Some(why)) missed.
    pub target: Option<Option<String>>,
    /// The figures thresholds are judged on (none measured by default).
    pub figures: Figures,
}

/// The outcome of a UDP run record (`load`, `run`, `diagnose`): window loss, generator
/// validity, send and reply failures.
pub fn udp_outcome(rec: &RunRecord) -> Outcome {
    let g = rec.generator.as_ref();
    let send = g.map_or(0, |g| g.send_failed);
    let reply = rec.server.as_ref().map_or(0, |s| s.reply_failed);
    Outcome {
        interrupted: rec.interrupted,
        invalid: g
            .filter(|g| !g.valid)
            .map(|g| g.invalid_reasons.clone())
            .unwrap_or_default(),
        loss: match g.and_then(|g| g.window_loss_pct) {
            Some(l) => Loss::Measured(l, "in the window".into()),
            None => Loss::NotMeasured("no replies expected, or nothing sent in the window".into()),
        },
        errors: udp_errors(rec, send, reply),
        target: None,
        figures: Figures::default(),
    }
}

/// The outcome of a capacity search for `--fail-on 'rps>=N'` (a floor on the capacity
/// found): the rate it sustained (`Conclusion::bounds`), none when no rate passed.
pub fn capacity_outcome(rec: &tpslab_record::capacity::CapacityRecord) -> Outcome {
    Outcome {
        interrupted: rec.interrupted,
        figures: Figures {
            rps: rec
                .conclusion
                .bounds()
                .0
                .map(|r| (r, "sustained by the search".to_string())),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A UDP run's failures as a sentence: send and reply failures, and nothing arrived (the
/// kernel accepted datagrams and no reply came back though replies were expected, or
/// every one found no socket on the port: the ledger's `no_ports`, Udp: NoPorts); None
/// when there were none.
fn udp_errors(rec: &RunRecord, send: u64, reply: u64) -> Option<String> {
    let g = rec.generator.as_ref()?;
    let no_ports = rec
        .ledger
        .as_ref()
        .map_or(0, |l| l.request.count("no_ports"));
    let where_ = if no_ports > 0 {
        format!(" ({no_ports} found no socket on the target's port: Udp NoPorts, no listener)")
    } else {
        String::new()
    };
    let nothing = if g.sent == 0 {
        None
    } else if g.window_loss_pct.is_some() && g.replies_read == 0 {
        Some(format!(
            "nothing arrived: {} datagrams sent, no reply read{where_}",
            g.sent
        ))
    } else if no_ports >= g.sent {
        Some(format!(
            "nothing arrived: every one of the {} datagrams sent found no socket on the target's port (Udp NoPorts: no listener)",
            g.sent
        ))
    } else {
        None
    };
    let failed = (send + reply > 0)
        .then(|| format!("{send} datagrams failed to send, {reply} replies failed"));
    match (failed, nothing) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// The conditions `o` meets, each as a sentence with the figure behind it.
pub fn met(o: &Outcome, conds: &[FailOn]) -> Vec<String> {
    conds
        .iter()
        .filter_map(|c| match c {
            FailOn::LossAbove(max) => match &o.loss {
                Loss::Measured(l, what) if l > max => Some(format!(
                    "loss {l:.3} % {what} is above {max} % ({})",
                    shown(&format!("loss>{max}%"))
                )),
                Loss::Measured(..) => None,
                // A gate that cannot be checked is not passed silently.
                Loss::NotMeasured(why) => Some(format!(
                    "loss not measured in this run ({why}): it cannot be shown below {max} % ({})",
                    shown(&format!("loss>{max}%"))
                )),
            },
            FailOn::Invalid => (!o.invalid.is_empty()).then(|| {
                format!(
                    "the run is not valid evidence: {} (--fail-on invalid)",
                    o.invalid.join("; ")
                )
            }),
            FailOn::Errors => o.errors.as_ref().map(|e| format!("{e} (--fail-on errors)")),
            FailOn::Target => match &o.target {
                None => Some("no target was set (--target-rate): it cannot be shown reached (--fail-on target)".into()),
                Some(None) => None,
                Some(Some(why)) => Some(format!("{why} (--fail-on target)")),
            },
            FailOn::Bound(b) => match o.figures.value(b.figure) {
                Some((v, read)) if !b.passes(v) => {
                    let m = b.reading().map_or(String::new(), |m| format!(": {m}"));
                    Some(format!("{read} fails the threshold ({}{m})", shown(&b.text)))
                }
                Some(_) => None,
                None => Some(format!(
                    "{} not measured in this run: the threshold cannot be shown met ({})",
                    b.figure.kind(),
                    shown(&b.text)
                )),
            },
        })
        .collect()
}

/// Each condition as written with whether the run passes it and the figure behind it, in
/// the order given, k6's summary: (passed, `p99<20ms`, `p99 9.40 ms`). A condition without
/// a figure (`errors`, `invalid`) reads as its failure's sentence, or `none`.
pub fn marks(o: &Outcome, conds: &[FailOn]) -> Vec<(bool, String, String)> {
    conds
        .iter()
        .map(|c| {
            let why = met(o, std::slice::from_ref(c));
            let read = match c {
                FailOn::Bound(b) => {
                    let r = o
                        .figures
                        .value(b.figure)
                        .map_or_else(|| "not measured".to_string(), |(_, r)| r);
                    match b.reading() {
                        Some(m) => format!("{r} ({m})"),
                        None => r,
                    }
                }
                _ => why.first().cloned().unwrap_or_else(|| "none".into()),
            };
            (why.is_empty(), c.text(), read)
        })
        .collect()
}

/// The exit code of a finished run: 130 interrupted; 3 not valid evidence under
/// `--strict`; 1 a `--fail-on` condition met; else 0. With the reasons, to print.
pub fn exit_code(o: &Outcome, conds: &[FailOn], strict: bool) -> (u8, Vec<String>) {
    if o.interrupted {
        return (130, vec!["interrupted by a signal".into()]);
    }
    if strict && !o.invalid.is_empty() {
        return (
            3,
            vec![format!(
                "the run is not valid evidence: {} (--strict)",
                o.invalid.join("; ")
            )],
        );
    }
    let why = met(o, conds);
    (if why.is_empty() { 0 } else { 1 }, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::GeneratorReport;

    fn rec(loss: f64, valid: bool, send_failed: u64) -> Outcome {
        udp_outcome(&RunRecord {
            generator: Some(GeneratorReport {
                window_loss_pct: Some(loss),
                valid,
                send_failed,
                sent: 1000,
                replies_read: 1000,
                invalid_reasons: if valid { vec![] } else { vec!["behind".into()] },
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            parse("loss>0.1%, invalid,errors", applies::UDP_RUN).unwrap(),
            vec![FailOn::LossAbove(0.1), FailOn::Invalid, FailOn::Errors]
        );
        for bad in ["loss>0.1", "loss>x%", "loss>100%", "lost>1%", ""] {
            let e = parse(bad, applies::UDP_RUN).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "--fail-on {}: allowed 'loss>PCT%'",
                    shlex::try_quote(bad).unwrap()
                )),
                "{bad}: {e}"
            );
        }
        // What the shell passes of an unquoted `--fail-on loss>1%`: told to quote it.
        for unquoted in ["loss", "invalid,loss"] {
            let e = parse(unquoted, applies::UDP_RUN).unwrap_err();
            assert!(
                e.contains("no threshold; write it in quotes, --fail-on 'loss>1%'")
                    && e.contains("the shell reads > as a redirection"),
                "{e}"
            );
        }
        // A command that cannot judge loss refuses `loss` as it refuses any loss gate.
        let e = parse("loss", applies::TCP).unwrap_err();
        assert!(
            e.starts_with("--fail-on loss: allowed target, invalid"),
            "{e}"
        );
    }

    #[test]
    fn exit_codes_follow_the_table() {
        let conds = parse("loss>1%,errors", applies::UDP_RUN).unwrap();
        assert_eq!(exit_code(&rec(0.5, true, 0), &conds, false).0, 0);
        assert_eq!(exit_code(&rec(1.5, true, 0), &conds, false).0, 1);
        assert_eq!(exit_code(&rec(0.0, true, 3), &conds, false).0, 1);
        assert_eq!(exit_code(&rec(0.0, false, 0), &conds, false).0, 0);
        assert_eq!(exit_code(&rec(0.0, false, 0), &conds, true).0, 3);
        // Loss not measured (one-way load): the gate is not passed silently.
        let mut oneway = rec(0.0, true, 0);
        oneway.loss = Loss::NotMeasured("no replies expected".into());
        let (code, why) = exit_code(&oneway, &conds, false);
        assert_eq!(code, 1);
        assert!(why[0].contains("loss not measured"), "{why:?}");
        let mut r = rec(50.0, false, 9);
        r.interrupted = true;
        assert_eq!(exit_code(&r, &conds, true).0, 130);
        let (code, why) = exit_code(&rec(2.0, true, 0), &conds, false);
        assert_eq!(code, 1);
        assert!(why[0].contains("loss 2.000 % in the window"), "{why:?}");
    }

    /// A closed UDP port: every datagram sent, none answered (100 % loss), the valid
    /// evidence of a generator that kept its schedule; `--fail-on errors,invalid` used to
    /// exit 0 there.
    #[test]
    fn nothing_arriving_is_an_error() {
        let conds = parse("errors,invalid", applies::UDP_RUN).unwrap();
        let closed_sent = |replies: bool, no_ports: u64, sent: u64| {
            let ledger = tpslab_record::ledger::Ledger {
                request: tpslab_record::ledger::LedgerPath {
                    attempted: 8000,
                    rows: vec![tpslab_record::ledger::LedgerRow {
                        layer: "no_ports".into(),
                        label: "no listener on the port".into(),
                        count: no_ports,
                        source: "Udp: NoPorts".into(),
                    }],
                    unattributed: Some(0),
                    inconsistent: None,
                    notes: vec![],
                },
                reply: None,
            };
            udp_outcome(&RunRecord {
                generator: Some(GeneratorReport {
                    window_loss_pct: replies.then_some(100.0),
                    valid: true,
                    sent,
                    replies_read: 0,
                    ..Default::default()
                }),
                ledger: Some(ledger),
                ..Default::default()
            })
        };
        let closed = |replies: bool, no_ports: u64| closed_sent(replies, no_ports, 8000);
        // Replies expected, none read.
        let (code, why) = exit_code(&closed(true, 8000), &conds, false);
        assert_eq!(code, 1, "{why:?}");
        assert!(
            why[0].contains(
                "nothing arrived: 8000 datagrams sent, no reply read (8000 found no socket"
            ),
            "{why:?}"
        );
        // One way, every datagram to a port with no socket.
        let (code, why) = exit_code(&closed(false, 8000), &conds, false);
        assert_eq!(code, 1, "{why:?}");
        assert!(why[0].contains("no listener"), "{why:?}");
        // One way, delivered (no NoPorts): nothing to say of arrival.
        assert_eq!(exit_code(&closed(false, 0), &conds, false).0, 0);
        // Nothing sent at all is not "nothing arrived".
        let none = closed_sent(true, 0, 0);
        assert_eq!(none.errors, None);
        assert_eq!(exit_code(&none, &conds, false).0, 0);
        // Without the errors gate the exit code stays 0 (the run is valid evidence).
        let invalid_only = parse("invalid", applies::UDP_RUN).unwrap();
        assert_eq!(exit_code(&closed(true, 8000), &invalid_only, false).0, 0);
    }

    #[test]
    fn a_condition_a_command_cannot_judge_is_refused() {
        let e = parse("loss>1%", applies::TCP).unwrap_err();
        assert!(
            e.contains("cannot judge") && e.contains("allowed target, invalid"),
            "{e}"
        );
        assert_eq!(parse("target", applies::TCP).unwrap(), vec![FailOn::Target]);
        assert!(parse("target", applies::UDP_RUN).is_err());
    }

    #[test]
    fn a_target_gate_without_a_target_is_not_passed_silently() {
        let conds = [FailOn::Target];
        let mut o = Outcome::default();
        assert_eq!(exit_code(&o, &conds, false).0, 1);
        o.target = Some(None);
        assert_eq!(exit_code(&o, &conds, false).0, 0);
        o.target = Some(Some("19.9 Mbit/s, short of the 80.0 Mbit/s target".into()));
        let (code, why) = exit_code(&o, &conds, false);
        assert_eq!(code, 1);
        assert!(why[0].contains("short of"), "{why:?}");
    }
}
