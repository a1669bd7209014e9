//! Behaviour of the whole format: round trips, corruption, versioning and atomic writes.

use super::*;
use crate::fate::{OutlierCause, WeightFate};

/// A small model with every kind of fate, `k` codebook entries and `n` weights.
fn model(k: u32, n: usize) -> SharedModelData {
    let mut fates = Vec::with_capacity(n);
    let (mut ellipses, mut causes, mut omu, mut orho) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let fate = match i % 11 {
            3 => {
                let cause = [
                    OutlierCause::MeanThreshold,
                    OutlierCause::Gradient,
                    OutlierCause::SmallCluster,
                ][i % 3];
                causes.push(cause);
                omu.push(0.3 + i as f32 * 0.01);
                orho.push(-4.0 - i as f32 * 0.001);
                WeightFate::Outlier(cause)
            }
            7 => {
                let m = 1 + i % 5;
                ellipses.push(EllipseEntry {
                    components: (0..m as u32).map(|c| (c * 7 + i as u32) % k).collect(),
                    alphas: (0..m).map(|_| 1.0 / m as f32).collect(),
                });
                WeightFate::Ellipse(ellipses.len() as u32 - 1)
            }
            _ => WeightFate::Shared(((i * i) % 5) as u32 % k),
        };
        fates.push(fate);
    }
    SharedModelData {
        arch: r#"{"name":"test-net","widths":[4,8]}"#.into(),
        codebook_mu: (0..k).map(|c| c as f32 * 0.01 - 0.02).collect(),
        codebook_rho: (0..k).map(|c| -5.0 + c as f32 * 0.001).collect(),
        layers: vec![
            LayerShape {
                path: "conv.weight".into(),
                shape: vec![n / 2, 1],
            },
            LayerShape {
                path: "fc.weight".into(),
                shape: vec![n - n / 2],
            },
        ],
        fates,
        ellipses,
        outlier_mu: omu,
        outlier_rho: orho,
        outlier_causes: causes,
        unshared: vec![
            NamedTensor {
                path: "fc.bias.mu".into(),
                shape: vec![2],
                data: vec![0.5, -0.25],
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

fn small() -> SharedModelData {
    model(6, 40)
}

#[test]
fn round_trip_every_option_combination() {
    for k in [6, 300] {
        let m = model(k, 500);
        for opts in SaveOptions::ALL {
            let bytes = to_bytes(&m, &opts).unwrap();
            let back = from_bytes(&bytes).unwrap();
            if !opts.int8_outliers {
                assert_eq!(back, m, "{opts:?}");
                continue;
            }
            let bound_mu = quant::QuantizedU8::quantize(&m.outlier_mu)
                .unwrap()
                .error_bound();
            let bound_rho = quant::QuantizedU8::quantize(&m.outlier_rho)
                .unwrap()
                .error_bound();
            for (a, b) in m.outlier_mu.iter().zip(&back.outlier_mu) {
                assert!((a - b).abs() <= bound_mu, "{a} vs {b}");
            }
            for (a, b) in m.outlier_rho.iter().zip(&back.outlier_rho) {
                assert!((a - b).abs() <= bound_rho, "{a} vs {b}");
            }
            let exact_rest = SharedModelData {
                outlier_mu: m.outlier_mu.clone(),
                outlier_rho: m.outlier_rho.clone(),
                ..back
            };
            assert_eq!(exact_rest, m, "{opts:?}");
        }
    }
}

#[test]
fn sizes_add_up_and_match_the_bytes() {
    let m = model(300, 2000);
    for opts in SaveOptions::ALL {
        let s = encoded_sizes(&m, &opts).unwrap();
        let parts = s.header + s.codebook + s.index + s.alphas + s.outliers + s.unshared;
        assert_eq!(parts, s.total);
        assert_eq!(s.total, to_bytes(&m, &opts).unwrap().len() as u64);
    }
    let plain = encoded_sizes(&m, &SaveOptions::ALL[0]).unwrap();
    let both = encoded_sizes(&m, &SaveOptions::ALL[3]).unwrap();
    // Only 5 of 302 symbols are common, so Huffman beats 16-bit symbols by far; int8 outliers
    // need a quarter of the f32 bytes (plus two ranges).
    assert!(both.index * 4 < plain.index);
    assert!(both.outliers < plain.outliers);
}

#[test]
fn index_width_is_u8_up_to_k_254_and_u16_above() {
    let n = 1000;
    for (k, width) in [(254u32, 1u64), (255, 2)] {
        let s = encoded_sizes(&model(k, n), &SaveOptions::default()).unwrap();
        // Variant tag (1 byte) and varint length (3 bytes for these lengths) around the data.
        assert_eq!(s.index, width * n as u64 + 4, "K = {k}");
    }
}

#[test]
fn empty_model_round_trips() {
    let m = SharedModelData {
        arch: String::new(),
        codebook_mu: vec![],
        codebook_rho: vec![],
        layers: vec![],
        fates: vec![],
        ellipses: vec![],
        outlier_mu: vec![],
        outlier_rho: vec![],
        outlier_causes: vec![],
        unshared: vec![],
        temperature: None,
        conformal: None,
    };
    for opts in SaveOptions::ALL {
        assert_eq!(from_bytes(&to_bytes(&m, &opts).unwrap()).unwrap(), m);
    }
}

#[test]
fn every_truncation_is_an_error() {
    for opts in SaveOptions::ALL {
        let bytes = to_bytes(&small(), &opts).unwrap();
        for len in 0..bytes.len() {
            assert!(from_bytes(&bytes[..len]).is_err(), "prefix {len} accepted");
        }
        let err = from_bytes(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(matches!(err, FormatError::Truncated { .. }), "{err}");
    }
}

#[test]
fn every_single_bit_flip_is_an_error() {
    for opts in SaveOptions::ALL {
        let bytes = to_bytes(&small(), &opts).unwrap();
        for bit in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(from_bytes(&b).is_err(), "flip of bit {bit} accepted");
        }
    }
}

#[test]
fn payload_flip_is_a_checksum_mismatch_and_trailing_bytes_are_rejected() {
    let mut bytes = to_bytes(&small(), &SaveOptions::default()).unwrap();
    bytes[HEADER_LEN + 3] ^= 0x10;
    assert!(matches!(
        from_bytes(&bytes),
        Err(FormatError::ChecksumMismatch { .. })
    ));
    let mut longer = to_bytes(&small(), &SaveOptions::default()).unwrap();
    longer.push(0);
    assert!(matches!(
        from_bytes(&longer),
        Err(FormatError::TrailingBytes { extra: 1 })
    ));
}

#[test]
fn wrong_magic_future_version_and_wrong_kind_are_specific_errors() {
    let bytes = to_bytes(&small(), &SaveOptions::default()).unwrap();
    let mut bad = bytes.clone();
    bad[0] = b'X';
    assert!(matches!(
        from_bytes(&bad),
        Err(FormatError::BadMagic { .. })
    ));
    let mut future = bytes.clone();
    future[MAGIC.len()..MAGIC.len() + 2].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let err = from_bytes(&future).unwrap_err();
    assert!(
        matches!(err, FormatError::UnsupportedVersion { found, oldest: 1, newest: FORMAT_VERSION } if found == FORMAT_VERSION + 1)
    );
    assert!(
        err.to_string()
            .contains("unsupported .swb format version 4 (this reader supports versions 1 to 3)"),
        "{err}"
    );
    let mut ancient = bytes.clone();
    ancient[MAGIC.len()..MAGIC.len() + 2].copy_from_slice(&0u16.to_le_bytes());
    assert!(matches!(
        from_bytes(&ancient),
        Err(FormatError::UnsupportedVersion { found: 0, .. })
    ));
    let full = full_bnn_to_bytes("{}", &[], &[], &[], &[], None).unwrap();
    assert!(matches!(
        from_bytes(&full),
        Err(FormatError::WrongKind {
            found: FileKind::FullBnn,
            expected: FileKind::Shared
        })
    ));
    assert!(matches!(
        full_bnn_from_bytes(&bytes),
        Err(FormatError::WrongKind { .. })
    ));
}

/// `bytes` with its version field set to `version` and the checksum redone.
fn with_version(bytes: &[u8], version: u16) -> Vec<u8> {
    let mut b = bytes[..bytes.len() - CHECKSUM_LEN].to_vec();
    b[MAGIC.len()..MAGIC.len() + 2].copy_from_slice(&version.to_le_bytes());
    checksum::append(&mut b);
    b
}

#[test]
fn version_1_files_still_load() {
    for k in [6, 300] {
        let m = model(k, 500);
        // Huffman index, as the version 1 writer stored it.
        let v1 = codec::encode_shared_v1_huffman(&m);
        assert_eq!(&v1[MAGIC.len()..MAGIC.len() + 2], &[1, 0]);
        assert_eq!(from_bytes(&v1).unwrap(), m);
        // Plain index: the version 1 and 2 layouts are the same.
        let plain = codec::encode_shared_v2(&m, &SaveOptions::default());
        assert_eq!(from_bytes(&with_version(&plain, 1)).unwrap(), m);
    }
}

#[test]
fn the_temperature_round_trips_with_every_option_and_old_files_have_none() {
    for opts in SaveOptions::ALL {
        for t in [
            None,
            Some(0.05),
            Some(1.0),
            Some(1.2345678901234),
            Some(20.0),
        ] {
            let m = SharedModelData {
                temperature: t,
                ..small()
            };
            let bytes = to_bytes(&m, &opts).unwrap();
            assert_eq!(from_bytes(&bytes).unwrap().temperature, t, "{opts:?}");
            assert_eq!(encoded_sizes(&m, &opts).unwrap().total, bytes.len() as u64);
        }
        let v2 = codec::encode_shared_v2(&small(), &opts);
        assert_eq!(&v2[MAGIC.len()..MAGIC.len() + 2], &[2, 0]);
        assert_eq!(from_bytes(&v2).unwrap().temperature, None);
        // A version 2 file has no calibration section: a version 3 reader of those bytes
        // runs out of payload, and a version 2 reader of a version 3 file finds one byte too many.
        assert!(from_bytes(&with_version(&v2, 3)).is_err());
        let v3 = to_bytes(&small(), &opts).unwrap();
        assert!(from_bytes(&with_version(&v3, 2)).is_err());
    }
}

/// `bytes` (a whole file) with the payload's last 8 bytes set to `value` and the checksum
/// redone, so that the value itself is what a reader meets.
fn with_last_f64(bytes: &[u8], value: f64) -> Vec<u8> {
    let mut b = bytes[..bytes.len() - CHECKSUM_LEN].to_vec();
    let at = b.len() - 8;
    b[at..].copy_from_slice(&value.to_le_bytes());
    checksum::append(&mut b);
    b
}

#[test]
fn a_bad_temperature_is_refused_on_save_and_on_load() {
    for t in [f64::NAN, f64::INFINITY, 0.0, -1.5, 0.001, 1e12] {
        let m = SharedModelData {
            temperature: Some(t),
            ..small()
        };
        let e = to_bytes(&m, &SaveOptions::default()).unwrap_err();
        assert!(
            matches!(e, FormatError::InvalidModel(_)) && e.to_string().contains("temperature"),
            "{t}: {e}"
        );
        // The same value in a file behind a valid checksum: the last 8 payload bytes.
        let good = SharedModelData {
            temperature: Some(2.0),
            ..small()
        };
        let bytes = with_last_f64(&to_bytes(&good, &SaveOptions::default()).unwrap(), t);
        let e = from_bytes(&bytes).unwrap_err();
        assert!(
            matches!(
                e,
                FormatError::Corrupt {
                    section: "calibration",
                    ..
                }
            ) && e.to_string().contains("temperature"),
            "{t}: {e}"
        );
    }
    let mut bytes = to_bytes(&small(), &SaveOptions::default()).unwrap();
    bytes.truncate(bytes.len() - CHECKSUM_LEN);
    *bytes.last_mut().unwrap() = 4;
    checksum::append(&mut bytes);
    let e = from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("calibration") && e.contains("tag 4"), "{e}");
}

fn aps(level: f64, qhat: f64, n: usize) -> bnn_metrics::ConformalCalibration {
    bnn_metrics::ConformalCalibration::Aps {
        temperature: 1.5,
        level,
        qhat,
        n,
    }
}

#[test]
fn a_conformal_calibration_round_trips_beside_the_temperature() {
    let intervals = bnn_metrics::ConformalCalibration::NormalizedInterval {
        level: 0.95,
        qhat: vec![1.96, 2.5],
        n: 200,
    };
    for opts in SaveOptions::ALL {
        for t in [None, Some(0.8)] {
            for c in [None, Some(aps(0.9, 0.9375, 5000)), Some(intervals.clone())] {
                let m = SharedModelData {
                    temperature: t,
                    conformal: c.clone(),
                    ..small()
                };
                let bytes = to_bytes(&m, &opts).unwrap();
                let back = from_bytes(&bytes).unwrap();
                assert_eq!((back.temperature, &back.conformal), (t, &c), "{opts:?}");
                assert_eq!(encoded_sizes(&m, &opts).unwrap().total, bytes.len() as u64);
                // Replacing the calibration keeps every byte of the model before it.
                let plain = to_bytes(&small(), &opts).unwrap();
                let replaced = with_calibration(&plain, t, c.as_ref()).unwrap();
                assert_eq!(replaced, bytes);
                // Replacing the temperature alone keeps the conformal calibration.
                let retempered = with_temperature(&bytes, Some(2.0)).unwrap();
                let back = from_bytes(&retempered).unwrap();
                assert_eq!((back.temperature, back.conformal), (Some(2.0), c.clone()));
            }
        }
    }
    // A file without one is what the writer wrote before conformal calibration existed:
    // a one-byte tag 0, or tag 1 and the temperature.
    let bytes = to_bytes(&small(), &SaveOptions::default()).unwrap();
    assert_eq!(bytes[bytes.len() - CHECKSUM_LEN - 1], 0);
}

#[test]
fn a_bad_conformal_calibration_is_refused_on_save_and_on_load() {
    for (bad, what) in [
        (aps(1.0, 0.5, 5000), "level"),
        (aps(0.9, 0.5, 9), "n = 9"),
        (aps(0.9, 1.5, 5000), "qhat"),
        (aps(0.9, f64::NAN, 5000), "qhat"),
    ] {
        let m = SharedModelData {
            conformal: Some(bad.clone()),
            ..small()
        };
        let e = to_bytes(&m, &SaveOptions::default()).unwrap_err();
        assert!(
            matches!(e, FormatError::InvalidModel(_)) && e.to_string().contains(what),
            "{bad:?}: {e}"
        );
        let e = with_calibration(
            &to_bytes(&small(), &SaveOptions::default()).unwrap(),
            None,
            Some(&bad),
        )
        .unwrap_err();
        assert!(e.to_string().contains(what), "{bad:?}: {e}");
        // The same value in a file behind a valid checksum: the APS threshold is the last 8
        // payload bytes.
        let good = SharedModelData {
            conformal: Some(aps(0.9, 0.5, 5000)),
            ..small()
        };
        let bad_q = match bad {
            bnn_metrics::ConformalCalibration::Aps { qhat, .. } => qhat,
            _ => unreachable!(),
        };
        if bad_q != 0.5 {
            let bytes = with_last_f64(&to_bytes(&good, &SaveOptions::default()).unwrap(), bad_q);
            let e = from_bytes(&bytes).unwrap_err();
            assert!(
                matches!(
                    e,
                    FormatError::Corrupt {
                        section: "calibration",
                        ..
                    }
                ) && e.to_string().contains("qhat"),
                "{bad:?}: {e}"
            );
        }
    }
}

#[test]
fn range_coded_index_in_a_version_1_file_is_refused() {
    let bytes = to_bytes(&small(), &SaveOptions::ALL[1]).unwrap();
    let err = from_bytes(&with_version(&bytes, 1)).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::Corrupt {
                section: "index",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("version 1"), "{err}");
}

#[test]
fn entropy_index_beats_huffman_on_a_layered_index() {
    // Two layers with different component usage: a per-layer model codes this below one
    // global Huffman code.
    let mut m = model(300, 4000);
    for (i, f) in m.fates.iter_mut().enumerate() {
        if let WeightFate::Shared(c) = f {
            let layer = u32::from(i >= 2000);
            *c = layer * 150 + ((i * i) % 13) as u32 + (i % 3) as u32 * 40;
        }
    }
    let adaptive = encoded_sizes(&m, &SaveOptions::ALL[1]).unwrap().index;
    let huffman = codec::encode_shared_v1_huffman(&m).len() as u64
        - (encoded_sizes(&m, &SaveOptions::ALL[1]).unwrap().total - adaptive);
    assert!(
        (adaptive as f64) < 0.9 * huffman as f64,
        "adaptive {adaptive} vs Huffman {huffman} bytes"
    );
    assert_eq!(
        from_bytes(&to_bytes(&m, &SaveOptions::ALL[1]).unwrap()).unwrap(),
        m
    );
}

/// A file with a valid header and checksum around an arbitrary payload.
fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    header::write(
        &mut out,
        FileKind::Shared,
        FORMAT_VERSION,
        payload.len() as u64,
    );
    out.extend_from_slice(payload);
    checksum::append(&mut out);
    out
}

#[test]
fn absurd_lengths_behind_a_valid_checksum_are_errors_not_allocations() {
    // bincode varint: tag 253 announces a u64; here the architecture text claims 2^60 bytes.
    let mut payload = vec![253];
    payload.extend_from_slice(&(1u64 << 60).to_le_bytes());
    let err = from_bytes(&framed(&payload)).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::Corrupt {
                section: "meta",
                ..
            }
        ),
        "{err}"
    );

    // A layer claiming 2^50 weights with an empty index.
    let meta = codec_tests::meta_bytes(&[1 << 50]);
    let mut payload = meta;
    payload.extend_from_slice(&[0, 0]); // empty codebook (two empty vectors)
    payload.extend_from_slice(&[0, 0]); // plain index, no bytes
    let err = from_bytes(&framed(&payload)).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::Corrupt {
                section: "index",
                ..
            }
        ),
        "{err}"
    );

    // A header promising more payload than any file holds.
    let mut huge = Vec::new();
    header::write(&mut huge, FileKind::Shared, FORMAT_VERSION, u64::MAX - 3);
    assert!(matches!(
        from_bytes(&huge),
        Err(FormatError::Truncated { .. })
    ));
}

