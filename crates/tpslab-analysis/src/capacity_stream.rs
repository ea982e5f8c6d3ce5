//! The layer that gave at a failing `capacity tcp` or `capacity http` step (a UDP step's
//! is the verdict rules' on its ledger): connection requests dropped at the listen
//! socket's accept queue, connects refused, connections reset, the server's threads
//! saturated or waiting. Each rule is a row of [`RULES`], tried in order; a count names
//! its layer only when it is enough to break an objective that broke ([`Broken`]); a
//! count that was not read makes its rule silent, and the verdict says which conclusion
//! needed it.

use crate::capacity::{value, StepFigures};
use tpslab_plan::capacity::{Objective, Quantile, Slo};
use tpslab_record::load_http::LoadHttpResult;
use tpslab_record::verdict::{Case, Diagnosis, Evidence};

/// The server's threads over a step's window (read with the server's PID: that process
/// and its descendants, e.g. nginx's master and workers).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadFacts {
    /// Processes read: the PID and its descendants.
    pub processes: usize,
    /// Threads seen, in all of them.
    pub threads: usize,
    /// The busiest thread's time on a CPU, % of the window.
    pub busiest_run_pct: f64,
    /// That thread's time waiting for a CPU (runnable), % of the window.
    pub busiest_wait_pct: f64,
    /// All threads' time on a CPU or waiting for one, summed, % of the window (of one
    /// CPU: 200 = two CPUs' worth); at least the processes' CPU time (utime+stime, with
    /// their waited-for children's), which counts threads and processes that ended in the
    /// window too.
    pub all_wanted_pct: f64,
    /// The CPUs the processes may run on (the union of their affinities); None: not read.
    pub cpus: Option<usize>,
}

/// Which objectives broke at a step, and how few requests can break them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Broken {
    /// A latency bound broke.
    pub latency: bool,
    /// An errors, loss or rate bound broke (a failed request breaks those; it has no
    /// latency, so it does not break a latency bound).
    pub failures: bool,
    /// The smallest share of the step's requests (0..=1) whose delay or failure breaks
    /// one of the objectives that broke: 1 - the quantile for a latency bound (p99: 0.01;
    /// max: 0, one request), the bound for errors and loss, 1 - the bound for rate.
    pub share: f64,
    /// The same of the errors, loss and rate bounds that broke alone (1 when none did):
    /// what failed requests are judged against, since they cannot break a latency bound
    /// (`max<50ms,errors<1%` with max broken: one reset is not enough).
    pub failure_share: f64,
}

impl Default for Broken {
    /// Not known: any objective, and any count matters.
    fn default() -> Broken {
        Broken {
            latency: true,
            failures: true,
            share: 0.0,
            failure_share: 0.0,
        }
    }
}

/// What broke at a step of figures `f` against `slo` (each objective that does not
/// hold).
pub fn broken(slo: &Slo, f: &StepFigures) -> Broken {
    let mut b = Broken {
        latency: false,
        failures: false,
        share: 1.0,
        failure_share: 1.0,
    };
    for o in slo.objectives.iter().filter(|o| !o.holds(value(o, f))) {
        let share = match *o {
            Objective::Latency { quantile, .. } => {
                b.latency = true;
                match quantile {
                    Quantile::P50 => 0.5,
                    Quantile::P90 => 0.1,
                    Quantile::P99 => 0.01,
                    Quantile::P999 => 0.001,
                    Quantile::Max => 0.0,
                }
            }
            Objective::Loss { limit_pct, .. } | Objective::Errors { limit_pct, .. } => {
                b.failures = true;
                b.failure_share = b.failure_share.min((limit_pct / 100.0).max(0.0));
                limit_pct / 100.0
            }
            Objective::Rate { min_pct, .. } => {
                b.failures = true;
                b.failure_share = b.failure_share.min(((100.0 - min_pct) / 100.0).max(0.0));
                (100.0 - min_pct) / 100.0
            }
        };
        b.share = b.share.min(share.max(0.0));
    }
    b
}

