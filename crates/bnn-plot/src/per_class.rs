//! Per-class confidence: one box plot per class with the class's mean confidence above it, as
//! in the 2DGBNN paper's output figure.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::output::{Figure, Size, render};
use crate::style::{FAMILY, Text, check_finite, okabe_ito as oi};

/// Most points beyond the whiskers drawn per class (every k-th, in input order).
const FLIERS_PER_CLASS: usize = 300;

/// Input of [`per_class`].
#[derive(Debug, Clone, Copy)]
pub struct PerClassPlot<'a> {
    /// Figure title.
    pub title: &'a str,
    /// Name of each class, indexed by class.
    pub class_names: &'a [String],
    /// What `class` means, for the x axis, e.g. `"true class"`.
    pub class_axis: &'a str,
    /// What `confidence` means, for the y axis, e.g. `"confidence (max. probability)"`.
    pub value_axis: &'a str,
    /// One value per example, in `[0, 1]`.
    pub confidence: &'a [f64],
    /// Class of each example, `< class_names.len()`.
    pub class: &'a [u32],
}

/// Draws one box plot per class into `path` (`.png` or `.svg`): the box spans the quartiles,
/// the line in it is the median, the whiskers reach the furthest values within 1.5 times the
/// inter-quartile range (Tukey), values beyond are dots (at most 300 per class), and the mean
/// is written above each box. Classes without examples are labelled "no examples". About
/// 1000 x 550 px reads well for ten classes.
///
/// # Errors
/// [`PlotError::BadInput`] for no classes or examples, lengths that differ, a class out of
/// range or a value outside `[0, 1]`; [`PlotError::BadSize`] below 500 x 350 px; and the
/// drawing and writing errors.
pub fn per_class(data: &PerClassPlot<'_>, size: Size, path: &Path) -> Result<()> {
    let k = data.class_names.len();
    if k == 0 || data.confidence.is_empty() {
        return Err(PlotError::bad_input(
            "per-class confidence",
            format!("{k} classes, {} examples", data.confidence.len()),
        ));
    }
    if data.class.len() != data.confidence.len() {
        return Err(PlotError::bad_input(
            "per-class confidence",
            format!(
                "{} values but {} classes",
                data.confidence.len(),
                data.class.len()
            ),
        ));
    }
    check_finite("per-class confidence", data.confidence)?;
    if let Some(i) = data
        .confidence
        .iter()
        .position(|v| !(0.0..=1.0).contains(v))
    {
        return Err(PlotError::bad_input(
            "per-class confidence",
            format!(
                "value {} at index {i} is outside [0, 1]",
                data.confidence[i]
            ),
        ));
    }
    let mut groups = vec![Vec::new(); k];
    for (i, (&c, &v)) in data.class.iter().zip(data.confidence).enumerate() {
        groups
            .get_mut(c as usize)
            .ok_or_else(|| {
                PlotError::bad_input(
                    "per-class confidence",
                    format!("example {i} has class {c} but there are {k} class names"),
                )
            })?
            .push(v);
    }
    let boxes = groups.iter().map(|g| BoxStats::of(g)).collect();
    render(&PerClass { data, boxes }, size, path)
}

/// Tukey box-plot statistics of one class.
#[derive(Debug, Clone, PartialEq)]
struct BoxStats {
    q1: f64,
    median: f64,
    q3: f64,
    low_whisker: f64,
    high_whisker: f64,
    mean: f64,
    fliers: Vec<f64>,
    n: usize,
}

