//! The figures of `swbnn plot` and of a reproduction's report, drawn by [`bnn_plot`] from
//! predictions and sharing plans: this module turns them into the plotting crate's plain data.

use std::path::Path;

use bnn_metrics::{DEFAULT_N_BINS, reliability_diagram};
use bnn_plot::{
    CorruptionSeries, Gaussian, OodPlot, PerClassPlot, PointFate, ReliabilityPanel, Size,
    SizePoint, Uncertainties, WeightsOptions, WeightsPlot,
};
use bnn_train::Predictions;
use swshare::format::SharedModelData;
use swshare::{SharingPlan, WeightFate, WeightTable};

use crate::Error;
use crate::results::CorruptionRow;
use crate::store;
use crate::tables::{TableId, TableRow};

// In a module of its own, which the tables' report also draws with: figures reads the tables.
pub use crate::search_figure::{SEARCH_SIZE, read_search_report, search_data, search_figure};

/// Size of one reliability column; the figure is as wide as its columns.
pub const RELIABILITY_COLUMN: Size = Size::new(450, 620);
/// Size of the OOD figure.
pub const OOD_SIZE: Size = Size::new(1100, 800);
/// Size of the weights figure.
pub const WEIGHTS_SIZE: Size = Size::new(1100, 750);
/// Size of the per-class figure.
pub const PER_CLASS_SIZE: Size = Size::new(1100, 600);
/// Size of the corruptions figure.
pub const CORRUPTIONS_SIZE: Size = Size::new(1300, 450);
/// Size of the size-quality figure.
pub const SIZE_QUALITY_SIZE: Size = Size::new(1300, 500);
/// Size of a regression network's coverage figure.
pub const COVERAGE_SIZE: Size = Size::new(600, 560);

/// A model's predictions on the test set and, if there is one, the OOD set.
#[derive(Debug, Clone)]
pub struct ModelPredictions {
    /// Name in titles and legends, e.g. `"2DGBNN"`.
    pub label: String,
    /// Test-set predictions.
    pub test: Predictions,
    /// OOD-set predictions.
    pub ood: Option<Predictions>,
}

/// The default size of the reliability figure of `n` models.
pub fn reliability_size(n: usize) -> Size {
    Size::new(
        RELIABILITY_COLUMN.width * n.max(1) as u32,
        RELIABILITY_COLUMN.height,
    )
}

