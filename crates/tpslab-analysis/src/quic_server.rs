//! The verdict on a QUIC server's receive buffer under `load http --http3`: whether its
//! socket dropped the client's datagrams for want of room (the request path's
//! `socket_drops` row, from the socket's `drops`), and what the server needs, in its own
//! terms: what its socket asked for (quic-go's fixed request, by its package in the
//! executable; otherwise read from what the kernel granted: SO_RCVBUF is twice the
//! value asked, capped at net.core.rmem_max) against what net.core.rmem_max allows, the
//! sysctls that fix it, and what the loss cost QUIC (packets declared lost, congestion
//! events) and the requests (latency from the intended send).

use tpslab_record::load_http::LoadHttpResult;
use tpslab_record::quic_server::QuicServerUdp;

/// What quic-go asks of its sockets' buffers, bytes (its protocol.DesiredReceiveBufferSize
/// since it moved to github.com/quic-go/quic-go: 7 MiB): the receive buffer proposed as
/// net.core.rmem_default for a QUIC socket that never set its own.
pub const QUIC_BUFFER: u64 = 7 << 20;

/// The verdict on the server's socket.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferVerdict {
    /// One line: what happened at the socket and why.
    pub headline: String,
    /// The evidence and the fix, a line each.
    pub lines: Vec<String>,
    /// Host sysctls that fix it (name, value), for `--verify`; empty when the fix is not
    /// a host limit (or nothing was lost).
    pub sysctls: Vec<(String, String)>,
}

/// What the server's socket asked for, bytes, and how that is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// Its implementation's fixed request (quic-go).
    Stack(u64),
    /// Read from the grant: SO_RCVBUF / 2, below the cap and not the default.
    Granted(u64),
    /// At least rmem_max: the grant is at the cap (twice rmem_max).
    AtLeastCap(u64),
    /// Nothing: the grant is net.core.rmem_default itself, what the kernel gives a socket
    /// that never set SO_RCVBUF (sock_init_data; a socket that asked sets twice its
    /// value, so only one that asked for half the default looks the same).
    Default,
    /// Not knowable from the record.
    Unknown,
}

/// Bytes in MiB, or KiB below 1 MiB, with the exact count ("7 MiB (7340032 B)",
/// "4 KiB (4096 B)", "20.31 KiB (20800 B)").
pub fn mib(b: u64) -> String {
    let (v, unit) = if b >= 1 << 20 {
        (b as f64 / (1u64 << 20) as f64, "MiB")
    } else {
        (b as f64 / 1024.0, "KiB")
    };
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0} {unit} ({b} B)")
    } else {
        format!("{v:.2} {unit} ({b} B)")
    }
}

/// The socket's SO_RCVBUF as granted (the largest of the target's sockets), bytes.
fn granted(u: &QuicServerUdp) -> Option<u64> {
    u.observer.target_rcvbuf_bytes.iter().copied().max()
}

/// What the socket asked for: the stack's request when known, else read from the grant
/// against the limits (the kernel doubles the value asked, capped at rmem_max).
pub fn asked(u: &QuicServerUdp) -> Asked {
    if let Some(s) = &u.stack {
        return Asked::Stack(s.asks_bytes);
    }
    let Some(g) = granted(u) else {
        return Asked::Unknown;
    };
    match (u.rmem_max, u.rmem_default) {
        // rmem_default is not capped by rmem_max: a default at or above twice the cap is
        // what a socket that never asked holds (unless it is exactly twice the cap, where
        // the two read alike and the cap is named).
        (m, Some(d)) if g == d && m.is_none_or(|m| d != m.saturating_mul(2)) => Asked::Default,
        (Some(m), _) if g >= m.saturating_mul(2) => Asked::AtLeastCap(m),
        (_, Some(d)) if g == d => Asked::Default,
        (Some(_), _) => Asked::Granted(g / 2),
        _ => Asked::Unknown,
    }
}

