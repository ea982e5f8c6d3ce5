//! The README's screenshot of `--live` (docs/live-view.png) against the tmux capture it was
//! made from (docs/live-view.ansi, kept by docs/transcripts/live-screenshot.sh), cell for
//! cell (issue 60): a picture whose font pushed a row (braille from a fallback font of
//! another width), spilled text out of its box or drew a ragged border is refused.
//!
//! The capture's cells come from the script that drew the page (`ansi_grid.py --cells`):
//! each one's character, and its colours, which tell its ink from its background (the
//! colours themselves are not compared). The grid is measured in the picture, not
//! assumed: the ink of every vertical border glyph against its column and of every
//! horizontal one against its row, fitted by least squares (a border glyph more than
//! 1.5 px off its line is a ragged edge; one with no ink of its colour in its cell is
//! missing). Then each cell is
//! read in its box (the pixels wholly inside it; for a character, one more above and
//! below): a character with ink must have pixels off its background there, a blank cell
//! none.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const COLS: usize = 120;
const ROWS: usize = 36;
/// Where to look for the border glyphs: the page's nominal grid (ansi_grid.py: a 4 px
/// margin, 14 px DejaVu Sans Mono, cells 1ch wide and 1.2em high), px.
const NOMINAL: (f64, f64, f64, f64) = (4.0, 4.0, 8.43, 16.8);
/// How far off its background a pixel is to count as ink (sum of the RGB differences).
const INK: u32 = 150;

#[derive(Clone)]
struct Cell {
    ch: char,
    fg: [u8; 3],
    bg: [u8; 3],
}

struct Picture {
    width: usize,
    height: usize,
    px: Vec<[u8; 3]>,
}

impl Picture {
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.px[y * self.width + x]
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn picture(path: &Path) -> Picture {
    let mut dec = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(path).expect("the screenshot"),
    ));
    // Any PNG (indexed, 16-bit, grey: an optimiser's output) as 8-bit samples.
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "{}", path.display());
    let n = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks(n)
        .map(|p| {
            if n >= 3 {
                [p[0], p[1], p[2]]
            } else {
                [p[0]; 3]
            }
        })
        .collect();
    Picture {
        width: info.width as usize,
        height: info.height as usize,
        px,
    }
}

fn rgb(v: &Value) -> [u8; 3] {
    let s = v.as_str().expect("#rrggbb");
    let h = |i: usize| u8::from_str_radix(&s[i..i + 2], 16).expect("hex");
    [h(1), h(3), h(5)]
}

/// The capture's cells as drawn, ROWS x COLS (blank past a line's end).
fn grid(ansi: &Path) -> Vec<Vec<Cell>> {
    let out = Command::new("python3")
        .arg(root().join("docs/transcripts/ansi_grid.py"))
        .arg("--cells")
        .arg(ansi)
        .env("PYTHONIOENCODING", "utf-8")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON cells");
    let blank = Cell {
        ch: ' ',
        fg: rgb(&v["fg"]),
        bg: rgb(&v["bg"]),
    };
    let mut rows: Vec<Vec<Cell>> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .take(ROWS)
        .map(|r| {
            let mut row: Vec<Cell> = r
                .as_array()
                .unwrap()
                .iter()
                .map(|c| Cell {
                    ch: c[0].as_str().unwrap().chars().next().unwrap_or(' '),
                    fg: rgb(&c[1]),
                    bg: rgb(&c[2]),
                })
                .collect();
            row.resize(COLS, blank.clone());
            row.truncate(COLS);
            row
        })
        .collect();
    rows.resize(ROWS, vec![blank; COLS]);
    rows
}

fn off(a: [u8; 3], b: [u8; 3]) -> u32 {
    a.iter().zip(b).map(|(&x, y)| x.abs_diff(y) as u32).sum()
}

fn blank(ch: char) -> bool {
    ch == ' ' || ch == '\u{2800}'
}

/// Pixels of the box [x0, x1) x [y0, y1) (clipped to the picture) far off `bg`.
fn inked(p: &Picture, (x0, x1, y0, y1): (f64, f64, f64, f64), bg: [u8; 3]) -> Vec<(usize, usize)> {
    let clip = |v: f64, max: usize| (v.max(0.0) as usize).min(max);
    let (x0, x1) = (clip(x0, p.width), clip(x1, p.width));
    let (y0, y1) = (clip(y0, p.height), clip(y1, p.height));
    let mut v = vec![];
    for y in y0..y1 {
        for x in x0..x1 {
            if off(p.at(x, y), bg) > INK {
                v.push((x, y));
            }
        }
    }
    v
}

