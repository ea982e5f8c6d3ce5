//! The layer that gave at a failing `capacity tcp` or `capacity http` step (a UDP step's
//! is the verdict rules' on its ledger): connection requests dropped at the listen
//! socket's accept queue, connects refused, connections reset, the server's threads
//! saturated or waiting. Each rule is a row of [`RULES`], tried in order; a count that was
//! not read makes its rule silent, and the verdict says which conclusion needed it.

pub use tpslab_record::load_http::LoadHttpResult;
use tpslab_record::verdict::{Case, Diagnosis, Evidence};

/// The server's threads over a step's window (read with the server's PID).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadFacts {
    /// Threads seen.
    pub threads: usize,
    /// The busiest thread's time on a CPU, % of the window.
    pub busiest_run_pct: f64,
    /// That thread's time waiting for a CPU (runnable), % of the window.
    pub busiest_wait_pct: f64,
    /// All threads' time on a CPU or waiting for one, summed, % of the window (of one
    /// CPU: 200 = two CPUs' worth); at least the process's CPU time (utime+stime), which
    /// counts threads that ended in the window too.
    pub all_wanted_pct: f64,
    /// The CPUs the server may run on (its affinity); None: not read.
    pub cpus: Option<usize>,
}

/// What a TCP or HTTP step's window showed beyond its figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamFacts {
    /// Connection requests dropped at a full accept queue in the window: the larger of
    /// the TcpExt ListenOverflows and ListenDrops deltas of the server's network
    /// namespace. None: not read (the server is not on this host, or its namespace was
    /// not readable).
    pub listen_drops: Option<u64>,
    /// The most connections seen waiting to be accepted at the listen socket on the
    /// target's port (its accept queue). None: no listen socket found.
    pub accept_queue_max: Option<u64>,
    /// Connects refused.
    pub refused: u64,
    /// Connections reset (a connect's or a request's), or written after the peer closed.
    pub reset: u64,
    /// Requests (and connects) that timed out.
    pub timeouts: u64,
    /// Requests the server closed the connection on.
    pub closed: u64,
    /// The server's threads; None without its PID.
    pub threads: Option<ThreadFacts>,
}