mod codec_tests {
    use super::super::wire;

    /// Meta section bytes for an empty architecture and one layer per shape.
    pub fn meta_bytes(shapes: &[u64]) -> Vec<u8> {
        let mut out = vec![0];
        wire::put_len(&mut out, shapes.len());
        for &s in shapes {
            wire::put_bytes(&mut out, b"w");
            wire::put_shape(&mut out, &[s as usize]);
        }
        out
    }
}

#[test]
fn invalid_models_are_rejected_on_save() {
    let mut m = small();
    m.fates[0] = WeightFate::Shared(6);
    assert!(matches!(
        to_bytes(&m, &SaveOptions::default()),
        Err(FormatError::InvalidModel(_))
    ));
    let mut m = small();
    let j = m
        .fates
        .iter()
        .position(|f| matches!(f, WeightFate::Ellipse(_)))
        .unwrap();
    m.fates[j] = WeightFate::Ellipse(5);
    assert!(to_bytes(&m, &SaveOptions::default()).is_err());
    let mut m = small();
    m.unshared[0].data.push(1.0);
    assert!(to_bytes(&m, &SaveOptions::default()).is_err());
}

#[test]
fn save_and_load_files_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.swb");
    let m = small();
    let opts = SaveOptions::ALL[3];
    let sizes = save(&path, &m, &opts).unwrap();
    assert_eq!(sizes, encoded_sizes(&m, &opts).unwrap());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), sizes.total);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "temporary file left behind");
    let back = load(&path).unwrap();
    assert_eq!(back.fates, m.fates);

    // Full-BNN baseline file.
    let full_path = dir.path().join("full.bnn");
    let (mu, rho) = (vec![0.1f32; 40], vec![-5.0f32; 40]);
    let len = save_full_bnn(
        &full_path,
        &m.arch,
        &m.layers,
        &mu,
        &rho,
        &m.unshared,
        Some(0.8),
    )
    .unwrap();
    assert_eq!(std::fs::metadata(&full_path).unwrap().len(), len);
    let full = load_full_bnn(&full_path).unwrap();
    assert_eq!(
        (full.mu, full.rho, full.layers, full.temperature),
        (mu, rho, m.layers.clone(), Some(0.8))
    );
    // The temperature is replaced in place, atomically, and the weights stay.
    set_temperature(&full_path, Some(1.6)).unwrap();
    let again = load_full_bnn(&full_path).unwrap();
    assert_eq!(again.temperature, Some(1.6));
    assert_eq!(again.mu, vec![0.1f32; 40]);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 2, "temporary file left behind");
    let err = set_temperature(&full_path, Some(f64::NAN)).unwrap_err();
    assert!(
        err.to_string().contains("full.bnn") && err.to_string().contains("temperature"),
        "{err}"
    );
    assert_eq!(load_full_bnn(&full_path).unwrap().temperature, Some(1.6));
    let err = load(&full_path).unwrap_err();
    assert!(err.to_string().contains("full.bnn"), "{err}");
    assert!(matches!(
        err.format_error(),
        Some(FormatError::WrongKind { .. })
    ));
}

