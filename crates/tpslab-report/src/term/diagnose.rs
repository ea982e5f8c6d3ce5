//! A diagnosis in a terminal: the verdict first, its evidence, the ledger, the
//! recommendations, the buffer arithmetic, and before/after of the verification run.

use super::run::{print_drop_reasons, print_load_line, print_path};
use super::{fmt_ns, table};
use std::io::{self, Write};
use tpslab_record::{DiagnoseRecord, RunRecord};

fn before_after_row(rec: &RunRecord) -> Vec<String> {
    let g = rec.generator.as_ref();
    let q = rec
        .observer
        .as_ref()
        .and_then(|o| o.summaries.get("server_rx_queue_bytes"))
        .copied()
        .unwrap_or_default();
    let delivered = rec
        .ledger
        .as_ref()
        .map_or(0, |l| l.request.count("delivered"));
    vec![
        g.map_or(0, |g| g.attempted).to_string(),
        delivered.to_string(),
        g.and_then(|g| g.window_loss_pct)
            .map_or("-".into(), |l| format!("{l:.2} %")),
        g.map_or("-".into(), |g| format!("{:.0}", g.tps)),
        g.map_or("-".into(), |g| fmt_ns(g.latency_intended.p99_ns as f64)),
        format!("{:.0}", q.mean),
        format!("{:.0}", q.max),
    ]
}

/// Prints a diagnosis: verdict first, evidence, ledger, recommendations, buffer
/// arithmetic, and the before/after of the verification run.
pub fn print_diagnosis(w: &mut dyn Write, rec: &DiagnoseRecord, explain: bool) -> io::Result<()> {
    let (d, before) = (&rec.diagnosis, &rec.before);
    let scenario = &rec.scenario;
    writeln!(w, "tpslab diagnose: {scenario}")?;
    writeln!(w)?;
    writeln!(w, "VERDICT: {}", d.headline)?;
    writeln!(w, "  where: {}", d.layer)?;
    if let Some(t) = &before.target {
        writeln!(w, "  {}", super::run::target_line(t))?;
    }
    if let Some(g) = &before.generator {
        print_load_line(w, g)?;
    }
    writeln!(w)?;
    writeln!(w, "Evidence:")?;
    for e in &d.evidence {
        if explain {
            writeln!(w, "  - {}\n      [source: {}]", e.text, e.source)?;
        } else {
            writeln!(w, "  - {}", e.text)?;
        }
    }
    print_group(w, &rec.facts.group)?;
    if let Some(l) = &before.ledger {
        print_path(w, "request path: generator -> server", &l.request, explain)?;
        if let Some(r) = &l.reply {
            print_path(w, "reply path: server -> generator", r, explain)?;
        }
    }
    if let Some(dr) = &before.drop_reasons {
        print_drop_reasons(w, dr, before.ledger.as_ref())?;
    }
    if !d.recommendations.is_empty() {
        writeln!(w, "Recommendation:")?;
        for (i, r) in d.recommendations.iter().enumerate() {
            writeln!(w, "  {}. {}", i + 1, r.what)?;
            writeln!(w, "     why: {}", r.why)?;
            // A here-document's body and its `EOF` are printed unindented: the shell ends
            // it only at a line that is `EOF` alone, so an indented block pasted into a
            // shell would never end (and its indented keys would be written to the file).
            let mut in_heredoc = false;
            for l in &r.lines {
                if in_heredoc {
                    writeln!(w, "{l}")?;
                    in_heredoc = l != "EOF";
                } else {
                    writeln!(w, "       {l}")?;
                    in_heredoc = l.ends_with("<<'EOF'");
                }
            }
        }
    }
    if !d.buffer_notes.is_empty() {
        writeln!(w, "Buffer arithmetic (measured on this kernel):")?;
        for n in &d.buffer_notes {
            writeln!(w, "  - {n}")?;
        }
    }
    if explain {
        for n in &d.explain_notes {
            writeln!(w, "  - {n}")?;
        }
    }
    if let Some(a) = &rec.after {
        verification(w, before, a, &rec.applied, &rec.restored)?;
    }
    if let Some(n) = &rec.not_verified {
        writeln!(w)?;
        writeln!(w, "Verification: NOTHING VERIFIED: {}", n.why)?;
        if let Some(run) = &n.run {
            writeln!(w, "  to verify, run:")?;
            writeln!(w, "    {run}")?;
        }
        if let Some(note) = &n.run_note {
            writeln!(w, "  ({note})")?;
        }
    }
    for n in before.notes.iter().chain(&rec.notes) {
        writeln!(w, "note: {n}")?;
    }
    Ok(())
}

