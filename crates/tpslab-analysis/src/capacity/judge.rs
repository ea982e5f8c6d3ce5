//! A step's figures (from a UDP run's record, an HTTP step's, a TCP step's counts) and
//! its call against the objective ([`judge`]).

use super::*;

/// What a step measured, for its call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepFigures {
    /// The rate intended, pps.
    pub rate_pps: f64,
    /// What the generator sent, pps.
    pub achieved_pps: f64,
    /// Answered per second in the measured window.
    pub answered_pps: f64,
    /// Latency from the intended send, ns: p50, p90, p99, p99.9, max (None: no reply).
    pub latency_ns: Option<[u64; 5]>,
    /// Latency from the actual send, ns, in the same order, when the generator's lateness
    /// is its own (UDP: a send never waits for the server, so the time between the
    /// intended and the actual send is the generator's or its host's); None otherwise.
    pub latency_actual_ns: Option<[u64; 5]>,
    /// Loss in the window, % (None without replies).
    pub loss_pct: Option<f64>,
    /// Refused sends, % of attempted.
    pub errors_pct: f64,
    /// The generator's self-check held (kept its schedule, lost nothing itself).
    pub gen_valid: bool,
    /// Why it did not.
    pub gen_reasons: Vec<String>,
    /// The step was stopped before its end.
    pub interrupted: bool,
    /// What the server did that no objective measures (HTTP/2: connections this client
    /// closed for the server's floods or protocol errors, requests a GOAWAY refused
    /// twice), each a sentence: any fails the step.
    pub server_faults: Vec<String>,
}

/// A UDP run's figures for a step intended at `rate_pps` (None when the run has no
/// generator report).
pub fn figures(run: &RunRecord, rate_pps: f64) -> Option<StepFigures> {
    let g = run.generator.as_ref()?;
    let five = |l: &tpslab_record::stats::LatencySummary| {
        (l.count > 0).then_some([l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns])
    };
    Some(StepFigures {
        rate_pps,
        achieved_pps: g.achieved_pps,
        answered_pps: g.tps,
        latency_ns: five(&g.latency_intended),
        latency_actual_ns: five(&g.latency_actual),
        loss_pct: g.window_loss_pct,
        errors_pct: if g.attempted == 0 {
            0.0
        } else {
            g.send_failed as f64 * 100.0 / g.attempted as f64
        },
        gen_valid: g.valid,
        gen_reasons: g.invalid_reasons.clone(),
        interrupted: run.interrupted,
        server_faults: vec![],
    })
}

/// An HTTP step's figures (`load http`'s record of its window) for a step intended at
/// `rate_pps` requests/s: achieved, the requests written over the window; answered,
/// final replies (any status) a second; latency from the intended send (corrected);
/// loss, requests written that got no reply (timed out, or outstanding at the end), % of
/// those written; errors, failed connects and requests (refused, reset, closed, TLS,
/// protocol) and 4xx/5xx replies, % of those intended (at most 100). A request can wait
/// for its connection's previous reply (the server's doing), so only sends late with an
/// idle, ready connection (`behind`) are the generator's: more than 1 % of them, and
/// the step is not evidence.
pub fn figures_http(
    rec: &tpslab_record::load_http::LoadHttpRecord,
    rate_pps: f64,
    interrupted: bool,
) -> StepFigures {
    let secs = rec.plan.duration.as_secs_f64();
    let mut f = open_figures(
        &rec.result,
        secs,
        rec.sent_rate(interrupted),
        rate_pps,
        interrupted,
    );
    f.server_faults = http2_faults(rec.result.http2.as_ref());
    f
}

/// The HTTP/2 server's misbehaviour in a step's counts `h`, each a sentence (see
/// [`StepFigures::server_faults`]).
fn http2_faults(h: Option<&tpslab_record::load_http::Http2Streams>) -> Vec<String> {
    let Some(h) = h else { return vec![] };
    let mut v = vec![];
    if !h.faults.is_none() {
        v.push(format!(
            "the server misbehaved over HTTP/2: {} (closed by this client)",
            h.faults.summary()
        ));
    }
    if h.goaway_refused > 0 {
        v.push(format!(
            "the server's GOAWAY refused {} requests twice",
            h.goaway_refused
        ));
    }
    v
}

