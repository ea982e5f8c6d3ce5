//! `ramp tcp|udp`: closed-loop load stepping up the users. The plan's pieces made from
//! what a user writes ([`parse_steps`], [`request`]), the target (someone's server, or
//! tpslab's reference server started as a child process for `ramp tcp` without one:
//! [`prepare`]), and the run ([`run`]): the steps, each step's result handed on as soon
//! as it is measured, the analysis and the record.

use crate::{Ctx, Started};
use anyhow::{bail, Result};
use std::net::SocketAddr;
use std::time::Duration;
use tpslab_engine::client::ramp::run_ramp_with;
use tpslab_plan::limits::MAX_UDP_PAYLOAD;
use tpslab_record::{Body, RampReport, Record};

use tpslab_plan::proto::{Builtin, Proto};
use tpslab_plan::ramp::RampPlan;
use tpslab_record::ramp::StepResult;

mod flags;
pub use flags::{HttpFlags, RampFlags};

/// Users per step from "A..B" (`--users`) and "+N" / "N" / "xF" (`--step`): at most 200
/// steps, increasing, from A to B (B always the last), 1 <= A <= B <= 10000. Errors (one
/// line) name the value and what is allowed.
pub fn parse_steps(users: &str, step: &str) -> Result<Vec<usize>, String> {
    let bad_users = || {
        format!(
            "--users {users}: allowed FIRST..LAST with 1 <= FIRST <= LAST <= 10000, e.g. 1..200"
        )
    };
    let (a, b) = users.split_once("..").ok_or_else(bad_users)?;
    let a: usize = a.trim().parse().map_err(|_| bad_users())?;
    let b: usize = b.trim().parse().map_err(|_| bad_users())?;
    if a < 1 || b > 10_000 {
        return Err(bad_users());
    }
    if a > b {
        return Err(format!(
            "--users {users}: the range is empty (FIRST above LAST)"
        ));
    }
    let bad_step = || {
        format!("--step {step}: allowed +N or N (add N users, N >= 1) or xF (multiply by F > 1), e.g. +10 or x2")
    };
    let mut v = vec![a];
    if let Some(f) = step.strip_prefix('x') {
        let f: f64 = f.parse().map_err(|_| bad_step())?;
        if !(f > 1.0 && f.is_finite()) {
            return Err(bad_step());
        }
        let mut x = a as f64;
        loop {
            x *= f;
            let n = (x.round() as usize).max(v[v.len() - 1] + 1);
            if n >= b {
                break;
            }
            v.push(n);
        }
    } else {
        let n: usize = step
            .trim_start_matches('+')
            .parse()
            .map_err(|_| bad_step())?;
        if n == 0 {
            return Err(bad_step());
        }
        let mut x = a + n;
        while x < b {
            v.push(x);
            x += n;
        }
    }
    if *v.last().unwrap_or(&0) != b {
        v.push(b);
    }
    if v.len() > 200 {
        return Err(format!(
            "--users {users} --step {step}: {} steps, allowed at most 200",
            v.len()
        ));
    }
    Ok(v)
}

/// A sequence field in a request: (offset, length), bytes.
pub type SeqField = (usize, usize);

/// The request every user sends and, for udp with a payload file, the sequence field that
/// matches replies ([`Proto::request`]): `payload` (a `--payload-file`'s bytes, TCP: sent
/// verbatim with its own framing) or `size` bytes (8..=65507) with "ping" every 64, framed
/// for tcp.
/// `framing_given`: `--framing` was given other than `length` (refused for udp);
/// `seq_field`: `--seq-field OFF:LEN` as written (udp with a payload file only). Errors
/// (one line) name the flag.
pub fn request(
    proto: Proto,
    payload: Option<Vec<u8>>,
    size: u64,
    framing_given: bool,
    seq_field: Option<&str>,
) -> Result<(Vec<u8>, Option<SeqField>)> {
    let n = usize::try_from(size).unwrap_or(usize::MAX);
    if !(8..=MAX_UDP_PAYLOAD).contains(&n) {
        bail!("--size {size}: allowed 8..={MAX_UDP_PAYLOAD} bytes");
    }
    let body = || {
        let mut b = vec![b'.'; n];
        for c in b.chunks_mut(64) {
            if c.len() >= 4 {
                c[..4].copy_from_slice(b"ping");
            }
        }
        b
    };
    proto
        .request(payload, body(), framing_given, seq_field)
        .map_err(anyhow::Error::from)
}

