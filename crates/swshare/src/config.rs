//! Configuration of every stage, with the paper's values as defaults.
//!
//! "Paper" below is *Stochastic weight sharing for Bayesian neural networks* (2DGBNN,
//! AISTATS 2025). Where the paper gives two different values, the choice is explained on the
//! field and in the crate README. All structs are `serde` with `#[serde(default)]`, so a JSON
//! file may give only the fields it changes; unknown fields are rejected (typos fail loudly).

use serde::{Deserialize, Serialize};

pub use gauss2d::merge::MergeRule;

use crate::error::SwshareError;
use crate::plan::MAX_BLEND;

/// The configuration of stages 1 and 2 (the burn-free part of the method). Stage 3, the
/// retraining, is `bnn_train::TrainConfig` inside `compress::CompressConfig` (burn feature), so
/// each stage has exactly one config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwshareConfig {
    /// Stage 1: outlier detection.
    pub outliers: OutlierConfig,
    /// Stage 1 (end): the GMM fitted to the inliers' `(mu, sigma)`. The default has
    /// `k = 2000` (paper, appendix "Hyper-parameters for training BNN", text: "we initially use
    /// K = 2000 clusters"; the same appendix's table lists 6000, also used for the larger
    /// models).
    pub gmm: gmm_minibatch::GmmConfig,
    /// Stage 2: cluster-size reduction, ellipse weights and merging.
    pub refine: RefineConfig,
    /// The space the weights are shared in: the method's `(mu, sigma)` plane (default), or
    /// `mu` alone, the 1-D sharing baseline.
    pub space: SharingSpace,
}

/// Where weights are clustered for sharing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SharingSpace {
    /// The method: a 2-D GMM over `(mu, sigma)`, then ellipse weights and merging.
    #[default]
    MuSigma,
    /// The 1-D sharing baseline ([`crate::mu_only`]): `K` clusters of `mu` alone, one `sigma`
    /// per cluster (its members' mean); the same outlier rules and cluster-size reduction, no
    /// ellipse weights and no merging (both are defined in the `(mu, sigma)` plane).
    MuOnly,
}

/// Why `gmm.k` is at most [`gmm_minibatch::MAX_K`] (the error's text).
const MAX_K_WHY: &str =
    "must be at most gmm_minibatch::MAX_K = 32768 (the fit's time grows with K)";

// Every K the fit accepts is a codebook a `.swb` index can store (K <= 65534).
const _: () = assert!(gmm_minibatch::MAX_K <= 65_534);

/// Default number of GMM components, `K = 2000` (paper appendix text).
pub const DEFAULT_K: usize = 2000;

impl Default for SwshareConfig {
    fn default() -> Self {
        Self {
            outliers: OutlierConfig::default(),
            gmm: gmm_minibatch::GmmConfig {
                k: DEFAULT_K,
                ..Default::default()
            },
            refine: RefineConfig::default(),
            space: SharingSpace::default(),
        }
    }
}

impl SwshareConfig {
    /// Checks every field's range (the GMM's own fields are checked by `gmm-minibatch`).
    pub fn validate(&self) -> Result<(), SwshareError> {
        self.outliers.validate()?;
        if self.gmm.k == 0 {
            return Err(SwshareError::config("gmm.k", 0, "must be >= 1"));
        }
        // Checked here, before any stage runs, rather than when the GMM is fitted or the
        // `.swb` file is written: the one bound, `gmm_minibatch::MAX_K`, which a `.swb` index
        // can always store (asserted below).
        if self.gmm.k > gmm_minibatch::MAX_K {
            return Err(SwshareError::config("gmm.k", self.gmm.k, MAX_K_WHY));
        }
        self.refine.validate()
    }

