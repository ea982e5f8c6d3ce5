//! What each record's command was aimed at, in words ([`Record::target`]), read from
//! what the record itself carries, for lists (`tpslab history`) and page headers.

use crate::envelope::{Body, Record};
use crate::run::RunRecord;
use tpslab_plan::probe::IdleTarget;
use tpslab_plan::tcp::TcpMode;

impl Record {
    /// What the command was aimed at, from the record's own fields:
    /// - a UDP run or diagnosis: the address the load went to
    ///   (`generator.target`), then the server process when one was followed
    ///   (`pid 4242 python3`, from `target`);
    /// - a watch: the process (`target`, else the plan's PID) and the port watched;
    /// - a ramp: its target address, and tpslab's built-in server when it was one;
    /// - a sweep: the user's server command (`--server-cmd`), else tpslab's server;
    /// - `serve udp` / `serve tcp`: the address served;
    /// - `tcp`: the sink or source, the lab's delay line, or the process/port watched;
    /// - `doctor`: the tree audited (`/`: this host);
    /// - `probe idle`: the server, or the lab's middlebox; `probe pool`: the lab;
    /// - `compare`: the records compared;
    /// - `capacity`: the address the load went to.
    ///
    /// Empty only for a run record that names none of them (an older watch without its
    /// plan).
    pub fn target(&self) -> String {
        match &self.body {
            Body::UdpRun(r) | Body::Watch(r) => run_target(r),
            Body::Diagnose(d) => run_target(&d.before),
            Body::Ramp(r) => {
                let p = &r.run.plan;
                match &p.builtin_server {
                    Some(b) => format!("{} (tpslab's server: {b})", p.target),
                    None => p.target.to_string(),
                }
            }
            Body::Sweep(s) => match &s.plan.server_cmd {
                Some(cmd) => format!("server command: {cmd}"),
                None => match &s.plan.scenario {
                    Some(sc) => format!("tpslab's server (study {sc})"),
                    None => "tpslab's server".into(),
                },
            },
            Body::Serve(s) => s.server.bind.clone(),
            Body::Tcp(t) => match t.plan.mode {
                TcpMode::Send { target } => target.to_string(),
                TcpMode::Reverse { target } => format!("{target} (receiving)"),
                TcpMode::Lab { link, .. } => format!(
                    "the lab (a delay line of {:.1} ms RTT)",
                    link.rtt_ns() as f64 / 1e6
                ),
                TcpMode::Watch { pid, port } => process_and_port(pid, None, port),
            },
            Body::ServeTcp(s) => s.addr.to_string(),
            Body::Doctor(d) => {
                if d.root == "/" {
                    "this host (/)".into()
                } else {
                    d.root.clone()
                }
            }
            Body::Bdp(b) => format!("a path of {} ms RTT", b.rtt_s * 1e3),
            Body::ProbeIdle(r) => match r.plan.target {
                IdleTarget::Server { addr } => addr.to_string(),
                IdleTarget::Lab { idle_timeout, .. } => lab(idle_timeout),
            },
            Body::ProbePool(r) => lab(r.plan.idle_timeout),
            Body::LoadHttp(l) => l.plan.request.url.clone(),
            Body::Compare(c) => c.labels.join(", "),
            Body::Capacity(c) => c.plan.target().to_string(),
        }
    }
}

fn lab(idle_timeout: std::time::Duration) -> String {
    format!(
        "the lab (a middlebox forgetting flows idle {:.0} s)",
        idle_timeout.as_nanos() as f64 / 1e9
    )
}

/// "pid 4242 python3 port 9500", the parts that are known.
fn process_and_port(pid: Option<u32>, exe: Option<&str>, port: Option<u16>) -> String {
    let mut parts = vec![];
    if let Some(pid) = pid {
        parts.push(format!("pid {pid}"));
        if let Some(name) = exe
            .and_then(|e| e.rsplit('/').next())
            .filter(|n| !n.is_empty())
        {
            parts.push(name.to_string());
        }
    }
    if let Some(port) = port {
        parts.push(format!("port {port}"));
    }
    parts.join(" ")
}

/// A run's or a watch's target: the load's address, then the process followed; a watch
/// (no load): the process and port of its plan.
fn run_target(r: &RunRecord) -> String {
    let (plan_pid, plan_port) = match &r.plan {
        Some(tpslab_plan::udp::RunPlan::Watch(w)) => (w.pid, w.port),
        Some(tpslab_plan::udp::RunPlan::Udp(_)) | None => (None, None),
    };
    let process = process_and_port(
        r.target.as_ref().map(|t| t.pid).or(plan_pid),
        r.target.as_ref().map(|t| t.exe.as_str()),
        plan_port,
    );
    match (&r.generator, process.is_empty()) {
        (Some(g), true) => g.target.clone(),
        (Some(g), false) => format!("{} ({process})", g.target),
        (None, _) => process,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Record {
        Record::from_json(text).unwrap()
    }

    #[test]
    fn every_kind_names_its_target_from_its_own_fields() {
        let run = read(include_str!(
            "../../tpslab-report/tests/fixtures/udp_run.json"
        ));
        assert_eq!(run.target(), "127.0.0.1:9000");
        let diag = read(include_str!(
            "../../tpslab-report/tests/fixtures/diagnose.json"
        ));
        assert_eq!(diag.target(), "127.0.0.1:35247");
        let ramp = read(include_str!("../../tpslab-report/tests/fixtures/ramp.json"));
        assert!(
            ramp.target()
                .starts_with("127.0.0.1:33505 (tpslab's server: "),
            "{}",
            ramp.target()
        );
        let mut sweep = read(include_str!(
            "../../tpslab-report/tests/fixtures/sweep.json"
        ));
        assert_eq!(sweep.target(), "tpslab's server");
        if let Body::Sweep(s) = &mut sweep.body {
            s.plan.server_cmd = Some("python3 consumer.py {port}".into());
        }
        assert_eq!(sweep.target(), "server command: python3 consumer.py {port}");
        let tcp = read(include_str!(
            "../../tpslab-report/tests/fixtures/tcp_lab.json"
        ));
        assert_eq!(tcp.target(), "the lab (a delay line of 30.0 ms RTT)");
        // A watch of a port (a fleet's server side), then of a process found at start.
        let mut watch = read(include_str!("../../../tests/fixtures/fleet/watch.json"));
        assert_eq!(watch.target(), "port 19999");
        if let Body::Watch(r) = &mut watch.body {
            r.target = Some(crate::run::TargetProcess {
                pid: 4242,
                exe: "/usr/bin/python3.12".into(),
                runtime: crate::runtime::Runtime::Python,
                threads: 1,
                exact_counts: true,
                found_by: None,
                others: vec![],
            });
        }
        assert_eq!(watch.target(), "pid 4242 python3.12 port 19999");
        // A load at a server followed by its PID.
        let mut run = run;
        if let Body::UdpRun(r) = &mut run.body {
            r.target = Some(crate::run::TargetProcess {
                pid: 7,
                exe: "/usr/sbin/named".into(),
                runtime: crate::runtime::Runtime::Native,
                threads: 4,
                exact_counts: false,
                found_by: Some("found by its UDP socket on 127.0.0.1:9000".into()),
                others: vec![],
            });
        }
        assert_eq!(run.target(), "127.0.0.1:9000 (pid 7 named)");
        // An older watch that carries nothing to name.
        let old = Record::new(Body::Watch(RunRecord::default()));
        assert_eq!(old.target(), "");
    }
}
