//! The HTML report's plots: line charts drawn by plotters into SVG strings (no font is
//! read or embedded: text is left to the browser's sans-serif), each with its legend kept
//! apart so the page can name every series' source counter beside its colour.

use plotters::prelude::*;
use serde::Serialize;

/// Series colours, in order (a colour-blind-safe palette: Okabe and Ito).
pub(crate) const PALETTE: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xb2),
    RGBColor(0xd5, 0x5e, 0x00),
    RGBColor(0x00, 0x9e, 0x73),
    RGBColor(0xcc, 0x79, 0xa7),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0x56, 0xb4, 0xe9),
    RGBColor(0x00, 0x00, 0x00),
];

/// `#rrggbb` of a colour.
pub(crate) fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// One plotted series.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// What it shows, as the legend says it ("offered pps").
    pub name: String,
    /// Where its figures come from (the counter and how it was turned into this series).
    pub source: String,
    /// (x, y) points; non-finite ones are left out.
    pub points: Vec<(f64, f64)>,
    pub colour: RGBColor,
    /// Dashed: a limit, a fit or a plan rather than a measurement.
    pub dashed: bool,
    /// A dot at every point (few points: steps, cells).
    pub markers: bool,
    /// Named in the legend (false for the second and later whiskers of one kind).
    pub in_legend: bool,
    /// Points joined by a line (false: dots only, for categories such as sweep cells).
    pub joined: bool,
}

impl Line {
    pub(crate) fn new(name: &str, source: &str, points: Vec<(f64, f64)>, colour: RGBColor) -> Line {
        Line {
            name: name.into(),
            source: source.into(),
            points: points
                .into_iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .collect(),
            colour,
            dashed: false,
            markers: false,
            in_legend: true,
            joined: true,
        }
    }

    pub(crate) fn dashed(mut self) -> Line {
        self.dashed = true;
        self
    }

    pub(crate) fn markers(mut self) -> Line {
        self.markers = true;
        self
    }

    /// Dots only, not joined.
    pub(crate) fn dots(mut self) -> Line {
        (self.markers, self.joined) = (true, false);
        self
    }
}

/// A shaded span of x (which limit held an interval), named in the legend.
#[derive(Debug, Clone)]
pub(crate) struct Band {
    pub x0: f64,
    pub x1: f64,
    pub name: String,
    pub colour: RGBColor,
}

/// The x axis: linear, or percentiles (HdrHistogram's plot: x = -log10(1 - q), so 90 %,
/// 99 %, 99.9 % ... are evenly spaced).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum XScale {
    Linear,
    Percentile,
}

/// Where the maximum (q = 1) sits on a percentile axis: one decade past 99.999 %.
pub(crate) const PERCENTILE_MAX_X: f64 = 6.0;

/// A quantile as a percentile-axis position.
pub(crate) fn percentile_x(q: f64) -> f64 {
    (-(1.0 - q).max(1e-6).log10()).clamp(0.0, PERCENTILE_MAX_X)
}