/// Judges the server's socket over the run; None without its side observed (a server
/// elsewhere, an older record) or with a request path that does not balance.
pub fn judge(r: &LoadHttpResult) -> Option<BufferVerdict> {
    let u = r.server_udp.as_deref()?;
    let req = &u.ledger.request;
    if req.inconsistent.is_some() || u.ledger.request.unattributed.is_none() {
        return None;
    }
    let who = match (&u.target, &u.stack) {
        (Some(t), Some(s)) => format!("{} ({}) at {}", exe_name(&t.exe), s.name, u.address),
        (Some(t), None) => format!("{} at {}", exe_name(&t.exe), u.address),
        (None, _) => format!("the server at {}", u.address),
    };
    let drops = req.count("socket_drops");
    let g = granted(u);
    let peak = u
        .observer
        .summaries
        .get("server_rx_queue_bytes")
        .map_or(0.0, |s| s.max);
    let mut lines = vec![format!(
        "Socket: SO_RCVBUF {} granted; rx_queue peaked at {:.0} B; {} of {} client datagrams dropped at its receive buffer{}; RcvbufErrors +{}",
        g.map_or("unknown".into(), mib),
        peak,
        drops,
        req.attempted,
        req.share_pct(drops)
            .map_or(String::new(), |p| format!(" ({p:.2} %)")),
        u.observer.deltas.get("udp_rcvbuf_errors").copied().unwrap_or(0)
    )];
    let asked = asked(u);
    lines.push(asked_line(u, asked, g));
    if let Some(q) = &r.http3 {
        lines.push(format!(
            "QUIC cost: {} packets of {} declared lost ({:.2} %) and sent again, {} congestion events; latency from the intended send p99 {:.2} ms, max {:.2} ms",
            q.packets_lost,
            q.packets_sent,
            q.loss_pct(),
            q.congestion_events,
            r.corrected.p99_ns as f64 / 1e6,
            r.corrected.max_ns as f64 / 1e6
        ));
    }
    let (headline, sysctls) = if drops == 0 {
        let none = format!("no datagram dropped at the receive buffer of {who}");
        (none, vec![])
    } else {
        loss(u, asked, g, &who, &mut lines)
    };
    Some(BufferVerdict {
        headline,
        lines,
        sysctls,
    })
}

/// "Asked: ...": what the server's socket asked for (`asked`) against net.core.rmem_max,
/// with SO_RCVBUF granted `g` bytes.
fn asked_line(u: &QuicServerUdp, asked: Asked, g: Option<u64>) -> String {
    // Granted all it asked for although rmem_max is lower: quic-go retries with
    // SO_RCVBUFFORCE, which passes the limit with CAP_NET_ADMIN (a server run as root).
    let in_full = |a: u64| g.is_some_and(|g| g >= a.saturating_mul(2));
    let send_too = u.stack.as_ref().is_some_and(|s| s.send_too);
    let max = u.rmem_max;
    match (asked, max) {
        (Asked::Stack(a), Some(m)) => format!(
            "Asked: {} asks for {} ({}; {}); net.core.rmem_max {} {}",
            u.stack.as_ref().map_or("it", |s| s.name.as_str()),
            mib(a),
            if send_too { "receive and send buffer" } else { "receive buffer" },
            u.stack.as_ref().map_or("", |s| s.source.as_str()),
            mib(m),
            if a <= m {
                "allows it"
            } else if in_full(a) {
                "is lower, but the socket was granted it in full (SO_RCVBUFFORCE passes the limit with CAP_NET_ADMIN)"
            } else {
                "caps it"
            }
        ),
        (Asked::AtLeastCap(m), _) => format!(
            "Asked: at least net.core.rmem_max {} (SO_RCVBUF is twice the value asked, and it is at the cap)",
            mib(m)
        ),
        (Asked::Granted(a), _) => format!(
            "Asked: {} (SO_RCVBUF / 2, below net.core.rmem_max {}: granted in full)",
            mib(a),
            max.map_or("unknown".into(), mib)
        ),
        (Asked::Default, _) => format!(
            "Asked: nothing (SO_RCVBUF is net.core.rmem_default {}, what a socket that never set its buffer holds)",
            u.rmem_default.map_or("unknown".into(), mib)
        ),
        _ => "Asked: unknown (the socket's grant or the host's limits were not read)".into(),
    }
}

