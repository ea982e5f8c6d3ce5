//! `tpslab compare`: records of the same kind side by side. First what differs between
//! them (plan, server settings, sysctls, kernel, CPUs), then each figure's change against
//! the first record with its spread, and whether it is distinguishable from noise.
//!
//! A single run has no repeats, so its spread comes from within: the run's measurement
//! window is cut into [`BATCHES`] equal batches and each figure is taken per batch (the
//! batch-means method of simulation output analysis; a TCP flow's TCP_INFO samples the
//! same); Welch's t-test on the batch values (95 %) says whether two runs differ by more
//! than their own variation. Figures a run has only once (its TPS, its p99, a ramp's
//! steps) are shown without a test. A sweep's cells keep their repeats as they are.

use crate::experiment::{welch, Domain};
use std::collections::BTreeMap;
use tpslab_record::estimate::Estimate;
use tpslab_record::{Body, Record, RunRecord};

mod kinds;
use kinds::{capacity_figures, capacity_settings, ramp_figures, tcp_figures};

/// Batches a run's measurement window is cut into.
pub const BATCHES: usize = 10;

use tpslab_record::compare::{CompareReport, Difference, FigureRow};

/// Why records cannot be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error("compare needs at least two records, got {0}")]
    TooFew(usize),
    #[error("records of different kinds cannot be compared: {0} is {1}, {2} is {3}")]
    Kinds(String, String, String, String),
    #[error("{0}: a {1} record has no run to compare; compare reads udp_run, watch, diagnose, sweep, ramp and tcp records")]
    Unsupported(String, String),
}

/// Compares `recs` (label, record), each against the first.
pub fn compare(recs: &[(String, Record)]) -> Result<CompareReport, CompareError> {
    if recs.len() < 2 {
        return Err(CompareError::TooFew(recs.len()));
    }
    let kind = recs[0].1.kind();
    for (label, r) in &recs[1..] {
        if r.kind() != kind {
            return Err(CompareError::Kinds(
                recs[0].0.clone(),
                kind.into(),
                label.clone(),
                r.kind().into(),
            ));
        }
    }
    let labels: Vec<String> = recs.iter().map(|r| r.0.clone()).collect();
    let mut notes = vec![];
    let (settings, rows): (Vec<Settings>, Vec<Figures>) = match &recs[0].1.body {
        Body::UdpRun(_) | Body::Watch(_) | Body::Diagnose(_) => {
            if kind == "diagnose" {
                notes.push("each diagnosis is compared by its first run (the server as found), not its verification run".into());
            }
            recs.iter()
                .map(|(_, r)| {
                    let run = match &r.body {
                        Body::UdpRun(x) | Body::Watch(x) => x,
                        Body::Diagnose(d) => &d.before,
                        _ => unreachable!("same kind as the first"),
                    };
                    (run_settings(run), run_figures(run))
                })
                .unzip()
        }
        Body::Sweep(_) => recs
            .iter()
            .map(|(_, r)| {
                let Body::Sweep(s) = &r.body else {
                    unreachable!("same kind as the first")
                };
                let mut set = flatten("plan", &serde_json::to_value(&s.plan).unwrap_or_default());
                set.remove("plan seed");
                let figs = s
                    .result
                    .cells
                    .iter()
                    .flat_map(|c| {
                        c.figures.iter().map(move |(k, e)| {
                            (
                                Key {
                                    name: format!("{} [{}]", k, c.cell.label()),
                                    source: "the sweep's runs of this cell (repeats)".into(),
                                    domain: crate::sweep::domain(k),
                                },
                                // As this release bounds it (older sweeps' intervals
                                // could leave the domain).
                                crate::experiment::within_domain(*e, crate::sweep::domain(k)),
                            )
                        })
                    })
                    .collect();
                (set, figs)
            })
            .unzip(),
        Body::Ramp(_) | Body::Tcp(_) | Body::Capacity(_) => recs
            .iter()
            .map(|(_, r)| {
                let mut set = BTreeMap::new();
                set.insert("host kernel".to_string(), r.meta.kernel.clone());
                set.insert("host CPUs".to_string(), r.meta.cpus.to_string());
                set.insert("host name".to_string(), r.meta.hostname.clone());
                match &r.body {
                    Body::Ramp(x) => {
                        let mut v = serde_json::to_value(&x.run.plan).unwrap_or_default();
                        if let Some(o) = v.as_object_mut() {
                            // A lab server's port and PID change every run.
                            if x.run.plan.builtin_server.is_some() {
                                o.remove("target");
                            }
                            o.remove("server_pid");
                        }
                        set.extend(flatten("plan", &v));
                        (set, ramp_figures(x))
                    }
                    Body::Tcp(t) => {
                        set.extend(flatten(
                            "plan",
                            &serde_json::to_value(t.plan).unwrap_or_default(),
                        ));
                        (set, tcp_figures(t))
                    }
                    Body::Capacity(c) => {
                        set.extend(capacity_settings(c));
                        (set, capacity_figures(c))
                    }
                    _ => unreachable!("same kind as the first"),
                }
            })
            .unzip(),
        Body::Serve(_)
        | Body::ServeTcp(_)
        | Body::Doctor(_)
        | Body::Bdp(_)
        | Body::ProbeIdle(_)
        | Body::ProbePool(_)
        | Body::LoadHttp(_)
        | Body::Compare(_) => {
            return Err(CompareError::Unsupported(labels[0].clone(), kind.into()))
        }
    };
    Ok(CompareReport {
        of_kind: kind.into(),
        labels,
        differences: differences(&settings),
        figures: figure_rows(&rows),
        method: "spread: a UDP run's measurement window, or a TCP flow's TCP_INFO samples after its skipped start, cut into 10 equal batches and each figure taken per batch (batch means); a sweep cell's repeats as they are; each value's 95 % interval by Student's t (3 values or more), the difference from the first record with its 95 % interval by Welch's t-test on those values, 'noise' when the interval includes 0; intervals kept within what the figure can take (a loss within 0-100 %, a difference of two within -100..100 points, a rate or queue 0 or more). Figures measured once (whole-run, a ramp's steps) have no test".into(),
        notes,
    })
}

