//! The `(mu, sigma)` plane of a Bayesian network's weights after weight sharing, as in the
//! 2DGBNN paper's figures: plain shared weights coloured by their Gaussian, ellipse weights and
//! outliers in their own colours and marks, and each Gaussian's 1- and 2-sigma ellipses.
//!
//! Legible and fast for millions of weights: up to [`WeightsOptions::dot_limit`] weights every
//! weight is a dot. Beyond it the plain shared weights become a density: the plotting area is
//! cut into cells of about 3 x 3 px, each weight is counted in its cell (one pass, `O(n)`), and
//! each non-empty cell is drawn once, in the colour of its most frequent Gaussian (streaming
//! majority vote) and with an opacity growing with the logarithm of its count. Ellipse weights
//! and outliers stay marks, thinned to at most [`WeightsOptions::marks_limit`] each by taking
//! every k-th one in weight order (deterministic). The drawing cost is thus bounded by the
//! figure's size, not by the number of weights, and the note under the plot says what was
//! drawn.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::output::{Figure, Size, render};
use crate::style::{FAMILY, Text, okabe_ito as oi};

/// Default of [`WeightsOptions::dot_limit`].
pub const DEFAULT_DOT_LIMIT: usize = 20_000;
/// Default of [`WeightsOptions::max_ellipses`].
pub const DEFAULT_MAX_ELLIPSES: usize = 60;
/// Default of [`WeightsOptions::marks_limit`].
pub const DEFAULT_MARKS_LIMIT: usize = 1_500;

/// Colours of the Gaussians (cycled in the order of their means' `mu`, so neighbours differ).
/// Orange and vermillion are left out because outliers are vermillion; black is for ellipse
/// weights.
const COMPONENT_COLOURS: [RGBColor; 5] = [
    oi::BLUE,
    oi::BLUISH_GREEN,
    oi::REDDISH_PURPLE,
    oi::SKY_BLUE,
    RGBColor(170, 150, 0), // Okabe-Ito yellow, darkened to be seen on white.
];

/// What became of one weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PointFate {
    /// Samples from shared Gaussian `k` (an index into [`WeightsPlot::gaussians`] when those
    /// are given; used for the colour either way).
    Shared(u32),
    /// Samples from a blend of several Gaussians.
    Ellipse,
    /// Keeps its own distribution.
    Outlier,
}

/// A 2-D Gaussian in the `(mu, sigma)` plane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gaussian {
    /// Mean `(mu, sigma)`.
    pub mean: [f64; 2],
    /// Covariance, symmetric positive semi-definite; `None` when only the centre is known
    /// (e.g. a model file after retraining), drawn as a centre without ellipses.
    pub cov: Option<[[f64; 2]; 2]>,
}

/// Input of [`weights`].
#[derive(Debug, Clone, Copy)]
pub struct WeightsPlot<'a> {
    /// Figure title, e.g. `"LeNet-5, all layers"`.
    pub title: &'a str,
    /// Mean of each weight.
    pub mu: &'a [f32],
    /// Standard deviation of each weight.
    pub sigma: &'a [f32],
    /// Fate of each weight.
    pub fates: &'a [PointFate],
    /// The shared Gaussians, drawn as ellipses; may be empty.
    pub gaussians: &'a [Gaussian],
}

/// Scale of the sigma axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SigmaAxis {
    /// Logarithmic when all sigmas are positive and the 99th percentile is more than 30 times
    /// the 1st.
    #[default]
    Auto,
    /// Linear.
    Linear,
    /// Logarithmic (every sigma must be positive).
    Log,
}

/// Drawing choices of [`weights`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightsOptions {
    /// Sigma axis scale.
    pub sigma_axis: SigmaAxis,
    /// Most Gaussians whose ellipses are drawn: those with the most plain shared weights (all
    /// of them when the weights are not assigned to any).
    pub max_ellipses: usize,
    /// Up to this many weights, each is a dot; beyond, plain shared weights are drawn as a
    /// density (see the module docs).
    pub dot_limit: usize,
    /// Beyond `dot_limit`, most ellipse weights and most outliers drawn (each).
    pub marks_limit: usize,
    /// Add a panel zoomed on the plain shared weights (the central 99 % of their `mu` and
    /// `sigma`, linear sigma axis) when they fill less than half of the overview, or when the
    /// overview's sigma axis is logarithmic.
    pub zoom: bool,
}

