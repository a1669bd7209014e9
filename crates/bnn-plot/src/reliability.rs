//! Reliability diagrams (Guo et al. 2017): accuracy per confidence bin with the gap to the bin's
//! mean confidence, and the confidence histogram under it; one column per model.

use std::path::Path;

use bnn_metrics::ReliabilityDiagram;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::output::{Figure, Size, render};
use crate::style::{FAMILY, GREY, Text, okabe_ito as oi};

/// Opaque pale vermillion (35 % on white): the gap reads the same over a bar and over white.
const GAP_FILL: RGBColor = RGBColor(240, 199, 166);

/// One model's reliability diagram and the name shown above it.
#[derive(Debug, Clone, Copy)]
pub struct ReliabilityPanel<'a> {
    /// Model or method name, e.g. `"2DGBNN"`.
    pub name: &'a str,
    /// Its bins, e.g. from [`bnn_metrics::reliability_diagram`].
    pub diagram: &'a ReliabilityDiagram,
}

/// Draws one reliability diagram per panel, side by side, into `path` (`.png` or `.svg`).
///
/// Each column shows, on top, the accuracy of every non-empty confidence bin as a bar, the gap
/// to the bin's mean confidence as a translucent bar and the diagonal of perfect calibration;
/// under it, the fraction of examples per bin with the overall accuracy and mean confidence as
/// vertical lines. The column title gives the ECE (`ReliabilityDiagram::ece`). About 450 px
/// per column by 600 px reads well.
///
/// # Errors
/// [`PlotError::BadInput`] without panels or for a diagram without bins or examples or with
/// non-finite values; [`PlotError::BadSize`] below 300 px per column x 300 px; and the
/// drawing and writing errors of [`PlotError`].
pub fn reliability(panels: &[ReliabilityPanel<'_>], size: Size, path: &Path) -> Result<()> {
    if panels.is_empty() {
        return Err(PlotError::bad_input("reliability panels", "none given"));
    }
    for p in panels {
        check_diagram(p)?;
    }
    let min_width = 300 * panels.len() as u32;
    if size.width < min_width {
        return Err(PlotError::BadSize {
            width: size.width,
            height: size.height,
            min_width,
            min_height: Reliability::MIN_SIZE.height,
            max: crate::output::MAX_SIDE,
        });
    }
    render(&Reliability { panels }, size, path)
}

fn check_diagram(p: &ReliabilityPanel<'_>) -> Result<()> {
    let d = p.diagram;
    if d.bins.is_empty() || d.n == 0 {
        return Err(PlotError::bad_input(
            "reliability diagram",
            format!(
                "{:?} has {} bins and {} examples",
                p.name,
                d.bins.len(),
                d.n
            ),
        ));
    }
    for (i, b) in d.bins.iter().enumerate() {
        let ok = [b.lower, b.upper, b.mean_confidence, b.accuracy]
            .iter()
            .all(|v| v.is_finite() && (0.0..=1.0).contains(v))
            && b.lower < b.upper;
        if !ok {
            return Err(PlotError::bad_input(
                "reliability diagram",
                format!("{:?} bin {i} is not a bin of [0, 1]: {b:?}", p.name),
            ));
        }
    }
    if d.bins.iter().map(|b| b.count).sum::<usize>() != d.n {
        return Err(PlotError::bad_input(
            "reliability diagram",
            format!("{:?}: bin counts do not add up to n = {}", p.name, d.n),
        ));
    }
    Ok(())
}

struct Reliability<'a, 'b> {
    panels: &'b [ReliabilityPanel<'a>],
}

