//! `compare`: records of one kind side by side (what differs, what changed, whether it is
//! more than noise).

use anyhow::{anyhow, Result};
use std::path::PathBuf;
use tpslab_record::{Body, Record};

/// Reads every record named (a file written by `--json`, `-` for standard input, or
/// `history:ID` for a run of the history), then compares each later one with the first.
/// Returns the comparison's record (kind compare). Errors: one line naming the file or
/// the history entry (unreadable, not a record, kinds that differ, a kind compare does
/// not read).
pub fn compare(inputs: &[PathBuf]) -> Result<Record> {
    let started = crate::Started::now();
    let recs = inputs
        .iter()
        .map(|p| {
            let rec = match p.to_str().and_then(|s| s.strip_prefix("history:")) {
                Some(id) => {
                    let n: i64 = id.parse().map_err(|_| {
                        anyhow!("{}: allowed history:ID with a number ID", p.display())
                    })?;
                    crate::history::get(n)?
                }
                None => crate::input::read_record("", p)?,
            };
            Ok((p.display().to_string(), rec))
        })
        .collect::<Result<Vec<_>>>()?;
    let report = tpslab_analysis::compare::compare(&recs).map_err(|e| anyhow!(e))?;
    Ok(Record::with_meta(
        started.meta(false),
        Body::Compare(report),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tpslab-report/tests/fixtures"
        ))
        .join(name)
    }

    #[test]
    fn two_runs_compare_and_a_bad_history_id_is_named() {
        let run = fixture("udp_run.json");
        let rec = compare(&[run.clone(), run.clone()]).unwrap();
        assert_eq!(rec.kind(), "compare");
        let e = compare(&[run.clone(), "history:x".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "history:x: allowed history:ID with a number ID"
        );
        let e = compare(&[run, fixture("ramp.json")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("records of different kinds cannot be compared"),
            "{e}"
        );
    }
}
