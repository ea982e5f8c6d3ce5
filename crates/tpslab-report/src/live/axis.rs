//! The live charts' y axes and legends: an axis scaled to the window's steady values, not
//! to one interval's spike ([`Scale`]: spikes clipped to the top and marked), its labels
//! in one unit ([`y_axis`]), and a legend that names every series in the room a chart's
//! top border has ([`legend`]).

use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::Axis;
use std::cell::Cell;

thread_local! {
    /// The charts of this thread's frame are drawn for a terminal without colours
    /// ([`without_colours`]).
    static MONO: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (a frame's drawing) with its charts' series told apart without colours when
/// `mono` (`NO_COLOR`): each by a marker of its own ([`marker`]), shown in the legend
/// beside its name. The thread's setting before is restored after.
pub fn without_colours<T>(mono: bool, f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            MONO.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(MONO.with(|m| m.replace(mono)));
    f()
}

/// The legend's sample of each marker [`marker`] gives without colours, by the series'
/// place in its chart's legend: the first a braille line, then dots, then plus signs.
pub const MONO_GLYPHS: [&str; 3] = ["⠒", "•", "+"];

/// The marker of the series at `slot` in its chart's legend: braille in colour (the
/// colours tell them apart); without colours ([`without_colours`]) braille for the first,
/// a dot for the second, `+` for the third, so a series is known by its glyph.
pub fn marker(slot: usize) -> Marker {
    match (MONO.with(Cell::get), slot) {
        (false, _) | (true, 0) => Marker::Braille,
        (true, 1) => Marker::Dot,
        (true, _) => Marker::Custom('+'),
    }
}

/// A value more than this many times the window's 95th percentile is a spike: the axis
/// is not stretched to it.
pub const SPIKE_FACTOR: f64 = 2.0;

/// Headroom above the highest value shown, as a factor.
const HEADROOM: f64 = 1.1;

/// The y scale of a chart: its top, the highest value in the window, and how many
/// values are above the top (spikes, drawn clipped at it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// The axis's top, in the values' unit.
    pub top: f64,
    /// The highest value in the window.
    pub peak: f64,
    /// Values above `top`.
    pub clipped: usize,
}

impl Scale {
    /// The scale of `values` (every series of a chart over its window): the highest value
    /// at most [`SPIKE_FACTOR`] times the 95th percentile, plus 10 %; 1 with no value
    /// above 0.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Scale {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let Some(&peak) = v.last() else {
            return Scale {
                top: 1.0,
                peak: 0.0,
                clipped: 0,
            };
        };
        let p95 = v[((v.len() - 1) as f64 * 0.95).round() as usize];
        let steady = v
            .iter()
            .rev()
            .copied()
            .find(|&x| p95 <= 0.0 || x <= p95 * SPIKE_FACTOR)
            .unwrap_or(peak);
        let top = if steady > 0.0 {
            steady * HEADROOM
        } else if peak > 0.0 {
            peak * HEADROOM
        } else {
            1.0
        };
        Scale {
            top,
            peak,
            clipped: v.iter().filter(|&&x| x > top).count(),
        }
    }

    /// `points` with each y above the top drawn at the top.
    pub fn clip(&self, points: impl IntoIterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
        points
            .into_iter()
            .map(|(x, y)| (x, y.min(self.top)))
            .collect()
    }

    /// The mark of the spikes clipped (`▲ 3 clipped, peak 166.5k`), for the chart's bottom
    /// border; None when nothing was.
    pub fn mark(&self, unit: Unit) -> Option<Line<'static>> {
        (self.clipped > 0).then(|| {
            Line::from(Span::styled(
                format!(
                    " ▲ {} clipped, peak {} ",
                    self.clipped,
                    match unit {
                        Unit::Rate => super::draw::si(self.peak),
                        Unit::LatencyUs => super::draw::dur_us(self.peak),
                    }
                ),
                Style::default().add_modifier(Modifier::BOLD),
            ))
            .right_aligned()
        })
    }
}

/// What a chart's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A rate or a count (`k`, `M`, `G`).
    Rate,
    /// A latency in us (`us`, `ms`, `s`).
    LatencyUs,
}

impl Unit {
    /// `v` written in the unit `top` is written in (so every label of an axis has the
    /// same unit): `0.0k`, `15.0k`, `30.0k`; `0ms`, `21.3ms`, `42.6ms`.
    pub fn label(self, v: f64, top: f64) -> String {
        let (div, suffix) = match self {
            Unit::Rate if top >= 1e9 => (1e9, "G"),
            Unit::Rate if top >= 1e6 => (1e6, "M"),
            Unit::Rate if top >= 1e3 => (1e3, "k"),
            Unit::Rate => (1.0, ""),
            Unit::LatencyUs if top >= 1e6 => (1e6, "s"),
            Unit::LatencyUs if top >= 1e3 => (1e3, "ms"),
            Unit::LatencyUs => (1.0, "us"),
        };
        let t = top / div;
        let places = if t >= 100.0 || div == 1.0 && t >= 10.0 {
            0
        } else if t >= 10.0 {
            1
        } else {
            2
        };
        let s = format!("{:.*}", places, v / div);
        format!("{}{suffix}", if s == "-0" { "0" } else { &s })
    }
}