/// Reliability diagrams of `models`, side by side (15 bins, as the table's ECE).
pub fn reliability(models: &[ModelPredictions], size: Size, path: &Path) -> Result<(), Error> {
    let diagrams = models
        .iter()
        .map(|m| {
            reliability_diagram(
                m.test.predictive.probabilities(),
                &m.test.labels,
                DEFAULT_N_BINS,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let panels: Vec<ReliabilityPanel> = models
        .iter()
        .zip(&diagrams)
        .map(|(m, d)| ReliabilityPanel {
            name: &m.label,
            diagram: d,
        })
        .collect();
    bnn_plot::reliability(&panels, size, path).map_err(crate::plot_error)
}

/// Max-probability of every row.
pub fn max_prob(p: &Predictions) -> Vec<f64> {
    let probs = p.predictive.probabilities();
    probs
        .as_slice()
        .chunks(probs.classes())
        .map(|r| f64::from(r.iter().copied().fold(0.0f32, f32::max)))
        .collect()
}

/// The OOD figure of one model: `in_name` vs `out_name`.
pub fn ood(
    model: &ModelPredictions,
    in_name: &str,
    out_name: &str,
    size: Size,
    path: &Path,
) -> Result<(), Error> {
    let out = model.ood.as_ref().ok_or_else(|| {
        Error::Usage(format!(
            "{}: no out-of-distribution predictions (give an OOD data set)",
            model.label
        ))
    })?;
    let (in_max, out_max) = (max_prob(&model.test), max_prob(out));
    let title = format!("{}: {in_name} (in) vs {out_name} (OOD)", model.label);
    let plot = OodPlot {
        title: &title,
        in_name: &format!("{in_name} (in)"),
        out_name: &format!("{out_name} (OOD)"),
        in_dist: Uncertainties {
            max_prob: &in_max,
            entropy: model.test.predictive.entropy(),
            mutual_information: model.test.predictive.mutual_information(),
        },
        out_dist: Uncertainties {
            max_prob: &out_max,
            entropy: out.predictive.entropy(),
            mutual_information: out.predictive.mutual_information(),
        },
    };
    bnn_plot::ood(&plot, size, path).map_err(crate::plot_error)
}

/// Box plots of the test-set confidence (max-probability) per true class.
pub fn per_class(
    model: &ModelPredictions,
    class_names: &[String],
    size: Size,
    path: &Path,
) -> Result<(), Error> {
    let conf = max_prob(&model.test);
    let title = format!("{}: confidence per class (test set)", model.label);
    let plot = PerClassPlot {
        title: &title,
        class_names,
        class_axis: "true class",
        value_axis: "confidence (max. probability)",
        confidence: &conf,
        class: &model.test.labels,
    };
    bnn_plot::per_class(&plot, size, path).map_err(crate::plot_error)
}

/// A method's metrics on the clean test set (severity 0 of the corruptions figure).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanMetrics {
    /// `deterministic`, `bbb` or `2dgbnn`.
    pub method: String,
    /// Accuracy.
    pub accuracy: f64,
    /// Mean negative log-likelihood.
    pub nll: f64,
    /// ECE, 15 bins.
    pub ece: f64,
}

/// One line per method (in the order of `rows`) for the corruptions figure: severity 0 is the
/// clean test set (from `clean`, if it has the method), each higher severity the mean over
/// the corruption kinds evaluated at it, as Ovadia et al. (2019) summarise a severity.
pub fn corruption_series(
    clean: &[CleanMetrics],
    rows: &[CorruptionRow],
) -> Result<Vec<CorruptionSeries>, Error> {
    if rows.is_empty() {
        return Err(Error::Usage(
            "no corruption results (run `cargo xtask reproduce` with --corruptions)".into(),
        ));
    }
    let mut methods: Vec<&str> = Vec::new();
    for r in rows {
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
    }
    let mut series = Vec::with_capacity(methods.len());
    for m in methods {
        let mut s = CorruptionSeries {
            name: method_label(m),
            severity: Vec::new(),
            accuracy: Vec::new(),
            nll: Vec::new(),
            ece: Vec::new(),
        };
        if let Some(c) = clean.iter().find(|c| c.method == m) {
            s.severity.push(0.0);
            s.accuracy.push(c.accuracy);
            s.nll.push(c.nll);
            s.ece.push(c.ece);
        }
        let mine: Vec<&CorruptionRow> = rows.iter().filter(|r| r.method == m).collect();
        let mut severities: Vec<u8> = mine.iter().map(|r| r.corruption.severity()).collect();
        severities.sort_unstable();
        severities.dedup();
        for sev in severities {
            let at: Vec<&&CorruptionRow> = mine
                .iter()
                .filter(|r| r.corruption.severity() == sev)
                .collect();
            let mean = |f: fn(&CorruptionRow) -> f64| {
                at.iter().map(|r| f(r)).sum::<f64>() / at.len() as f64
            };
            s.severity.push(f64::from(sev));
            s.accuracy.push(mean(|r| r.accuracy));
            s.nll.push(mean(|r| r.nll));
            s.ece.push(mean(|r| r.ece));
        }
        series.push(s);
    }
    Ok(series)
}

/// Metrics against corruption severity, one line per method.
pub fn corruptions(series: &[CorruptionSeries], size: Size, path: &Path) -> Result<(), Error> {
    bnn_plot::corruptions(series, size, path).map_err(crate::plot_error)
}

/// The points of the size-quality figure from the run directory `dir` of `cargo xtask
/// reproduce --tables equal-size`: one per row of the `equal-size` table in each seed of its
/// `tables.json` (every seed, or only seed `seed`), named by the row's label (a method's name
/// as in titles: `2dgbnn` -> `2DGBNN`).
///
/// # Errors
/// [`Error::Usage`] when `dir` is not a directory, has no `tables.json`, has no seed `seed`
/// or no `equal-size` rows; [`Error::Parse`] and [`Error::Io`] for a file that cannot be read.
pub fn size_quality_points(dir: &Path, seed: Option<usize>) -> Result<Vec<SizePoint>, Error> {
    /// One seed's outcome in `tables.json`: only its rows are read.
    #[derive(serde::Deserialize)]
    struct SeedTables {
        rows: Vec<TableRow>,
    }
    /// `tables.json`: only the outcome of each seed is read.
    #[derive(serde::Deserialize)]
    struct TablesFile {
        seeds: Vec<SeedTables>,
    }
    let table = TableId::EqualSize;
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "{}: the size-quality figure needs the run directory of `cargo xtask reproduce \
             --tables {table}`",
            dir.display()
        )));
    }
    let path = dir.join(store::TABLES_JSON);
    if !path.exists() {
        return Err(Error::Usage(format!(
            "{}: not found; it is written by `cargo xtask reproduce` with `--tables {table}`",
            path.display()
        )));
    }
    let file: TablesFile = store::read_json(&path)?;
    let n = file.seeds.len();
    let seeds: Vec<&SeedTables> = match seed {
        Some(i) => vec![file.seeds.get(i).ok_or_else(|| {
            Error::Usage(format!(
                "--seed {i}: {} holds {n} seed{} (0 to {})",
                path.display(),
                if n == 1 { "" } else { "s" },
                n.saturating_sub(1)
            ))
        })?],
        None => file.seeds.iter().collect(),
    };
    let points: Vec<SizePoint> = seeds
        .iter()
        .flat_map(|s| &s.rows)
        .filter(|r| r.table == table)
        .map(|r| SizePoint {
            method: method_label(&r.label),
            bytes: r.row.model_bytes,
            nll: r.row.nll,
            ood_auroc: r.row.ood_auroc_entropy,
        })
        .collect();
    if points.is_empty() {
        return Err(Error::Usage(format!(
            "{}: no {table} rows; run `cargo xtask reproduce` with `--tables {table}`",
            path.display()
        )));
    }
    Ok(points)
}

