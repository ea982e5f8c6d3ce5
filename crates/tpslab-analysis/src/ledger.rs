//! The loss ledger: every datagram sent is either delivered or dropped at a named layer.
//!
//! Two directions are balanced separately:
//! - request path (generator -> server): attempted = failed to send + dropped at the NIC +
//!   dropped in the softnet backlog + no listener (NoPorts) + dropped at the server socket's
//!   receive buffer + read by the server application + unattributed;
//! - reply path (server -> generator): replies attempted by the server = failed to send +
//!   dropped at the NIC + softnet + dropped at the generator socket's receive buffer +
//!   read by the generator + unattributed.
//!
//! NIC and softnet counters do not say which flow a drop belonged to; they are charged to
//! the request path first, up to what that path cannot otherwise explain, and the rest to
//! the reply path. `unattributed` is what no counter explains; on an idle loopback run it
//! must be 0.

use tpslab_record::ledger::{Ledger, LedgerInputs, LedgerPath, LedgerRow};

/// Why a path with `gap` (on the wire minus everything explained) does not balance.
fn inconsistency(gap: i64, what: &str) -> Option<String> {
    (gap < 0).then(|| {
        format!(
            "the counters explain {} datagrams more than {what}: a count includes traffic that is not this run's (another sender to the same socket, or a reader of other sockets), so this path cannot be balanced",
            -gap
        )
    })
}

/// Remark for a shared counter only partly charged to a path.
fn leftover(name: &str, left: u64) -> Option<String> {
    (left > 0).then(|| {
        format!("{left} {name} not charged to this run (the counter is shared with other traffic)")
    })
}

fn row(layer: &str, label: &str, count: u64, source: &str) -> LedgerRow {
    LedgerRow {
        layer: layer.into(),
        label: label.into(),
        count,
        source: source.into(),
    }
}

/// Splits a shared drop counter: up to `gap` to this path, the rest left over.
fn charge(pool: &mut u64, gap: i64) -> u64 {
    let take = (*pool).min(gap.max(0) as u64);
    *pool -= take;
    take
}

/// Charges kernel drop reasons (host-wide counts, taken down by what is charged) to a
/// path, each up to what it still leaves unexplained, as rows whose source is the reason;
/// nothing when the path's balance is unknown.
fn charge_reasons(p: &mut LedgerPath, kernel: &mut [(String, u64)]) {
    let Some(mut gap) = p.unattributed else {
        return;
    };
    for (reason, pool) in kernel.iter_mut() {
        let take = charge(pool, gap);
        if take == 0 {
            continue;
        }
        gap -= take as i64;
        let at = p
            .rows
            .iter()
            .position(|r| r.layer == "delivered")
            .unwrap_or(p.rows.len());
        p.rows.insert(
            at,
            LedgerRow {
                layer: crate::drop_reason::layer(reason),
                label: crate::drop_reason::label(reason),
                count: take,
                source: format!(
                    "skb:kfree_skb reason {reason} (host-wide), delta, charged up to what the counters leave unexplained"
                ),
            },
        );
    }
    p.unattributed = Some(gap);
}

/// The [`Ledger`] built from counter deltas ([`LedgerInputs`]). Pure arithmetic, see the
/// module docs.
pub fn build(i: &LedgerInputs) -> Ledger {
    // Host-wide NIC and softnet drops are charged to the request path first, up to
    // what it leaves unexplained; the reply path gets what is left.
    let (mut nic, mut softnet) = (i.nic_rx_drops, i.softnet_drops);
    let mut kernel = i.kernel_drops.clone();
    let mut request = request_path(i, &mut nic, &mut softnet);
    charge_reasons(&mut request, &mut kernel);
    let mut reply = reply_path(i, &mut nic, &mut softnet);
    if let Some(r) = reply.as_mut() {
        charge_reasons(r, &mut kernel);
    }
    // What neither path took was another flow's (the tracepoint is host-wide).
    let last = match reply.as_mut() {
        Some(r) => r,
        None => &mut request,
    };
    for (reason, left) in kernel {
        last.notes
            .extend(leftover(&format!("{reason} drops"), left));
    }
    Ledger { request, reply }
}