impl BoxStats {
    /// `None` for an empty class. Quantiles by linear interpolation (numpy's default).
    fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut s = values.to_vec();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let r = p * (s.len() - 1) as f64;
            let (i, f) = (r.floor() as usize, r.fract());
            if i + 1 < s.len() {
                s[i] + f * (s[i + 1] - s[i])
            } else {
                s[i]
            }
        };
        let (q1, median, q3) = (q(0.25), q(0.5), q(0.75));
        let iqr = q3 - q1;
        let (lo_fence, hi_fence) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
        let low_whisker = s.iter().copied().find(|&v| v >= lo_fence).unwrap_or(q1);
        let high_whisker = s
            .iter()
            .rev()
            .copied()
            .find(|&v| v <= hi_fence)
            .unwrap_or(q3);
        let outside: Vec<f64> = values
            .iter()
            .copied()
            .filter(|&v| v < lo_fence || v > hi_fence)
            .collect();
        let stride = outside.len().div_ceil(FLIERS_PER_CLASS).max(1);
        Some(Self {
            q1,
            median,
            q3,
            low_whisker,
            high_whisker,
            mean: values.iter().sum::<f64>() / values.len() as f64,
            fliers: outside.into_iter().step_by(stride).collect(),
            n: values.len(),
        })
    }
}

struct PerClass<'a, 'b> {
    data: &'b PerClassPlot<'a>,
    boxes: Vec<Option<BoxStats>>,
}

impl Figure for PerClass<'_, '_> {
    const MIN_SIZE: Size = Size::new(500, 350);

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, _) = root.dim_in_pixel();
        let text = Text::for_width(w, 1000);
        let d = self.data;
        let k = d.class_names.len();
        let area = root.titled(d.title, (FAMILY, text.title * 1.1))?;
        let (aw, ah) = area.dim_in_pixel();
        let key_h = text.upx(22.0);
        let (key, area) = area.split_vertically(key_h);
        key.draw(&plotters::element::Text::new(
            "box: quartiles and median · whiskers: furthest values within 1.5 IQR · dots: beyond · ▲ and number: mean",
            (aw as i32 / 2, 0),
            (FAMILY, text.note)
                .into_font()
                .color(&BLACK.mix(0.75))
                .pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Top,
                )),
        ))?;
        let _ = ah;
        // Class names are drawn by hand under the axis: a name wider than its slot is broken
        // onto two lines at a space or slash.
        let tick = (FAMILY, text.tick).into_font().into_text_style(&area);
        let slot = (f64::from(w) - f64::from(text.upx(100.0))) / k as f64;
        let lines: Vec<Vec<String>> = d
            .class_names
            .iter()
            .map(|name| {
                let width = area.estimate_text_size(name, &tick).map_or(0, |s| s.0);
                if f64::from(width) <= slot * 0.92 {
                    vec![name.clone()]
                } else {
                    split_name(name)
                }
            })
            .collect();
        let rows = lines.iter().map(Vec::len).max().unwrap_or(1) as i32;
        let line_h = (text.tick * 1.2).round() as i32;
        let mut chart = ChartBuilder::on(&area)
            .margin(text.px(12.0))
            .x_label_area_size(text.px(40.0) + rows * line_h)
            .y_label_area_size(text.px(66.0))
            .build_cartesian_2d(-0.5f64..k as f64 - 0.5, 0f64..1.1f64)?;
        chart
            .configure_mesh()
            .x_desc(d.class_axis)
            .y_desc(d.value_axis)
            .x_labels(k + 1)
            .x_label_formatter(&|_| String::new())
            .y_labels(7)
            .y_label_formatter(&|v| {
                if *v <= 1.0 {
                    format!("{v:.1}")
                } else {
                    String::new()
                }
            })
            .y_label_style((FAMILY, text.tick))
            .axis_desc_style((FAMILY, text.label))
            .disable_x_mesh()
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .draw()?;
        for (i, name_lines) in lines.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(i as f64, 0.0));
            for (j, line) in name_lines.iter().enumerate() {
                root.draw(&plotters::element::Text::new(
                    line.clone(),
                    (x, y + text.px(8.0) + j as i32 * line_h),
                    tick.pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Top,
                    )),
                ))?;
            }
        }
        let half = 0.3;
        for (i, b) in self.boxes.iter().enumerate() {
            let x = i as f64;
            let Some(b) = b else {
                chart.draw_series(std::iter::once(plotters::element::Text::new(
                    "no examples",
                    (x, 0.5),
                    (FAMILY, text.note)
                        .into_font()
                        .into_text_style(&area)
                        .pos(centre()),
                )))?;
                continue;
            };
            let line = BLACK.stroke_width(text.upx(1.2));
            chart.draw_series([
                Rectangle::new(
                    [(x - half, b.q1), (x + half, b.q3)],
                    oi::SKY_BLUE.mix(0.6).filled(),
                ),
                Rectangle::new(
                    [(x - half, b.q1), (x + half, b.q3)],
                    oi::BLUE.stroke_width(text.upx(1.2)),
                ),
            ])?;
            chart.draw_series([
                PathElement::new(
                    [(x - half, b.median), (x + half, b.median)],
                    oi::BLUE.stroke_width(text.upx(2.5)),
                ),
                PathElement::new([(x, b.q3), (x, b.high_whisker)], line),
                PathElement::new([(x, b.q1), (x, b.low_whisker)], line),
                PathElement::new(
                    [
                        (x - half / 2.0, b.high_whisker),
                        (x + half / 2.0, b.high_whisker),
                    ],
                    line,
                ),
                PathElement::new(
                    [
                        (x - half / 2.0, b.low_whisker),
                        (x + half / 2.0, b.low_whisker),
                    ],
                    line,
                ),
            ])?;
            chart.draw_series(
                b.fliers
                    .iter()
                    .map(|&v| Circle::new((x, v), text.upx(1.5), BLACK.mix(0.35).filled())),
            )?;
            chart.draw_series(std::iter::once(TriangleMarker::new(
                (x, b.mean),
                text.upx(4.0),
                oi::VERMILLION.filled(),
            )))?;
            chart.draw_series(std::iter::once(plotters::element::Text::new(
                format!("{:.3}", b.mean),
                (x, 1.05),
                (FAMILY, text.note)
                    .into_font()
                    .into_text_style(&area)
                    .pos(centre()),
            )))?;
            let _ = b.n;
        }
        Ok(())
    }
}

