//! Ellipse weights (paper section 3.3, "alpha-blending (Multi-Clusters) for Weights").
//!
//! A plain-shared weight at `x = (mu_i, sigma_i)` whose squared Mahalanobis distance to its
//! (hard-assigned) component exceeds `T_M` lies outside that component's 95 % ellipse. It is
//! re-assigned to a blend of the `k` components with the **highest pdf** at `x`, with
//!
//! `alpha_j = N(x | m_j, S_j) / sum_l N(x | m_l, S_l)` over the chosen components.
//!
//! Following the paper ("alpha_k is computed as the pdf of (mu_i, sigma_i) according to
//! N(mu_k, Sigma_k)"), the mixing weight `pi_k` is **not** included, neither in the ranking nor
//! in the alphas. The paper writes `(mu_i, sigma_i^2)` at that point, but its GMM is fitted to
//! `(mu, sigma)`; we use `(mu, sigma)` throughout, the plane the components live in.
//!
//! Computed in log space (the densities of far points underflow). Ranking ties go to the lower
//! component index. Every weight is independent, so the parallel computation gives the same
//! result for any thread count.

use gauss2d::{Gaussian2, Vector2};
use rayon::prelude::*;

use crate::config::EllipseConfig;
use crate::error::SwshareError;
use crate::fate::WeightFate;
use crate::plan::{EllipseWeight, MAX_BLEND, SharingPlan};
use crate::table::WeightTable;

/// The `k` components with the highest log-pdf at `x` (descending; ties: lower index first)
/// and their log-pdfs. `k <= MAX_BLEND`.
pub fn top_pdf_components(
    components: &[Gaussian2],
    x: &Vector2<f64>,
    k: usize,
) -> ([u32; MAX_BLEND], [f64; MAX_BLEND], usize) {
    let k = k.min(MAX_BLEND).min(components.len());
    let mut idx = [0u32; MAX_BLEND];
    let mut lp = [f64::NEG_INFINITY; MAX_BLEND];
    let mut n = 0usize;
    for (c, g) in components.iter().enumerate() {
        let v = g.log_pdf(x);
        // Strictly greater keeps the earlier (lower) index on ties.
        if n == k && v <= lp[k - 1] {
            continue;
        }
        let mut pos = if n < k { n } else { k - 1 };
        while pos > 0 && v > lp[pos - 1] {
            lp[pos] = lp[pos - 1];
            idx[pos] = idx[pos - 1];
            pos -= 1;
        }
        lp[pos] = v;
        idx[pos] = c as u32;
        if n < k {
            n += 1;
        }
    }
    (idx, lp, n)
}

/// Normalised blend coefficients from log-pdfs (softmax), as `f32`; unused slots are 0.
pub fn alphas_from_log_pdf(lp: &[f64; MAX_BLEND], n: usize) -> [f32; MAX_BLEND] {
    let mut out = [0f32; MAX_BLEND];
    if n == 0 {
        return out;
    }
    let max = lp[..n].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = lp[..n].iter().map(|v| (v - max).exp()).collect();
    let s: f64 = e.iter().sum();
    for (o, v) in out.iter_mut().zip(&e) {
        *o = (v / s) as f32;
    }
    out
}

