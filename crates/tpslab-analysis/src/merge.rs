//! `tpslab merge`: the records of a fleet's agents added up exactly. Counts are summed,
//! latency histograms merged (percentiles of the merged histogram, never averages of
//! percentiles), the ledger rebuilt from the agents' counter deltas plus the server's side
//! from a record of the server (a `tpslab watch --pid` over the fleet's run). Host-wide
//! counters (softnet, drop reasons) are taken once per kernel (boot id), per-namespace ones
//! (NoPorts, device drops) once per namespace.

use crate::stats::new_ns_histogram;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use tpslab_plan::fleet::MAX_AGENTS;
use tpslab_plan::limits::MAX_FIGURE;
use tpslab_record::histogram::{decode_histogram, encode_histogram};
use tpslab_record::ledger::LedgerInputs;
use tpslab_record::{AgentInfo, Environment, GeneratorReport, LatencyHistograms, RunRecord};

use tpslab_record::merge::{AgentFigures, MergeInfo};

/// Why records cannot be merged: one line naming the record.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    #[error("{0}: not an agent's record (made by `tpslab agent`); merge adds up agents' records")]
    NotAnAgent(String),
    #[error("{0}: an agent's record without its latency histograms or ledger inputs (written by an older tpslab?)")]
    Incomplete(String),
    #[error(
        "{name}: from another plan or start ({what}) than {first}; merge records of one fleet run"
    )]
    Different {
        name: String,
        first: String,
        what: String,
    },
    #[error("{name}: agent {index} again (also {other})")]
    Duplicate {
        name: String,
        other: String,
        index: usize,
    },
    #[error("agent(s) {missing} of {of} missing; merge them all, or pass --allow-missing for a partial total that names them")]
    Missing { missing: String, of: usize },
    #[error("{name}: its {which} latency histogram does not decode: {error}")]
    Histogram {
        name: String,
        which: String,
        error: String,
    },
    #[error("{0}: not a server's record for --server: give a `tpslab watch --pid PID --json` record of the server over the fleet's run")]
    NotAServer(String),
    #[error("{name}: agent {index} of {of}: allowed {allowed}")]
    Place {
        name: String,
        index: usize,
        of: usize,
        allowed: String,
    },
    #[error("{name}: watched {server}, outside the agents' run {agents}: give a watch of the server over the fleet's run")]
    ServerTime {
        name: String,
        server: String,
        agents: String,
    },
    #[error("the agents' {what} add up to more than {max}: no fleet run counts that many")]
    Overflow { what: String, max: u64 },
    #[error("no record to merge")]
    Empty,
}

