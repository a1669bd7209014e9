//! The fitting pipeline and the fitted model [`GmmFit`].

use gauss2d::{CovFloor, Gaussian2, Matrix2, Vector2};
use serde::{Deserialize, Serialize};

use crate::cells::{CellStat, cell_stats};
use crate::config::GmmConfig;
use crate::data::{Standardizer, check_finite, summarize};
use crate::em::{e_pass, leaf_lists};
use crate::grid::Geom;
use crate::math::Comp;
use crate::mixture::{Mix, Stat, fix_empty};
use crate::rng::mix64;
use crate::score::{Want, score};
use crate::seed::seed;
use crate::{GmmError, TopK};

/// Why `k_final` differs from `k_requested` (if it does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KReason {
    /// `k_final == k_requested`.
    Requested,
    /// The data has fewer distinct (histogram-cell) locations than `k` (e.g. `N < K` or
    /// many duplicates): one component per distinct location.
    FewerDistinctPoints {
        /// Distinct locations found by the seeding.
        distinct: usize,
    },
    /// Components that ended empty and could not be re-seeded were dropped.
    EmptyComponentsDropped {
        /// How many.
        dropped: usize,
    },
}

impl std::fmt::Display for KReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KReason::Requested => write!(f, "as requested"),
            KReason::FewerDistinctPoints { distinct } => {
                write!(f, "only {distinct} distinct point locations")
            }
            KReason::EmptyComponentsDropped { dropped } => {
                write!(f, "{dropped} empty components dropped")
            }
        }
    }
}

/// A fitted (or assembled) 2-D Gaussian mixture, in the data's own units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GmmFit {
    /// Components in the original units (axis 0 = mu, axis 1 = sigma).
    pub components: Vec<Gaussian2>,
    /// Mixing weights, summing to 1.
    pub weights: Vec<f64>,
    /// Components requested.
    pub k_requested: usize,
    /// Components in the result (`components.len()`).
    pub k_final: usize,
    /// Why `k_final` differs from `k_requested`.
    pub k_reason: KReason,
    /// Mini-batch (stepwise) EM epochs run.
    pub minibatch_epochs: usize,
    /// Full-batch EM refinement iterations run.
    pub iterations: usize,
    /// Whether the refinement stopped on the tolerance (rather than the iteration cap).
    pub converged: bool,
    /// Empty components re-seeded during EM.
    pub reseeded: usize,
    /// Final EM objective per unit weight, data units: the cell-wise Jensen lower bound of
    /// the mean log-likelihood (0 for mixtures not produced by EM).
    pub objective: f64,
    /// Transform to the space the fit ran in (also used for scoring).
    pub standardizer: Standardizer,
    /// Relative density the scoring may omit (log-likelihoods exact to this many nats).
    pub score_prune_tolerance: f64,
}

/// Result of [`GmmFit::top_k`]: row-major `n x k` arrays.
impl GmmFit {
    /// Builds a mixture from components and (non-negative, not all zero) weights, which are
    /// normalised. Scoring methods work as for a fitted model.
    ///
    /// ```
    /// use gmm_minibatch::{GmmFit, gauss2d::{Gaussian2, Vector2}};
    /// let g = vec![
    ///     Gaussian2::isotropic(Vector2::new(0.0, 0.0), 1.0).unwrap(),
    ///     Gaussian2::isotropic(Vector2::new(10.0, 0.0), 1.0).unwrap(),
    /// ];
    /// let m = GmmFit::from_components(g, vec![1.0, 3.0]).unwrap();
    /// assert_eq!(m.weights, vec![0.25, 0.75]);
    /// assert_eq!(m.assign(&[[9.0, 0.5], [-1.0, 0.0]]).unwrap(), vec![1, 0]);
    /// ```
    pub fn from_components(
        components: Vec<Gaussian2>,
        weights: Vec<f64>,
    ) -> Result<Self, GmmError> {
        if components.is_empty() {
            return Err(GmmError::InvalidMixture("no components".into()));
        }
        if components.len() > u32::MAX as usize / 2 {
            return Err(GmmError::InvalidMixture(format!(
                "{} components (at most 2^31 - 1)",
                components.len()
            )));
        }
        if components.len() != weights.len() {
            return Err(GmmError::InvalidMixture(format!(
                "{} components but {} weights",
                components.len(),
                weights.len()
            )));
        }
        if let Some(i) = weights.iter().position(|w| !(w.is_finite() && *w >= 0.0)) {
            return Err(GmmError::InvalidMixture(format!(
                "weight {i} = {} is not finite and >= 0",
                weights[i]
            )));
        }
        let tot: f64 = weights.iter().sum();
        if !(tot > 0.0 && tot.is_finite()) {
            return Err(GmmError::InvalidMixture("weights sum to zero".into()));
        }
        let weights: Vec<f64> = weights.iter().map(|w| w / tot).collect();
        // Standardise by the mixture's own mean and variance.
        let mut mean = [0.0; 2];
        let mut second = [0.0; 2];
        for (g, &w) in components.iter().zip(&weights) {
            let (m, c) = (g.mean(), g.cov());
            for a in 0..2 {
                mean[a] += w * m[a];
                second[a] += w * (c[(a, a)] + m[a] * m[a]);
            }
        }
        let var = [second[0] - mean[0] * mean[0], second[1] - mean[1] * mean[1]];
        let k = components.len();
        Ok(Self {
            components,
            weights,
            k_requested: k,
            k_final: k,
            k_reason: KReason::Requested,
            minibatch_epochs: 0,
            iterations: 0,
            converged: false,
            reseeded: 0,
            objective: 0.0,
            standardizer: Standardizer::from_moments(mean, var),
            score_prune_tolerance: GmmConfig::default().score_prune_tolerance,
        })
    }

