//! `.swb` files with a valid checksum but absurd contents: sizes beyond
//! any bound, an architecture far larger than the file's tensors, missing or extra tensors.
//! Each is refused with an error before the model is allocated; peak heap use is measured
//! with a counting allocator (this binary's only test, so nothing else allocates meanwhile).
#![cfg(feature = "burn")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bnn_layers::test_device;
use bnn_models::{Arch, Kind, ModelConfig};
use burn::prelude::*;
use swshare::burn_edges::{from_swb, uniform_swb};
use swshare::format::{SaveOptions, SharedModelData, from_bytes, to_bytes};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Through the bytes of a file (valid checksum), then the model; returns the error text and
/// the peak heap growth.
fn load(data: &SharedModelData) -> (Result<(), String>, usize) {
    let bytes = to_bytes(data, &SaveOptions::default()).unwrap();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let result = from_bytes(&bytes).map_err(|e| e.to_string()).and_then(|d| {
        from_swb::<ModelConfig>(&d, &test_device())
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    (result, PEAK.load(Ordering::Relaxed).saturating_sub(before))
}

fn with_arch(data: &SharedModelData, f: impl FnOnce(&mut serde_json::Value)) -> SharedModelData {
    let mut arch: serde_json::Value = serde_json::from_str(&data.arch).unwrap();
    f(&mut arch);
    SharedModelData {
        arch: arch.to_string(),
        ..data.clone()
    }
}

#[test]
fn absurd_files_are_refused_before_allocating() {
    let device = test_device();
    let config =
        ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 10, 1, 8).with_mlp_hidden(vec![16]);
    let good = uniform_swb(&config, &device).unwrap();
    let (ok, _) = load(&good);
    ok.unwrap();
    let (model, _) = from_swb::<ModelConfig>(&good, &device).unwrap();
    assert_eq!(
        model.forward(Tensor::zeros([2, 1, 8, 8], &device)).dims(),
        [2, 10]
    );

    let mut cases: Vec<(&str, SharedModelData, &str)> = vec![
        (
            "1e9 classes (was: memory allocation of 336 GB failed)",
            with_arch(&good, |a| a["classes"] = 1_000_000_000.into()),
            "classes",
        ),
        (
            "image size 2^32 (was: a panic in shape arithmetic)",
            with_arch(&good, |a| a["image_size"] = (1u64 << 32).into()),
            "image_size",
        ),
        (
            "3 x 20000 MLP (was: 3.2 GB before the error)",
            with_arch(&good, |a| {
                a["in_channels"] = 3.into();
                a["image_size"] = 32.into();
                a["mlp_hidden"] = serde_json::json!([20000, 20000, 20000]);
            }),
            "do not match the architecture",
        ),
        (
            "a Bayesian kind",
            with_arch(&good, |a| a["kind"] = "bayesian".into()),
            "codebook",
        ),
        (
            "another codebook length",
            with_arch(&good, |a| a["codebook_len"] = 7.into()),
            "codebook",
        ),
    ];
    let mut missing = good.clone();
    missing.unshared.retain(|t| !t.path.ends_with("bias_mu"));
    cases.push((
        "missing biases (were silently re-initialised)",
        missing,
        "lacks",
    ));
    let mut extra = good.clone();
    extra.unshared.push(swshare::format::NamedTensor {
        path: "body.nowhere".into(),
        shape: vec![1],
        data: vec![0.0],
    });
    cases.push(("an unknown tensor", extra, "match no parameter"));
    let mut reshaped = good.clone();
    let t = &mut reshaped.unshared[0];
    t.shape = vec![t.data.len(), 1];
    cases.push(("a tensor of another shape", reshaped, "shape"));

    for (what, data, needle) in cases {
        let (result, peak) = load(&data);
        let err = result.expect_err(what);
        assert!(err.contains(needle), "{what}: {err}");
        assert!(peak < 8 << 20, "{what}: peak heap {peak} bytes");
    }
}