/// NLL and OOD AUROC (predictive entropy) against the model file's bytes, one point per
/// method and seed ([`size_quality_points`]).
pub fn size_quality(points: &[SizePoint], size: Size, path: &Path) -> Result<(), Error> {
    bnn_plot::size_quality(points, size, path).map_err(crate::plot_error)
}

/// The paper's view of weight sharing: every shareable weight at its `(mu, sigma)` before
/// sharing (the Bayes-by-Backprop posterior the plan was built from), coloured by its fate,
/// with the plan's Gaussians. `layer` restricts it to one layer (by path).
pub fn weights_from_plan(
    table: &WeightTable,
    plan: &SharingPlan,
    layer: Option<&str>,
    title: &str,
    options: &WeightsOptions,
    size: Size,
    path: &Path,
) -> Result<(), Error> {
    if plan.fates.len() != table.n_shareable() {
        return Err(Error::Usage(format!(
            "the sharing plan covers {} weights but the model has {} shareable weights: \
             the plan belongs to another model",
            plan.fates.len(),
            table.n_shareable()
        )));
    }
    // Shareable positions of each shareable layer, in table order.
    let mut ranges = Vec::new();
    let mut pos = 0;
    for l in table.layers().iter().filter(|l| l.shareable) {
        ranges.push((l.path.as_str(), l.range(), pos..pos + l.len));
        pos += l.len;
    }
    let chosen: Vec<_> = match layer {
        None => ranges,
        Some(name) => {
            let r: Vec<_> = ranges.into_iter().filter(|(p, _, _)| *p == name).collect();
            if r.is_empty() {
                return Err(Error::Usage(format!(
                    "no shareable layer {name:?}; the layers are: {}",
                    shareable_layer_names(table).join(", ")
                )));
            }
            r
        }
    };
    let (mut mu, mut sigma, mut fates) = (Vec::new(), Vec::new(), Vec::new());
    for (_, flat, shareable) in chosen {
        mu.extend_from_slice(&table.mu()[flat.clone()]);
        sigma.extend_from_slice(&table.sigma()[flat]);
        fates.extend(plan.fates[shareable].iter().map(|f| point_fate(*f)));
    }
    let gaussians: Vec<Gaussian> = plan
        .codebook
        .iter()
        .map(|e| {
            let (m, c) = (e.gaussian.mean(), e.gaussian.cov());
            Gaussian {
                mean: [m.x, m.y],
                cov: Some([[c[(0, 0)], c[(0, 1)]], [c[(1, 0)], c[(1, 1)]]]),
            }
        })
        .collect();
    let data = WeightsPlot {
        title,
        mu: &mu,
        sigma: &sigma,
        fates: &fates,
        gaussians: &gaussians,
    };
    bnn_plot::weights(&data, options, size, path).map_err(crate::plot_error)
}

