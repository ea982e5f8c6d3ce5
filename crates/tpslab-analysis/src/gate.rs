//! Exit-code gates for CI pipelines: `--fail-on loss>0.1%,invalid,errors` and `--strict`.
//! Pure: a condition list is parsed from text and judged against a run record.

use crate::record::RunRecord;

/// One `--fail-on` condition.
#[derive(Debug, Clone, PartialEq)]
pub enum FailOn {
    /// Loss in the measurement window above this share, percent.
    LossAbove(f64),
    /// The run was not valid evidence (the generator was a bottleneck).
    Invalid,
    /// Any send error of the generator or reply failure of the server.
    Errors,
}

/// Parses a comma-separated list: `loss>PCT%`, `invalid`, `errors`. The error names the
/// bad item and what is allowed.
pub fn parse(s: &str) -> Result<Vec<FailOn>, String> {
    let allowed = "allowed loss>PCT% (e.g. loss>0.1%), invalid, errors, comma-separated";
    s.split(',')
        .map(|item| {
            let t = item.trim();
            match t {
                "invalid" => Ok(FailOn::Invalid),
                "errors" => Ok(FailOn::Errors),
                _ => {
                    let v = t
                        .strip_prefix("loss>")
                        .and_then(|v| v.strip_suffix('%'))
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .filter(|v| v.is_finite() && (0.0..100.0).contains(v))
                        .ok_or_else(|| format!("--fail-on \"{t}\": {allowed}"))?;
                    Ok(FailOn::LossAbove(v))
                }
            }
        })
        .collect()
}

/// The conditions `rec` meets, each as a sentence with the figure behind it.
pub fn met(rec: &RunRecord, conds: &[FailOn]) -> Vec<String> {
    let g = rec.generator.as_ref();
    conds
        .iter()
        .filter_map(|c| match c {
            FailOn::LossAbove(max) => match g.and_then(|g| g.window_loss_pct) {
                Some(l) if l > *max => Some(format!(
                    "loss {l:.3} % in the window is above {max} % (--fail-on loss>{max}%)"
                )),
                Some(_) => None,
                // A gate that cannot be checked is not passed silently.
                None => Some(format!(
                    "loss not measured in this run (no replies expected, or nothing sent in the window): it cannot be shown below {max} % (--fail-on loss>{max}%)"
                )),
            },
            FailOn::Invalid => g
                .filter(|g| !g.valid)
                .map(|g| format!("the run is not valid evidence: {} (--fail-on invalid)", g.invalid_reasons.join("; "))),
            FailOn::Errors => {
                let send = g.map_or(0, |g| g.send_failed);
                let reply = rec.server.as_ref().map_or(0, |s| s.reply_failed);
                (send + reply > 0).then(|| {
                    format!("{send} datagrams failed to send, {reply} replies failed (--fail-on errors)")
                })
            }
        })
        .collect()
}

/// The exit code of a finished run: 130 interrupted; 3 not valid evidence under
/// `--strict`; 1 a `--fail-on` condition met; else 0. With the reasons, to print.
pub fn exit_code(rec: &RunRecord, conds: &[FailOn], strict: bool) -> (u8, Vec<String>) {
    if rec.interrupted {
        return (130, vec!["interrupted by a signal".into()]);
    }
    if strict && rec.generator.as_ref().is_some_and(|g| !g.valid) {
        return (3, vec!["the run is not valid evidence (--strict)".into()]);
    }
    let why = met(rec, conds);
    (if why.is_empty() { 0 } else { 1 }, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::GeneratorReport;

    fn rec(loss: f64, valid: bool, send_failed: u64) -> RunRecord {
        RunRecord {
            generator: Some(GeneratorReport {
                window_loss_pct: Some(loss),
                valid,
                send_failed,
                invalid_reasons: if valid { vec![] } else { vec!["behind".into()] },
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            parse("loss>0.1%, invalid,errors").unwrap(),
            vec![FailOn::LossAbove(0.1), FailOn::Invalid, FailOn::Errors]
        );
        for bad in ["loss>0.1", "loss>x%", "loss>100%", "lost>1%", ""] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("allowed loss>PCT%"), "{bad}: {e}");
        }
    }

    #[test]
    fn exit_codes_follow_the_table() {
        let conds = parse("loss>1%,errors").unwrap();
        assert_eq!(exit_code(&rec(0.5, true, 0), &conds, false).0, 0);
        assert_eq!(exit_code(&rec(1.5, true, 0), &conds, false).0, 1);
        assert_eq!(exit_code(&rec(0.0, true, 3), &conds, false).0, 1);
        assert_eq!(exit_code(&rec(0.0, false, 0), &conds, false).0, 0);
        assert_eq!(exit_code(&rec(0.0, false, 0), &conds, true).0, 3);
        // Loss not measured (one-way load): the gate is not passed silently.
        let mut oneway = rec(0.0, true, 0);
        oneway.generator.as_mut().unwrap().window_loss_pct = None;
        let (code, why) = exit_code(&oneway, &conds, false);
        assert_eq!(code, 1);
        assert!(why[0].contains("loss not measured"), "{why:?}");
        let mut r = rec(50.0, false, 9);
        r.interrupted = true;
        assert_eq!(exit_code(&r, &conds, true).0, 130);
        let (code, why) = exit_code(&rec(2.0, true, 0), &conds, false);
        assert_eq!(code, 1);
        assert!(why[0].contains("loss 2.000 %"), "{why:?}");
    }
}