    /// Number of components.
    pub fn k(&self) -> usize {
        self.components.len()
    }

    /// Components in the standardised space, as the hot loops want them.
    fn comps(&self) -> Vec<Comp> {
        let s = self.standardizer;
        self.components
            .iter()
            .zip(&self.weights)
            .map(|(g, &w)| {
                let (m, c) = (g.mean(), g.cov());
                let mean = [
                    (m[0] - s.offset[0]) / s.scale[0],
                    (m[1] - s.offset[1]) / s.scale[1],
                ];
                let cov = [
                    c[(0, 0)] / (s.scale[0] * s.scale[0]),
                    0.5 * (c[(0, 1)] + c[(1, 0)]) / (s.scale[0] * s.scale[1]),
                    c[(1, 1)] / (s.scale[1] * s.scale[1]),
                ];
                Comp::new(w, mean, cov).unwrap_or(Comp {
                    logc: f64::NEG_INFINITY,
                    pa: 1.0,
                    pc: 1.0,
                    ..Comp::default()
                })
            })
            .collect()
    }

    fn run(&self, points: &[[f32; 2]], want: Want) -> Result<crate::score::Scored, GmmError> {
        let ext = check_finite(points)?;
        if points.is_empty() {
            return Ok(Default::default());
        }
        Ok(score(
            points,
            ext,
            &self.standardizer,
            &self.comps(),
            self.score_prune_tolerance,
            want,
        ))
    }

    /// Hard assignment: index of the component with the largest weighted density per point
    /// (the lowest index on ties). Evaluates each point only against the components that can
    /// be the largest in its grid cell, so it is much cheaper than the log-likelihood.
    pub fn assign(&self, points: &[[f32; 2]]) -> Result<Vec<u32>, GmmError> {
        let ext = check_finite(points)?;
        if points.is_empty() {
            return Ok(Vec::new());
        }
        Ok(crate::assign::assign(
            points,
            ext,
            &self.standardizer,
            &self.comps(),
        ))
    }

    /// Hard assignment and mean log-likelihood (data units) in one pass.
    pub fn assign_and_mean_log_likelihood(
        &self,
        points: &[[f32; 2]],
    ) -> Result<(Vec<u32>, f64), GmmError> {
        if points.is_empty() {
            return Err(GmmError::EmptyInput);
        }
        let s = self.run(
            points,
            Want {
                assign: true,
                ..Default::default()
            },
        )?;
        Ok((s.assign, s.loglik_sum / points.len() as f64))
    }

    /// The `k` most responsible components per point (descending) with responsibilities
    /// normalised over those `k` (they sum to 1). `k` is capped at the number of components;
    /// if fewer than `k` components are non-negligible at a point, the row is padded with the
    /// best index and responsibility 0.
    pub fn top_k(&self, points: &[[f32; 2]], k: usize) -> Result<TopK, GmmError> {
        let kk = k.min(self.k());
        if kk == 0 {
            return Ok(TopK {
                k: 0,
                indices: Vec::new(),
                resp: Vec::new(),
            });
        }
        let s = self.run(
            points,
            Want {
                topk: kk,
                ..Default::default()
            },
        )?;
        Ok(TopK {
            k: kk,
            indices: s.topk_idx,
            resp: s.topk_resp,
        })
    }

    /// Per-point log-likelihood in the data's units.
    pub fn log_likelihood(&self, points: &[[f32; 2]]) -> Result<Vec<f64>, GmmError> {
        Ok(self
            .run(
                points,
                Want {
                    loglik: true,
                    ..Default::default()
                },
            )?
            .loglik)
    }

