//! Numbers in messages: short whatever their magnitude.

use std::fmt;

/// `value` for a message: Rust's shortest round-trip form (`{}`), in scientific notation
/// (`{:e}`, e.g. `1e-300`) when that form would run to many digits (magnitudes below 1e-4 or
/// from 1e16 up), so that a tiny or huge number a user typed is echoed in a few characters,
/// not hundreds. Exact: the text parses back to the same `f64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Short(pub f64);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0.abs();
        if a != 0.0 && a.is_finite() && !(1e-4..1e16).contains(&a) {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Short;

    #[test]
    fn numbers_print_short_and_exact() {
        for (v, text) in [
            (1e-300, "1e-300"),
            (-1e300, "-1e300"),
            (f64::MAX, "1.7976931348623157e308"),
            (0.05, "0.05"),
            (1.5, "1.5"),
            (20.0, "20"),
            (0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (1e11, "100000000000"),
        ] {
            let s = Short(v).to_string();
            assert_eq!(s, text);
            assert!(s.len() <= 24, "{s}");
            if v.is_finite() {
                assert_eq!(s.parse::<f64>().unwrap(), v);
            }
        }
    }
}
