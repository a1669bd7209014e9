//! Draws every figure from the fixed test inputs into a directory, at the sizes the
//! experiment report uses, for looking at them:
//! `cargo run -p bnn-plot --example gallery -- DIR` (default `gallery/`).

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

use std::path::PathBuf;

use bnn_plot::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "gallery".into()));
    std::fs::create_dir_all(&dir)?;
    for ext in ["png", "svg"] {
        let out = |name: &str| dir.join(format!("{name}.{ext}"));
        let d = fixtures::diagrams();
        let panels: Vec<ReliabilityPanel> = d
            .iter()
            .map(|(name, diagram)| ReliabilityPanel { name, diagram })
            .collect();
        reliability(&panels, Size::new(1350, 620), &out("reliability"))?;
        let u = fixtures::uncertainties();
        let plot = OodPlot {
            title: "2DGBNN: Fashion-MNIST vs MNIST",
            in_name: "Fashion-MNIST (in)",
            out_name: "MNIST (OOD)",
            in_dist: Uncertainties {
                max_prob: &u.in_max,
                entropy: &u.in_entropy,
                mutual_information: Some(&u.in_mi),
            },
            out_dist: Uncertainties {
                max_prob: &u.out_max,
                entropy: &u.out_entropy,
                mutual_information: Some(&u.out_mi),
            },
        };
        ood(&plot, Size::new(1100, 800), &out("ood"))?;
        for (name, n, k) in [("weights-small", 6000, 12), ("weights-270k", 270_000, 1600)] {
            let w = fixtures::weights(n, k);
            let title = format!("(μ, σ) of {n} weights, {k} Gaussians");
            let data = WeightsPlot {
                title: &title,
                mu: &w.mu,
                sigma: &w.sigma,
                fates: &w.fates,
                gaussians: &w.gaussians,
            };
            weights(
                &data,
                &WeightsOptions::default(),
                Size::new(1100, 750),
                &out(name),
            )?;
        }
        let (conf, class) = fixtures::per_class(5000);
        let names = fixtures::class_names();
        per_class(
            &PerClassPlot {
                title: "2DGBNN: confidence per class",
                class_names: &names,
                class_axis: "true class",
                value_axis: "confidence (max. probability)",
                confidence: &conf,
                class: &class,
            },
            Size::new(1100, 600),
            &out("per-class"),
        )?;
        corruptions(
            &fixtures::corruption_series(),
            Size::new(1300, 450),
            &out("corruptions"),
        )?;
    }
    println!("wrote {}", dir.display());
    Ok(())
}
