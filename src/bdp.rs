//! `tpslab bdp`: the bandwidth-delay product of a path, the buffers a rate needs and the
//! ceiling a buffer puts on a flow, against this host's settings.

use anyhow::{bail, Result};
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct BdpArgs {
    /// Round-trip time, e.g. 30ms.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) rtt: Duration,
    /// Target rate, bits per second, e.g. 80mbit, 1gbit, 10MB/s (bytes per second).
    #[arg(long, value_name = crate::flags::BITRATE, value_parser = crate::flags::bitrate())]
    pub(crate) rate: Option<f64>,
    /// A buffer (window) size, e.g. 64KiB: the most a flow limited by it can carry.
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub(crate) buffer: Option<u64>,
}

/// Runs `tpslab bdp`.
pub(crate) fn run(a: &BdpArgs) -> Result<ExitCode> {
    use tpslab_analysis::bdp;
    let rtt = tpslab_plan::limits::PATH_RTT
        .check("--rtt", a.rtt)?
        .as_secs_f64();
    if a.rate.is_none() && a.buffer.is_none() {
        bail!("bdp needs --rate RATE (the buffers it needs) or --buffer SIZE (the rate it allows)");
    }
    let ms = rtt * 1e3;
    if let Some(bytes) = a.buffer {
        let c = bdp::window_ceiling_bps(bytes, rtt);
        println!(
            "A window of {bytes} bytes over a {ms:.1} ms RTT carries at most {:.1} Mbit/s ({:.0} KiB/s): window / RTT, whatever the link.",
            c / 1e6,
            c / 8.0 / 1024.0
        );
        println!(
            "As a socket buffer the window differs: as the last value of tcp_rmem ({bytes} bytes used as is) about half to two thirds is advertised, {:.1}-{:.1} Mbit/s; as setsockopt SO_RCVBUF {bytes} the kernel doubles it and advertises about 1 to 1.3 x {bytes}, {:.1}-{:.1} Mbit/s (`tpslab tcp --lab-rtt` measures it).",
            c / 2e6,
            c / 1.5e6,
            c / 1e6,
            c * 1.3 / 1e6
        );
    }
    if let Some(rate) = a.rate {
        let p = bdp::buffer_plan(rate, rtt);
        if p.bdp_bytes > bdp::MAX_TCP_WINDOW {
            bail!(
                "--rate {} over --rtt {}: {} bytes in flight, more than the largest TCP window ({} bytes): use several flows",
                tpslab_plan::units::format_rate(rate),
                humantime::format_duration(a.rtt),
                p.bdp_bytes,
                bdp::MAX_TCP_WINDOW
            );
        }
        println!(
            "{:.1} Mbit/s over a {ms:.1} ms RTT needs {} bytes in flight (the bandwidth-delay product); the kernel advertises only part of a buffer as window, so give it a {} byte buffer: the last value of tcp_rmem/tcp_wmem, or setsockopt SO_RCVBUF/SO_SNDBUF {} (the kernel doubles what setsockopt asks).",
            rate / 1e6,
            p.bdp_bytes,
            p.buffer_bytes,
            p.buffer_bytes / 2
        );
        let read = |k: &str| tpslab_engine::env::read_sysctl(k);
        let (rmem, wmem) = (read("net.ipv4.tcp_rmem"), read("net.ipv4.tcp_wmem"));
        let core = |k: &str| read(k).and_then(|v| v.parse::<u64>().ok());
        let (rmax, wmax) = (core("net.core.rmem_max"), core("net.core.wmem_max"));
        println!("This host:");
        println!(
            "  net.ipv4.tcp_rmem = {} (autotuning may grow a receive buffer to the last value)",
            rmem.clone().unwrap_or("?".into())
        );
        println!(
            "  net.ipv4.tcp_wmem = {}",
            wmem.clone().unwrap_or("?".into())
        );
        println!("  net.core.rmem_max = {}, net.core.wmem_max = {} (caps for applications that set SO_RCVBUF/SO_SNDBUF, which turns autotuning off)",
            rmax.map_or("?".into(), |v| v.to_string()), wmax.map_or("?".into(), |v| v.to_string()));
        let lines = bdp::host_fixes(&p, rmem.as_deref(), wmem.as_deref(), rmax, wmax);
        if lines.is_empty() {
            println!("Enough already: autotuning can reach {} bytes; an application that sets its own SO_RCVBUF/SO_SNDBUF must ask for at least {} (doubled by the kernel).", p.buffer_bytes, p.buffer_bytes / 2);
        } else {
            println!("Raise:");
            for (k, v) in &lines {
                println!("  sysctl -w {k}=\"{v}\"");
            }
            println!("  # persist, with the full key names:");
            println!("  cat > /etc/sysctl.d/60-tcp-buffers.conf <<'EOF'");
            for (k, v) in &lines {
                println!("  {k} = {v}");
            }
            println!("  EOF");
        }
        println!("In code that sets its own buffers: setsockopt(fd, SOL_SOCKET, SO_RCVBUF and SO_SNDBUF, {}) before connect/listen (the kernel doubles it).", p.buffer_bytes / 2);
    }
    Ok(ExitCode::SUCCESS)
}
