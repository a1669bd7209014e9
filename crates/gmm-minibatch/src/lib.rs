//! Fast full-covariance Gaussian mixture fitting for millions of 2-D points, built for the
//! `(mu, sigma)` weight clouds of Bayesian neural networks (2DGBNN stochastic weight sharing).
//!
//! # Algorithm
//!
//! 1. **Standardise** each axis by its weighted mean and standard deviation (mu and sigma
//!    differ by orders of magnitude); everything runs in that space and is reported back in
//!    the data's units (`ln p_data = ln p_std - ln(scale_mu * scale_sigma)`).
//! 2. **Histogram cells with exact moments.** The points are bucketed on a `2^b x 2^b` grid
//!    (default 1024 per axis over the 1e-4..1-1e-4 quantile range; outliers go to the border
//!    cells) in Morton order: the cells are cut into groups of ~10^5 points, each group's
//!    points are gathered (stably, a part of the groups at a time) and counting-sorted
//!    locally, and every occupied cell keeps its exact weight, mean and covariance. Millions
//!    of points become ~10^5 weighted blobs; the extra memory is 2 bytes per point plus one
//!    part (at most 2^25 points), not sorted copies of the input.
//! 3. **k-means++ seeding** (D^2-weighted) on a weight-proportional sample of the cells; the
//!    initial covariances are the seeds' Voronoi moments, lightly regularised.
//! 4. **Mini-batch (stepwise) EM** over random batches of cells (`minibatch_epochs`,
//!    `batch_size`): running sufficient statistics `s <- (1 - rho) s + rho s_batch`,
//!    `rho_t = (t + 2)^-0.6`.
//! 5. **Full-batch EM refinement** on all cells until the objective improves by less than
//!    `tolerance` nats per point. The E-step treats each cell as a blob: responsibilities
//!    use the expected log-density over the cell (`tr(P_k C_cell)` term, a Jensen lower
//!    bound of the cell's log-likelihood), and the M-step uses the exact cell moments.
//!    Empty components are re-seeded by splitting the heaviest one, or dropped at the end.
//! 6. **Spatial pruning** (quadtree over the grid, [`prune`](crate#pruning)): each node keeps
//!    only the components whose density bound over the node's rectangle is not provably
//!    negligible, so a cell is evaluated against tens of components instead of K.
//!
//! Scoring ([`GmmFit::top_k`], [`GmmFit::log_likelihood`], [`GmmFit::mean_log_likelihood`],
//! [`GmmFit::assign_and_mean_log_likelihood`]) evaluates every point exactly, against the
//! pruned list of its (fine) scoring cell, group by group in parallel. The hard assignment
//! ([`GmmFit::assign`]) needs only the components that can be the *largest* in a cell (about
//! one per cell on weight clouds): it builds one list per occupied cell and visits the
//! points in input order, evaluating only cells with several candidates. Memory is
//! `O(N + cells)`, never `O(N K)`.
//!
//! # Pruning
//!
//! For a rectangle `R`, component `k`'s log weighted density lies in
//! `[c_k - q_max/2, c_k - q_min/2]` with the exact min/max of its Mahalanobis form over `R`.
//! With `LB` the best lower bound, components whose upper bound is below
//! `LB + ln(eps / levels) - ln(L)` are dropped; their total density is then at most `eps`
//! times the mixture density at **every** point of `R`, so each per-point log-likelihood is
//! exact to within `eps` nats (`score_prune_tolerance`, default `1e-9`: the accuracy cost
//! is provably below 1e-9 nats per point). During EM the same rule is used with
//! `em_prune_tolerance` (default 1e-5), which only perturbs responsibilities by < 1e-5.
//!
//! For the hard assignment a component is dropped when its upper bound is below `LB` (less
//! a 1e-7 relative margin for rounding): the component achieving `LB` is then larger at
//! every point of `R`, so the dropped one is never the arg max and the assignment equals the
//! brute-force one (lowest index on exact ties).
//!
//! # Determinism
//!
//! All float reductions use a fixed decomposition that does not depend on rayon's
//! scheduling or the thread count (groups and cuts depend only on the data; every cell is
//! summed in input order); the same input, config and seed give bit-identical results.
//!
//! # Example
//!
//! ```
//! use gmm_minibatch::{GmmConfig, fit, synthetic_cloud};
//! let points = synthetic_cloud(20_000, 1);
//! let cfg = GmmConfig { k: 20, ..GmmConfig::default() };
//! let model = fit(&points, None, &cfg).unwrap();
//! assert_eq!(model.k_final, 20);
//! let assignment = model.assign(&points).unwrap();
//! assert!(assignment.iter().all(|&a| (a as usize) < model.k_final));
//! let ll = model.mean_log_likelihood(&points).unwrap();
//! assert!(ll > 5.0, "{ll}"); // nats per point, in the cloud's own units
//! let top = model.top_k(&points[..10], 3).unwrap();
//! assert_eq!(top.indices.len(), 30);
//! ```
#![warn(missing_docs)]
// `!(x > 0.0)` is used on purpose: it is also true for NaN.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

mod assign;
mod cells;
mod config;
mod data;
mod em;
mod error;
mod fit;
mod grid;
mod groups;
mod lanes;
mod math;
mod mixture;
pub mod npy;
mod prune;
mod rng;
mod score;
mod seed;
mod simd;
mod synth;

pub use config::{GmmConfig, Init, MAX_K};
pub use data::Standardizer;
pub use error::GmmError;
pub use fit::{GmmFit, KReason, fit, initialise};
pub use synth::synthetic_cloud;

/// Prints a phase timing line to stderr when the `GMM_TRACE` environment variable is set.
pub(crate) fn trace(msg: impl FnOnce() -> String) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("GMM_TRACE").is_some()) {
        // Process CPU seconds (utime + stime from /proc; Linux only, else 0).
        let cpu = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|st| {
                let rest = st.rsplit(')').next()?.to_string();
                let f: Vec<&str> = rest.split_whitespace().collect();
                Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / 100.0)
            })
            .unwrap_or(0.0);
        eprintln!("[gmm] cpu {cpu:.2}s | {}", msg());
    }
}

/// Re-export of the component type's crate.
pub use gauss2d;

/// Top-k components per point ([`GmmFit::top_k`]): row-major `n x k` arrays.
#[derive(Debug, Clone, PartialEq)]
pub struct TopK {
    /// Components per point.
    pub k: usize,
    /// Component indices, descending responsibility, `n * k` values.
    pub indices: Vec<u32>,
    /// Responsibilities normalised over each row's `k` components, `n * k` values.
    pub resp: Vec<f32>,
}