/// `name` on two lines, broken at the space or slash nearest its middle (kept whole if it has
/// neither).
fn split_name(name: &str) -> Vec<String> {
    let mid = name.len() / 2;
    let cut = name
        .char_indices()
        .filter(|(_, c)| *c == ' ' || *c == '/')
        .min_by_key(|(i, _)| i.abs_diff(mid));
    match cut {
        Some((i, ' ')) => vec![name[..i].to_string(), name[i + 1..].to_string()],
        Some((i, _)) => vec![name[..=i].to_string(), name[i + 1..].to_string()],
        None => vec![name.to_string()],
    }
}

fn centre() -> plotters::style::text_anchor::Pos {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    Pos::new(HPos::Center, VPos::Center)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_stats_match_numpy() {
        // numpy.percentile([1, 2, 3, 4, 100], [25, 50, 75]) = [2, 3, 4]; fences 0.5 and 5.5.
        let b = BoxStats::of(&[4.0, 1.0, 100.0, 2.0, 3.0]).unwrap();
        assert_eq!((b.q1, b.median, b.q3), (2.0, 3.0, 4.0));
        assert_eq!((b.low_whisker, b.high_whisker), (1.0, 4.0));
        assert_eq!(b.fliers, vec![100.0]);
        assert_eq!(b.mean, 22.0);
        assert!(BoxStats::of(&[]).is_none());
        assert_eq!(split_name("T-shirt/top"), vec!["T-shirt/", "top"]);
        assert_eq!(split_name("Ankle boot"), vec!["Ankle", "boot"]);
        assert_eq!(split_name("Sneaker"), vec!["Sneaker"]);
        let one = BoxStats::of(&[0.5]).unwrap();
        assert_eq!((one.q1, one.q3, one.low_whisker), (0.5, 0.5, 0.5));
    }
}
