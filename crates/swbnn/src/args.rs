//! The command line's validated numbers (clap value parsers that refuse what cannot run) and
//! its error output.

/// Most epochs a command accepts (the paper's longest schedule is 200).
pub const MAX_EPOCHS: usize = 1_000_000;
/// Most CPU threads a command accepts.
pub const MAX_THREADS: usize = 4096;

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

/// A count of at least 1 (`--subset`, `--samples`, `--k`).
pub fn positive(s: &str) -> Result<usize, String> {
    in_range(s, 1, usize::MAX)
}

/// Epochs: 1 to [`MAX_EPOCHS`].
pub fn epochs(s: &str) -> Result<usize, String> {
    in_range(s, 1, MAX_EPOCHS)
}

/// Threads: 1 to [`MAX_THREADS`].
pub fn threads(s: &str) -> Result<usize, String> {
    in_range(s, 1, MAX_THREADS)
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
        assert!(positive("0").unwrap_err().contains("out of range"));
        assert!(positive("-1").is_err());
        assert!(epochs("0").is_err());
        assert!(epochs("18446744073709551615").is_err());
        assert_eq!(epochs("200"), Ok(200));
        assert!(threads("0").is_err());
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