impl Default for WeightsOptions {
    fn default() -> Self {
        Self {
            sigma_axis: SigmaAxis::Auto,
            max_ellipses: DEFAULT_MAX_ELLIPSES,
            dot_limit: DEFAULT_DOT_LIMIT,
            marks_limit: DEFAULT_MARKS_LIMIT,
            zoom: true,
        }
    }
}

/// Draws the `(mu, sigma)` plane into `path` (`.png` or `.svg`). See the module docs for how
/// large inputs are drawn. About 1000 x 700 px reads well.
///
/// # Errors
/// [`PlotError::BadInput`] for no weights, slices of different lengths, non-finite values,
/// negative sigmas, a non-positive sigma on a log axis, a `Shared(k)` with `k` beyond the
/// given Gaussians, or a Gaussian with a non-finite or non-PSD covariance;
/// [`PlotError::BadSize`] below 500 x 350 px; and the drawing and writing errors.
pub fn weights(
    data: &WeightsPlot<'_>,
    options: &WeightsOptions,
    size: Size,
    path: &Path,
) -> Result<()> {
    let log = check(data, options)?;
    render(&Weights { data, options, log }, size, path)
}

/// Validates the input; returns whether the sigma axis is logarithmic.
fn check(data: &WeightsPlot<'_>, options: &WeightsOptions) -> Result<bool> {
    let n = data.mu.len();
    if n == 0 {
        return Err(PlotError::bad_input("weights", "no weights"));
    }
    if data.sigma.len() != n || data.fates.len() != n {
        return Err(PlotError::bad_input(
            "weights",
            format!(
                "{} means, {} sigmas and {} fates",
                n,
                data.sigma.len(),
                data.fates.len()
            ),
        ));
    }
    for (i, (&m, &s)) in data.mu.iter().zip(data.sigma).enumerate() {
        if !m.is_finite() || !s.is_finite() || s < 0.0 {
            return Err(PlotError::bad_input(
                "weights",
                format!("weight {i}: (mu, sigma) = ({m}, {s}); need finite values, sigma >= 0"),
            ));
        }
    }
    let k = data.gaussians.len();
    if k > 0
        && let Some((i, c)) = data.fates.iter().enumerate().find_map(|(i, f)| match f {
            PointFate::Shared(c) if *c as usize >= k => Some((i, *c)),
            _ => None,
        })
    {
        return Err(PlotError::bad_input(
            "weights",
            format!("weight {i} shares Gaussian {c} but {k} Gaussians are given"),
        ));
    }
    for (i, g) in data.gaussians.iter().enumerate() {
        let [[a, b], [c, d]] = g.cov.unwrap_or([[0.0; 2]; 2]);
        let finite = g.mean.iter().chain(&[a, b, c, d]).all(|v| v.is_finite());
        let psd = a >= 0.0
            && d >= 0.0
            && (b - c).abs() <= 1e-9 * (a + d).max(1e-300) + 1e-300
            && a * d - b * c >= -1e-12 * (a * d).abs();
        if !finite || !psd {
            return Err(PlotError::bad_input(
                "Gaussians",
                format!(
                    "Gaussian {i}: mean {:?}, covariance {:?} is not a finite PSD matrix",
                    g.mean, g.cov
                ),
            ));
        }
    }
    let min_sigma = data.sigma.iter().copied().fold(f32::INFINITY, f32::min);
    match options.sigma_axis {
        SigmaAxis::Linear => Ok(false),
        SigmaAxis::Log if min_sigma <= 0.0 => Err(PlotError::bad_input(
            "weights",
            "a log sigma axis needs every sigma > 0",
        )),
        SigmaAxis::Log => Ok(true),
        SigmaAxis::Auto => Ok(min_sigma > 0.0 && {
            // The bulk decides, not a few extreme weights: 1st and 99th percentiles.
            let mut s = data.sigma.to_vec();
            let lo = *s.select_nth_unstable_by(n / 100, f32::total_cmp).1;
            let hi = *s.select_nth_unstable_by(n - 1 - n / 100, f32::total_cmp).1;
            hi / lo > 30.0
        }),
    }
}