#[test]
fn failed_writes_leave_the_old_file_and_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.swb");
    let old = small();
    save(&path, &old, &SaveOptions::default()).unwrap();
    let old_bytes = std::fs::read(&path).unwrap();
    let new = model(6, 80);

    // Missing directory: nothing is created.
    let missing = dir.path().join("no-such-dir").join("model.swb");
    let err = save(&missing, &new, &SaveOptions::default()).unwrap_err();
    assert!(matches!(err, SwbError::Io { .. }), "{err}");
    assert!(err.to_string().contains("no-such-dir"), "{err}");

    // (A write that fails half-way leaving the old file whole is bnn-io's test.)

    // The rename fails (target is a non-empty directory): the temporary file is removed.
    let target_dir = dir.path().join("occupied");
    std::fs::create_dir(&target_dir).unwrap();
    std::fs::write(target_dir.join("x"), b"x").unwrap();
    assert!(save(&target_dir, &new, &SaveOptions::default()).is_err());
    let temps = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().contains(".tmp-")
        })
        .count();
    assert_eq!(temps, 0, "a temporary file was left");

    // An invalid model is rejected before the file is touched.
    let mut bad = new.clone();
    bad.codebook_rho.pop();
    let err = save(&path, &bad, &SaveOptions::default()).unwrap_err();
    assert!(matches!(
        err.format_error(),
        Some(FormatError::InvalidModel(_))
    ));
    assert_eq!(std::fs::read(&path).unwrap(), old_bytes);

    // Loading a missing file names it.
    let err = load(dir.path().join("absent.swb")).unwrap_err();
    assert!(err.to_string().contains("absent.swb"), "{err}");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn random_multi_byte_corruption_is_an_error(
            flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
        ) {
            let bytes = to_bytes(&small(), &SaveOptions::ALL[1]).unwrap();
            let mut b = bytes.clone();
            for (i, x) in flips {
                let at = i.index(b.len());
                b[at] ^= x;
            }
            prop_assume!(b != bytes);
            prop_assert!(from_bytes(&b).is_err());
        }

        #[test]
        fn corrupt_index_behind_a_valid_checksum_is_an_error_or_a_valid_model(
            flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        ) {
            // Flip bytes inside the index section and redo the checksum: the decoder must
            // either refuse the file or return a model that passes validation, never panic.
            let m = model(40, 600);
            let opts = SaveOptions::ALL[1];
            let bytes = to_bytes(&m, &opts).unwrap();
            let sizes = encoded_sizes(&m, &opts).unwrap();
            let start = HEADER_LEN as u64 + sizes.header - (HEADER_LEN + CHECKSUM_LEN) as u64
                + sizes.codebook;
            let mut b = bytes[..bytes.len() - CHECKSUM_LEN].to_vec();
            for (i, x) in flips {
                let at = start as usize + i.index(sizes.index as usize);
                b[at] ^= x;
            }
            checksum::append(&mut b);
            if let Ok(back) = from_bytes(&b) {
                prop_assert!(back.validate().is_ok());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
            b.extend_from_slice(&tail);
            let _ = from_bytes(&b);
            // Also behind a valid frame, where the checksum cannot help.
            let _ = from_bytes(&framed(&tail));
        }
    }
}

