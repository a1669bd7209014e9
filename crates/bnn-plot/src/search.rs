//! A compression search (`swbnn compress --auto`): each evaluated candidate's validation NLL
//! and OOD-proxy AUROC against its file's bytes, with the source network's values, the
//! margins the candidates were held to, and the file that was written.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{PlotError, Result};
use crate::output::{Figure, Size, render};
use crate::size_quality::{bytes_panel, bytes_range, log_ticks, value_range};
use crate::style::{FAMILY, GREY, Text, series_colour};

/// Why a candidate's file was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The smallest file within every margin.
    Chosen,
    /// No candidate was within the margins: the one nearest them (written only on request).
    Nearest,
}

impl Written {
    /// The word the figure labels the written point with: `chosen` or `nearest`.
    pub fn label(self) -> &'static str {
        match self {
            Written::Chosen => "chosen",
            Written::Nearest => "nearest",
        }
    }
}

/// One evaluated candidate of the search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPoint {
    /// Method name, for the legend; points with the same name share a colour and a marker
    /// (in order of first appearance).
    pub method: String,
    /// Whether its outliers are stored with 8 bits: drawn as a hollow marker.
    pub int8: bool,
    /// Size of the candidate's file in bytes (the x axis is logarithmic, so at least 1).
    pub bytes: u64,
    /// Mean negative log-likelihood on the validation split (nats).
    pub nll: f64,
    /// AUROC against the OOD proxy, in `[0, 1]`; `None` leaves the point out of the AUROC
    /// panel (the search skipped the OOD pass of a candidate already ruled out).
    pub ood_auroc: Option<f64>,
    /// Whether this candidate's file was written, and why; at most one point has it.
    pub written: Option<Written>,
}

/// What the search figure draws.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchFigure {
    /// The evaluated candidates.
    pub points: Vec<SearchPoint>,
    /// The source network's validation NLL.
    pub source_nll: f64,
    /// The source network's OOD-proxy AUROC (`None`: no source line in the AUROC panel).
    pub source_auroc: Option<f64>,
    /// How much NLL a candidate may gain: the margin line is at `source_nll + nll_margin`.
    pub nll_margin: f64,
    /// How much AUROC a candidate may lose: the margin line is at
    /// `source_auroc - auroc_margin`.
    pub auroc_margin: f64,
}

const WHAT: &str = "search figure";

/// Draws two panels side by side, validation NLL (left) and OOD-proxy AUROC (right) against
/// the candidate file's bytes on a logarithmic axis: one point per candidate, a colour and
/// marker per method (hollow for int8 outliers), the source network's value as a solid line
/// and its margin as a dashed line labelled "margin", and the written candidate ringed and
/// labelled "chosen" or "nearest"; a legend on the right. Into `path` (`.png` or `.svg`);
/// about 1300 x 500 px reads well.
///
/// # Errors
/// [`PlotError::BadInput`] for no points, a point of 0 bytes, a non-finite or negative NLL,
/// an AUROC that is not finite or outside `[0, 1]`, more than one written point, or a source
/// value or margin that is not finite (or negative, for the NLL and the margins);
/// [`PlotError::BadSize`] below 700 x 300 px; and the drawing and writing errors.
pub fn search(figure: &SearchFigure, size: Size, path: &Path) -> Result<()> {
    check(figure)?;
    render(&SearchDrawing { figure }, size, path)
}

fn check(f: &SearchFigure) -> Result<()> {
    if f.points.is_empty() {
        return Err(PlotError::bad_input(
            WHAT,
            "none given (no candidate was evaluated)",
        ));
    }
    let mut written: Option<usize> = None;
    for (i, p) in f.points.iter().enumerate() {
        let bad =
            |why: String| PlotError::bad_input(WHAT, format!("point {i} ({:?}): {why}", p.method));
        if p.bytes == 0 {
            return Err(bad(
                "a file of 0 bytes (the size axis is logarithmic)".into()
            ));
        }
        if !p.nll.is_finite() || p.nll < 0.0 {
            return Err(bad(format!(
                "NLL {} is not a finite non-negative number",
                p.nll
            )));
        }
        if let Some(a) = p.ood_auroc.filter(|a| !(0.0..=1.0).contains(a)) {
            return Err(bad(format!("OOD AUROC {a} is not a number in [0, 1]")));
        }
        if p.written.is_some() {
            if let Some(j) = written {
                return Err(bad(format!(
                    "written, but so is point {j}: one file is written"
                )));
            }
            written = Some(i);
        }
    }
    if !f.source_nll.is_finite() || f.source_nll < 0.0 {
        return Err(PlotError::bad_input(
            WHAT,
            format!(
                "the source NLL {} is not a finite non-negative number",
                f.source_nll
            ),
        ));
    }
    if let Some(a) = f.source_auroc.filter(|a| !(0.0..=1.0).contains(a)) {
        return Err(PlotError::bad_input(
            WHAT,
            format!("the source OOD AUROC {a} is not a number in [0, 1]"),
        ));
    }
    for (name, m) in [("NLL", f.nll_margin), ("OOD AUROC", f.auroc_margin)] {
        if !(m.is_finite() && m >= 0.0) {
            return Err(PlotError::bad_input(
                WHAT,
                format!("the {name} margin {m} is not a finite non-negative number"),
            ));
        }
    }
    Ok(())
}