struct Weights<'a, 'b> {
    data: &'b WeightsPlot<'a>,
    options: &'b WeightsOptions,
    log: bool,
}

impl Figure for Weights<'_, '_> {
    const MIN_SIZE: Size = Size::new(500, 350);

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, _) = root.dim_in_pixel();
        let text = Text::for_width(w, 1000);
        let d = self.data;
        let overview = View {
            x: padded_range(d.mu.iter().map(|&v| f64::from(v)), false),
            y: padded_range(d.sigma.iter().map(|&v| f64::from(v)), self.log),
            log: self.log,
        };
        let zoom = if self.options.zoom {
            zoom_view(d, &overview)
        } else {
            None
        };
        let titled = root.titled(d.title, (FAMILY, text.title * 1.1))?;
        let (_, th) = titled.dim_in_pixel();
        // The note under the plot takes two lines when one would not fit.
        let note_h = text.upx(44.0);
        let (body, note) = titled.split_vertically(th.saturating_sub(note_h));
        let (bw, _) = body.dim_in_pixel();
        let (plot, legend) = body.split_horizontally(bw.saturating_sub(text.upx(250.0)));
        let chosen = chosen_gaussians(d, self.options.max_ellipses);
        let tally = match &zoom {
            None => self.panel(root, &plot, &overview, None, &chosen, &text)?,
            Some(z) => {
                let (pw, _) = plot.dim_in_pixel();
                let (left, right) = plot.split_horizontally(pw * 45 / 100);
                let caption = (FAMILY, text.label);
                let left = left.titled("all weights", caption)?;
                let right = right.titled("zoom: central 99 % of plain shared weights", caption)?;
                let tally = self.panel(root, &left, &overview, Some(z), &chosen, &text)?;
                self.panel(root, &right, z, None, &chosen, &text)?;
                tally
            }
        };
        let dense = d.mu.len() > self.options.dot_limit;
        let mut entries = vec![
            (
                Mark::Palette(COMPONENT_COLOURS.to_vec()),
                if dense {
                    "plain shared, density;"
                } else {
                    "plain shared;"
                }
                .to_string(),
            ),
            (Mark::None, "colour = its Gaussian".to_string()),
            (Mark::Triangle, "ellipse weight".to_string()),
            (Mark::Cross, "outlier".to_string()),
        ];
        let dark = darker(COMPONENT_COLOURS[0]);
        if chosen.iter().any(|&k| d.gaussians[k].cov.is_some()) {
            entries.push((Mark::Line(dark), "Gaussian: 1σ ellipse".to_string()));
            entries.push((Mark::Dashed(dark), "Gaussian: 2σ ellipse".to_string()));
        }
        if !chosen.is_empty() {
            entries.push((Mark::Centre(dark), "Gaussian: mean".to_string()));
        }
        if zoom.is_some() {
            entries.push((Mark::Frame, "zoomed region".to_string()));
        }
        let thinned = |drawn: usize, total: usize| {
            if drawn == total {
                group(total)
            } else {
                format!("{} ({} drawn)", group(total), group(drawn))
            }
        };
        let what = if d.gaussians.iter().any(|g| g.cov.is_some()) {
            "ellipses"
        } else {
            "centres"
        };
        let ellipses = if d.gaussians.is_empty() {
            String::new()
        } else if chosen.len() == d.gaussians.len() {
            format!(" · {what} of all {} Gaussians", d.gaussians.len())
        } else {
            format!(
                " · {what} of the {} most used of {} Gaussians",
                chosen.len(),
                d.gaussians.len()
            )
        };
        let summary = format!(
            "{} weights: {} plain shared{} · {} ellipse · {} outliers{}",
            group(d.mu.len()),
            group(tally.shared),
            if dense { " (density)" } else { "" },
            thinned(tally.ellipse_drawn, tally.ellipse),
            thinned(tally.outlier_drawn, tally.outlier),
            ellipses
        );
        draw_legend(&legend, &entries, &text)?;
        let style = (FAMILY, text.note)
            .into_font()
            .color(&BLACK.mix(0.75))
            .into_text_style(&note);
        let (nw, _) = note.dim_in_pixel();
        let mut lines = vec![String::new()];
        for part in summary.split(" · ") {
            let last = lines.last_mut().expect("one line");
            let joined = if last.is_empty() {
                part.to_string()
            } else {
                format!("{last} · {part}")
            };
            let fits = note.estimate_text_size(&joined, &style)?.0 + text.upx(24.0) <= nw;
            if fits || last.is_empty() {
                *last = joined;
            } else {
                lines.push(part.to_string());
            }
        }
        for (i, line) in lines.iter().enumerate() {
            note.draw(&plotters::element::Text::new(
                line.clone(),
                (text.px(12.0), i as i32 * text.px(19.0)),
                style.clone(),
            ))?;
        }
        Ok(())
    }
}