/// Content that breaks a semantic invariant: refused on save, and, written anyway behind a
/// valid checksum, refused on load with the reason.
#[test]
fn semantically_invalid_content_is_refused_on_save_and_load() {
    let ellipse = |m: &SharedModelData| {
        m.fates
            .iter()
            .filter(|f| matches!(f, WeightFate::Ellipse(_)))
            .count()
    };
    assert!(ellipse(&small()) > 0);
    type Edit = fn(&mut SharedModelData);
    let cases: [(&str, Edit, &str); 9] = [
        (
            "NaN codebook mean",
            |m| m.codebook_mu[1] = f32::NAN,
            "codebook_mu[1] is NaN",
        ),
        (
            "infinite codebook rho",
            |m| m.codebook_rho[0] = f32::INFINITY,
            "codebook_rho[0] is inf",
        ),
        (
            "NaN outlier mean",
            |m| m.outlier_mu[0] = f32::NAN,
            "outlier_mu[0] is NaN",
        ),
        (
            "NaN outlier rho",
            |m| m.outlier_rho[1] = f32::NAN,
            "outlier_rho[1] is NaN",
        ),
        (
            "NaN alpha",
            |m| m.ellipses[0].alphas[0] = f32::NAN,
            "has alpha NaN",
        ),
        (
            "alphas summing to 0.9",
            |m| {
                let e = &mut m.ellipses[0];
                e.alphas = vec![0.9 / e.alphas.len() as f32; e.alphas.len()];
            },
            "summing to 0.9",
        ),
        (
            "repeated component",
            |m| {
                let e = m
                    .ellipses
                    .iter_mut()
                    .find(|e| e.components.len() >= 2)
                    .unwrap();
                e.components[1] = e.components[0];
            },
            "twice",
        ),
        (
            "duplicated unshared tensor",
            |m| m.unshared.push(m.unshared[0].clone()),
            "stored twice",
        ),
        (
            "negative alpha",
            |m| {
                let e = m
                    .ellipses
                    .iter_mut()
                    .find(|e| e.components.len() >= 2)
                    .unwrap();
                e.alphas[0] += e.alphas[1] + 0.5;
                e.alphas[1] = -0.5;
            },
            "has alpha -0.5",
        ),
    ];
    for (what, edit, reason) in cases {
        let mut m = small();
        edit(&mut m);
        let err = to_bytes(&m, &SaveOptions::default()).unwrap_err();
        assert!(matches!(err, FormatError::InvalidModel(_)), "{what}: {err}");
        assert!(err.to_string().contains(reason), "{what}: {err}");
        let err = from_bytes(&codec::encode_shared_unchecked(&m)).unwrap_err();
        assert!(
            matches!(
                err,
                FormatError::Corrupt {
                    section: "model",
                    ..
                }
            ),
            "{what}: {err}"
        );
        assert!(err.to_string().contains(reason), "{what}: {err}");
    }
}