/// The headline of a loss at the receive buffer of `who` and the sysctls of its fix (its
/// "Fix: ..." line added to `lines`): the host's limit when it capped what the socket
/// asked for, else the server's own setting or its readers.
fn loss(
    u: &QuicServerUdp,
    asked: Asked,
    g: Option<u64>,
    who: &str,
    lines: &mut Vec<String>,
) -> (String, Vec<(String, String)>) {
    let in_full = |a: u64| g.is_some_and(|g| g >= a.saturating_mul(2));
    let send_too = u.stack.as_ref().is_some_and(|s| s.send_too);
    let max = u.rmem_max;
    let mut sysctls = vec![];
    let headline = match (asked, max) {
        (Asked::Stack(a), Some(m)) if a > m && !in_full(a) => {
            sysctls = vec![("net.core.rmem_max".into(), a.to_string())];
            // Never lowered: only a send limit read and below the request.
            if send_too && u.wmem_max.is_some_and(|w| w < a) {
                sysctls.push(("net.core.wmem_max".into(), a.to_string()));
            }
            let set = sysctls
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            lines.push(format!(
                "Fix: sysctl -w {set} (at least the {} {} asks for; persist it in /etc/sysctl.d/), then restart the server: its socket takes the limit only when it is created",
                mib(a),
                u.stack.as_ref().map_or("server", |s| s.name.as_str())
            ));
            format!(
                "receive-buffer loss at {who}: it asks for {} and net.core.rmem_max ({}) caps it",
                mib(a),
                mib(m)
            )
        }
        (Asked::AtLeastCap(m), _) => {
            // A sysctl int: at most i32::MAX.
            let v = m.saturating_mul(4).min(i32::MAX as u64);
            sysctls = vec![("net.core.rmem_max".into(), v.to_string())];
            lines.push(format!(
                "Fix: raise net.core.rmem_max above {} (e.g. sysctl -w net.core.rmem_max={v}), then restart the server so its socket asks again",
                mib(m)
            ));
            format!(
                "receive-buffer loss at {who}: its socket asked for at least the {} net.core.rmem_max allows",
                mib(m)
            )
        }
        (Asked::Default, _) => {
            // The default is not capped by rmem_max: it alone gives the socket room. At or
            // above quic-go's request already: four times it (a sysctl int at most).
            let d = u.rmem_default.unwrap_or(0);
            let want = if d < QUIC_BUFFER {
                QUIC_BUFFER
            } else {
                d.saturating_mul(4).min(i32::MAX as u64)
            };
            sysctls = vec![("net.core.rmem_default".into(), want.to_string())];
            lines.push(format!(
                "Fix: sysctl -w net.core.rmem_default={want} ({}, {}; net.core.rmem_max does not cap the default; persist it in /etc/sysctl.d/), then restart the server: its socket takes the default only when it is created. Every socket on the host that does not set its own buffer gets it: the server's own SO_RCVBUF setting is the narrower fix",
                mib(want),
                if d < QUIC_BUFFER { "what quic-go asks of its sockets" } else { "four times the default it dropped at" }
            ));
            format!(
                "receive-buffer loss at {who}: its socket never set its buffer and runs on net.core.rmem_default ({})",
                u.rmem_default.map_or("unknown".into(), mib)
            )
        }
        _ => {
            lines.push("Fix: not the host's limit (the socket got what it asked for): a larger buffer in the server's own setting, or readers that keep up (its reading threads above)".into());
            format!("receive-buffer loss at {who}: its socket got what it asked for and its readers fell behind")
        }
    };
    (headline, sysctls)
}

/// The executable's file name ("caddy" of "/usr/bin/caddy").
fn exe_name(exe: &str) -> &str {
    exe.rsplit('/').next().unwrap_or(exe)
}

#[cfg(test)]
#[path = "quic_server_tests.rs"]
mod tests;
