//! Two parts of the HTTP view ([`super::http_draw`]): the progress gauge under the status
//! line (elapsed of planned, requests done of planned) and the latency histogram since the
//! start (the stream's log-spaced bins, merged two by two until they fit the panel).

use super::draw::si;
use super::http::HttpLiveState;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;
use tpslab_record::http_series::HttpSeries;

/// The progress bar's colour.
const DONE: Color = Color::Green;
/// The histogram's bars' colour.
const BARS: Color = Color::Cyan;

/// The run's progress in one line: the larger of its shares (time elapsed of planned,
/// requests done of planned) in per cent and as a bar, then each figure.
pub(super) fn progress_gauge(frame: &mut Frame, area: Rect, st: &HttpLiveState) {
    let h = &st.header;
    let t = st.elapsed_s();
    let done = st.requests_done();
    let by_time = h.planned_s.filter(|p| *p > 0.0).map(|p| t / p);
    let by_count = h
        .planned_requests
        .filter(|n| *n > 0)
        .map(|n| done as f64 / n as f64);
    let share = match (by_time, by_count) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let mut words = vec![match h.planned_s {
        Some(p) => format!("{t:.1} s of {p:.1} s"),
        None => format!("{t:.1} s"),
    }];
    words.push(match h.planned_requests {
        Some(n) => format!("{} of {} requests done", si(done as f64), si(n as f64)),
        None => format!("{} requests done", si(done as f64)),
    });
    if by_time.is_some_and(|s| s > 1.0) {
        words.push("the plan ended: the last replies".into());
    }
    let label = match share {
        Some(s) => format!(" {:>3.0} % ", (s.min(1.0) * 100.0).floor()),
        None => " ".to_string(),
    };
    let text = format!("{}  ", words.join(", "));
    let mut spans = vec![
        Span::styled(label.clone(), Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(text.clone()),
    ];
    let used = label.chars().count() + text.chars().count();
    let bar_w = (area.width as usize).saturating_sub(used + 1);
    if let (Some(s), true) = (share, bar_w >= 4) {
        let filled = ((s.min(1.0) * bar_w as f64).round() as usize).min(bar_w);
        spans.push(Span::styled("█".repeat(filled), Style::default().fg(DONE)));
        spans.push(Span::styled(
            "░".repeat(bar_w - filled),
            Style::default().add_modifier(Modifier::DIM),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// A bin's upper bound, ns, in 3 figures or so: `1.19us`, `42.0us`, `168us`, `1.41ms`,
/// `2.00s`; above the last bound `>100s`.
fn bound(ns: Option<u64>) -> String {
    let Some(ns) = ns else {
        return ">100s".into();
    };
    let (v, unit) = match ns {
        0..=999_999 => (ns as f64 / 1e3, "us"),
        1_000_000..=999_999_999 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    if v < 10.0 {
        format!("{v:.2}{unit}")
    } else if v < 100.0 {
        format!("{v:.1}{unit}")
    } else {
        format!("{v:.0}{unit}")
    }
}

/// The histogram's rows: the bins from the first holding replies to the last, merged 2, 4,
/// 8... at a time (aligned, so a row's bounds stay the bins') until at most `rows` remain;
/// each (its upper bound, ns, None above the last bound; its replies).
pub(super) fn histogram_rows(hist: &[u64], rows: usize) -> Vec<(Option<u64>, u64)> {
    let (Some(lo), Some(hi)) = (
        hist.iter().position(|&n| n > 0),
        hist.iter().rposition(|&n| n > 0),
    ) else {
        return vec![];
    };
    let bounds = HttpSeries::bin_bounds_ns();
    let mut g = 1;
    while hi / g - lo / g + 1 > rows.max(1) {
        g *= 2;
    }
    (lo / g..=hi / g)
        .map(|k| {
            let end = ((k + 1) * g).min(hist.len());
            let n = hist[k * g..end].iter().sum();
            (bounds.get(end - 1).copied(), n)
        })
        .collect()
}

/// The latency since the start as a histogram on its side: a row per bin (or bins merged),
/// its upper bound, a bar as long as its share of the fullest row, its replies.
pub(super) fn histogram_panel(frame: &mut Frame, area: Rect, st: &HttpLiveState) {
    let n: u64 = st.histogram.iter().sum();
    let block = Block::bordered().title(match n {
        0 => " latency histogram ".to_string(),
        n => format!(" latency histogram: {} replies ", si(n as f64)),
    });
    if n == 0 {
        let why = if let Some(w) = &st.header.no_latency {
            w.clone()
        } else if st.total_status.total() > 0 {
            "no histogram in this stream (made before tpslab wrote one)".to_string()
        } else {
            "no reply yet".to_string()
        };
        let p = Paragraph::new(why).block(block).wrap(Wrap { trim: true });
        frame.render_widget(p, area);
        return;
    }
    let inner = block.inner(area);
    let rows = histogram_rows(&st.histogram, inner.height as usize);
    let most = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1);
    // `≤1.41ms ███▌ 1.23k `: the bound in 8 columns, the count in 6, a blank.
    let bar_w = (inner.width as usize)
        .saturating_sub(8 + 1 + 1 + 6 + 1)
        .max(1);
    let lines: Vec<Line> = rows
        .iter()
        .map(|&(b, count)| {
            let label = match b {
                Some(_) => format!("≤{}", bound(b)),
                None => bound(b),
            };
            Line::from(vec![
                Span::raw(format!("{label:>8} ")),
                Span::styled(
                    format!("{:<bar_w$}", bar(count, most, bar_w)),
                    Style::default().fg(BARS),
                ),
                Span::raw(format!(" {:>6}", si(count as f64))),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// A bar `count / most` of `width` columns, in eighths of a column; at least one eighth
/// for a row holding any reply.
fn bar(count: u64, most: u64, width: usize) -> String {
    const PARTS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    let eighths = ((count as f64 / most as f64) * (width * 8) as f64).round() as usize;
    let eighths = eighths.max(usize::from(count > 0)).min(width * 8);
    format!("{}{}", "█".repeat(eighths / 8), PARTS[eighths % 8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_merge_aligned_bins_until_they_fit() {
        let len = HttpSeries::bin_bounds_ns().len() + 1;
        let mut h = vec![0u64; len];
        // 1 us (bin 0), 2 us (bin 4), 4 us (bin 8): 9 bins from the first to the last.
        (h[0], h[4], h[8]) = (1, 2, 3);
        assert_eq!(histogram_rows(&h, 9).len(), 9);
        // Four at a time: 1..1.68 us, 2..3.36 us, 4..6.73 us, each a doubling.
        let r = histogram_rows(&h, 3);
        let b = HttpSeries::bin_bounds_ns();
        assert_eq!(r, vec![(Some(b[3]), 1), (Some(b[7]), 2), (Some(b[11]), 3)]);
        // Above the last bound: no bound of its own.
        h[len - 1] = 5;
        let r = histogram_rows(&h, 200);
        assert_eq!(r.last(), Some(&(None, 5)));
        assert_eq!(r.iter().map(|r| r.1).sum::<u64>(), 11);
        assert!(histogram_rows(&vec![0; len], 5).is_empty());
    }

    #[test]
    fn bounds_and_bars_read_in_a_few_columns() {
        assert_eq!(bound(Some(1_189)), "1.19us");
        assert_eq!(bound(Some(168_179)), "168us");
        assert_eq!(bound(Some(1_414_214)), "1.41ms");
        assert_eq!(bound(Some(2_000_000_000)), "2.00s");
        assert_eq!(bound(None), ">100s");
        assert_eq!(bar(10, 10, 4), "████");
        assert_eq!(bar(5, 10, 4), "██");
        assert_eq!(bar(1, 1000, 4), "▏");
        assert_eq!(bar(0, 10, 4), "");
    }
}