/// The glyph's pixels in the box (clipped to the picture), each with its coverage 0..=1:
/// a pixel on the line from `bg` to `fg` (an antialiased edge of a thin line is a blend of
/// the two), at least a quarter of the way; a pixel of another colour (a neighbour's
/// chart dots) is not.
fn glyph(
    p: &Picture,
    (x0, x1, y0, y1): (f64, f64, f64, f64),
    fg: [u8; 3],
    bg: [u8; 3],
) -> Vec<(usize, usize, f64)> {
    let clip = |v: f64, max: usize| (v.max(0.0) as usize).min(max);
    let d: Vec<f64> = (0..3).map(|i| fg[i] as f64 - bg[i] as f64).collect();
    let dd: f64 = d.iter().map(|v| v * v).sum::<f64>().max(1.0);
    let mut v = vec![];
    for y in clip(y0, p.height)..clip(y1, p.height) {
        for x in clip(x0, p.width)..clip(x1, p.width) {
            let px = p.at(x, y);
            let e: Vec<f64> = (0..3).map(|i| px[i] as f64 - bg[i] as f64).collect();
            let t = (0..3).map(|i| e[i] * d[i]).sum::<f64>() / dd;
            let residual: f64 = (0..3).map(|i| (e[i] - t * d[i]).abs()).sum();
            if t >= 0.25 && residual < 60.0 {
                v.push((x, y, t.min(1.0)));
            }
        }
    }
    v
}

/// Least squares v = a + b*u.
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mu = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mv = points.iter().map(|p| p.1).sum::<f64>() / n;
    let suu: f64 = points.iter().map(|p| (p.0 - mu).powi(2)).sum();
    let b = points.iter().map(|p| (p.0 - mu) * (p.1 - mv)).sum::<f64>() / suu;
    (mv - b * mu, b)
}

/// Border glyphs of the capture allowed to show no ink of their colour in their cells.
const MISSING_BORDERS: usize = 2;
/// Cells allowed to disagree with the capture: in all, and in any one row.
const CELLS_OFF: usize = 4;
const CELLS_OFF_IN_A_ROW: usize = 1;

