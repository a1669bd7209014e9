//! Model size against quality: NLL and OOD AUROC against the bytes of the saved model file,
//! one point per method and seed, for comparing compressions of about the same size.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::output::{Figure, Size, render};
use crate::style::{FAMILY, Text, series_colour};

/// One model (a method trained with one seed): the size of its file and its quality.
#[derive(Debug, Clone, PartialEq)]
pub struct SizePoint {
    /// Method name, for the legend; points with the same name share a colour and a marker.
    pub method: String,
    /// Size of the saved model file in bytes (the x axis is logarithmic, so at least 1).
    pub bytes: u64,
    /// Mean negative log-likelihood on the test set (nats).
    pub nll: f64,
    /// OOD AUROC with the predictive-entropy score, in `[0, 1]`; `None` leaves the point out
    /// of the AUROC panel (a model evaluated without an OOD set).
    pub ood_auroc: Option<f64>,
}

/// Draws two panels side by side, NLL (left) and OOD AUROC by predictive entropy (right)
/// against the model file's bytes on a logarithmic axis, with one point per entry of `points`
/// and one colour and marker per method (in order of first appearance, named in a legend on
/// the right), into `path` (`.png` or `.svg`). About 1300 x 500 px reads well. When no point
/// has an AUROC, the right panel says so.
///
/// # Errors
/// [`PlotError::BadInput`] for no points, a point of 0 bytes, a non-finite or negative NLL,
/// or an AUROC that is not finite or outside `[0, 1]`; [`PlotError::BadSize`] below
/// 700 x 300 px; and the drawing and writing errors.
pub fn size_quality(points: &[SizePoint], size: Size, path: &Path) -> Result<()> {
    if points.is_empty() {
        return Err(PlotError::bad_input("size-quality points", "none given"));
    }
    for (i, p) in points.iter().enumerate() {
        if p.bytes == 0 {
            return Err(PlotError::bad_input(
                "size-quality points",
                format!(
                    "point {i} ({:?}): a file of 0 bytes (the size axis is logarithmic)",
                    p.method
                ),
            ));
        }
        if !p.nll.is_finite() || p.nll < 0.0 {
            return Err(PlotError::bad_input(
                "size-quality points",
                format!(
                    "point {i} ({:?}): NLL {} is not a finite non-negative number",
                    p.method, p.nll
                ),
            ));
        }
        if let Some(a) = p.ood_auroc.filter(|a| !(0.0..=1.0).contains(a)) {
            return Err(PlotError::bad_input(
                "size-quality points",
                format!(
                    "point {i} ({:?}): OOD AUROC {a} is not a number in [0, 1]",
                    p.method
                ),
            ));
        }
    }
    render(&SizeQuality { points }, size, path)
}

struct SizeQuality<'a> {
    points: &'a [SizePoint],
}

/// Picks one metric of a point, if it has it.
type Metric = fn(&SizePoint) -> Option<f64>;