struct SearchDrawing<'a> {
    figure: &'a SearchFigure,
}

/// One panel: its title, how to read a point's value, and the source and margin lines.
struct Panel {
    title: &'static str,
    get: fn(&SearchPoint) -> Option<f64>,
    lines: Option<(f64, f64)>,
}

impl Figure for SearchDrawing<'_> {
    const MIN_SIZE: Size = Size::new(700, 300);

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let f = self.figure;
        let (w, _) = root.dim_in_pixel();
        let text = Text::for_width(w, 1300);
        let mut methods: Vec<&str> = Vec::new();
        for p in &f.points {
            if !methods.contains(&p.method.as_str()) {
                methods.push(&p.method);
            }
        }
        let method_index = |p: &SearchPoint| {
            methods
                .iter()
                .position(|m| *m == p.method)
                .expect("every method is listed")
        };
        let any_int8 = f.points.iter().any(|p| p.int8);
        let written = f.points.iter().find_map(|p| p.written);

        // The legend's rows: the methods, then the hollow marker, the two lines and the ring.
        let mut extra: Vec<String> = Vec::new();
        if any_int8 {
            extra.push("hollow: int8 outliers".into());
        }
        extra.push("source network".into());
        extra.push("margin".into());
        if let Some(wr) = written {
            extra.push(format!("written ({})", wr.label()));
        }
        let note = (FAMILY, text.note).into_font().into_text_style(root);
        let widest = methods
            .iter()
            .copied()
            .chain(extra.iter().map(String::as_str))
            .map(|m| root.estimate_text_size(m, &note).map_or(0, |s| s.0))
            .max()
            .unwrap_or(0);
        let legend_w = (widest + text.upx(52.0)).min(w / 3);
        let (plots, legend) = root.split_horizontally(w - legend_w);
        let panels = plots.split_evenly((1, 2));

        let (xlo, xhi) = bytes_range(f.points.iter().map(|p| p.bytes));
        let ticks = log_ticks(xlo, xhi);
        let specs = [
            Panel {
                title: "validation NLL (nats)",
                get: |p| Some(p.nll),
                lines: Some((f.source_nll, f.source_nll + f.nll_margin)),
            },
            Panel {
                title: "validation OOD-proxy AUROC",
                get: |p| p.ood_auroc,
                lines: f.source_auroc.map(|s| (s, s - f.auroc_margin)),
            },
        ];
        let r = text.px(5.0);
        let stroke = text.upx(2.0);
        let label_style = (FAMILY, text.note).into_font().color(&BLACK);
        for (area, spec) in panels.iter().zip(specs) {
            let empty = !f.points.iter().any(|p| (spec.get)(p).is_some());
            // The source's line and its margin are inside the panel too.
            let range = value_range(
                f.points
                    .iter()
                    .filter_map(spec.get)
                    .chain(spec.lines.into_iter().flat_map(|(a, b)| [a, b])),
            );
            let mut chart = bytes_panel(
                area,
                spec.title,
                "file size (log scale)",
                ((xlo, xhi), &ticks),
                range.unwrap_or((0.5, 1.0)),
                &text,
            )?;
            if let Some((source, margin)) = spec.lines {
                let line = text.upx(1.5);
                chart.draw_series(LineSeries::new(
                    [(xlo, source), (xhi, source)],
                    BLACK.mix(0.7).stroke_width(line),
                ))?;
                chart.draw_series(DashedLineSeries::new(
                    [(xlo, margin), (xhi, margin)],
                    text.upx(6.0),
                    text.upx(4.0),
                    GREY.stroke_width(line),
                ))?;
                // The label sits on the line's left end, on the side away from the source line.
                let above = margin >= source;
                let v = if above { VPos::Bottom } else { VPos::Top };
                let dy = if above { -text.px(3.0) } else { text.px(3.0) };
                chart.plotting_area().draw(
                    &(EmptyElement::at((xlo, margin))
                        + plotters::element::Text::new(
                            "margin",
                            (text.px(4.0), dy),
                            label_style
                                .clone()
                                .color(&GREY)
                                .pos(Pos::new(HPos::Left, v)),
                        )),
                )?;
            }
            if empty {
                let (aw, ah) = area.dim_in_pixel();
                area.draw(&plotters::element::Text::new(
                    "no candidate has an OOD AUROC",
                    (aw as i32 / 2, ah as i32 / 2),
                    (FAMILY, text.note)
                        .into_font()
                        .color(&BLACK.mix(0.75))
                        .pos(Pos::new(HPos::Center, VPos::Center)),
                ))?;
            }
            for p in &f.points {
                let Some(y) = (spec.get)(p) else { continue };
                let at = (p.bytes as f64, y);
                chart
                    .plotting_area()
                    .draw(&marker(method_index(p), !p.int8, at, r, stroke))?;
                if let Some(wr) = p.written {
                    let ring = 2 * r + 1;
                    chart.plotting_area().draw(
                        &(EmptyElement::at(at)
                            + Circle::new((0, 0), ring, BLACK.stroke_width(stroke))
                            + plotters::element::Text::new(
                                wr.label(),
                                (ring + text.px(3.0), -ring),
                                label_style.clone().pos(Pos::new(HPos::Left, VPos::Bottom)),
                            )),
                    )?;
                }
            }
        }

        // The legend: a symbol and its meaning a row each, from the top of the panels.
        let row = text.px(24.0);
        let (x0, mut y) = (text.px(6.0), text.px(40.0));
        let sym = x0 + text.px(10.0);
        let label_at = |s: &str, y: i32| {
            plotters::element::Text::new(
                s.to_string(),
                (x0 + text.px(26.0), y),
                label_style.clone().pos(Pos::new(HPos::Left, VPos::Center)),
            )
        };
        for (i, m) in methods.iter().enumerate() {
            legend.draw(&marker(i, true, (sym, y), r, stroke))?;
            legend.draw(&label_at(m, y))?;
            y += row;
        }
        let (l0, l1) = (sym - text.px(9.0), sym + text.px(9.0));
        for s in &extra {
            match s.as_str() {
                "hollow: int8 outliers" => {
                    legend.draw(&Circle::new((sym, y), r, GREY.stroke_width(stroke)))?
                }
                "source network" => legend.draw(&PathElement::new(
                    [(l0, y), (l1, y)],
                    BLACK.mix(0.7).stroke_width(text.upx(1.5)),
                ))?,
                "margin" => {
                    let dash = (l1 - l0) / 3;
                    for (a, b) in [(l0, l0 + dash), (l1 - dash, l1)] {
                        legend.draw(&PathElement::new(
                            [(a, y), (b, y)],
                            GREY.stroke_width(text.upx(1.5)),
                        ))?;
                    }
                }
                _ => legend.draw(&Circle::new(
                    (sym, y),
                    2 * r + 1,
                    BLACK.stroke_width(stroke),
                ))?,
            }
            legend.draw(&label_at(s, y))?;
            y += row;
        }
        Ok(())
    }
}