/// The weights of a `.swb` file after stage-3 retraining: a plain shared weight sits at its
/// Gaussian's trained `(mu, sigma)`, an ellipse weight at its moment-matched blend (as the
/// shared layers sample it), an outlier at its own. The file keeps no covariances, so the
/// Gaussians are drawn as centres without ellipses.
pub fn weights_from_swb(
    data: &SharedModelData,
    layer: Option<&str>,
    title: &str,
    options: &WeightsOptions,
    size: Size,
    path: &Path,
) -> Result<(), Error> {
    data.validate()
        .map_err(swshare::FormatError::InvalidModel)?;
    let sigma_of = |rho: f32| bnn_layers::softplus(f64::from(rho));
    let (mut mu, mut sigma, mut fates) = (Vec::new(), Vec::new(), Vec::new());
    let (mut next_ellipse, mut next_outlier) = (0usize, 0usize);
    let mut pos = 0usize;
    let mut found = layer.is_none();
    for l in &data.layers {
        let n: usize = l.shape.iter().product();
        let take = layer.is_none_or(|name| name == l.path);
        found |= take;
        for f in &data.fates[pos..pos + n] {
            let (m, s) = match *f {
                WeightFate::Shared(k) => (
                    f64::from(data.codebook_mu[k as usize]),
                    sigma_of(data.codebook_rho[k as usize]),
                ),
                WeightFate::Ellipse(_) => {
                    let e = &data.ellipses[next_ellipse];
                    next_ellipse += 1;
                    let pick = |k: u32| {
                        (
                            f64::from(data.codebook_mu[k as usize]),
                            sigma_of(data.codebook_rho[k as usize]),
                        )
                    };
                    let mean: f64 = e
                        .components
                        .iter()
                        .zip(&e.alphas)
                        .map(|(&k, &a)| f64::from(a) * pick(k).0)
                        .sum();
                    let var: f64 = e
                        .components
                        .iter()
                        .zip(&e.alphas)
                        .map(|(&k, &a)| {
                            let (m, s) = pick(k);
                            f64::from(a) * (s * s + (m - mean).powi(2))
                        })
                        .sum();
                    (mean, var.max(0.0).sqrt())
                }
                WeightFate::Outlier(_) => {
                    let i = next_outlier;
                    next_outlier += 1;
                    (f64::from(data.outlier_mu[i]), sigma_of(data.outlier_rho[i]))
                }
            };
            if take {
                mu.push(m as f32);
                sigma.push(s as f32);
                fates.push(point_fate(*f));
            }
        }
        pos += n;
    }
    if !found {
        let names: Vec<&str> = data.layers.iter().map(|l| l.path.as_str()).collect();
        return Err(Error::Usage(format!(
            "no shared layer {:?}; the layers are: {}",
            layer.unwrap_or_default(),
            names.join(", ")
        )));
    }
    let centres: Vec<Gaussian> = data
        .codebook_mu
        .iter()
        .zip(&data.codebook_rho)
        .map(|(&m, &r)| Gaussian {
            mean: [f64::from(m), sigma_of(r)],
            cov: None,
        })
        .collect();
    let plot = WeightsPlot {
        title,
        mu: &mu,
        sigma: &sigma,
        fates: &fates,
        gaussians: &centres,
    };
    bnn_plot::weights(&plot, options, size, path).map_err(crate::plot_error)
}

fn point_fate(f: WeightFate) -> PointFate {
    match f {
        WeightFate::Shared(k) => PointFate::Shared(k),
        WeightFate::Ellipse(_) => PointFate::Ellipse,
        WeightFate::Outlier(_) => PointFate::Outlier,
    }
}

/// Paths of the shareable layers of a table.
pub fn shareable_layer_names(table: &WeightTable) -> Vec<String> {
    table
        .layers()
        .iter()
        .filter(|l| l.shareable)
        .map(|l| l.path.clone())
        .collect()
}

