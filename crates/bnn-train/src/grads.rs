//! Averaged `d loss / d mu` of a Bayesian model, for the gradient-outlier criterion.

use bnn_data::DataLoader;
use bnn_layers::{BayesTensor, ElboConfig, Prior, export_bayes, kl_divergence};
use bnn_models::{Classifier, ClassifierBody};
use burn::module::Module;

use crate::TrainError;
use crate::likelihood::{check_targets, data_term};

/// Exports every Bayesian tensor of `model` (on an autodiff device) with `grad_mu` set to the
/// mean over the first `batches` mini-batches of the negative-ELBO gradient (the training loss
/// of Bayes by Backprop, with `prior`, and the data term of the model's head:
/// [`crate::likelihood`]).
pub fn mean_mu_gradients<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    prior: &Prior,
    batches: usize,
) -> Result<Vec<BayesTensor>, TrainError> {
    let device = model.devices().first().cloned().unwrap_or_default();
    check_targets(model.head(), loader.dataset().target_dim())?;
    let elbo = ElboConfig::new(loader.dataset().len());
    let mut sum: Option<Vec<BayesTensor>> = None;
    let mut count = 0usize;
    for batch in loader.epoch(0).take(batches.max(1)) {
        let batch = batch?;
        let nll = data_term(model, &batch, &device)?.nll;
        let loss = elbo.loss(nll, kl_divergence(model, prior), usize::MAX);
        let grads = loss.backward();
        let exported = export_bayes(model, Some(&grads));
        match sum.as_mut() {
            None => sum = Some(exported),
            Some(acc) => {
                for (a, e) in acc.iter_mut().zip(exported) {
                    if let (Some(ga), Some(ge)) = (a.grad_mu.as_mut(), e.grad_mu) {
                        ga.iter_mut().zip(ge).for_each(|(x, y)| *x += y);
                    }
                }
            }
        }
        count += 1;
    }
    let mut out =
        sum.ok_or_else(|| TrainError::Config("no batch to compute gradients on".into()))?;
    for t in &mut out {
        if let Some(g) = t.grad_mu.as_mut() {
            g.iter_mut().for_each(|x| *x /= count as f32);
        }
    }
    Ok(out)
}
