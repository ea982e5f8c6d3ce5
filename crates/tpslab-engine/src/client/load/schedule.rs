//! The send schedule: each sender thread's share of the plan, and the pacing slack it
//! uses (`--pacing-slack`, `auto` chosen from the rate).

use super::*;

/// One sender thread's share of the plan.
#[derive(Debug, Clone, Copy)]
pub(super) struct StreamPlan {
    /// Datagrams per burst for this stream.
    pub(super) burst: u64,
    /// ns between bursts.
    pub(super) interval_ns: f64,
    /// Offset of this stream's first burst, ns.
    pub(super) phase_ns: f64,
    /// Datagrams in the whole run (warm-up + window).
    pub(super) total: u64,
}

impl StreamPlan {
    #[inline]
    pub(super) fn intended(&self, start: u64, seq: u64) -> u64 {
        start + (self.phase_ns + (seq / self.burst) as f64 * self.interval_ns) as u64
    }
}

/// The shortest window `--pacing-slack auto` groups datagrams in: at 10 k pps per sender
/// and above, one wake-up per 100 us (groups of two at 10 k pps, eleven at 100 k pps).
pub const AUTO_SLACK_MIN: Duration = Duration::from_micros(100);
/// The longest inter-arrival gap `auto` groups over: a sender below 1000 pps paces
/// exactly (at most 1000 wake-ups a second; a group would hold a datagram over 1 ms).
pub const AUTO_SLACK_MAX: Duration = Duration::from_millis(1);

/// The pacing slack `--pacing-slack auto` chooses for one sender of `stream_rate_pps`
/// datagrams per second (the load's rate divided by its threads) sending bursts of
/// `burst`: the larger of one inter-arrival gap and [`AUTO_SLACK_MIN`], so each wake-up
/// sends at least two datagrams and none leaves later than that bound (plus the
/// wake-up's own delay) after its intended time; zero (exact) for a gap above
/// [`AUTO_SLACK_MAX`], for bursts (their start is the shape under test) and for `max`
/// (no schedule). Never early either way.
pub fn auto_pacing_slack(stream_rate_pps: f64, burst: u64) -> Duration {
    if burst > 1 || !stream_rate_pps.is_finite() || stream_rate_pps <= 0.0 {
        return Duration::ZERO;
    }
    // Rounded up: a slack a fraction of a nanosecond short of the gap would wake before
    // the next datagram is due and group nothing.
    let gap = Duration::from_nanos((1e9 / stream_rate_pps).ceil() as u64);
    if gap > AUTO_SLACK_MAX {
        Duration::ZERO
    } else {
        gap.max(AUTO_SLACK_MIN)
    }
}

/// The slack each sender of `cfg` paces with: the one given, or [`auto_pacing_slack`]
/// of its share of the rate.
pub fn pacing_slack_used(cfg: &LoadConfig) -> Duration {
    match cfg.pacing_slack {
        PacingSlack::Given(d) => d,
        PacingSlack::Auto => auto_pacing_slack(cfg.rate_pps / cfg.threads.max(1) as f64, cfg.burst),
    }
}

/// Splits the plan over `threads` streams: with bursts, every stream sends its share of
/// each burst at the same instants (the bursts add up at the server); when paced, streams
/// interleave evenly.
pub(super) fn stream_plans(cfg: &LoadConfig) -> Vec<StreamPlan> {
    let t = cfg.threads as u64;
    let run_ns = (cfg.warmup + cfg.duration).as_nanos() as f64;
    (0..t)
        .map(|i| {
            if cfg.is_max() {
                StreamPlan {
                    burst: 1,
                    interval_ns: 0.0,
                    phase_ns: 0.0,
                    total: u64::MAX,
                }
            } else if cfg.burst > 1 {
                let interval = cfg.burst_interval_ns();
                let share = cfg.burst / t + u64::from(i < cfg.burst % t);
                let bursts = (run_ns / interval).ceil() as u64;
                StreamPlan {
                    burst: share.max(1),
                    interval_ns: interval,
                    phase_ns: cfg.phase.as_nanos() as f64,
                    total: if share == 0 { 0 } else { bursts * share },
                }
            } else {
                let interval = t as f64 * 1e9 / cfg.rate_pps;
                let phase = i as f64 * 1e9 / cfg.rate_pps + cfg.phase.as_nanos() as f64;
                let total = ((run_ns - phase) / interval).ceil().max(0.0) as u64;
                StreamPlan {
                    burst: 1,
                    interval_ns: interval,
                    phase_ns: phase,
                    total,
                }
            }
        })
        .collect()
}