/// A legend entry's symbol.
enum Mark {
    None,
    Palette(Vec<RGBColor>),
    Triangle,
    Cross,
    Line(RGBColor),
    Dashed(RGBColor),
    Centre(RGBColor),
    Frame,
}

/// The legend, one entry per row, in its own area right of the plot.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(Mark, String)],
    text: &Text,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let row = text.px(24.0);
    let (x0, mut y) = (text.px(6.0), text.px(24.0));
    let sym = text.px(22.0);
    for (mark, label) in entries {
        let c = (x0 + sym / 2, y);
        match mark {
            Mark::None => {}
            Mark::Palette(colours) => {
                let r = text.px(3.5);
                for (i, colour) in colours.iter().enumerate() {
                    let cx = x0 + i as i32 * (2 * r + 1) + r;
                    area.draw(&Circle::new((cx, y), r as u32, colour.filled()))?;
                }
            }
            Mark::Triangle => area.draw(&TriangleMarker::new(c, text.upx(5.0), BLACK.filled()))?,
            Mark::Cross => area.draw(&Cross::new(
                c,
                text.upx(5.0),
                oi::VERMILLION.stroke_width(text.upx(1.5)),
            ))?,
            Mark::Line(colour) => area.draw(&PathElement::new(
                [(x0, y), (x0 + sym, y)],
                colour.stroke_width(text.upx(2.0)),
            ))?,
            Mark::Dashed(colour) => area.draw(&DashedPathElement::new(
                [(x0, y), (x0 + sym, y)],
                text.upx(5.0),
                text.upx(3.0),
                colour.stroke_width(text.upx(1.3)),
            ))?,
            Mark::Centre(colour) => area.draw(&Circle::new(c, text.upx(3.0), colour.filled()))?,
            Mark::Frame => area.draw(&DashedPathElement::new(
                [
                    (x0, y - 6),
                    (x0 + sym, y - 6),
                    (x0 + sym, y + 6),
                    (x0, y + 6),
                    (x0, y - 6),
                ],
                text.upx(4.0),
                text.upx(3.0),
                BLACK.mix(0.6).stroke_width(text.upx(1.2)),
            ))?,
        }
        // Text starts after the widest symbol (the palette's row of dots).
        let tx = x0 + text.px(46.0);
        area.draw(&plotters::element::Text::new(
            label.clone(),
            (tx, y),
            (FAMILY, text.note).into_font().into_text_style(area).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Left,
                    plotters::style::text_anchor::VPos::Center,
                ),
            ),
        ))?;
        y += row;
    }
    Ok(())
}

/// `(lo, hi)` of the values with 4 % padding (in log space on a log axis).
fn padded_range(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values {
        let v = if log { v.log10() } else { v };
        lo = lo.min(v);
        hi = hi.max(v);
    }
    let pad = if hi > lo {
        0.04 * (hi - lo)
    } else {
        0.5 * lo.abs().max(if log { 0.5 } else { 1e-3 })
    };
    let (lo, hi) = (lo - pad, hi + pad);
    if log {
        (10f64.powf(lo), 10f64.powf(hi))
    } else {
        (lo, hi)
    }
}

/// Counts of fates, and what was drawn of them.
#[derive(Default)]
struct Tally {
    shared: usize,
    ellipse: usize,
    outlier: usize,
    ellipse_drawn: usize,
    outlier_drawn: usize,
}

