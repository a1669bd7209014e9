//! Monte-Carlo evaluation: predictive probabilities averaged over weight samples, and the
//! metrics the paper reports; with post-hoc calibration, the same at a temperature that divides
//! each sample's logits ([`predict_tempered`]), fitted on held-out data ([`predict_logits`],
//! [`LogitSamples::fit_temperature`]).

use bnn_data::DataLoader;
use bnn_layers::set_sampling;
use bnn_metrics::{
    EvalSummary, McLogits, McPredictive, OodScore, OodSummary, Predictive, TemperatureFit,
    mean_confidence, validate_temperature,
};
use bnn_models::{Classifier, ClassifierBody};
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
pub fn predict<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
) -> Result<Predictions, TrainError> {
    let mut out = predict_tempered(model, loader, samples, &[1.0])?;
    Ok(out.remove(0))
}

/// [`predict`] at each of `temperatures` from the same forward passes: each pass's logits are
/// divided by the temperature before the softmax, then the probabilities are averaged
/// (temperature scaling of a Monte-Carlo predictive, [`bnn_metrics::McLogits::predictive`]).
/// At `T = 1` the result is [`predict`]'s, bit for bit. Every temperature must pass
/// [`bnn_metrics::validate_temperature`]; one prediction per temperature, in order.
pub fn predict_tempered<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
    temperatures: &[f64],
) -> Result<Vec<Predictions>, TrainError> {
    check_temperatures(temperatures)?;
    let n = loader.dataset().len();
    let mut accs: Vec<McPredictive> = Vec::new();
    let mut scaled = Vec::new();
    let labels = for_each_pass(model, loader, samples, |logits, classes| {
        if accs.is_empty() {
            for _ in temperatures {
                accs.push(McPredictive::new(n, classes)?);
            }
        }
        for (mc, &t) in accs.iter_mut().zip(temperatures) {
            mc.push_logits(tempered(logits, t, &mut scaled))?;
        }
        Ok(())
    })?;
    accs.into_iter()
        .map(|mc| {
            Ok(Predictions {
                predictive: mc.finish()?,
                labels: labels.clone(),
            })
        })
        .collect()
}

/// `logits` divided by `t` (in `f64`, as [`bnn_metrics::McLogits`] divides them); at
/// `t = 1` the logits themselves.
fn tempered<'a>(logits: &'a [f32], t: f64, scaled: &'a mut Vec<f32>) -> &'a [f32] {
    if t == 1.0 {
        return logits;
    }
    let inv = 1.0 / t;
    scaled.clear();
    scaled.extend(logits.iter().map(|&z| (f64::from(z) * inv) as f32));
    scaled
}

fn check_temperatures(temperatures: &[f64]) -> Result<(), TrainError> {
    if temperatures.is_empty() {
        return Err(TrainError::Config(
            "a tempered prediction needs at least one temperature".into(),
        ));
    }
    for &t in temperatures {
        validate_temperature(t)?;
    }
    Ok(())
}

/// Runs the forward passes of [`predict`] and hands each pass's logits (`[n, classes]`,
/// data-set order) to `visit`; returns the labels in data-set order.
fn for_each_pass<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
    mut visit: impl FnMut(&[f32], usize) -> Result<(), TrainError>,
) -> Result<Vec<u32>, TrainError> {
    let n = loader.dataset().len();
    if n == 0 {
        return Err(TrainError::Config("empty evaluation set".into()));
    }
    let valid = model.valid();
    let counts = bnn_layers::count_params(&valid);
    let stochastic = samples > 1 && counts.bayes_weights + counts.shared_weights > 0;
    let valid = set_sampling(valid, stochastic);
    let passes = if stochastic { samples } else { 1 };
    let device = valid.devices().first().cloned().unwrap_or_default();
    let mut labels = vec![0u32; n];
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
        visit(&logits_all, classes)?;
    }
    Ok(labels)
}

/// Every Monte-Carlo pass's logits on a data set, kept whole to fit a temperature on them
/// (held-out data: `samples * n * classes` values in memory).
#[derive(Debug, Clone, PartialEq)]
pub struct LogitSamples {
    /// `samples` passes of row-major `[n, classes]` logits, one pass after the other.
    pub logits: Vec<f32>,
    /// Number of passes (ensemble members for [`predict_ensemble_logits`]).
    pub samples: usize,
    /// Number of examples.
    pub n: usize,
    /// Number of classes.
    pub classes: usize,
    /// True labels, in data-set order.
    pub labels: Vec<u32>,
}

impl LogitSamples {
    /// The logits as [`McLogits`] (checked: shape, finite values).
    pub fn mc(&self) -> Result<McLogits<'_>, TrainError> {
        Ok(McLogits::new(
            &self.logits,
            self.samples,
            self.n,
            self.classes,
        )?)
    }

    /// The temperature that minimises the NLL of these logits against their labels
    /// ([`bnn_metrics::fit_temperature`]).
    pub fn fit_temperature(&self) -> Result<TemperatureFit, TrainError> {
        Ok(bnn_metrics::fit_temperature(&self.mc()?, &self.labels)?)
    }
}

/// The logits of [`predict`]'s passes (one pass for a deterministic model or `samples <= 1`),
/// kept whole: what a temperature is fitted on.
pub fn predict_logits<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
) -> Result<LogitSamples, TrainError> {
    let (mut logits, mut passes, mut classes) = (Vec::new(), 0, 0);
    let labels = for_each_pass(model, loader, samples, |pass, c| {
        logits.extend_from_slice(pass);
        passes += 1;
        classes = c;
        Ok(())
    })?;
    Ok(LogitSamples {
        logits,
        samples: passes,
        n: labels.len(),
        classes,
        labels,
    })
}

