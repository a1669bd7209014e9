//! A regression network's reliability figure: the observed coverage of its central predictive
//! intervals against their nominal level (Kuleshov et al. 2018's calibration plot), one line per
//! model, with the diagonal of perfect calibration. Above the diagonal the intervals are too
//! wide (under-confident), below it too narrow (over-confident).

use std::path::Path;

use bnn_metrics::CoveragePoint;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::output::{Figure, Size, render};
use crate::style::{FAMILY, GREY, Text, series_colour};

/// One model's coverage points and the name in the legend.
#[derive(Debug, Clone, Copy)]
pub struct CoverageSeries<'a> {
    /// Model or method name, e.g. `"2DGBNN"`.
    pub name: &'a str,
    /// Its points, e.g. from [`bnn_metrics::regression_reliability`].
    pub points: &'a [CoveragePoint],
}

/// Draws observed coverage against nominal level, one line with markers per series and the
/// diagonal, into `path` (`.png` or `.svg`). About 600 x 560 px reads well.
///
/// # Errors
/// [`PlotError::BadInput`] without series, for a series without points, or a level or coverage
/// outside `[0, 1]` or not finite; [`PlotError::BadSize`] below 300 x 300 px; and the drawing
/// and writing errors of [`PlotError`].
pub fn coverage(series: &[CoverageSeries<'_>], size: Size, path: &Path) -> Result<()> {
    if series.is_empty() {
        return Err(PlotError::bad_input("coverage series", "none given"));
    }
    for s in series {
        if s.points.is_empty() {
            return Err(PlotError::bad_input(
                "coverage series",
                format!("{:?} has no points", s.name),
            ));
        }
        if let Some(p) = s.points.iter().find(|p| {
            !(p.level.is_finite()
                && p.coverage.is_finite()
                && (0.0..=1.0).contains(&p.level)
                && (0.0..=1.0).contains(&p.coverage))
        }) {
            return Err(PlotError::bad_input(
                "coverage series",
                format!(
                    "{:?}: the point {p:?} is not a level and a coverage in [0, 1]",
                    s.name
                ),
            ));
        }
    }
    render(&Coverage { series }, size, path)
}

struct Coverage<'a, 'b> {
    series: &'b [CoverageSeries<'a>],
}

impl Figure for Coverage<'_, '_> {
    const MIN_SIZE: Size = Size::new(300, 300);

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, _) = root.dim_in_pixel();
        let text = Text::for_width(w, 600);
        let mut chart = ChartBuilder::on(root)
            .caption("coverage of the central intervals", (FAMILY, text.title))
            .margin(text.px(12.0))
            .x_label_area_size(text.px(46.0))
            .y_label_area_size(text.px(56.0))
            .build_cartesian_2d(0.0..1.0, 0.0..1.0)?;
        chart
            .configure_mesh()
            .x_desc("nominal level")
            .y_desc("observed coverage")
            .x_labels(6)
            .y_labels(6)
            .label_style((FAMILY, text.tick))
            .axis_desc_style((FAMILY, text.label))
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .draw()?;
        chart.draw_series(LineSeries::new(
            [(0.0, 0.0), (1.0, 1.0)],
            GREY.stroke_width(text.upx(1.5)),
        ))?;
        for (i, s) in self.series.iter().enumerate() {
            let colour = series_colour(i);
            let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.level, p.coverage)).collect();
            chart
                .draw_series(LineSeries::new(
                    pts.clone(),
                    colour.stroke_width(text.upx(2.5)),
                ))?
                .label(s.name.to_string())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(3))
                });
            chart.draw_series(
                pts.into_iter()
                    .map(|p| Circle::new(p, text.upx(3.5), colour.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FAMILY, text.note))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        Ok(())
    }
}
