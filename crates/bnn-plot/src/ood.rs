//! Out-of-distribution figure: how the uncertainty measures of in- and out-of-distribution
//! examples overlap, and the ROC curve of each measure used as a detector.

use std::path::Path;

use bnn_metrics::{auroc, roc_curve};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::output::{Figure, Size, render};
use crate::style::{FAMILY, GREY, Text, check_finite, okabe_ito as oi, series_colour};

/// Histogram bins per uncertainty measure.
const BINS: usize = 30;

/// Most points drawn per ROC curve; closer points are merged (see [`thin_roc`]).
const ROC_POINTS: usize = 2000;

/// Per-example uncertainty of one data set, e.g. from [`bnn_metrics::Predictive`].
#[derive(Debug, Clone, Copy)]
pub struct Uncertainties<'a> {
    /// Maximum predicted probability of each example, in `[0, 1]`.
    pub max_prob: &'a [f64],
    /// Predictive entropy of each example (nats, `>= 0`).
    pub entropy: &'a [f64],
    /// Mutual information of each example (nats), when the prediction has Monte Carlo samples.
    pub mutual_information: Option<&'a [f64]>,
}

/// Input of [`ood`].
#[derive(Debug, Clone, Copy)]
pub struct OodPlot<'a> {
    /// Figure title, e.g. `"2DGBNN, LeNet-5"`.
    pub title: &'a str,
    /// Name of the in-distribution set, e.g. `"Fashion-MNIST"`.
    pub in_name: &'a str,
    /// Name of the out-of-distribution set, e.g. `"MNIST"`.
    pub out_name: &'a str,
    /// In-distribution examples (the positive class of the ROC curves).
    pub in_dist: Uncertainties<'a>,
    /// Out-of-distribution examples.
    pub out_dist: Uncertainties<'a>,
}

/// Draws the OOD figure into `path` (`.png` or `.svg`): a 2 x 2 grid with histograms
/// (fraction of examples per bin, shared bins) of the maximum probability, the predictive
/// entropy and the mutual information, in- vs out-of-distribution, and the ROC curves of the
/// three scores (in-distribution positive, as [`bnn_metrics::roc_curve`]) with their AUROC in
/// the legend. Without mutual information its panel says so and the ROC panel has two curves.
/// About 1000 x 800 px reads well.
///
/// # Errors
/// [`PlotError::BadInput`] for empty sets, lengths that differ within a set, non-finite values,
/// or mutual information given for one set only; [`PlotError::BadSize`] below 500 x 400 px;
/// and the drawing and writing errors of [`PlotError`].
pub fn ood(data: &OodPlot<'_>, size: Size, path: &Path) -> Result<()> {
    check_set("in-distribution uncertainties", &data.in_dist)?;
    check_set("out-of-distribution uncertainties", &data.out_dist)?;
    if data.in_dist.mutual_information.is_some() != data.out_dist.mutual_information.is_some() {
        return Err(PlotError::bad_input(
            "mutual information",
            "given for one data set only; give it for both or neither",
        ));
    }
    let mut curves = Vec::new();
    let scores = [
        (
            "max-prob",
            Some((data.in_dist.max_prob, data.out_dist.max_prob)),
            1.0,
        ),
        (
            "entropy",
            Some((data.in_dist.entropy, data.out_dist.entropy)),
            -1.0,
        ),
        (
            "mutual information",
            data.in_dist
                .mutual_information
                .zip(data.out_dist.mutual_information),
            -1.0,
        ),
    ];
    for (i, (name, values, sign)) in scores.into_iter().enumerate() {
        let Some((a, b)) = values else { continue };
        // Scores are in-distribution-ness: higher = more in-distribution.
        let pos: Vec<f64> = a.iter().map(|v| sign * v).collect();
        let neg: Vec<f64> = b.iter().map(|v| sign * v).collect();
        let metric = |source| PlotError::Metrics {
            what: "ROC curve",
            source,
        };
        let roc = roc_curve(&pos, &neg).map_err(metric)?;
        let area = auroc(&pos, &neg).map_err(metric)?;
        curves.push(Roc {
            name,
            colour: series_colour(i),
            auroc: area,
            points: thin_roc(&roc.fpr, &roc.tpr, ROC_POINTS),
        });
    }
    render(&Ood { data, curves }, size, path)
}