/// Merges the agents' records (name, record) into one; `server` gives the ledger's server
/// side. Errors: see [`MergeError`]; a missing agent only without `allow_missing`.
pub fn merge(
    agents: &[(String, RunRecord)],
    server: Option<(&str, &RunRecord)>,
    allow_missing: bool,
) -> Result<RunRecord, MergeError> {
    let (first_name, first) = agents.first().ok_or(MergeError::Empty)?;
    let a0 = first
        .agent
        .as_ref()
        .ok_or_else(|| MergeError::NotAnAgent(first_name.clone()))?;
    let by_index = places(agents, first_name, a0)?;
    let missing: Vec<usize> = (0..a0.of).filter(|i| !by_index.contains_key(i)).collect();
    if !missing.is_empty() && !allow_missing {
        return Err(MergeError::Missing {
            missing: list(&missing),
            of: a0.of,
        });
    }
    if let Some((name, s)) = server {
        if s.observer.is_none() || s.agent.is_some() {
            return Err(MergeError::NotAServer(name.to_string()));
        }
        server_overlaps(name, s, agents)?;
    }
    let gen = merge_generators(agents)?;
    let mut notes = vec![];
    let inputs = merge_inputs(agents, server, &mut notes)?;
    let mut ledger = crate::ledger::build(&inputs);
    if server.is_none() {
        notes.push("the server's side is unknown (no --server record): pass a `tpslab watch --pid PID --json` record of the server over the fleet's run to account for every datagram".into());
    } else if ledger.request.inconsistent.is_none()
        && ledger.request.unattributed.is_some_and(|u| u < 0)
    {
        ledger.request.inconsistent = Some(
            "the server read more than the agents sent: its watch saw other traffic, or an agent's record is missing".into(),
        );
    }
    if !missing.is_empty() {
        notes.insert(
            0,
            format!(
                "PARTIAL: agent(s) {} of {} missing (--allow-missing): the totals are of {} agent(s) only",
                list(&missing),
                a0.of,
                agents.len()
            ),
        );
    }
    let slow: Vec<String> = agents
        .iter()
        .filter_map(|(_, r)| {
            let g = r.generator.as_ref()?;
            (!g.valid).then(|| format!("agent {}", r.agent.as_ref().map_or(0, |a| a.index)))
        })
        .collect();
    if !slow.is_empty() {
        notes.push(format!(
            "{} did not keep the plan's schedule (the generator was the bottleneck, or lost replies itself): see each agent's figures",
            slow.join(", ")
        ));
    }
    notes.push("wake-up latency and schedule lag are the worst agent's (by p99): they are not kept as histograms".into());
    let figures = agents
        .iter()
        .map(|(name, r)| agent_figures(name, r))
        .collect();
    let hosts = distinct(agents.iter().map(|(_, r)| r.environment.hostname.clone()));
    let kernels = distinct(agents.iter().map(|(_, r)| r.environment.kernel.clone()));
    Ok(RunRecord {
        tool_version: first.tool_version.clone(),
        argv: vec![],
        started_unix_ms: agents
            .iter()
            .map(|(_, r)| r.started_unix_ms)
            .min()
            .unwrap_or(0),
        elapsed_s: agents.iter().map(|(_, r)| r.elapsed_s).fold(0.0, f64::max),
        interrupted: agents.iter().any(|(_, r)| r.interrupted),
        plan: None,
        environment: Environment {
            kernel: kernels,
            hostname: hosts,
            cpus: first.environment.cpus,
            sysctls: BTreeMap::new(),
            netns: String::new(),
            boot_id: String::new(),
        },
        server: None,
        generator: Some(gen),
        observer: None,
        ledger: Some(ledger),
        notes,
        peak_rss_kib: None,
        target: None,
        drop_reasons: None,
        agent: None,
        ledger_inputs: Some(inputs),
        merged: Some(MergeInfo {
            plan: a0.plan.clone(),
            plan_hash: a0.plan_hash.clone(),
            start_at_unix_ms: a0.start_at_unix_ms,
            of: a0.of,
            agents: figures,
            missing,
            server: server.map(|(n, _)| n.to_string()),
        }),
    })
}

/// Each agent's place in the fleet (index -> its name), every agent checked against the
/// first (`first_name`, whose agent info is `a0`): the same plan, start and fleet size,
/// an index within it and not taken, its histograms and ledger inputs kept.
fn places<'a>(
    agents: &'a [(String, RunRecord)],
    first_name: &str,
    a0: &AgentInfo,
) -> Result<BTreeMap<usize, &'a str>, MergeError> {
    let mut by_index: BTreeMap<usize, &str> = BTreeMap::new();
    for (name, r) in agents {
        let a = r
            .agent
            .as_ref()
            .ok_or_else(|| MergeError::NotAnAgent(name.clone()))?;
        let differs = |what: &str| MergeError::Different {
            name: name.clone(),
            first: first_name.to_string(),
            what: what.into(),
        };
        if a.plan_hash != a0.plan_hash {
            return Err(differs("plan hash"));
        }
        if a.start_at_unix_ms != a0.start_at_unix_ms {
            return Err(differs("start time"));
        }
        if a.of != a0.of {
            return Err(differs("number of agents"));
        }
        let place = |allowed: String| MergeError::Place {
            name: name.clone(),
            index: a.index,
            of: a.of,
            allowed,
        };
        if a.of == 0 || a.of > MAX_AGENTS {
            return Err(place(format!("1..={MAX_AGENTS} agents in a fleet")));
        }
        if a.index >= a.of {
            return Err(place(format!("an index of 0..={}", a.of - 1)));
        }
        if let Some(other) = by_index.insert(a.index, name) {
            return Err(MergeError::Duplicate {
                name: name.clone(),
                other: other.to_string(),
                index: a.index,
            });
        }
        if r.generator
            .as_ref()
            .and_then(|g| g.histograms.as_ref())
            .is_none()
            || r.ledger_inputs.is_none()
        {
            return Err(MergeError::Incomplete(name.clone()));
        }
    }
    Ok(by_index)
}

/// Wall-clock span of a run, ms since the Unix epoch: its start and its end.
fn span(r: &RunRecord) -> (u64, u64) {
    let len = (r.elapsed_s.max(0.0) * 1e3).min(MAX_FIGURE as f64) as u64;
    (r.started_unix_ms, r.started_unix_ms.saturating_add(len))
}

/// `(a, b)` as UTC times to the millisecond.
fn times((a, b): (u64, u64)) -> String {
    let t = |ms: u64| {
        humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
        )
    };
    format!("{} to {}", t(a), t(b))
}