    /// Pretty JSON of the configuration.
    pub fn to_json(&self) -> String {
        // Serialising plain numbers, strings and enums cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Parses a JSON configuration (missing fields take their defaults) and validates it.
    pub fn from_json(s: &str) -> Result<Self, SwshareError> {
        let cfg: Self = serde_json::from_str(s)
            .map_err(|e| SwshareError::config("<json>", e, "not a valid SwshareConfig"))?;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Merges the JSON `patch` into `base`: the one rule of every partial configuration file
/// (`CompressConfig::from_json`, which `swbnn compress --config` reads, and the `--setup` file
/// of `cargo xtask reproduce`). Objects merge field by field; an empty object changes nothing;
/// an object that shares no key with the base's replaces it (another variant of an enum, e.g.
/// `{"sgd": {...}}` for `{"adam": {...}}`); any other value replaces the base's.
pub fn merge_json(base: &mut serde_json::Value, patch: serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(b), serde_json::Value::Object(p))
            if p.is_empty() || p.keys().any(|k| b.contains_key(k)) =>
        {
            for (k, v) in p {
                match b.get_mut(&k) {
                    Some(slot) => merge_json(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// The `tau_sd` that `swbnn.torch` compresses with by default: PyTorch libraries initialise
/// every posterior mean from one distribution whatever the fan-in (bayesian-torch: `N(0,
/// 0.1)`), so the paper's fixed `tau_w` marks a share of every layer's bulk as outliers.
/// Chosen on the validation split of a development seed (docs/benchmarks.md); the command
/// line keeps the paper's rule (`tau_sd = 0`) until the zoo's models are checked with it.
pub const TORCH_TAU_SD: f64 = 3.0;

/// Stage 1: which weights keep their own distribution (paper section 3.1, "Outliers vs.
/// Inliers Classification").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutlierConfig {
    /// `tau_w`: a weight with `|mu| > tau_w` is an outlier ([`crate::OutlierCause::MeanThreshold`]).
    /// Default 0.2: paper section 3.1 ("e.g. tau = 0.2"), appendix table `T_w = ±0.2`, and the
    /// `tau_w` ablation table (0.2 gives the best trade-off).
    pub tau_w: f64,
    /// `z`: a layer's mean threshold is `max(tau_w, z * sd)`, `sd` the standard deviation of
    /// that layer's `mu`, so a layer whose means are spread wide (an initialisation that
    /// ignores fan-in, such as bayesian-torch's `N(0, 0.1)` for every layer) keeps its tail as
    /// outliers, not a fixed share of its bulk. `0` is the paper's rule (`tau_w` alone).
    /// Default 0.
    pub tau_sd: f64,
    /// `P_g`: the fraction of shareable weights with the largest `|d loss / d mu|` that become
    /// outliers ([`crate::OutlierCause::Gradient`]). Default 0.01: paper section 3.1 ("top 1%")
    /// and appendix table (`P_g` = top 1 %). `0` disables the criterion. The count is
    /// `floor(P_g * n_shareable)`.
    pub grad_top_fraction: f64,
    /// Number of mini-batches whose `d loss / d mu` the collecting edge averages into the
    /// table's `grad_mu`. The paper does not say; default 10. Not used by the core itself.
    pub grad_batches: usize,
}

impl Default for OutlierConfig {
    fn default() -> Self {
        Self {
            tau_w: 0.2,
            tau_sd: 0.0,
            grad_top_fraction: 0.01,
            grad_batches: 10,
        }
    }
}

impl OutlierConfig {
    /// Range checks.
    pub fn validate(&self) -> Result<(), SwshareError> {
        if !(self.tau_w.is_finite() && self.tau_w >= 0.0) {
            return Err(SwshareError::config(
                "outliers.tau_w",
                self.tau_w,
                "must be finite and >= 0",
            ));
        }
        if !(self.tau_sd.is_finite() && self.tau_sd >= 0.0) {
            return Err(SwshareError::config(
                "outliers.tau_sd",
                self.tau_sd,
                "must be finite and >= 0",
            ));
        }
        if !(0.0..=1.0).contains(&self.grad_top_fraction) {
            return Err(SwshareError::config(
                "outliers.grad_top_fraction",
                self.grad_top_fraction,
                "must be in [0, 1]",
            ));
        }
        if self.grad_batches == 0 {
            return Err(SwshareError::config(
                "outliers.grad_batches",
                0,
                "must be >= 1",
            ));
        }
        Ok(())
    }
}

/// What to do with the components dropped by the cluster-size reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SmallClusterPolicy {
    /// Drop them and renormalise the remaining mixing weights. The surviving components'
    /// members are unchanged (with hard assignment, a point whose best component survives
    /// keeps it).
    Drop,
    /// Drop them, then re-estimate every surviving component's mean and covariance from its
    /// hard-assigned members (one hard M-step), keeping the mixing weights renormalised.
    DropAndRefit,
}

/// Stage 2: refinement of the GMM (paper section 3.2, "2DGBNN training", and 3.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RefineConfig {
    /// `N_min`: members of components with fewer than `n_min` hard-assigned weights become
    /// outliers ([`crate::OutlierCause::SmallCluster`]). Default 30: paper section 3.2
    /// ("clusters associated with fewer than 30 weights") and the appendix text
    /// ("N_min = 30 is enforced"); the appendix *table* says 20, which contradicts both.
    pub n_min: usize,
    /// What happens to the small components.
    pub small_clusters: SmallClusterPolicy,
    /// Ellipse (alpha-blended) weights.
    pub ellipse: EllipseConfig,
    /// Merging of close Gaussians.
    pub merge: MergeConfig,
}

impl Default for RefineConfig {
    fn default() -> Self {
        Self {
            n_min: 30,
            small_clusters: SmallClusterPolicy::Drop,
            ellipse: EllipseConfig::default(),
            merge: MergeConfig::default(),
        }
    }
}

impl RefineConfig {
    /// Range checks.
    pub fn validate(&self) -> Result<(), SwshareError> {
        self.ellipse.validate()?;
        self.merge.validate()
    }
}

/// Ellipse weights (paper section 3.3, "alpha-blending (Multi-Clusters) for Weights").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EllipseConfig {
    /// Whether to detect ellipse weights at all.
    pub enabled: bool,
    /// `T_M`: a plain-shared weight whose squared Mahalanobis distance to its component
    /// exceeds this becomes an ellipse weight. Default 5.991, the 95 % quantile of chi-square
    /// with 2 degrees of freedom (paper section 3.3 and appendix table `T_M`).
    pub t_m: f64,
    /// `k`: number of components an ellipse weight blends (the highest-pdf ones). Default 5
    /// (appendix table, "Number of nearest Gaussians"); at most [`MAX_BLEND`].
    pub k: usize,
}

impl Default for EllipseConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            t_m: 5.991,
            k: 5,
        }
    }
}