impl Figure for SizeQuality<'_> {
    const MIN_SIZE: Size = Size::new(700, 300);

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, _) = root.dim_in_pixel();
        let text = Text::for_width(w, 1300);
        let mut methods: Vec<&str> = Vec::new();
        for p in self.points {
            if !methods.contains(&p.method.as_str()) {
                methods.push(&p.method);
            }
        }
        let method_index = |p: &SizePoint| {
            methods
                .iter()
                .position(|m| *m == p.method)
                .expect("every method is listed")
        };

        // The legend column is as wide as its longest name, at most a third of the figure.
        let note = (FAMILY, text.note).into_font().into_text_style(root);
        let widest = methods
            .iter()
            .map(|m| root.estimate_text_size(m, &note).map_or(0, |s| s.0))
            .max()
            .unwrap_or(0);
        let legend_w = (widest + text.upx(52.0)).min(w / 3);
        let (plots, legend) = root.split_horizontally(w - legend_w);
        let panels = plots.split_evenly((1, 2));

        let (xlo, xhi) = bytes_range(self.points.iter().map(|p| p.bytes));
        let ticks = log_ticks(xlo, xhi);
        let metrics: [(&str, Metric); 2] = [
            ("NLL (nats)", |p| Some(p.nll)),
            ("OOD AUROC (predictive entropy)", |p| p.ood_auroc),
        ];
        let r = text.px(5.0);
        for (area, (name, get)) in panels.iter().zip(metrics) {
            let range = value_range(self.points.iter().filter_map(get));
            let empty = range.is_none();
            let chart = bytes_panel(
                area,
                name,
                "model file size (log scale)",
                ((xlo, xhi), &ticks),
                range.unwrap_or((0.5, 1.0)),
                &text,
            )?;
            if empty {
                let (aw, ah) = area.dim_in_pixel();
                area.draw(&plotters::element::Text::new(
                    "no model has an OOD AUROC",
                    (aw as i32 / 2, ah as i32 / 2),
                    (FAMILY, text.note).into_font().color(&BLACK.mix(0.75)).pos(
                        plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Center,
                            plotters::style::text_anchor::VPos::Center,
                        ),
                    ),
                ))?;
            }
            for p in self.points {
                let Some(y) = get(p) else { continue };
                let i = method_index(p);
                chart
                    .plotting_area()
                    .draw(&marker(i, (p.bytes as f64, y), r, text.upx(2.0)))?;
            }
        }

        // The legend: a marker and the method's name a row each, from the top of the panels.
        let row = text.px(24.0);
        let (x0, mut y) = (text.px(6.0), text.px(40.0));
        for (i, m) in methods.iter().enumerate() {
            legend.draw(&marker(i, (x0 + text.px(10.0), y), r, text.upx(2.0)))?;
            legend.draw(&plotters::element::Text::new(
                m.to_string(),
                (x0 + text.px(26.0), y),
                (FAMILY, text.note).into_font().color(&BLACK).pos(
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
}

/// Method `i`'s marker at `at`: its colour is [`series_colour`]`(i)`, its shape one of five
/// (filled circle, triangle, square, diamond, cross), so that methods sharing a colour after
/// seven differ in shape. `r` is the marker's half width in pixels, `stroke` the cross's line.
fn marker<'a, DB, C>(i: usize, at: C, r: i32, stroke: u32) -> DynElement<'a, DB, C>
where
    DB: DrawingBackend + 'a,
    C: Clone + 'static,
{
    let colour = series_colour(i);
    let fill = colour.mix(0.85).filled();
    match i % 5 {
        0 => Circle::new(at, r, fill).into_dyn(),
        1 => TriangleMarker::new(at, r + 1, fill).into_dyn(),
        2 => (EmptyElement::at(at) + Rectangle::new([(-r + 1, -r + 1), (r - 1, r - 1)], fill))
            .into_dyn(),
        3 => (EmptyElement::at(at)
            + Polygon::new(vec![(0, -r - 1), (r, 0), (0, r + 1), (-r, 0)], fill))
        .into_dyn(),
        _ => Cross::new(at, r, colour.stroke_width(stroke)).into_dyn(),
    }
}

/// The x range of a panel of file sizes: the smallest and largest of `bytes`, widened by a
/// quarter on the log axis so that no point sits on the frame.
pub(crate) fn bytes_range(bytes: impl Iterator<Item = u64>) -> (f64, f64) {
    let (lo, hi) = bytes.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), b| {
        let b = b as f64;
        (lo.min(b), hi.max(b))
    });
    (lo / 1.25, hi * 1.25)
}

/// The y range of a panel holding `values`, padded by 8 % (at least 0.001); `None` when there
/// is none (the panel then draws on 0.5..1 and says so).
pub(crate) fn value_range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    (lo <= hi).then(|| {
        let pad = ((hi - lo) * 0.08).max(1e-3);
        (lo - pad, hi + pad)
    })
}

/// The chart of [`bytes_panel`]: a log axis of bytes with key points, a linear value axis.
pub(crate) type BytesChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<
        plotters::coord::combinators::WithKeyPoints<plotters::coord::combinators::LogCoord<f64>>,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// A panel with the file size on a log x axis (`x`, labelled at `ticks`) and a value on y
/// (`y`, cut at 0), titled `title`, its mesh drawn: what the size-quality and search figures
/// share.
pub(crate) fn bytes_panel<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    (x, ticks): ((f64, f64), &[f64]),
    (ylo, yhi): (f64, f64),
    text: &Text,
) -> Result<BytesChart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FAMILY, text.title))
        .margin(text.px(10.0))
        .x_label_area_size(text.px(46.0))
        .y_label_area_size(text.px(62.0))
        .build_cartesian_2d(
            (x.0..x.1).log_scale().with_key_points(ticks.to_vec()),
            ylo.max(0.0)..yhi,
        )?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_labels(6)
        .x_label_formatter(&|v| bytes_label(*v))
        .label_style((FAMILY, text.tick))
        .axis_desc_style((FAMILY, text.label))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .draw()?;
    Ok(chart)
}

