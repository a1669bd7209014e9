//! The figure of `compress --auto`'s search ([`swbnn_ops::search::SearchReport`]), for
//! `swbnn plot search` and the report of a reproduction's `auto` table.

use std::path::Path;

use bnn_plot::{SearchFigure, SearchPoint, Size, Written};
use swbnn_ops::search::{CandidateMethod, SearchReport, Verdict};

use crate::Error;
use crate::store;

/// Size of the search figure.
pub const SEARCH_SIZE: Size = Size::new(1300, 500);

/// A `*.search.json` file of `swbnn compress --auto` ([`SearchReport`]).
///
/// # Errors
/// [`Error::Parse`] (naming the file) for a file that is not JSON or not a search report;
/// [`Error::Io`] for one that cannot be read.
pub fn read_search_report(path: &Path) -> Result<SearchReport, Error> {
    store::read_json(path)
}

/// The search figure's data: one point per evaluated candidate (by method, 2DGBNN then
/// mu-only then the quantised BNNs, so that each keeps its colour; smallest file first), the
/// source network's NLL and AUROC and the NLL and AUROC margins of the search.
///
/// # Errors
/// [`Error::Usage`] when no candidate was evaluated, when the report's written candidate is
/// not one of its candidates, was not evaluated, or is neither chosen nor nearest, or when a
/// validation NLL or AUROC is out of range (naming the candidate by its index in the file).
pub fn search_data(report: &SearchReport) -> Result<SearchFigure, Error> {
    let n = report.candidates.len();
    let written = match report.written {
        None => None,
        Some(i) => {
            let c = report.candidates.get(i).ok_or_else(|| {
                Error::Usage(format!(
                    "the written candidate is number {i}, but the search lists {n} (0 to {})",
                    n.saturating_sub(1)
                ))
            })?;
            let why = match c.verdict {
                Verdict::Chosen => Written::Chosen,
                Verdict::Nearest => Written::Nearest,
                ref v => {
                    return Err(Error::Usage(format!(
                        "the written candidate {i} ({}) has the verdict {v:?}, not chosen or \
                         nearest",
                        c.label()
                    )));
                }
            };
            if c.validation.is_none() {
                return Err(Error::Usage(format!(
                    "the written candidate {i} ({}) has no validation metrics",
                    c.label()
                )));
            }
            Some((i, why))
        }
    };
    let rank = |m: CandidateMethod| match m {
        CandidateMethod::Gbnn2d => 0,
        CandidateMethod::MuOnly => 1,
        CandidateMethod::Qbnn => 2,
    };
    let mut evaluated: Vec<_> = report
        .candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.validation.map(|v| (i, c, v)))
        .collect();
    if evaluated.is_empty() {
        return Err(Error::Usage(format!(
            "none of the search's {n} candidates was evaluated: nothing to draw"
        )));
    }
    // Checked here too, so that the error names the candidate by its place in the file.
    let source = std::iter::once(("the source network".to_string(), report.source));
    let named = evaluated
        .iter()
        .map(|(i, c, v)| (format!("candidate {i} ({})", c.label()), *v));
    for (who, v) in source.chain(named) {
        if !(v.nll.is_finite() && v.nll >= 0.0) {
            return Err(Error::Usage(format!(
                "{who}: validation NLL {} is not a finite non-negative number",
                v.nll
            )));
        }
        if let Some(a) = v.ood_auroc.filter(|a| !(0.0..=1.0).contains(a)) {
            return Err(Error::Usage(format!(
                "{who}: validation OOD AUROC {a} is not a number in [0, 1]"
            )));
        }
    }
    evaluated.sort_by_key(|(i, c, _)| (rank(c.method), c.bytes, *i));
    let points = evaluated
        .into_iter()
        .map(|(i, c, v)| SearchPoint {
            method: search_method_label(c.method).into(),
            int8: c.int8_outliers,
            bytes: c.bytes,
            nll: v.nll,
            ood_auroc: v.ood_auroc,
            written: written.filter(|(w, _)| *w == i).map(|(_, why)| why),
        })
        .collect();
    let margins = &report.config.margins;
    Ok(SearchFigure {
        points,
        source_nll: report.source.nll,
        source_auroc: report.source.ood_auroc,
        nll_margin: margins.nll,
        auroc_margin: margins.ood_auroc,
    })
}

/// How a search candidate's method is called in the search figure's legend.
fn search_method_label(m: CandidateMethod) -> &'static str {
    match m {
        CandidateMethod::Gbnn2d => "2DGBNN",
        CandidateMethod::MuOnly => "1-D sharing (mu only)",
        CandidateMethod::Qbnn => "QBNN",
    }
}

/// The search figure of `report` at [`SEARCH_SIZE`] into `path` (`.png` or `.svg`): file
/// bytes against validation NLL and OOD-proxy AUROC, one point per evaluated candidate, with
/// the source network's values, the margins and the written candidate ([`search_data`]).
pub fn search_figure(report: &SearchReport, path: &Path) -> Result<(), Error> {
    bnn_plot::search(&search_data(report)?, SEARCH_SIZE, path).map_err(crate::plot_error)
}
