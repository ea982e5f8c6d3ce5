//! `load http --http3`'s lines on the server's QUIC socket: the process found by the
//! URL's address, the datagram ledger, the kernel's drop reasons, the threads that read
//! the socket and where they waited, the verdict on its receive buffer
//! ([`tpslab_analysis::quic_server::judge`]) and `--verify`'s second run.

use std::io::{self, Write};

use tpslab_analysis::quic_server::{judge, mib};
use tpslab_record::load_http::LoadHttpResult;
use tpslab_record::load_http::QuicVerification;
use tpslab_record::quic_server::QuicServerUdp;

use super::run::{print_drop_reasons, print_path, target_line};

/// The server's socket and its verdict; nothing for a run without it.
pub(super) fn print(w: &mut dyn Write, r: &LoadHttpResult) -> io::Result<()> {
    let Some(u) = r.server_udp.as_deref() else {
        return Ok(());
    };
    socket(w, u)?;
    if let Some(v) = judge(r) {
        writeln!(w, "VERDICT (server socket): {}", v.headline)?;
        for l in &v.lines {
            writeln!(w, "  {l}")?;
        }
    }
    if let Some(v) = r.verification.as_deref() {
        verification(w, r, v)?;
    }
    Ok(())
}

/// The process, the ledger, the drop reasons, the readers.
fn socket(w: &mut dyn Write, u: &QuicServerUdp) -> io::Result<()> {
    match &u.target {
        Some(t) => writeln!(
            w,
            "Server's QUIC socket on {}: {}",
            u.address,
            target_line(t)
        )?,
        None => writeln!(
            w,
            "Server's QUIC socket on {}: its process not found",
            u.address
        )?,
    }
    writeln!(
        w,
        "Ledger: where every QUIC datagram went (whole run, every connection's handshake and close included)"
    )?;
    print_path(
        w,
        "request path: client (quinn) -> server",
        &u.ledger.request,
        false,
    )?;
    if let Some(p) = &u.ledger.reply {
        print_path(w, "reply path: server -> client (quinn)", p, false)?;
    }
    if let Some(d) = &u.drop_reasons {
        print_drop_reasons(w, d, Some(&u.ledger))?;
    }
    if let Some(n) = u.observer.target_reader_threads {
        writeln!(w, "  server threads that read UDP datagrams: {n}")?;
    }
    if let Some(tw) = &u.observer.thread_waits {
        super::waits::print_thread_waits(w, tw)?;
    }
    for n in u.notes.iter().chain(&u.ledger.request.notes) {
        writeln!(w, "  note: {n}")?;
    }
    Ok(())
}

/// `--verify`: what was applied, the second run's socket beside the first's, what was
/// restored.
fn verification(
    w: &mut dyn Write,
    before: &LoadHttpResult,
    v: &QuicVerification,
) -> io::Result<()> {
    if let Some(why) = &v.not_verified {
        writeln!(w, "NOT VERIFIED: {why}")?;
    }
    for a in &v.applied {
        writeln!(w, "Applied: {a}")?;
    }
    if let Some(after) = v.after.as_deref() {
        // Counts only where they prove something: the socket found and its request
        // path balanced (a run that saw no socket also saw no drop).
        let drops = |r: &LoadHttpResult| {
            r.server_udp
                .as_deref()
                .filter(|u| {
                    u.target.is_some()
                        && u.ledger.request.inconsistent.is_none()
                        && u.ledger.request.unattributed.is_some()
                })
                .map(|u| {
                    let p = &u.ledger.request;
                    (
                        p.count("socket_drops"),
                        p.attempted,
                        u.observer.target_rcvbuf_bytes.iter().copied().max(),
                    )
                })
        };
        let quic = |r: &LoadHttpResult| {
            r.http3.map_or("-".to_string(), |q| {
                format!("{} of {} packets lost", q.packets_lost, q.packets_sent)
            })
        };
        let line = |label: &str, r: &LoadHttpResult| {
            match drops(r) {
            Some((d, a, g)) => format!(
                "{label}: {d} of {a} datagrams dropped at the server's socket (SO_RCVBUF {}); {}; p99 {:.2} ms",
                g.map_or("unknown".into(), mib),
                quic(r),
                r.corrected.p99_ns as f64 / 1e6
            ),
            None => format!(
                "{label}: the server's socket not seen, or its datagrams did not balance"
            ),
        }
        };
        writeln!(w, "{}", line("Before (run 1, as is)", before))?;
        writeln!(
            w,
            "{}",
            line("After (run 2, with the fix, the server restarted)", after)
        )?;
        match (drops(before), drops(after)) {
            _ if v.not_verified.is_some() => {}
            (Some((b, ..)), Some((0, ..))) if b > 0 => writeln!(
                w,
                "VERIFIED: the receive-buffer drops are gone with the fix"
            )?,
            (Some((b, ..)), Some((a, ..))) if b > 0 => writeln!(
                w,
                "NOT FIXED: {a} drops with the fix (before: {b}): the limit was not all of it"
            )?,
            _ => {}
        }
    }
    for (k, val) in &v.restored {
        writeln!(w, "Restored: {k}={val}")?;
    }
    for n in &v.notes {
        writeln!(w, "  note: {n}")?;
    }
    Ok(())
}
