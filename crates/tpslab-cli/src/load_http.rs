//! `tpslab load http URL --rate R`: an open loop of HTTP/1.1 requests (wrk2's model):
//! `--connections` keep-alive connections, each on its own schedule at R/C requests a
//! second, latency from each request's intended send time (corrected for coordinated
//! omission) and from its actual send (uncorrected), side by side. `--rate max`: a closed
//! loop instead (wrk's, `oha -c`'s), for `--duration` or `--requests N` (`oha -n`).

use anyhow::{bail, Result};
use clap::Args;
use std::time::Duration;
use tpslab_plan::load_http::LoadHttpPlan;

/// `load http`'s flags.
#[derive(Args, Debug)]
pub struct LoadHttpArgs {
    /// The URL, `http[s]://HOST[:PORT]/PATH`.
    pub url: String,
    /// Requests a second, all connections together, e.g. 2000 or 2k (required); `max`: a
    /// closed loop (as wrk and `oha -c`): each connection (each stream with --http2) sends
    /// its next request as soon as its last reply is in; latency is then service time.
    #[arg(long, value_name = crate::flags::units::RATE, value_parser = crate::flags::units::rate())]
    pub rate: Option<f64>,
    /// How long requests are sent; none is sent after it. With --requests, the longest a
    /// run may last.
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Duration,
    /// Exit 1 when the run fails a threshold, comma-separated, each the condition that
    /// must hold (as in k6): 'pNN<DURATION' (p50, p90, p99, p99.9, max: latency from the
    /// intended send, a closed loop's from the send), 'errors<PCT%' (failed requests and
    /// 4xx/5xx replies, of all), 'rps>=N' (replies over the duration; --rate max:
    /// replies/s), errors (any failure). Printed first in the
    /// report with pass/fail marks. Quote it: unquoted, the shell reads > and < as
    /// redirections.
    #[arg(long, value_name = "CONDITIONS")]
    pub fail_on: Option<String>,
    /// With --rate max: end once N requests were started and their replies are in (or
    /// they failed), as `oha -n` does, or at --duration (10 s unless given), whichever
    /// comes first.
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,
    #[command(flatten)]
    pub http: crate::flags::HttpFlags,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
    #[command(flatten)]
    pub metrics: crate::metrics::ListenFlag,
    /// Write one JSON object per 250 ms to FILE while the run goes (NDJSON, one write per
    /// line): intended, achieved and answered requests/s, latency from the intended send
    /// time, replies by status class and errors by kind in the interval, connections open.
    #[arg(long, value_name = "FILE")]
    pub json_stream: Option<std::path::PathBuf>,
    /// Show the run full screen while it goes, from the same samples --json-stream writes:
    /// intended vs achieved requests/s, latency p50/p99/p99.9 over time, replies by status
    /// class and errors by kind, connections open. Keys: q stops the run as Ctrl-C does, p
    /// freezes the screen, ? help. Standard output must be a terminal.
    #[arg(long)]
    pub live: bool,
    /// With --http3: start the server for the run, a shell command (`{port}`: the URL's
    /// port), run by `sh -c` as its own process group, stopped after the run; the
    /// group's process holding a UDP socket on the URL's port is the server watched.
    #[arg(long, value_name = "COMMAND")]
    pub server_cmd: Option<String>,
    /// The server's process on this host (its descendants too: nginx's workers), whose
    /// threads are sampled over the run for the response-time ledger: the mean response
    /// time split into waiting to be accepted, on a CPU, waiting for one, on a lock, a
    /// timer, a peer, the disk, and what no part explains. Without it, the process
    /// holding the URL's listening socket on this host, if one does (HTTP/1.1, HTTP/2).
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// With --server-cmd: apply the host sysctls the verdict names for the server's
    /// receive buffer (journaled, always restored), start the server again so its socket
    /// takes them, run the same load again and show before/after.
    #[arg(long)]
    pub verify: bool,
}

impl LoadHttpArgs {
    /// The validated plan: the request checked first (URL, method, headers), then the
    /// rate, connections, duration and timeout, then the URL resolved and the body read.
    /// `--rate max` (parsed as infinity) is the plan's `max_rate` at rate 0. Errors: one
    /// line naming the flag.
    pub fn plan(&self) -> Result<LoadHttpPlan> {
        let max = self.rate.is_some_and(f64::is_infinite);
        // --requests N ends the run at N or at --duration, its default too: a plan is a
        // promise, and a server that never answers must not hold a pipeline for hours.
        let duration = self.duration;
        self.http.plan(
            &self.url,
            if max { 0.0 } else { self.rate.unwrap_or(0.0) },
            duration,
            || {
                if let Some(f) = &self.fail_on {
                    tpslab_analysis::gate::parse(f, tpslab_analysis::gate::applies::LOAD_HTTP)
                        .map_err(anyhow::Error::msg)?;
                }
                if self.rate.is_none() {
                    bail!("load http needs --rate R: requests a second, all connections together, e.g. --rate 2000, or --rate max (each connection's next request as soon as its last reply is in)");
                }
                self.record.check(false)
            },
            |p| {
                p.max_rate = max;
                p.requests = self.requests;
                p.fail_on.clone_from(&self.fail_on);
                p.server_cmd.clone_from(&self.server_cmd);
                p.verify = self.verify;
                p.pid = self.pid;
                p.validate()?;
                if let Some(pid) = self.pid {
                    tpslab_plan::target::check_pid("--pid", pid)?;
                }
                Ok(())
            },
        )
    }
}
