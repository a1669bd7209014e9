//! Regression tables for the tests: seeded rows of two features and a target in units far
//! from standardised ones, written as a CSV or a `.npz` of floating-point targets.
#![allow(dead_code)]

use std::path::Path;

use super::npz_fixture::{npy_f32, write_npz};

/// A seeded stream of uniforms in `[0, 1)`.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-12), self.next());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// `n` rows of two features and a heteroscedastic target: `y = 3 x1 - 2 x2 + 50 + (0.5 +
/// |x1|) e`, in units far from standardised ones, so that a model that forgot to bring its
/// predictions back would miss by tens.
pub fn rows(n: usize, seed: u64) -> Vec<[f64; 3]> {
    let mut rng = Lcg(seed);
    (0..n)
        .map(|_| {
            let (x1, x2) = (4.0 * rng.next() - 2.0, 4.0 * rng.next() - 2.0);
            let y = 3.0 * x1 - 2.0 * x2 + 50.0 + (0.5 + x1.abs()) * rng.normal();
            [x1, x2, y]
        })
        .collect()
}

pub fn write_csv(path: &Path, rows: &[[f64; 3]]) {
    let mut text = String::from("x1,x2,price\n");
    for r in rows {
        text.push_str(&format!("{},{},{}\n", r[0], r[1], r[2]));
    }
    std::fs::write(path, text).unwrap();
}

pub fn write_regression_npz(path: &Path, train: &[[f64; 3]], test: &[[f64; 3]]) {
    let x = |r: &[[f64; 3]]| -> Vec<f32> {
        r.iter().flat_map(|v| [v[0] as f32, v[1] as f32]).collect()
    };
    let y = |r: &[[f64; 3]]| -> Vec<f32> { r.iter().map(|v| v[2] as f32).collect() };
    write_npz(
        path,
        &[
            ("x_train", npy_f32(&[train.len(), 2], &x(train))),
            ("y_train", npy_f32(&[train.len()], &y(train))),
            ("x_test", npy_f32(&[test.len(), 2], &x(test))),
            ("y_test", npy_f32(&[test.len()], &y(test))),
        ],
    );
}