/// A deep ensemble's logits, one member's mean pass after the other: the members are the
/// Monte-Carlo samples of [`predict_ensemble`].
pub fn predict_ensemble_logits<B: ClassifierBody>(
    members: &[Classifier<B>],
    loader: &DataLoader,
) -> Result<LogitSamples, TrainError> {
    let mut out: Option<LogitSamples> = None;
    for member in members {
        let one = predict_logits(member, loader, 1)?;
        match out.as_mut() {
            None => out = Some(one),
            Some(all) => {
                if (one.n, one.classes) != (all.n, all.classes) {
                    return Err(TrainError::Config(format!(
                        "ensemble members disagree: {} x {} logits against {} x {}",
                        one.n, one.classes, all.n, all.classes
                    )));
                }
                all.logits.extend_from_slice(&one.logits);
                all.samples += 1;
            }
        }
    }
    out.ok_or_else(|| TrainError::Config("an ensemble needs members".into()))
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
pub fn evaluate<B: ClassifierBody>(
    model: &Classifier<B>,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
) -> Result<Evaluation, TrainError> {
    Ok(evaluate_with_predictions(model, test, ood, samples)?.0)
}

/// [`evaluate`], also returning the predictions it computed: the test set's and the OOD
/// set's.
pub fn evaluate_with_predictions<B: ClassifierBody>(
    model: &Classifier<B>,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
) -> Result<(Evaluation, Predictions, Option<Predictions>), TrainError> {
    let pred = predict(model, test, samples)?;
    let out = ood.map(|l| predict(model, l, samples)).transpose()?;
    let ev = evaluation_of(&pred, out.as_ref().map(|p| &p.predictive), samples)?;
    Ok((ev, pred, out))
}

/// An evaluation with the predictions it was computed from.
pub type EvaluatedPredictions = (Evaluation, Predictions, Option<Predictions>);

/// [`evaluate_with_predictions`] at each of `temperatures`, from one set of forward passes
/// ([`predict_tempered`]): the raw evaluation is the one at `T = 1`.
pub fn evaluate_tempered<B: ClassifierBody>(
    model: &Classifier<B>,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
    temperatures: &[f64],
) -> Result<Vec<EvaluatedPredictions>, TrainError> {
    let preds = predict_tempered(model, test, samples, temperatures)?;
    let outs = match ood {
        Some(l) => predict_tempered(model, l, samples, temperatures)?
            .into_iter()
            .map(Some)
            .collect(),
        None => vec![None; temperatures.len()],
    };
    preds
        .into_iter()
        .zip(outs)
        .map(|(pred, out)| {
            let ev = evaluation_of(&pred, out.as_ref().map(|p| &p.predictive), samples)?;
            Ok((ev, pred, out))
        })
        .collect()
}

/// A deep ensemble's predictions (Lakshminarayanan et al. 2017): each member's probabilities
/// (one mean pass each), averaged. The mutual information is the members' disagreement.
pub fn predict_ensemble<B: ClassifierBody>(
    members: &[Classifier<B>],
    loader: &DataLoader,
) -> Result<Predictions, TrainError> {
    let mut out = predict_ensemble_tempered(members, loader, &[1.0])?;
    Ok(out.remove(0))
}

/// [`predict_ensemble`] at each of `temperatures`: each member's logits divided by the
/// temperature before its softmax, then the members' probabilities averaged.
pub fn predict_ensemble_tempered<B: ClassifierBody>(
    members: &[Classifier<B>],
    loader: &DataLoader,
    temperatures: &[f64],
) -> Result<Vec<Predictions>, TrainError> {
    check_temperatures(temperatures)?;
    let mut acc: Option<(Vec<McPredictive>, Vec<u32>)> = None;
    for member in members {
        let preds = predict_tempered(member, loader, 1, temperatures)?;
        let (mcs, _) = match acc.as_mut() {
            Some(a) => a,
            None => {
                let probs = preds[0].predictive.probabilities();
                let mcs = temperatures
                    .iter()
                    .map(|_| McPredictive::new(probs.n(), probs.classes()))
                    .collect::<Result<Vec<_>, _>>()?;
                acc.insert((mcs, preds[0].labels.clone()))
            }
        };
        for (mc, pred) in mcs.iter_mut().zip(&preds) {
            mc.push_probabilities(pred.predictive.probabilities())?;
        }
    }
    let (mcs, labels) =
        acc.ok_or_else(|| TrainError::Config("an ensemble needs members".into()))?;
    mcs.into_iter()
        .map(|mc| {
            Ok(Predictions {
                predictive: mc.finish()?,
                labels: labels.clone(),
            })
        })
        .collect()
}

/// [`evaluate`] for a deep ensemble ([`predict_ensemble`]); `samples` in the result is the
/// number of members.
pub fn evaluate_ensemble<B: ClassifierBody>(
    members: &[Classifier<B>],
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

/// [`evaluate_ensemble`] at each of `temperatures` ([`predict_ensemble_tempered`]).
pub fn evaluate_ensemble_tempered<B: ClassifierBody>(
    members: &[Classifier<B>],
    test: &DataLoader,
    ood: Option<&DataLoader>,
    temperatures: &[f64],
) -> Result<Vec<Evaluation>, TrainError> {
    let preds = predict_ensemble_tempered(members, test, temperatures)?;
    let outs = match ood {
        Some(l) => predict_ensemble_tempered(members, l, temperatures)?
            .into_iter()
            .map(|p| Some(p.predictive))
            .collect(),
        None => vec![None; temperatures.len()],
    };
    preds
        .iter()
        .zip(&outs)
        .map(|(pred, out)| evaluation_of(pred, out.as_ref(), members.len()))
        .collect()
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