impl EllipseConfig {
    /// Range checks.
    pub fn validate(&self) -> Result<(), SwshareError> {
        if !(self.t_m.is_finite() && self.t_m >= 0.0) {
            return Err(SwshareError::config(
                "refine.ellipse.t_m",
                self.t_m,
                "must be finite and >= 0",
            ));
        }
        if !(2..=MAX_BLEND).contains(&self.k) {
            return Err(SwshareError::config(
                "refine.ellipse.k",
                self.k,
                "must be in 2..=5 (MAX_BLEND)",
            ));
        }
        Ok(())
    }
}

/// Merging of close Gaussians (paper section 3.2, "Merging Gaussians", and appendix
/// "Wasserstein-based 2D Gaussian Merging").
///
/// A pair merges when **all** enabled criteria hold: `W2^2 < tau_d`, the gradient criterion
/// and the variance criterion. Merging repeats, pass after pass, until a pass merges nothing
/// (or `max_passes` is reached).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MergeConfig {
    /// Whether to merge at all.
    pub enabled: bool,
    /// `tau_d`: threshold on the **squared** Wasserstein-2 distance `W2^2` (the paper's merging
    /// equation computes `W2^2`; the authors' released code thresholds `W2^2 < 1.5e-7`), in
    /// the original `(mu, sigma)` units of the table. Default `1.5e-7`, the value the appendix
    /// text states ("The Wasserstein distance threshold is set at 1.5e-7"), i.e. components
    /// closer than `W2 = 3.9e-4`. The appendix table says `1e-2` instead (`W2 < 0.1`): in
    /// `(mu, sigma)` units that exceeds the whole typical sigma range and half the inlier mu
    /// range (`|mu| <= 0.2`), so repeated merging would collapse K = 2000 to a handful of
    /// Gaussians, contradicting the 2000-5000 Gaussians the paper reports.
    pub tau_d: f64,
    /// `tau_g`: maximal `|mean grad_1 - mean grad_2|`, where `mean grad_k` is the average
    /// `d loss / d mu` of component k's plain-shared members. `None` (default) disables it;
    /// the paper names the criterion but gives no value. Skipped when the table has no
    /// gradients, and for a pair where a component has no plain-shared member.
    pub tau_g: Option<f64>,
    /// `tau_v`: maximal standard deviation of `mu` over the plain-shared members of the two
    /// components together (the spread of the cluster the merge would create). `None`
    /// (default) disables it; the paper names the criterion but gives no value.
    pub tau_v: Option<f64>,
    /// How a pair is merged ([`MergeRule`], from `gauss2d`): `Paper` (default; the paper's
    /// equations 8-9), `W2Barycenter` or `MomentMatch`. The two mixing weights are passed as
    /// the merge weights.
    pub rule: MergeRule,
    /// Safety cap on merge passes (each pass that merges anything lowers K by at least one,
    /// so `K - 1` passes always suffice).
    pub max_passes: usize,
}

impl Default for MergeConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            tau_d: 1.5e-7,
            tau_g: None,
            tau_v: None,
            rule: MergeRule::Paper,
            max_passes: 10_000,
        }
    }
}

