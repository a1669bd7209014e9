//! Merging of close Gaussians (paper section 3.2, "Merging Gaussians"; Algorithm 1 lines
//! 16-22).
//!
//! Two codebook entries merge when **all** enabled criteria hold:
//! * `W2(N_i, N_j)^2 < tau_d`: the **squared** Wasserstein-2 distance, in `(mu, sigma)` units,
//!   as the paper's merging equation computes it and the authors' released code thresholds it;
//! * gradient: `|g_i - g_j| < tau_g`, where `g_k` is the mean `d loss / d mu` of entry k's
//!   plain-shared members (skipped without gradients, with `tau_g = None`, or when an entry
//!   has no plain-shared member);
//! * variance: the standard deviation of `mu` over the plain-shared members of both entries
//!   together is `< tau_v` (skipped with `tau_v = None` or without members).
//!
//! **Candidate pairs** come from a uniform grid over the component means with cell side
//! `sqrt(tau_d)`: since `W2^2 >= |m_i - m_j|^2`, only pairs whose means are closer than
//! `sqrt(tau_d)` can merge, and all of them are in neighbouring cells, so the pruning is exact
//! and no pass looks at all `K^2` pairs (unless all means really are that close).
//!
//! The released code looks for partners among each component's 3 nearest neighbours only; a
//! pass here considers every pair under the threshold, a superset, and the greedy matching
//! merges the closest pairs first.
//!
//! **Passes**: each pass collects the qualifying pairs, sorts them by `(W2, i, j)` and merges
//! them greedily as a matching (each entry takes part in at most one merge per pass; the merged
//! Gaussian replaces the lower index). Passes repeat until one merges nothing, so merged entries
//! can merge again. K never increases: every merge removes exactly one entry. The order is
//! fully deterministic.
//!
//! After the passes the codebook is compacted (survivors keep their relative order), every
//! `Shared(k)` and every ellipse component is remapped, ellipse blends that now name the same
//! entry twice have their alphas summed, and an ellipse weight left with a single distinct
//! entry becomes plain-shared (`Shared`). Counts are recomputed.

use std::collections::HashMap;

use gauss2d::Gaussian2;
use gauss2d::merge::merge_weighted;
use serde::{Deserialize, Serialize};

use crate::config::MergeConfig;
use crate::error::SwshareError;
use crate::fate::WeightFate;
use crate::plan::{CodebookEntry, EllipseWeight, MAX_BLEND, SharingPlan};
use crate::table::WeightTable;

/// Sufficient statistics of an entry's plain-shared members for the merge criteria.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberStats {
    /// Number of members.
    pub n: u64,
    /// Sum of their `mu`.
    pub sum_mu: f64,
    /// Sum of their `mu^2`.
    pub sum_mu2: f64,
    /// Sum of their `d loss / d mu` (0 without gradients).
    pub sum_grad: f64,
}

impl MemberStats {
    fn add(&mut self, o: &Self) {
        self.n += o.n;
        self.sum_mu += o.sum_mu;
        self.sum_mu2 += o.sum_mu2;
        self.sum_grad += o.sum_grad;
    }
    /// Mean gradient, if there are members.
    pub fn mean_grad(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum_grad / self.n as f64)
    }
    /// Standard deviation of `mu` (population), if there are members.
    pub fn std_mu(&self) -> Option<f64> {
        (self.n > 0).then(|| {
            let n = self.n as f64;
            let m = self.sum_mu / n;
            (self.sum_mu2 / n - m * m).max(0.0).sqrt()
        })
    }
}

/// Member statistics of every codebook entry from the plan's plain-shared weights.
pub fn member_stats(
    plan: &SharingPlan,
    table: &WeightTable,
) -> Result<Vec<MemberStats>, SwshareError> {
    if plan.n_weights() != table.n_shareable() {
        return Err(SwshareError::Mismatch {
            what: "shareable weights",
            plan: plan.n_weights(),
            input: table.n_shareable(),
        });
    }
    let mu = table.gather_shareable(table.mu());
    let grad = table.grad_mu().map(|g| table.gather_shareable(g));
    let mut stats = vec![MemberStats::default(); plan.k()];
    for (p, f) in plan.fates.iter().enumerate() {
        if let WeightFate::Shared(k) = *f
            && let Some(s) = stats.get_mut(k as usize)
        {
            let m = f64::from(mu[p]);
            s.n += 1;
            s.sum_mu += m;
            s.sum_mu2 += m * m;
            if let Some(g) = &grad {
                s.sum_grad += f64::from(g[p]);
            }
        }
    }
    Ok(stats)
}

