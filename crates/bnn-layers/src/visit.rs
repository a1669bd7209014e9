//! Walking a model's parameters by path: KL collection, export of (mu, sigma, grad) and the
//! sampling switch.
//!
//! Paths are burn's field paths joined with `.` (e.g. `layer1.0.conv1.weight_mu`), with enum
//! variant names left out, so a deterministic, a Bayesian and a shared build of one architecture
//! give the same layer paths. The order is the visiting order: the declaration order of fields,
//! which is stable for a given architecture.

use burn::module::{Flag, Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::Int;

use crate::Prior;
use crate::forward::sigma_of_rho;
use crate::prior::{SharedKl, kl_gaussian_each, kl_gaussian_sum};
use crate::shared::{CodebookView, gather_sources};

/// Where a [`ModuleVisitor`] or [`ModuleMapper`] is in a model: the field names of the modules
/// entered, enum variant names left out (the paths of this module's docs). Call
/// [`enter`](Self::enter) and [`exit`](Self::exit) from the visitor's `enter_module` and
/// `exit_module`.
#[derive(Debug, Clone, Default)]
pub struct ModulePath {
    names: Vec<String>,
    containers: Vec<String>,
    /// Per entered module, whether it was left out of the path.
    skipped: Vec<bool>,
}

impl ModulePath {
    /// Enters the module `name` of burn's `container_type` (`Struct:Name`, `Enum:Name`, ...).
    pub fn enter(&mut self, name: &str, container_type: &str) {
        let skip = container_type.starts_with("Enum:");
        self.skipped.push(skip);
        if !skip {
            self.names.push(name.to_string());
            self.containers.push(container_type.to_string());
        }
    }

    /// Leaves the module entered last.
    pub fn exit(&mut self) {
        if !self.skipped.pop().unwrap_or(false) {
            self.names.pop();
            self.containers.pop();
        }
    }

    /// The path, names joined with `.` (e.g. `layer1.0.conv1.weight_mu`).
    pub fn joined(&self) -> String {
        self.names.join(".")
    }

    /// The innermost name (a parameter's field name while visiting it), `""` at the root.
    pub fn last(&self) -> &str {
        self.names.last().map_or("", String::as_str)
    }

    /// The innermost module's container type (e.g. `Struct:Codebook` while visiting its
    /// parameter), `""` at the root.
    pub fn container(&self) -> &str {
        self.containers.last().map_or("", String::as_str)
    }
}

/// One float parameter seen by the collector.
#[derive(Debug, Clone)]
pub(crate) struct FloatEntry {
    pub(crate) path: String,
    pub(crate) parent: String,
    pub(crate) shape: Vec<usize>,
    pub(crate) flat: Tensor<1>,
    pub(crate) grad: Option<Tensor<1>>,
}

/// Collects every float and int parameter with its path.
#[derive(Default)]
pub(crate) struct Collector<'g> {
    path: ModulePath,
    pub(crate) floats: Vec<FloatEntry>,
    /// In the order the model visits them, which is the order sums over them take: a map's
    /// order changes from one collection to the next, and with it the rounding of a sum.
    pub(crate) ints: Vec<(String, Tensor<1, Int>)>,
    grads: Option<&'g burn::tensor::Gradients>,
}

fn flatten<const D: usize>(t: Tensor<D>) -> Tensor<1> {
    let n = t.shape().num_elements();
    t.reshape([n])
}

fn flatten_int<const D: usize>(t: Tensor<D, Int>) -> Tensor<1, Int> {
    let n = t.shape().num_elements();
    t.reshape([n])
}

impl<'g> Collector<'g> {
    pub(crate) fn collect<M: Module>(
        model: &M,
        grads: Option<&'g burn::tensor::Gradients>,
    ) -> Self {
        let mut c = Collector {
            grads,
            ..Default::default()
        };
        model.visit(&mut c);
        c
    }

    fn current(&self) -> String {
        self.path.joined()
    }

    pub(crate) fn float(&self, path: &str) -> Option<&FloatEntry> {
        self.floats.iter().find(|e| e.path == path)
    }

    pub(crate) fn int(&self, path: &str) -> Option<&Tensor<1, Int>> {
        self.ints.iter().find(|(p, _)| p == path).map(|(_, t)| t)
    }
}

impl ModuleVisitor for Collector<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        let grad = self.grads.and_then(|g| value.grad(g)).map(flatten);
        self.floats.push(FloatEntry {
            path: self.current(),
            parent: self.path.container().to_string(),
            shape: value.dims().to_vec(),
            flat: flatten(value),
            grad,
        });
    }

    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<D, Int>>) {
        self.ints.push((self.current(), flatten_int(param.val())));
    }
}

