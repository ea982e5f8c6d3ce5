//! `tpslab bdp` in the terminal: the ceiling a window puts on a flow, and the buffers a
//! rate needs with what this host must raise for them.

use std::io::{self, Write};
use tpslab_analysis::bdp::window_ceiling_bps;
use tpslab_record::bdp::{BdpRecord, Need};

/// A `bdp` record: the ceiling of its buffer, then the needs of its rate.
pub fn record(w: &mut dyn Write, r: &BdpRecord) -> io::Result<()> {
    if let Some(c) = &r.ceiling {
        ceiling(w, c.window_bytes, c.rtt_s)?;
    }
    if let Some(n) = &r.need {
        need(w, n)?;
    }
    Ok(())
}

/// The most a window of `bytes` carries over `rtt_s` seconds, as a window and as a socket
/// buffer (tcp_rmem's last value, or setsockopt's doubled request).
pub fn ceiling(w: &mut dyn Write, bytes: u64, rtt_s: f64) -> io::Result<()> {
    let ms = rtt_s * 1e3;
    let c = window_ceiling_bps(bytes, rtt_s);
    writeln!(
        w,
        "A window of {bytes} bytes over a {ms:.1} ms RTT carries at most {:.1} Mbit/s ({:.0} KiB/s): window / RTT, whatever the link.",
        c / 1e6,
        c / 8.0 / 1024.0
    )?;
    writeln!(
        w,
        "As a socket buffer the window differs: as the last value of tcp_rmem ({bytes} bytes used as is) about half to two thirds is advertised, {:.1}-{:.1} Mbit/s; as setsockopt SO_RCVBUF {bytes} the kernel doubles it and advertises about 1 to 1.3 x {bytes}, {:.1}-{:.1} Mbit/s (`tpslab tcp --lab-rtt` measures it).",
        c / 2e6,
        c / 1.5e6,
        c / 1e6,
        c * 1.3 / 1e6
    )
}

/// The bytes in flight a rate needs, the buffer to give it, this host's settings and the
/// sysctls to raise (with the sysctl.d file that keeps them), and what code that sets its
/// own buffers must ask.
pub fn need(w: &mut dyn Write, n: &Need) -> io::Result<()> {
    let (p, h) = (&n.plan, &n.host);
    writeln!(
        w,
        "{:.1} Mbit/s over a {:.1} ms RTT needs {} bytes in flight (the bandwidth-delay product); the kernel advertises only part of a buffer as window, so give it a {} byte buffer: the last value of tcp_rmem/tcp_wmem, or setsockopt SO_RCVBUF/SO_SNDBUF {} (the kernel doubles what setsockopt asks).",
        n.rate_bps / 1e6,
        n.rtt_s * 1e3,
        p.bdp_bytes,
        p.buffer_bytes,
        p.buffer_bytes / 2
    )?;
    let unknown = |v: &Option<String>| v.clone().unwrap_or("?".into());
    writeln!(w, "This host:")?;
    writeln!(
        w,
        "  net.ipv4.tcp_rmem = {} (autotuning may grow a receive buffer to the last value)",
        unknown(&h.tcp_rmem)
    )?;
    writeln!(w, "  net.ipv4.tcp_wmem = {}", unknown(&h.tcp_wmem))?;
    writeln!(w, "  net.core.rmem_max = {}, net.core.wmem_max = {} (caps for applications that set SO_RCVBUF/SO_SNDBUF, which turns autotuning off)",
        h.rmem_max.map_or("?".into(), |v| v.to_string()), h.wmem_max.map_or("?".into(), |v| v.to_string()))?;
    if n.fixes.is_empty() {
        writeln!(w, "Enough already: autotuning can reach {} bytes; an application that sets its own SO_RCVBUF/SO_SNDBUF must ask for at least {} (doubled by the kernel).", p.buffer_bytes, p.buffer_bytes / 2)?;
    } else {
        writeln!(w, "Raise:")?;
        for (k, v) in &n.fixes {
            // Key and value quoted each for sh by shlex (`=` inside a word is not special
            // to sh): a record read back is checked, and quoted anyway.
            let q = |x: &str| {
                shlex::try_quote(x)
                    .map_or_else(|e| format!("# not quotable: {e}"), |q| q.into_owned())
            };
            writeln!(w, "  sysctl -w {}={}", q(k), q(v))?;
        }
        // Not indented: a here-document ends only at a line that is `EOF` alone, so an
        // indented block pasted as shown would never end.
        writeln!(
            w,
            "Persist, with the full key names (paste from cat to EOF):"
        )?;
        writeln!(w, "cat > /etc/sysctl.d/60-tcp-buffers.conf <<'EOF'")?;
        for (k, v) in &n.fixes {
            writeln!(w, "{k} = {v}")?;
        }
        writeln!(w, "EOF")?;
    }
    writeln!(w, "In code that sets its own buffers: setsockopt(fd, SOL_SOCKET, SO_RCVBUF and SO_SNDBUF, {}) before connect/listen (the kernel doubles it).", p.buffer_bytes / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::bdp::HostBuffers;

    fn text(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> String {
        let mut out = vec![];
        f(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn s4_ceiling_and_need_against_a_small_host() {
        let c = text(|w| ceiling(w, 65536, 0.030));
        assert!(c.starts_with("A window of 65536 bytes over a 30.0 ms RTT carries at most 17.5 Mbit/s (2133 KiB/s)"), "{c}");
        assert_eq!(c.lines().count(), 2);
        let host = HostBuffers {
            tcp_rmem: Some("4096 131072 6291456".into()),
            tcp_wmem: Some("4096 16384 4194304".into()),
            rmem_max: Some(212992),
            wmem_max: None,
        };
        let n = text(|w| need(w, &tpslab_analysis::bdp::need(80e6, 0.030, host)));
        assert!(
            n.contains("80.0 Mbit/s over a 30.0 ms RTT needs 300000 bytes in flight"),
            "{n}"
        );
        assert!(
            n.contains("  net.core.rmem_max = 212992, net.core.wmem_max = ? (caps"),
            "{n}"
        );
        // Only rmem_max is below the 327680 setsockopt asks for.
        assert!(
            n.contains("Raise:\n  sysctl -w net.core.rmem_max=327680\nPersist, with the full key names (paste from cat to EOF):\ncat > /etc/sysctl.d/60-tcp-buffers.conf <<'EOF'\nnet.core.rmem_max = 327680\nEOF\n"),
            "{n}"
        );
        assert!(
            n.ends_with(
                "SO_RCVBUF and SO_SNDBUF, 327680) before connect/listen (the kernel doubles it).\n"
            ),
            "{n}"
        );
        let enough = HostBuffers {
            tcp_rmem: Some("4096 131072 6291456".into()),
            tcp_wmem: Some("4096 16384 6291456".into()),
            rmem_max: Some(1 << 24),
            wmem_max: Some(1 << 24),
        };
        let n = text(|w| need(w, &tpslab_analysis::bdp::need(80e6, 0.030, enough)));
        assert!(
            n.contains("Enough already: autotuning can reach 655360 bytes"),
            "{n}"
        );
    }
}