/// The axes of one panel.
#[derive(Debug, Clone, Copy, PartialEq)]
struct View {
    x: (f64, f64),
    y: (f64, f64),
    log: bool,
}

/// The zoom panel, when the plain shared weights fill less than half of the overview in
/// either direction or the overview's sigma axis is logarithmic: the 0.5th to 99.5th
/// percentiles of their `mu` and `sigma`, padded by 8 %, on a linear sigma axis (the plane
/// the Gaussians were fitted in).
fn zoom_view(d: &WeightsPlot<'_>, overview: &View) -> Option<View> {
    let (mut mu, mut sigma): (Vec<f32>, Vec<f32>) = d
        .fates
        .iter()
        .zip(d.mu.iter().zip(d.sigma))
        .filter(|(f, _)| matches!(f, PointFate::Shared(_)))
        .map(|(_, (&m, &s))| (m, s))
        .unzip();
    let n = mu.len();
    if n < 100 {
        return None;
    }
    let bounds = |v: &mut Vec<f32>| {
        let lo = f64::from(*v.select_nth_unstable_by(n / 200, f32::total_cmp).1);
        let hi = f64::from(*v.select_nth_unstable_by(n - 1 - n / 200, f32::total_cmp).1);
        let pad = 0.08 * (hi - lo).max(1e-12);
        (lo - pad, hi + pad)
    };
    let x = bounds(&mut mu);
    let y = bounds(&mut sigma);
    let y = (y.0.max(0.0), y.1);
    let narrower = |a: (f64, f64), b: (f64, f64)| (a.1 - a.0) < 0.5 * (b.1 - b.0);
    let zoom = View { x, y, log: false };
    (narrower(x, overview.x) || overview.log || narrower(y, overview.y)).then_some(zoom)
}

