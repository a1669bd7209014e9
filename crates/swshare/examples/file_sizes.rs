//! File sizes of a ResNet-20-sized weight-shared model (`.swb`) against the full BNN file.
//!
//! Builds a synthetic, seeded `SharedModelData` with ResNet-20's shareable weights (268 336
//! conv/fc weights), K = 2000 components, 2 % outliers and 0.1 % ellipse weights; the shared
//! weights pick their component from a Zipf(s) law over the K components (few large clusters,
//! a long tail of small ones). Prints JSON with every size and the ratios to the full BNN.
//!
//! ```text
//! cargo run -p swshare --no-default-features --example file_sizes -- [zipf_s=1.0] [seed=42]
//! ```

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal, Zipf};
use swshare::format::{self, FileSizes};
use swshare::{
    EllipseEntry, LayerShape, NamedTensor, OutlierCause, SaveOptions, SharedModelData, WeightFate,
};

const K: usize = 2000;
const OUTLIER_FRACTION: f64 = 0.02;
const ELLIPSE_FRACTION: f64 = 0.001;

/// ResNet-20 (CIFAR-10, option-A shortcuts): shareable weight tensors and BatchNorm channels.
fn resnet20() -> (Vec<LayerShape>, Vec<(String, usize)>) {
    let mut layers = vec![LayerShape {
        path: "conv1.weight".into(),
        shape: vec![16, 3, 3, 3],
    }];
    let mut norms = vec![("bn1".to_string(), 16)];
    let mut c_in = 16;
    for (stage, c_out) in [16usize, 32, 64].into_iter().enumerate() {
        for block in 0..3 {
            for conv in 1..=2 {
                let prefix = format!("layer{}.{block}", stage + 1);
                let c = if conv == 1 { c_in } else { c_out };
                layers.push(LayerShape {
                    path: format!("{prefix}.conv{conv}.weight"),
                    shape: vec![c_out, c, 3, 3],
                });
                norms.push((format!("{prefix}.bn{conv}"), c_out));
            }
            c_in = c_out;
        }
    }
    layers.push(LayerShape {
        path: "fc.weight".into(),
        shape: vec![10, 64],
    });
    (layers, norms)
}

fn unshared(norms: &[(String, usize)], rng: &mut StdRng) -> Vec<NamedTensor> {
    let mut out = Vec::new();
    let tensor = |path: String, n: usize, rng: &mut StdRng| NamedTensor {
        path,
        shape: vec![n],
        data: (0..n).map(|_| rng.random::<f32>()).collect(),
    };
    for (name, c) in norms {
        for p in ["weight", "bias", "running_mean", "running_var"] {
            out.push(tensor(format!("{name}.{p}"), *c, rng));
        }
    }
    out.push(tensor("fc.bias.mu".into(), 10, rng));
    out.push(tensor("fc.bias.rho".into(), 10, rng));
    out
}

fn synthetic_model(zipf_s: f64, seed: u64) -> SharedModelData {
    let mut rng = StdRng::seed_from_u64(seed);
    let (layers, norms) = resnet20();
    let n: usize = layers
        .iter()
        .map(|l| l.shape.iter().product::<usize>())
        .sum();
    let zipf = Zipf::new(K as f64, zipf_s).expect("valid Zipf parameters");
    let mu_dist = Normal::new(0.0f32, 0.05).expect("valid normal");
    // Shuffle which component is popular so that the index is not sorted by size.
    let mut rank_to_component: Vec<u32> = (0..K as u32).collect();
    for i in (1..K).rev() {
        rank_to_component.swap(i, rng.random_range(0..=i));
    }
    let mut model = SharedModelData {
        arch: r#"{"name":"resnet20","num_classes":10,"widths":[16,32,64],"blocks":3}"#.into(),
        codebook_mu: (0..K).map(|_| mu_dist.sample(&mut rng)).collect(),
        codebook_rho: (0..K).map(|_| rng.random_range(-6.0f32..-4.0)).collect(),
        layers,
        fates: Vec::with_capacity(n),
        ellipses: vec![],
        outlier_mu: vec![],
        outlier_rho: vec![],
        outlier_causes: vec![],
        unshared: unshared(&norms, &mut rng),
        temperature: None,
        conformal: None,
    };
    for _ in 0..n {
        let u: f64 = rng.random();
        let fate = if u < OUTLIER_FRACTION {
            let cause = match rng.random_range(0..10) {
                0..5 => OutlierCause::MeanThreshold,
                5..9 => OutlierCause::Gradient,
                _ => OutlierCause::SmallCluster,
            };
            let sign = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            model.outlier_mu.push(sign * rng.random_range(0.2f32..0.8));
            model.outlier_rho.push(rng.random_range(-6.0f32..-3.0));
            model.outlier_causes.push(cause);
            WeightFate::Outlier(cause)
        } else if u < OUTLIER_FRACTION + ELLIPSE_FRACTION {
            let m = rng.random_range(2..=5);
            let raw: Vec<f32> = (0..m).map(|_| rng.random_range(0.05f32..1.0)).collect();
            let total: f32 = raw.iter().sum();
            model.ellipses.push(EllipseEntry {
                components: (0..m).map(|_| rng.random_range(0..K as u32)).collect(),
                alphas: raw.iter().map(|a| a / total).collect(),
            });
            WeightFate::Ellipse(model.ellipses.len() as u32 - 1)
        } else {
            let rank = zipf.sample(&mut rng) as usize - 1;
            WeightFate::Shared(rank_to_component[rank.min(K - 1)])
        };
        model.fates.push(fate);
    }
    model
}

/// Empirical entropy of the index symbols in bits per weight (the bound entropy coding nears).
fn index_entropy_bits(model: &SharedModelData) -> f64 {
    let mut counts = vec![0usize; K + 2];
    for f in &model.fates {
        counts[match f {
            WeightFate::Shared(k) => *k as usize,
            WeightFate::Ellipse(_) => K,
            WeightFate::Outlier(_) => K + 1,
        }] += 1;
    }
    let n = model.fates.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let zipf_s: f64 = args.next().map_or(Ok(1.0), |a| a.parse())?;
    let seed: u64 = args.next().map_or(Ok(42), |a| a.parse())?;
    let model = synthetic_model(zipf_s, seed);

    // The full BNN baseline: every weight's own (mu, rho).
    let n = model.fates.len();
    let full = format::full_bnn_to_bytes(
        &model.arch,
        &model.layers,
        &vec![0.0; n],
        &vec![0.0; n],
        &model.unshared,
        None,
    )?
    .len() as u64;

    let mut swb = serde_json::Map::new();
    let mut ratio = serde_json::Map::new();
    for (name, opts) in ["plain", "entropy_index", "int8_outliers", "both"]
        .into_iter()
        .zip(SaveOptions::ALL)
    {
        let sizes: FileSizes = format::encoded_sizes(&model, &opts)?;
        ratio.insert(name.into(), (sizes.total as f64 / full as f64).into());
        swb.insert(name.into(), serde_json::to_value(sizes)?);
    }
    let report = serde_json::json!({
        "model": "synthetic ResNet-20",
        "seed": seed,
        "zipf_s": zipf_s,
        "shareable_weights": n,
        "k": K,
        "outliers": model.outlier_mu.len(),
        "ellipses": model.ellipses.len(),
        "index_entropy_bits_per_weight": index_entropy_bits(&model),
        "full_bnn_bytes": full,
        "swb_bytes": swb,
        "swb_over_full": ratio,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