/// The y axis of `scale`: bounds [0, top], three labels (0, half, top) in one unit.
pub fn y_axis<'a>(scale: &Scale, unit: Unit) -> Axis<'a> {
    let top = scale.top;
    Axis::default().bounds([0.0, top]).labels(vec![
        unit.label(0.0, top),
        unit.label(top / 2.0, top),
        unit.label(top, top),
    ])
}

/// A chart's legend for a chart `width` columns wide: `prefix` then each series' name and
/// value in its colour on the top border, as many as fit there; the others on the bottom
/// border (left, beside a spike's mark on the right), by name alone where even that is
/// too narrow: every series keeps its name.
pub fn legend(
    prefix: &str,
    items: &[(&str, String, Color)],
    width: u16,
) -> (Line<'static>, Option<Line<'static>>) {
    let room = (width as usize).saturating_sub(2);
    let mono = MONO.with(Cell::get);
    let span = |k: usize, value: bool| {
        let (n, v, c) = &items[k];
        // Without colours, the series' glyph after its name.
        let n = match mono {
            true => format!("{n} {}", MONO_GLYPHS[k.min(MONO_GLYPHS.len() - 1)]),
            false => n.to_string(),
        };
        let text = if value {
            format!("{n} {v} ")
        } else {
            format!("{n} ")
        };
        Span::styled(text, Style::default().fg(*c))
    };
    let mut top = vec![Span::raw(prefix.to_string())];
    let mut used = prefix.chars().count();
    let mut k = 0;
    while k < items.len() {
        let s = span(k, true);
        if used + s.width() > room {
            break;
        }
        used += s.width();
        top.push(s);
        k += 1;
    }
    if k == items.len() {
        return (Line::from(top), None);
    }
    // The rest below, with their values where they fit (half the border: the spike's
    // mark may take the right half).
    let with_values: Vec<Span> = (k..items.len()).map(|i| span(i, true)).collect();
    let fits = with_values.iter().map(|s| s.width()).sum::<usize>() < room / 2;
    let mut bottom = vec![Span::raw(" ")];
    match fits {
        true => bottom.extend(with_values),
        false => bottom.extend((k..items.len()).map(|i| span(i, false))),
    }
    (Line::from(top), Some(Line::from(bottom)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spike_does_not_set_the_axis_and_is_counted() {
        // 20k pps steady for 99 intervals, one interval of 166.5k.
        let mut v = vec![20_000.0; 99];
        v.push(166_500.0);
        let s = Scale::of(v.iter().copied());
        assert!((s.top - 22_000.0).abs() < 1e-6, "{s:?}");
        assert_eq!((s.clipped, s.peak), (1, 166_500.0));
        assert_eq!(
            s.clip([(1.0, 166_500.0), (2.0, 20_000.0)]),
            [(1.0, 22_000.0), (2.0, 20_000.0)]
        );
        // Without a spike the top is the highest value plus 10 %, as before.
        let s = Scale::of([10.0, 30.0, 20.0]);
        assert!((s.top - 33.0).abs() < 1e-9 && s.clipped == 0, "{s:?}");
        assert_eq!(Scale::of([]).top, 1.0);
        assert_eq!(Scale::of([0.0, 0.0]).top, 1.0);
    }

    #[test]
    fn an_axis_has_one_unit() {
        let top = 42_600.0;
        let labels: Vec<String> = [0.0, top / 2.0, top]
            .iter()
            .map(|&v| Unit::LatencyUs.label(v, top))
            .collect();
        assert_eq!(labels, ["0.0ms", "21.3ms", "42.6ms"]);
        let labels: Vec<String> = [0.0, 15_000.0, 30_000.0]
            .iter()
            .map(|&v| Unit::Rate.label(v, 30_000.0))
            .collect();
        assert_eq!(labels, ["0.0k", "15.0k", "30.0k"]);
        assert_eq!(Unit::LatencyUs.label(450.0, 900.0), "450us");
        assert_eq!(Unit::Rate.label(1.5e6, 2.2e6), "1.50M");
    }

    #[test]
    fn the_legend_keeps_every_name_when_narrow() {
        let items = [
            ("intended", "1.20k".to_string(), Color::Cyan),
            ("achieved", "884".to_string(), Color::Green),
            ("answered", "221".to_string(), Color::Yellow),
        ];
        let text = |w| {
            let (top, bottom) = legend(" req/s: ", &items, w);
            (top.to_string(), bottom.map(|b| b.to_string()))
        };
        assert_eq!(
            text(80),
            (
                " req/s: intended 1.20k achieved 884 answered 221 ".into(),
                None
            )
        );
        assert_eq!(
            text(42),
            (
                " req/s: intended 1.20k achieved 884 ".into(),
                Some(" answered 221 ".into())
            )
        );
        assert_eq!(
            text(24),
            (
                " req/s: ".into(),
                Some(" intended achieved answered ".into())
            )
        );
    }
}