/// Whether a Bayesian tensor is a layer's weight (shareable) or its bias (never shared).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ParamRole {
    /// A weight tensor: candidate for sharing.
    Weight,
    /// A bias: kept per-weight (the paper shares weights only).
    Bias,
}

/// A Bayesian tensor of a model, exported to the host.
#[derive(Debug, Clone, PartialEq)]
pub struct BayesTensor {
    /// Path of the tensor without the `_mu` suffix, e.g. `layer1.0.conv1.weight`.
    pub path: String,
    /// Weight or bias.
    pub role: ParamRole,
    /// Tensor shape.
    pub shape: Vec<usize>,
    /// Posterior means, row-major.
    pub mu: Vec<f32>,
    /// Posterior standard deviations `softplus(rho)`.
    pub sigma: Vec<f32>,
    /// `d loss / d mu`, when gradients were given.
    pub grad_mu: Option<Vec<f32>>,
}

fn to_vec(t: Tensor<1>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap_or_default()
}

/// Pairs of `<x>_mu` / `<x>_rho` parameters, in visiting order.
fn bayes_pairs<'a>(c: &'a Collector<'_>) -> Vec<(String, &'a FloatEntry, &'a FloatEntry)> {
    c.floats
        .iter()
        .filter_map(|e| {
            let base = e.path.strip_suffix("_mu")?;
            if base.ends_with("_prior") {
                return None;
            }
            let rho = c.float(&format!("{base}_rho"))?;
            Some((base.to_string(), e, rho))
        })
        .collect()
}

fn role_of(base: &str) -> ParamRole {
    if base
        .rsplit('.')
        .next()
        .is_some_and(|n| n.starts_with("bias"))
    {
        ParamRole::Bias
    } else {
        ParamRole::Weight
    }
}

/// Exports every per-weight Bayesian tensor (`*_mu` / `*_rho` pairs) with its path, in the
/// stable visiting order; with `grads`, also `d loss / d mu`.
///
/// Shared layers' outliers are not included: use this on the Bayesian model before sharing.
pub fn export_bayes<M: Module>(
    model: &M,
    grads: Option<&burn::tensor::Gradients>,
) -> Vec<BayesTensor> {
    let c = Collector::collect(model, grads);
    bayes_pairs(&c)
        .into_iter()
        .filter(|(_, mu, _)| mu.parent != "Struct:Codebook" && mu.parent != "Struct:SharedWeight")
        .map(|(base, mu, rho)| BayesTensor {
            role: role_of(&base),
            path: base,
            shape: mu.shape.clone(),
            mu: to_vec(mu.flat.clone()),
            sigma: to_vec(sigma_of_rho(rho.flat.clone())),
            grad_mu: mu.grad.clone().map(to_vec),
        })
        .collect()
}

/// The posterior `(mu, sigma)` of every weight tensor of a Bayesian **or** weight-shared model:
/// [`export_bayes`]'s tensors, plus, for each shared weight (`<layer>.weight`), every weight's
/// gathered distribution (its codebook entry, its own outlier values or its ellipse blend).
/// What diagnostics compare before and after sharing.
pub fn export_posterior<M: Module>(model: &M) -> Vec<BayesTensor> {
    let c = Collector::collect(model, None);
    let mut out = export_bayes(model, None);
    if let Some(view) = codebook_view(&c) {
        let shared = c
            .ints
            .iter()
            .filter_map(|(p, t)| Some((p.strip_suffix(".index")?, t)));
        for (prefix, index) in shared {
            let (mu, sigma) = gather_shared(&c, prefix, index.clone(), &view);
            out.push(BayesTensor {
                path: prefix.to_string(),
                role: ParamRole::Weight,
                shape: mu.dims().to_vec(),
                mu: to_vec(mu),
                sigma: to_vec(sigma),
                grad_mu: None,
            });
        }
    }
    out
}

/// The model's total KL divergence `KL(q(w) || p(w))` over every Bayesian tensor, in closed form,
/// as a one-element tensor that carries gradients. `None` if the model has no Bayesian parameter.
///
/// Shared weights contribute `sum_i KL(q_i || p)` with `q_i` the weight's gathered distribution,
/// which equals `sum_k n_k KL(N(mu_k, sigma_k^2) || p)` plus the outliers' and ellipse weights'
/// terms: exact, since each weight draws independently from its shared distribution
/// ([`SharedKl::PerWeight`]; see [`kl_divergence_with`] for the paper's bound).
pub fn kl_divergence<M: Module>(model: &M, prior: &Prior) -> Option<Tensor<1>> {
    kl_divergence_with(model, prior, SharedKl::PerWeight)
}

