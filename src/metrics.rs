//! Prometheus: `--metrics-listen ADDR:PORT` serves a command's figures while it runs (`GET
//! /metrics`: OpenMetrics or the Prometheus text format 0.0.4, as the scrape's `Accept`
//! asks); `--metrics-file FILE` writes the record's
//! at the end in node_exporter's textfile-collector format (see `flags::RecordFlag`).
//! The families and their encoding are the report layer's (`tpslab_report::metrics`);
//! the endpoint is [`tpslab_run::exporter`].

use anyhow::{anyhow, Context, Result};
use std::net::SocketAddr;
use tpslab_cli::metrics::ListenFlag;

use tpslab_run::exporter::Exporter;

/// Binds the endpoint now (before the run: a bad address or a port in use is an error
/// up front) and serves `command`'s info until more is set; None without the flag.
pub(crate) fn start(flag: &ListenFlag, command: &str) -> Result<Option<Exporter>> {
    use tpslab_run::exporter;
    let Some(a) = &flag.metrics_listen else {
        return Ok(None);
    };
    let addr: SocketAddr = a
        .parse()
        .map_err(|_| anyhow!("--metrics-listen {a:?}: allowed ADDR:PORT, e.g. 127.0.0.1:19464"))?;
    let listener = exporter::listen(addr)
        .map_err(|e| anyhow!("--metrics-listen {a}: cannot listen there: {e}"))?;
    if let Some(w) = exporter::exposure(&addr) {
        eprintln!("{w}");
    }
    let addr = listener
        .local_addr()
        .context("--metrics-listen: the listener's address")?;
    let info = tpslab_report::metrics::exporter_info(command, env!("CARGO_PKG_VERSION"));
    let e = Exporter::serve(listener, info, "--metrics-listen")?;
    eprintln!("tpslab: metrics at http://{addr}/metrics");
    Ok(Some(e))
}
