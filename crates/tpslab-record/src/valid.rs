//! What no run could write, refused when a record is read back ([`Record::check`]):
//! figures beyond [`MAX_FIGURE`], shares outside 0..=100 %, a host without CPUs, an
//! agent outside its fleet, histograms beyond their bounds, estimates without a value,
//! series of different lengths. Each check gives one phrase naming the field and what
//! is allowed.

use crate::envelope::{Body, Record, RecordError};
use crate::run::RunRecord;
use tpslab_plan::fleet::MAX_AGENTS;
use tpslab_plan::limits::{CPUS, FLOW_SAMPLES, OBSERVER_SAMPLES, OBSERVER_SERIES};

impl Record {
    /// Checks what the renderers rely on and refuses what no run could write, so a
    /// hand-edited or corrupt record is an error ([`RecordError::Invalid`], naming the
    /// field and what is allowed), never a panic, an endless plot or an impossible
    /// figure: indices within their lists, every sweep factor with a level (and at most
    /// 10000 cells), ramp user counts within the ramp's limit; every count and figure
    /// within [`tpslab_plan::limits::MAX_FIGURE`] (so sums of them fit in a u64), shares
    /// (loss, CPU) within 0..=100 %, the host's CPUs within [`tpslab_plan::limits::CPUS`]
    /// (0 in the metadata of kinds other than runs and ramps: unknown),
    /// an agent's index below its fleet's size of at most
    /// [`tpslab_plan::fleet::MAX_AGENTS`], latency histograms within their encoded and
    /// decoded bounds (their total count within [`tpslab_plan::limits::MAX_FIGURE`] and
    /// equal to their summary's), estimates with the figures their runs give, series no
    /// longer than their sample times nor than a command writes (observer series, a
    /// flow's samples, a ramp's steps: their limits in [`tpslab_plan::limits`], also
    /// refused while read by [`Record::from_json`]). The figures are checked as serde
    /// writes them, without a copy of the record.
    pub fn check(&self) -> Result<(), RecordError> {
        let invalid = RecordError::Invalid;
        crate::figures::check(self).map_err(invalid)?;
        // Runs and ramps carry their host's CPUs (a ramp's analysis divides by them); the
        // other kinds' metadata may leave them 0 (unknown, [`Meta::default`]).
        let carried = matches!(
            self.body,
            Body::UdpRun(_) | Body::Watch(_) | Body::Diagnose(_) | Body::Ramp(_)
        );
        if carried || self.meta.cpus != 0 {
            cpus("meta.cpus", self.meta.cpus).map_err(invalid)?;
        }
        elapsed("meta.elapsed_s", self.meta.elapsed_s).map_err(invalid)?;
        match &self.body {
            Body::UdpRun(r) | Body::Watch(r) => run(r).map_err(invalid)?,
            Body::Diagnose(d) => {
                for r in std::iter::once(&d.before).chain(&d.after) {
                    run(r).map_err(invalid)?;
                }
            }
            // No run inside: checked below, kind by kind.
            Body::Ramp(_)
            | Body::Sweep(_)
            | Body::Serve(_)
            | Body::Tcp(_)
            | Body::ServeTcp(_)
            | Body::Doctor(_)
            | Body::Bdp(_)
            | Body::ProbeIdle(_)
            | Body::ProbePool(_)
            | Body::LoadHttp(_)
            | Body::Compare(_)
            | Body::Capacity(_) => {}
        }
        match &self.body {
            Body::Ramp(r) => ramp(r).map_err(invalid)?,
            Body::Sweep(w) => sweep(w).map_err(invalid)?,
            Body::Tcp(t) => tcp(t).map_err(invalid)?,
            Body::ServeTcp(s) => serve_tcp(s).map_err(invalid)?,
            Body::Capacity(c) => capacity(c).map_err(invalid)?,
            Body::LoadHttp(l) => load_http(l).map_err(invalid)?,
            Body::Bdp(b) => bdp(b).map_err(invalid)?,
            Body::UdpRun(_)
            | Body::Watch(_)
            | Body::Diagnose(_)
            | Body::Serve(_)
            | Body::Doctor(_)
            | Body::ProbePool(_) => {}
            Body::Compare(c) => compare(c).map_err(invalid)?,
            Body::ProbeIdle(r) => probe_idle(r).map_err(invalid)?,
        }
        Ok(())
    }
}

