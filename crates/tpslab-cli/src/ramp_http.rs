//! `tpslab ramp http [URL]`: the flags of `ramp tcp` (users, steps, think time, the
//! built-in server's) with the URL as the target, and `--method`, `--header`, `--body`.

use super::{RampArgs, RampSetup};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use tpslab_run::ramp::HttpFlags;

/// `ramp http`'s own flags; the rest are `ramp tcp`'s (TARGET is the URL,
/// `http[s]://HOST[:PORT]/PATH`).
#[derive(Args, Debug)]
pub struct RampHttpArgs {
    /// The request's method.
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// A request header, 'NAME: VALUE' (repeatable); Host is the URL's unless given.
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// The request's body: this file's bytes (a regular file of at most 1 MiB), sent with
    /// its Content-Length.
    #[arg(long)]
    pub body: Option<PathBuf>,
    /// https: trust only the certificates in this PEM file (at most 1 MiB), not the
    /// system's.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// https: do not verify the server's certificate (the report says so).
    #[arg(long)]
    pub insecure: bool,
    /// HTTP/2 (h2c with prior knowledge for http://, ALPN h2 for https://): the users
    /// share --connections connections, one stream each in flight (the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS caps them; a user waiting for a stream waits in its
    /// response time). Needs a URL: the built-in server speaks HTTP/1.1.
    #[arg(long)]
    pub http2: bool,
    /// With --http2: the connections the users share (user i on connection i % N).
    /// Without it each user holds its own HTTP/1.1 connection.
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    #[command(flatten)]
    pub ramp: RampArgs,
}

impl RampHttpArgs {
    /// The validated setup ([`RampFlags::http_setup`](tpslab_run::ramp::RampFlags::http_setup)).
    pub fn plan(&self) -> Result<RampSetup> {
        let h = HttpFlags {
            http2: match (self.http2, self.connections) {
                (true, c) => Some(c.unwrap_or(1)),
                (false, None) => None,
                (false, Some(_)) => anyhow::bail!(
                    "--connections applies with --http2 (the users share HTTP/2 connections); with HTTP/1.1 each user holds its own"
                ),
            },
            method: self.method.clone(),
            headers: self.headers.clone(),
            body: self.body.clone(),
            insecure: self.insecure,
            cacert: self.cacert.clone(),
        };
        let r = &self.ramp;
        r.flags().http_setup(&h, || r.outputs())
    }
}