/// Class names of a data set of `classes` classes: a preset's, a class folder's sub-folder
/// names, else the indices.
pub fn class_names(dataset: &bnn_data::DataSource, classes: usize) -> Result<Vec<String>, Error> {
    use bnn_data::{DataSource, DatasetId};
    let id = match dataset {
        DataSource::Folder(dir) => return Ok(bnn_data::folder_classes(dir)?),
        DataSource::Npz(_) | DataSource::Csv(_) => {
            return Ok((0..classes).map(|i| i.to_string()).collect());
        }
        DataSource::Preset(id) => *id,
    };
    let names: &[&str] = match id {
        DatasetId::FashionMnist => &[
            "T-shirt/top",
            "Trouser",
            "Pullover",
            "Dress",
            "Coat",
            "Sandal",
            "Shirt",
            "Sneaker",
            "Bag",
            "Ankle boot",
        ],
        DatasetId::Cifar10 => &[
            "airplane",
            "automobile",
            "bird",
            "cat",
            "deer",
            "dog",
            "frog",
            "horse",
            "ship",
            "truck",
        ],
        _ => &[],
    };
    Ok(if names.is_empty() {
        (0..id.classes()).map(|i| i.to_string()).collect()
    } else {
        names.iter().map(|s| s.to_string()).collect()
    })
}

/// How a data set is called in titles and legends: a preset's name, or a user's file or
/// folder name.
pub fn dataset_label(dataset: &bnn_data::DataSource) -> String {
    use bnn_data::{DataSource, DatasetId};
    let id = match dataset {
        DataSource::Preset(id) => *id,
        user => {
            let path = user.path().unwrap_or(std::path::Path::new(""));
            return path
                .file_name()
                .map_or_else(|| user.to_string(), |n| n.to_string_lossy().into_owned());
        }
    };
    match id {
        DatasetId::Mnist => "MNIST",
        DatasetId::FashionMnist => "Fashion-MNIST",
        DatasetId::Cifar10 => "CIFAR-10",
        DatasetId::Cifar100 => "CIFAR-100",
        DatasetId::Svhn => "SVHN",
        DatasetId::ImageNet => "ImageNet",
    }
    .to_string()
}

/// How a method is called in titles: `deterministic` -> `Deterministic`, `bbb` -> `BBB`,
/// `2dgbnn` -> `2DGBNN`.
pub fn method_label(method: &str) -> String {
    method
        .parse::<crate::method::Method>()
        .map_or_else(|_| method.to_string(), |m| m.label().to_string())
}

#[cfg(test)]
mod tests {
    use bnn_data::{Corruption, CorruptionKind};

    use super::*;

    fn row(method: &str, kind: CorruptionKind, severity: u8, accuracy: f64) -> CorruptionRow {
        CorruptionRow {
            method: method.into(),
            corruption: Corruption::new(kind, severity).unwrap(),
            accuracy,
            nll: 2.0 * accuracy,
            ece: 0.1 * accuracy,
            mean_confidence: 0.5,
            calibrated: None,
        }
    }

    #[test]
    fn a_severity_is_the_mean_over_kinds_after_the_clean_point() {
        use CorruptionKind::{Contrast, GaussianNoise};
        let rows = [
            row("bbb", GaussianNoise, 2, 0.6),
            row("bbb", Contrast, 1, 0.8),
            row("bbb", GaussianNoise, 1, 0.6),
            row("2dgbnn", GaussianNoise, 1, 0.5),
            row("bbb", Contrast, 2, 0.4),
        ];
        let clean = [CleanMetrics {
            method: "bbb".into(),
            accuracy: 0.9,
            nll: 0.3,
            ece: 0.02,
        }];
        let s = corruption_series(&clean, &rows).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].name.as_str(), s[1].name.as_str()), ("BBB", "2DGBNN"));
        assert_eq!(s[0].severity, [0.0, 1.0, 2.0]);
        for (got, want) in s[0].accuracy.iter().zip([0.9, 0.7, 0.5]) {
            assert!((got - want).abs() < 1e-12, "{:?}", s[0].accuracy);
        }
        assert!((s[0].nll[1] - 1.4).abs() < 1e-12);
        // No clean row for 2DGBNN: its line starts at severity 1.
        assert_eq!(s[1].severity, [1.0]);
        assert!(corruption_series(&clean, &[]).is_err());
    }
}
