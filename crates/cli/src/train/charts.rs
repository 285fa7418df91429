//! PNG charts of a run, drawn with plotters from its metrics: loss, throughput and the
//! held-out metric against the step. Text is set in DejaVu Sans, embedded (see
//! `assets/DejaVuSans-LICENSE`), so that no system font is needed.

use super::metrics::Record;
use crate::{Error, Result};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

pub(crate) struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub color: RGBColor,
}

/// Draws `loss.png`, `throughput.png` and `eval.png` (when there were evaluations) into
/// `dir`; returns their paths.
pub fn draw(dir: &Path, records: &[Record], throughput_unit: &str) -> Result<Vec<PathBuf>> {
    let mut train_loss = Vec::new();
    let mut throughput = Vec::new();
    let (mut eval_loss, mut accuracy, mut perplexity) = (Vec::new(), Vec::new(), Vec::new());
    for r in records {
        match r {
            Record::Step {
                step,
                loss,
                throughput: t,
                ..
            } => {
                train_loss.push((*step as f64, *loss));
                throughput.push((*step as f64, *t));
            }
            Record::Eval {
                step,
                loss,
                accuracy: a,
                perplexity: p,
                ..
            } => {
                eval_loss.push((*step as f64, *loss));
                if let Some(a) = a {
                    accuracy.push((*step as f64, 100.0 * a));
                }
                if let Some(p) = p {
                    perplexity.push((*step as f64, *p));
                }
            }
        }
    }
    let mut drawn = Vec::new();
    let mut chart = |file: &str, title: &str, y: &str, series: Vec<Series>| -> Result<()> {
        if series.iter().all(|s| s.points.is_empty()) {
            return Ok(());
        }
        let path = dir.join(file);
        line_chart(&path, title, "step", y, &series)?;
        drawn.push(path);
        Ok(())
    };
    chart(
        "loss.png",
        "Loss",
        "loss",
        vec![
            Series {
                name: "training batch".into(),
                points: train_loss,
                color: BLUE,
            },
            Series {
                name: "held out".into(),
                points: eval_loss,
                color: RED,
            },
        ],
    )?;
    chart(
        "throughput.png",
        "Throughput",
        throughput_unit,
        vec![Series {
            name: throughput_unit_name(throughput_unit).into(),
            points: throughput,
            color: RGBColor(0, 128, 0),
        }],
    )?;
    let (title, y, points) = if accuracy.is_empty() {
        ("Held-out perplexity", "perplexity", perplexity)
    } else {
        ("Held-out top-1 accuracy", "accuracy (%)", accuracy)
    };
    chart(
        "eval.png",
        title,
        y,
        vec![Series {
            name: "held out".into(),
            points,
            color: RED,
        }],
    )?;
    Ok(drawn)
}

fn throughput_unit_name(unit: &str) -> &'static str {
    if unit.starts_with("tokens") {
        "tokens/s"
    } else {
        "images/s"
    }
}

/// Draws `series` into the PNG at `path`.
pub(crate) fn line_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<()> {
    draw_png(path, title, x_desc, y_desc, series)
        .map_err(|e| Error::Chart(format!("{}: {e}", path.display())))
}

fn draw_png(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // The embedded font parses; if it ever did not, text would be missing, not the chart.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
    let all = || series.iter().flat_map(|s| s.points.iter().copied());
    let (x0, x1) = bounds(all().map(|p| p.0));
    let (y0, y1) = bounds(all().map(|p| p.1));
    let pad = (y1 - y0) * 0.05;
    let (width, height) = (800u32, 480u32);
    let mut pixels = vec![0u8; (width * height * 3) as usize];
    draw_into(
        &mut pixels,
        (width, height),
        title,
        (x_desc, y_desc),
        series,
        (x0, x1),
        (y0 - pad, y1 + pad),
    )?;
    image::RgbImage::from_raw(width, height, pixels)
        .ok_or("the chart buffer has the wrong size")?
        .save_with_format(path, image::ImageFormat::Png)?;
    Ok(())
}

fn draw_into(
    pixels: &mut [u8],
    size: (u32, u32),
    title: &str,
    (x_desc, y_desc): (&str, &str),
    series: &[Series],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let root = BitMapBackend::with_buffer(pixels, size).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0.max(0.0)..y1)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .draw()?;
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let color = s.color;
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        if s.points.len() < 50 {
            chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
    }
    if series.len() > 1 {
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// (min, max) of `values`, widened when they are all equal.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    match (lo.is_finite(), hi > lo) {
        (false, _) => (0.0, 1.0),
        (true, true) => (lo, hi),
        (true, false) => (lo - 0.5, hi + 0.5),
    }
}