impl StreamFacts {
    /// The failed connects and requests of an open loop's counts `r`, by kind (a
    /// connect's and a request's together).
    pub fn with_failures(mut self, r: &LoadHttpResult) -> StreamFacts {
        let (e, c) = (&r.errors, &r.connect_errors);
        self.refused = e.refused + c.refused;
        self.reset = e.reset + c.reset;
        self.timeouts = e.timeout + c.timeout;
        self.closed = e.closed + c.closed;
        self
    }
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
/// server may run on (a thread per connection, each a share of the work).
fn all_busy(t: &ThreadFacts) -> bool {
    t.cpus
        .is_some_and(|c| c > 0 && t.all_wanted_pct >= SATURATED_PCT * c as f64)
}

/// The rules, first that holds wins: what refuses or drops connections comes before
/// the threads (a dropped SYN costs the client a retransmission, 1 s, whatever the
/// threads do).
pub const RULES: &[StreamRule] = &[
    StreamRule {
        case: Case::AcceptQueueFull,
        when: |f| f.listen_drops.is_some_and(|d| d > 0),
        layer: |f| {
            format!(
                "the server's accept queue: {} connection requests dropped at the listen socket{}",
                f.listen_drops.unwrap_or(0),
                f.accept_queue_max.map_or(String::new(), |m| format!(
                    " (up to {m} waiting for accept)"
                ))
            )
        },
    },
    StreamRule {
        case: Case::ConnectionsRefused,
        when: |f| f.refused > 0,
        layer: |f| {
            format!(
                "connections refused ({}): nothing listening, or a full accept queue with net.ipv4.tcp_abort_on_overflow",
                f.refused
            )
        },
    },
    StreamRule {
        case: Case::ConnectionsReset,
        when: |f| f.reset > 0,
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
                    "the server's threads: saturated (its busiest thread on a CPU {:.0} % of the window, waiting for one {:.0} %)",
                    t.busiest_run_pct, t.busiest_wait_pct
                )
            } else {
                format!(
                    "the server's threads: saturated (together on or waiting for a CPU {:.0} % of the window: its {} CPUs' worth)",
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
                "the server's threads: waiting, not on a CPU (its busiest thread wanted one {:.0} % of the window): a lock, a sleep, I/O or a pool",
                wanted(&t)
            )
        },
    },
];

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
            text: format!("{d} connection requests dropped at a full accept queue"),
            source: "TcpExt ListenOverflows/ListenDrops of the server's namespace, over the window"
                .into(),
        });
    }
    if let Some(m) = f.accept_queue_max {
        evidence.push(Evidence {
            text: format!("listen socket: up to {m} connections waiting for accept"),
            source: "/proc/net/tcp of the server's namespace, the listen socket on the target's port, every 10 ms".into(),
        });
    }
    evidence.push(Evidence {
        text: format!(
            "refused {}, reset {}, timed out {}, closed by the server {}",
            f.refused, f.reset, f.timeouts, f.closed
        ),
        source: "the generator's failed connects and requests, by kind".into(),
    });
    if let Some(t) = f.threads {
        evidence.push(Evidence {
            text: format!(
                "{} server threads; the busiest on a CPU {:.0} % of the window, waiting for one {:.0} %; all together {:.0} % (of one CPU){}",
                t.threads,
                t.busiest_run_pct,
                t.busiest_wait_pct,
                t.all_wanted_pct,
                t.cpus.map_or(String::new(), |c| format!(", on {c} CPUs"))
            ),
            source: "/proc/PID/task/TID/schedstat and /proc/PID/stat utime+stime (threads that ended too), over the window".into(),
        });
    }
    let mut notes = vec![];
    if f.listen_drops.is_none() {
        notes.push("the accept queue's drops (TcpExt ListenOverflows) were not read (the server is not on this host): whether connection requests were dropped at the listen socket needs them".to_string());
    }
    if f.threads.is_none() {
        notes.push("the server's threads were not read (no PID of the server: capacity tcp|http --pid): whether they were saturated or waiting needs them".to_string());
    }
    let headline = match hit {
        Some(_) => format!("At the first failing rate, what gave: {layer}."),
        None => {
            // Only what was read is said to be clear.
            let drops = match f.listen_drops {
                Some(_) => "no connection request dropped at the accept queue",
                None => "the accept queue's drops not read",
            };
            let threads = match f.threads {
                Some(_) => "the server's threads neither saturated nor mostly waiting",
                None => "the server's threads not read",
            };
            format!("At the first failing rate, no rule named a layer: no connect refused and no request reset; {drops}; {threads}.")
        }
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
mod tests {
    use super::*;

    fn threads(run: f64, wait: f64) -> Option<ThreadFacts> {
        Some(ThreadFacts {
            threads: 4,
            busiest_run_pct: run,
            busiest_wait_pct: wait,
            all_wanted_pct: run + wait,
            cpus: Some(2),
        })
    }

    #[test]
    fn each_rule_is_a_row() {
        let base = StreamFacts {
            listen_drops: Some(0),
            accept_queue_max: Some(3),
            threads: threads(60.0, 5.0),
            ..Default::default()
        };
        let rows: Vec<(&str, StreamFacts, Case, &str)> = vec![
            (
                "drops at the listen socket",
                StreamFacts {
                    listen_drops: Some(40),
                    accept_queue_max: Some(5),
                    refused: 3,
                    ..base.clone()
                },
                Case::AcceptQueueFull,
                "the server's accept queue: 40 connection requests dropped at the listen socket (up to 5 waiting for accept)",
            ),
            (
                "refused",
                StreamFacts {
                    refused: 2,
                    reset: 1,
                    ..base.clone()
                },
                Case::ConnectionsRefused,
                "connections refused (2)",
            ),
            (
                "reset",
                StreamFacts {
                    reset: 7,
                    ..base.clone()
                },
                Case::ConnectionsReset,
                "requests reset by the server (7: connections reset, or HTTP/2 streams reset with RST_STREAM)",
            ),
            (
                "a thread always wanting a CPU",
                StreamFacts {
                    threads: threads(70.0, 25.0),
                    ..base.clone()
                },
                Case::ServerSaturated,
                "the server's threads: saturated (its busiest thread on a CPU 70 % of the window, waiting for one 25 %)",
            ),
            (
                // A thread per connection: none busy alone, both CPUs' worth together.
                "many threads together at every CPU",
                StreamFacts {
                    threads: Some(ThreadFacts {
                        threads: 10,
                        busiest_run_pct: 15.0,
                        busiest_wait_pct: 5.0,
                        all_wanted_pct: 190.0,
                        cpus: Some(2),
                    }),
                    ..base.clone()
                },
                Case::ServerSaturated,
                "the server's threads: saturated (together on or waiting for a CPU 190 % of the window: its 2 CPUs' worth)",
            ),
            (
                // Each under half a CPU, but together more: not waiting, not saturated.
                "many threads, half the CPUs",
                StreamFacts {
                    threads: Some(ThreadFacts {
                        threads: 10,
                        busiest_run_pct: 15.0,
                        busiest_wait_pct: 5.0,
                        all_wanted_pct: 120.0,
                        cpus: Some(4),
                    }),
                    ..base.clone()
                },
                Case::Unexplained,
                "none named",
            ),
            (
                "threads mostly off CPU",
                StreamFacts {
                    threads: threads(10.0, 2.0),
                    ..base.clone()
                },
                Case::ServerWaiting,
                "the server's threads: waiting, not on a CPU (its busiest thread wanted one 12 %",
            ),
            (
                "nothing to name",
                base.clone(),
                Case::Unexplained,
                "none named",
            ),
            (
                "drops not read and no PID: nothing to name",
                StreamFacts {
                    listen_drops: None,
                    threads: None,
                    ..base.clone()
                },
                Case::Unexplained,
                "none named",
            ),
        ];
        for (what, f, case, layer) in rows {
            let d = diagnose(&f);
            assert_eq!(d.case, case, "{what}");
            assert!(d.layer.starts_with(layer), "{what}: {}", d.layer);
        }
    }

    #[test]
    fn a_missing_count_says_which_conclusion_needs_it() {
        let d = diagnose(&StreamFacts {
            listen_drops: None,
            threads: None,
            ..Default::default()
        });
        assert_eq!(d.explain_notes.len(), 2);
        assert!(d.explain_notes[0]
            .contains("whether connection requests were dropped at the listen socket needs them"));
        assert!(d.explain_notes[1].contains("whether they were saturated or waiting needs them"));
        // Read: no note, and the counts are evidence.
        let d = diagnose(&StreamFacts {
            listen_drops: Some(0),
            threads: threads(95.0, 0.0),
            ..Default::default()
        });
        assert!(d.explain_notes.is_empty());
        assert_eq!(d.case, Case::ServerSaturated);
        assert_eq!(d.evidence.len(), 3);
        assert!(d
            .headline
            .starts_with("At the first failing rate, what gave: the server's threads: saturated"));
    }
}