    /// Mean log-likelihood per point in the data's units (error on empty input).
    pub fn mean_log_likelihood(&self, points: &[[f32; 2]]) -> Result<f64, GmmError> {
        if points.is_empty() {
            return Err(GmmError::EmptyInput);
        }
        Ok(self.run(points, Want::default())?.loglik_sum / points.len() as f64)
    }

    /// Number of points hard-assigned to each component.
    pub fn counts(&self, points: &[[f32; 2]]) -> Result<Vec<u64>, GmmError> {
        let mut c = vec![0u64; self.k()];
        for a in self.assign(points)? {
            c[a as usize] += 1;
        }
        Ok(c)
    }
}

/// Everything before EM: validation, standardisation, histogram cells.
struct Prepared {
    std: Standardizer,
    geom: Geom,
    codes: Vec<u32>,
    cells: Vec<CellStat>,
    total_w: f64,
}

fn prepare(
    points: &[[f32; 2]],
    weights: Option<&[f32]>,
    cfg: &GmmConfig,
) -> Result<Prepared, GmmError> {
    cfg.validate()?;
    let s = summarize(points, weights)?;
    crate::trace(|| "fit: summarized".into());
    let std = Standardizer::from_moments(s.mean, s.var);
    let geom = Geom::new(points, &std, cfg.grid_bits(), s.ext);
    crate::trace(|| "fit: grid".into());
    let (codes, cells) = cell_stats(points, weights, &std, &geom);
    Ok(Prepared {
        std,
        geom,
        codes,
        cells,
        total_w: s.total_w,
    })
}

fn seed_mix(p: &Prepared, cfg: &GmmConfig) -> Mix {
    let sample = if cfg.init_sample == 0 {
        (20 * cfg.k).max(20_000)
    } else {
        cfg.init_sample
    };
    seed(&p.cells, cfg.k, sample, cfg.init, cfg.seed, cfg.cov_floor)
}

fn to_fit(p: &Prepared, mix: &Mix, cfg: &GmmConfig) -> Result<GmmFit, GmmError> {
    let s = p.std.scale;
    let o = p.std.offset;
    // Never binds: the standardised floor is cfg.cov_floor.
    let floor =
        CovFloor::new((0.5 * cfg.cov_floor * s[0].min(s[1]).powi(2)).max(f64::MIN_POSITIVE));
    let tot: f64 = mix.weight.iter().sum();
    let mut components = Vec::with_capacity(mix.len());
    for k in 0..mix.len() {
        let m = mix.mean[k];
        let c = mix.cov[k];
        let g = Gaussian2::with_floor(
            Vector2::new(o[0] + s[0] * m[0], o[1] + s[1] * m[1]),
            Matrix2::new(
                s[0] * s[0] * c[0],
                s[0] * s[1] * c[1],
                s[0] * s[1] * c[1],
                s[1] * s[1] * c[2],
            ),
            floor,
        )
        .map_err(|source| GmmError::Component { index: k, source })?;
        components.push(g);
    }
    Ok(GmmFit {
        k_requested: cfg.k,
        k_final: components.len(),
        k_reason: if mix.len() < cfg.k {
            KReason::EmptyComponentsDropped {
                dropped: cfg.k - mix.len(),
            }
        } else {
            KReason::Requested
        },
        components,
        weights: mix.weight.iter().map(|w| w / tot).collect(),
        minibatch_epochs: 0,
        iterations: 0,
        converged: false,
        reseeded: 0,
        objective: 0.0,
        standardizer: p.std,
        score_prune_tolerance: cfg.score_prune_tolerance,
    })
}

/// Only the initialisation (seeding) of [`fit`], as a model: useful as a baseline.
pub fn initialise(
    points: &[[f32; 2]],
    weights: Option<&[f32]>,
    cfg: &GmmConfig,
) -> Result<GmmFit, GmmError> {
    let p = prepare(points, weights, cfg)?;
    let mix = seed_mix(&p, cfg);
    let mut f = to_fit(&p, &mix, cfg)?;
    if mix.len() < cfg.k {
        f.k_reason = KReason::FewerDistinctPoints {
            distinct: mix.len(),
        };
    }
    Ok(f)
}

