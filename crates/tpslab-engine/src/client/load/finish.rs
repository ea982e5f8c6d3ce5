//! The end of a run: the threads' counts summed into the generator's report, and the
//! self-check that marks a run the generator (not the server) limited as invalid.

use super::*;

impl UdpLoad {
    pub(super) fn finish(
        &self,
        start: u64,
        window_start: u64,
        lag: Histogram<u64>,
        burst_lag: Histogram<u64>,
        rr: Vec<RecvResult>,
        interrupted: bool,
    ) -> LoadResult {
        let cfg = &self.cfg;
        let Sends {
            attempted,
            sent,
            failed,
            window_sent,
            not_sent,
            send_errors,
            last_send,
        } = self.sends(start);
        let (r, [lat_i, lat_a, lat_w]) = merge_receivers(rr);
        // From the first intended send to the last send call: the rate the generator
        // actually reached (the plan's rate when it kept up).
        let planned = attempted + not_sent;
        let run_s = (cfg.warmup + cfg.duration).as_secs_f64();
        // The plan's share that was attempted takes that share of the run when on time
        // (this covers the last burst interval); longer when the generator fell behind.
        let sending_s = (last_send.saturating_sub(start) as f64 / 1e9)
            .max(attempted as f64 / planned.max(1) as f64 * run_s)
            .max(1e-9);
        let planned_window_s = cfg.duration.as_secs_f64();
        // An interrupted run's window ends where sending stopped.
        let window_s = if interrupted {
            let ran =
                last_send.saturating_sub(window_start) as f64 / 1e9 + cfg.burst_interval_ns() / 1e9;
            ran.clamp(1e-9, planned_window_s)
        } else {
            planned_window_s
        };
        let mode = cfg.match_mode();
        // Without a matchable field, replies cannot be tied to the window: in aggregate
        // mode the "window" figures cover the whole run.
        let (window_sent, window_answered) = if mode == MatchMode::Aggregate {
            (attempted, r.read)
        } else {
            (window_sent, r.window_answered)
        };
        let mut report = GeneratorReport {
            target: cfg.target.to_string(),
            rate_pps: if cfg.is_max() { 0.0 } else { cfg.rate_pps },
            rate_max: cfg.is_max(),
            gso: !self.streams.is_empty() && self.streams.iter().all(|s| s.gso),
            gso_fallback: self
                .streams
                .iter()
                .any(|s| s.socks.iter().any(|k| k.gso_refused())),
            max_segments_per_send: self
                .streams
                .iter()
                .map(|s| s.max_segments.load(Relaxed))
                .max()
                .unwrap_or(0),
            size_bytes: cfg.datagram_len(),
            burst: cfg.burst,
            burst_interval_ns: cfg.burst_interval_ns() as u64,
            pacing_slack_ns: pacing_slack_used(cfg).as_nanos() as u64,
            pacing_slack_auto: cfg.pacing_slack == PacingSlack::Auto,
            threads: cfg.threads,
            flows: self.source_ports(),
            duration_s: planned_window_s,
            warmup_s: cfg.warmup.as_secs_f64(),
            match_mode: mode,
            planned,
            not_sent,
            attempted,
            sent,
            send_failed: failed,
            send_errors,
            replies_read: r.read,
            replies_matched: r.matched,
            replies_per_request: replies_per_request(&r, mode),
            duplicates: r.duplicates,
            reordered: r.reordered,
            unmatched: r.unmatched,
            window_sent,
            window_answered,
            window_loss_pct: (mode != MatchMode::None && window_sent > 0).then(|| {
                100.0 * window_sent.saturating_sub(window_answered) as f64 / window_sent as f64
            }),
            achieved_pps: if attempted > 1 {
                attempted as f64 / sending_s
            } else {
                0.0
            },
            tps: if mode == MatchMode::None {
                0.0
            } else {
                window_answered as f64 / window_s.max(1e-9)
            },
            latency_intended: tpslab_analysis::stats::latency_summary(&lat_i),
            latency_actual: tpslab_analysis::stats::latency_summary(&lat_a),
            rx_kernel_timestamps: r.rx_timestamped,
            latency_wakeup: tpslab_analysis::stats::latency_summary(&lat_w),
            schedule_lag: tpslab_analysis::stats::latency_summary(&lag),
            socket_inodes: self.socket_inodes(),
            valid: true,
            invalid_reasons: vec![],
            histograms: cfg.keep_histograms.then(|| LatencyHistograms {
                intended: encode_histogram(&lat_i),
                actual: encode_histogram(&lat_a),
            }),
            frames: cfg.frame_header().map(|h| reply_frames(h.name(), &r)),
        };
        validate(&mut report, cfg, &burst_lag, interrupted);
        LoadResult { report }
    }
}

/// The senders' counts summed over the streams.
struct Sends {
    attempted: u64,
    sent: u64,
    failed: u64,
    window_sent: u64,
    not_sent: u64,
    send_errors: std::collections::BTreeMap<String, u64>,
    /// The last send call, ns (the run's start when none).
    last_send: u64,
}

impl UdpLoad {
    /// The streams' send counts summed, the run having started at `start` (ns).
    fn sends(&self, start: u64) -> Sends {
        let sum = |f: fn(&Stream) -> u64| self.streams.iter().map(|s| f(s)).sum::<u64>();
        let mut send_errors = std::collections::BTreeMap::new();
        for s in &self.streams {
            s.errors.merge_into(&mut send_errors);
        }
        Sends {
            attempted: sum(|s| s.attempted.load(Relaxed)),
            sent: sum(|s| s.sent.load(Relaxed)),
            failed: sum(|s| s.failed.load(Relaxed)),
            window_sent: sum(|s| s.window_attempted.load(Relaxed)),
            not_sent: sum(|s| s.not_sent.load(Relaxed)),
            send_errors,
            last_send: self
                .streams
                .iter()
                .map(|s| s.last_send_ns.load(Relaxed))
                .max()
                .unwrap_or(start),
        }
    }
}