/// A TCP step's figures (the open loop's counts over a window of `window`) for a step
/// intended at `rate_pps` requests/s: as [`figures_http`]'s, every framed reply answered
/// (a framed reply has no status: its count is `status.other`); errors, failed connects
/// (refused, reset, timed out) and requests (reset, closed by the server, a frame not of
/// the framing), % of those intended. Achieved: over the window, or when `interrupted`
/// over the gaps between the first and last request sent.
pub fn figures_tcp(
    r: &tpslab_record::load_http::LoadHttpResult,
    window: std::time::Duration,
    rate_pps: f64,
    interrupted: bool,
) -> StepFigures {
    let secs = window.as_secs_f64();
    let span = r.last_sent_s - r.first_sent_s;
    let sent_rate = if !interrupted {
        r.sent as f64 / secs.max(1e-9)
    } else if r.sent >= 2 && span > 0.0 {
        (r.sent - 1) as f64 / span
    } else {
        0.0
    };
    open_figures(r, secs, sent_rate, rate_pps, interrupted)
}

/// The figures of an open loop's counts `r` over `secs`, sent at `sent_rate` (see
/// [`figures_http`]).
fn open_figures(
    r: &tpslab_record::load_http::LoadHttpResult,
    secs: f64,
    sent_rate: f64,
    rate_pps: f64,
    interrupted: bool,
) -> StepFigures {
    let secs = secs.max(1e-9);
    let l = &r.corrected;
    // A request given up while it waited on the client for an HTTP/2 stream was never
    // written: it fails among the errors (of those intended), not the loss (of those
    // written), which would otherwise pass 100 %.
    let unsent = r.timed_out_unsent().min(r.errors.timeout);
    let lost = r.errors.timeout - unsent + r.unanswered;
    let failed = (r.errors.total() - r.errors.timeout)
        + unsent
        + r.connect_errors.total()
        + r.status.s4xx
        + r.status.s5xx;
    let mut gen_reasons = vec![];
    if r.sent > 0 && r.behind as f64 > 0.01 * r.sent as f64 {
        gen_reasons.push(format!(
            "the generator sent {} of {} requests late with their connection idle and ready (up to {}; allowed: 1 %)",
            r.behind,
            r.sent,
            latency_text(r.behind_max_ns as f64)
        ));
    }
    StepFigures {
        rate_pps,
        achieved_pps: sent_rate,
        answered_pps: r.status.total() as f64 / secs,
        latency_ns: (l.count > 0).then_some([l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns]),
        latency_actual_ns: None,
        loss_pct: (r.sent > 0).then(|| lost as f64 * 100.0 / r.sent as f64),
        errors_pct: if r.intended == 0 {
            0.0
        } else {
            (failed as f64 * 100.0 / r.intended as f64).min(100.0)
        },
        gen_valid: gen_reasons.is_empty(),
        gen_reasons,
        interrupted,
        server_faults: vec![],
    }
}