/// What a TCP or HTTP step's window showed beyond its figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamFacts {
    /// Connection requests dropped at the full accept queue of the listen socket(s) on
    /// the target's port in the window (their own drop counts, sock_diag). None: not read.
    pub listen_drops: Option<u64>,
    /// Connection requests dropped at a full accept queue of any listen socket of the
    /// server's network namespace in the window: the larger of its TcpExt ListenOverflows
    /// and ListenDrops deltas. None: not read (the server is not on this host, or its
    /// namespace was not readable).
    pub namespace_drops: Option<u64>,
    /// The most connections seen waiting to be accepted at the listen socket(s) on the
    /// target's port (their accept queue). None: no listen socket found.
    pub accept_queue_max: Option<u64>,
    /// That listen socket's backlog limit (min(listen()'s backlog, somaxconn)).
    pub backlog: Option<u64>,
    /// Connects the generator attempted in the window (made, and failed).
    pub connects: u64,
    /// Requests the step intended.
    pub requests: u64,
    /// Connects refused.
    pub refused: u64,
    /// Connections reset (a connect's or a request's), or written after the peer closed.
    pub reset: u64,
    /// Requests (and connects) that timed out.
    pub timeouts: u64,
    /// Requests the server closed the connection on.
    pub closed: u64,
    /// Which objectives broke, and how few requests break them.
    pub broken: Broken,
    /// The server's threads; None without its PID.
    pub threads: Option<ThreadFacts>,
    /// HTTP/3: the server's QUIC socket on this host, as `load http --http3` judges it
    /// ([`crate::quic_server::judge`]); None: another protocol, the socket not found, or
    /// its datagrams did not balance.
    pub quic_socket: Option<QuicSocket>,
    /// The step ran over HTTP/3 (QUIC, UDP): no accept queue to read.
    pub http3: bool,
}

/// The server's QUIC socket over an HTTP/3 step: its datagram ledger's drops and the
/// socket verdict's headline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuicSocket {
    /// Client datagrams dropped at the socket's receive buffer (its sock_diag drops).
    pub dropped: u64,
    /// Client datagrams sent (quinn's, at the client's sockets).
    pub sent: u64,
    /// [`crate::quic_server::judge`]'s headline: what the socket asked for against
    /// rmem_max, and the fix.
    pub headline: String,
}

impl StreamFacts {
    /// The counts of an open loop's result `r`: failed connects and requests by kind (a
    /// connect's and a request's together), connects attempted, requests intended.
    pub fn with_failures(mut self, r: &LoadHttpResult) -> StreamFacts {
        let (e, c) = (&r.errors, &r.connect_errors);
        self.refused = e.refused + c.refused;
        self.reset = e.reset + c.reset;
        self.timeouts = e.timeout + c.timeout;
        self.closed = e.closed + c.closed;
        // Made (first ones and reconnects), and those that never were.
        self.connects = r.connections + c.refused + c.reset + c.timeout;
        self.requests = r.intended;
        self.http3 = r.http3.is_some();
        self.quic_socket = crate::quic_server::judge(r).and_then(|v| {
            let req = &r.server_udp.as_deref()?.ledger.request;
            Some(QuicSocket {
                dropped: req.count("socket_drops"),
                sent: req.attempted,
                headline: v.headline,
            })
        });
        self
    }

    /// The accept queue's drops: the target's listen socket's own when read, else its
    /// namespace's; and whether they are the socket's.
    fn drops(&self) -> Option<(u64, bool)> {
        match (self.listen_drops, self.namespace_drops) {
            (Some(d), _) => Some((d, true)),
            (None, Some(d)) => Some((d, false)),
            _ => None,
        }
    }
}

/// Whether `count` of `base` is enough to break an objective that broke: at least one,
/// and at least `share` of `base` ([`Broken::share`], [`Broken::failure_share`]).
fn matters(count: u64, base: u64, share: f64) -> bool {
    count > 0 && count as f64 >= share * base as f64
}