/// [`kl_divergence`] with the shared weights counted as `shared` says: per weight (the exact
/// KL) or as the paper's mixture bound (outliers per weight, the other shared weights by their
/// mean KL). Per-weight Bayesian layers are unaffected.
pub fn kl_divergence_with<M: Module>(
    model: &M,
    prior: &Prior,
    shared: SharedKl,
) -> Option<Tensor<1>> {
    let c = Collector::collect(model, None);
    let (scalar_mu, sigma_p) = match *prior {
        Prior::Normal { mu, sigma } => (mu, sigma),
        Prior::Empirical { sigma } => (0.0, sigma),
    };
    let empirical = matches!(prior, Prior::Empirical { .. });
    let mut terms: Vec<Tensor<1>> = Vec::new();
    // Mixture bound: (sum of the shared weights' KL, their number), per layer.
    let mut mixture: Vec<(Tensor<1>, Tensor<1>)> = Vec::new();
    for (base, mu, rho) in bayes_pairs(&c) {
        if mu.parent == "Struct:Codebook" || mu.parent == "Struct:SharedWeight" {
            continue;
        }
        let centre = empirical
            .then(|| c.float(&format!("{base}_prior_mu")).map(|e| e.flat.clone()))
            .flatten();
        let sigma = sigma_of_rho(rho.flat.clone());
        terms.push(kl_gaussian_sum(
            mu.flat.clone(),
            sigma,
            centre,
            scalar_mu,
            sigma_p,
        ));
    }
    if let Some(view) = codebook_view(&c) {
        for (prefix, index) in c
            .ints
            .iter()
            .filter_map(|(p, t)| Some((p.strip_suffix(".index")?, t)))
        {
            let gathered = gather_shared(&c, prefix, index.clone(), &view);
            let centre = empirical
                .then(|| {
                    c.float(&format!("{prefix}.prior_mu"))
                        .map(|e| e.flat.clone())
                })
                .flatten();
            match shared {
                SharedKl::PerWeight => terms.push(kl_gaussian_sum(
                    gathered.0, gathered.1, centre, scalar_mu, sigma_p,
                )),
                SharedKl::Codebook => terms.push(codebook_kl(
                    &c,
                    prefix,
                    index.clone(),
                    &view,
                    scalar_mu,
                    sigma_p,
                )),
                SharedKl::Mixture => {
                    let each = kl_gaussian_each(gathered.0, gathered.1, centre, scalar_mu, sigma_p);
                    // Outliers sit at `[K, K + n_outliers)` of the gather table.
                    let k = view.mu.dims()[0];
                    let n_out = c
                        .float(&format!("{prefix}.outlier_mu"))
                        .map_or(0, |e| e.flat.dims()[0]);
                    let at = index.clone().float();
                    let outlier = at
                        .clone()
                        .greater_equal_elem(k as f64)
                        .float()
                        .mul(at.lower_elem((k + n_out) as f64).float());
                    let inlier = outlier.clone().neg().add_scalar(1.0);
                    terms.push((each.clone() * outlier).sum());
                    mixture.push(((each * inlier.clone()).sum(), inlier.sum()));
                }
            }
        }
    }
    if let Some((sum, count)) = mixture
        .into_iter()
        .reduce(|(s, n), (s2, n2)| (s + s2, n + n2))
    {
        terms.push(sum / count.clamp_min(1.0));
    }
    terms.into_iter().reduce(|a, b| a + b)
}

/// [`SharedKl::Codebook`]'s term of one shared tensor: each weight takes the KL of its table
/// entry, where an ellipse entry's KL is the alpha-weighted sum of its components' KLs (so
/// that entry `k`'s KL counts `n_k` times in all), and an outlier's is its own.
fn codebook_kl(
    c: &Collector<'_>,
    prefix: &str,
    index: Tensor<1, Int>,
    view: &CodebookView,
    scalar_mu: f64,
    sigma_p: f64,
) -> Tensor<1> {
    let float = |name: &str| c.float(&format!("{prefix}.{name}")).map(|e| e.flat.clone());
    let entries = kl_gaussian_each(
        view.mu.clone(),
        view.sigma.clone(),
        None,
        scalar_mu,
        sigma_p,
    );
    let mut table = vec![entries.clone()];
    if let Some((mu, rho)) = float("outlier_mu").zip(float("outlier_rho")) {
        table.push(kl_gaussian_each(
            mu,
            sigma_of_rho(rho),
            None,
            scalar_mu,
            sigma_p,
        ));
    }
    let ellipses = c
        .int(&format!("{prefix}.ellipse_components"))
        .cloned()
        .zip(float("ellipse_alphas"));
    if let Some((comps, alphas)) = ellipses {
        let e = comps.dims()[0] / crate::shared::MAX_BLEND;
        let blended = (entries.select(0, comps) * alphas)
            .reshape([e, crate::shared::MAX_BLEND])
            .sum_dim(1)
            .reshape([e]);
        table.push(blended);
    }
    Tensor::cat(table, 0).select(0, index).sum()
}