/// Ticks of a logarithmic axis over `lo..hi` (both positive): the 1, 2 and 5 of each decade
/// inside it (only the powers of ten when that makes more than eight), else every whole
/// multiple of a power of ten inside it; the two ends and their middle for a range too
/// narrow for any of these to give two ticks.
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let steps = |mults: &[f64]| {
        let mut out = Vec::new();
        let mut e = lo.log10().floor() as i32;
        while 10f64.powi(e) <= hi {
            for m in mults {
                let v = m * 10f64.powi(e);
                if (lo..=hi).contains(&v) {
                    out.push(v);
                }
            }
            e += 1;
        }
        out
    };
    let mut ticks = steps(&[1.0, 2.0, 5.0]);
    if ticks.len() > 8 {
        ticks.retain(|v| (v.log10() - v.log10().round()).abs() < 1e-9);
    }
    if ticks.len() < 2 {
        ticks = steps(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    }
    if ticks.len() < 2 {
        ticks = vec![lo, (lo * hi).sqrt(), hi];
    }
    ticks
}

/// A byte count with a decimal unit (B, kB, MB, GB) and at most three significant digits.
pub(crate) fn bytes_label(v: f64) -> String {
    let (scaled, unit) = [(1e9, "GB"), (1e6, "MB"), (1e3, "kB")]
        .into_iter()
        .find(|(d, _)| v >= *d)
        .map_or((v, "B"), |(d, u)| (v / d, u));
    let decimals = if scaled >= 100.0 {
        0
    } else if scaled >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{scaled:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(method: &str, bytes: u64, nll: f64, ood_auroc: Option<f64>) -> SizePoint {
        SizePoint {
            method: method.into(),
            bytes,
            nll,
            ood_auroc,
        }
    }

    /// Three methods of two seeds each, one without an AUROC.
    fn points() -> Vec<SizePoint> {
        vec![
            point("2dgbnn", 21_000, 0.41, Some(0.88)),
            point("2dgbnn", 21_400, 0.43, Some(0.86)),
            point("1-D sharing", 19_800, 0.52, Some(0.81)),
            point("1-D sharing", 20_100, 0.50, None),
            point("bbb (f32)", 1_740_000, 0.38, Some(0.90)),
            point("bbb (f32)", 1_740_000, 0.39, Some(0.89)),
        ]
    }

    #[test]
    fn size_quality_renders_png_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let size = Size::new(1100, 450);
        for ext in ["png", "svg"] {
            let path = dir.path().join(format!("size-quality.{ext}"));
            size_quality(&points(), size, &path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            if ext == "png" {
                let img = image::load_from_memory(&bytes).unwrap();
                assert_eq!((img.width(), img.height()), (1100, 450));
            } else {
                let svg = String::from_utf8(bytes).unwrap();
                assert!(svg.contains("<svg") && svg.contains("1-D sharing"), "{svg}");
                assert!(svg.contains("OOD AUROC"));
            }
        }
        // Without any AUROC the right panel says so.
        let path = dir.path().join("no-auroc.svg");
        let none: Vec<SizePoint> = points()
            .into_iter()
            .map(|p| SizePoint {
                ood_auroc: None,
                ..p
            })
            .collect();
        size_quality(&none, size, &path).unwrap();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("no model has an OOD AUROC")
        );
        // Only the figures are left: no temporary files.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    #[test]
    fn size_quality_bad_inputs_are_errors_naming_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("x.png");
        let size = Size::new(1100, 450);
        let e = size_quality(&[], size, &png).unwrap_err();
        assert!(e.to_string().contains("none given"), "{e}");
        let mut p = points();
        p[1].nll = f64::NAN;
        let e = size_quality(&p, size, &png).unwrap_err();
        assert!(matches!(e, PlotError::BadInput { .. }), "{e}");
        assert!(
            e.to_string().contains("point 1") && e.to_string().contains("NaN"),
            "{e}"
        );
        let mut p = points();
        p[2].ood_auroc = Some(f64::INFINITY);
        let e = size_quality(&p, size, &png).unwrap_err();
        assert!(e.to_string().contains("OOD AUROC inf"), "{e}");
        let mut p = points();
        p[3].bytes = 0;
        let e = size_quality(&p, size, &png).unwrap_err();
        assert!(e.to_string().contains("0 bytes"), "{e}");
        let e = size_quality(&points(), Size::new(500, 450), &png).unwrap_err();
        assert!(matches!(e, PlotError::BadSize { .. }), "{e}");
        // Nothing was written by the failed calls.
        assert!(!png.exists());
    }

    #[test]
    fn log_ticks_and_byte_labels() {
        assert_eq!(log_ticks(15_000.0, 2_500_000.0).len(), 7);
        assert_eq!(log_ticks(1_000.0, 1e9), [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9]);
        assert_eq!(log_ticks(40_000.0, 75_000.0), [40e3, 50e3, 60e3, 70e3]);
        assert_eq!(log_ticks(1_100.0, 1_700.0).len(), 3);
        assert_eq!(bytes_label(20_000.0), "20 kB");
        assert_eq!(bytes_label(1_500_000.0), "1.5 MB");
        assert_eq!(bytes_label(512.0), "512 B");
        assert_eq!(bytes_label(123_456.0), "123 kB");
    }
}