fn check_set(what: &'static str, u: &Uncertainties<'_>) -> Result<()> {
    let n = u.max_prob.len();
    if n == 0 {
        return Err(PlotError::bad_input(what, "no examples"));
    }
    if u.entropy.len() != n || u.mutual_information.is_some_and(|m| m.len() != n) {
        return Err(PlotError::bad_input(
            what,
            format!(
                "{} max-probabilities, {} entropies, {:?} mutual informations",
                n,
                u.entropy.len(),
                u.mutual_information.map(<[f64]>::len)
            ),
        ));
    }
    check_finite(what, u.max_prob)?;
    check_finite(what, u.entropy)?;
    if let Some(m) = u.mutual_information {
        check_finite(what, m)?;
    }
    Ok(())
}

/// At most about `max` points of a ROC curve, keeping the first and last and every point at
/// least `1 / max` (in FPR + TPR) away from the last kept one: invisible at plot resolution,
/// and it bounds the SVG size for large test sets.
fn thin_roc(fpr: &[f64], tpr: &[f64], max: usize) -> Vec<(f64, f64)> {
    let step = 1.0 / max as f64;
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(max.min(fpr.len()) + 1);
    for (i, (&x, &y)) in fpr.iter().zip(tpr).enumerate() {
        let keep = match out.last() {
            None => true,
            Some(&(lx, ly)) => i + 1 == fpr.len() || (x - lx) + (y - ly) >= step,
        };
        if keep {
            out.push((x, y));
        }
    }
    out
}

struct Roc {
    name: &'static str,
    colour: RGBColor,
    auroc: f64,
    points: Vec<(f64, f64)>,
}

struct Ood<'a, 'b> {
    data: &'b OodPlot<'a>,
    curves: Vec<Roc>,
}

impl Figure for Ood<'_, '_> {
    const MIN_SIZE: Size = Size::new(500, 400);

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, _) = root.dim_in_pixel();
        let text = Text::for_width(w, 1000);
        let d = self.data;
        let area = root.titled(d.title, (FAMILY, text.title * 1.1))?;
        let cells = area.split_evenly((2, 2));
        let names = (d.in_name, d.out_name);
        histogram(
            &cells[0],
            true,
            "maximum probability",
            d.in_dist.max_prob,
            d.out_dist.max_prob,
            names,
            &text,
        )?;
        histogram(
            &cells[1],
            false,
            "predictive entropy (nats)",
            d.in_dist.entropy,
            d.out_dist.entropy,
            names,
            &text,
        )?;
        match (d.in_dist.mutual_information, d.out_dist.mutual_information) {
            (Some(a), Some(b)) => histogram(
                &cells[2],
                false,
                "mutual information (nats)",
                a,
                b,
                names,
                &text,
            )?,
            _ => {
                let (cw, ch) = cells[2].dim_in_pixel();
                cells[2].draw(&Text_::new(
                    "mutual information: needs Monte Carlo samples",
                    (cw as i32 / 2, ch as i32 / 2),
                    (FAMILY, text.label)
                        .into_font()
                        .color(&GREY)
                        .pos(Pos::new(HPos::Center, VPos::Center)),
                ))?;
            }
        }
        roc_panel(&cells[3], &self.curves, &text)
    }
}

use plotters::element::Text as Text_;
use plotters::style::text_anchor::{HPos, Pos, VPos};