/// Whether the accept queue's drops matter: each dropped connection request holds its
/// connection (and its requests) a retransmission back, 1 s, which breaks a latency
/// bound, or fails the connect (errors, rate); so they count against the connects.
fn drops_matter(f: &StreamFacts) -> bool {
    f.drops()
        .is_some_and(|(d, _)| matters(d.min(f.connects), f.connects, f.broken.share))
}

/// Whether failures (refused, reset) matter: a failed request breaks errors, loss or rate
/// bounds (not a latency bound: it has no latency), counted against the requests.
fn failures_matter(count: u64, f: &StreamFacts) -> bool {
    f.broken.failures && matters(count, f.requests.max(f.connects), f.broken.failure_share)
}

/// One rule: the case it names when `when` holds of the facts.
pub struct StreamRule {
    /// The case.
    pub case: Case,
    /// Whether it applies.
    pub when: fn(&StreamFacts) -> bool,
    /// The layer, in words, of facts it applies to.
    pub layer: fn(&StreamFacts) -> String,
}

/// A thread that wanted a CPU at least this much of the window is saturated, %.
pub const SATURATED_PCT: f64 = 90.0;
/// Threads that all wanted a CPU less than this much of the window were waiting, %.
pub const WAITING_PCT: f64 = 50.0;

fn wanted(t: &ThreadFacts) -> f64 {
    t.busiest_run_pct + t.busiest_wait_pct
}

/// Whether the threads together wanted at least [`SATURATED_PCT`] of every CPU the
/// server may run on (a thread per connection, or a worker process per CPU, each a share
/// of the work).
fn all_busy(t: &ThreadFacts) -> bool {
    t.cpus
        .is_some_and(|c| c > 0 && t.all_wanted_pct >= SATURATED_PCT * c as f64)
}

/// ` (3 processes)` when the server is more than one process.
fn procs(t: &ThreadFacts) -> String {
    if t.processes > 1 {
        format!(" ({} processes)", t.processes)
    } else {
        String::new()
    }
}

/// Whether the QUIC socket's drops matter: a latency bound broke, and the drops are
/// enough to break it. A dropped datagram fails no request (QUIC declares its packet lost
/// and sends it again: an RTT and more later), so only latency; each is counted against
/// the requests as if it held one back, an upper bound (an ACK-only or handshake datagram
/// holds none back), as the accept queue's drops count against the connects.
fn quic_drops_matter(f: &StreamFacts) -> bool {
    f.broken.latency
        && f.quic_socket
            .as_ref()
            .is_some_and(|q| matters(q.dropped.min(f.requests), f.requests, f.broken.share))
}

