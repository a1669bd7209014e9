//! What the `.swb` index costs under models that condition on what the decoder knows.
//!
//! For each `.swb` file given, prints one JSON object with the index's bits per weight:
//! * `plug_in`: empirical conditional entropies `H(s | context)`. They are optimistic lower
//!   bounds: they ignore the cost of describing each context's distribution, which for big
//!   contexts (many layers x many previous symbols, K of them) is most of the cost;
//! * `stored`: the real stored index under the plain layout, the version 1 Huffman code
//!   (table included) and the version 2 context-adaptive range coder with its default
//!   parameters and a few variants (`swshare::format::adaptive`);
//! * the file sizes against the full-BNN file of the same model (every weight's `mu` and
//!   `rho` as `f32`, the file `save_full_bnn` writes).
//!
//! Contexts use only what the decoder has before the weight: the layer, the position inside
//! the `kh x kw` kernel, and the previous weight of the same layer (its codebook entry binned
//! by the rank of its mean, the codebook being read before the index).
//!
//! ```text
//! cargo run -p swshare --no-default-features --example index_entropy -- FILE.swb...
//! ```

use std::collections::HashMap;

use swshare::WeightFate;
use swshare::format::adaptive::{self, AdaptiveParams, ContextKind};
use swshare::format::{self, SaveOptions, SharedModelData, huffman};

/// The symbols of the index (`K` = ellipse, `K + 1` = outlier).
fn symbols(m: &SharedModelData) -> Vec<u32> {
    let k = m.codebook_mu.len() as u32;
    m.fates
        .iter()
        .map(|f| match *f {
            WeightFate::Shared(c) => c,
            WeightFate::Ellipse(_) => k,
            WeightFate::Outlier(_) => k + 1,
        })
        .collect()
}

/// Rank bin (0..bins) of every codebook entry by its mean; markers get `bins`, `bins + 1`.
fn mu_bins(mu: &[f32], bins: usize) -> Vec<usize> {
    let k = mu.len();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| mu[a].total_cmp(&mu[b]).then(a.cmp(&b)));
    let mut out = vec![0; k + 2];
    for (rank, &c) in order.iter().enumerate() {
        out[c] = rank * bins / k.max(1);
    }
    out[k] = bins;
    out[k + 1] = bins + 1;
    out
}

/// Empirical `H(s | ctx)` in bits per weight.
fn plug_in_bits(syms: &[u32], ctx: &[(usize, usize)]) -> f64 {
    let mut counts: HashMap<((usize, usize), u32), u64> = HashMap::new();
    let mut totals: HashMap<(usize, usize), u64> = HashMap::new();
    for (&s, &c) in syms.iter().zip(ctx) {
        *counts.entry((c, s)).or_default() += 1;
        *totals.entry(c).or_default() += 1;
    }
    let bits: f64 = counts
        .iter()
        .map(|(&(c, _), &n)| -(n as f64) * (n as f64 / totals[&c] as f64).log2())
        .sum();
    bits / syms.len() as f64
}