impl MergeConfig {
    /// Range checks.
    pub fn validate(&self) -> Result<(), SwshareError> {
        if !(self.tau_d.is_finite() && self.tau_d >= 0.0) {
            return Err(SwshareError::config(
                "refine.merge.tau_d",
                self.tau_d,
                "must be finite and >= 0",
            ));
        }
        for (field, v) in [
            ("refine.merge.tau_g", self.tau_g),
            ("refine.merge.tau_v", self.tau_v),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(SwshareError::config(field, v, "must be finite and >= 0"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers() {
        let c = SwshareConfig::default();
        assert_eq!(c.outliers.tau_w, 0.2);
        assert_eq!(c.outliers.grad_top_fraction, 0.01);
        assert_eq!(c.gmm.k, 2000);
        assert_eq!(c.refine.n_min, 30);
        assert_eq!(c.refine.ellipse.t_m, 5.991);
        assert_eq!(c.refine.ellipse.k, 5);
        assert_eq!(c.refine.merge.tau_d, 1.5e-7);
        assert_eq!(c.refine.merge.rule, MergeRule::Paper);
        c.validate().unwrap();
    }

    #[test]
    fn a_k_beyond_the_bound_is_refused() {
        let mut c = SwshareConfig::default();
        c.gmm.k = gmm_minibatch::MAX_K;
        c.validate().unwrap();
        for k in [gmm_minibatch::MAX_K + 1, 65535, usize::MAX] {
            c.gmm.k = k;
            let e = c.validate().unwrap_err().to_string();
            let bound = gmm_minibatch::MAX_K.to_string();
            assert!(e.contains("gmm.k") && e.contains(&bound), "{e}");
        }
    }

    #[test]
    fn t_m_is_the_chi2_95_quantile() {
        let q = gauss2d::chi2_2_quantile(0.95).unwrap();
        assert!((q - EllipseConfig::default().t_m).abs() < 1e-3, "{q}");
    }

    #[test]
    fn json_roundtrip() {
        let mut c = SwshareConfig::default();
        c.refine.merge.tau_g = Some(1e-3);
        c.refine.merge.rule = MergeRule::MomentMatch;
        c.refine.small_clusters = SmallClusterPolicy::DropAndRefit;
        c.gmm.k = 6000;
        let back = SwshareConfig::from_json(&c.to_json()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn partial_json_takes_defaults_and_typos_fail() {
        let c = SwshareConfig::from_json(r#"{"refine": {"n_min": 20}}"#).unwrap();
        assert_eq!(c.refine.n_min, 20);
        assert_eq!(c.outliers.tau_w, 0.2);
        assert!(SwshareConfig::from_json(r#"{"refine": {"nmin": 20}}"#).is_err());
    }

    /// Fields merge at any depth, another enum variant replaces the base's, `{}` keeps it.
    #[test]
    fn json_patches_merge_field_by_field_and_replace_variants() {
        let mut base = serde_json::json!({
            "a": {"b": {"c": 1, "d": 2}, "e": 3},
            "opt": {"adam": {"lr": 1, "beta": 2}},
            "keep": {"x": 1},
        });
        merge_json(
            &mut base,
            serde_json::json!({
                "a": {"b": {"c": 10}},
                "opt": {"sgd": {"momentum": 0.9}},
                "keep": {},
                "new": 5,
            }),
        );
        assert_eq!(
            base,
            serde_json::json!({
                "a": {"b": {"c": 10, "d": 2}, "e": 3},
                "opt": {"sgd": {"momentum": 0.9}},
                "keep": {"x": 1},
                "new": 5,
            })
        );
        let mut same_variant = serde_json::json!({"adam": {"lr": 1, "beta": 2}});
        merge_json(&mut same_variant, serde_json::json!({"adam": {"lr": 5}}));
        assert_eq!(
            same_variant,
            serde_json::json!({"adam": {"lr": 5, "beta": 2}})
        );
    }

    #[test]
    fn out_of_range_values_are_rejected() {
        let mut c = SwshareConfig::default();
        c.refine.ellipse.k = 6;
        assert!(c.validate().is_err());
        let mut c = SwshareConfig::default();
        c.outliers.grad_top_fraction = 1.5;
        assert!(c.validate().is_err());
        let mut c = SwshareConfig::default();
        c.refine.merge.tau_v = Some(f64::NAN);
        assert!(c.validate().is_err());
        let mut c = SwshareConfig::default();
        c.outliers.tau_w = -1.0;
        assert!(c.validate().is_err());
    }
}