/// A ramp's steps within the planned count and 10000 users each, measured for a time
/// above 0, its knee one of them.
fn ramp(r: &crate::envelope::RampReport) -> Result<(), String> {
    let steps = r.run.steps.len();
    if steps > tpslab_plan::limits::RAMP_STEPS {
        return Err(crate::read::too_long(
            &format!("a ramp's steps ({steps})"),
            tpslab_plan::limits::RAMP_STEPS,
            "the steps a ramp plans",
        ));
    }
    if let Some(s) = r.run.steps.iter().find(|s| s.users > 10_000) {
        return Err(format!("a ramp step of {} users (at most 10000)", s.users));
    }
    if let Some(s) = r
        .run
        .steps
        .iter()
        .find(|s| s.measured_s.is_nan() || s.measured_s <= 0.0)
    {
        return Err(format!(
            "a ramp step measured for {} s (allowed above 0 s)",
            s.measured_s
        ));
    }
    if r.analysis
        .knee_index
        .is_some_and(|k| k >= r.run.steps.len())
    {
        return Err("the knee is not one of the steps".into());
    }
    Ok(())
}

/// A sweep's factors with levels and at most 10000 cells, its runs' shares within
/// 0..=100 %, its result naming cells it has.
fn sweep(w: &crate::envelope::SweepReport) -> Result<(), String> {
    if w.plan.factors.iter().any(|f| f.levels.is_empty()) {
        return Err("a sweep factor without levels".into());
    }
    let n = w
        .plan
        .factors
        .iter()
        .map(|f| f.levels.len())
        .try_fold(1usize, |a, l| a.checked_mul(l))
        .filter(|&n| n <= 10_000);
    if n.is_none() {
        return Err("a sweep of more than 10000 cells".into());
    }
    // Shares (NaN: not measured).
    let share = |x: &f64| x.is_nan() || (0.0..=100.0).contains(x);
    if let Some(x) = w
        .runs
        .iter()
        .flat_map(|r| std::iter::once(&r.metrics.loss_pct).chain(r.metrics.cpu_busy_pct.values()))
        .find(|x| !share(x))
    {
        return Err(format!(
            "a sweep run's loss or CPU share of {x} %: allowed 0..=100 %"
        ));
    }
    let cells = w.result.cells.len();
    if w.result.best.is_some_and(|b| b >= cells) || w.result.effects.iter().any(|e| e.cell >= cells)
    {
        return Err("a sweep result naming a cell it does not have".into());
    }
    Ok(())
}

/// A tcp record's plan valid, its runs and watched flows those of its mode, each flow's
/// samples within FLOW_SAMPLES.
fn tcp(t: &crate::tcp::TcpRecord) -> Result<(), String> {
    if let Err(e) = t.plan.validate() {
        return Err(format!("a tcp plan that cannot run: {e}"));
    }
    use tpslab_plan::tcp::TcpMode;
    let (runs, watched) = (t.runs.len(), t.watched.len());
    let fits = match t.plan.mode {
        TcpMode::Send { .. } | TcpMode::Reverse { .. } => runs <= 1 && watched == 0,
        TcpMode::Lab { .. } => runs <= 2 && watched == 0,
        TcpMode::Watch { .. } => runs == 0,
    };
    if !fits {
        return Err(format!(
            "a tcp record of mode {:?} with {runs} run(s) and {watched} watched flow(s)",
            t.plan.mode
        ));
    }
    let samples = t.runs.iter().map(|r| r.flow.samples.len());
    let watched = t.watched.iter().map(|w| w.flow.samples.len());
    if let Some(n) = samples.chain(watched).find(|&n| n > FLOW_SAMPLES) {
        return Err(crate::read::too_long(
            &format!("a flow's samples ({n})"),
            FLOW_SAMPLES,
            "the TCP_INFO samples `tcp` keeps of one flow",
        ));
    }
    Ok(())
}

/// A serve tcp record's plan valid and its run's time above 0 s.
fn serve_tcp(s: &crate::tcp::ServeTcpRecord) -> Result<(), String> {
    if let Err(e) = s.plan.validate() {
        return Err(format!("a serve tcp plan that cannot run: {e}"));
    }
    if !(s.elapsed_s.is_finite() && s.elapsed_s > 0.0) {
        return Err(format!("a server that ran for {} s", s.elapsed_s));
    }
    Ok(())
}

/// A load http record's plan valid, its counts adding up, its series checked.
fn load_http(l: &crate::load_http::LoadHttpRecord) -> Result<(), String> {
    if let Err(e) = l.plan.validate() {
        return Err(format!("a load http plan that cannot run: {e}"));
    }
    let r = &l.result;
    let lat = [&r.corrected, &r.uncorrected];
    if r.status.total() + r.errors.total() + r.unanswered < r.sent
        || r.status.total() > r.sent
        || r.codes.total() > r.status.total()
        || lat.iter().any(|s| s.count != r.status.total())
        || !(r.first_sent_s.is_finite() && r.last_sent_s.is_finite())
    {
        return Err(format!(
            "a load http result whose counts do not add up ({} sent, {} replies, {} failed, {} unanswered)",
            r.sent,
            r.status.total(),
            r.errors.total(),
            r.unanswered
        ));
    }
    if let Some(Err(e)) = r.series.as_ref().map(|s| s.check(r.status.total())) {
        return Err(e);
    }
    Ok(())
}