/// The tolerance on the alphas' sum is the sharing plan's: alphas as the ellipse stage makes
/// them (an `f64` softmax rounded to `f32`) pass.
#[test]
fn alphas_from_the_ellipse_stage_pass_the_tolerance() {
    let mut m = small();
    for (j, e) in m.ellipses.iter_mut().enumerate() {
        let mut lp = [0f64; crate::plan::MAX_BLEND];
        for (c, v) in lp.iter_mut().enumerate() {
            *v = -(((j * 31 + c * 17) % 23) as f64) * 0.37;
        }
        let n = e.components.len();
        e.alphas = crate::ellipse::alphas_from_log_pdf(&lp, n)[..n].to_vec();
    }
    from_bytes(&to_bytes(&m, &SaveOptions::default()).unwrap()).unwrap();
}

/// The decode-cost attack: K = 65534, 200,000 layers of shape `[1]` and an all-zero
/// range-coded index behind a valid checksum. The decoder used to build a 65,536-entry
/// table per layer (more than 75 s); it must refuse the file from its sizes alone.
#[test]
fn decode_cost_attack_is_refused_before_decoding() {
    use super::wire::{put_bytes, put_f32s, put_len, put_shape, put_varint};
    let (k, layers) = (65534usize, 200_000usize);
    let mut payload = Vec::new();
    put_bytes(&mut payload, b"");
    put_len(&mut payload, layers);
    for _ in 0..layers {
        put_bytes(&mut payload, b"w");
        put_shape(&mut payload, &[1]);
    }
    put_f32s(&mut payload, &vec![0.0; k]);
    put_f32s(&mut payload, &vec![-5.0; k]);
    put_varint(&mut payload, 2); // range-coded index
    put_varint(&mut payload, 0); // layer context
    put_varint(&mut payload, 256); // back-off
    put_varint(&mut payload, 32); // rebuild period
    put_bytes(&mut payload, &vec![0; layers / 8]);
    payload.extend_from_slice(&[0, 0, 0, 0, 0]); // no ellipses, f32 outliers, no causes
    payload.push(0); // no unshared tensors
    let file = framed(&payload);
    assert!(file.len() > 1_000_000, "{} bytes", file.len());
    let before = decode_work();
    let err = from_bytes(&file).unwrap_err();
    let spent = decode_work() - before;
    assert!(
        matches!(
            err,
            FormatError::Corrupt {
                section: "index",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("work units"), "{err}");
    assert_eq!(spent, 0, "work spent before refusing");
}

/// Decode work is bounded by the file: the bound holds for what the writer makes, and the
/// writer lengthens the table rebuild period when a model would exceed it.
#[test]
fn decode_work_stays_within_the_budget_of_the_file() {
    for k in [6u32, 300] {
        for opts in [SaveOptions::ALL[1], SaveOptions::ALL[3]] {
            let bytes = to_bytes(&model(k, 2000), &opts).unwrap();
            let before = decode_work();
            from_bytes(&bytes).unwrap();
            let spent = decode_work() - before;
            assert!(spent > 2000, "{spent}");
            assert!(
                spent <= adaptive::WORK_PER_BYTE * bytes.len() as u64,
                "{spent} for {} bytes",
                bytes.len()
            );
        }
    }
    // One large, very compressible layer over a large codebook: the default period would
    // cost more than the stream pays for.
    let (k, n) = (4000usize, 100_000usize);
    let mu: Vec<f32> = (0..k).map(|c| c as f32).collect();
    let sizes = [n];
    let ctx = index::IndexContext {
        codebook_mu: &mu,
        layer_sizes: &sizes,
    };
    let symbols = vec![0u32; n];
    let default =
        adaptive::encode(&symbols, &mu, &sizes, adaptive::AdaptiveParams::DEFAULT).unwrap();
    assert!(
        adaptive::max_decode_work(adaptive::AdaptiveParams::DEFAULT, k + 2, &sizes)
            > adaptive::work_budget(default.bytes.len(), k)
    );
    let index::IndexSection::Adaptive(stream) = index::encode(&symbols, &ctx, true).unwrap() else {
        panic!("expected a range-coded index")
    };
    assert!(stream.params.rebuild > adaptive::AdaptiveParams::DEFAULT.rebuild);
    let before = decode_work();
    assert_eq!(adaptive::decode(&stream, &mu, &sizes).unwrap(), symbols);
    assert!(decode_work() - before <= adaptive::work_budget(stream.bytes.len(), k));

    // Thousands of one-weight layers over 502 symbols: no period helps; the writer refuses.
    let mu = vec![0.0f32; 500];
    let sizes = vec![1usize; 4000];
    let ctx = index::IndexContext {
        codebook_mu: &mu,
        layer_sizes: &sizes,
    };
    let err = index::encode(&vec![0; 4000], &ctx, true).unwrap_err();
    assert!(err.contains("plain index"), "{err}");
}

/// `f()` in a thread, its result if it returns within 10 s: a reader that blocks (on a FIFO)
/// fails the test instead of hanging it.
fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("the reader blocked for 10 s")
}

fn mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", path.display());
}

