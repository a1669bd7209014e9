//! A model's predictions written for tools outside Rust.

use std::path::Path;

use bnn_train::Predictions;

use crate::Error;

/// Writes a prediction set as NumPy arrays `<dir>/<prefix>-<what>.npy`, each atomically, for
/// tools outside Rust (NumPy, scikit-learn, Fortuna, MAPIE):
/// `probabilities` (`float32`, `[n, classes]`, the Monte Carlo mean of the softmax), `labels`
/// (`int64`, `[n]`), `entropy` (`float64`, `[n]`, of the mean, nats) and, when the set was
/// sampled, `mutual-information` (`float64`, `[n]`, nats).
pub fn save_predictions_npy(dir: &Path, prefix: &str, p: &Predictions) -> Result<(), Error> {
    use gmm_minibatch::npy::write;
    let q = &p.predictive;
    let n = p.labels.len();
    let file = |what: &str| dir.join(format!("{prefix}-{what}.npy"));
    write(
        file("probabilities"),
        &[n, q.probabilities().classes()],
        q.probabilities().as_slice(),
    )?;
    let labels: Vec<i64> = p.labels.iter().map(|&l| i64::from(l)).collect();
    write(file("labels"), &[n], &labels)?;
    write(file("entropy"), &[n], q.entropy())?;
    if let Some(mi) = q.mutual_information() {
        write(file("mutual-information"), &[n], mi)?;
    }
    Ok(())
}