/// The rules, first that holds wins: what refuses or drops connections (or, over
/// HTTP/3, datagrams) comes before the threads (a dropped SYN costs the client a
/// retransmission, 1 s, and a dropped QUIC packet a loss detection, whatever the threads
/// do).
pub const RULES: &[StreamRule] = &[
    StreamRule {
        case: Case::QuicReceiveBuffer,
        when: quic_drops_matter,
        layer: |f| {
            let q = f.quic_socket.clone().unwrap_or_default();
            format!(
                "the server's QUIC socket: {} of {} client datagrams dropped at its receive buffer ({})",
                q.dropped, q.sent, q.headline
            )
        },
    },
    StreamRule {
        case: Case::AcceptQueueFull,
        when: drops_matter,
        layer: |f| {
            let (d, own) = f.drops().unwrap_or_default();
            let seen = f.accept_queue_max.map_or(String::new(), |m| {
                let of = f
                    .backlog
                    .map_or(String::new(), |b| format!(" of its backlog {b}"));
                format!("up to {m}{of} waiting for accept")
            });
            if own {
                format!(
                    "the server's accept queue: {d} connection requests dropped at the listen socket on the target's port{}",
                    if seen.is_empty() { seen } else { format!(" ({seen})") }
                )
            } else {
                format!(
                    "an accept queue of the server's network namespace: {d} connection requests dropped at its listen sockets (any of them; the target's own not read{})",
                    if seen.is_empty() { seen } else { format!(", its queue seen at {seen}") }
                )
            }
        },
    },
    StreamRule {
        case: Case::ConnectionsRefused,
        when: |f| failures_matter(f.refused, f),
        layer: |f| {
            if f.http3 {
                format!(
                    "connections refused ({}): an ICMP port unreachable came back, nothing bound to the UDP port",
                    f.refused
                )
            } else {
                format!(
                    "connections refused ({}): nothing listening, or a full accept queue with net.ipv4.tcp_abort_on_overflow",
                    f.refused
                )
            }
        },
    },
    StreamRule {
        case: Case::ConnectionsReset,
        when: |f| failures_matter(f.reset, f),
        layer: |f| {
            format!(
                "requests reset by the server ({}: connections reset, or HTTP/2 streams reset with RST_STREAM)",
                f.reset
            )
        },
    },
    StreamRule {
        case: Case::ServerSaturated,
        when: |f| {
            f.threads
                .is_some_and(|t| wanted(&t) >= SATURATED_PCT || all_busy(&t))
        },
        layer: |f| {
            let t = f.threads.unwrap_or_default();
            if wanted(&t) >= SATURATED_PCT {
                format!(
                    "the server's threads{}: saturated (its busiest thread on a CPU {:.0} % of the window, waiting for one {:.0} %)",
                    procs(&t), t.busiest_run_pct, t.busiest_wait_pct
                )
            } else {
                format!(
                    "the server's threads{}: saturated (together on or waiting for a CPU {:.0} % of the window: its {} CPUs' worth)",
                    procs(&t),
                    t.all_wanted_pct,
                    t.cpus.unwrap_or(0)
                )
            }
        },
    },
    StreamRule {
        case: Case::ServerWaiting,
        when: |f| {
            // Every thread, and all of them together, under half a CPU.
            f.threads.is_some_and(|t| {
                t.threads > 0 && wanted(&t) < WAITING_PCT && t.all_wanted_pct < WAITING_PCT
            })
        },
        layer: |f| {
            let t = f.threads.unwrap_or_default();
            format!(
                "the server's threads{}: waiting, not on a CPU (its busiest thread wanted one {:.0} % of the window): a lock, a sleep, I/O or a pool",
                procs(&t),
                wanted(&t)
            )
        },
    },
];

/// `N of M (P %)`.
fn of(n: u64, m: u64) -> String {
    if m == 0 {
        n.to_string()
    } else {
        format!("{n} of {m} ({:.2} %)", n as f64 * 100.0 / m as f64)
    }
}

/// What the counts that named no layer were, for a verdict no rule named: drops and
/// failures too few to break the objective, or not read.
fn unnamed(f: &StreamFacts) -> String {
    let drops = match (f.drops(), &f.quic_socket) {
        (_, Some(q)) if f.http3 && q.dropped == 0 => {
            "no client datagram dropped at the server's QUIC socket".to_string()
        }
        (_, Some(q)) if f.http3 => format!(
            "{} client datagrams dropped at the server's QUIC socket, too few to break the objective",
            of(q.dropped, q.sent)
        ),
        _ if f.http3 => "the server's QUIC socket not judged".to_string(),
        (None, _) => "the accept queue's drops not read".to_string(),
        (Some((0, _)), _) => "no connection request dropped at the accept queue".to_string(),
        (Some((d, _)), _) => format!(
            "{} connects held back by drops at the accept queue, too few to break the objective",
            of(d.min(f.connects), f.connects)
        ),
    };
    let base = f.requests.max(f.connects);
    let failures = match (f.refused + f.reset, f.broken.failures) {
        (0, _) => "no connect refused and no request reset".to_string(),
        (n, true) => format!(
            "{} requests refused or reset, too few to break the objective",
            of(n, base)
        ),
        (n, false) => format!(
            "{} requests refused or reset, while only latency bounds broke (a failed request has no latency)",
            of(n, base)
        ),
    };
    let threads = match f.threads {
        Some(_) => "the server's threads neither saturated nor mostly waiting",
        None => "the server's threads not read",
    };
    format!("{drops}; {failures}; {threads}")
}