/// The server's SO_REUSEPORT group socket by socket (nothing with one socket): its
/// reader, offered share, reads, drops, deepest queue, and where its reader waited.
fn print_group(w: &mut dyn Write, group: &[tpslab_record::verdict::GroupSocket]) -> io::Result<()> {
    if group.len() < 2 {
        return Ok(());
    }
    let figs = tpslab_analysis::reuseport::figures(group);
    let mut t = table(&[
        "SO_REUSEPORT socket",
        "reader",
        "offered",
        "share",
        "read",
        "dropped",
        "lost",
        "queue max B",
        "reader waiting for datagrams / else",
    ]);
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for (s, f) in group.iter().zip(&figs) {
        let r = s.reader.as_ref();
        t.add_row(vec![
            if s.inode > 0 {
                format!("inode {}", s.inode)
            } else {
                "-".into()
            },
            or_dash(r.map(tpslab_analysis::reuseport::reader_name)),
            or_dash(f.offered.map(|o| o.to_string())),
            or_dash(f.share_pct.map(|p| format!("{p:.0} %"))),
            or_dash(s.reads.map(|r| r.to_string())),
            s.drops.to_string(),
            or_dash(f.lost_pct.map(|p| format!("{p:.0} %"))),
            match s.rcvbuf_bytes {
                Some(l) => format!("{} of {l}", s.rx_queue_max_bytes),
                None => s.rx_queue_max_bytes.to_string(),
            },
            or_dash(f.waiting_pct.map(|p| {
                let other = r
                    .and_then(tpslab_analysis::reuseport::reader_wait)
                    .map_or(String::new(), |x| format!("; {x}"));
                format!("{p:.0} %{other}")
            })),
        ]);
    }
    crate::term::fit::put(w, t)
}

/// The verification run against the first: what was applied, before/after, what it cost,
/// what was restored.
fn verification(
    w: &mut dyn Write,
    before: &RunRecord,
    a: &RunRecord,
    applied: &[String],
    restored: &[(String, String)],
) -> io::Result<()> {
    writeln!(w)?;
    writeln!(
        w,
        "Verification: the load again with {}{}",
        applied.join(", "),
        if a.interrupted {
            " (INTERRUPTED: partial run)"
        } else {
            ""
        }
    )?;
    let mut t = table(&[
        "",
        "sent",
        "delivered",
        "lost (window)",
        "TPS",
        "p99 RTT",
        "rx_queue mean B",
        "rx_queue max B",
    ]);
    let mut b = vec!["before".to_string()];
    b.extend(before_after_row(before));
    t.add_row(b);
    let mut x = vec!["after".to_string()];
    x.extend(before_after_row(a));
    t.add_row(x);
    crate::term::fit::put(w, t)?;
    if let (Some(gb), Some(ga)) = (&before.generator, &a.generator) {
        writeln!(w, "  {}", latency_change(gb, ga, applied))?;
    }
    if let Some(g) = &a.generator {
        if !g.valid {
            writeln!(
                w,
                "  (the verification run's generator was a bottleneck: {})",
                g.invalid_reasons.join("; ")
            )?;
        }
    }
    for (k, v) in restored {
        writeln!(w, "  restored {k} = {v}")?;
    }
    Ok(())
}

