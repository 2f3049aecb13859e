//! PNG plots of the evaluation's figures (plotters, drawn with a system
//! font: DejaVu Sans, which scripts/setup.sh installs).

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const SIZE: (u32, u32) = (900, 520);

/// plotters draws text only with a registered font; once per process.
fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = std::fs::read(FONT)
            .with_context(|| format!("reading {FONT} (run scripts/setup.sh: fonts-dejavu-core)"))
            .and_then(|bytes| {
                // plotters keeps fonts for the process's life.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                    .map_err(|_| anyhow!("{FONT} is not a font plotters can read"))
            });
    });
    result
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing a plot: {e}")
}

/// One line per series over labelled x positions (e.g. cache sizes); a
/// missing value breaks the line.
pub fn lines(
    path: &Path,
    title: &str,
    y_desc: &str,
    x_labels: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<()> {
    register_font()?;
    let top = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0.0f64, |a, b| a.max(*b));
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let n = x_labels.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3f64..(n as f64 - 0.7), 0f64..(top * 1.1).max(1e-9))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                x_labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    for (i, (name, values)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .filter_map(|(x, v)| v.map(|v| (x as f64, v)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// One bar per scheduler, with a line at `reference` (1.0: EEVDF).
pub fn bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    labels: &[String],
    values: &[Option<f64>],
    reference: Option<f64>,
) -> Result<()> {
    register_font()?;
    let top = values
        .iter()
        .flatten()
        .chain(reference.iter())
        .fold(0.0f64, |a, b| a.max(*b));
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let n = labels.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            // A range of n values has n + 1 segments: end one early.
            (0..n - 1).into_segmented(),
            0f64..(top * 1.15).max(1e-9),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .x_label_style(("sans-serif", 14))
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    let present: Vec<(usize, f64)> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, (*v)?)))
        .collect();
    chart
        .draw_series(present.iter().map(|&(i, v)| {
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), v),
                ],
                Palette99::pick(i).to_rgba().filled(),
            );
            bar.set_margin(0, 0, 18, 18);
            bar
        }))
        .map_err(err)?;
    chart
        .draw_series(present.iter().map(|&(i, v)| {
            Text::new(
                format!("{v:.2}"),
                (SegmentValue::CenterOf(i), v + top * 0.05),
                ("sans-serif", 15).into_font().color(&BLACK),
            )
        }))
        .map_err(err)?;
    if let Some(r) = reference {
        chart
            .draw_series(LineSeries::new(
                vec![(SegmentValue::Exact(0), r), (SegmentValue::Exact(n), r)],
                BLACK.stroke_width(1),
            ))
            .map_err(err)?;
    }
    root.present().map_err(err)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_written_as_png() {
        let dir = tempfile::tempdir().unwrap();
        let line = dir.path().join("lines.png");
        lines(
            &line,
            "miss rate by cache size",
            "miss rate (%)",
            &["8K".into(), "16K".into(), "32K".into()],
            &[
                ("EEVDF".into(), vec![Some(9.0), Some(5.0), Some(2.0)]),
                ("scx_sky".into(), vec![Some(8.0), None, Some(1.0)]),
            ],
        )
        .unwrap();
        let bar = dir.path().join("bars.png");
        bars(
            &bar,
            "work vs EEVDF",
            "ratio",
            &["EEVDF".into(), "scx_sky".into(), "lavd".into()],
            &[Some(1.0), Some(1.2), None],
            Some(1.0),
        )
        .unwrap();
        for p in [line, bar] {
            let bytes = std::fs::read(&p).unwrap();
            assert!(bytes.len() > 1000 && bytes.starts_with(b"\x89PNG"), "{p:?}");
        }
    }
}
