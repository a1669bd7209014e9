//! `swbnn.plan`: stages 1-2 of the method (outliers, GMM, cluster-size reduction, ellipse
//! weights, merging) on flat `(mu, sigma[, grad])` arrays.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use swshare::{OutlierCause, SwshareConfig, WeightFate, WeightTableBuilder, build_plan};

use crate::arrays::{Input, optional, output};
use crate::errors::{input_error, value_error};

/// Fate codes of the `fates` array.
const SHARED: i8 = 0;
const ELLIPSE: i8 = 1;
const OUTLIER_MEAN: i8 = 2;
const OUTLIER_GRADIENT: i8 = 3;
const OUTLIER_SMALL_CLUSTER: i8 = 4;

/// Runs `swshare::build_plan` on one shareable layer of `mu.len()` weights and returns the
/// plan's arrays, counts and report as a dict (the `swbnn.SharingPlan` wrapper reads it).
/// `config` is a `SwshareConfig` JSON text (missing fields take the paper's defaults); `k` and
/// `seed`, when given, override its GMM's. `layers`, when given, are the sizes of the
/// consecutive layers the arrays hold (summing to their length): the outlier threshold's
/// layer-relative part (`outliers.tau_sd`) is measured per layer. Without it the arrays are
/// one layer.
#[pyfunction]
#[pyo3(signature = (mu, sigma, grad = None, config = None, k = None, seed = None, layers = None))]
#[allow(clippy::too_many_arguments)]
pub fn plan<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    sigma: &Bound<'py, PyAny>,
    grad: Option<&Bound<'py, PyAny>>,
    config: Option<&str>,
    k: Option<usize>,
    seed: Option<u64>,
    layers: Option<Vec<usize>>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut cfg = match config {
        Some(text) => SwshareConfig::from_json(text).map_err(input_error)?,
        None => SwshareConfig::default(),
    };
    if let Some(k) = k {
        cfg.gmm.k = k;
    }
    if let Some(s) = seed {
        cfg.gmm.seed = s;
    }
    let mu = Input::<f32>::new(mu, "mu", Some(1))?;
    let sigma = Input::<f32>::new(sigma, "sigma", Some(1))?;
    let grad = optional::<f32>(grad, "grad", Some(1))?;
    let n = mu.shape()[0];
    for (name, len) in [("sigma", sigma.shape()[0])]
        .into_iter()
        .chain(grad.as_ref().map(|g| ("grad", g.shape()[0])))
    {
        if len != n {
            return Err(value_error(format!(
                "{name} has {len} values but mu has {n}"
            )));
        }
    }
    let layers = layers.unwrap_or_else(|| vec![n]);
    if let Some(i) = layers.iter().position(|&l| l == 0) {
        return Err(value_error(format!(
            "layers[{i}] is 0: every layer holds weights"
        )));
    }
    let total = layers.iter().try_fold(0usize, |acc, &l| acc.checked_add(l));
    if total != Some(n) {
        return Err(value_error(format!(
            "layers sum to {} but mu has {n} values",
            total.map_or_else(|| "more than usize holds".to_string(), |t| t.to_string())
        )));
    }
    let (mu, sigma) = (mu.slice()?, sigma.slice()?);
    let grad = grad.as_ref().map(|g| g.slice()).transpose()?;
    if let Some(i) = sigma.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(value_error(format!(
            "sigma[{i}] = {} is not a finite positive number",
            sigma[i]
        )));
    }
    for (name, v) in [("mu", Some(mu)), ("grad", grad)] {
        if let Some(v) = v
            && let Some(i) = v.iter().position(|x| !x.is_finite())
        {
            return Err(value_error(format!("{name}[{i}] = {} is not finite", v[i])));
        }
    }
    let (plan, report) = py
        .detach(|| {
            let mut b = WeightTableBuilder::new();
            let mut start = 0;
            for (i, &len) in layers.iter().enumerate() {
                let r = start..start + len;
                let g = grad.map(|g| &g[r.clone()]);
                b.push_layer(
                    format!("layer{i}"),
                    &[len],
                    true,
                    &mu[r.clone()],
                    &sigma[r],
                    g,
                );
                start += len;
            }
            let table = b
                .build()
                .map_err(|e| swshare::SwshareError::from(e).to_string())?;
            build_plan(&table, &cfg).map_err(|e| crate::errors::chain(&e))
        })
        .map_err(value_error)?;

    let kk = plan.k();
    let mut means = Vec::with_capacity(2 * kk);
    let mut covs = Vec::with_capacity(4 * kk);
    for e in &plan.codebook {
        let (m, c) = (e.gaussian.mean(), e.gaussian.cov());
        means.extend([m.x, m.y]);
        covs.extend([c[(0, 0)], c[(0, 1)], c[(1, 0)], c[(1, 1)]]);
    }
    let mut fates = Vec::with_capacity(n);
    let mut assignment = Vec::with_capacity(n);
    for f in &plan.fates {
        let (code, comp) = match f {
            WeightFate::Shared(c) => (SHARED, i64::from(*c)),
            WeightFate::Ellipse(_) => (ELLIPSE, -1),
            WeightFate::Outlier(OutlierCause::MeanThreshold) => (OUTLIER_MEAN, -1),
            WeightFate::Outlier(OutlierCause::Gradient) => (OUTLIER_GRADIENT, -1),
            WeightFate::Outlier(OutlierCause::SmallCluster) => (OUTLIER_SMALL_CLUSTER, -1),
        };
        fates.push(code);
        assignment.push(comp);
    }
    let m = plan.ellipses.len();
    let width = swshare::MAX_BLEND;
    let mut e_weight = Vec::with_capacity(m);
    let mut e_comp = Vec::with_capacity(m * width);
    let mut e_alpha = Vec::with_capacity(m * width);
    for e in &plan.ellipses {
        e_weight.push(i64::from(e.weight));
        for s in 0..width {
            let used = s < e.len as usize;
            e_comp.push(if used { i64::from(e.components[s]) } else { -1 });
            e_alpha.push(if used { e.alphas[s] } else { 0.0 });
        }
    }
    let d = PyDict::new(py);
    d.set_item("means", output(py, means, &[kk, 2])?)?;
    d.set_item("covariances", output(py, covs, &[kk, 2, 2])?)?;
    let w: Vec<f64> = plan.codebook.iter().map(|e| e.mixing_weight).collect();
    d.set_item("mixing_weights", output(py, w, &[kk])?)?;
    let im: Vec<f32> = plan.codebook.iter().map(|e| e.init_mu).collect();
    let is: Vec<f32> = plan.codebook.iter().map(|e| e.init_sigma).collect();
    d.set_item("init_mu", output(py, im, &[kk])?)?;
    d.set_item("init_sigma", output(py, is, &[kk])?)?;
    let counts: Vec<u32> = plan.codebook.iter().map(|e| e.count).collect();
    d.set_item("component_counts", output(py, counts, &[kk])?)?;
    d.set_item("fates", output(py, fates, &[n])?)?;
    d.set_item("assignment", output(py, assignment, &[n])?)?;
    d.set_item("ellipse_weights", output(py, e_weight, &[m])?)?;
    d.set_item("ellipse_components", output(py, e_comp, &[m, width])?)?;
    d.set_item("ellipse_alphas", output(py, e_alpha, &[m, width])?)?;
    let c = plan.counts();
    let counts = PyDict::new(py);
    counts.set_item("total", c.total)?;
    counts.set_item("plain_shared", c.plain_shared)?;
    counts.set_item("ellipse", c.ellipse)?;
    counts.set_item("outlier_mean", c.outlier_mean)?;
    counts.set_item("outlier_gradient", c.outlier_gradient)?;
    counts.set_item("outlier_small_cluster", c.outlier_small_cluster)?;
    d.set_item("counts", counts)?;
    d.set_item("report_json", report.to_json())?;
    d.set_item("config_json", cfg.to_json())?;
    Ok(d)
}
