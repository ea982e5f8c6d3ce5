//! `load http`'s judgements: the outcome its `--fail-on` gates read (latency, the error
//! share, the rate).

use tpslab_record::load_http::LoadHttpRecord;

use crate::gate::{Figures, Outcome};

/// Requests that failed or were answered 4xx/5xx, and all requests that ended (answered
/// or failed or unanswered at the end).
pub fn failed_of(rec: &LoadHttpRecord) -> (u64, u64) {
    let r = &rec.result;
    let bad = r.errors.total() + r.unanswered + r.status.s4xx + r.status.s5xx;
    (bad, rec.answered() + r.errors.total() + r.unanswered)
}

/// The outcome of a `load http` record for `--fail-on`: errors (failed requests, 4xx/5xx
/// replies, failed connects), the figures: latency (from the intended send; a closed
/// loop's from the send), the error share of all requests, the achieved rate (a closed
/// loop's: replies over its span).
pub fn outcome(rec: &LoadHttpRecord, interrupted: bool) -> Outcome {
    let r = &rec.result;
    let (bad, all) = failed_of(rec);
    let errors = (bad > 0 || !r.connect_errors.is_none()).then(|| {
        format!(
            "{bad} of {all} requests failed or answered 4xx/5xx (failed: {}; 4xx {}, 5xx {}; connects failed: {})",
            r.failures(),
            r.status.s4xx,
            r.status.s5xx,
            r.connect_errors.summary()
        )
    });
    let rps = if interrupted {
        None
    } else if rec.plan.max_rate {
        Some((rec.closed_rate(), "replies/s, closed loop".to_string()))
    } else {
        Some((rec.achieved_rate(), "sent/s".to_string()))
    };
    Outcome {
        interrupted,
        errors,
        figures: Figures {
            latency: (r.corrected.count > 0).then_some(r.corrected),
            error_pct: (all > 0).then(|| bad as f64 * 100.0 / all as f64),
            rps,
        },
        ..Default::default()
    }
}
