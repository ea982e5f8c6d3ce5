//! `doctor --for`: the host's settings against the workload it is for, with the same
//! arithmetic as the commands that measure it: a UDP burst against the receive buffers
//! (diagnose's [`crate::buffer`]), a TCP rate over an RTT against tcp_rmem/tcp_wmem (bdp's
//! [`crate::bdp`]), a pool's idle connections against a middlebox's idle timeout
//! (keepalive and retransmission give-up, [`crate::tcp_timers`]).

use super::{number, numbers};
use crate::bdp;
use crate::buffer::{burst_need, capacity_datagrams};
use crate::tcp_timers::{keepalive_dead_after_s, retries2_give_up_ms, RTO_MAX_DEFAULT_MS};
use tpslab_plan::doctor::Workload;
use tpslab_record::doctor::{DoctorRecord, Finding, Fix, Running, Severity};

use super::path_seen::data_only_fix;
pub use super::path_seen::PathSeen;

/// The findings for workload `w` on the host `r` describes.
pub fn judge(w: &Workload, r: &DoctorRecord) -> Vec<Finding> {
    match *w {
        Workload::Udp {
            rate_pps,
            burst,
            size_bytes,
            sockets,
        } => match &r.truesize {
            Some(Ok(p)) if p.truesize_bytes() > 0 => udp(
                &r.running,
                Udp {
                    rate_pps,
                    burst,
                    size_bytes,
                    sockets,
                    truesize: p.truesize_bytes(),
                    page_bytes: r.page_bytes,
                },
            ),
            other => vec![Finding {
                severity: Severity::Warn,
                what: format!(
                    "--for udp not judged: what this kernel charges per {size_bytes}-byte datagram could not be measured ({})",
                    match other {
                        Some(Err(e)) => e.clone(),
                        _ => "no probe".into(),
                    }
                ),
                evidence: vec![],
                fix: None,
            }],
        },
        Workload::Tcp { rtt, rate_bps } => tcp(&r.running, rtt.as_nanos() as f64 / 1e9, rate_bps, r.page_bytes),
        Workload::Pool {
            idle_timeout,
            validate,
            max_idle,
            keepalive_counts,
        } => pool(
            &r.running,
            idle_timeout.as_secs(),
            validate.map(|v| v.as_secs()),
            max_idle.map(|v| v.as_secs()),
            PathSeen::stated(keepalive_counts),
        ),
    }
}

/// A UDP receiver's figures.
#[derive(Debug, Clone, Copy)]
pub struct Udp {
    /// Mean rate, pps.
    pub rate_pps: f64,
    /// Datagrams per burst.
    pub burst: u64,
    /// Payload, bytes.
    pub size_bytes: u64,
    /// Sockets receiving at once.
    pub sockets: u64,
    /// Memory charged per queued datagram on this kernel, bytes (the probe).
    pub truesize: u64,
    /// Page size of udp_mem, bytes.
    pub page_bytes: u64,
}