/// What is not a regular file is named as what it is, by every reader, before it is opened:
/// a FIFO does not block and `/dev/zero` is not read until memory runs out.
#[test]
fn readers_name_what_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("model.swb");
    mkfifo(&fifo);
    let cases = [
        (
            dir.path().to_path_buf(),
            "is a directory, not a regular file",
        ),
        (fifo, "is a FIFO, not a regular file"),
        (
            std::path::PathBuf::from("/dev/zero"),
            "is a character device, not a regular file",
        ),
    ];
    for (path, needle) in cases {
        let p = path.clone();
        let errs = within_10s(move || {
            [
                load(&p).map(|_| ()).unwrap_err().to_string(),
                load_full_bnn(&p).map(|_| ()).unwrap_err().to_string(),
                qbnn::load(&p).map(|_| ()).unwrap_err().to_string(),
                set_temperature(&p, None).unwrap_err().to_string(),
            ]
        });
        for err in errs {
            assert!(
                err.contains(&path.display().to_string()) && err.contains(needle),
                "{err}"
            );
        }
    }
}

/// A file beyond its format's bound is refused naming both sizes (here with a small bound;
/// the real one is [`MAX_FILE_LEN`]), and one with another magic before the rest is read.
#[test]
fn files_beyond_the_bound_or_with_another_magic_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.swb");
    let bytes = to_bytes(&small(), &SaveOptions::default()).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let n = bytes.len() as u64;
    let read = |bound| super::io::read_magic_file(&path, bound, &MAGIC, ".swb");
    assert_eq!(read(n).unwrap(), bytes);
    let err = read(n - 1).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "holds {n} bytes, more than the {} a .swb file",
            n - 1
        )),
        "{err}"
    );
    let mut other = bytes.clone();
    other[0] ^= 0xff;
    std::fs::write(&path, &other).unwrap();
    assert!(matches!(
        read(n).unwrap_err().format_error(),
        Some(FormatError::BadMagic { found, .. }) if found.len() == MAGIC.len()
    ));
    // A file shorter than the magic is the decoder's to name.
    std::fs::write(&path, &MAGIC[..3]).unwrap();
    assert!(matches!(
        load(&path).unwrap_err().format_error(),
        Some(FormatError::Truncated { .. })
    ));
}
