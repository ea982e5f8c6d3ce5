//! `--metrics-listen ADDR:PORT`: the flag of the commands that serve their figures while
//! they run (the endpoint is started by the binary, `tpslab_run::exporter`).

use clap::Args;

/// `--metrics-listen`, on the commands that run long enough to be scraped.
#[derive(Args, Debug, Clone, Default)]
pub struct ListenFlag {
    /// Serve the figures at http://ADDR:PORT/metrics while the command runs (for Prometheus
    /// to scrape: OpenMetrics when its Accept header asks for it, else the Prometheus text
    /// format 0.0.4), e.g. 127.0.0.1:19464. Plain HTTP without
    /// authentication: whoever reaches ADDR:PORT reads the figures; an address other than
    /// loopback (`0.0.0.0`, `[::]`, a host's) is warned about on stderr.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
}