/// A bdp record's RTTs within 1 us..=60 s, rates above 0, buffers at least their BDP,
/// fixes only the sysctls `bdp` raises, with numbers.
fn bdp(b: &crate::bdp::BdpRecord) -> Result<(), String> {
    // What `bdp`'s plan allows: a path RTT of 1 us..=60 s, rates above 0.
    let rtt = |x: f64| (1e-6..=60.0).contains(&x);
    let rate = |x: f64| x.is_finite() && x > 0.0;
    let ceiling_ok = b
        .ceiling
        .is_none_or(|c| rtt(c.rtt_s) && c.window_bytes > 0 && rate(c.ceiling_bps));
    let need_ok = b.need.as_ref().is_none_or(|n| {
        rtt(n.rtt_s) && rate(n.rate_bps) && n.plan.buffer_bytes >= n.plan.bdp_bytes
    });
    // The sysctls `bdp` raises, with numbers: nothing else is ever printed for a shell.
    const KEYS: [&str; 4] = [
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.core.rmem_max",
        "net.core.wmem_max",
    ];
    let fix_ok = |(k, v): &(String, String)| {
        KEYS.contains(&k.as_str())
            && !v.trim().is_empty()
            && v.chars().all(|c| c.is_ascii_digit() || c == ' ')
    };
    if let Some((k, v)) = b.need.iter().flat_map(|n| &n.fixes).find(|f| !fix_ok(f)) {
        return Err(format!(
            "a bdp fix {k:?} = {v:?}: allowed {} with numbers",
            KEYS.join(", ")
        ));
    }
    if !(rtt(b.rtt_s) && ceiling_ok && need_ok) {
        return Err(
            "a bdp record with an RTT outside 1us..=60s, a rate or ceiling not above 0, or a buffer below its BDP"
                .into(),
        );
    }
    Ok(())
}

/// A comparison of at least two records, each row with one value per record.
fn compare(c: &crate::compare::CompareReport) -> Result<(), String> {
    let n = c.labels.len();
    if n < 2
        || c.differences.iter().any(|d| d.values.len() != n)
        || c.figures
            .iter()
            .any(|f| f.values.len() != n || f.effects.len() + 1 != n)
    {
        return Err(format!(
            "a comparison whose rows do not have one value per record ({n} records)"
        ));
    }
    Ok(())
}

/// A probe idle record's connections' rounds within its connections.
fn probe_idle(r: &crate::idle::IdleRecord) -> Result<(), String> {
    if r.conns.iter().any(|c| c.round as usize > r.conns.len()) {
        return Err("a probe round without its connections".into());
    }
    Ok(())
}