impl Figure for Reliability<'_, '_> {
    const MIN_SIZE: Size = Size::new(300, 300);

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, _) = root.dim_in_pixel();
        let text = Text::for_width(w / self.panels.len() as u32, 450);
        let columns = root.split_evenly((1, self.panels.len()));
        for (area, panel) in columns.iter().zip(self.panels) {
            draw_panel(area, panel, &text)?;
        }
        Ok(())
    }
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &ReliabilityPanel<'_>,
    text: &Text,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let d = panel.diagram;
    let n = d.n as f64;
    let accuracy: f64 = d
        .bins
        .iter()
        .map(|b| b.accuracy * b.count as f64)
        .sum::<f64>()
        / n;
    let confidence: f64 = d
        .bins
        .iter()
        .map(|b| b.mean_confidence * b.count as f64)
        .sum::<f64>()
        / n;
    let title = format!("{}: ECE {:.4}", panel.name, d.ece());
    let area = area.titled(&title, (FAMILY, text.title))?;
    let (_, h) = area.dim_in_pixel();
    let (top, bottom) = area.split_vertically((h as f64 * 0.66).round() as u32);

    let mut chart = ChartBuilder::on(&top)
        .margin(text.px(8.0))
        .x_label_area_size(text.px(10.0))
        .y_label_area_size(text.px(58.0))
        .build_cartesian_2d(0f64..1f64, 0f64..1f64)?;
    chart
        .configure_mesh()
        .y_desc("accuracy")
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&|_| String::new())
        .label_style((FAMILY, text.tick))
        .axis_desc_style((FAMILY, text.label))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .draw()?;
    let filled = d.bins.iter().filter(|b| b.count > 0);
    chart
        .draw_series(filled.clone().map(|b| {
            Rectangle::new(
                [(b.lower, 0.0), (b.upper, b.accuracy)],
                oi::BLUE.mix(0.85).filled(),
            )
        }))?
        .label("accuracy")
        .legend(|(x, y)| {
            Rectangle::new([(x, y - 6), (x + 14, y + 6)], oi::BLUE.mix(0.85).filled())
        });
    chart
        .draw_series(filled.clone().map(|b| {
            Rectangle::new(
                [(b.lower, b.accuracy), (b.upper, b.mean_confidence)],
                GAP_FILL.filled(),
            )
        }))?
        .label("gap |accuracy - confidence|")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], GAP_FILL.filled()));
    chart.draw_series(filled.map(|b| {
        Rectangle::new(
            [(b.lower, b.accuracy), (b.upper, b.mean_confidence)],
            oi::VERMILLION.stroke_width(1),
        )
    }))?;
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, 0.0), (1.0, 1.0)],
            text.upx(6.0),
            text.upx(4.0),
            GREY.stroke_width(text.upx(1.5)),
        ))?
        .label("perfect calibration")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], GREY.stroke_width(2)));
    // Entries for the histogram's lines, kept here where they hide no bars (the upper left of
    // a reliability diagram is empty unless low-confidence predictions are mostly right).
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), u32>>())?
        .label(format!("overall accuracy {accuracy:.3} (below)"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), u32>>())?
        .label(format!("mean confidence {confidence:.3} (below)"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], oi::VERMILLION.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FAMILY, text.note))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;

    // Confidence histogram: fraction of examples per bin.
    let frac: Vec<f64> = d.bins.iter().map(|b| b.count as f64 / n).collect();
    let ymax = frac.iter().copied().fold(0.0, f64::max).max(1e-9) * 1.12;
    let mut hist = ChartBuilder::on(&bottom)
        .margin(text.px(8.0))
        .margin_top(text.px(2.0))
        .x_label_area_size(text.px(46.0))
        .y_label_area_size(text.px(58.0))
        .build_cartesian_2d(0f64..1f64, 0f64..ymax)?;
    hist.configure_mesh()
        .x_desc("confidence (max. probability)")
        .y_desc("fraction")
        .x_labels(6)
        .y_labels(4)
        .label_style((FAMILY, text.tick))
        .axis_desc_style((FAMILY, text.label))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .draw()?;
    hist.draw_series(
        d.bins
            .iter()
            .zip(&frac)
            .map(|(b, &f)| Rectangle::new([(b.lower, 0.0), (b.upper, f)], oi::SKY_BLUE.filled())),
    )?;
    hist.draw_series(
        d.bins
            .iter()
            .zip(&frac)
            .filter(|(_, f)| **f > 0.0)
            .map(|(b, &f)| {
                Rectangle::new([(b.lower, 0.0), (b.upper, f)], oi::BLUE.stroke_width(1))
            }),
    )?;
    hist.draw_series(std::iter::once(PathElement::new(
        [(accuracy, 0.0), (accuracy, ymax)],
        BLACK.stroke_width(text.upx(2.0)),
    )))?;
    hist.draw_series(DashedLineSeries::new(
        [(confidence, 0.0), (confidence, ymax)],
        text.upx(5.0),
        text.upx(3.0),
        oi::VERMILLION.stroke_width(text.upx(2.0)),
    ))?;
    Ok(())
}
