//! Monte-Carlo evaluation: predictive probabilities averaged over weight samples, and the
//! metrics the paper reports.

use bnn_data::DataLoader;
use bnn_layers::set_sampling;
use bnn_metrics::{EvalSummary, McPredictive, OodScore, OodSummary, Predictive, mean_confidence};
use bnn_models::Network;
use burn::module::Module;
use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::batch::{to_tensors, to_vec};

/// Predictions of a model on a data set.
#[derive(Debug, Clone)]
pub struct Predictions {
    /// The predictive distribution (mean of the samples' softmax).
    pub predictive: Predictive,
    /// True labels, in data-set order.
    pub labels: Vec<u32>,
}

/// Runs `samples` stochastic passes (one mean pass if `samples <= 1` or the model has no
/// Bayesian layers) over the loader's data set in index order and averages the probabilities.
///
/// The loader must not drop the last batch. `model` may live on an autodiff device; evaluation
/// runs on `model.valid()`.
pub fn predict(
    model: &Network,
    loader: &DataLoader,
    samples: usize,
) -> Result<Predictions, TrainError> {
    let n = loader.dataset().len();
    let valid = model.valid();
    let counts = bnn_layers::count_params(&valid);
    let stochastic = samples > 1 && counts.bayes_weights + counts.shared_weights > 0;
    let valid = set_sampling(valid, stochastic);
    let passes = if stochastic { samples } else { 1 };
    let device = valid.devices().first().cloned().unwrap_or_default();
    let mut labels = vec![0u32; n];
    let mut acc: Option<McPredictive> = None;
    for _ in 0..passes {
        let mut logits_all: Vec<f32> = Vec::new();
        let mut classes = 0;
        for batch in loader.epoch(0) {
            let batch = batch?;
            let (x, _) = to_tensors(&batch, &device);
            let logits = valid.forward(x);
            classes = logits.dims()[1];
            if logits_all.is_empty() {
                logits_all = vec![0.0; n * classes];
            }
            let host = to_vec(logits);
            for (row, &i) in batch.indices.iter().enumerate() {
                logits_all[i * classes..(i + 1) * classes]
                    .copy_from_slice(&host[row * classes..(row + 1) * classes]);
                labels[i] = batch.labels[row];
            }
        }
        let mc = match acc.as_mut() {
            Some(mc) => mc,
            None => acc.insert(McPredictive::new(n, classes)?),
        };
        mc.push_logits(&logits_all)?;
    }
    let predictive = acc
        .ok_or_else(|| TrainError::Config("empty evaluation set".into()))?
        .finish()?;
    Ok(Predictions { predictive, labels })
}

/// Accuracy, NLL, ECE (15 bins) and the rest, plus OOD detection against a second data set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// In-distribution metrics.
    pub summary: EvalSummary,
    /// OOD detection by max-probability, if an OOD set was given.
    pub ood_max_prob: Option<OodSummary>,
    /// OOD detection by predictive entropy, if an OOD set was given.
    pub ood_entropy: Option<OodSummary>,
    /// Monte-Carlo samples used.
    pub samples: usize,
    /// Where the uncertainty comes from: confidence and epistemic uncertainty on each set.
    pub uncertainty: UncertaintyDiagnostics,
}

/// Entropy and epistemic uncertainty (mutual information between prediction and weights) on
/// the in-distribution set and, if given, the OOD set (the test set's mean confidence is in
/// the [`EvalSummary`]). A Bayesian model whose mutual
/// information is no higher on OOD data than on test data gets its OOD detection from
/// aleatoric (softmax) uncertainty alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UncertaintyDiagnostics {
    /// Mean predictive entropy on the test set (nats).
    pub mean_entropy: f64,
    /// Mean mutual information on the test set (nats); `None` for a single pass.
    pub mean_mutual_information: Option<f64>,
    /// Mean confidence on the OOD set.
    pub ood_mean_confidence: Option<f64>,
    /// Mean predictive entropy on the OOD set.
    pub ood_mean_entropy: Option<f64>,
    /// Mean mutual information on the OOD set.
    pub ood_mean_mutual_information: Option<f64>,
    /// OOD AUROC with the mutual-information score (MC samples only).
    pub ood_auroc_mutual_information: Option<f64>,
}