/// The picture against the capture: Ok((cells agreeing, cells compared)) when at most
/// [`MISSING_BORDERS`] border glyphs show no ink, none is off its fitted line by more than
/// 1.5 px, and at most [`CELLS_OFF`] cells disagree ([`CELLS_OFF_IN_A_ROW`] in one row);
/// else the problems.
fn compare(p: &Picture, g: &[Vec<Cell>]) -> Result<(usize, usize), Vec<String>> {
    let (x0, y0, w0, h0) = NOMINAL;
    // (column or row, ink centre, the other coordinate) of each border glyph; those
    // with no ink of their colour in their cell.
    let (mut vert, mut horiz, mut missing) = (vec![], vec![], vec![]);
    for (r, row) in g.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            let (cx, cy) = (x0 + c as f64 * w0, y0 + r as f64 * h0);
            let (vertical, axis_box) = match cell.ch {
                '│' | '┃' | '║' => (true, (cx, cx + w0, cy + 0.3 * h0, cy + 0.7 * h0)),
                '─' | '━' | '═' => (false, (cx + 0.3 * w0, cx + 0.7 * w0, cy, cy + h0)),
                _ => continue,
            };
            // The glyph's own pixels: near its colour (a neighbour's chart dots are not).
            let ink = glyph(p, axis_box, cell.fg, cell.bg);
            if ink.is_empty() {
                missing.push(format!("row {} column {}", r + 1, c + 1));
                continue;
            }
            // Pixel centres, weighted by coverage.
            let n: f64 = ink.iter().map(|&(_, _, t)| t).sum();
            if vertical {
                let m = ink
                    .iter()
                    .map(|&(x, _, t)| (x as f64 + 0.5) * t)
                    .sum::<f64>()
                    / n;
                vert.push((c as f64, m, r));
            } else {
                let m = ink
                    .iter()
                    .map(|&(_, y, t)| (y as f64 + 0.5) * t)
                    .sum::<f64>()
                    / n;
                horiz.push((r as f64, m, c));
            }
        }
    }
    let mut problems = vec![];
    if missing.len() > MISSING_BORDERS {
        problems.push(format!(
            "{} border glyphs of the capture have no ink of their colour in their cells: {}",
            missing.len(),
            missing
                .iter()
                .take(8)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if vert.len() < 10 || horiz.len() < 10 {
        problems.push(format!(
            "only {} vertical and {} horizontal border glyphs found where the capture has them: no grid to fit",
            vert.len(),
            horiz.len()
        ));
        return Err(problems);
    }
    let pts = |v: &[(f64, f64, usize)]| v.iter().map(|&(u, m, _)| (u, m)).collect::<Vec<_>>();
    let ((ax, w), (ay, h)) = (fit(&pts(&vert)), fit(&pts(&horiz)));
    eprintln!(
        "grid: x = {ax:.2} + {w:.3} c, y = {ay:.2} + {h:.3} r ({} and {} border glyphs)",
        vert.len(),
        horiz.len()
    );
    // Each glyph against its line: (its column or row, its ink, the other coordinate).
    for (glyphs, (a, b), across, along) in [
        (&vert, (ax, w), "row", "column"),
        (&horiz, (ay, h), "column", "row"),
    ] {
        for &(u, m, o) in glyphs {
            let d = m - (a + b * u);
            if d.abs() > 1.5 {
                problems.push(format!(
                    "{across} {}: the border in {along} {} is {d:+.1} px off its line",
                    o + 1,
                    u + 1.0
                ));
            }
        }
    }
    // A cell's box from the fit, its centre at (ax + w*c, ay + h*r): the pixels wholly
    // inside it (a braille dot of the right column sits a pixel from its edge).
    let (left, top) = (ax - w / 2.0, ay - h / 2.0);
    let (mut agree, mut total, mut bad) = (0, 0, vec![]);
    let mut worst_row = (0, 0);
    for (r, row) in g.iter().enumerate() {
        let mut off_here = 0;
        for (c, cell) in row.iter().enumerate() {
            if !blank(cell.ch) && off(cell.fg, cell.bg) <= INK {
                continue; // ink the colour of its background: nothing to see
            }
            let (bx, by) = (left + w * c as f64, top + h * r as f64);
            // A character's ink may reach a pixel past its box's whole pixels (`_` sits on
            // the line's last one): looked for a pixel further up and down; a blank
            // cell's box is the pixels wholly inside it.
            let grow = if blank(cell.ch) { 0.0 } else { 1.0 };
            let cell_box = (
                bx.ceil(),
                (bx + w).floor(),
                by.ceil() - grow,
                (by + h).floor() + grow,
            );
            let has_ink = !inked(p, cell_box, cell.bg).is_empty();
            total += 1;
            if has_ink != blank(cell.ch) {
                agree += 1;
                continue;
            }
            off_here += 1;
            if bad.len() < 8 {
                let what = if has_ink { "has ink" } else { "is drawn blank" };
                bad.push(format!(
                    "row {} column {} ({:?}) {what}",
                    r + 1,
                    c + 1,
                    cell.ch
                ));
            }
        }
        if off_here > worst_row.1 {
            worst_row = (r + 1, off_here);
        }
    }
    if total - agree > CELLS_OFF || worst_row.1 > CELLS_OFF_IN_A_ROW {
        problems.push(format!(
            "{} of {total} cells differ from the capture ({} in row {}): {}",
            total - agree,
            worst_row.1,
            worst_row.0,
            bad.join("; ")
        ));
    }
    if problems.is_empty() {
        Ok((agree, total))
    } else {
        Err(problems)
    }
}

#[test]
fn the_readmes_screenshot_shows_its_capture_cell_for_cell() {
    const T: &str = "screenshot::the_readmes_screenshot_shows_its_capture_cell_for_cell";
    if !common::need(T, "/usr/bin/python3") {
        return;
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.contains("(docs/live-view.png)"),
        "the README shows the screenshot"
    );
    let pic = picture(&root().join("docs/live-view.png"));
    let g = grid(&root().join("docs/live-view.ansi"));
    let (agree, total) = compare(&pic, &g).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    eprintln!("docs/live-view.png: {agree} of {total} cells as captured, borders straight");
    assert!(total > COLS * ROWS / 2, "{total} cells compared");

    // The check refuses what it exists to, each for what the cells or the borders show
    // (not for a grid it could not fit): the capture one column to the right of the
    // picture, one row down, and one row of the picture pushed by half a cell and by a
    // whole one (what a fallback font of another width did to the first screenshot).
    let right: Vec<Vec<Cell>> = g
        .iter()
        .map(|row| {
            let mut r = vec![row[0].clone()];
            r.extend(row[..COLS - 1].iter().cloned());
            r[0].ch = ' ';
            r
        })
        .collect();
    let mut down = vec![g[0].clone()];
    down.extend(g[..ROWS - 1].iter().cloned());
    for (what, shifted) in [("a column", &right), ("a row", &down)] {
        let p = compare(&pic, shifted).expect_err(&format!("a capture {what} off passed"));
        assert!(
            p.iter()
                .any(|l| l.contains("cells differ") || l.contains("have no ink")),
            "a capture {what} off: {p:?}"
        );
    }
    let row = (0..ROWS)
        .find(|&r| g[r].iter().filter(|c| c.ch == '│').count() >= 2)
        .expect("a row with borders");
    let (_, y0, _, h0) = NOMINAL;
    let (ya, yb) = (
        (y0 + row as f64 * h0) as usize,
        (y0 + (row + 1) as f64 * h0) as usize,
    );
    for push in [4, 8] {
        let mut pushed = Picture {
            width: pic.width,
            height: pic.height,
            px: pic.px.clone(),
        };
        for y in ya..yb {
            pushed.px[y * pic.width..(y + 1) * pic.width].rotate_right(push);
        }
        let p = compare(&pushed, &g).expect_err(&format!("a row pushed {push} px passed"));
        let here = [
            format!("row {}: the border", row + 1),
            format!("row {} column", row + 1),
            format!("in row {}", row + 1),
        ];
        assert!(
            p.iter()
                .any(|l| here.iter().any(|h| l.contains(h.as_str()))),
            "a row pushed {push} px, not named: {p:?}"
        );
    }
}