/// The host's CPUs of a record's metadata or environment.
fn cpus(what: &str, n: usize) -> Result<(), String> {
    CPUS.check(what, n as u64)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A share of something, percent: 0..=100.
fn share(what: &str, pct: f64) -> Result<(), String> {
    if (0.0..=100.0).contains(&pct) {
        Ok(())
    } else {
        Err(format!("{what} {pct} %: allowed 0..=100 %"))
    }
}

/// A length of time that passed, seconds: finite and not negative.
fn elapsed(what: &str, s: f64) -> Result<(), String> {
    if s.is_finite() && s >= 0.0 {
        Ok(())
    } else {
        Err(format!("{what} {s} s: allowed 0 s or more"))
    }
}

/// A UDP run or watch: its host, shares, fleet place, histograms and series.
fn run(r: &RunRecord) -> Result<(), String> {
    cpus("environment.cpus", r.environment.cpus)?;
    elapsed("elapsed_s", r.elapsed_s)?;
    if let Some(g) = &r.generator {
        if let Some(l) = g.window_loss_pct {
            share("generator.window_loss_pct", l)?;
        }
        for (what, x) in [
            ("generator.rate_pps", g.rate_pps),
            ("generator.achieved_pps", g.achieved_pps),
            ("generator.tps", g.tps),
        ] {
            if x.is_nan() || x < 0.0 {
                return Err(format!("{what} {x}: allowed 0 or more"));
            }
        }
        if let Some(f) = &g.frames {
            if f.frames_received > f.frames_expected {
                return Err(format!(
                    "generator.frames: {} frames received of {} expected: allowed at most the expected",
                    f.frames_received, f.frames_expected
                ));
            }
            if f.replies_complete != g.replies_matched {
                return Err(format!(
                    "generator.frames.replies_complete {} and generator.replies_matched {}: allowed the same",
                    f.replies_complete, g.replies_matched
                ));
            }
        }
        // window_answered may exceed window_sent: in aggregate match mode it counts every
        // datagram read, and a server may answer with several (memcached) or a stray
        // sender may add some.
        // A histogram's total is held to MAX_FIGURE when decoded, and is the count of
        // the summary made from it.
        if let Some(h) = &g.histograms {
            for (which, text, summary) in [
                ("intended", &h.intended, &g.latency_intended),
                ("actual", &h.actual, &g.latency_actual),
            ] {
                let d = crate::histogram::decode_histogram(text)
                    .map_err(|e| format!("its {which} latency histogram does not decode: {e}"))?;
                if d.len() != summary.count {
                    return Err(format!(
                        "its {which} latency histogram holds {} values, generator.latency_{which}.count {}: allowed the same",
                        d.len(),
                        summary.count
                    ));
                }
            }
        }
    }
    if let Some(a) = &r.agent {
        fleet_place("agent", a.index, a.of)?;
    }
    if let Some(m) = &r.merged {
        if m.of == 0 || m.of > MAX_AGENTS {
            return Err(format!(
                "merged.of {}: allowed 1..={MAX_AGENTS} agents",
                m.of
            ));
        }
        for i in m
            .agents
            .iter()
            .map(|a| a.index)
            .chain(m.missing.iter().copied())
        {
            fleet_place("merged agent", i, m.of)?;
        }
        if m.agents.len() + m.missing.len() != m.of {
            return Err(format!(
                "merged: {} agent(s) and {} missing of {}",
                m.agents.len(),
                m.missing.len(),
                m.of
            ));
        }
        for a in &m.agents {
            if let Some(l) = a.window_loss_pct {
                share("merged agent window_loss_pct", l)?;
            }
        }
    }
    if let Some(o) = &r.observer {
        let t = o.series.t_ms.len();
        let names = o.series.values.len();
        if t > OBSERVER_SAMPLES || names > OBSERVER_SERIES {
            return Err(format!(
                "observer series of {t} samples and {names} names: allowed up to {OBSERVER_SAMPLES} samples (what an observer keeps) and {OBSERVER_SERIES} names"
            ));
        }
        if let Some((name, v)) = o.series.values.iter().find(|(_, v)| v.len() > t) {
            return Err(format!(
                "observer series {name} of {} values beside {t} sample times",
                v.len()
            ));
        }
        if o.series
            .t_ms
            .windows(2)
            .any(|w| w[0].is_nan() || w[0] > w[1])
        {
            return Err("observer sample times that go back".into());
        }
        for (cpu, m) in &o.cpu_pct {
            for (k, &x) in m {
                // A CPU's idle and iowait in /proc/stat may go backwards (the kernel says
                // so): records written before the observer clamped its shares may hold a
                // busy CPU a little over 100 %; a share beyond 101 % no run wrote.
                if x.is_nan() || !(0.0..=101.0).contains(&x) {
                    return Err(format!(
                        "observer.cpu_pct.{cpu}.{k} {x} %: allowed 0..=100 %"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Agent `index` of a fleet of `of`: 0..of, of 1..=[`MAX_AGENTS`].
fn fleet_place(what: &str, index: usize, of: usize) -> Result<(), String> {
    if of == 0 || of > MAX_AGENTS {
        return Err(format!("{what} of {of}: allowed 1..={MAX_AGENTS} agents"));
    }
    if index >= of {
        return Err(format!(
            "{what} {index} of {of}: allowed 0..={} (agents are numbered from 0)",
            of - 1
        ));
    }
    Ok(())
}

/// A capacity record's plan can run, and its steps' figures are rates and shares.
fn capacity(c: &crate::capacity::CapacityRecord) -> Result<(), String> {
    if let Err(e) = c.plan.validate() {
        return Err(format!("a capacity plan that cannot run: {e}"));
    }
    let rate = |x: f64| (0.0..=tpslab_plan::limits::MAX_RATE_PPS).contains(&x);
    let share = |x: f64| (0.0..=100.0).contains(&x);
    for (i, s) in c.steps.iter().enumerate() {
        let ok = rate(s.rate_pps)
            && s.rate_pps > 0.0
            && rate(s.achieved_pps)
            && rate(s.answered_pps)
            && s.loss_pct.is_none_or(share)
            && share(s.errors_pct)
            && s.started_s.is_finite()
            && s.elapsed_s.is_finite()
            && s.elapsed_s >= 0.0;
        if !ok {
            return Err(format!(
                "capacity step {i}: a rate above 0 up to {} pps, rates achieved and answered of at least 0, loss and errors within 0..=100 %, finite times",
                tpslab_plan::limits::MAX_RATE_PPS
            ));
        }
    }
    match &c.retry {
        None => Ok(()),
        Some(r) if r.search.retry.is_some() => {
            Err("a capacity retry with a retry of its own (one retry at most)".into())
        }
        Some(r) => capacity(&r.search).map_err(|e| format!("the retry's search: {e}")),
    }
}