/// Mutual information, for a prediction of more than one sample (one pass has none).
fn epistemic(p: &Predictive) -> Option<&[f64]> {
    p.mutual_information().filter(|_| p.n_samples() > 1)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Evaluates a model on `test` (and optionally against `ood`) with `samples` MC samples.
pub fn evaluate(
    model: &Network,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
) -> Result<Evaluation, TrainError> {
    Ok(evaluate_with_predictions(model, test, ood, samples)?.0)
}

/// [`evaluate`], also returning the predictions it computed: the test set's and the OOD
/// set's.
pub fn evaluate_with_predictions(
    model: &Network,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
) -> Result<(Evaluation, Predictions, Option<Predictions>), TrainError> {
    let pred = predict(model, test, samples)?;
    let out = ood.map(|l| predict(model, l, samples)).transpose()?;
    let ev = evaluation_of(&pred, out.as_ref().map(|p| &p.predictive), samples)?;
    Ok((ev, pred, out))
}

/// A deep ensemble's predictions (Lakshminarayanan et al. 2017): each member's probabilities
/// (one mean pass each), averaged. The mutual information is the members' disagreement.
pub fn predict_ensemble(
    members: &[Network],
    loader: &DataLoader,
) -> Result<Predictions, TrainError> {
    let mut acc: Option<(McPredictive, Vec<u32>)> = None;
    for member in members {
        let pred = predict(member, loader, 1)?;
        let probs = pred.predictive.probabilities();
        let (mc, _) = match acc.as_mut() {
            Some(a) => a,
            None => acc.insert((McPredictive::new(probs.n(), probs.classes())?, pred.labels)),
        };
        mc.push_probabilities(probs)?;
    }
    let (mc, labels) = acc.ok_or_else(|| TrainError::Config("an ensemble needs members".into()))?;
    Ok(Predictions {
        predictive: mc.finish()?,
        labels,
    })
}

/// [`evaluate`] for a deep ensemble ([`predict_ensemble`]); `samples` in the result is the
/// number of members.
pub fn evaluate_ensemble(
    members: &[Network],
    test: &DataLoader,
    ood: Option<&DataLoader>,
) -> Result<Evaluation, TrainError> {
    let pred = predict_ensemble(members, test)?;
    let out = match ood {
        Some(loader) => Some(predict_ensemble(members, loader)?.predictive),
        None => None,
    };
    evaluation_of(&pred, out.as_ref(), members.len())
}

/// The metrics of [`Evaluation`] from predictions already made on the test set and,
/// optionally, an OOD set.
pub fn evaluation_of(
    pred: &Predictions,
    ood: Option<&Predictive>,
    samples: usize,
) -> Result<Evaluation, TrainError> {
    let summary = EvalSummary::compute(pred.predictive.probabilities(), &pred.labels)?;
    let p = &pred.predictive;
    let mut uncertainty = UncertaintyDiagnostics {
        mean_entropy: mean(p.entropy()),
        mean_mutual_information: epistemic(p).map(mean),
        ..Default::default()
    };
    let (ood_max_prob, ood_entropy) = match ood {
        Some(out) => {
            uncertainty.ood_mean_confidence = Some(mean_confidence(out.probabilities()));
            uncertainty.ood_mean_entropy = Some(mean(out.entropy()));
            uncertainty.ood_mean_mutual_information = epistemic(out).map(mean);
            if epistemic(p).is_some() && epistemic(out).is_some() {
                uncertainty.ood_auroc_mutual_information =
                    Some(OodSummary::from_predictive(p, out, OodScore::MutualInformation)?.auroc);
            }
            (
                Some(OodSummary::from_predictive(p, out, OodScore::MaxProb)?),
                Some(OodSummary::from_predictive(p, out, OodScore::Entropy)?),
            )
        }
        None => (None, None),
    };
    Ok(Evaluation {
        summary,
        ood_max_prob,
        ood_entropy,
        samples,
        uncertainty,
    })
}
