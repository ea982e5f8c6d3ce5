//! `tpslab load http URL --rate R`: an open loop of HTTP/1.1 requests (wrk2's model):
//! `--connections` keep-alive connections, each on its own schedule at R/C requests a
//! second, latency from each request's intended send time (corrected for coordinated
//! omission) and from its actual send (uncorrected), side by side.

use anyhow::{bail, Result};
use clap::Args;
use std::time::Duration;
use tpslab_plan::load_http::LoadHttpPlan;

/// `load http`'s flags.
#[derive(Args, Debug)]
pub struct LoadHttpArgs {
    /// The URL, `http[s]://HOST[:PORT]/PATH`.
    pub url: String,
    /// Requests a second, all connections together, e.g. 2000 or 2k (required).
    #[arg(long, value_name = crate::flags::units::RATE, value_parser = crate::flags::units::rate())]
    pub rate: Option<f64>,
    /// How long requests are sent; none is sent after it.
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Duration,
    #[command(flatten)]
    pub http: crate::flags::HttpFlags,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
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
}

impl LoadHttpArgs {
    /// The validated plan: the request checked first (URL, method, headers), then the
    /// rate, connections, duration and timeout, then the URL resolved and the body read.
    /// Errors: one line naming the flag.
    pub fn plan(&self) -> Result<LoadHttpPlan> {
        self.http.plan(
            &self.url,
            self.rate.unwrap_or(0.0),
            self.duration,
            || {
                if self.rate.is_none() {
                    bail!("load http needs --rate R: requests a second, all connections together, e.g. --rate 2000");
                }
                self.record.check(false)
            },
            |p| Ok(p.validate()?),
        )
    }
}