impl Weights<'_, '_> {
    /// One `(mu, sigma)` panel on `area`: mesh, weights, ellipses, and the outline of
    /// `frame` (the zoomed region) if given. Returns what was drawn.
    fn panel<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        area: &DrawingArea<DB, Shift>,
        view: &View,
        frame: Option<&View>,
        chosen: &[usize],
        text: &Text,
    ) -> Result<Tally>
    where
        DB::ErrorType: 'static,
    {
        let mut builder = ChartBuilder::on(area);
        builder
            .margin(text.px(10.0))
            .x_label_area_size(text.px(48.0))
            .y_label_area_size(text.px(76.0));
        let (x, y) = (view.x.0..view.x.1, view.y.0..view.y.1);
        if view.log {
            let chart = builder.build_cartesian_2d(x, y.log_scale())?;
            self.plane(root, chart, view, frame, chosen, text)
        } else {
            let chart = builder.build_cartesian_2d(x, y)?;
            self.plane(root, chart, view, frame, chosen, text)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn plane<'c, DB, Y>(
        &self,
        root: &DrawingArea<DB, Shift>,
        mut chart: ChartContext<'c, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
        view: &View,
        frame: Option<&View>,
        chosen: &[usize],
        text: &Text,
    ) -> Result<Tally>
    where
        DB: DrawingBackend + 'c,
        DB::ErrorType: 'static,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let d = self.data;
        chart
            .configure_mesh()
            .x_desc("mean μ")
            .y_desc(if view.log {
                "standard deviation σ (log)"
            } else {
                "standard deviation σ"
            })
            .x_labels(6)
            .y_labels(8)
            .x_label_formatter(&|v| format_sigma(*v))
            .y_label_formatter(&|v| format_sigma(*v))
            .label_style((FAMILY, text.tick))
            .axis_desc_style((FAMILY, text.label))
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .draw()?;
        let colours = component_colours(d);
        let (px, py) = chart.plotting_area().get_pixel_range();
        let to_px = |i: usize| chart.backend_coord(&(f64::from(d.mu[i]), f64::from(d.sigma[i])));
        let mut tally = Tally::default();
        for f in d.fates {
            match f {
                PointFate::Shared(_) => tally.shared += 1,
                PointFate::Ellipse => tally.ellipse += 1,
                PointFate::Outlier => tally.outlier += 1,
            }
        }
        let n = d.mu.len();
        let dense = n > self.options.dot_limit;
        let dot = text.upx(2.0).max(2);

        // Plain shared weights.
        if dense {
            let cell = text.upx(3.0).max(2) as i32;
            let cols = ((px.end - px.start) / cell + 1) as usize;
            let rows = ((py.end - py.start) / cell + 1) as usize;
            let mut count = vec![0u32; cols * rows];
            let mut candidate = vec![0u32; cols * rows];
            let mut votes = vec![0u32; cols * rows];
            for (i, f) in d.fates.iter().enumerate() {
                let PointFate::Shared(k) = *f else { continue };
                let (x, y) = to_px(i);
                if !px.contains(&x) || !py.contains(&y) {
                    continue;
                }
                let c = ((y - py.start) / cell) as usize * cols + ((x - px.start) / cell) as usize;
                count[c] += 1;
                // Boyer-Moore majority vote: the cell's dominant Gaussian in one pass.
                if votes[c] == 0 {
                    candidate[c] = k;
                    votes[c] = 1;
                } else if candidate[c] == k {
                    votes[c] += 1;
                } else {
                    votes[c] -= 1;
                }
            }
            let max = count.iter().copied().max().unwrap_or(1).max(1);
            let scale = 1.0 / (1.0 + f64::from(max)).ln();
            let cells = count
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(c, &m)| {
                    let (cx, cy) = ((c % cols) as i32, (c / cols) as i32);
                    let x0 = px.start + cx * cell;
                    let y0 = py.start + cy * cell;
                    let alpha = 0.25 + 0.75 * (1.0 + f64::from(m)).ln() * scale;
                    Rectangle::new(
                        [(x0, y0), (x0 + cell, y0 + cell)],
                        colours[candidate[c] as usize % colours.len().max(1)]
                            .mix(alpha)
                            .filled(),
                    )
                });
            for r in cells {
                root.draw(&r)?;
            }
        } else {
            for (i, f) in d.fates.iter().enumerate() {
                let PointFate::Shared(k) = *f else { continue };
                let p = to_px(i);
                if px.contains(&p.0) && py.contains(&p.1) {
                    let colour = colours[k as usize % colours.len()];
                    root.draw(&Circle::new(p, dot, colour.mix(0.55).filled()))?;
                }
            }
        }

        // Ellipse weights and outliers, thinned beyond the dot limit.
        let limit = if dense {
            self.options.marks_limit.max(1)
        } else {
            usize::MAX
        };
        let stride = |total: usize| total.div_ceil(limit).max(1);
        let (es, os) = (stride(tally.ellipse), stride(tally.outlier));
        let mut seen = (0usize, 0usize);
        let mark = text.upx(if dense { 3.0 } else { 4.0 });
        for (i, f) in d.fates.iter().enumerate() {
            let p = to_px(i);
            let inside = px.contains(&p.0) && py.contains(&p.1);
            match f {
                PointFate::Ellipse => {
                    seen.0 += 1;
                    if (seen.0 - 1).is_multiple_of(es) && inside {
                        tally.ellipse_drawn += 1;
                        root.draw(&TriangleMarker::new(p, mark, BLACK.filled()))?;
                    }
                }
                PointFate::Outlier => {
                    seen.1 += 1;
                    if (seen.1 - 1).is_multiple_of(os) && inside {
                        tally.outlier_drawn += 1;
                        let width = text.upx(if dense { 1.0 } else { 1.5 });
                        root.draw(&Cross::new(p, mark, oi::VERMILLION.stroke_width(width)))?;
                    }
                }
                PointFate::Shared(_) => {}
            }
        }

        // Ellipses of the most used Gaussians; an overview with a zoom panel beside it leaves
        // them to the zoom (on a log axis they smear down to sigma = 0).
        let chosen = if frame.is_some() { &[][..] } else { chosen };
        for &k in chosen {
            let g = &d.gaussians[k];
            // A darker shade of the Gaussian's colour over a white halo, so the outline shows
            // on top of its own weights.
            let colour = darker(colours[k % colours.len()]);
            let radii: &[(f64, bool)] = if g.cov.is_some() {
                &[(1.0, false), (2.0, true)]
            } else {
                &[]
            };
            for &(r, dashed) in radii {
                let pixels: Vec<(i32, i32)> =
                    ellipse(g, r).map(|p| chart.backend_coord(&p)).collect();
                for piece in clip(&pixels, &px, &py) {
                    let width = if dashed { 1.3 } else { 2.0 };
                    let style = colour.stroke_width(text.upx(width));
                    if dashed {
                        // No halo under dashes: it would double the SVG's dash elements.
                        root.draw(&DashedPathElement::new(
                            piece,
                            text.upx(5.0),
                            text.upx(4.0),
                            style,
                        ))?;
                    } else {
                        let halo = WHITE.stroke_width(text.upx(width + 2.0));
                        root.draw(&PathElement::new(piece.clone(), halo))?;
                        root.draw(&PathElement::new(piece, style))?;
                    }
                }
            }
            let c = chart.backend_coord(&(g.mean[0], g.mean[1]));
            if px.contains(&c.0) && py.contains(&c.1) {
                root.draw(&Circle::new(c, text.upx(4.0), WHITE.filled()))?;
                root.draw(&Circle::new(c, text.upx(3.0), colour.filled()))?;
            }
        }

        if let Some(f) = frame {
            let corners = [
                (f.x.0, f.y.0),
                (f.x.1, f.y.0),
                (f.x.1, f.y.1),
                (f.x.0, f.y.1),
                (f.x.0, f.y.0),
            ];
            let pixels: Vec<(i32, i32)> = corners
                .iter()
                .map(|&(x, y)| {
                    // A zoom reaching sigma = 0 is outlined at the bottom of a log axis.
                    let y = if view.log { y.max(view.y.0) } else { y };
                    chart.backend_coord(&(x, y))
                })
                .collect();
            root.draw(&DashedPathElement::new(
                pixels,
                text.upx(4.0),
                text.upx(3.0),
                BLACK.mix(0.6).stroke_width(text.upx(1.2)),
            ))?;
        }
        Ok(tally)
    }
}

