//! Robustness to dataset shift: accuracy, NLL and ECE against corruption severity, one line
//! per method (as in Ovadia et al. 2019 and uncertainty-baselines).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::output::{Figure, Size, render};
use crate::style::{FAMILY, Text, check_finite, series_colour};

/// One method's metrics at each severity (0 = clean data).
#[derive(Debug, Clone, PartialEq)]
pub struct CorruptionSeries {
    /// Method name, for the legend.
    pub name: String,
    /// Severities, increasing (e.g. `0, 1, ..., 5`).
    pub severity: Vec<f64>,
    /// Accuracy at each severity, in `[0, 1]`.
    pub accuracy: Vec<f64>,
    /// Mean NLL at each severity (nats).
    pub nll: Vec<f64>,
    /// ECE at each severity, in `[0, 1]`.
    pub ece: Vec<f64>,
}

/// Draws three panels side by side (accuracy, NLL, ECE against severity), one line with
/// markers per method, into `path` (`.png` or `.svg`). About 1200 x 450 px reads well.
///
/// # Errors
/// [`PlotError::BadInput`] for no series, a series without points, lengths that differ,
/// severities not increasing, non-finite values, or accuracy or ECE outside `[0, 1]`;
/// [`PlotError::BadSize`] below 600 x 300 px; and the drawing and writing errors.
pub fn corruptions(series: &[CorruptionSeries], size: Size, path: &Path) -> Result<()> {
    if series.is_empty() {
        return Err(PlotError::bad_input("corruption series", "none given"));
    }
    for s in series {
        let n = s.severity.len();
        if n == 0 || s.accuracy.len() != n || s.nll.len() != n || s.ece.len() != n {
            return Err(PlotError::bad_input(
                "corruption series",
                format!(
                    "{:?}: {} severities, {} accuracies, {} NLLs, {} ECEs",
                    s.name,
                    n,
                    s.accuracy.len(),
                    s.nll.len(),
                    s.ece.len()
                ),
            ));
        }
        for v in [&s.severity, &s.accuracy, &s.nll, &s.ece] {
            check_finite("corruption series", v)?;
        }
        if s.severity.windows(2).any(|w| w[0] >= w[1]) {
            return Err(PlotError::bad_input(
                "corruption series",
                format!(
                    "{:?}: severities {:?} are not increasing",
                    s.name, s.severity
                ),
            ));
        }
        if s.accuracy
            .iter()
            .chain(&s.ece)
            .any(|v| !(0.0..=1.0).contains(v))
        {
            return Err(PlotError::bad_input(
                "corruption series",
                format!("{:?}: accuracy or ECE outside [0, 1]", s.name),
            ));
        }
    }
    render(&Corruptions { series }, size, path)
}

/// Picks one metric out of a series.
type Metric = fn(&CorruptionSeries) -> &[f64];

struct Corruptions<'a> {
    series: &'a [CorruptionSeries],
}

impl Figure for Corruptions<'_> {
    const MIN_SIZE: Size = Size::new(600, 300);

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, _) = root.dim_in_pixel();
        let text = Text::for_width(w, 1200);
        let panels = root.split_evenly((1, 3));
        let metrics: [(&str, Metric, bool); 3] = [
            ("accuracy", |s| &s.accuracy, true),
            ("NLL (nats)", |s| &s.nll, false),
            ("ECE", |s| &s.ece, false),
        ];
        let (xlo, xhi) = self
            .series
            .iter()
            .flat_map(|s| &s.severity)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        let xpad = ((xhi - xlo) * 0.05).max(0.25);
        // Integer severities get one tick each (no 0.5 steps between levels).
        let integers = self
            .series
            .iter()
            .flat_map(|s| &s.severity)
            .all(|v| (v - v.round()).abs() < 1e-9);
        let x_ticks = if integers {
            ((xhi - xlo).round() as usize + 1).clamp(2, 8)
        } else {
            8
        };
        for (area, (name, get, legend)) in panels.iter().zip(metrics) {
            let (lo, hi) = self
                .series
                .iter()
                .flat_map(get)
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                    (lo.min(v), hi.max(v))
                });
            let pad = ((hi - lo) * 0.08).max(1e-3);
            let mut chart = ChartBuilder::on(area)
                .caption(name, (FAMILY, text.title))
                .margin(text.px(10.0))
                .x_label_area_size(text.px(46.0))
                .y_label_area_size(text.px(62.0))
                .build_cartesian_2d(xlo - xpad..xhi + xpad, (lo - pad).max(0.0)..hi + pad)?;
            chart
                .configure_mesh()
                .x_desc("corruption severity")
                .x_labels(x_ticks)
                .y_labels(6)
                .x_label_formatter(&|v| {
                    if (v - v.round()).abs() < 1e-9 {
                        format!("{v:.0}")
                    } else {
                        format!("{v:.1}")
                    }
                })
                .label_style((FAMILY, text.tick))
                .axis_desc_style((FAMILY, text.label))
                .light_line_style(WHITE.mix(0.0))
                .bold_line_style(BLACK.mix(0.08))
                .draw()?;
            for (i, s) in self.series.iter().enumerate() {
                let colour = series_colour(i);
                let pts: Vec<(f64, f64)> = s
                    .severity
                    .iter()
                    .copied()
                    .zip(get(s).iter().copied())
                    .collect();
                chart
                    .draw_series(LineSeries::new(
                        pts.clone(),
                        colour.stroke_width(text.upx(2.5)),
                    ))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(3))
                    });
                chart.draw_series(
                    pts.into_iter()
                        .map(|p| Circle::new(p, text.upx(4.0), colour.filled())),
                )?;
            }
            if legend {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::LowerLeft)
                    .label_font((FAMILY, text.note))
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.3))
                    .draw()?;
            }
        }
        Ok(())
    }
}