/// tpslab's reference server (`serve tcp --mode replace`) as `ramp tcp` without a target
/// starts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinServer {
    /// CPU work per request.
    pub work: Duration,
    /// Waiting per request (a sleep, like a database round trip).
    pub serial: Duration,
    /// The waiting under one global lock (S3).
    pub serialize: bool,
    /// 0: a thread per connection; N: N epoll workers.
    pub threads: usize,
}

impl BuiltinServer {
    /// The server in words, as the record keeps it (`RampPlan::builtin_server`).
    pub fn describe(&self) -> String {
        if self.serialize {
            format!(
                "{:?} CPU + {:?} under one global lock per request",
                self.work, self.serial
            )
        } else {
            format!(
                "{:?} CPU + {:?} waiting per request, no lock",
                self.work, self.serial
            )
        }
    }

    /// Its `tpslab serve tcp` arguments (`serve http` when `http`), for a life of `life`
    /// (it ends by itself even if tpslab is killed).
    pub(crate) fn args(&self, life: Duration, http: bool) -> Vec<String> {
        let mut args: Vec<String> = if http {
            ["serve", "http", "--bind", "127.0.0.1:0"]
                .map(String::from)
                .into()
        } else {
            ["serve", "tcp", "--mode", "replace", "--bind", "127.0.0.1:0"]
                .map(String::from)
                .into()
        };
        args.extend([
            "--work".into(),
            humantime::format_duration(self.work).to_string(),
            "--serial".into(),
            humantime::format_duration(self.serial).to_string(),
            "--threads".into(),
            self.threads.to_string(),
        ]);
        if self.serialize {
            args.push("--serialize".into());
        }
        args.extend(["--duration".into(), format!("{}s", life.as_secs())]);
        args
    }
}

/// A validated ramp: the plan, and whether its server is to be started.
#[derive(Debug, Clone, PartialEq)]
pub struct RampSetup {
    /// The plan. With a [`BuiltinServer`], `plan.target` is [`BUILTIN_UNSTARTED`] and
    /// `plan.server_pid` None until [`prepare`] starts it (`plan.builtin_server` says
    /// what it is already).
    pub plan: RampPlan,
    /// tpslab's own server to start (None: `plan.target` is someone's server).
    pub builtin: Option<BuiltinServer>,
}

/// The address a setup with a built-in server holds until it is started.
pub const BUILTIN_UNSTARTED: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// A ramp ready to run: its plan with the target known, and the server started for it
/// (stopped when this is dropped).
pub struct Ready {
    /// The plan as it runs (the header a terminal prints before the steps shows it).
    pub plan: RampPlan,
    server: Option<crate::server_proc::ServerProcess>,
}

/// Starts the built-in server if the setup wants one, for as long as the ramp can last and
/// 30 s more, and fills the plan's target and server PID from it. Errors: the server
/// could not be started (with the end of its stderr).
pub fn prepare(setup: &RampSetup) -> Result<Ready> {
    let mut plan = setup.plan.clone();
    let server = match &setup.builtin {
        None => None,
        Some(b) => {
            let step = plan.step + plan.warmup;
            let life = step * plan.steps.len() as u32 + Duration::from_secs(30);
            let http = plan.proto.builtin()? == Builtin::Http;
            let s = crate::server_proc::ServerProcess::tpslab(&b.args(life, http))?;
            plan.target = s.addr;
            // ramp http without a URL: the built-in server's.
            plan.proto.on_server(s.addr);
            plan.server_pid = Some(s.pid());
            Some(s)
        }
    };
    Ok(Ready { plan, server })
}