fn percentile_label(x: f64) -> String {
    if x >= PERCENTILE_MAX_X - 1e-9 {
        return "max".into();
    }
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    let s = format!("{p:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// A chart to draw.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    /// Short id, unique in the page (`data-plot`).
    pub id: String,
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub x_scale: XScale,
    pub lines: Vec<Line>,
    pub bands: Vec<Band>,
    /// Vertical marks (x, label): the knee.
    pub marks: Vec<(f64, String)>,
    /// Fixed axis ranges (before/after plots share them); None: from the data.
    pub x_range: Option<(f64, f64)>,
    pub y_range: Option<(f64, f64)>,
    /// Formats x and y tick labels.
    pub x_fmt: fn(f64) -> String,
    pub y_fmt: fn(f64) -> String,
    /// Side by side with another run's chart of the same id, the y axis is shared (false:
    /// each its own, when one run's scale would flatten the other's line).
    pub share_y: bool,
}

impl Chart {
    pub(crate) fn new(id: &str, title: &str, x_desc: &str, y_desc: &str) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x_desc: x_desc.into(),
            y_desc: y_desc.into(),
            x_scale: XScale::Linear,
            lines: vec![],
            bands: vec![],
            marks: vec![],
            x_range: None,
            y_range: None,
            x_fmt: si,
            y_fmt: si,
            share_y: true,
        }
    }

    /// Whether there is anything to draw (a series of at least two points, or one
    /// point with markers).
    pub(crate) fn has_data(&self) -> bool {
        self.lines
            .iter()
            .any(|l| l.points.len() >= 2 || (l.markers && !l.points.is_empty()))
    }

    /// The data's x and y extents (y from 0 unless the data goes below).
    pub(crate) fn extents(&self) -> ((f64, f64), (f64, f64)) {
        let pts = self.lines.iter().flat_map(|l| &l.points);
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0f64, f64::MIN);
        for &(x, y) in pts {
            (x0, x1) = (x0.min(x), x1.max(x));
            (y0, y1) = (y0.min(y), y1.max(y));
        }
        for b in &self.bands {
            (x0, x1) = (x0.min(b.x0), x1.max(b.x1));
        }
        if x0 > x1 {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        ((x0, x1), (y0, y1 * 1.08))
    }
}

/// A legend entry.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LegendItem {
    pub name: String,
    pub source: String,
    pub colour: String,
    pub dashed: bool,
    /// A shaded band rather than a line.
    pub band: bool,
}

/// A drawn chart: its SVG and its legend.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Figure {
    pub id: String,
    pub title: String,
    pub svg: String,
    pub legend: Vec<LegendItem>,
    /// Series drawn (each one a polyline in the SVG): the page's self-check counts them.
    pub series: usize,
}

/// Numbers for axes: 1.2k, 3.4M, 0.5.
pub(crate) fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A chart's legend: its lines with points (those shown in the legend), each band's name
/// once, and its marks.
fn legend(c: &Chart) -> Vec<LegendItem> {
    let mut legend: Vec<LegendItem> = c
        .lines
        .iter()
        .filter(|l| l.in_legend && !l.points.is_empty())
        .map(|l| LegendItem {
            name: l.name.clone(),
            source: l.source.clone(),
            colour: hex(l.colour),
            dashed: l.dashed,
            band: false,
        })
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for b in &c.bands {
        if seen.insert(b.name.clone()) {
            legend.push(LegendItem {
                name: b.name.clone(),
                source: "shaded: the limit that held the interval".into(),
                colour: hex(b.colour),
                dashed: false,
                band: true,
            });
        }
    }
    for (_, label) in &c.marks {
        legend.push(LegendItem {
            name: label.clone(),
            source: "marked".into(),
            colour: "#000000".into(),
            dashed: true,
            band: false,
        });
    }
    legend
}

