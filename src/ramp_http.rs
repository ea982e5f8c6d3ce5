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
pub(crate) struct RampHttpArgs {
    /// The request's method.
    #[arg(long, default_value = "GET")]
    method: String,
    /// A request header, 'NAME: VALUE' (repeatable); Host is the URL's unless given.
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    headers: Vec<String>,
    /// The request's body: this file's bytes (a regular file of at most 1 MiB), sent with
    /// its Content-Length.
    #[arg(long)]
    body: Option<PathBuf>,
    /// https: trust only the certificates in this PEM file (at most 1 MiB), not the
    /// system's.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// https: do not verify the server's certificate (the report says so).
    #[arg(long)]
    insecure: bool,
    /// Refused: ramp http speaks HTTP/1.1 (one connection per user); HTTP/2 load is
    /// `load http URL --http2 --rate R`.
    #[arg(long)]
    http2: bool,
    #[command(flatten)]
    pub(super) ramp: RampArgs,
}

impl RampHttpArgs {
    /// The validated setup ([`RampFlags::http_setup`](tpslab_run::ramp::RampFlags::http_setup)).
    pub(super) fn plan(&self) -> Result<RampSetup> {
        if self.http2 {
            anyhow::bail!(
                "ramp http --http2: not supported: ramp http's users each hold one HTTP/1.1 connection; for HTTP/2 use the open loop, load http URL --http2 --rate R [--streams N]"
            );
        }
        let h = HttpFlags {
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