/// Stage 2: turns plain-shared weights outside their component's `T_M` ellipse into
/// ellipse weights. Returns the number of new ellipse weights.
///
/// Only `WeightFate::Shared` weights are examined; existing ellipse weights are kept. A weight
/// is blended only if at least two components exist (with one it stays plain-shared).
/// The plan's counts are updated.
pub fn detect_ellipses(
    plan: &mut SharingPlan,
    table: &WeightTable,
    cfg: &EllipseConfig,
) -> Result<usize, SwshareError> {
    cfg.validate()?;
    if plan.n_weights() != table.n_shareable() {
        return Err(SwshareError::Mismatch {
            what: "shareable weights",
            plan: plan.n_weights(),
            input: table.n_shareable(),
        });
    }
    if !cfg.enabled || plan.k() < 2 {
        return Ok(0);
    }
    let mu = table.gather_shareable(table.mu());
    let sigma = table.gather_shareable(table.sigma());
    let comps: Vec<Gaussian2> = plan.codebook.iter().map(|e| e.gaussian).collect();
    let point = |p: usize| Vector2::new(f64::from(mu[p]), f64::from(sigma[p]));
    let t_m = cfg.t_m;
    let candidates: Vec<u32> = plan
        .fates
        .par_iter()
        .enumerate()
        .filter_map(|(p, f)| match *f {
            WeightFate::Shared(k) => comps
                .get(k as usize)
                .filter(|g| g.mahalanobis_sq(&point(p)) > t_m)
                .map(|_| p as u32),
            _ => None,
        })
        .collect();
    let blends: Vec<EllipseWeight> = candidates
        .par_iter()
        .map(|&p| {
            let (components, lp, n) = top_pdf_components(&comps, &point(p as usize), cfg.k);
            EllipseWeight {
                weight: p,
                components,
                alphas: alphas_from_log_pdf(&lp, n),
                len: n as u8,
            }
        })
        .collect();
    let added = blends.len();
    // Merge with any existing entries, keeping the list sorted by weight.
    let mut all = std::mem::take(&mut plan.ellipses);
    all.extend(blends);
    all.sort_by_key(|e| e.weight);
    for (j, e) in all.iter().enumerate() {
        plan.fates[e.weight as usize] = WeightFate::Ellipse(j as u32);
    }
    plan.ellipses = all;
    plan.recount();
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gauss2d::Matrix2;

    fn iso(x: f64, y: f64, v: f64) -> Gaussian2 {
        Gaussian2::new(Vector2::new(x, y), Matrix2::new(v, 0.0, 0.0, v)).unwrap()
    }

    #[test]
    fn top_components_match_brute_force() {
        let comps: Vec<Gaussian2> = (0..40)
            .map(|i| {
                let f = i as f64;
                iso(
                    (f * 0.37).sin(),
                    (f * 0.11).cos(),
                    0.01 + 0.02 * (f * 0.7).sin().abs(),
                )
            })
            .collect();
        for t in 0..30 {
            let x = Vector2::new((t as f64 * 0.23).cos(), (t as f64 * 0.41).sin());
            let (idx, lp, n) = top_pdf_components(&comps, &x, 5);
            assert_eq!(n, 5);
            let mut all: Vec<(f64, u32)> = comps
                .iter()
                .enumerate()
                .map(|(i, g)| (g.log_pdf(&x), i as u32))
                .collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            for j in 0..5 {
                assert_eq!(idx[j], all[j].1);
                assert_eq!(lp[j], all[j].0);
            }
        }
    }

    #[test]
    fn ties_prefer_lower_index_and_k_is_capped() {
        let g = iso(0.0, 0.0, 1.0);
        let comps = vec![g, g, g];
        let (idx, _, n) = top_pdf_components(&comps, &Vector2::new(0.5, 0.5), 5);
        assert_eq!(n, 3);
        assert_eq!(&idx[..3], &[0, 1, 2]);
    }

    #[test]
    fn alphas_are_normalised_pdfs() {
        let lp = [-1.0, -2.0, -1000.0, 0.0, 0.0];
        let a = alphas_from_log_pdf(&lp, 3);
        let s: f32 = a.iter().sum();
        assert!((s - 1.0).abs() < 1e-6);
        let want0 = 1.0 / (1.0 + (-1.0f64).exp());
        assert!((f64::from(a[0]) - want0).abs() < 1e-6);
        assert_eq!(a[3], 0.0);
        // Far away: every pdf underflows, alphas still finite.
        let far = alphas_from_log_pdf(&[-1e6, -1e6 - 1.0, f64::NEG_INFINITY, 0.0, 0.0], 2);
        assert!(far.iter().all(|a| a.is_finite()));
    }
}
