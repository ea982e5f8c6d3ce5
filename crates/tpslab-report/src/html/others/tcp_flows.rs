//! What a tcp record shows in HTML: per run (or watched flow) throughput, RTT, windows and
//! in flight over time, shaded by the limit that held each interval.

use super::super::plot::{Band, Chart, Line, PALETTE};
use super::super::{Page, Section, Verdict};
use super::figure;
use tpslab_analysis::tcp::classify;
use tpslab_record::tcp::{Limit, TcpSample};
use tpslab_record::TcpRecord;

const LIMIT_COLOURS: [(Limit, usize); 4] = [
    (Limit::ReceiveWindow, 1),
    (Limit::SendBuffer, 4),
    (Limit::CongestionWindow, 0),
    (Limit::Application, 3),
];

fn bands(samples: &[TcpSample], sndbuf: Option<u64>) -> Vec<Band> {
    let t0 = samples.first().map_or(0, |s| s.t_ns);
    samples
        .windows(2)
        .map(|w| {
            let l = classify(&w[0], &w[1], sndbuf);
            let c = LIMIT_COLOURS.iter().find(|x| x.0 == l).map_or(6, |x| x.1);
            Band {
                x0: (w[0].t_ns - t0) as f64 / 1e9,
                x1: (w[1].t_ns - t0) as f64 / 1e9,
                name: format!("held by the {}", l.name()),
                colour: PALETTE[c],
            }
        })
        .collect()
}

/// The charts of one flow's TCP_INFO samples, each interval shaded by the limit that
/// held it.
fn flow_charts(tag: &str, samples: &[TcpSample], sndbuf: Option<u64>) -> Vec<Chart> {
    let t0 = samples.first().map_or(0, |s| s.t_ns);
    let t = |s: &TcpSample| (s.t_ns - t0) as f64 / 1e9;
    // One TCP_INFO field over time.
    let over_time = |f: fn(&TcpSample) -> f64| -> Vec<(f64, f64)> {
        samples.iter().map(|s| (t(s), f(s))).collect()
    };
    let shade = bands(samples, sndbuf);
    let mut thr = Chart::new(
        &format!("{tag}throughput"),
        "Throughput",
        "time, s",
        "Mbit/s",
    );
    thr.lines.push(Line::new(
        "goodput (acknowledged bytes)",
        "TCP_INFO tcpi_bytes_acked, delta per interval",
        samples
            .windows(2)
            .map(|w| {
                let dt = (w[1].t_ns.saturating_sub(w[0].t_ns) as f64 / 1e9).max(1e-9);
                (
                    t(&w[1]),
                    w[1].bytes_acked.saturating_sub(w[0].bytes_acked) as f64 * 8.0 / dt / 1e6,
                )
            })
            .collect(),
        PALETTE[0],
    ));
    let mut rtt = Chart::new(&format!("{tag}rtt"), "Round-trip time", "time, s", "ms");
    rtt.y_fmt = |v| format!("{v:.2}");
    rtt.lines.push(Line::new(
        "smoothed RTT",
        "TCP_INFO tcpi_rtt",
        over_time(|s| s.rtt_us as f64 / 1e3),
        PALETTE[0],
    ));
    rtt.lines.push(
        Line::new(
            "minimum RTT",
            "TCP_INFO tcpi_min_rtt",
            over_time(|s| s.min_rtt_us as f64 / 1e3),
            PALETTE[2],
        )
        .dashed(),
    );
    let mut win = Chart::new(
        &format!("{tag}windows"),
        "Windows and bytes in flight",
        "time, s",
        "bytes",
    );
    win.lines.push(Line::new(
        "congestion window",
        "TCP_INFO tcpi_snd_cwnd x tcpi_snd_mss",
        over_time(|s| s.cwnd_segs as f64 * s.mss as f64),
        PALETTE[0],
    ));
    win.lines.push(Line::new(
        "peer's receive window",
        "TCP_INFO tcpi_snd_wnd",
        over_time(|s| s.peer_window_bytes as f64),
        PALETTE[1],
    ));
    win.lines.push(Line::new(
        "bytes in flight",
        "TCP_INFO (tcpi_unacked - sacked - lost + retrans) x mss",
        over_time(|s| s.in_flight_bytes as f64),
        PALETTE[2],
    ));
    let mut out = vec![thr, rtt, win];
    for c in &mut out {
        c.bands = shade.clone();
    }
    out.retain(Chart::has_data);
    out
}

/// tcp: per run (or watched flow) throughput, RTT, windows and in flight over time,
/// shaded by the limit that held each interval; two runs side by side.
pub(in crate::html) fn tcp(p: &mut Page, t: &TcpRecord) -> Result<(), String> {
    let verdicts: Vec<String> = t
        .runs
        .iter()
        .filter_map(|r| r.verdict.clone())
        .chain(t.watched.iter().filter_map(|w| w.verdict.clone()))
        .chain(tpslab_analysis::tcp::app_wait_finding(t))
        .collect();
    if let Some((first, rest)) = verdicts.split_first() {
        p.verdict = Some(Verdict {
            label: "VERDICT".into(),
            headline: first.clone(),
            evidence: rest
                .iter()
                .map(|v| super::super::Evidence {
                    text: v.clone(),
                    source: String::new(),
                })
                .collect(),
            ..Default::default()
        });
    }
    let mut flows: Vec<(String, &[TcpSample], Option<u64>)> = t
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                format!("run {}", i + 1),
                r.flow.samples.as_slice(),
                Some(r.flow.sndbuf_granted),
            )
        })
        .collect();
    flows.extend(t.watched.iter().map(|w| {
        (
            format!("{} -> {}", w.flow.local, w.flow.remote),
            w.flow.samples.as_slice(),
            Some(w.flow.sndbuf),
        )
    }));
    let cols = if flows.len() == 2 { 2 } else { 1 };
    let mut s = Section::new("The flows over time (TCP_INFO)");
    s.columns = cols;
    let charts: Vec<Vec<Chart>> = flows
        .iter()
        .enumerate()
        .map(|(i, (name, samples, sndbuf))| {
            let mut cs = flow_charts(&format!("f{i}-"), samples, *sndbuf);
            for c in &mut cs {
                c.title = format!("{name}: {}", c.title);
            }
            cs
        })
        .collect();
    if cols == 2 {
        // Interleaved, so each row compares the same chart, on shared y axes.
        let kind = |c: &Chart| {
            c.id.split_once('-')
                .map_or(String::new(), |x| x.1.to_string())
        };
        for a in &charts[0] {
            let Some(b) = charts[1].iter().find(|b| kind(b) == kind(a)) else {
                s.items.push(figure(a));
                continue;
            };
            let y1 = a.extents().1 .1.max(b.extents().1 .1);
            for c in [a, b] {
                let mut c = c.clone();
                c.y_range = Some((0.0, y1));
                s.items.push(figure(&c));
            }
        }
    } else {
        s.items.extend(charts.iter().flatten().map(figure));
    }
    if !s.items.is_empty() {
        p.sections.push(s);
    }
    Ok(())
}