/// A record's settings, flattened (name -> value).
type Settings = BTreeMap<String, String>;
/// A record's figures.
type Figures = Vec<(Key, Estimate)>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    name: String,
    source: String,
    /// The values the figure takes, which its intervals and its differences keep to.
    domain: Domain,
}

/// The settings of a run, flattened: plan (without what changes every run: its id, the
/// server's PID, a lab server's random port), the server as it ran, the sysctls, the host.
fn run_settings(r: &RunRecord) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Some(p) = &r.plan {
        let mut v = serde_json::to_value(p).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.remove("target_pid");
        }
        if let Some(load) = v.get_mut("load").and_then(|l| l.as_object_mut()) {
            load.remove("run_id");
            if r.server.is_some() {
                load.remove("target");
            }
        }
        m.extend(flatten("plan", &v));
    }
    if let Some(s) = &r.server {
        m.insert(
            "server SO_RCVBUF granted".into(),
            s.rcvbuf_granted_bytes.to_string(),
        );
        m.insert("server threads".into(), s.threads.to_string());
    }
    // Any server's sockets as the kernel held them (a foreign server's own setting).
    if let Some(o) = r
        .observer
        .as_ref()
        .filter(|o| !o.target_rcvbuf_bytes.is_empty())
    {
        let v: Vec<String> = o.target_rcvbuf_bytes.iter().map(u64::to_string).collect();
        m.insert("server SO_RCVBUF (sock_diag)".into(), v.join(" "));
    }
    for (k, v) in &r.environment.sysctls {
        m.insert(format!("sysctl {k}"), v.clone());
    }
    m.insert("host kernel".into(), r.environment.kernel.clone());
    m.insert("host CPUs".into(), r.environment.cpus.to_string());
    m.insert("host name".into(), r.environment.hostname.clone());
    m
}

/// JSON leaves as `prefix a.b.c` -> value text.
fn flatten(prefix: &str, v: &serde_json::Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    fn walk(path: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let p = if path.ends_with(' ') {
                        format!("{path}{k}")
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(&p, x, out);
                }
            }
            serde_json::Value::String(s) => {
                out.insert(path.to_string(), s.clone());
            }
            other => {
                out.insert(path.to_string(), other.to_string());
            }
        }
    }
    walk(&format!("{prefix} "), v, &mut out);
    out
}

/// Settings that differ: the server's sockets as they were first, then the plan, then
/// sysctls, then the host.
fn differences(settings: &[BTreeMap<String, String>]) -> Vec<Difference> {
    let mut keys: Vec<&String> = settings.iter().flat_map(|m| m.keys()).collect();
    keys.sort();
    keys.dedup();
    let rank = |k: &str| {
        if k.starts_with("server ") {
            0
        } else if k.starts_with("plan ") {
            1
        } else if k.starts_with("sysctl ") {
            2
        } else {
            3
        }
    };
    let mut out: Vec<Difference> = keys
        .into_iter()
        .filter_map(|k| {
            let values: Vec<String> = settings
                .iter()
                .map(|m| m.get(k).cloned().unwrap_or_else(|| "-".into()))
                .collect();
            values.iter().any(|v| v != &values[0]).then(|| Difference {
                what: k.clone(),
                values,
            })
        })
        .collect();
    out.sort_by_key(|d| rank(&d.what));
    out
}