fn histogram<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    legend: bool,
    what: &str,
    a: &[f64],
    b: &[f64],
    (a_name, b_name): (&str, &str),
    text: &Text,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let lo = a.iter().chain(b).copied().fold(f64::INFINITY, f64::min);
    let hi = a.iter().chain(b).copied().fold(f64::NEG_INFINITY, f64::max);
    // A degenerate range (all values equal) still gets a visible bin.
    let (lo, hi) = if hi - lo > 1e-12 {
        (lo, hi)
    } else {
        (lo - 0.5, hi + 0.5)
    };
    let width = (hi - lo) / BINS as f64;
    let fractions = |v: &[f64]| {
        let mut c = vec![0f64; BINS];
        for &x in v {
            c[(((x - lo) / width) as usize).min(BINS - 1)] += 1.0;
        }
        c.iter_mut().for_each(|x| *x /= v.len() as f64);
        c
    };
    let (fa, fb) = (fractions(a), fractions(b));
    let ymax = fa.iter().chain(&fb).copied().fold(0.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .margin(text.px(10.0))
        .x_label_area_size(text.px(48.0))
        .y_label_area_size(text.px(62.0))
        .build_cartesian_2d(lo..hi, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc(what)
        .y_desc("fraction of examples")
        .x_labels(6)
        .y_labels(5)
        .label_style((FAMILY, text.tick))
        .axis_desc_style((FAMILY, text.label))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .draw()?;
    for (f, colour, name) in [(&fa, oi::BLUE, a_name), (&fb, oi::ORANGE, b_name)] {
        let bars = f.iter().enumerate().filter(|(_, v)| **v > 0.0);
        chart
            .draw_series(bars.map(|(i, &v)| {
                let x0 = lo + i as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width, v)], colour.mix(0.45).filled())
            }))?
            .label(name.to_string())
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.mix(0.6).filled())
            });
        // Outline as a step line so overlapping bars stay readable.
        let mut step = Vec::with_capacity(2 * BINS + 2);
        step.push((lo, 0.0));
        for (i, &v) in f.iter().enumerate() {
            step.push((lo + i as f64 * width, v));
            step.push((lo + (i + 1) as f64 * width, v));
        }
        step.push((hi, 0.0));
        chart.draw_series(std::iter::once(PathElement::new(
            step,
            colour.stroke_width(text.upx(1.5)),
        )))?;
    }
    // One legend, upper left of the max-probability panel: confident in-distribution
    // predictions pile up on the right there.
    if legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FAMILY, text.label))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    Ok(())
}

fn roc_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    curves: &[Roc],
    text: &Text,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .margin(text.px(10.0))
        .x_label_area_size(text.px(48.0))
        .y_label_area_size(text.px(62.0))
        .build_cartesian_2d(0f64..1f64, 0f64..1.0001f64)?;
    chart
        .configure_mesh()
        .x_desc("false positive rate (OOD accepted)")
        .y_desc("true positive rate")
        .x_labels(6)
        .y_labels(6)
        .label_style((FAMILY, text.tick))
        .axis_desc_style((FAMILY, text.label))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .draw()?;
    chart.draw_series(DashedLineSeries::new(
        [(0.0, 0.0), (1.0, 1.0)],
        text.upx(6.0),
        text.upx(4.0),
        GREY.stroke_width(text.upx(1.5)),
    ))?;
    for c in curves {
        let colour = c.colour;
        chart
            .draw_series(std::iter::once(PathElement::new(
                c.points.clone(),
                colour.stroke_width(text.upx(2.5)),
            )))?
            .label(format!("{} (AUROC {:.3})", c.name, c.auroc))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FAMILY, text.note))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_ends_and_bounds_points() {
        let n = 100_000;
        let fpr: Vec<f64> = (0..=n).map(|i| i as f64 / n as f64).collect();
        let tpr: Vec<f64> = fpr.iter().map(|x| x.sqrt()).collect();
        let t = thin_roc(&fpr, &tpr, 500);
        assert_eq!(t.first(), Some(&(0.0, 0.0)));
        assert_eq!(t.last(), Some(&(1.0, 1.0)));
        assert!(t.len() <= 1001, "{} points", t.len());
        let small = thin_roc(&[0.0, 0.5, 1.0], &[0.0, 0.5, 1.0], 500);
        assert_eq!(small.len(), 3);
    }
}
