//! The limits of a request that would exhaust the machine or never finish, each with why that
//! value. Every door (the command line, a `--config` file, Python) meets the same ones.

/// Most epochs a command accepts: [`bnn_train::MAX_EPOCHS`], which every training
/// configuration's own validation applies (a `--config` file too).
pub use bnn_train::MAX_EPOCHS;

/// Most CPU threads a command accepts per core of the machine
/// ([`std::thread::available_parallelism`]): the CPU backends split every operation between
/// the threads, so threads beyond the cores only take turns, and thousands of them spent
/// their time switching (4,096 threads on 2 cores did not train 50 images in 90 s, one
/// thread took 0.2 s). A few per core still allow for cores a container hides.
pub const MAX_THREADS_PER_CORE: usize = 4;
/// Most Monte Carlo samples a command accepts (per image; the paper uses 30).
///
/// Memory does not bound the samples: the predictive is kept as running sums (`n x classes`
/// values whatever the number of samples), so the bound is the time and what it buys. Each
/// sample draws every weight and makes one pass over the evaluation set: on a Bayesian MLP of
/// 478,000 weights on 2 cores a sample of 20 images took 7 ms, so 10,000 samples of them ran
/// for more than a minute. At 1,000 samples the Monte Carlo standard error of a mean predicted
/// probability is at most `0.5 / sqrt(1000) = 0.016` per image, and that of a metric averaged
/// over a test set far below the spread between training seeds; more samples would only
/// multiply the running time.
pub const MAX_SAMPLES: usize = 1_000;

/// Most Monte Carlo image passes an evaluation may make: samples x images evaluated (the test
/// set, each corrupted copy and the OOD set; a calibration's validation split). The largest
/// evaluation of the paper's protocol, ImageNet's 50,000 validation images with their 15
/// corrupted copies and an OOD set of as many at 30 samples, is 25.5 million; twice that
/// allows it, and refuses a request that would run for days on a CPU.
pub const MAX_SAMPLE_IMAGES: usize = 50_000_000;

/// Checks `samples` Monte Carlo samples of `images` images against [`MAX_SAMPLES`] and
/// [`MAX_SAMPLE_IMAGES`] (`what` names the images, e.g. "the test and OOD images").
pub fn check_samples(samples: usize, images: usize, what: &str) -> Result<(), String> {
    if !(1..=MAX_SAMPLES).contains(&samples) {
        return Err(format!(
            "samples = {samples} is out of range: 1 to {MAX_SAMPLES}"
        ));
    }
    if samples.saturating_mul(images) > MAX_SAMPLE_IMAGES {
        return Err(format!(
            "{samples} samples of {images} images ({what}) are {} image passes, more than \
             {MAX_SAMPLE_IMAGES}: use fewer samples or a subset (--subset)",
            samples.saturating_mul(images)
        ));
    }
    Ok(())
}

/// The most threads this machine takes: [`MAX_THREADS_PER_CORE`] per core.
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    MAX_THREADS_PER_CORE * cores
}

#[cfg(test)]
mod tests {
    /// The models' and the data sets' class bounds are one number: neither crate depends on
    /// the other, and this crate sees both.
    #[test]
    fn a_model_takes_as_many_classes_as_a_data_set_may_have() {
        assert_eq!(bnn_models::MAX_CLASSES, bnn_data::MAX_CLASSES);
    }
}
