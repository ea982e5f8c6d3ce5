//! `tpslab ramp http [URL]`: the flags of `ramp tcp` (users, steps, think time, the
//! built-in server's) with the URL as the target, and `--method`, `--header`, `--body`.

use super::{RampArgs, RampSetup};
use anyhow::Result;
use clap::Args;
use tpslab_run::ramp::HttpFlags;

/// `ramp http`'s own flags; the rest are `ramp tcp`'s (TARGET is the URL,
/// `http[s]://HOST[:PORT]/PATH`).
#[derive(Args, Debug)]
#[command(mut_arg("target", |a| a.value_name("URL").help(
    "The URL, http[s]://HOST[:PORT]/PATH (optional: without it, tpslab's reference server, serve http, is started)")))]
pub struct RampHttpArgs {
    #[command(flatten)]
    pub request: crate::flags::HttpRequestFlags,
    /// HTTP/2 (h2c with prior knowledge for http://, ALPN h2 for https://): the users
    /// share --connections connections, one stream each in flight (the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS caps them; a user waiting for a stream waits in its
    /// response time). Needs a URL: the built-in server speaks HTTP/1.1.
    #[arg(long)]
    pub http2: bool,
    /// HTTP/3 over QUIC (ALPN h3; an https:// URL): the users share --connections QUIC
    /// connections, one stream each in flight (the server's MAX_STREAMS caps them).
    /// Needs a URL: the built-in server speaks HTTP/1.1.
    #[arg(long, conflicts_with = "http2")]
    pub http3: bool,
    /// With --http2 or --http3: the connections the users share (user i on connection
    /// i % N; default 1). Without either each user holds its own HTTP/1.1 connection.
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    #[command(flatten)]
    pub ramp: RampArgs,
}

impl RampHttpArgs {
    /// The validated setup ([`RampFlags::http_setup`](tpslab_run::ramp::RampFlags::http_setup)).
    pub fn plan(&self) -> Result<RampSetup> {
        if self.connections.is_some() && !self.http2 && !self.http3 {
            anyhow::bail!(
                "--connections applies with --http2 or --http3 (the users share their connections); with HTTP/1.1 each user holds its own"
            );
        }
        let shared = |on: bool| on.then(|| self.connections.unwrap_or(1));
        let h = HttpFlags {
            http2: shared(self.http2),
            http3: shared(self.http3),
            method: self.request.method.clone(),
            headers: self.request.headers.clone(),
            body: self.request.body.clone(),
            insecure: self.request.insecure,
            cacert: self.request.cacert.clone(),
        };
        let r = &self.ramp;
        if r.protocol != "framed" {
            anyhow::bail!("--protocol applies to ramp tcp");
        }
        r.flags().http_setup(&h, || r.outputs())
    }
}
