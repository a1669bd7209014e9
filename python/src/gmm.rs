//! `swbnn.gmm`: the 2-D Gaussian mixture of `gmm-minibatch` on NumPy points.

use gmm_minibatch::{GmmConfig, GmmFit, Init, fit as gmm_fit};
use numpy::PyArrayDyn;
use pyo3::prelude::*;

use crate::arrays::{Input, optional, output};
use crate::errors::{input_error, value_error};

/// A fitted 2-D Gaussian mixture in the points' units (axis 0 = mu, axis 1 = sigma).
#[pyclass(module = "swbnn._native", frozen)]
pub struct Mixture {
    pub(crate) fit: GmmFit,
    assignments: Option<Vec<u32>>,
    log_likelihood: Option<f64>,
}

/// Borrows `[n, 2]` float32 points as pairs.
fn pairs<'a>(points: &'a Input<'_, f32>) -> PyResult<&'a [[f32; 2]]> {
    let shape = points.shape();
    if shape.len() != 2 || shape[1] != 2 {
        return Err(value_error(format!(
            "points must have shape (n, 2) (columns mu, sigma), got {shape:?}"
        )));
    }
    let (pairs, rest) = points.slice()?.as_chunks::<2>();
    debug_assert!(rest.is_empty());
    Ok(pairs)
}

#[pymethods]
impl Mixture {
    /// Component means, shape `(k, 2)`.
    #[getter]
    fn means<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
        let v: Vec<f64> = self
            .fit
            .components
            .iter()
            .flat_map(|g| {
                let m = g.mean();
                [m.x, m.y]
            })
            .collect();
        output(py, v, &[self.fit.k(), 2])
    }

    /// Component covariances, shape `(k, 2, 2)`.
    #[getter]
    fn covariances<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
        let v: Vec<f64> = self
            .fit
            .components
            .iter()
            .flat_map(|g| {
                let c = g.cov();
                [c[(0, 0)], c[(0, 1)], c[(1, 0)], c[(1, 1)]]
            })
            .collect();
        output(py, v, &[self.fit.k(), 2, 2])
    }

    /// Mixing weights, shape `(k,)`, summing to 1.
    #[getter]
    fn weights<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
        output(py, self.fit.weights.clone(), &[self.fit.k()])
    }

    /// Hard assignment of the fitted points (`uint32`, shape `(n,)`), or `None` when the fit
    /// was asked not to assign.
    #[getter]
    fn assignments<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArrayDyn<u32>>>> {
        self.assignments
            .as_ref()
            .map(|a| output(py, a.clone(), &[a.len()]))
            .transpose()
    }

    /// Mean log-likelihood per fitted point (nats, the points' units), or `None` when the fit
    /// was asked not to score.
    #[getter]
    fn log_likelihood(&self) -> Option<f64> {
        self.log_likelihood
    }

    /// Number of components in the result.
    #[getter]
    fn k(&self) -> usize {
        self.fit.k()
    }

    /// Number of components requested.
    #[getter]
    fn k_requested(&self) -> usize {
        self.fit.k_requested
    }

    /// Full-batch EM iterations run.
    #[getter]
    fn iterations(&self) -> usize {
        self.fit.iterations
    }

    /// Whether EM stopped on the tolerance rather than the iteration cap.
    #[getter]
    fn converged(&self) -> bool {
        self.fit.converged
    }

    /// The EM objective per point (a lower bound of the mean log-likelihood).
    #[getter]
    fn objective(&self) -> f64 {
        self.fit.objective
    }

    /// Hard assignment of `points` (`float32`, `(n, 2)`): the most responsible component.
    fn assign<'py>(
        &self,
        py: Python<'py>,
        points: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let input = Input::<f32>::new(points, "points", Some(2))?;
        let p = pairs(&input)?;
        let a = py.detach(|| self.fit.assign(p)).map_err(input_error)?;
        output(py, a, &[p.len()])
    }

    /// Per-point log-likelihood of `points` (`float32`, `(n, 2)`), exact to 1e-9 nats.
    fn score_samples<'py>(
        &self,
        py: Python<'py>,
        points: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
        let input = Input::<f32>::new(points, "points", Some(2))?;
        let p = pairs(&input)?;
        let ll = py
            .detach(|| self.fit.log_likelihood(p))
            .map_err(input_error)?;
        output(py, ll, &[p.len()])
    }

    /// Mean log-likelihood per point of `points` (`float32`, `(n, 2)`).
    fn score(&self, py: Python<'_>, points: &Bound<'_, PyAny>) -> PyResult<f64> {
        let input = Input::<f32>::new(points, "points", Some(2))?;
        let p = pairs(&input)?;
        py.detach(|| self.fit.mean_log_likelihood(p))
            .map_err(input_error)
    }

    fn __repr__(&self) -> String {
        format!(
            "Mixture(k={}, k_requested={}, iterations={}, converged={}, log_likelihood={:?})",
            self.fit.k(),
            self.fit.k_requested,
            self.fit.iterations,
            self.fit.converged,
            self.log_likelihood
        )
    }
}