/// The request path: generator -> server; charges `nic` and `softnet` (host-wide
/// counts) down by what it takes.
fn request_path(i: &LedgerInputs, nic: &mut u64, softnet: &mut u64) -> LedgerPath {
    let on_wire = i.gen_attempted.saturating_sub(i.gen_send_failed);
    let sock = i.server_socket_drops.unwrap_or(0);
    let mut req_rows = vec![row(
        "send_failed",
        "failed to send (generator)",
        i.gen_send_failed,
        "generator's sendmmsg errors",
    )];
    // What the per-socket counters and the server's reads leave unexplained; the
    // shared counters (NoPorts per namespace, NIC and softnet per host) are charged
    // up to that, NoPorts first.
    let explained = sock + i.server_read.unwrap_or(0);
    let mut gap = on_wire as i64 - explained as i64;
    // A GRO reader's drop is one buffer of up to `per` datagrams (GSO sends).
    let per = i.max_segments_per_send.max(1);
    let mut in_buffers = sock.saturating_mul(per - 1);
    let more = charge(&mut in_buffers, gap);
    gap -= more as i64;
    let sock_datagrams = sock + more;
    let mut no_ports = i.no_ports;
    let mut no_ports_req = 0;
    if !i.server_socket_seen {
        no_ports_req = charge(&mut no_ports, gap);
        gap -= no_ports_req as i64;
    }
    let nic_req = charge(nic, gap);
    gap -= nic_req as i64;
    let softnet_req = charge(softnet, gap);
    gap -= softnet_req as i64;
    if i.server_socket_seen {
        no_ports_req = charge(&mut no_ports, gap);
        gap -= no_ports_req as i64;
    }
    req_rows.push(row(
        "nic_drops",
        "dropped at the NIC",
        nic_req,
        "/proc/net/dev rx `drop` minus softnet backlog drops, delta",
    ));
    req_rows.push(row(
        "softnet_drops",
        "dropped in the softnet backlog",
        softnet_req,
        "/proc/net/softnet_stat column 2 (dropped), delta, all CPUs",
    ));
    req_rows.push(row(
        "no_ports",
        "no listener on the port",
        no_ports_req,
        "/proc/net/snmp `Udp: NoPorts` + snmp6 `Udp6NoPorts`, delta",
    ));
    req_rows.push(row(
        "socket_drops",
        "dropped at the server socket receive buffer",
        sock_datagrams,
        if more > 0 {
            "/proc/net/udp{,6} `drops` of the server socket(s), delta, in datagrams per GRO buffer (see notes)"
        } else {
            "/proc/net/udp{,6} `drops` of the server socket(s), delta"
        },
    ));
    if let Some(read) = i.server_read {
        req_rows.push(row(
            "delivered",
            "read by the server application",
            read,
            &i.server_counts_source,
        ));
    }
    let known = i.server_read.is_some() && i.server_socket_drops.is_some();
    LedgerPath {
        attempted: i.gen_attempted,
        rows: req_rows,
        unattributed: known.then_some(gap),
        inconsistent: if known {
            inconsistency(gap, "the generator put on the wire")
        } else {
            None
        },
        notes: [
            (more > 0).then(|| {
                format!(
                    "the server socket's {sock} receive-buffer drops held {sock_datagrams} datagrams: the generator sent GSO messages of up to {per} datagrams, which a UDP_GRO reader queues, and drops, as one buffer each (charged up to {per} per drop, up to what the path left unexplained)"
                )
            }),
            leftover("datagrams of Udp: NoPorts", no_ports),
        ]
        .into_iter()
        .flatten()
        .collect(),
    }
}

/// The reply path: server -> generator, when replies are expected; charges what is
/// left of `nic` and `softnet`, and notes what no path took.
fn reply_path(i: &LedgerInputs, nic: &mut u64, softnet: &mut u64) -> Option<LedgerPath> {
    if !i.replies_expected {
        return None;
    }
    let attempted = i.server_reply_attempted;
    let failed = i.server_reply_failed.unwrap_or(0);
    let on_wire = attempted.map(|a| a.saturating_sub(failed));
    let mut gap = on_wire.unwrap_or(0) as i64 - (i.gen_socket_drops + i.gen_read) as i64;
    let nic_rep = charge(nic, gap);
    gap -= nic_rep as i64;
    let softnet_rep = charge(softnet, gap);
    gap -= softnet_rep as i64;
    let mut rows = vec![];
    if let Some(read) = i.server_read {
        rows.push(row(
            "not_answered",
            "read but not answered by the application",
            read.saturating_sub(attempted.unwrap_or(read)),
            &i.server_counts_source,
        ));
    }
    rows.extend([
        row(
            "send_failed",
            "reply failed to send (server)",
            failed,
            &i.server_counts_source,
        ),
        row(
            "nic_drops",
            "dropped at the NIC",
            nic_rep,
            "/proc/net/dev rx `drop` minus softnet backlog drops, delta",
        ),
        row(
            "softnet_drops",
            "dropped in the softnet backlog",
            softnet_rep,
            "/proc/net/softnet_stat column 2 (dropped), delta, all CPUs",
        ),
        row(
            "socket_drops",
            "dropped at the generator socket receive buffer",
            i.gen_socket_drops,
            "getsockopt(SO_MEMINFO) `SK_MEMINFO_DROPS` of the generator's socket(s), delta",
        ),
        row(
            "delivered",
            "read by the generator",
            i.gen_read,
            "generator's recvmmsg count",
        ),
    ]);
    // The path starts with what the server read (it owes each a reply): rows are
    // not answered + failed + the fates of the replies sent. A server that sends
    // several datagrams per request (frames) starts it with what it sent.
    let start = match (i.server_read, attempted) {
        (Some(r), Some(a)) => Some(r.max(a)),
        (r, a) => r.or(a),
    };
    let mut notes = vec![];
    if let (Some(r), Some(a)) = (i.server_read, attempted) {
        if a > r && r > 0 && i.server_counts_source.starts_with("derived") {
            // Namespace-wide counters: other sockets' traffic looks the same.
            notes.push(format!(
                "the namespace's UDP counters show {a} datagrams sent for {r} read ({:.2} per request): they count every UDP socket there, so this is replies of several datagrams or other traffic, which cannot be told apart without the server's own counts (root, kernel 6.4+); the path starts from what was sent",
                a as f64 / r as f64
            ));
        } else if a > r && r > 0 {
            notes.push(format!(
                "the server sent {a} datagrams for {r} read ({:.2} per request): replies of several datagrams; the path starts from what it sent, and requests read but never answered cannot be counted here",
                a as f64 / r as f64
            ));
        }
    }
    notes.extend(leftover("NIC drops", *nic));
    notes.extend(leftover("softnet backlog drops", *softnet));
    Some(LedgerPath {
        attempted: start.unwrap_or(0),
        rows,
        unattributed: attempted.map(|_| gap),
        inconsistent: attempted.and_then(|_| inconsistency(gap, "the server sent")),
        notes,
    })
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
