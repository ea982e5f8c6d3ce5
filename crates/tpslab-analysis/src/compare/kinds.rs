//! The settings and figures of the record kinds beyond a UDP run: a capacity search, a
//! ramp, a TCP flow.

use super::{flatten, Figures, Key, Settings, BATCHES};
use crate::experiment::Domain;

/// A capacity search's settings, flattened: its plan without what changes every run (a
/// UDP run's identifier; the address and PID of a server tpslab started, by
/// `--server-cmd` or its own TCP server, whose port is drawn anew each time), and with
/// `--fix-and-retry` the change the second search ran with (`retry applied`).
pub(super) fn capacity_settings(c: &tpslab_record::capacity::CapacityRecord) -> Settings {
    let mut v = serde_json::to_value(&c.plan).unwrap_or_default();
    if let Some(l) = v.pointer_mut("/run/load").and_then(|l| l.as_object_mut()) {
        // Every run draws its own identifier.
        l.remove("run_id");
    }
    let started = c.plan.server_cmd.is_some() || c.plan.load.runs_builtin_server();
    if started {
        for (at, keys) in [
            ("/run/load", &["target"][..]),
            ("/run", &["target_pid"][..]),
            ("/tcp", &["target", "pid"][..]),
        ] {
            if let Some(o) = v.pointer_mut(at).and_then(|o| o.as_object_mut()) {
                for k in keys {
                    o.remove(*k);
                }
            }
        }
    }
    let mut set = flatten("plan", &v);
    if let Some(r) = &c.retry {
        set.insert("retry applied".into(), r.applied.join("; "));
    }
    set
}

/// A capacity search's figures: the rate it sustains and the lowest that failed (each found
/// once: no spread); with `--fix-and-retry`, the second search's too (with the fix).
pub(super) fn capacity_figures(c: &tpslab_record::capacity::CapacityRecord) -> Figures {
    let (lo, hi) = c.conclusion.bounds();
    let (fix_lo, fix_hi) = c
        .retry
        .as_ref()
        .map_or((None, None), |r| r.search.conclusion.bounds());
    let mut out = vec![];
    let unit = c.plan.search.unit;
    for (name, v, source) in [
        (
            format!("capacity: sustains {unit}"),
            lo,
            "the highest rate that passed every step (capacity search)",
        ),
        (
            format!("capacity: fails {unit}"),
            hi,
            "the lowest rate that failed a step (capacity search)",
        ),
        (
            format!("capacity with the fix: sustains {unit}"),
            fix_lo,
            "the highest rate that passed every step of the search after the fix (--fix-and-retry)",
        ),
        (
            format!("capacity with the fix: fails {unit}"),
            fix_hi,
            "the lowest rate that failed a step of the search after the fix (--fix-and-retry)",
        ),
    ] {
        if let Some(v) = v {
            out.push((
                Key {
                    name,
                    source: source.into(),
                    domain: Domain::NonNegative,
                },
                crate::experiment::estimate(&[v], Domain::NonNegative),
            ));
        }
    }
    out
}

/// A ramp's figures per step (each measured once: no test).
pub(super) fn ramp_figures(r: &tpslab_record::RampReport) -> Figures {
    let key = |name: String, source: &str, domain: Domain| Key {
        name,
        source: source.into(),
        domain,
    };
    let mut out = vec![];
    for s in &r.run.steps {
        out.push((
            key(
                format!("TPS at {} user(s)", s.users),
                "completed requests / measured time of the step",
                Domain::NonNegative,
            ),
            crate::experiment::estimate(&[s.tps], Domain::NonNegative),
        ));
        out.push((
            key(
                format!("p99 ms at {} user(s)", s.users),
                "HDR histogram of the step's response times",
                Domain::NonNegative,
            ),
            crate::experiment::estimate(&[s.response.p99_ns as f64 / 1e6], Domain::NonNegative),
        ));
    }
    if let Some(u) = &r.analysis.usl {
        out.push((
            key(
                "USL sigma (contention)".into(),
                "USL fit to the steps",
                Domain::Real,
            ),
            crate::experiment::estimate(&[u.sigma], Domain::Real),
        ));
        out.push((
            key(
                "USL kappa (coherency)".into(),
                "USL fit to the steps",
                Domain::Real,
            ),
            crate::experiment::estimate(&[u.kappa], Domain::Real),
        ));
    }
    out
}

/// A TCP record's figures per flow: throughput and smoothed RTT per batch of its
/// TCP_INFO samples after the skipped start.
pub(super) fn tcp_figures(t: &tpslab_record::TcpRecord) -> Figures {
    let mut out = vec![];
    let flows = t
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("run {}", i + 1), &r.flow.samples))
        .chain(t.watched.iter().map(|w| {
            (
                format!("{} -> {}", w.flow.local, w.flow.remote),
                &w.flow.samples,
            )
        }));
    for (name, samples) in flows {
        // As the flow's analysis: samples from --skip after the connection.
        let s: Vec<_> = samples
            .iter()
            .filter(|x| x.t_ns >= tpslab_plan::time::nanos(&t.plan.skip))
            .collect();
        if s.len() < BATCHES + 1 {
            continue;
        }
        let per = (s.len() - 1) / BATCHES;
        let (mut thr, mut rtt) = (vec![], vec![]);
        for b in 0..BATCHES {
            let (a, z) = (s[b * per], s[(b + 1) * per]);
            let dt = z.t_ns.saturating_sub(a.t_ns) as f64 / 1e9;
            if dt > 0.0 {
                thr.push(z.bytes_acked.saturating_sub(a.bytes_acked) as f64 * 8.0 / dt / 1e6);
            }
            let w = &s[b * per..(b + 1) * per];
            rtt.push(w.iter().map(|x| x.rtt_us as f64).sum::<f64>() / w.len() as f64 / 1e3);
        }
        out.push((
            Key {
                name: format!("{name}: throughput Mbit/s"),
                source: "TCP_INFO tcpi_bytes_acked, per batch".into(),
                domain: Domain::NonNegative,
            },
            crate::experiment::estimate(&thr, Domain::NonNegative),
        ));
        out.push((
            Key {
                name: format!("{name}: RTT ms"),
                source: "TCP_INFO tcpi_rtt, mean per batch".into(),
                domain: Domain::NonNegative,
            },
            crate::experiment::estimate(&rtt, Domain::NonNegative),
        ));
    }
    out
}