/// Runs the ramp (a phase of `ramp: N steps`; `ctx.stop` ends it after the current step),
/// calling `on_steps` with every step measured so far as each one is (a live exporter's
/// feed); stops the built-in server, analyses the run against this host's CPUs and
/// returns the record (kind ramp). Errors: the engine's (descriptors, sockets).
pub fn run(ready: Ready, ctx: &Ctx, on_steps: &(dyn Fn(&[StepResult]) + Sync)) -> Result<Record> {
    let Ready { plan, server } = ready;
    let started = Started::now();
    let secs = plan.steps.len() as f64 * (plan.warmup + plan.step).as_nanos() as f64 / 1e9;
    let label = format!("ramp: {} steps", plan.steps.len());
    let steps = std::sync::Mutex::new(vec![]);
    let on_step = |s: &StepResult| {
        let mut st = steps.lock().unwrap_or_else(|e| e.into_inner());
        st.push(s.clone());
        on_steps(&st);
    };
    let run = ctx.phase(&label, secs, || run_ramp_with(&plan, &ctx.stop, &on_step))?;
    drop(server);
    let meta = started.meta(run.interrupted);
    let analysis = tpslab_analysis::ramp::analyse(&run, meta.cpus);
    Ok(Record::with_meta(
        meta,
        Body::Ramp(RampReport { run, analysis }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tpslab_engine::serve::rr::frame;

    proptest! {
        #[test]
        fn any_users_and_step_are_steps_or_an_error(users in "[0-9x+. ]{0,8}\\.\\.[0-9 ]{0,6}|\\PC{0,12}", step in "[+x]?[0-9.]{0,8}|\\PC{0,6}") {
            if let Ok(v) = parse_steps(&users, &step) {
                prop_assert!(!v.is_empty() && v.len() <= 200);
                prop_assert!(v[0] >= 1 && *v.last().unwrap() <= 10_000);
                prop_assert!(v.windows(2).all(|w| w[0] < w[1]), "{:?}", v);
            }
        }
    }

    #[test]
    fn steps_from_ranges() {
        assert_eq!(
            parse_steps("1..32", "x2").unwrap(),
            vec![1, 2, 4, 8, 16, 32]
        );
        assert_eq!(
            parse_steps("1..110", "+10").unwrap(),
            vec![1, 11, 21, 31, 41, 51, 61, 71, 81, 91, 101, 110]
        );
        assert_eq!(parse_steps("10..30", "10").unwrap(), vec![10, 20, 30]);
        assert_eq!(parse_steps("5..5", "x2").unwrap(), vec![5]);
        assert_eq!(parse_steps("1..3", "x1.1").unwrap(), vec![1, 2, 3]);
        assert!(parse_steps("9..1", "x2").unwrap_err().contains("empty"));
        for (u, s) in [
            ("0..5", "x2"),
            ("1-5", "x2"),
            ("1..5", "x1"),
            ("1..5", "+0"),
            ("1..5", "fast"),
            ("1..10001", "x2"),
            ("1..10000", "+1"),
        ] {
            let e = parse_steps(u, s).unwrap_err();
            assert!(e.contains(u) || e.contains(s), "{e}");
        }
    }

    #[test]
    fn requests_are_pings_framed_for_tcp_or_a_payload_matched_by_its_field() {
        let (tcp, none) = request(Proto::Tcp, None, 8, false, None).unwrap();
        assert_eq!((tcp, none), (frame(b"ping...."), None));
        let (udp, none) = request(Proto::Udp, None, 70, false, None).unwrap();
        assert_eq!(
            (&udp[..4], &udp[64..68], udp.len(), none),
            (&b"ping"[..], &b"ping"[..], 70, None)
        );
        let dns = vec![0u8; 29];
        let (p, f) = request(Proto::Udp, Some(dns.clone()), 1024, false, Some("0:2")).unwrap();
        assert_eq!((p, f), (dns.clone(), Some((0, 2))));
        let e = |r: Result<(Vec<u8>, Option<SeqField>)>| r.unwrap_err().to_string();
        assert_eq!(
            e(request(Proto::Tcp, None, 7, false, None)),
            "--size 7: allowed 8..=65507 bytes"
        );
        assert_eq!(
            e(request(Proto::Tcp, None, 64, false, Some("0:2"))),
            "--seq-field applies to ramp udp"
        );
        assert_eq!(
            e(request(Proto::Udp, None, 64, true, None)),
            "--framing applies to ramp tcp"
        );
        assert_eq!(
            e(request(Proto::Udp, None, 64, false, Some("0:2"))),
            "--seq-field needs --payload-file"
        );
        assert!(e(request(Proto::Udp, Some(dns), 64, false, None))
            .contains("needs --seq-field OFF:LEN"));
    }

    #[test]
    fn the_builtin_server_is_started_for_the_whole_ramp_and_said_in_words() {
        let b = BuiltinServer {
            work: Duration::ZERO,
            serial: Duration::from_millis(10),
            serialize: true,
            threads: 4,
        };
        assert_eq!(
            b.describe(),
            "0ns CPU + 10ms under one global lock per request"
        );
        assert_eq!(
            b.args(Duration::from_secs(42), false).join(" "),
            "serve tcp --mode replace --bind 127.0.0.1:0 --work 0s --serial 10ms --threads 4 --serialize --duration 42s"
        );
        assert_eq!(
            b.args(Duration::from_secs(42), true).join(" "),
            "serve http --bind 127.0.0.1:0 --work 0s --serial 10ms --threads 4 --serialize --duration 42s"
        );
        let b = BuiltinServer {
            serialize: false,
            ..b
        };
        assert_eq!(b.describe(), "0ns CPU + 10ms waiting per request, no lock");
    }
}
