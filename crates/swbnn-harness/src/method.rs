//! The methods a run compares: their names in files and on the command line, and their labels
//! in tables and figures.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// A method of the results tables. Serialised as its [`name`](Method::name) (`"2dgbnn"`, ...),
/// as the rows, run directories and `--method` arguments have always spelled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Method {
    /// A deterministic network.
    #[serde(rename = "deterministic")]
    Deterministic,
    /// Bayes by Backprop (a mean-field Gaussian BNN).
    #[serde(rename = "bbb")]
    Bbb,
    /// 2DGBNN: the Bayes-by-Backprop model with its weights shared among 2-D Gaussians.
    #[serde(rename = "2dgbnn")]
    Gbnn2d,
    /// The quantised BNN baseline (int8 means, few-bit standard deviations).
    #[serde(rename = "qbnn")]
    Qbnn,
    /// The deep-ensemble baseline.
    #[serde(rename = "ensemble")]
    Ensemble,
}

impl Method {
    /// The methods of the main experiment, in table order; each has a stage of that name.
    pub const MAIN: [Method; 3] = [Method::Deterministic, Method::Bbb, Method::Gbnn2d];

    /// Every method.
    pub const ALL: [Method; 5] = [
        Method::Deterministic,
        Method::Bbb,
        Method::Gbnn2d,
        Method::Qbnn,
        Method::Ensemble,
    ];

    /// The name in files, stage directories and arguments: `deterministic`, `bbb`, `2dgbnn`,
    /// `qbnn`, `ensemble`.
    pub fn name(self) -> &'static str {
        match self {
            Method::Deterministic => "deterministic",
            Method::Bbb => "bbb",
            Method::Gbnn2d => "2dgbnn",
            Method::Qbnn => "qbnn",
            Method::Ensemble => "ensemble",
        }
    }

    /// The name in titles and legends: `Deterministic`, `BBB`, `2DGBNN`, `QBNN`, `Ensemble`.
    pub fn label(self) -> &'static str {
        match self {
            Method::Deterministic => "Deterministic",
            Method::Bbb => "BBB",
            Method::Gbnn2d => "2DGBNN",
            Method::Qbnn => "QBNN",
            Method::Ensemble => "Ensemble",
        }
    }

    /// Forward passes per image of an evaluation with `samples` Monte Carlo samples: one for a
    /// deterministic network, which gives the same answer every pass.
    pub fn passes(self, samples: usize) -> usize {
        match self {
            Method::Deterministic => 1,
            _ => samples,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "unknown method `{s}` (known: {})",
                    Method::ALL.map(Method::name).join(", ")
                ))
            })
    }
}

/// Comparisons with a name, so code and tests can write `row.method == "bbb"`.
impl PartialEq<str> for Method {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for Method {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are those older run directories hold: a row written before the enum reads
    /// back, and a row written now reads as before.
    #[test]
    fn serialised_as_the_names_files_have_always_held() {
        for (m, name) in [
            (Method::Deterministic, "deterministic"),
            (Method::Bbb, "bbb"),
            (Method::Gbnn2d, "2dgbnn"),
            (Method::Qbnn, "qbnn"),
            (Method::Ensemble, "ensemble"),
        ] {
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{name}\""));
            let back: Method = serde_json::from_str(&format!("\"{name}\"")).unwrap();
            assert_eq!(back, m);
            assert_eq!(name.parse::<Method>().unwrap(), m);
            assert_eq!(m.to_string(), name);
        }
        let e = "2dgnn".parse::<Method>().unwrap_err().to_string();
        assert!(e.contains("2dgnn") && e.contains("2dgbnn"), "{e}");
        assert!(serde_json::from_str::<Method>("\"BBB\"").is_err());
    }

    #[test]
    fn a_deterministic_network_is_evaluated_once() {
        assert_eq!(Method::Deterministic.passes(30), 1);
        assert_eq!(Method::Bbb.passes(30), 30);
        assert_eq!(Method::Gbnn2d.passes(30), 30);
    }
}