/// Replies per request: with frames, the datagrams each reply announced, whole or not;
/// else the matched replies and their duplicates per matched request (None when none
/// matched or replies are not matched).
fn replies_per_request(r: &RecvResult, mode: MatchMode) -> Option<f64> {
    match r.frames {
        Some([c, i, _, e, _]) => (c + i > 0).then(|| e as f64 / (c + i) as f64),
        None => (mode != MatchMode::Aggregate && r.matched > 0)
            .then(|| (r.matched + r.duplicates) as f64 / r.matched as f64),
    }
}

/// The replies' frame counts of the receivers' sum `r`, under the frame header `header`.
fn reply_frames(header: &str, r: &RecvResult) -> ReplyFrames {
    let [c, i, got, exp, bad] = r.frames.unwrap_or_default();
    ReplyFrames {
        header: header.to_string(),
        replies_complete: c,
        replies_incomplete: i,
        frames_received: got,
        frames_expected: exp,
        frames_misnumbered: bad,
    }
}

/// The receivers' counts summed, and their latencies merged: (intended-time,
/// actual-send, wake-up) histograms, ns.
fn merge_receivers(rr: Vec<RecvResult>) -> (RecvResult, [Histogram<u64>; 3]) {
    let mut lat = [new_ns_histogram(), new_ns_histogram(), new_ns_histogram()];
    let mut r = RecvResult::default();
    for x in rr {
        r.read += x.read;
        r.matched += x.matched;
        r.duplicates += x.duplicates;
        r.reordered += x.reordered;
        r.unmatched += x.unmatched;
        r.window_answered += x.window_answered;
        r.rx_timestamped += x.rx_timestamped;
        if let Some(f) = x.frames {
            let s = r.frames.get_or_insert_default();
            for (a, b) in s.iter_mut().zip(f) {
                *a += b;
            }
        }
        for (h, x) in lat
            .iter_mut()
            .zip([x.lat_intended, x.lat_actual, x.lat_wakeup])
        {
            if let Some(x) = x {
                h.add(&x).ok();
            }
        }
    }
    (r, lat)
}

/// Marks the run invalid when the generator, not the server, limited it.
pub(super) fn validate(
    r: &mut GeneratorReport,
    cfg: &LoadConfig,
    burst_lag: &Histogram<u64>,
    interrupted: bool,
) {
    let tool_errors: u64 = r
        .send_errors
        .iter()
        .filter(|(k, _)| k.as_str() != "ECONNREFUSED")
        .map(|(_, v)| v)
        .sum();
    if tool_errors > 0 {
        r.invalid_reasons.push(format!(
            "the generator failed to send {tool_errors} datagrams ({})",
            r.send_errors
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !interrupted && r.not_sent > 0 {
        r.invalid_reasons.push(format!(
            "the generator fell behind its schedule and did not send {} of {} planned datagrams by the planned end",
            r.not_sent, r.planned
        ));
    }
    if !interrupted && r.window_sent > 0 && !cfg.is_max() {
        let target = cfg.rate_pps;
        if r.achieved_pps < 0.95 * target {
            r.invalid_reasons.push(format!(
                "the generator reached {:.0} pps of the {:.0} pps planned (< 95 %)",
                r.achieved_pps, target
            ));
        }
    }
    // Bursts that start late by more than half an interval (their shape is what is being
    // tested), or paced datagrams late by more than 10 intervals or 1 % of the run (a
    // short stall relative to the plan, at most 50 ms), and at least 5 ms either way (a scheduler
    // preemption on a busy host is not a broken schedule), count as off schedule; the run
    // is invalid when more than 1 % of them were: a few late datagrams in a run that
    // otherwise kept its plan do not make it the tool's measurement.
    let interval = cfg.burst_interval_ns() / cfg.threads as f64;
    let run_ns = (cfg.warmup + cfg.duration).as_nanos() as f64;
    let limit_ns = if cfg.burst > 1 {
        cfg.burst_interval_ns() / 2.0
    } else {
        // 1 % of the run, but never above 50 ms: a longer stall sends its backlog as one
        // burst, which is not the plan the server was meant to see.
        (10.0 * interval).max((run_ns / 100.0).min(50e6))
    }
    .max(5e6) as u64;
    if let Some((late, total)) = late_share(burst_lag, limit_ns) {
        if late as f64 > 0.01 * total as f64 {
            r.invalid_reasons.push(format!(
                "{} of {} {} ({:.2} %) left more than {} us after their intended time (allowed: 1 %)",
                late,
                total,
                if cfg.burst > 1 { "bursts" } else { "datagrams" },
                100.0 * late as f64 / total as f64,
                limit_ns / 1000
            ));
        }
    }
    r.valid = r.invalid_reasons.is_empty();
}

/// (late, total): entries of `h` above `limit_ns`, and all entries; None when empty.
fn late_share(h: &Histogram<u64>, limit_ns: u64) -> Option<(u64, u64)> {
    let total = h.len();
    (total > 0).then(|| {
        let on_time = h.count_between(0, limit_ns);
        (total.saturating_sub(on_time), total)
    })
}