fn codebook_view(c: &Collector<'_>) -> Option<CodebookView> {
    let mu = c
        .floats
        .iter()
        .find(|e| e.parent == "Struct:Codebook" && e.path.ends_with("mu"))?;
    let rho = c
        .floats
        .iter()
        .find(|e| e.parent == "Struct:Codebook" && e.path.ends_with("rho"))?;
    Some(CodebookView {
        mu: mu.flat.clone(),
        sigma: sigma_of_rho(rho.flat.clone()),
    })
}

/// Re-gathers a shared weight from the collected tensors (same rule as `SharedWeight::gather`).
fn gather_shared(
    c: &Collector<'_>,
    prefix: &str,
    index: Tensor<1, Int>,
    view: &CodebookView,
) -> (Tensor<1>, Tensor<1>) {
    let float = |name: &str| c.float(&format!("{prefix}.{name}")).map(|e| e.flat.clone());
    let outliers = float("outlier_mu").zip(float("outlier_rho"));
    let ellipses = c
        .int(&format!("{prefix}.ellipse_components"))
        .cloned()
        .zip(float("ellipse_alphas"));
    let g = gather_sources(view, outliers, ellipses, index);
    (g.mu, g.sigma)
}

struct SamplingMapper {
    path: ModulePath,
    enabled: bool,
}

impl ModuleMapper for SamplingMapper {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn map_flag(&mut self, flag: Param<Flag>) -> Param<Flag> {
        if self.path.last() == "sampling" {
            flag.with_value(self.enabled)
        } else {
            flag
        }
    }
}

/// Switches every Bayesian and shared layer to stochastic (`true`) or mean (`false`) forward.
///
/// burn's `Module::valid()` disables all flags, so call this after it to keep sampling for
/// Monte-Carlo evaluation.
pub fn set_sampling<M: Module>(model: M, enabled: bool) -> M {
    model.map(&mut SamplingMapper {
        path: ModulePath::default(),
        enabled,
    })
}

/// Parameter counts of a model, read from shapes only, so lazily initialised parameters stay
/// unallocated (a ViT-B/16 can be counted without 700 MB of memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ParamCounts {
    /// Trainable scalars: every float parameter except batch-norm running statistics,
    /// empirical-prior centres and fixed ellipse alphas.
    pub trainable: usize,
    /// Per-weight Bayesian weights (`weight_mu` entries, outside shared tensors).
    pub bayes_weights: usize,
    /// Per-weight Bayesian biases (`bias_mu` entries).
    pub bayes_biases: usize,
    /// Weights of shared tensors (each an index into the codebook, outliers or ellipses).
    pub shared_weights: usize,
    /// Shared Gaussians in the codebook.
    pub codebook: usize,
}

#[derive(Default)]
struct ShapeCounter {
    path: ModulePath,
    counts: ParamCounts,
}

impl ModuleVisitor for ShapeCounter {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let n = param.lazy_shape().num_elements();
        let (name, parent) = (self.path.last(), self.path.container());
        let fixed =
            name.starts_with("running_") || name.ends_with("prior_mu") || name == "ellipse_alphas";
        if !fixed {
            self.counts.trainable += n;
        }
        match (parent, name) {
            ("Struct:Codebook", "mu") => self.counts.codebook += n,
            ("Struct:SharedWeight", _) => {}
            (_, "weight_mu") => self.counts.bayes_weights += n,
            (_, "bias_mu") => self.counts.bayes_biases += n,
            _ => {}
        }
    }

    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<D, Int>>) {
        if self.path.last() == "index" {
            self.counts.shared_weights += param.lazy_shape().num_elements();
        }
    }
}

/// Counts a model's parameters without initialising lazy ones; see [`ParamCounts`].
pub fn count_params<M: Module>(model: &M) -> ParamCounts {
    let mut c = ShapeCounter::default();
    model.visit(&mut c);
    c.counts
}

#[cfg(test)]
mod tests {
    use super::ModulePath;

    /// Enum variants are left out of the path; leaving a module restores the path before it,
    /// whether or not it was left out.
    #[test]
    fn module_path_leaves_out_enum_variants() {
        let mut p = ModulePath::default();
        assert_eq!((p.joined().as_str(), p.last(), p.container()), ("", "", ""));
        p.enter("layer1", "Vec");
        p.enter("Bayes", "Enum:Layer");
        p.enter("weight_mu", "Struct:BayesLinear");
        assert_eq!(p.joined(), "layer1.weight_mu");
        assert_eq!(
            (p.last(), p.container()),
            ("weight_mu", "Struct:BayesLinear")
        );
        p.exit();
        assert_eq!(p.joined(), "layer1");
        p.exit();
        assert_eq!((p.joined().as_str(), p.container()), ("layer1", "Vec"));
        p.exit();
        assert_eq!(p.joined(), "");
    }
}