/// The receive buffers a burst needs: the whole burst waiting, each datagram charged
/// truesize, x2 margin ([`burst_need`]); against rmem_default (a socket that never sets
/// SO_RCVBUF), rmem_max (one that asks), udp_mem (all sockets together) and
/// netdev_max_backlog (a burst queued on one CPU).
pub fn udp(running: &Running, u: Udp) -> Vec<Finding> {
    let mut out = vec![];
    let need = burst_need(u.burst, u.truesize);
    let (req, granted) = need.request();
    let t = u.truesize;
    let why = format!(
        "a burst of {} datagrams of {} B, each charged {t} B (truesize, measured on this kernel), x{} margin: {granted} B of receive buffer",
        u.burst, u.size_bytes, need.margin
    );
    let holds = |limit: u64| {
        let n = capacity_datagrams(limit, t);
        format!(
            "{limit} B holds {n} datagrams, {:.1} ms of arrivals at {:.0} pps",
            n as f64 / u.rate_pps * 1e3,
            u.rate_pps
        )
    };
    if let Some(d) = number(running, "net/core/rmem_default").filter(|&d| d < granted) {
        out.push(Finding {
            severity: Severity::Warn,
            what: format!("net.core.rmem_default is short for a server that never sets SO_RCVBUF: {why}; rmem_default {} (S1)", holds(d)),
            evidence: vec![format!("/proc/sys/net/core/rmem_default: {d}")],
            fix: Some(Fix::sysctl("net.core.rmem_default", granted)),
        });
    }
    if let Some(m) = number(running, "net/core/rmem_max").filter(|&m| m < req) {
        out.push(Finding {
            severity: Severity::Warn,
            what: format!(
                "net.core.rmem_max caps a server that asks for its buffer: {why}, setsockopt(SO_RCVBUF, {req}) (the kernel doubles it), but rmem_max is {m}"
            ),
            evidence: vec![format!("/proc/sys/net/core/rmem_max: {m}")],
            fix: Some(Fix::sysctl("net.core.rmem_max", req)),
        });
    }
    if let Some(v) = numbers(running, "net/ipv4/udp_mem").filter(|v| v.len() == 3) {
        let all = granted.saturating_mul(u.sockets);
        let pages = all.div_ceil(u.page_bytes.max(1));
        if v[2] < pages {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!(
                    "net.ipv4.udp_mem is short: {} socket(s) x {granted} B full at once is {pages} pages of {} B, above its limit of {} pages (beyond it every UDP socket on the host drops)",
                    u.sockets, u.page_bytes, v[2]
                ),
                evidence: vec![format!("/proc/sys/net/ipv4/udp_mem: {} {} {}", v[0], v[1], v[2])],
                fix: Some(Fix::sysctl(
                    "net.ipv4.udp_mem",
                    format!("{} {} {pages}", v[0], v[1].min(pages)),
                )),
            });
        }
    }
    if let Some(b) = number(running, "net/core/netdev_max_backlog").filter(|&b| b < u.burst) {
        out.push(Finding {
            severity: Severity::Info,
            what: format!(
                "a burst of {} datagrams handed to one CPU faster than its softirq runs waits in that CPU's input backlog, which holds net.core.netdev_max_backlog = {b} packets (loopback, veth, RPS): drops there count in /proc/net/softnet_stat, not at the socket",
                u.burst
            ),
            evidence: vec![format!("/proc/sys/net/core/netdev_max_backlog: {b}")],
            fix: Some(Fix::sysctl("net.core.netdev_max_backlog", u.burst)),
        });
    }
    if out.iter().all(|f| f.severity == Severity::Info) {
        out.push(Finding {
            severity: Severity::Info,
            what: format!("the receive buffers hold the burst: {why}"),
            evidence: ["net/core/rmem_default", "net/core/rmem_max"]
                .iter()
                .filter_map(|p| number(running, p).map(|v| format!("/proc/sys/{p}: {v}")))
                .collect(),
            fix: None,
        });
    }
    out
}