/// Fits a `k`-component full-covariance mixture to `points` (`float32`, `(n, 2)`: mu,
/// sigma), optionally weighted; then assigns every point and scores the fit, unless told
/// not to. The defaults and validation are `gmm_minibatch::GmmConfig`'s.
#[pyfunction]
#[pyo3(signature = (
    points, k = 2000, *, seed = 0, weights = None, histogram_resolution = None,
    minibatch_epochs = None, batch_size = None, max_iterations = None, tolerance = None,
    cov_floor = None, init = "kmeans++", assign = true, score = true
))]
#[allow(clippy::too_many_arguments)]
pub fn fit(
    py: Python<'_>,
    points: &Bound<'_, PyAny>,
    k: usize,
    seed: u64,
    weights: Option<&Bound<'_, PyAny>>,
    histogram_resolution: Option<u32>,
    minibatch_epochs: Option<usize>,
    batch_size: Option<usize>,
    max_iterations: Option<usize>,
    tolerance: Option<f64>,
    cov_floor: Option<f64>,
    init: &str,
    assign: bool,
    score: bool,
) -> PyResult<Mixture> {
    let d = GmmConfig::default();
    let cfg = GmmConfig {
        k,
        seed,
        histogram_resolution: histogram_resolution.unwrap_or(d.histogram_resolution),
        minibatch_epochs: minibatch_epochs.unwrap_or(d.minibatch_epochs),
        batch_size: batch_size.unwrap_or(d.batch_size),
        max_iterations: max_iterations.unwrap_or(d.max_iterations),
        tolerance: tolerance.unwrap_or(d.tolerance),
        cov_floor: cov_floor.unwrap_or(d.cov_floor),
        init: match init {
            "kmeans++" => Init::KMeansPlusPlus,
            "random" => Init::Random,
            other => {
                return Err(value_error(format!(
                    "init must be \"kmeans++\" or \"random\", got {other:?}"
                )));
            }
        },
        ..d
    };
    cfg.validate().map_err(input_error)?;
    let input = Input::<f32>::new(points, "points", Some(2))?;
    let p = pairs(&input)?;
    let w = optional::<f32>(weights, "weights", Some(1))?;
    let w = w.as_ref().map(|w| w.slice()).transpose()?;
    py.detach(|| {
        let fit = gmm_fit(p, w, &cfg)?;
        let assignments = assign.then(|| fit.assign(p)).transpose()?;
        let log_likelihood = score.then(|| fit.mean_log_likelihood(p)).transpose()?;
        Ok(Mixture {
            fit,
            assignments,
            log_likelihood,
        })
    })
    .map_err(|e: gmm_minibatch::GmmError| input_error(e))
}