/// A count with thousands separators, e.g. `61,706`.
fn group(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Sigma tick labels: plain decimals down to 1e-3, scientific below.
fn format_sigma(v: f64) -> String {
    // Tick values near zero come out as rounding residue (e.g. 2e-18).
    if v.abs() < 1e-9 {
        "0".into()
    } else if v.abs() >= 1e-3 {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.0e}")
    }
}

/// One colour per Gaussian (or per component index when no Gaussians are given), cycling
/// through [`COMPONENT_COLOURS`] in the order of the means' `mu`.
fn component_colours(d: &WeightsPlot<'_>) -> Vec<RGBColor> {
    if d.gaussians.is_empty() {
        let k = d
            .fates
            .iter()
            .filter_map(|f| match f {
                PointFate::Shared(k) => Some(*k as usize + 1),
                _ => None,
            })
            .max()
            .unwrap_or(1);
        return (0..k)
            .map(|i| COMPONENT_COLOURS[i % COMPONENT_COLOURS.len()])
            .collect();
    }
    let mut order: Vec<usize> = (0..d.gaussians.len()).collect();
    order.sort_by(|&a, &b| {
        d.gaussians[a].mean[0]
            .total_cmp(&d.gaussians[b].mean[0])
            .then(a.cmp(&b))
    });
    let mut colours = vec![oi::BLUE; d.gaussians.len()];
    for (rank, &k) in order.iter().enumerate() {
        colours[k] = COMPONENT_COLOURS[rank % COMPONENT_COLOURS.len()];
    }
    colours
}

/// `c` at 60 % brightness.
fn darker(c: RGBColor) -> RGBColor {
    let f = |v: u8| (f64::from(v) * 0.6).round() as u8;
    RGBColor(f(c.0), f(c.1), f(c.2))
}

/// Indices of the Gaussians to draw: the `max` with the most plain shared weights (ties to the
/// lower index), in index order.
fn chosen_gaussians(d: &WeightsPlot<'_>, max: usize) -> Vec<usize> {
    let k = d.gaussians.len();
    if k <= max {
        return (0..k).collect();
    }
    let mut counts = vec![0usize; k];
    for f in d.fates {
        if let PointFate::Shared(c) = f {
            counts[*c as usize] += 1;
        }
    }
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let mut chosen: Vec<usize> = order.into_iter().take(max).collect();
    chosen.sort_unstable();
    chosen
}

