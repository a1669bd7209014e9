//! The command line's validated numbers (clap value parsers that refuse what cannot run) and
//! its error output.

use std::ffi::OsStr;
use std::path::PathBuf;

use bnn_data::DataSource;

pub use swbnn_ops::limits::{
    MAX_EPOCHS, MAX_SAMPLE_IMAGES, MAX_SAMPLES, MAX_THREADS_PER_CORE, check_samples, max_threads,
};

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

/// A count of at least 1 (`--subset`).
pub fn positive(s: &str) -> Result<usize, String> {
    in_range(s, 1, usize::MAX)
}

/// A number of GMM components (`--k`): 1 to [`gmm_minibatch::MAX_K`], the bound the
/// compression settings' own validation applies.
pub fn k(s: &str) -> Result<usize, String> {
    in_range(s, 1, gmm_minibatch::MAX_K)
}

/// A side to resize a folder's images to (`--image-size`): 1 to
/// [`crate::checks::MAX_IMAGE_SIZE`], the bound the train request's own check applies.
pub fn image_size(s: &str) -> Result<usize, String> {
    in_range(s, 1, crate::checks::MAX_IMAGE_SIZE)
}

/// A kind of network to train (`--kind`): `deterministic` or `bayesian`, listed by `--help`.
pub fn train_kind() -> impl clap::builder::TypedValueParser<Value = swbnn_ops::commands::TrainKind>
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(swbnn_ops::commands::TrainKind::NAMES)
        .try_map(|s| s.parse::<swbnn_ops::commands::TrainKind>())
}

/// A recipe of Bayes by Backprop (`--recipe`): `pretrained` or `reference`, listed by
/// `--help`.
pub fn recipe() -> impl clap::builder::TypedValueParser<Value = swbnn_ops::defaults::BbbRecipe> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(swbnn_ops::defaults::BbbRecipe::NAMES)
        .try_map(|s| s.parse::<swbnn_ops::defaults::BbbRecipe>())
}

/// A regression network's noise model (`--noise`): `heteroscedastic` or `homoscedastic`,
/// listed by `--help`.
pub fn noise() -> impl clap::builder::TypedValueParser<Value = bnn_models::Noise> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(bnn_models::Noise::NAMES)
        .try_map(|s| s.parse::<bnn_models::Noise>())
}

/// A data set (`--dataset`, `--ood`): a preset's name, `folder:DIR`, `npz:FILE` or
/// `csv:TRAIN.csv[,test=TEST.csv]`. Parsed
/// from the argument's bytes, so that a path need not be UTF-8 (only the kind prefix is text).
pub fn data_source(s: &OsStr) -> Result<DataSource, String> {
    if let Some(text) = s.to_str() {
        return text.parse().map_err(|e: bnn_data::DataError| e.to_string());
    }
    let bytes = s.as_encoded_bytes();
    for (prefix, folder) in [(&b"folder:"[..], true), (&b"npz:"[..], false)] {
        if let Some(rest) = bytes.strip_prefix(prefix) {
            // SAFETY: `rest` is `s`'s bytes after an ASCII prefix, so it starts at a UTF-8
            // character boundary of the encoding and holds the rest of `s` intact.
            let path = PathBuf::from(unsafe { OsStr::from_encoded_bytes_unchecked(rest) });
            return Ok(match folder {
                true => DataSource::Folder(path),
                false => DataSource::Npz(path),
            });
        }
    }
    Err(format!(
        "unknown data set `{}` (known: mnist, fashion-mnist, cifar-10, cifar-100, svhn, \
         imagenet; or folder:DIR for class folders of images, npz:FILE for a NumPy file, \
         csv:TRAIN.csv[,test=TEST.csv] for a table)",
        s.to_string_lossy()
    ))
}

/// The clap value parser of [`data_source`] (it reads the argument as an `OsStr`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DataSourceParser;

impl clap::builder::TypedValueParser for DataSourceParser {
    type Value = DataSource;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<DataSource, clap::Error> {
        data_source(value).map_err(|e| {
            let name = arg.map_or_else(|| "the data set".to_string(), |a| format!("{a}"));
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value for {name}: {e}\n"),
            )
            .with_cmd(cmd)
        })
    }
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

/// Threads: 1 to [`max_threads`].
pub fn threads(s: &str) -> Result<usize, String> {
    in_range(s, 1, max_threads())
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

/// A margin of `compress --auto`: a finite number `>= 0`.
pub fn margin(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{v}: a margin must be finite and >= 0"))
    }
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
        assert_eq!(samples("1000"), Ok(1_000));
        assert!(samples("1001").unwrap_err().contains("out of range"));
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
