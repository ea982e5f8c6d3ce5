//! A run's kernel side in a terminal: the observer's sampled series and counter deltas,
//! the ledger's paths (where every datagram went) and the kernel's drop reasons beside it.

use super::super::table;
use std::io::{self, Write};
use tpslab_record::ledger::LedgerPath;
use tpslab_record::ObserverReport;

pub(super) fn print_observer(
    w: &mut dyn Write,
    o: &ObserverReport,
    explain: bool,
) -> io::Result<()> {
    writeln!(
        w,
        "Kernel, sampled every {:.1} ms ({} samples):",
        o.interval_ms, o.samples
    )?;
    let mut hdr = vec!["series", "mean", "stddev", "min", "max", "p50", "p99"];
    if explain {
        hdr.push("source");
    }
    let mut t = table(&hdr);
    for (k, s) in &o.summaries {
        let mut row = vec![
            k.clone(),
            format!("{:.0}", s.mean),
            format!("{:.0}", s.stddev),
            format!("{:.0}", s.min),
            format!("{:.0}", s.max),
            format!("{:.0}", s.p50),
            format!("{:.0}", s.p99),
        ];
        if explain {
            let base = k.trim_end_matches("_per_s");
            row.push(
                o.sources
                    .get(base)
                    .or_else(|| o.sources.get(k))
                    .cloned()
                    .unwrap_or_default(),
            );
        }
        t.add_row(row);
    }
    crate::term::fit::put(w, t)?;
    let mut t = table(&["counter delta over the run", "value"]);
    for (k, v) in &o.deltas {
        if *v > 0 || k.contains("drop") || k.contains("errors") || k == "udp_no_ports" {
            t.add_row(vec![k.clone(), v.to_string()]);
        }
    }
    crate::term::fit::put(w, t)?;
    let mut t = table(&["CPU", "user %", "system %", "irq+softirq %", "busy %"]);
    for (cpu, m) in &o.cpu_pct {
        let g = |k: &str| format!("{:.1}", m.get(k).copied().unwrap_or(0.0));
        t.add_row(vec![
            cpu.clone(),
            g("user"),
            g("system"),
            g("softirq"),
            g("busy"),
        ]);
    }
    crate::term::fit::put(w, t)?;
    if !o.target_rcvbuf_bytes.is_empty() {
        writeln!(
            w,
            "  target socket(s) SO_RCVBUF limit (sock_diag): {} bytes",
            o.target_rcvbuf_bytes
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    if let Some(n) = o.target_reader_threads {
        writeln!(w, "  target threads that read UDP datagrams: {n}")?;
    }
    for s in &o.target_sched {
        writeln!(w, "  target thread {s}")?;
    }
    if let Some(l) = &o.tcp_listen {
        writeln!(
            w,
            "  TCP listen socket(s) (sock_diag; accept queue from /proc/PID/net/tcp): {}",
            tpslab_analysis::tcp_listen::describe(l)
        )?;
        for f in tpslab_analysis::tcp_listen::findings(o) {
            writeln!(w, "  {f}")?;
        }
    }
    if let Some(tw) = &o.thread_waits {
        super::super::waits::print_thread_waits(w, tw)?;
    }
    for n in &o.notes {
        writeln!(w, "  note: {n}")?;
    }
    for e in &o.errors {
        writeln!(w, "  observer could not read: {e}")?;
    }
    Ok(())
}

pub(in crate::term) fn print_path(
    w: &mut dyn Write,
    title: &str,
    p: &LedgerPath,
    explain: bool,
) -> io::Result<()> {
    let mut hdr = vec![title, "datagrams", "% of attempted"];
    if explain {
        hdr.push("source");
    }
    let mut t = table(&hdr);
    // A share that cannot be true (above 100 %, or of a path that does not balance) is
    // not printed.
    let pct = |c: u64| {
        p.share_pct(c)
            .map_or("-".to_string(), |v| format!("{v:.2}"))
    };
    let mut first = vec![
        "attempted".to_string(),
        p.attempted.to_string(),
        pct(p.attempted),
    ];
    if explain {
        first.push("sender's own count".into());
    }
    t.add_row(first);
    for r in &p.rows {
        let mut row = vec![format!("  {}", r.label), r.count.to_string(), pct(r.count)];
        if explain {
            row.push(r.source.clone());
        }
        t.add_row(row);
    }
    let mut last = vec![
        "  unattributed (no counter explains)".to_string(),
        match p.unattributed {
            None => "unknown".into(),
            Some(u) if u < 0 => "INCONSISTENT".into(),
            Some(u) => u.to_string(),
        },
        p.unattributed
            .filter(|u| *u >= 0)
            .map_or("-".into(), |u| pct(u as u64)),
    ];
    if explain {
        last.push("attempted minus every row above".into());
    }
    t.add_row(last);
    crate::term::fit::put(w, t)?;
    if let Some(why) = &p.inconsistent {
        writeln!(w, "  WARNING: MEASUREMENT INCONSISTENT: {why}; no share and no verdict is drawn from this path")?;
    }
    for n in &p.notes {
        writeln!(w, "  {n}")?;
    }
    Ok(())
}

/// The kernel's drop reasons beside the ledger: a reason that matches a ledger row shows
/// that row's count (the reason is host-wide, the row this run's namespace).
pub(in crate::term) fn print_drop_reasons(
    w: &mut dyn Write,
    d: &tpslab_record::DropReasons,
    ledger: Option<&tpslab_record::ledger::Ledger>,
) -> io::Result<()> {
    if let Some(why) = &d.unavailable {
        return writeln!(w, "Kernel drop reasons: not read ({why})");
    }
    let lost = if d.lost > 0 {
        format!(
            "; {} samples LOST (rings full): the counts below are short by that much",
            d.lost
        )
    } else {
        String::new()
    };
    let scope = if ledger.is_some() {
        "host-wide: every namespace's drops, while the ledger counts this run's"
    } else {
        "host-wide: every namespace's drops"
    };
    writeln!(
        w,
        "Kernel drop reasons (skb:kfree_skb during the run, {scope}){lost}:"
    )?;
    if d.by_reason.is_empty() {
        return writeln!(w, "  none");
    }
    let row = |layer: &str| -> Option<u64> {
        let l = ledger?;
        Some(l.request.count(layer) + l.reply.as_ref().map_or(0, |r| r.count(layer)))
    };
    // Host-wide drops beyond a ledger row are other traffic only when the ledger saw
    // every datagram of this run: not when a path could not be balanced (the server's
    // socket not observed: its row reads 0, the run's own drops among the rest) or left
    // some unattributed (this run's drops that no counter placed may be among them).
    let unplaced: Option<i64> = ledger.and_then(|l| {
        let paths = std::iter::once(&l.request).chain(l.reply.as_ref());
        paths
            .map(|p| p.unattributed.map(|u| u.max(0)))
            .sum::<Option<i64>>()
    });
    for (reason, n) in &d.by_reason {
        use tpslab_analysis::drop_reason::{classify, layer, ReasonClass};
        let check = match classify(reason) {
            ReasonClass::Covered("socket_drops") => {
                row("socket_drops").map(|c| (format!("ledger, socket receive buffer: {c}"), c))
            }
            ReasonClass::Covered("no_ports") => {
                row("no_ports").map(|c| (format!("ledger, no listener: {c}"), c))
            }
            ReasonClass::Covered("softnet_drops") => {
                row("softnet_drops").map(|c| (format!("ledger, softnet backlog: {c}"), c))
            }
            _ => row(&layer(reason))
                .filter(|&c| c > 0)
                .map(|c| (format!("ledger row of its own: {c} of this run's"), c)),
        };
        match check {
            // The tracepoint counts every namespace's drops, the ledger this run's: the
            // rest is other traffic, said where the two figures meet.
            Some((c, mine)) if *n > mine => match unplaced {
                Some(0) => writeln!(
                    w,
                    "  {reason:<24} {n:>12}   {c}; the other {} host-wide are not this run's: other traffic on this host (the tracepoint sees every namespace)",
                    n - mine
                )?,
                Some(u) => writeln!(
                    w,
                    "  {reason:<24} {n:>12}   {c}; the other {} host-wide: other traffic on this host, or some of this run's {u} unattributed",
                    n - mine
                )?,
                None => writeln!(
                    w,
                    "  {reason:<24} {n:>12}   {c}; the other {} host-wide may be this run's: the ledger could not count this layer (the server's side not observed), or other traffic on this host",
                    n - mine
                )?,
            },
            Some((c, _)) => writeln!(w, "  {reason:<24} {n:>12}   {c}")?,
            None => writeln!(w, "  {reason:<24} {n:>12}")?,
        }
    }
    if !d.by_site.is_empty() {
        writeln!(
            w,
            "  where (the dropping kernel function, from the event's location and /proc/kallsyms):"
        )?;
        for (reason, site, n) in &d.by_site {
            writeln!(w, "    {reason:<22} {n:>12}   {site}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::DropReasons;

    fn text(d: &DropReasons) -> String {
        let mut out = vec![];
        print_drop_reasons(&mut out, d, None).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn drop_reasons_with_their_sites_lost_samples_and_absence() {
        let d = DropReasons {
            by_reason: vec![("SOCKET_RCVBUFF".into(), 1999), ("NO_SOCKET".into(), 300)],
            lost: 7,
            unavailable: None,
            by_site: vec![
                (
                    "SOCKET_RCVBUFF".into(),
                    "udp_queue_rcv_one_skb+0x437".into(),
                    1999,
                ),
                ("NO_SOCKET".into(), "__udp4_lib_rcv+0x4bc".into(), 300),
            ],
        };
        let s = text(&d);
        assert!(s.contains("host-wide"), "{s}");
        assert!(s.contains("7 samples LOST"), "{s}");
        assert!(s.contains("SOCKET_RCVBUFF") && s.contains("1999"), "{s}");
        let site = s
            .lines()
            .find(|l| l.contains("udp_queue_rcv_one_skb+0x437"))
            .unwrap_or_else(|| panic!("{s}"));
        assert!(
            site.contains("SOCKET_RCVBUFF") && site.contains("1999"),
            "{site}"
        );
        let s = text(&DropReasons {
            by_reason: vec![("NO_SOCKET".into(), 3)],
            ..Default::default()
        });
        assert!(!s.contains("where"), "no sites, no heading: {s}");
        let s = text(&DropReasons {
            unavailable: Some("needs root".into()),
            ..Default::default()
        });
        assert_eq!(s, "Kernel drop reasons: not read (needs root)\n");
    }

    #[test]
    fn host_wide_drops_beyond_the_ledger_are_said_to_be_other_traffic() {
        use tpslab_record::ledger::LedgerPath;
        use tpslab_record::ledger::{Ledger, LedgerRow};
        // The figures: 205 551 SOCKET_RCVBUFF host-wide, 142 233 in the ledger.
        let d = DropReasons {
            by_reason: vec![("SOCKET_RCVBUFF".into(), 205_551), ("NO_SOCKET".into(), 12)],
            ..Default::default()
        };
        let row = |layer: &str, count| LedgerRow {
            layer: layer.into(),
            label: String::new(),
            count,
            source: String::new(),
        };
        let l = Ledger {
            request: LedgerPath {
                attempted: 200_000,
                rows: vec![row("socket_drops", 142_233), row("no_ports", 12)],
                unattributed: Some(0),
                inconsistent: None,
                notes: vec![],
            },
            reply: None,
        };
        let mut out = vec![];
        print_drop_reasons(&mut out, &d, Some(&l)).unwrap();
        let s = String::from_utf8(out).unwrap();
        let line = s
            .lines()
            .find(|l| l.contains("SOCKET_RCVBUFF"))
            .unwrap_or_else(|| panic!("{s}"));
        assert!(
            line.contains("ledger, socket receive buffer: 142233; the other 63318 host-wide are not this run's: other traffic on this host"),
            "{line}"
        );
        // Equal counts: nothing to explain.
        let line = s.lines().find(|l| l.contains("NO_SOCKET")).unwrap();
        assert!(line.ends_with("ledger, no listener: 12"), "{line}");
    }

    #[test]
    fn host_wide_drops_are_not_called_other_traffic_when_the_ledger_could_not_see_them() {
        use tpslab_record::ledger::Ledger;
        use tpslab_record::ledger::LedgerPath;
        // A target not on this host (or its socket not seen): the ledger's socket row is
        // 0 because it could not count it, and the 17084 drops were this run's (seen on a
        // veth namespace server). Before: "the other 17084 host-wide are not this run's".
        let d = DropReasons {
            by_reason: vec![("SOCKET_RCVBUFF".into(), 17_084)],
            ..Default::default()
        };
        let path = |unattributed| LedgerPath {
            attempted: 25_000,
            rows: vec![],
            unattributed,
            inconsistent: None,
            notes: vec![],
        };
        let text = |l: &Ledger| {
            let mut out = vec![];
            print_drop_reasons(&mut out, &d, Some(l)).unwrap();
            String::from_utf8(out).unwrap()
        };
        let blind = Ledger {
            request: path(None),
            reply: None,
        };
        let s = text(&blind);
        assert!(!s.contains("are not this run's"), "{s}");
        assert!(
            s.contains("the other 17084 host-wide may be this run's"),
            "{s}"
        );
        // Some of the run's datagrams unplaced: they may be among the drops.
        let partly = Ledger {
            request: path(Some(101)),
            reply: None,
        };
        let s = text(&partly);
        assert!(!s.contains("are not this run's"), "{s}");
        assert!(s.contains("or some of this run's 101 unattributed"), "{s}");
    }
}