/// Points of the Mahalanobis-radius-`r` ellipse of `g` (closed: first point repeated).
fn ellipse(g: &Gaussian, r: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
    const STEPS: usize = 72;
    let [[a, b], [_, d]] = g.cov.unwrap_or([[0.0; 2]; 2]);
    // Eigen-decomposition of the symmetric 2x2 covariance.
    let mean = 0.5 * (a + d);
    let diff = (0.5 * (a - d)).hypot(b);
    let (l1, l2) = ((mean + diff).max(0.0), (mean - diff).max(0.0));
    let theta = 0.5 * (2.0 * b).atan2(a - d);
    let (s1, s2) = (r * l1.sqrt(), r * l2.sqrt());
    let (ct, st) = (theta.cos(), theta.sin());
    (0..=STEPS).map(move |i| {
        let t = i as f64 / STEPS as f64 * std::f64::consts::TAU;
        let (u, v) = (s1 * t.cos(), s2 * t.sin());
        (g.mean[0] + u * ct - v * st, g.mean[1] + u * st + v * ct)
    })
}

/// Splits a pixel polyline into the runs of consecutive points inside the plotting area.
/// Points outside (including sigma <= 0 on a log axis, which map far away) break the line.
fn clip(
    points: &[(i32, i32)],
    px: &std::ops::Range<i32>,
    py: &std::ops::Range<i32>,
) -> Vec<Vec<(i32, i32)>> {
    let mut out = Vec::new();
    let mut run = Vec::new();
    for &p in points {
        if px.contains(&p.0) && py.contains(&p.1) {
            run.push(p);
        } else if !run.is_empty() {
            if run.len() > 1 {
                out.push(std::mem::take(&mut run));
            } else {
                run.clear();
            }
        }
    }
    if run.len() > 1 {
        out.push(run);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ellipse_points_lie_at_the_radius() {
        let g = Gaussian {
            mean: [0.1, 0.02],
            cov: Some([[4e-4, 1e-5], [1e-5, 1e-6]]),
        };
        // Mahalanobis distance of every point is r.
        let [[a, b], [_, d]] = g.cov.unwrap();
        let det = a * d - b * b;
        for r in [1.0, 2.0] {
            for (x, y) in ellipse(&g, r) {
                let (dx, dy) = (x - g.mean[0], y - g.mean[1]);
                let m = (d * dx * dx - 2.0 * b * dx * dy + a * dy * dy) / det;
                assert!((m.sqrt() - r).abs() < 1e-9, "{m}");
            }
        }
    }

    #[test]
    fn clip_breaks_at_outside_points() {
        let pts = [
            (1, 1),
            (2, 2),
            (50, 2),
            (3, 3),
            (4, 4),
            (5, 5),
            (60, 60),
            (6, 6),
        ];
        let runs = clip(&pts, &(0..10), &(0..10));
        assert_eq!(
            runs,
            vec![vec![(1, 1), (2, 2)], vec![(3, 3), (4, 4), (5, 5)]]
        );
    }

    #[test]
    fn most_used_gaussians_are_chosen() {
        let g = Gaussian {
            mean: [0.0, 0.1],
            cov: Some([[1.0, 0.0], [0.0, 1.0]]),
        };
        let fates = [
            PointFate::Shared(2),
            PointFate::Shared(2),
            PointFate::Shared(0),
            PointFate::Outlier,
        ];
        let d = WeightsPlot {
            title: "",
            mu: &[0.0; 4],
            sigma: &[0.1; 4],
            fates: &fates,
            gaussians: &[g; 3],
        };
        assert_eq!(chosen_gaussians(&d, 2), vec![0, 2]);
        assert_eq!(chosen_gaussians(&d, 5), vec![0, 1, 2]);
    }

    #[test]
    fn labels() {
        assert_eq!(group(61706), "61,706");
        assert_eq!(group(999), "999");
        assert_eq!(format_sigma(0.0125), "0.0125");
        assert_eq!(format_sigma(0.0001), "1e-4");
    }
}