/// The buffers a TCP flow needs for `rate_bps` over `rtt_s` ([`bdp::buffer_plan`] and
/// [`bdp::host_fixes`], as `tpslab bdp` prints them), window scaling, autotuning and
/// tcp_mem.
pub fn tcp(running: &Running, rtt_s: f64, rate_bps: f64, page_bytes: u64) -> Vec<Finding> {
    let mut out = vec![];
    let p = bdp::buffer_plan(rate_bps, rtt_s);
    let why = format!(
        "{:.1} Mbit/s over a {:.1} ms RTT is {} bytes in flight (the BDP); the kernel advertises part of a buffer as window, so a {} B buffer",
        rate_bps / 1e6,
        rtt_s * 1e3,
        p.bdp_bytes,
        p.buffer_bytes
    );
    if p.bdp_bytes > bdp::MAX_TCP_WINDOW {
        out.push(Finding {
            severity: Severity::Warn,
            what: format!("{why}: more than the largest TCP window ({} B); one flow cannot carry it, use several", bdp::MAX_TCP_WINDOW),
            evidence: vec![],
            fix: None,
        });
        return out;
    }
    let text = |k: &str| running.get(k).cloned().flatten();
    let (rmem, wmem) = (text("net/ipv4/tcp_rmem"), text("net/ipv4/tcp_wmem"));
    let (rmax, wmax) = (
        number(running, "net/core/rmem_max"),
        number(running, "net/core/wmem_max"),
    );
    for (key, value) in bdp::host_fixes(&p, rmem.as_deref(), wmem.as_deref(), rmax, wmax) {
        let path = key.replace('.', "/");
        let now = text(&path).unwrap_or_default();
        let what = if key.ends_with("mem_max") {
            format!("{key} ({now}) caps an application that sets its own buffer below what it must ask (setsockopt {value}, doubled by the kernel): {why}")
        } else {
            format!("{key} ({now}) lets autotuning grow a buffer only to its last value: {why}")
        };
        out.push(Finding {
            severity: Severity::Warn,
            what,
            evidence: vec![format!("/proc/sys/{path}: {now}")],
            fix: Some(Fix::sysctl(key, value)),
        });
    }
    if number(running, "net/ipv4/tcp_window_scaling") == Some(0) {
        out.push(Finding {
            severity: Severity::Warn,
            what: format!(
                "window scaling is off: every window is at most 65535 B, {:.1} Mbit/s over this RTT",
                bdp::window_ceiling_bps(65535, rtt_s) / 1e6
            ),
            evidence: vec!["/proc/sys/net/ipv4/tcp_window_scaling: 0".into()],
            fix: Some(Fix::sysctl("net.ipv4.tcp_window_scaling", 1)),
        });
    }
    if number(running, "net/ipv4/tcp_moderate_rcvbuf") == Some(0) {
        out.push(Finding {
            severity: Severity::Warn,
            what: "receive buffer autotuning is off: a socket keeps tcp_rmem's default unless its application sets SO_RCVBUF".into(),
            evidence: vec!["/proc/sys/net/ipv4/tcp_moderate_rcvbuf: 0".into()],
            fix: Some(Fix::sysctl("net.ipv4.tcp_moderate_rcvbuf", 1)),
        });
    }
    if let Some(v) = numbers(running, "net/ipv4/tcp_mem").filter(|v| v.len() == 3) {
        let pages = (2 * p.buffer_bytes).div_ceil(page_bytes.max(1));
        if v[1] < pages {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!("net.ipv4.tcp_mem's pressure threshold ({} pages) is below one flow's send and receive buffers ({pages} pages): under pressure the kernel shrinks every TCP buffer", v[1]),
                evidence: vec![format!("/proc/sys/net/ipv4/tcp_mem: {} {} {}", v[0], v[1], v[2])],
                fix: None,
            });
        }
    }
    if out.is_empty() {
        out.push(Finding {
            severity: Severity::Info,
            what: format!("enough already: {why}, and tcp_rmem/tcp_wmem let autotuning reach it"),
            evidence: [("net/ipv4/tcp_rmem", &rmem), ("net/ipv4/tcp_wmem", &wmem)]
                .iter()
                .filter_map(|(p, v)| v.as_ref().map(|v| format!("/proc/sys/{p}: {v}")))
                .collect(),
            fix: None,
        });
    }
    out
}

