//! Files written by earlier versions of the writer, committed under `tests/fixtures/`: every
//! one must decode to the content it was made from (files before the calibration section with
//! no temperature), and re-encoding that content with the writer of its version must give the
//! same bytes.
//!
//! The fixtures were written by the bincode-derived writer that preceded the hand-written
//! codec of `docs/swb-format.md`; the test proves the two agree byte for byte. Regenerate
//! (only when the format changes on purpose) with
//! `SWB_WRITE_FIXTURES=1 cargo test -p swshare --lib fixtures`.

use std::path::PathBuf;

use super::qbnn::{self, AffineBits, FoldedNorm, QTensor, QValues, QbnnData, SymmetricI8};
use super::*;
use crate::fate::{OutlierCause, WeightFate};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A deterministic model with `k` codebook entries and `n` weights in three layers: every
/// fate, outliers of each cause, ellipses of 2 to 5 distinct components whose alphas sum
/// to 1, and unshared tensors.
pub(crate) fn fixture_model(k: u32, n: usize) -> SharedModelData {
    let mut fates = Vec::with_capacity(n);
    let (mut ellipses, mut causes, mut omu, mut orho) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let fate = match i % 13 {
            4 => {
                let cause = [
                    OutlierCause::MeanThreshold,
                    OutlierCause::Gradient,
                    OutlierCause::SmallCluster,
                ][i % 3];
                causes.push(cause);
                omu.push(0.25 + i as f32 * 0.0125);
                orho.push(-4.5 - i as f32 * 0.0025);
                WeightFate::Outlier(cause)
            }
            9 => {
                let m = 2 + i % 4;
                let raw: Vec<f64> = (0..m).map(|c| 1.0 / (c + 1) as f64).collect();
                let total: f64 = raw.iter().sum();
                ellipses.push(EllipseEntry {
                    components: (0..m as u32).map(|c| (c * 7 + i as u32) % k).collect(),
                    alphas: raw.iter().map(|a| (a / total) as f32).collect(),
                });
                WeightFate::Ellipse(ellipses.len() as u32 - 1)
            }
            _ => WeightFate::Shared(((i * i + 3 * i) % 7) as u32 % k),
        };
        fates.push(fate);
    }
    let third = n / 3;
    SharedModelData {
        arch: r#"{"name":"fixture-net","widths":[4,8]}"#.into(),
        codebook_mu: (0..k).map(|c| c as f32 * 0.015625 - 0.0625).collect(),
        codebook_rho: (0..k).map(|c| -5.0 + c as f32 * 0.0009765625).collect(),
        layers: vec![
            LayerShape {
                path: "conv.weight".into(),
                shape: vec![third, 1, 1],
            },
            LayerShape {
                path: "fc1.weight".into(),
                shape: vec![third / 4, 4],
            },
            LayerShape {
                path: "fc2.weight".into(),
                shape: vec![n - third - (third / 4) * 4],
            },
        ],
        fates,
        ellipses,
        outlier_mu: omu,
        outlier_rho: orho,
        outlier_causes: causes,
        unshared: vec![
            NamedTensor {
                path: "fc1.bias.mu".into(),
                shape: vec![2],
                data: vec![0.5, -0.25],
            },
            NamedTensor {
                path: "fc1.bias.rho".into(),
                shape: vec![2],
                data: vec![-5.0, -4.75],
            },
            NamedTensor {
                path: "bn.running_var".into(),
                shape: vec![3, 1],
                data: vec![1.0, 2.0, f32::MIN_POSITIVE],
            },
        ],
        temperature: None,
        conformal: None,
    }
}

/// The full-BNN fixture's content: arch, layers, mu, rho, unshared.
pub(crate) fn fixture_full() -> FullBnnData {
    let m = fixture_model(6, 120);
    let n = m.fates.len();
    FullBnnData {
        arch: m.arch,
        layers: m.layers,
        mu: (0..n).map(|i| (i as f32 - 60.0) * 0.00390625).collect(),
        rho: (0..n).map(|i| -6.0 + i as f32 * 0.0078125).collect(),
        unshared: m.unshared,
        temperature: None,
        conformal: None,
    }
}

/// The `.qbnn` fixture's content.
pub(crate) fn fixture_qbnn() -> QbnnData {
    qbnn_sample(3)
}