/// One run's figures: per batch of the measurement window where the time series allow,
/// whole-run otherwise.
fn run_figures(r: &RunRecord) -> Vec<(Key, Estimate)> {
    let mut out = vec![];
    let key = |name: &str, source: &str, domain: Domain| Key {
        name: name.into(),
        source: source.into(),
        domain,
    };
    if let (Some(o), Some(g)) = (&r.observer, &r.generator) {
        let from = g.warmup_s * 1e3 + 5.0;
        let to = from + g.duration_s * 1e3;
        let t = &o.series.t_ms;
        // Rates: value i belongs to t[i + offset].
        let series = |k: &str| -> Option<(usize, &[f64])> {
            let v = o.series.values.get(k)?;
            Some((t.len().saturating_sub(v.len()), v.as_slice()))
        };
        let batches = |k: &str| -> Option<Vec<Vec<f64>>> {
            let (off, v) = series(k)?;
            let mut b = vec![vec![]; BATCHES];
            for (i, &x) in v.iter().enumerate() {
                let ti = *t.get(i + off)?;
                if ti >= from && ti < to && x.is_finite() {
                    let j = (((ti - from) / (to - from)) * BATCHES as f64) as usize;
                    b[j.min(BATCHES - 1)].push(x);
                }
            }
            b.iter().all(|x| !x.is_empty()).then_some(b)
        };
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let reads_key = if o.series.values.contains_key("server_reads_per_s") {
            "server_reads_per_s"
        } else {
            "udp_in_datagrams_per_s"
        };
        let reads = batches(reads_key);
        let drops = batches("server_drops_per_s");
        if let (Some(rd), Some(dr)) = (&reads, &drops) {
            let loss: Vec<f64> = rd
                .iter()
                .zip(dr)
                .filter_map(|(a, b)| {
                    let (a, b) = (a.iter().sum::<f64>(), b.iter().sum::<f64>());
                    (a + b > 0.0).then(|| 100.0 * b / (a + b))
                })
                .collect();
            if loss.len() == BATCHES {
                out.push((
                    key(
                        "socket loss %",
                        "server socket drops / (drops + reads), per batch (/proc/net/udp drops; reads)",
                        Domain::Percent,
                    ),
                    crate::experiment::estimate(&loss, Domain::Percent),
                ));
            }
        }
        if let Some(rd) = &reads {
            let v: Vec<f64> = rd.iter().map(|b| mean(b)).collect();
            out.push((
                key(
                    "delivered pps",
                    &format!("{reads_key}, mean per batch"),
                    Domain::NonNegative,
                ),
                crate::experiment::estimate(&v, Domain::NonNegative),
            ));
        }
        if let Some(dr) = &drops {
            let v: Vec<f64> = dr.iter().map(|b| mean(b)).collect();
            out.push((
                key(
                    "socket drops per s",
                    "server_drops_per_s (/proc/net/udp drops), mean per batch",
                    Domain::NonNegative,
                ),
                crate::experiment::estimate(&v, Domain::NonNegative),
            ));
        }
        if let Some(q) = batches("server_rx_queue_bytes") {
            let v: Vec<f64> = q.iter().map(|b| mean(b)).collect();
            out.push((
                key(
                    "rx_queue mean bytes",
                    "server socket rx_queue (/proc/net/udp), mean per batch",
                    Domain::NonNegative,
                ),
                crate::experiment::estimate(&v, Domain::NonNegative),
            ));
        }
    }
    if let Some(g) = &r.generator {
        out.extend(whole_run_figures(g));
    }
    out
}

/// The generator's whole-run figures: the window's loss, TPS, p99 latency from the
/// intended send.
fn whole_run_figures(g: &tpslab_record::GeneratorReport) -> Vec<(Key, Estimate)> {
    let mut out = vec![];
    let key = |name: &str, source: &str, domain: Domain| Key {
        name: name.into(),
        source: source.into(),
        domain,
    };
    if let Some(l) = g.window_loss_pct {
        out.push((
            key(
                "window loss % (whole run)",
                "generator: window datagrams not answered",
                Domain::Percent,
            ),
            crate::experiment::estimate(&[l], Domain::Percent),
        ));
    }
    out.push((
        key(
            "TPS (whole run)",
            "generator: answered per second of the window",
            Domain::NonNegative,
        ),
        crate::experiment::estimate(&[g.tps], Domain::NonNegative),
    ));
    if g.latency_intended.count > 0 {
        out.push((
            key(
                "p99 latency us (whole run)",
                "generator HDR histogram, from the intended send time",
                Domain::NonNegative,
            ),
            crate::experiment::estimate(
                &[g.latency_intended.p99_ns as f64 / 1e3],
                Domain::NonNegative,
            ),
        ));
    }
    out
}

/// Rows of figures present in any record, in the first record's order, with each
/// record's effect against the first.
fn figure_rows(per_rec: &[Vec<(Key, Estimate)>]) -> Vec<FigureRow> {
    let mut order: Vec<Key> = vec![];
    for r in per_rec {
        for (k, _) in r {
            if !order.iter().any(|o| o.name == k.name) {
                order.push(k.clone());
            }
        }
    }
    order
        .into_iter()
        .map(|k| {
            let values: Vec<Option<Estimate>> = per_rec
                .iter()
                .map(|r| r.iter().find(|(x, _)| x.name == k.name).map(|x| x.1))
                .collect();
            let nms = |e: &Estimate| (e.n, e.mean, e.stddev);
            let effects = values[1..]
                .iter()
                .map(|v| match (&values[0], v) {
                    (Some(a), Some(b)) => Some(welch(nms(a), nms(b), k.domain)),
                    _ => None,
                })
                .collect();
            FigureRow {
                name: k.name,
                source: k.source,
                values,
                effects,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