/// A latency for people: `850 us`, `2.40 ms`, `31 ms`, `1.20 s`.
pub fn latency_text(ns: f64) -> String {
    if ns < 1e6 {
        format!("{:.0} us", ns / 1e3)
    } else if ns < 1e7 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns < 1e9 {
        format!("{:.0} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A percentage for people: `0.01 %`, `2.3 %`, `100 %`.
fn pct_text(v: f64) -> String {
    if v == 0.0 || v >= 10.0 {
        format!("{v:.0} %")
    } else if v >= 1.0 {
        format!("{v:.1} %")
    } else {
        format!("{v:.2} %")
    }
}

/// The figure an objective bounds, from a step's figures (ns or %); None when not
/// measured (no reply to time, no replies to count).
pub fn value(o: &Objective, f: &StepFigures) -> Option<f64> {
    match o {
        Objective::Latency { quantile, .. } => {
            let i = tpslab_plan::capacity::Quantile::ALL
                .iter()
                .position(|q| q == quantile)?;
            f.latency_ns.map(|l| l[i] as f64)
        }
        Objective::Loss { .. } => f.loss_pct,
        Objective::Errors { .. } => Some(f.errors_pct),
        Objective::Rate { .. } => (f.rate_pps > 0.0).then(|| f.answered_pps * 100.0 / f.rate_pps),
    }
}

/// Why `o` did not hold at `v`: `p99 31 ms > 20 ms`, `loss 2.3 % >= 0.1 %`, `rate 95 % <
/// 99 %`, `p99 not measured (no reply)`.
fn broken(o: &Objective, v: Option<f64>) -> String {
    let Some(v) = v else {
        return format!("{} not measured (no reply)", o.name());
    };
    match *o {
        Objective::Latency { limit, .. } => format!(
            "{} {} {} {}",
            o.name(),
            latency_text(v),
            if v > limit.as_nanos() as f64 {
                ">"
            } else {
                ">="
            },
            latency_text(limit.as_nanos() as f64)
        ),
        Objective::Loss { limit_pct, .. } | Objective::Errors { limit_pct, .. } => format!(
            "{} {} {} {}",
            o.name(),
            pct_text(v),
            if v > limit_pct { ">" } else { ">=" },
            pct_text(limit_pct)
        ),
        Objective::Rate { min_pct, .. } => format!(
            "rate {} of intended {} {}",
            pct_text(v),
            if v < min_pct { "<" } else { "<=" },
            pct_text(min_pct)
        ),
    }
}

/// A step's call and why: interrupted first (not counted); then the generator's
/// self-check (a generator that did not deliver is INVALID, never the server failing);
/// then every objective (FAIL naming each that did not hold); a step that broke only
/// latency bounds, each of which holds from the actual send time where the lateness is
/// the generator's own ([`StepFigures::latency_actual_ns`]), is INVALID: the generator
/// sent late, the server answered within the objective; else pass.
pub fn judge(slo: &Slo, f: &StepFigures) -> (StepStatus, Vec<String>) {
    if f.interrupted {
        return (
            StepStatus::Interrupted,
            vec!["stopped before its end".into()],
        );
    }
    if !f.gen_valid {
        let mut why = f.gen_reasons.clone();
        if why.is_empty() {
            why.push("the generator's self-check failed".into());
        }
        return (StepStatus::Invalid, why);
    }
    let why: Vec<String> = slo
        .objectives
        .iter()
        .filter_map(|o| {
            let v = value(o, f);
            (!o.holds(v)).then(|| broken(o, v))
        })
        .collect();
    if !f.server_faults.is_empty() {
        let mut why = why;
        why.extend(f.server_faults.iter().cloned());
        return (StepStatus::Fail, why);
    }
    if let Some(late) = sent_late(slo, f) {
        return (StepStatus::Invalid, vec![late]);
    }
    if why.is_empty() {
        (StepStatus::Pass, why)
    } else {
        (StepStatus::Fail, why)
    }
}

/// Why a step that broke only latency bounds is the generator's: each holds from the
/// actual send time, where the lateness is the generator's own (`p99 39 ms from the
/// intended send time, 2.10 ms from the actual send: the generator sent late ...`);
/// None when another objective broke, none did, or one fails from the actual send too.
fn sent_late(slo: &Slo, f: &StepFigures) -> Option<String> {
    let actual = StepFigures {
        latency_ns: Some(f.latency_actual_ns?),
        ..f.clone()
    };
    if !latency_only(slo, f) {
        return None;
    }
    let mut parts = vec![];
    for o in slo.objectives.iter().filter(|o| !o.holds(value(o, f))) {
        let (Some(intended), Some(sent)) = (value(o, f), value(o, &actual)) else {
            return None;
        };
        if !o.holds(Some(sent)) {
            return None;
        }
        parts.push(format!(
            "{} {} from the intended send time, {} from the actual send",
            o.name(),
            latency_text(intended),
            latency_text(sent)
        ));
    }
    Some(format!(
        "{}: the generator sent late, not the server (it answered within the objective from the actual send)",
        parts.join("; ")
    ))
}

/// Whether every objective the step broke is a latency bound (a step failed on latency
/// alone); false when none broke.
pub fn latency_only(slo: &Slo, f: &StepFigures) -> bool {
    let mut broken = slo
        .objectives
        .iter()
        .filter(|o| !o.holds(value(o, f)))
        .peekable();
    broken.peek().is_some() && broken.all(|o| matches!(o, Objective::Latency { .. }))
}