/// A small `.qbnn` model: a conv layer's int8 means and `sigma_bits`-bit sigmas, and a folded
/// batch norm's bias.
pub(crate) fn qbnn_sample(sigma_bits: u8) -> QbnnData {
    let mu: Vec<f32> = (0..24).map(|i| (i as f32 - 12.0) * 0.01).collect();
    let sigma: Vec<f32> = (0..24).map(|i| 0.001 + i as f32 * 1e-4).collect();
    QbnnData {
        arch: r#"{"arch":"tiny"}"#.into(),
        sigma_bits,
        tensors: vec![
            QTensor {
                path: "conv.weight_mu".into(),
                shape: vec![2, 3, 2, 2],
                values: QValues::MeanI8(SymmetricI8::quantize(&mu).unwrap()),
            },
            QTensor {
                path: "conv.weight_rho".into(),
                shape: vec![2, 3, 2, 2],
                values: QValues::SigmaBits(AffineBits::quantize(&sigma, sigma_bits).unwrap()),
            },
            QTensor {
                path: "bn.beta".into(),
                shape: vec![2],
                values: QValues::F32(vec![0.5, -0.5]),
            },
        ],
        folded_norms: vec![FoldedNorm {
            path: "bn".into(),
            epsilon: 1e-5,
        }],
        temperature: None,
        conformal: None,
    }
}

const PLAIN: SaveOptions = SaveOptions {
    entropy_index: false,
    int8_outliers: false,
};
const ADAPTIVE: SaveOptions = SaveOptions {
    entropy_index: true,
    int8_outliers: false,
};
const PLAIN_INT8: SaveOptions = SaveOptions {
    entropy_index: false,
    int8_outliers: true,
};
const ADAPTIVE_INT8: SaveOptions = SaveOptions {
    entropy_index: true,
    int8_outliers: true,
};

/// Every shared-model fixture: file name, codebook length, weights, options.
const SHARED: [(&str, u32, usize, SaveOptions); 4] = [
    ("shared-plain-u8.swb", 6, 600, PLAIN),
    ("shared-plain-u16-int8.swb", 300, 400, PLAIN_INT8),
    ("shared-adaptive.swb", 40, 900, ADAPTIVE),
    ("shared-adaptive-int8.swb", 300, 900, ADAPTIVE_INT8),
];
const V1_HUFFMAN: &str = "shared-v1-huffman.swb";
const FULL: &str = "full-bnn.swb";
const QBNN: &str = "baseline.qbnn";
/// Format version 3 (`.qbnn` version 2) files with a fitted temperature.
const V3_SHARED: &str = "shared-v3-calibrated.swb";
const V3_FULL: &str = "full-bnn-v3-calibrated.swb";
const V2_QBNN: &str = "baseline-v2-calibrated.qbnn";
/// The temperature of the calibrated fixtures.
const FIXTURE_TEMPERATURE: f64 = 1.375;

fn calibrated_shared() -> SharedModelData {
    SharedModelData {
        temperature: Some(FIXTURE_TEMPERATURE),
        ..fixture_model(40, 900)
    }
}

fn calibrated_full() -> FullBnnData {
    FullBnnData {
        temperature: Some(FIXTURE_TEMPERATURE),
        ..fixture_full()
    }
}

fn calibrated_qbnn() -> qbnn::QbnnData {
    qbnn::QbnnData {
        temperature: Some(FIXTURE_TEMPERATURE),
        ..fixture_qbnn()
    }
}

fn full_bytes(f: &FullBnnData) -> Vec<u8> {
    full_bnn_to_bytes(
        &f.arch,
        &f.layers,
        &f.mu,
        &f.rho,
        &f.unshared,
        f.temperature,
    )
    .unwrap()
}

