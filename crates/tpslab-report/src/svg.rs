//! The SVG format, drawn with plotters: a ramp's TPS and mean response time against users
//! with the fitted USL curve and the knee, as one self-contained file (no fonts or scripts
//! fetched or embedded).

use plotters::prelude::*;
use std::io::{self, Write};
use tpslab_record::ramp::RampRecord;
use tpslab_record::usl::UslFit;
use tpslab_record::{Body, RampReport, Record};

/// Draws a record: a ramp's plot; other kinds have none (an `Unsupported` error naming
/// the kind).
pub fn record(w: &mut dyn Write, rec: &Record) -> io::Result<()> {
    match &rec.body {
        Body::Ramp(r) => ramp(w, r),
        Body::UdpRun(_)
        | Body::Watch(_)
        | Body::Diagnose(_)
        | Body::Sweep(_)
        | Body::Serve(_)
        | Body::Tcp(_)
        | Body::ServeTcp(_)
        | Body::Doctor(_)
        | Body::Bdp(_)
        | Body::ProbeIdle(_)
        | Body::ProbePool(_)
        | Body::LoadHttp(_)
        | Body::Compare(_)
        | Body::Capacity(_) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "a {} record has no plot yet; svg is drawn for ramp records",
                rec.kind()
            ),
        )),
    }
}

/// TPS and mean response time against users, with the USL curve and the knee: a
/// self-contained SVG (plotters' SVG backend; text is left to the viewer's sans-serif,
/// no font is read or embedded).
pub fn ramp(w: &mut dyn Write, report: &RampReport) -> io::Result<()> {
    let svg = ramp_svg(
        &report.run,
        report.analysis.usl.as_ref(),
        report.analysis.knee_index,
    )
    .map_err(|e| io::Error::other(format!("drawing the ramp plot: {e}")))?;
    w.write_all(svg.as_bytes())
}

const TPS_COLOUR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const RESPONSE_COLOUR: RGBColor = RGBColor(0xd6, 0x27, 0x28);

fn ramp_svg(
    rec: &RampRecord,
    fit: Option<&UslFit>,
    knee: Option<usize>,
) -> Result<String, Box<dyn std::error::Error>> {
    let nmax = rec.steps.iter().map(|s| s.users).max().unwrap_or(1).max(2) as f64;
    let curve: Vec<(f64, f64)> = fit.map_or(vec![], |f| {
        (0..=100)
            .map(|i| {
                let n = 1.0 + (nmax - 1.0) * i as f64 / 100.0;
                (n, tpslab_analysis::usl::predict(f, n))
            })
            .filter(|p| p.1.is_finite())
            .collect()
    });
    let tps: Vec<(f64, f64)> = rec.steps.iter().map(|s| (s.users as f64, s.tps)).collect();
    let rt: Vec<(f64, f64)> = rec
        .steps
        .iter()
        .map(|s| (s.users as f64, s.response.mean_ns / 1e6))
        .collect();
    let finite_max = |v: &mut dyn Iterator<Item = f64>, floor: f64| {
        v.filter(|x| x.is_finite()).fold(floor, f64::max) * 1.1
    };
    let ymax = finite_max(&mut tps.iter().chain(&curve).map(|p| p.1), 1.0);
    let rmax = finite_max(&mut rt.iter().map(|p| p.1), 0.001);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (720, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "TPS and mean response time against users",
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .right_y_label_area_size(60)
            .build_cartesian_2d(0f64..nmax, 0f64..ymax)?
            .set_secondary_coord(0f64..nmax, 0f64..rmax);
        chart
            .configure_mesh()
            .x_desc("users (N)")
            .y_desc("TPS")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .max_light_lines(0)
            .bold_line_style(RGBColor(0xe0, 0xe0, 0xe0))
            .draw()?;
        chart
            .configure_secondary_axes()
            .y_desc("mean response, ms")
            .y_label_formatter(&|y| format!("{y:.1}"))
            .draw()?;
        if let Some(f) = fit {
            chart
                .draw_series(DashedLineSeries::new(curve, 5, 4, TPS_COLOUR.into()))?
                .label(format!(
                    "USL fit: sigma {:.3}, kappa {:.5}",
                    f.sigma, f.kappa
                ))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], TPS_COLOUR));
        }
        chart
            .draw_series(LineSeries::new(tps.clone(), TPS_COLOUR.stroke_width(2)))?
            .label("TPS (measured)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], TPS_COLOUR));
        chart.draw_series(tps.iter().map(|&p| Circle::new(p, 3, TPS_COLOUR.filled())))?;
        chart
            .draw_secondary_series(LineSeries::new(rt, RESPONSE_COLOUR.stroke_width(2)))?
            .label("mean response (measured)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RESPONSE_COLOUR));
        if let Some(&(n, t)) = knee.and_then(|k| tps.get(k)) {
            chart
                .draw_series(DashedLineSeries::new(
                    [(n, 0.0), (n, ymax)],
                    3,
                    3,
                    BLACK.into(),
                ))?
                .label(format!("knee: {n:.0} user(s), {t:.0} TPS"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    out.push('\n');
    Ok(out)
}