fn study(path: &str) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let m = format::load(path)?;
    let syms = symbols(&m);
    let (n, k) = (syms.len(), m.codebook_mu.len());
    let sizes: Vec<usize> = m.layers.iter().map(|l| l.shape.iter().product()).collect();

    // Per weight: layer, kernel position, previous symbol of the same layer.
    let (mut layer, mut kpos, mut prev) = (vec![], vec![], vec![]);
    for (l, shape) in m.layers.iter().enumerate() {
        let ksize = if shape.shape.len() == 4 {
            shape.shape[2] * shape.shape[3]
        } else {
            1
        };
        let start = layer.len();
        for i in 0..sizes[l] {
            layer.push(l);
            kpos.push(i % ksize);
            prev.push((i > 0).then(|| syms[start + i - 1] as usize));
        }
    }
    let bins8 = mu_bins(&m.codebook_mu, 8);
    let prev_ctx = |table: &[usize], none: usize| -> Vec<usize> {
        prev.iter().map(|p| p.map_or(none, |p| table[p])).collect()
    };
    let pair = |a: &[usize], b: &[usize]| -> Vec<(usize, usize)> {
        a.iter().zip(b).map(|(&x, &y)| (x, y)).collect()
    };
    let zeros = vec![0usize; n];
    let prev_sym: Vec<usize> = prev.iter().map(|p| p.unwrap_or(k + 2)).collect();

    let mut plug = serde_json::Map::new();
    for (name, ctx) in [
        ("none", pair(&zeros, &zeros)),
        ("layer", pair(&layer, &zeros)),
        ("kernel_pos", pair(&kpos, &zeros)),
        ("layer+kernel_pos", pair(&layer, &kpos)),
        ("prev_symbol", pair(&prev_sym, &zeros)),
        ("layer+prev_mu8", pair(&layer, &prev_ctx(&bins8, 10))),
        ("layer+prev_symbol", pair(&layer, &prev_sym)),
    ] {
        plug.insert(name.into(), plug_in_bits(&syms, &ctx).into());
    }

    let bpw = |bytes: usize| bytes as f64 * 8.0 / n as f64;
    let mut stored = serde_json::Map::new();
    let plain = format::encoded_sizes(&m, &SaveOptions::default())?;
    stored.insert("plain".into(), bpw(plain.index as usize).into());
    let huff = huffman::encode(&syms, k + 2)?;
    stored.insert(
        "huffman_v1".into(),
        bpw(huff.lengths.len() + huff.bits.len()).into(),
    );
    let mut variants = vec![("adaptive_default".to_string(), AdaptiveParams::DEFAULT)];
    for backoff in [4, 16, 64, 128, 256] {
        variants.push((
            format!("adaptive_layer_b{backoff}"),
            AdaptiveParams {
                context: ContextKind::Layer,
                backoff,
                ..AdaptiveParams::DEFAULT
            },
        ));
    }
    for bins in [2u8, 4, 8, 16] {
        for backoff in [8, 16, 32] {
            variants.push((
                format!("adaptive_prev_mu{bins}_b{backoff}"),
                AdaptiveParams {
                    context: ContextKind::LayerPrevMu { bins },
                    backoff,
                    ..AdaptiveParams::DEFAULT
                },
            ));
        }
    }
    for rebuild in [1, 8, 128] {
        variants.push((
            format!("adaptive_default_rebuild{rebuild}"),
            AdaptiveParams {
                rebuild,
                ..AdaptiveParams::DEFAULT
            },
        ));
    }
    for (name, params) in variants {
        let stream = adaptive::encode(&syms, &m.codebook_mu, &sizes, params)?;
        assert_eq!(adaptive::decode(&stream, &m.codebook_mu, &sizes)?, syms);
        stored.insert(name, bpw(stream.bytes.len()).into());
    }

    // File sizes: as loaded (version 1, Huffman index), and rewritten by this version.
    let entropy = SaveOptions {
        entropy_index: true,
        int8_outliers: false,
    };
    let both = SaveOptions {
        entropy_index: true,
        int8_outliers: true,
    };
    let v2 = format::encoded_sizes(&m, &entropy)?;
    // The version 1 file loaded above survives a round trip through the current writer unchanged.
    assert_eq!(format::from_bytes(&format::to_bytes(&m, &entropy)?)?, m);
    let v2_int8 = format::encoded_sizes(&m, &both)?;
    let old_total = std::fs::metadata(path)?.len();
    let full = format::full_bnn_to_bytes(
        &m.arch,
        &m.layers,
        &vec![0.0; n],
        &vec![0.0; n],
        &m.unshared,
        None,
    )?
    .len() as f64;
    Ok(serde_json::json!({
        "file": path,
        "weights": n,
        "k": k,
        "layers": sizes,
        "plug_in_bits_per_weight": plug,
        "stored_bits_per_weight": stored,
        "full_bnn_bytes": full,
        "file_bytes": {
            "v1_huffman": old_total,
            "v2_adaptive": v2.total,
            "v2_adaptive_int8_outliers": v2_int8.total,
        },
        "file_vs_full_bnn": {
            "v1_huffman": old_total as f64 / full,
            "v2_adaptive": v2.total as f64 / full,
            "v2_adaptive_int8_outliers": v2_int8.total as f64 / full,
        },
        "v2_sizes": v2,
        "v2_int8_sizes": v2_int8,
    }))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for path in std::env::args().skip(1) {
        println!("{}", serde_json::to_string(&study(&path)?)?);
    }
    Ok(())
}
