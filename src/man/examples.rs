//! The man pages' EXAMPLES: command lines of the guide's transcripts by page
//! (`man.rs` renders them; its tests parse each with the current command tree).

/// The examples of a page: what it does, then its command line. From the guide's
/// transcripts (docs/transcripts/*.sh, run for the docs), output files renamed.
pub(super) fn examples(page: &str) -> &'static [(&'static str, &'static [&'static str])] {
    match page {
        "tpslab" => &[
            ("S1's built-in case: tpslab's own server with a small buffer under bursts; where the datagrams were lost and why (docs/s1-udp-loss.md).", &["tpslab", "diagnose"]),
            ("A CI gate: exit 1 when more than 1 % of the requests go unanswered (docs/ci.md).", &["tpslab", "run", "udp", "--rate", "20000", "--burst", "200", "--burst-interval", "10ms", "--rcvbuf", "20000", "--duration", "1s", "--fail-on", "loss>1%"]),
            ("The runs of the history, UDP runs only.", &["tpslab", "history", "--kind", "udp_run"]),
        ],
        "tpslab-run-udp" => &[
            ("S1's bursts against tpslab's own server, the record kept.", &["tpslab", "run", "udp", "--rate", "100000", "--burst", "5000", "--burst-interval", "50ms", "--duration", "3s", "--json", "s1.json"]),
            ("Exit 1 above 1 % loss, exit 3 when the run is not valid evidence.", &["tpslab", "run", "udp", "--rate", "10000", "--duration", "1s", "--strict", "--fail-on", "loss>1%,invalid"]),
            ("Served to Prometheus while it runs, and written for node_exporter's textfile collector at the end (docs/monitoring.md).", &["tpslab", "run", "udp", "--rate", "20000", "--burst", "200", "--burst-interval", "10ms", "--rcvbuf", "20000", "--duration", "3s", "--size", "64", "--metrics-listen", "127.0.0.1:19464", "--metrics-file", "run.prom"]),
        ],
        "tpslab-diagnose" => &[
            ("S1's built-in case.", &["tpslab", "diagnose", "--no-verify"]),
        ],
        "tpslab-diagnose-udp" => &[
            ("A server already running on 127.0.0.1:9710.", &["tpslab", "diagnose", "udp", "127.0.0.1:9710", "--rate", "10000", "--duration", "2s", "--json", "d.json"]),
            ("A server tpslab starts ({port} is the port it picks), the fix verified by a second run (docs/own-server.md).", &["tpslab", "diagnose", "udp", "--server-cmd", "java UdpServer.java {port}", "--burst", "1000", "--burst-interval", "50ms", "--duration", "3s", "--warmup", "1s", "--verify"]),
        ],
        "tpslab-watch" => &[
            ("A long-running exporter of one process's sockets for Prometheus (docs/monitoring.md).", &["tpslab", "watch", "--pid", "4242", "--duration", "365d", "--metrics-listen", "127.0.0.1:19464"]),
            ("One minute of a server's sockets, the record kept.", &["tpslab", "watch", "--pid", "4242", "--duration", "60s", "--json", "server.json"]),
        ],
        "tpslab-serve-udp" => &[
            ("tpslab's reference server: 4 threads, a 16 KiB buffer, 20 us of work per datagram.", &["tpslab", "serve", "udp", "--bind", "127.0.0.1:9101", "--threads", "4", "--rcvbuf", "16KiB", "--work", "20us"]),
        ],
        "tpslab-capacity-udp" => &[
            ("The highest rate a server on 127.0.0.1:9100 sustains (docs/own-server.md).", &["tpslab", "capacity", "udp", "127.0.0.1:9100", "--burst", "200", "--load-cpus", "0", "--start-rate", "10k", "--step-duration", "1s", "--warmup", "300ms", "--budget", "60s", "--json", "cap.json"]),
        ],
        "tpslab-capacity-http" => &[
            ("The request rate an HTTP server sustains.", &["tpslab", "capacity", "http", "http://127.0.0.1:18080/", "--start-rate", "250", "--step-duration", "1s", "--warmup", "300ms", "--budget", "60s"]),
        ],
        "tpslab-ramp-tcp" => &[
            ("S3: users 1 to 110 against tpslab's serialised server; where TPS stops growing and why.", &["tpslab", "ramp", "tcp", "--serialize", "--server-serial", "10ms", "--users", "1..110", "--step", "+10", "--step-duration", "3s", "--warmup", "1s", "--svg", "s3.svg", "--json", "s3.json"]),
        ],
        "tpslab-tcp" => &[
            ("S4: a 30 ms, 622 Mbit/s path in the lab with 64 KiB buffers.", &["tpslab", "tcp", "--lab-rtt", "30ms", "--lab-rate", "622mbit", "--sndbuf", "64KiB", "--sink-rcvbuf", "64KiB", "--target-rate", "80mbit", "--duration", "5s"]),
        ],
        "tpslab-sweep" => &[
            ("Two receive buffers, three repeats each.", &["tpslab", "sweep", "--factor", "rcvbuf=16000000,8192", "--repeat", "3", "--burst", "1000", "--burst-interval", "20ms", "--duration", "600ms", "--warmup", "200ms", "--out", "sw", "--json", "sw.json"]),
        ],
        "tpslab-doctor" => &[
            ("This host's settings.", &["tpslab", "doctor"]),
            ("Settings for a workload, with the sysctl lines to apply written to a file.", &["tpslab", "doctor", "--for", "udp", "--rate", "100000", "--burst", "5000", "--size", "1024", "--write-snippet", "60-udp.conf"]),
        ],
        "tpslab-probe-idle" => &[
            ("S5: how long a path (here haproxy) keeps an idle connection.", &["tpslab", "probe", "idle", "127.0.0.1:18431", "--min", "29s", "--max", "36s", "--resolution", "1s"]),
        ],
        "tpslab-compare" => &[
            ("Two records side by side, as a page too.", &["tpslab", "compare", "small.json", "big.json", "--html", "compare.html"]),
        ],
        "tpslab-history" => &[
            ("The UDP runs of the history.", &["tpslab", "history", "--kind", "udp_run"]),
        ],
        "tpslab-report" => &[
            ("A record's terminal report again, as its command printed it.", &["tpslab", "report", "s1.json"]),
        ],
        "tpslab-fleet-ssh" => &[
            ("Three agents started over ssh at the same moment (docs/fleet.md).", &["tpslab", "fleet", "ssh", "agent0,agent1,agent2", "--plan", "plan.toml", "--start-in", "3s", "--out", "records", "--run"]),
        ],
        "tpslab-merge" => &[
            ("The agents' records as one, with the server's watch.", &["tpslab", "merge", "records/agent-0.json", "records/agent-1.json", "--server", "server.json", "--json", "merged.json"]),
        ],
        _ => &[],
    }
}