/// The verification's p99 RTT against the first run's, always said: rose, fell or
/// unchanged, with the ratio; when it rose while loss fell under a fix that enlarged a
/// queue (`--rcvbuf`, an rmem or backlog sysctl), why.
fn latency_change(
    b: &tpslab_record::GeneratorReport,
    a: &tpslab_record::GeneratorReport,
    applied: &[String],
) -> String {
    let (lb, la) = (&b.latency_intended, &a.latency_intended);
    if lb.count == 0 || la.count == 0 {
        return "p99 RTT: not compared (no replies were matched in one of the runs)".into();
    }
    let (pb, pa) = (lb.p99_ns as f64, la.p99_ns as f64);
    let change = if pa > pb {
        "rose"
    } else if pa < pb {
        "fell"
    } else {
        "unchanged"
    };
    let ratio = if pb > 0.0 && pa != pb {
        format!(" (x{:.2})", pa / pb)
    } else {
        String::new()
    };
    let bigger_queue = applied.iter().any(|x| {
        ["--rcvbuf", "rmem_default", "rmem_max", "netdev_max_backlog"]
            .iter()
            .any(|k| x.contains(k))
    });
    let why = if pa > pb && bigger_queue && a.window_loss_pct < b.window_loss_pct {
        ": datagrams that were dropped before now wait in the larger queue; latency is the price of not losing them"
    } else {
        ""
    };
    format!(
        "p99 RTT {change}: {} before, {} after{ratio}{why}",
        fmt_ns(pb),
        fmt_ns(pa)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::buffer::TruesizeProbe;
    use tpslab_record::verdict::{Case, Diagnosis, Facts};
    use tpslab_record::{GeneratorReport, NotVerified};

    fn run(loss: f64, p99_ms: u64) -> RunRecord {
        let mut g = GeneratorReport {
            window_loss_pct: Some(loss),
            ..Default::default()
        };
        g.latency_intended.count = 1000;
        g.latency_intended.p99_ns = p99_ms * 1_000_000;
        RunRecord {
            generator: Some(g),
            ..Default::default()
        }
    }

    fn record(after: Option<RunRecord>, applied: &[&str]) -> DiagnoseRecord {
        DiagnoseRecord {
            interrupted: false,
            scenario: "UDP server at 127.0.0.1:9533".into(),
            probe: TruesizeProbe::default(),
            facts: Facts::default(),
            diagnosis: Diagnosis {
                case: Case::SocketBufferBursts,
                layer: "the server socket's receive buffer (bursts)".into(),
                headline: "Datagrams die at the server socket's receive buffer during bursts."
                    .into(),
                evidence: vec![],
                recommendations: vec![],
                buffer: None,
                buffer_notes: vec![],
                fix: None,
                explain_notes: vec![],
            },
            before: run(70.8, 38),
            applied: applied.iter().map(|a| a.to_string()).collect(),
            after,
            restored: vec![],
            notes: vec![],
            not_verified: None,
        }
    }

    fn text(r: &DiagnoseRecord) -> String {
        let mut out = vec![];
        print_diagnosis(&mut out, r, false).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_verifications_latency_change_is_always_shown() {
        // The issue's --server-cmd verification: rmem_default applied, p99 38 -> 176 ms.
        let r = record(
            Some(run(0.0, 176)),
            &[
                "sysctl net.core.rmem_default=8290304 (host-wide; restored afterwards)",
                "the server started again after the change (--server-cmd)",
            ],
        );
        let t = text(&r);
        assert!(
            t.contains("p99 RTT rose: 38.00 ms before, 176.00 ms after (x4.63): datagrams that were dropped before now wait in the larger queue"),
            "{t}"
        );
        // Fell, with no queue story; and unchanged.
        let t = text(&record(Some(run(0.0, 20)), &["server --threads 4"]));
        assert!(
            t.contains("p99 RTT fell: 38.00 ms before, 20.00 ms after (x0.53)\n"),
            "{t}"
        );
        let t = text(&record(Some(run(0.0, 38)), &["server --batch 64"]));
        assert!(
            t.contains("p99 RTT unchanged: 38.00 ms before, 38.00 ms after\n"),
            "{t}"
        );
        // Rose without a bigger queue: the figures, no borrowed explanation.
        let t = text(&record(Some(run(0.0, 50)), &["server --threads 4"]));
        assert!(
            t.contains("p99 RTT rose: 38.00 ms before, 50.00 ms after (x1.32)\n"),
            "{t}"
        );
    }

    #[test]
    fn nothing_verified_is_said_with_what_to_run() {
        let mut r = record(None, &[]);
        r.not_verified = Some(NotVerified {
            why: "tpslab did not start this server and cannot restart it, and net.core.rmem_default=4608000 reaches only sockets created after the change: nothing was applied, nothing was verified".into(),
            run: Some("tpslab diagnose udp --server-cmd 'python3 /tmp/echo.py 127.0.0.1 {port}' --verify".into()),
            run_note: Some("the command is PID 7's".into()),
        });
        let t = text(&r);
        let at = t
            .find("Verification: NOTHING VERIFIED: tpslab did not start this server")
            .unwrap_or_else(|| panic!("{t}"));
        assert!(
            t[at..].contains("\n  to verify, run:\n    tpslab diagnose udp --server-cmd 'python3 /tmp/echo.py 127.0.0.1 {port}' --verify\n  (the command is PID 7's)\n"),
            "{t}"
        );
        assert!(!t.contains("Verification: the load again"), "{t}");
        // Verified, or not asked: no such line.
        assert!(!text(&record(None, &[])).contains("NOTHING VERIFIED"));
    }
}