/// Draws a chart (plotters' SVG backend) and its legend.
pub(crate) fn draw(c: &Chart) -> Result<Figure, String> {
    let mut svg = String::new();
    let ((dx0, dx1), (dy0, dy1)) = c.extents();
    let (x0, x1) = c.x_range.unwrap_or((dx0, dx1));
    let (y0, y1) = c.y_range.unwrap_or((dy0, dy1));
    let mut series = 0;
    {
        let root = SVGBackend::with_string(&mut svg, (640, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(38)
            .y_label_area_size(56)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| e.to_string())?;
        let (scale, xf) = (c.x_scale, c.x_fmt);
        let x_fmt = move |x: &f64| match scale {
            XScale::Linear => xf(*x),
            XScale::Percentile => percentile_label(*x),
        };
        let y_fmt = c.y_fmt;
        let y_fmt = move |y: &f64| y_fmt(*y);
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(c.x_desc.as_str())
            .y_desc(c.y_desc.as_str())
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .max_light_lines(0)
            .bold_line_style(RGBColor(0xe4, 0xe4, 0xe4))
            .label_style(("sans-serif", 13));
        if scale == XScale::Percentile {
            mesh.x_labels(PERCENTILE_MAX_X as usize + 1);
        }
        mesh.draw().map_err(|e| e.to_string())?;
        for b in &c.bands {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(b.x0.max(x0), y0), (b.x1.min(x1), y1)],
                    b.colour.mix(0.16).filled(),
                )))
                .map_err(|e| e.to_string())?;
        }
        for l in &c.lines {
            let pts: Vec<(f64, f64)> = l
                .points
                .iter()
                .map(|&(x, y)| (x, y.clamp(y0, y1)))
                .collect();
            if pts.len() >= 2 && l.joined {
                series += 1;
                if l.dashed {
                    chart
                        .draw_series(DashedLineSeries::new(
                            pts.clone(),
                            6,
                            4,
                            l.colour.stroke_width(2),
                        ))
                        .map_err(|e| e.to_string())?;
                } else {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), l.colour.stroke_width(2)))
                        .map_err(|e| e.to_string())?;
                }
            }
            if l.markers {
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, l.colour.filled())))
                    .map_err(|e| e.to_string())?;
            }
        }
        for (x, _) in &c.marks {
            chart
                .draw_series(DashedLineSeries::new(
                    [(*x, y0), (*x, y1)],
                    3,
                    3,
                    BLACK.into(),
                ))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    let legend = legend(c);
    // The XML declaration and fixed size go: the SVG sits inline and scales with its box.
    let svg = svg
        .trim()
        .replacen(r#"<svg width="640" height="300" "#, r#"<svg "#, 1);
    Ok(Figure {
        id: c.id.clone(),
        title: c.title.clone(),
        svg,
        legend,
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_axis_spaces_nines_evenly_and_names_them() {
        assert_eq!(percentile_x(0.0), 0.0);
        assert!((percentile_x(0.9) - 1.0).abs() < 1e-12);
        assert!((percentile_x(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(percentile_x(1.0), PERCENTILE_MAX_X);
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(4.0), "99.99%");
        assert_eq!(percentile_label(PERCENTILE_MAX_X), "max");
    }

    #[test]
    fn a_chart_draws_each_series_and_keeps_sources_in_its_legend() {
        let mut c = Chart::new("t", "test", "s", "pps");
        c.lines.push(Line::new(
            "offered pps",
            "generator count",
            vec![(0.0, 1.0), (1.0, 2.0), (2.0, f64::NAN)],
            PALETTE[0],
        ));
        c.lines.push(
            Line::new(
                "limit",
                "sock_diag",
                vec![(0.0, 3.0), (2.0, 3.0)],
                PALETTE[1],
            )
            .dashed(),
        );
        let f = draw(&c).unwrap();
        assert_eq!(f.series, 2);
        // Inline and scalable: a viewBox, no fixed size.
        assert!(
            f.svg.starts_with("<svg viewBox=\"0 0 640 300\""),
            "{}",
            &f.svg[..60]
        );
        // The solid line is one polyline; the dashed one at least one more.
        assert!(f.svg.matches("<polyline").count() >= 2, "{}", f.svg);
        assert_eq!(f.legend[0].source, "generator count");
        assert!(f.legend[1].dashed);
        // A NaN point is left out, not drawn at the origin.
        assert_eq!(c.lines[0].points.len(), 2);
    }

    #[test]
    fn empty_and_flat_data_still_give_an_axis() {
        let mut c = Chart::new("t", "test", "s", "pps");
        assert!(!c.has_data());
        c.lines.push(Line::new(
            "zero",
            "x",
            vec![(0.0, 0.0), (1.0, 0.0)],
            PALETTE[0],
        ));
        assert!(c.has_data());
        let ((x0, x1), (y0, y1)) = c.extents();
        assert!(x1 > x0 && y1 > y0);
        assert!(draw(&c).is_ok());
    }
}