/// The server's watch must overlap the agents' run (first start to last end), or its
/// counts are of another time: refused, naming both times.
fn server_overlaps(
    name: &str,
    s: &RunRecord,
    agents: &[(String, RunRecord)],
) -> Result<(), MergeError> {
    let spans: Vec<(u64, u64)> = agents.iter().map(|(_, r)| span(r)).collect();
    let run = (
        spans.iter().map(|s| s.0).min().unwrap_or(0),
        spans.iter().map(|s| s.1).max().unwrap_or(0),
    );
    let watched = span(s);
    if watched.0 == 0 {
        return Err(MergeError::ServerTime {
            name: name.into(),
            server: "at a time its record does not say (a watch record of an older tpslab)".into(),
            agents: times(run),
        });
    }
    if watched.1 < run.0 || watched.0 > run.1 {
        return Err(MergeError::ServerTime {
            name: name.into(),
            server: times(watched),
            agents: times(run),
        });
    }
    Ok(())
}

/// The sum of `what` over the agents, refused above [`MAX_FIGURE`] (never wrapped).
fn total(what: &str, xs: impl IntoIterator<Item = u64>) -> Result<u64, MergeError> {
    xs.into_iter()
        .try_fold(0u64, |a, x| a.checked_add(x))
        .filter(|&t| t <= MAX_FIGURE)
        .ok_or_else(|| MergeError::Overflow {
            what: what.into(),
            max: MAX_FIGURE,
        })
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn distinct(it: impl Iterator<Item = String>) -> String {
    let mut v: Vec<String> = it.collect();
    v.sort();
    v.dedup();
    v.join(", ")
}

fn agent_figures(name: &str, r: &RunRecord) -> AgentFigures {
    let g = r.generator.clone().unwrap_or_default();
    let a = r.agent.as_ref();
    AgentFigures {
        index: a.map_or(0, |a| a.index),
        record: name.to_string(),
        hostname: r.environment.hostname.clone(),
        sent: g.sent,
        replies_read: g.replies_read,
        tps: g.tps,
        window_loss_pct: g.window_loss_pct,
        p50_ns: g.latency_intended.p50_ns,
        p99_ns: g.latency_intended.p99_ns,
        start_error_us: a.map_or(0, |a| a.start_error_us),
        bottleneck: g.invalid_reasons.clone(),
    }
}

/// The agents' generators added up; latency from the merged histograms.
fn merge_generators(agents: &[(String, RunRecord)]) -> Result<GeneratorReport, MergeError> {
    let gens: Vec<(&str, &GeneratorReport)> = agents
        .iter()
        .filter_map(|(n, r)| r.generator.as_ref().map(|g| (n.as_str(), g)))
        .collect();
    let mut m = gens[0].1.clone();
    let sum = |what: &str, f: &dyn Fn(&GeneratorReport) -> u64| {
        total(what, gens.iter().map(|(_, g)| f(g)))
    };
    let fsum = |f: &dyn Fn(&GeneratorReport) -> f64| gens.iter().map(|(_, g)| f(g)).sum::<f64>();
    m.rate_pps = fsum(&|g| g.rate_pps);
    m.threads = gens.iter().map(|(_, g)| g.threads).sum();
    m.planned = sum("planned datagrams", &|g| g.planned)?;
    m.not_sent = sum("datagrams not sent", &|g| g.not_sent)?;
    m.attempted = sum("attempted datagrams", &|g| g.attempted)?;
    m.sent = sum("sent datagrams", &|g| g.sent)?;
    m.send_failed = sum("failed sends", &|g| g.send_failed)?;
    m.send_errors = BTreeMap::new();
    for (_, g) in &gens {
        for (k, v) in &g.send_errors {
            let e = m.send_errors.entry(k.clone()).or_default();
            *e = total("send errors", [*e, *v])?;
        }
    }
    m.replies_read = sum("replies read", &|g| g.replies_read)?;
    m.replies_matched = sum("replies matched", &|g| g.replies_matched)?;
    m.duplicates = sum("duplicate replies", &|g| g.duplicates)?;
    m.reordered = sum("reordered replies", &|g| g.reordered)?;
    m.unmatched = sum("unmatched replies", &|g| g.unmatched)?;
    m.frames = merge_frames(&gens, m.replies_matched);
    m.replies_per_request = match &m.frames {
        Some(f) => (f.replies_complete + f.replies_incomplete > 0)
            .then(|| f.frames_expected as f64 / (f.replies_complete + f.replies_incomplete) as f64),
        None => (m.replies_matched > 0)
            .then(|| (m.replies_matched + m.duplicates) as f64 / m.replies_matched as f64),
    };
    m.window_sent = sum("window datagrams", &|g| g.window_sent)?;
    m.window_answered = sum("window answers", &|g| g.window_answered)?;
    m.window_loss_pct =
        (gens.iter().all(|(_, g)| g.window_loss_pct.is_some()) && m.window_sent > 0).then(|| {
            100.0 * m.window_sent.saturating_sub(m.window_answered) as f64 / m.window_sent as f64
        });
    m.achieved_pps = fsum(&|g| g.achieved_pps);
    m.tps = fsum(&|g| g.tps);
    m.rx_kernel_timestamps = sum("kernel-timestamped replies", &|g| g.rx_kernel_timestamps)?;
    let worst = gens
        .iter()
        .max_by_key(|(_, g)| g.schedule_lag.p99_ns)
        .map(|(_, g)| g.schedule_lag)
        .unwrap_or_default();
    m.schedule_lag = worst;
    m.latency_wakeup = gens
        .iter()
        .max_by_key(|(_, g)| g.latency_wakeup.p99_ns)
        .map(|(_, g)| g.latency_wakeup)
        .unwrap_or_default();
    let (hi, ha) = merge_histograms(&gens)?;
    m.latency_intended = crate::stats::latency_summary(&hi);
    m.latency_actual = crate::stats::latency_summary(&ha);
    m.histograms = Some(LatencyHistograms {
        intended: encode_histogram(&hi),
        actual: encode_histogram(&ha),
    });
    m.socket_inodes = vec![];
    m.valid = gens.iter().all(|(_, g)| g.valid);
    m.invalid_reasons = agents
        .iter()
        .flat_map(|(_, r)| {
            let i = r.agent.as_ref().map_or(0, |a| a.index);
            r.generator.iter().flat_map(move |g| {
                g.invalid_reasons
                    .iter()
                    .map(move |w| format!("agent {i}: {w}"))
            })
        })
        .collect();
    Ok(m)
}

/// The agents' reply frames added up, when every agent counted them by the same header
/// and the sums fit, and the complete replies are the `replies_matched` of the fleet.
fn merge_frames(
    gens: &[(&str, &GeneratorReport)],
    replies_matched: u64,
) -> Option<tpslab_record::ReplyFrames> {
    gens.iter()
        .map(|(_, g)| g.frames.as_ref())
        .try_fold(None::<tpslab_record::ReplyFrames>, |acc, f| {
            let f = f?;
            let mut a = acc.unwrap_or_else(|| tpslab_record::ReplyFrames {
                header: f.header.clone(),
                ..Default::default()
            });
            if a.header != f.header {
                return None;
            }
            a.replies_complete = a.replies_complete.checked_add(f.replies_complete)?;
            a.replies_incomplete = a.replies_incomplete.checked_add(f.replies_incomplete)?;
            a.frames_received = a.frames_received.checked_add(f.frames_received)?;
            a.frames_expected = a.frames_expected.checked_add(f.frames_expected)?;
            a.frames_misnumbered = a.frames_misnumbered.checked_add(f.frames_misnumbered)?;
            Some(Some(a))
        })
        .flatten()
        .filter(|f| f.replies_complete == replies_matched)
}

/// The agents' latency histograms (intended, actual) added up; refused when one does not
/// decode or the fleet's count would not fit in a record.
fn merge_histograms(
    gens: &[(&str, &GeneratorReport)],
) -> Result<(Histogram<u64>, Histogram<u64>), MergeError> {
    let (mut hi, mut ha) = (new_ns_histogram(), new_ns_histogram());
    for (name, g) in gens {
        let h = g.histograms.as_ref().expect("checked by merge");
        for (which, text, acc) in [
            ("intended", &h.intended, &mut hi),
            ("actual", &h.actual, &mut ha),
        ] {
            let d = decode_histogram(text).map_err(|error| MergeError::Histogram {
                name: name.to_string(),
                which: which.into(),
                error,
            })?;
            acc.add(&d).map_err(|e| MergeError::Histogram {
                name: name.to_string(),
                which: which.into(),
                error: format!("{e:?}"),
            })?;
        }
    }
    // Each agent's total is at most MAX_FIGURE (decode_histogram), so 1024 of them fit in
    // a u64 (the add saturates besides); the fleet's must fit too, or its record would not
    // read back.
    for (what, h) in [
        ("intended latency values", &hi),
        ("actual latency values", &ha),
    ] {
        total(what, [h.len()])?;
    }
    Ok((hi, ha))
}

/// The ledger's inputs of the whole fleet: the agents' own counts summed; host-wide
/// counters once per kernel and per-namespace ones once per namespace (the largest
/// record's delta where several share one); the server's side from its record.
fn merge_inputs(
    agents: &[(String, RunRecord)],
    server: Option<(&str, &RunRecord)>,
    notes: &mut Vec<String>,
) -> Result<LedgerInputs, MergeError> {
    let ins: Vec<&LedgerInputs> = agents
        .iter()
        .filter_map(|(_, r)| r.ledger_inputs.as_ref())
        .collect();
    let mut m = LedgerInputs {
        gen_attempted: total("attempted datagrams", ins.iter().map(|i| i.gen_attempted))?,
        gen_send_failed: total("failed sends", ins.iter().map(|i| i.gen_send_failed))?,
        gen_socket_drops: total("socket drops", ins.iter().map(|i| i.gen_socket_drops))?,
        gen_read: total("replies read", ins.iter().map(|i| i.gen_read))?,
        replies_expected: ins.iter().any(|i| i.replies_expected),
        max_segments_per_send: ins
            .iter()
            .map(|i| i.max_segments_per_send)
            .max()
            .unwrap_or(0),
        ..Default::default()
    };
    // (kernel) -> softnet, (kernel) -> reason -> drops, (kernel, netns) -> (nic, no ports).
    let mut host_softnet: BTreeMap<String, u64> = BTreeMap::new();
    let mut host_reasons: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut ns: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    let kernel_of = |e: &Environment| {
        if e.boot_id.is_empty() {
            e.hostname.clone()
        } else {
            e.boot_id.clone()
        }
    };
    let mut add =
        |e: &Environment, softnet: u64, nic: u64, no_ports: u64, reasons: &[(String, u64)]| {
            let k = kernel_of(e);
            let s = host_softnet.entry(k.clone()).or_default();
            *s = (*s).max(softnet);
            let r = host_reasons.entry(k.clone()).or_default();
            for (reason, n) in reasons {
                let v = r.entry(reason.clone()).or_default();
                *v = (*v).max(*n);
            }
            let n = ns.entry((k, e.netns.clone())).or_default();
            n.0 = n.0.max(nic);
            n.1 = n.1.max(no_ports);
        };
    for (_, r) in agents {
        if let Some(i) = &r.ledger_inputs {
            add(
                &r.environment,
                i.softnet_drops,
                i.nic_rx_drops,
                i.no_ports,
                &i.kernel_drops,
            );
        }
    }
    match server {
        Some((name, s)) => {
            let o = s.observer.as_ref().expect("checked by merge");
            let d = |k: &str| o.deltas.get(k).copied().unwrap_or(0);
            let found = d("server_sockets_found") > 0;
            let reasons = s
                .drop_reasons
                .as_ref()
                .map(|d| crate::drop_reason::uncovered(&d.by_reason))
                .unwrap_or_default();
            add(
                &s.environment,
                d("softnet_dropped"),
                d("dev_rx_drop").saturating_sub(d("softnet_dropped")),
                d("udp_no_ports"),
                &reasons,
            );
            m.server_socket_seen = found;
            m.server_socket_drops = found.then(|| d("server_drops"));
            if o.deltas.contains_key("server_io_read") {
                let failed = d("server_io_send_failed");
                m.server_read = Some(d("server_io_read"));
                m.server_reply_attempted =
                    Some(total("server's replies", [d("server_io_sent"), failed])?);
                m.server_reply_failed = Some(failed);
                m.server_counts_source =
                    format!("the server's threads' reads and sends, counted exactly by {name}");
            } else {
                m.server_counts_source = format!("not counted in {name}");
                notes.push(format!(
                    "{name} did not count the server's reads (its watch needs --pid, root and kernel 6.4+): the server's side stays unknown"
                ));
            }
        }
        None => m.server_counts_source = "not observable from the agents".into(),
    }
    m.softnet_drops = total("softnet drops", host_softnet.values().copied())?;
    let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
    for r in host_reasons.values() {
        for (k, v) in r {
            let e = reasons.entry(k.clone()).or_default();
            *e = total("kernel drops", [*e, *v])?;
        }
    }
    let mut reasons: Vec<(String, u64)> = reasons.into_iter().filter(|(_, v)| *v > 0).collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    m.kernel_drops = reasons;
    m.nic_rx_drops = total("NIC drops", ns.values().map(|v| v.0))?;
    m.no_ports = total("datagrams to no listener", ns.values().map(|v| v.1))?;
    Ok(m)
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