/// Idle pooled connections across a middlebox that forgets flows idle for `timeout_s`:
/// keepalive (must probe sooner to keep the flow alive), the retransmission give-up (how
/// long a request on a dead connection hangs), and the pool's own validation and idle
/// lifetime when given (S5: validated every 50 min, kept 83). `seen`: what `probe idle`
/// measured of the middlebox (doctor: [`PathSeen::UNKNOWN`]).
pub fn pool(
    running: &Running,
    timeout_s: u64,
    validate_s: Option<u64>,
    max_idle_s: Option<u64>,
    seen: PathSeen,
) -> Vec<Finding> {
    let keepalive_counts = seen.keepalive_counts;
    let mut out = vec![];
    let n = |k: &str| number(running, k);
    let ka = (
        n("net/ipv4/tcp_keepalive_time"),
        n("net/ipv4/tcp_keepalive_intvl"),
        n("net/ipv4/tcp_keepalive_probes"),
    );
    if let (Some(time), Some(intvl), Some(probes)) = ka {
        let evidence = vec![format!(
            "/proc/sys/net/ipv4/tcp_keepalive_time, _intvl, _probes: {time} {intvl} {probes}"
        )];
        if keepalive_counts.is_none() {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!(
                    "whether TCP keepalive resets this path's idle timer is not known (probe idle did not show it; doctor takes --keepalive-counts yes|no): keepalive is not recommended on that; a pooled connection idle past the path's timeout (more than {timeout_s} s) is ended unless the pool tests or retires it first"
                ),
                evidence,
                fix: Some(Fix::action(data_only_fix(timeout_s))),
            });
        } else if keepalive_counts == Some(false) {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!(
                    "TCP keepalive does not keep flows alive on this path (its idle timer counts application data only): whatever tcp_keepalive_time is ({time} s here), a pooled connection idle past the path's timeout (more than {timeout_s} s) is ended; only traffic the application sends counts: a test query on idle connections below the timeout, or retiring them before it"
                ),
                evidence,
                fix: Some(Fix::action(data_only_fix(timeout_s))),
            });
        } else if time >= timeout_s {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!(
                    "keepalive probes an idle connection first after {time} s, but the middlebox forgets it after {timeout_s} s: keepalive cannot keep it alive and finds it dead only after {} s; probe at half the timeout (and the application must set SO_KEEPALIVE, or TCP_KEEPIDLE per socket)",
                    keepalive_dead_after_s(time, intvl, probes)
                ),
                evidence,
                fix: Some(Fix::sysctl("net.ipv4.tcp_keepalive_time", (timeout_s / 2).max(1))),
            });
        } else {
            out.push(Finding {
                severity: Severity::Info,
                what: format!(
                    "keepalive probes an idle connection after {time} s, before the middlebox's {timeout_s} s: it keeps the flow alive on sockets that set SO_KEEPALIVE (most pools do not by default)"
                ),
                evidence,
                fix: None,
            });
        }
    }
    if let (Some(r2), true) = (n("net/ipv4/tcp_retries2"), seen.may_drop_silently) {
        let rto_max = n("net/ipv4/tcp_rto_max_ms").unwrap_or(RTO_MAX_DEFAULT_MS);
        let ms = retries2_give_up_ms(r2, rto_max);
        out.push(Finding {
            severity: if ms > 60_000 { Severity::Warn } else { Severity::Info },
            what: format!(
                "a request written on a connection the middlebox dropped silently is retransmitted for at least {:.1} s before the kernel gives up with ETIMEDOUT (tcp_retries2 = {r2}, RTO from 200 ms doubling to {:.0} s; net/ipv4/tcp_timer.c tcp_model_timeout); bound it per socket with TCP_USER_TIMEOUT, or lower tcp_retries2 for every connection",
                ms as f64 / 1e3,
                rto_max as f64 / 1e3
            ),
            evidence: vec![
                format!("/proc/sys/net/ipv4/tcp_retries2: {r2}"),
                format!("/proc/sys/net/ipv4/tcp_rto_max_ms: {}", n("net/ipv4/tcp_rto_max_ms").map_or("absent (120000)".into(), |v| v.to_string())),
            ],
            fix: Some(Fix::action("setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, ms) in the client, e.g. 30000")),
        });
    }
    let mut pool_setting = |name: &str, flag: &str, v: u64, harm: String| {
        if v >= timeout_s {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!("the pool's {name} ({v} s) is not below the middlebox's idle timeout ({timeout_s} s): {harm}"),
                evidence: vec![format!("{flag} {v}s")],
                fix: Some(Fix::action(format!("set the pool's {name} below {timeout_s} s, e.g. {} s", timeout_s / 2))),
            });
        }
    };
    if let Some(v) = validate_s {
        pool_setting(
            "validation interval",
            "--pool-validate",
            v,
            format!("a connection can sit dead in the pool for up to {} s before a test finds it, and be handed out (S5: every 50 min)", v.saturating_sub(timeout_s)),
        );
    }
    if let Some(v) = max_idle_s {
        pool_setting(
            "idle lifetime",
            "--pool-max-idle",
            v,
            "idle connections outlive the path's memory of them; expire them sooner and keep no minimum of idle ones (S5's fix: validate every 5 min, expire after 20)".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::diagnose;
    use tpslab_record::verdict::Facts;

    fn running(pairs: &[(&str, &str)]) -> Running {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
    }

    /// S1 as diagnose measured it (verdict tests' facts): bursts of 5000 x 1024 B, charged
    /// 2304 B each, the queue held 92 and 3400 more were dropped in the worst interval.
    /// With drops that reach the burst, diagnose sizes for the whole burst: doctor's
    /// `--for udp` on the same figures gives the same rmem_default and rmem_max.
    #[test]
    fn udp_agrees_with_diagnose_on_s1() {
        // The S1 facts diagnose's own tests use, as a foreign server that never set its
        // buffer, whose drops within one burst interval reached the whole burst.
        let mut f = Facts {
            peak_drops_window: 4950,
            ours: false,
            rmem_max: Some(212_992),
            ..crate::verdict::tests::s1()
        };
        f.sk_rcvbufs = vec![212_992];
        let d = diagnose(&f, None);
        let b = d.buffer.expect("a buffer verdict");
        assert_eq!(b.peak_backlog, 5000, "the whole burst waited");
        let fix = d.fix.expect("a fix");
        let diag: Vec<(String, String)> = fix.sysctls.clone();
        let run = running(&[
            ("net/core/rmem_default", "212992"),
            ("net/core/rmem_max", "212992"),
            ("net/ipv4/udp_mem", "575799 767734 1151598"),
            ("net/core/netdev_max_backlog", "1000"),
        ]);
        let doc = udp(
            &run,
            Udp {
                rate_pps: 100_000.0,
                burst: 5000,
                size_bytes: 1024,
                sockets: 1,
                truesize: 2304,
                page_bytes: 4096,
            },
        );
        let sysctl = |k: &str| {
            doc.iter().find_map(|x| match &x.fix {
                Some(Fix::Sysctl { key, value }) if key == k => Some(value.clone()),
                _ => None,
            })
        };
        // diagnose's fix for a foreign server that never set SO_RCVBUF: rmem_default.
        assert_eq!(
            diag,
            [(
                "net.core.rmem_default".to_string(),
                sysctl("net.core.rmem_default").unwrap()
            )]
        );
        // 5000 x 2304 x 2 = 23040000 B.
        assert_eq!(sysctl("net.core.rmem_default").unwrap(), "23040000");
        assert_eq!(
            sysctl("net.core.rmem_max").unwrap(),
            (b.request().0).to_string()
        );
        assert_eq!(sysctl("net.core.netdev_max_backlog").unwrap(), "5000");
        assert!(sysctl("net.ipv4.udp_mem").is_none(), "{doc:#?}");
        let w = &doc[0].what;
        assert!(
            w.contains("212992 B holds 92 datagrams, 0.9 ms of arrivals at 100000 pps"),
            "{w}"
        );
    }

    #[test]
    fn udp_enough_and_udp_mem_short() {
        let run = running(&[
            ("net/core/rmem_default", "33554432"),
            ("net/core/rmem_max", "33554432"),
            ("net/ipv4/udp_mem", "1000 2000 3000"),
        ]);
        let u = Udp {
            rate_pps: 1e5,
            burst: 5000,
            size_bytes: 1024,
            sockets: 4,
            truesize: 2304,
            page_bytes: 4096,
        };
        let f = udp(&run, u);
        assert_eq!(f.len(), 1, "{f:#?}");
        // 4 x 23040000 B = 22500 pages.
        assert_eq!(
            f[0].fix,
            Some(Fix::sysctl("net.ipv4.udp_mem", "1000 2000 22500"))
        );
        let f = udp(
            &run,
            Udp {
                sockets: 1,
                burst: 100,
                ..u
            },
        );
        assert_eq!(f.len(), 1);
        assert!(
            f[0].what.starts_with("the receive buffers hold the burst"),
            "{}",
            f[0].what
        );
    }

    /// The same figures as `tpslab bdp --rtt 100ms --rate 1gbit` (bdp's own test).
    #[test]
    fn tcp_agrees_with_bdp() {
        let run = running(&[
            ("net/ipv4/tcp_rmem", "4096 131072 6291456"),
            ("net/ipv4/tcp_wmem", "4096 16384 4194304"),
            ("net/core/rmem_max", "212992"),
            ("net/core/wmem_max", "212992"),
            ("net/ipv4/tcp_window_scaling", "1"),
            ("net/ipv4/tcp_moderate_rcvbuf", "1"),
            ("net/ipv4/tcp_mem", "287898 383867 575796"),
        ]);
        let f = tcp(&run, 0.1, 1e9, 4096);
        let fixes: Vec<(String, String)> = f
            .iter()
            .filter_map(|x| match &x.fix {
                Some(Fix::Sysctl { key, value }) => Some((key.clone(), value.clone())),
                _ => None,
            })
            .collect();
        let p = bdp::buffer_plan(1e9, 0.1);
        let want: Vec<(String, String)> = bdp::host_fixes(
            &p,
            Some("4096 131072 6291456"),
            Some("4096 16384 4194304"),
            Some(212992),
            Some(212992),
        )
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(fixes, want);
        assert_eq!(
            fixes[0],
            ("net.ipv4.tcp_rmem".into(), "4096 131072 25034752".into())
        );
        let off = running(&[("net/ipv4/tcp_window_scaling", "0")]);
        let f = tcp(&off, 0.03, 80e6, 4096);
        assert!(
            f[0].what.contains("17.5 Mbit/s over this RTT"),
            "{}",
            f[0].what
        );
        assert!(tcp(&run, 0.1, 1e12, 4096)[0].what.contains("use several"));
    }

    /// S5: a middlebox timeout of 350 s (AWS NLB) against Linux defaults and the pool of
    /// S5 (validated every 50 min, kept 83).
    #[test]
    fn pool_against_s5() {
        let run = running(&[
            ("net/ipv4/tcp_keepalive_time", "7200"),
            ("net/ipv4/tcp_keepalive_intvl", "75"),
            ("net/ipv4/tcp_keepalive_probes", "9"),
            ("net/ipv4/tcp_retries2", "15"),
            ("net/ipv4/tcp_rto_max_ms", "120000"),
        ]);
        // Not measured: no keepalive advice, the pool's own test or idle lifetime.
        let unknown = pool(&run, 350, Some(3000), Some(4980), PathSeen::UNKNOWN);
        assert!(
            unknown[0]
                .what
                .starts_with("whether TCP keepalive resets this path's idle timer is not known"),
            "{unknown:#?}"
        );
        assert!(!unknown.iter().any(|f| f
            .fix
            .as_ref()
            .is_some_and(|x| x.to_string().contains("keepalive_time"))));
        assert_eq!(
            unknown[0].fix.as_ref().unwrap().to_string(),
            data_only_fix(350).as_str()
        );
        // Shown to count (doctor --keepalive-counts yes, a probe's silent control).
        let f = pool(
            &run,
            350,
            Some(3000),
            Some(4980),
            PathSeen::stated(Some(true)),
        );
        assert_eq!(f.len(), 4, "{f:#?}");
        assert!(
            f[0].what.contains("finds it dead only after 7875 s"),
            "{}",
            f[0].what
        );
        assert_eq!(
            f[0].fix,
            Some(Fix::sysctl("net.ipv4.tcp_keepalive_time", 175))
        );
        assert!(f[1].what.contains("at least 924.6 s"), "{}", f[1].what);
        assert_eq!(f[1].severity, Severity::Warn);
        assert!(
            f[2].what.contains("dead in the pool for up to 2650 s"),
            "{}",
            f[2].what
        );
        assert!(f[3].what.starts_with("the pool's idle lifetime (4980 s)"));
        // S5's fix (validate every 5 min, expire after 20) against a 30-minute timeout.
        let f = pool(
            &run,
            1800,
            Some(300),
            Some(1200),
            PathSeen::stated(Some(true)),
        );
        // Stated by `--keepalive-counts no` (a proxy counting data only): keepalive is
        // not the fix, the pool's own test is.
        let data_only = pool(&run, 1800, None, None, PathSeen::stated(Some(false)));
        assert!(
            data_only[0]
                .what
                .starts_with("TCP keepalive does not keep flows alive"),
            "{data_only:#?}"
        );
        assert!(!data_only.iter().any(|f| f
            .fix
            .as_ref()
            .is_some_and(|x| x.to_string().contains("tcp_keepalive_time"))));
        assert_eq!(
            data_only[0].fix.as_ref().unwrap().to_string(),
            "in the pool: a test query every 900 s or less (c3p0 idle_test_period with preferredTestQuery, HikariCP keepaliveTime = 900000), or an idle lifetime below 1800 s (c3p0 maxIdleTime, pgbouncer server_idle_timeout, HikariCP idleTimeout)"
        );
        // haproxy's 5 s: nothing HikariCP has reaches below it.
        let short = data_only_fix(5);
        assert!(!short.contains("HikariCP keepaliveTime"), "{short}");
        assert!(!short.contains("HikariCP idleTimeout"), "{short}");
        assert!(
            short.contains("HikariCP cannot test more often than every 30 s"),
            "{short}"
        );
        assert_eq!(f.len(), 2, "{f:#?}");
    }
}