/// The verdict of a failing step: the first rule of [`RULES`] that holds (case
/// `Unexplained` and layer `none named` when none does), its evidence (each count read),
/// and in `explain_notes` each conclusion a missing count would have allowed.
pub fn diagnose(f: &StreamFacts) -> Diagnosis {
    let hit = RULES.iter().find(|r| (r.when)(f));
    let (case, layer) = match hit {
        Some(r) => (r.case, (r.layer)(f)),
        None => (Case::Unexplained, "none named".to_string()),
    };
    let mut evidence = vec![];
    if let Some(d) = f.listen_drops {
        evidence.push(Evidence {
            text: format!(
                "listen socket on the target's port: {d} connection requests dropped at its full accept queue ({} connects attempted)",
                f.connects
            ),
            source: "sock_diag of the server's network namespace: the listen socket's own drops (sk_drops), first and last read of the window".into(),
        });
    }
    if let Some(d) = f.namespace_drops {
        evidence.push(Evidence {
            text: format!("{d} connection requests dropped at full accept queues of the server's network namespace (all its listen sockets)"),
            source: "TcpExt ListenOverflows/ListenDrops of the server's namespace, over the window"
                .into(),
        });
    }
    if let Some(m) = f.accept_queue_max {
        evidence.push(Evidence {
            text: format!(
                "listen socket: up to {m} connections waiting for accept{}",
                f.backlog.map_or(String::new(), |b| format!(" (backlog {b})"))
            ),
            source: "sock_diag of the server's namespace, listen sockets only, the target's port, every 10 ms".into(),
        });
    }
    evidence.push(Evidence {
        text: format!(
            "refused {}, reset {}, timed out {}, closed by the server {}; {} requests intended, {} connects attempted",
            f.refused, f.reset, f.timeouts, f.closed, f.requests, f.connects
        ),
        source: "the generator's failed connects and requests, by kind".into(),
    });
    if let Some(q) = &f.quic_socket {
        evidence.push(Evidence {
            text: format!(
                "the server's QUIC socket: {} of {} client datagrams dropped at its receive buffer",
                q.dropped, q.sent
            ),
            source: "the datagram ledger of the step's load http --http3 run: quinn's datagrams sent against the server socket's drops (sock_diag) and reads".into(),
        });
    }
    if let Some(t) = f.threads {
        evidence.push(Evidence {
            text: format!(
                "{} server threads in {} process{}; the busiest on a CPU {:.0} % of the window, waiting for one {:.0} %; all together {:.0} % (of one CPU){}",
                t.threads,
                t.processes,
                if t.processes == 1 { "" } else { "es (the PID and its descendants)" },
                t.busiest_run_pct,
                t.busiest_wait_pct,
                t.all_wanted_pct,
                t.cpus.map_or(String::new(), |c| format!(", on {c} CPUs"))
            ),
            source: "/proc/PID/task/TID/schedstat of each thread of the PID and its descendants, and their /proc/PID/stat utime+stime+cutime+cstime (threads and processes that ended too), over the window".into(),
        });
    }
    let mut notes = vec![];
    if f.http3 && f.quic_socket.is_none() {
        notes.push("the server's QUIC socket was not judged (not found on this host by the URL's address, or its datagrams did not balance): whether client datagrams were dropped at its receive buffer needs it".to_string());
    }
    if f.drops().is_none() && !f.http3 {
        notes.push("the accept queue's drops (the listen socket's, TcpExt ListenOverflows) were not read (the server is not on this host): whether connection requests were dropped at the listen socket needs them".to_string());
    }
    if f.threads.is_none() {
        notes.push("the server's threads were not read (no PID of the server: capacity tcp|http --pid): whether they were saturated or waiting needs them".to_string());
    }
    let headline = match hit {
        Some(_) => format!("At the first failing rate, what gave: {layer}."),
        None => format!(
            "At the first failing rate, no rule named a layer: {}.",
            unnamed(f)
        ),
    };
    Diagnosis {
        case,
        layer,
        headline,
        evidence,
        recommendations: vec![],
        buffer: None,
        buffer_notes: vec![],
        fix: None,
        explain_notes: notes,
    }
}

#[cfg(test)]
#[path = "capacity_stream_tests.rs"]
mod tests;
