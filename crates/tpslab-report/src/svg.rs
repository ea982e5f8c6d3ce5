//! The SVG format: a ramp's TPS and mean response time against users with the fitted
//! USL curve, as one self-contained file (no fonts or scripts fetched).

use std::io::{self, Write};
use tpslab_analysis::ramp::RampRecord;
use tpslab_analysis::record::{Body, RampReport, Record};
use tpslab_analysis::usl::UslFit;

/// Draws a record: a ramp's plot; other kinds have none (an `Unsupported` error naming
/// the kind).
pub fn record(w: &mut dyn Write, rec: &Record) -> io::Result<()> {
    match &rec.body {
        Body::Ramp(r) => ramp(w, r),
        _ => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "a {} record has no plot yet; svg is drawn for ramp records",
                rec.kind()
            ),
        )),
    }
}

/// TPS and mean response time against users, with the USL curve: a self-contained SVG.
pub fn ramp(w: &mut dyn Write, report: &RampReport) -> io::Result<()> {
    w.write_all(ramp_svg(&report.run, report.analysis.usl.as_ref()).as_bytes())
}

fn ramp_svg(rec: &RampRecord, fit: Option<&UslFit>) -> String {
    let (w, h, l, r, t, b) = (720.0, 420.0, 70.0, 70.0, 30.0, 50.0);
    let nmax = rec.steps.iter().map(|s| s.users).max().unwrap_or(1) as f64;
    let xmax = rec
        .steps
        .iter()
        .map(|s| s.tps)
        .fold(1.0, f64::max)
        .max(fit.map_or(0.0, |f| {
            (1..=nmax as usize)
                .map(|n| f.predict(n as f64))
                .fold(0.0, f64::max)
        }))
        * 1.1;
    let rmax = rec
        .steps
        .iter()
        .map(|s| s.response.mean_ns / 1e6)
        .fold(0.001, f64::max)
        * 1.1;
    let px = |n: f64| l + (w - l - r) * n / nmax;
    let py = |v: f64, max: f64| h - b - (h - t - b) * v / max;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    s += &format!(
        "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
        h - b,
        w - r,
        h - b
    );
    s += &format!(
        "<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" stroke=\"black\"/>\n",
        h - b
    );
    s += &format!(
        "<line x1=\"{}\" y1=\"{t}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
        w - r,
        w - r,
        h - b
    );
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#1f77b4\">{:.0}</text>\n",
            l - 5.0,
            py(xmax * f, xmax) + 4.0,
            xmax * f
        );
        s += &format!(
            "<text x=\"{}\" y=\"{}\" fill=\"#d62728\">{:.1}</text>\n",
            w - r + 5.0,
            py(rmax * f, rmax) + 4.0,
            rmax * f
        );
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:.0}</text>\n",
            px(nmax * f),
            h - b + 16.0,
            nmax * f
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">users (N)</text>\n",
        (l + w - r) / 2.0,
        h - 10.0
    );
    s += &format!(
        "<text x=\"10\" y=\"{}\" fill=\"#1f77b4\">TPS</text>\n",
        t - 10.0
    );
    s += &format!(
        "<text x=\"{}\" y=\"{}\" fill=\"#d62728\">mean response ms</text>\n",
        w - r - 40.0,
        t - 10.0
    );
    if let Some(f) = fit {
        let pts: Vec<String> = (0..=100)
            .map(|i| {
                let n = 1.0 + (nmax - 1.0) * i as f64 / 100.0;
                format!("{:.1},{:.1}", px(n), py(f.predict(n), xmax))
            })
            .collect();
        s += &format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-dasharray=\"5,4\"/>\n",
            pts.join(" ")
        );
        s += &format!(
            "<text x=\"{}\" y=\"{}\" fill=\"#1f77b4\">USL fit: sigma {:.3}, kappa {:.5}</text>\n",
            l + 10.0,
            t + 14.0,
            f.sigma,
            f.kappa
        );
    }
    let tps: Vec<String> = rec
        .steps
        .iter()
        .map(|x| format!("{:.1},{:.1}", px(x.users as f64), py(x.tps, xmax)))
        .collect();
    let rt: Vec<String> = rec
        .steps
        .iter()
        .map(|x| {
            format!(
                "{:.1},{:.1}",
                px(x.users as f64),
                py(x.response.mean_ns / 1e6, rmax)
            )
        })
        .collect();
    s += &format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n",
        tps.join(" ")
    );
    s += &format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>\n",
        rt.join(" ")
    );
    for p in &tps {
        let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
        s += &format!("<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"#1f77b4\"/>\n");
    }
    s += "</svg>\n";
    s
}