/// What merging did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeOutcome {
    /// Entries before merging.
    pub k_before: usize,
    /// Entries after merging (`<= k_before`).
    pub k_after: usize,
    /// Passes run, including the last one that merged nothing (0 when merging is disabled).
    pub passes: usize,
    /// Pairwise merges performed (`k_before - k_after`).
    pub merges: usize,
    /// Old entry index -> new entry index.
    pub map: Vec<u32>,
}

/// The criteria of one merge run.
struct Criteria<'a> {
    cfg: &'a MergeConfig,
    use_grad: bool,
}

impl Criteria<'_> {
    fn stats_ok(&self, a: &MemberStats, b: &MemberStats) -> bool {
        if self.use_grad
            && let (Some(tau_g), Some(ga), Some(gb)) =
                (self.cfg.tau_g, a.mean_grad(), b.mean_grad())
            && (ga - gb).abs() >= tau_g
        {
            return false;
        }
        if let Some(tau_v) = self.cfg.tau_v {
            let mut s = *a;
            s.add(b);
            if let Some(sd) = s.std_mu()
                && sd >= tau_v
            {
                return false;
            }
        }
        true
    }
}

fn cell(v: f64, h: f64) -> i64 {
    // `as` saturates, so huge coordinates only share a cell (extra candidates, never misses).
    (v / h).floor() as i64
}

/// The components that survive [`merge_components`].
#[derive(Debug, Clone, PartialEq)]
pub struct MergedComponents {
    /// Surviving components, in the order of their lowest original index.
    pub components: Vec<Gaussian2>,
    /// Their mixing weights (sums of the merged ones').
    pub mixing: Vec<f64>,
    /// Their members' statistics (sums of the merged ones').
    pub stats: Vec<MemberStats>,
    /// Old component index -> new component index.
    pub map: Vec<u32>,
    /// Passes run, including the last one that merged nothing.
    pub passes: usize,
    /// Pairwise merges performed.
    pub merges: usize,
}

/// Merges the components pass after pass (see the module docs). `stats` may be empty (then
/// the gradient and variance criteria are skipped).
pub fn merge_components(
    components: &[Gaussian2],
    mixing: &[f64],
    stats: &[MemberStats],
    has_gradients: bool,
    cfg: &MergeConfig,
) -> Result<MergedComponents, SwshareError> {
    cfg.validate()?;
    let k = components.len();
    if mixing.len() != k || !(stats.is_empty() || stats.len() == k) {
        return Err(SwshareError::Mismatch {
            what: "mixing weights / member stats per component",
            plan: k,
            input: if mixing.len() != k {
                mixing.len()
            } else {
                stats.len()
            },
        });
    }
    let mut comps = components.to_vec();
    let mut mix = mixing.to_vec();
    let mut st = if stats.is_empty() {
        vec![MemberStats::default(); k]
    } else {
        stats.to_vec()
    };
    let mut parent: Vec<u32> = (0..k as u32).collect();
    let mut active = vec![true; k];
    let crit = Criteria {
        cfg,
        use_grad: has_gradients && !stats.is_empty(),
    };
    let rule = cfg.rule;
    // Grid cell side: a pair can pass `W2^2 < tau_d` only if its means are `sqrt(tau_d)` apart.
    let h = cfg.tau_d.sqrt();
    let (mut passes, mut merges) = (0usize, 0usize);
    while cfg.enabled && h > 0.0 && k > 1 && passes < cfg.max_passes {
        passes += 1;
        let mut grid: HashMap<(i64, i64), Vec<u32>> = HashMap::new();
        for (i, g) in comps.iter().enumerate().filter(|(i, _)| active[*i]) {
            let m = g.mean();
            grid.entry((cell(m.x, h), cell(m.y, h)))
                .or_default()
                .push(i as u32);
        }
        let mut pairs: Vec<(f64, u32, u32)> = Vec::new();
        for (i, gi) in comps.iter().enumerate().filter(|(i, _)| active[*i]) {
            let mi = gi.mean();
            let (cx, cy) = (cell(mi.x, h), cell(mi.y, h));
            for dx in -1i64..=1 {
                for dy in -1i64..=1 {
                    let key = (cx.saturating_add(dx), cy.saturating_add(dy));
                    let Some(list) = grid.get(&key) else { continue };
                    for &j in list.iter().filter(|&&j| j as usize > i) {
                        let gj = &comps[j as usize];
                        if (gj.mean() - mi).norm() >= h {
                            continue;
                        }
                        let d = gauss2d::w2(gi, gj);
                        if d * d < cfg.tau_d && crit.stats_ok(&st[i], &st[j as usize]) {
                            pairs.push((d, i as u32, j));
                        }
                    }
                }
            }
        }
        // Saturated cells can repeat a key among the 9 neighbours; drop duplicate pairs.
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        pairs.dedup_by(|a, b| a.1 == b.1 && a.2 == b.2);
        let mut used = vec![false; k];
        let mut merged_this_pass = 0usize;
        for (_, i, j) in pairs {
            let (i, j) = (i as usize, j as usize);
            if used[i] || used[j] {
                continue;
            }
            used[i] = true;
            used[j] = true;
            let (wi, wj) = if mix[i] + mix[j] > 0.0 {
                (mix[i], mix[j])
            } else {
                (1.0, 1.0)
            };
            let g = merge_weighted(rule, &[(wi, comps[i]), (wj, comps[j])]).map_err(|source| {
                SwshareError::Gauss {
                    context: format!("merging components {i} and {j}"),
                    source,
                }
            })?;
            comps[i] = g;
            mix[i] += mix[j];
            let sj = st[j];
            st[i].add(&sj);
            active[j] = false;
            parent[j] = i as u32;
            merged_this_pass += 1;
        }
        merges += merged_this_pass;
        if merged_this_pass == 0 {
            break;
        }
    }
    // Compact: survivors in index order; merged entries follow their parent chain (a parent
    // always has a lower index, so one forward sweep resolves every chain).
    let mut map = vec![0u32; k];
    let mut new_index = vec![u32::MAX; k];
    let (mut out_c, mut out_m, mut out_s) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..k {
        if active[i] {
            new_index[i] = out_c.len() as u32;
            out_c.push(comps[i]);
            out_m.push(mix[i]);
            out_s.push(st[i]);
        }
    }
    for (i, m) in map.iter_mut().enumerate() {
        let mut r = i;
        while parent[r] as usize != r {
            r = parent[r] as usize;
        }
        *m = new_index[r];
    }
    Ok(MergedComponents {
        components: out_c,
        mixing: out_m,
        stats: out_s,
        map,
        passes,
        merges,
    })
}