/// Fits a `cfg.k`-component full-covariance mixture to `points` (`[mu, sigma]`), optionally
/// weighted. See the crate docs for the algorithm.
pub fn fit(
    points: &[[f32; 2]],
    weights: Option<&[f32]>,
    cfg: &GmmConfig,
) -> Result<GmmFit, GmmError> {
    let t0 = std::time::Instant::now();
    let p = prepare(points, weights, cfg)?;
    crate::trace(|| {
        format!(
            "fit: cells {:.3}s, {} cells",
            t0.elapsed().as_secs_f64(),
            p.cells.len()
        )
    });
    let mix0 = seed_mix(&p, cfg);
    crate::trace(|| {
        format!(
            "fit: seeded {:.3}s, {} seeds",
            t0.elapsed().as_secs_f64(),
            mix0.len()
        )
    });
    let distinct = mix0.len();
    let floor = cfg.cov_floor;
    let eps = cfg.em_prune_tolerance;
    let min_mass = 1e-6 * p.total_w / cfg.k as f64;
    let mut mix = mix0;
    let mut reseeded = 0;
    let mut dropped = 0;

    // Mini-batch (stepwise) EM: running statistics s <- (1 - rho) s + rho * scaled batch
    // statistics, rho_t = (t + 2)^-0.6; candidate lists refreshed once per epoch.
    let mut epochs = 0;
    let nb = p.cells.len().div_ceil(cfg.batch_size);
    if nb >= 2 {
        let wsum: f64 = mix.weight.iter().sum();
        let mut stats: Vec<Stat> = (0..mix.len())
            .map(|k| Mix::stat_of(mix.weight[k] / wsum * p.total_w, mix.mean[k], mix.cov[k]))
            .collect();
        let mut t = 0u32;
        for epoch in 0..cfg.minibatch_epochs {
            let salt = mix64(cfg.seed ^ mix64(epoch as u64 + 1));
            let mut comps = mix.comps();
            let mut lists = leaf_lists(&p.geom, &p.codes, &comps, eps);
            for b in 0..nb as u64 {
                let keep = move |ci: usize| mix64(salt ^ ci as u64) % nb as u64 == b;
                let ep = e_pass(&lists, &p.cells, &comps, Some(&keep));
                if !(ep.weight > 0.0) {
                    continue;
                }
                let scale = p.total_w / ep.weight;
                let rho = (f64::from(t) + 2.0).powf(-0.6);
                t += 1;
                for (s, e) in stats.iter_mut().zip(&ep.stats) {
                    for i in 0..6 {
                        s[i] = (1.0 - rho) * s[i] + rho * scale * e[i];
                    }
                }
                let (r, d) = fix_empty(&mut stats, min_mass, floor, true);
                reseeded += r;
                dropped += d;
                mix = Mix::from_stats(&stats, floor);
                comps = mix.comps();
                if d > 0 {
                    lists = leaf_lists(&p.geom, &p.codes, &comps, eps);
                }
            }
            epochs += 1;
            crate::trace(|| format!("fit: epoch {epoch} done {:.3}s", t0.elapsed().as_secs_f64()));
        }
    }

    // Full-batch refinement.
    let mut iterations = 0;
    let mut converged = false;
    let mut prev = f64::NEG_INFINITY;
    let mut objective = f64::NAN;
    for it in 0..cfg.max_iterations {
        let comps = mix.comps();
        let lists = leaf_lists(&p.geom, &p.codes, &comps, eps);
        let ep = e_pass(&lists, &p.cells, &comps, None);
        objective = ep.objective / ep.weight;
        iterations += 1;
        crate::trace(|| {
            let l: usize = lists.iter().map(|l| l.cands.len()).sum();
            format!(
                "fit: iter {it} objective {:.5} at {:.3}s ({} list entries)",
                objective + p.std.log_jacobian(),
                t0.elapsed().as_secs_f64(),
                l
            )
        });
        let mut stats = ep.stats;
        let allow = it + 3 < cfg.max_iterations;
        let (r, d) = fix_empty(&mut stats, min_mass, floor, allow);
        reseeded += r;
        dropped += d;
        mix = Mix::from_stats(&stats, floor);
        if r == 0 && objective - prev < cfg.tolerance {
            converged = true;
            break;
        }
        prev = objective;
    }
    let mut f = to_fit(&p, &mix, cfg)?;
    f.minibatch_epochs = epochs;
    f.iterations = iterations;
    f.converged = converged;
    f.reseeded = reseeded;
    f.objective = if objective.is_finite() {
        objective + p.std.log_jacobian()
    } else {
        0.0
    };
    f.k_reason = if distinct < cfg.k {
        KReason::FewerDistinctPoints { distinct }
    } else if dropped > 0 || mix.len() < cfg.k {
        KReason::EmptyComponentsDropped {
            dropped: cfg.k - mix.len(),
        }
    } else {
        KReason::Requested
    };
    Ok(f)
}