/// Method `i`'s marker at `at`, filled or hollow: its colour is [`series_colour`]`(i)`, its
/// shape one of five (circle, triangle, square, diamond, cross), so that methods sharing a
/// colour after seven differ in shape. `r` is the half width in pixels, `stroke` the outline.
fn marker<'a, DB, C>(i: usize, filled: bool, at: C, r: i32, stroke: u32) -> DynElement<'a, DB, C>
where
    DB: DrawingBackend + 'a,
    C: Clone + 'static,
{
    let colour = series_colour(i);
    // An outline a pixel larger reads as the same size as the filled marker.
    let r = if filled { r } else { r + 1 };
    let style = if filled {
        colour.mix(0.85).filled()
    } else {
        colour.stroke_width(stroke)
    };
    match i % 5 {
        0 => Circle::new(at, r, style).into_dyn(),
        1 if filled => TriangleMarker::new(at, r + 1, style).into_dyn(),
        // plotters fills every `TriangleMarker`: the hollow one is its outline, apex up.
        1 => {
            let (s, h) = (r + 1, (f64::from(r + 1) * 0.866).round() as i32);
            (EmptyElement::at(at)
                + PathElement::new(vec![(0, -s), (h, s / 2), (-h, s / 2), (0, -s)], style))
            .into_dyn()
        }
        2 => (EmptyElement::at(at) + Rectangle::new([(-r + 1, -r + 1), (r - 1, r - 1)], style))
            .into_dyn(),
        3 if filled => (EmptyElement::at(at)
            + Polygon::new(vec![(0, -r - 1), (r, 0), (0, r + 1), (-r, 0)], style))
        .into_dyn(),
        // A polygon's outline is a closed path.
        3 => (EmptyElement::at(at)
            + PathElement::new(
                vec![(0, -r - 1), (r, 0), (0, r + 1), (-r, 0), (0, -r - 1)],
                style,
            ))
        .into_dyn(),
        // A cross has no inside: the hollow one is thinner.
        _ => Cross::new(
            at,
            r,
            colour.stroke_width(if filled { stroke } else { stroke.div_ceil(2) }),
        )
        .into_dyn(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(method: &str, int8: bool, bytes: u64, nll: f64, auroc: Option<f64>) -> SearchPoint {
        SearchPoint {
            method: method.into(),
            int8,
            bytes,
            nll,
            ood_auroc: auroc,
            written: None,
        }
    }

    /// Three methods, int8 and f32 outliers, one point without an AUROC; the qbnn one written.
    fn figure() -> SearchFigure {
        let mut points = vec![
            point("2dgbnn", true, 49_543, 0.2845, Some(0.698)),
            point("2dgbnn", false, 54_363, 0.2846, Some(0.701)),
            point("mu-only", true, 39_667, 0.2820, Some(0.723)),
            point("mu-only", false, 44_487, 0.2990, None),
            point("qbnn", false, 72_482, 0.2810, Some(0.767)),
        ];
        points[4].written = Some(Written::Chosen);
        SearchFigure {
            points,
            source_nll: 0.2855,
            source_auroc: Some(0.745),
            nll_margin: 0.01,
            auroc_margin: 0.01,
        }
    }

    #[test]
    fn search_renders_png_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let size = Size::new(1200, 480);
        for ext in ["png", "svg"] {
            let path = dir.path().join(format!("search.{ext}"));
            search(&figure(), size, &path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            if ext == "png" {
                let img = image::load_from_memory(&bytes).unwrap();
                assert_eq!((img.width(), img.height()), (1200, 480));
            } else {
                let svg = String::from_utf8(bytes).unwrap();
                for needle in [
                    "<svg",
                    "mu-only",
                    "qbnn",
                    "margin",
                    "chosen",
                    "int8 outliers",
                ] {
                    assert!(svg.contains(needle), "{needle} missing");
                }
                assert!(!svg.contains("nearest") && !svg.contains("no candidate has"));
            }
        }
        // No AUROC anywhere (nor the source's), the written one nearest, no int8 outliers.
        let mut f = figure();
        f.source_auroc = None;
        for p in &mut f.points {
            p.ood_auroc = None;
            p.int8 = false;
        }
        f.points[4].written = Some(Written::Nearest);
        let path = dir.path().join("no-auroc.svg");
        search(&f, size, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("no candidate has an OOD AUROC") && svg.contains("nearest"));
        assert!(!svg.contains("int8 outliers"));
        // Only the figures are left: no temporary files.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    #[test]
    fn search_bad_inputs_are_errors_naming_the_point() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("x.png");
        let size = Size::new(1200, 480);
        let err = |f: &SearchFigure| search(f, size, &png).unwrap_err().to_string();

        let mut f = figure();
        f.points.clear();
        assert!(err(&f).contains("none given"), "{}", err(&f));
        let mut f = figure();
        f.points[2].bytes = 0;
        let e = err(&f);
        assert!(
            e.contains("point 2 (\"mu-only\")") && e.contains("0 bytes"),
            "{e}"
        );
        let mut f = figure();
        f.points[1].nll = f64::NAN;
        let e = err(&f);
        assert!(e.contains("point 1") && e.contains("NaN"), "{e}");
        let mut f = figure();
        f.points[0].ood_auroc = Some(1.5);
        assert!(err(&f).contains("OOD AUROC 1.5"), "{}", err(&f));
        let mut f = figure();
        f.points[0].written = Some(Written::Nearest);
        let e = err(&f);
        assert!(e.contains("point 4") && e.contains("point 0"), "{e}");
        let mut f = figure();
        f.source_nll = f64::INFINITY;
        assert!(err(&f).contains("source NLL inf"), "{}", err(&f));
        let mut f = figure();
        f.source_auroc = Some(f64::NAN);
        assert!(err(&f).contains("source OOD AUROC NaN"), "{}", err(&f));
        let mut f = figure();
        f.auroc_margin = -0.1;
        assert!(err(&f).contains("OOD AUROC margin -0.1"), "{}", err(&f));
        let e = search(&figure(), Size::new(500, 480), &png).unwrap_err();
        assert!(matches!(e, PlotError::BadSize { .. }), "{e}");
        // Nothing was written by the failed calls.
        assert!(!png.exists());
    }
}
