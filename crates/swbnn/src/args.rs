//! The command line's validated numbers (clap value parsers that refuse what cannot run) and
//! its error output.

/// Most epochs a command accepts (the paper's longest schedule is 200).
pub const MAX_EPOCHS: usize = 1_000_000;
/// Most CPU threads a command accepts.
pub const MAX_THREADS: usize = 4096;
/// Most Monte Carlo samples a command accepts.
///
/// Memory does not bound the samples: the predictive is kept as running sums (`n x classes`
/// values whatever the number of samples), so the bound is the time and what it buys. Each
/// sample is one pass over the evaluation set, and the Monte Carlo standard error of a mean
/// predicted probability is at most `0.5 / sqrt(S)`: 0.005 at S = 10,000, below the spread
/// between training seeds of every reported metric (the paper uses 30). More samples would
/// only multiply the running time.
pub const MAX_SAMPLES: usize = 10_000;

fn number(s: &str) -> Result<usize, String> {
    s.trim()
        .parse::<usize>()
        .map_err(|e| format!("`{s}` is not a whole number ({e})"))
}

fn in_range(s: &str, min: usize, max: usize) -> Result<usize, String> {
    let n = number(s)?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is out of range: {min} to {max}"))
    }
}

/// A count of at least 1 (`--subset`, `--k`).
pub fn positive(s: &str) -> Result<usize, String> {
    in_range(s, 1, usize::MAX)
}

/// `heldout:CLASSES` (`--ood heldout:6,9`): classes, comma-separated, none twice, to hold out
/// of training as a near out-of-distribution set. Whether each is a class of the data set is
/// checked when the data are read.
pub fn held_out_classes(s: &str) -> Result<Vec<u32>, String> {
    let list = s.trim().strip_prefix("heldout:").ok_or_else(|| {
        format!("`{s}` is not an OOD choice: give `heldout:CLASSES`, e.g. `heldout:6,9`")
    })?;
    let mut classes = Vec::new();
    for part in list.split(',') {
        let c = part
            .trim()
            .parse::<u32>()
            .map_err(|e| format!("`{part}` in `{s}` is not a class number ({e})"))?;
        if classes.contains(&c) {
            return Err(format!("class {c} appears twice in `{s}`"));
        }
        classes.push(c);
    }
    Ok(classes)
}

/// A count that may be 0 (`--validation`).
pub fn count(s: &str) -> Result<usize, String> {
    in_range(s, 0, usize::MAX)
}

/// Monte Carlo samples: 1 to [`MAX_SAMPLES`].
pub fn samples(s: &str) -> Result<usize, String> {
    in_range(s, 1, MAX_SAMPLES)
}

/// Epochs of a stage that may be skipped: 0 to [`MAX_EPOCHS`].
pub fn epochs_or_none(s: &str) -> Result<usize, String> {
    in_range(s, 0, MAX_EPOCHS)
}

/// A figure's side in pixels: 1 to [`bnn_plot::MAX_SIDE`] (each figure's own minimum is
/// checked when it is drawn).
pub fn side(s: &str) -> Result<u32, String> {
    let n = in_range(s, 1, bnn_plot::MAX_SIDE as usize)?;
    Ok(n as u32)
}

/// Epochs: 1 to [`MAX_EPOCHS`].
pub fn epochs(s: &str) -> Result<usize, String> {
    in_range(s, 1, MAX_EPOCHS)
}

/// Threads: 1 to [`MAX_THREADS`].
pub fn threads(s: &str) -> Result<usize, String> {
    in_range(s, 1, MAX_THREADS)
}

/// A calibration temperature (`--temperature`): finite and within
/// [`bnn_metrics::TEMPERATURE_RANGE`], as a stored one must be.
pub fn temperature(s: &str) -> Result<f64, String> {
    let t = s
        .trim()
        .parse::<f64>()
        .map_err(|e| format!("`{s}` is not a number ({e})"))?;
    bnn_metrics::validate_temperature(t).map_err(|e| e.to_string())
}

/// An error and its causes on one line, each cause once: a cause whose text the message
/// already holds (a wrapper that prints its source) is not repeated.
pub fn error_message(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_out_of_range_are_refused() {
        assert_eq!(positive("3"), Ok(3));
        assert_eq!(count("0"), Ok(0));
        assert!(count("-1").is_err() && count("many").is_err());
        assert!(positive("0").unwrap_err().contains("out of range"));
        assert!(positive("-1").is_err());
        assert!(epochs("0").is_err());
        assert!(epochs("18446744073709551615").is_err());
        assert_eq!(epochs("200"), Ok(200));
        assert!(threads("0").is_err());
        assert_eq!(samples("10000"), Ok(10_000));
        assert!(samples("100000000").unwrap_err().contains("out of range"));
        assert_eq!(epochs_or_none("0"), Ok(0));
        assert!(side("0").is_err() && side("16385").is_err());
        assert_eq!(temperature("1.5"), Ok(1.5));
        for bad in ["nan", "0", "-1", "inf", "1e30", "x"] {
            let e = temperature(bad).unwrap_err();
            assert!(
                e.contains("temperature") || e.contains("not a number"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn held_out_classes_are_parsed_and_checked() {
        assert_eq!(held_out_classes("heldout:6,9"), Ok(vec![6, 9]));
        assert_eq!(held_out_classes("heldout:3"), Ok(vec![3]));
        assert!(
            held_out_classes("mnist")
                .unwrap_err()
                .contains("heldout:CLASSES")
        );
        assert!(held_out_classes("heldout:6,x").unwrap_err().contains("`x`"));
        assert!(
            held_out_classes("heldout:6,6")
                .unwrap_err()
                .contains("twice")
        );
        assert!(held_out_classes("heldout:").is_err());
    }

    #[test]
    fn causes_are_printed_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("bad magic")]
        struct Inner;
        #[derive(Debug, thiserror::Error)]
        #[error("model.swb: {0}")]
        struct Outer(#[source] Inner);
        let e = anyhow::Error::new(Outer(Inner)).context("loading the model");
        assert_eq!(error_message(&e), "loading the model: model.swb: bad magic");
    }
}