/// The bytes of every fixture as the current writer produces them.
fn current_bytes() -> Vec<(&'static str, Vec<u8>)> {
    let mut out: Vec<(&'static str, Vec<u8>)> = SHARED
        .iter()
        .map(|&(name, k, n, opts)| (name, codec::encode_shared_v2(&fixture_model(k, n), &opts)))
        .collect();
    out.push((
        V1_HUFFMAN,
        codec::encode_shared_v1_huffman(&fixture_model(40, 600)),
    ));
    out.push((FULL, codec::encode_full_v2(&fixture_full())));
    out.push((QBNN, qbnn::to_bytes_v1(&fixture_qbnn()).unwrap()));
    out.push((
        V3_SHARED,
        to_bytes(&calibrated_shared(), &ADAPTIVE).unwrap(),
    ));
    out.push((V3_FULL, full_bytes(&calibrated_full())));
    out.push((V2_QBNN, qbnn::to_bytes(&calibrated_qbnn()).unwrap()));
    out
}

fn read(name: &str) -> Vec<u8> {
    let path = dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn fixtures_decode_to_their_content_and_reencode_to_the_same_bytes() {
    if std::env::var_os("SWB_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(dir()).unwrap();
        for (name, bytes) in current_bytes() {
            std::fs::write(dir().join(name), bytes).unwrap();
        }
    }
    for (name, k, n, opts) in SHARED {
        let bytes = read(name);
        assert_eq!(&bytes[MAGIC.len()..MAGIC.len() + 2], &[2, 0], "{name}");
        let back = from_bytes(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = fixture_model(k, n);
        if opts.int8_outliers {
            // Lossy outliers: compare the rest exactly and the outliers within the bound.
            for (orig, got) in [
                (&want.outlier_mu, &back.outlier_mu),
                (&want.outlier_rho, &back.outlier_rho),
            ] {
                let bound = quant::QuantizedU8::quantize(orig).unwrap().error_bound();
                for (a, b) in orig.iter().zip(got) {
                    assert!((a - b).abs() <= bound, "{name}: {a} vs {b}");
                }
            }
            let exact = SharedModelData {
                outlier_mu: want.outlier_mu.clone(),
                outlier_rho: want.outlier_rho.clone(),
                ..back.clone()
            };
            assert_eq!(exact, want, "{name}");
        } else {
            assert_eq!(back, want, "{name}");
        }
        assert_eq!(
            codec::encode_shared_v2(&want, &opts),
            bytes,
            "{name} re-encoded"
        );
    }
    let v1 = read(V1_HUFFMAN);
    assert_eq!(&v1[MAGIC.len()..MAGIC.len() + 2], &[1, 0]);
    assert_eq!(from_bytes(&v1).unwrap(), fixture_model(40, 600));
    assert_eq!(codec::encode_shared_v1_huffman(&fixture_model(40, 600)), v1);
    let full = read(FULL);
    assert_eq!(&full[MAGIC.len()..MAGIC.len() + 2], &[2, 0]);
    assert_eq!(full_bnn_from_bytes(&full).unwrap(), fixture_full());
    assert_eq!(codec::encode_full_v2(&fixture_full()), full);
    let q = read(QBNN);
    assert_eq!(&q[7..9], &[1, 0]);
    assert_eq!(qbnn::from_bytes(&q).unwrap(), fixture_qbnn());
    assert_eq!(qbnn::to_bytes_v1(&fixture_qbnn()).unwrap(), q);

    let v3 = read(V3_SHARED);
    assert_eq!(&v3[MAGIC.len()..MAGIC.len() + 2], &[3, 0]);
    assert_eq!(from_bytes(&v3).unwrap(), calibrated_shared());
    assert_eq!(to_bytes(&calibrated_shared(), &ADAPTIVE).unwrap(), v3);
    let v3 = read(V3_FULL);
    assert_eq!(&v3[MAGIC.len()..MAGIC.len() + 2], &[3, 0]);
    assert_eq!(full_bnn_from_bytes(&v3).unwrap(), calibrated_full());
    assert_eq!(full_bytes(&calibrated_full()), v3);
    let q = read(V2_QBNN);
    assert_eq!(&q[7..9], &[2, 0]);
    assert_eq!(qbnn::from_bytes(&q).unwrap(), calibrated_qbnn());
    assert_eq!(qbnn::to_bytes(&calibrated_qbnn()).unwrap(), q);
}

/// A temperature set on every old file gives a current-version file holding it, with the
/// same model; the bytes before the calibration section are the old file's.
#[test]
fn a_temperature_set_on_an_old_file_keeps_its_model() {
    for (name, k, n, _) in SHARED {
        let old = read(name);
        let before = from_bytes(&old).unwrap();
        assert_eq!(before.temperature, None, "{name}");
        let new = with_temperature(&old, Some(2.5)).unwrap();
        assert_eq!(&new[MAGIC.len()..MAGIC.len() + 2], &[3, 0], "{name}");
        let after = from_bytes(&new).unwrap();
        assert_eq!(after.temperature, Some(2.5), "{name}");
        assert_eq!(
            SharedModelData {
                temperature: None,
                ..after
            },
            before,
            "{name} (K = {k}, {n} weights)"
        );
        let payload_v2 = &old[HEADER_LEN..old.len() - CHECKSUM_LEN];
        assert_eq!(&new[HEADER_LEN..HEADER_LEN + payload_v2.len()], payload_v2);
        // Removing it again leaves a file with no temperature, not the old version.
        let cleared = with_temperature(&new, None).unwrap();
        assert_eq!(from_bytes(&cleared).unwrap().temperature, None);
    }
    let v1 = with_temperature(&read(V1_HUFFMAN), Some(0.5)).unwrap();
    let back = from_bytes(&v1).unwrap();
    assert_eq!(back.temperature, Some(0.5));
    assert_eq!(
        SharedModelData {
            temperature: None,
            ..back
        },
        fixture_model(40, 600)
    );
    let full = with_temperature(&read(FULL), Some(3.0)).unwrap();
    assert_eq!(
        full_bnn_from_bytes(&full).unwrap(),
        FullBnnData {
            temperature: Some(3.0),
            ..fixture_full()
        }
    );
    for bad in [f64::NAN, 0.0, -1.0, 1e9] {
        let e = with_temperature(&read(FULL), Some(bad)).unwrap_err();
        assert!(e.to_string().contains("temperature"), "{bad}: {e}");
    }
}