/// Applies an old->new entry map to fates and ellipses (see the module docs), replacing the
/// codebook by `codebook`, and recounts.
pub fn remap_plan(plan: &mut SharingPlan, map: &[u32], codebook: Vec<CodebookEntry>) {
    let mut ellipses = Vec::with_capacity(plan.ellipses.len());
    for e in &plan.ellipses {
        let mut comps: Vec<(u32, f32)> = Vec::with_capacity(MAX_BLEND);
        for (c, a) in e.blend() {
            let nc = map[c as usize];
            match comps.iter_mut().find(|(x, _)| *x == nc) {
                Some(slot) => slot.1 += a,
                None => comps.push((nc, a)),
            }
        }
        comps.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if comps.len() == 1 {
            plan.fates[e.weight as usize] = WeightFate::Shared(comps[0].0);
            continue;
        }
        let mut ne = EllipseWeight {
            weight: e.weight,
            components: [0; MAX_BLEND],
            alphas: [0.0; MAX_BLEND],
            len: comps.len() as u8,
        };
        for (s, (c, a)) in comps.into_iter().enumerate() {
            ne.components[s] = c;
            ne.alphas[s] = a;
        }
        plan.fates[e.weight as usize] = WeightFate::Ellipse(ellipses.len() as u32);
        ellipses.push(ne);
    }
    plan.ellipses = ellipses;
    for f in &mut plan.fates {
        if let WeightFate::Shared(k) = f {
            *k = map[*k as usize];
        }
    }
    plan.codebook = codebook;
    plan.recount();
}

/// Stage 2: merges close codebook entries of `plan` (criteria computed from `table`).
pub fn merge_gaussians(
    plan: &mut SharingPlan,
    table: &WeightTable,
    cfg: &MergeConfig,
) -> Result<MergeOutcome, SwshareError> {
    let stats = member_stats(plan, table)?;
    let comps: Vec<Gaussian2> = plan.codebook.iter().map(|e| e.gaussian).collect();
    let mix: Vec<f64> = plan.codebook.iter().map(|e| e.mixing_weight).collect();
    let merged = merge_components(&comps, &mix, &stats, table.grad_mu().is_some(), cfg)?;
    let codebook = merged
        .components
        .into_iter()
        .zip(merged.mixing)
        .map(|(g, w)| CodebookEntry::new(g, w))
        .collect();
    remap_plan(plan, &merged.map, codebook);
    Ok(MergeOutcome {
        k_before: comps.len(),
        k_after: plan.k(),
        passes: merged.passes,
        merges: merged.merges,
        map: merged.map,
    })
}
