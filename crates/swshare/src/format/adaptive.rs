//! Context-adaptive range coding of the index (format version 2).
//!
//! The index is coded symbol by symbol with [`constriction`]'s range coder. The probability of
//! each symbol comes from counts of the symbols already coded, so no table is stored and the
//! decoder, which sees the same symbols in the same order, rebuilds the same model. The counts
//! are kept at three levels, each one backing off to the next (a Dirichlet / "Jelinek-Mercer"
//! blend with strength `b` = [`AdaptiveParams::backoff`]):
//!
//! * global: `p_g(s) = (n_g(s) + 1/A) / (n_g + 1)` over the alphabet of `A = K + 2` symbols;
//! * layer: `p_l(s) = (n_l(s) + b p_g(s)) / (n_l + b)`, counts of the current layer;
//! * context: `p_c(s) = (n_c(s) + b p_l(s)) / (n_c + b)`, counts of the current layer under
//!   the context `c` of the weight (see [`ContextKind`]).
//!
//! The context uses only what the decoder knows before the weight: by default the layer
//! alone ([`AdaptiveParams::DEFAULT`]); [`ContextKind::LayerPrevMu`] also splits it by the
//! previous weight of the same layer, binned by the rank of its codebook mean (the codebook is
//! read before the index). The parameters are stored with the stream, so a writer may change
//! them without a format version.
//!
//! **Rebuilds.** Turning `p_c` into the coder's 24-bit fixed-point table costs `O(A)`, so a
//! context's table is rebuilt only when its count `n_c` is 0, a power of two below
//! [`AdaptiveParams::rebuild`], or a multiple of it; between rebuilds the table is frozen.
//! Parent counts are always current at rebuild time. Everything is computed in `f64` in a
//! fixed order, so encoder and decoder build bit-identical tables.
//!
//! **Bounded decoding.** No symbol gets a probability above [`P_MAX`] (the excess goes to the
//! other symbols in proportion), so every symbol costs at least [`MIN_BITS`] bits: a stream of
//! `w` 32-bit words holds at most [`max_symbols`]`(w)` symbols, which the decoder checks
//! before it allocates or loops. In realistic indices no context comes near `P_MAX`, so the
//! cap costs nothing measurable. A stream with words left over after the last symbol is
//! rejected.

use constriction::stream::model::DefaultContiguousCategoricalEntropyModel;
use constriction::stream::queue::{DefaultRangeDecoder, DefaultRangeEncoder};
use constriction::stream::{Decode, Encode};
use std::cell::Cell;

use serde::{Deserialize, Serialize};

/// Largest probability the model gives any symbol.
pub const P_MAX: f64 = 0.5;

/// Lower bound on the cost of one symbol in bits: `-log2(P_MAX)` less the coder's rounding
/// (its fixed-point tables add at most 2 units of `2^-24` to a probability).
pub const MIN_BITS: f64 = 0.999_99;

/// Which context splits the counts of a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContextKind {
    /// The layer only.
    Layer,
    /// The layer and the previous weight of the same layer: its codebook entry binned into
    /// `bins` groups by the rank of the entry's mean, or one of three extra contexts (the
    /// previous weight is an ellipse weight, an outlier, or there is none).
    LayerPrevMu {
        /// Number of rank bins, 1..=64.
        bins: u8,
    },
}

/// The parameters of the adaptive model, stored with the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdaptiveParams {
    /// The context of each weight.
    pub context: ContextKind,
    /// Dirichlet strength `b` of the context -> layer and layer -> global back-off, >= 1.
    pub backoff: u16,
    /// Rebuild period of a context's coding table (in symbols of that context), >= 1.
    pub rebuild: u16,
}

impl AdaptiveParams {
    /// The parameters the writer uses, chosen on trained LeNet-5 indices
    /// (`examples/index_entropy.rs`, `docs/benchmarks.md`).
    ///
    /// The layer alone is the best context measured: finer contexts (previous weight's
    /// codebook entry) lower the empirical entropy a little but cost more to learn than they
    /// save on indices of 61k weights.
    pub const DEFAULT: AdaptiveParams = AdaptiveParams {
        context: ContextKind::Layer,
        backoff: 256,
        rebuild: 32,
    };

    fn check(&self) -> Result<(), String> {
        if self.backoff == 0 || self.rebuild == 0 {
            return Err(format!(
                "backoff {} and rebuild period {} must be >= 1",
                self.backoff, self.rebuild
            ));
        }
        if let ContextKind::LayerPrevMu { bins } = self.context
            && !(1..=64).contains(&bins)
        {
            return Err(format!("{bins} context bins, allowed 1..=64"));
        }
        Ok(())
    }

    fn contexts_per_layer(&self) -> usize {
        match self.context {
            ContextKind::Layer => 1,
            ContextKind::LayerPrevMu { bins } => usize::from(bins) + 3,
        }
    }
}

/// A range-coded index: the model parameters and the coder's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdaptiveStream {
    /// Model parameters.
    pub params: AdaptiveParams,
    /// The range coder's compressed 32-bit words, little endian.
    pub bytes: Vec<u8>,
}

impl AdaptiveStream {
    /// Number of 32-bit words in the stream.
    pub fn words(&self) -> usize {
        self.bytes.len() / 4
    }
}

/// The most symbols a stream of `words` words can hold (see the module docs).
pub fn max_symbols(words: usize) -> usize {
    // The coder's final flush may be up to two words shorter than the information content.
    ((words as f64 + 2.0) * 32.0 / MIN_BITS).ceil() as usize
}

type Model = DefaultContiguousCategoricalEntropyModel;

/// Decode work allowed per byte of the index stream and of the codebook section (whose
/// `8 K` bytes pay for the tables a large codebook needs); see [`max_decode_work`].
///
/// At this rate the tables of realistic files (K up to a few thousand, rebuild period 32)
/// stay well inside the budget, while a file cannot buy more than a few microseconds of
/// work per byte.
pub const WORK_PER_BYTE: u64 = 256;

thread_local! {
    static WORK: Cell<u64> = const { Cell::new(0) };
}

/// Work units (symbols decoded plus coding-table entries built or cleared) this thread has
/// spent decoding indices so far: a deterministic measure of decode cost.
pub fn decode_work() -> u64 {
    WORK.with(Cell::get)
}

/// Adds `units` to this thread's [`decode_work`].
pub(crate) fn add_work(units: u64) {
    WORK.with(|w| w.set(w.get().saturating_add(units)));
}

/// An upper bound on the work [`decode`] spends on a stream of `params` over `alphabet`
/// symbols and layers of `layer_sizes` weights, computed before decoding.
///
/// Per file: one table of `alphabet` entries for the counts, one per context slot used.
/// Per layer of `s > 0` weights with `c` contexts (at most `min(s, contexts per layer)` of
/// them used): a context of `s_c` symbols rebuilds its table at most
/// `1 + #{powers of two < P} + floor((s_c - 1) / P)` times for the period `P`, and no more
/// than once per symbol, so the layer costs at most
/// `alphabet * min(s, c * (1 + #{powers of two < P}) + s / P) + s`. An empty layer costs nothing.
pub fn max_decode_work(params: AdaptiveParams, alphabet: usize, layer_sizes: &[usize]) -> u64 {
    let a = alphabet as u64;
    let p = u64::from(params.rebuild.max(1));
    let per_layer = params.contexts_per_layer() as u64;
    let pow2_below = u64::from(64 - (p - 1).leading_zeros());
    let (mut work, mut slots) = (a, 0u64);
    for &s in layer_sizes.iter().filter(|&&s| s > 0) {
        let s = s as u64;
        let c = per_layer.min(s);
        slots = slots.max(c);
        let rebuilds = s.min(c.saturating_mul(1 + pow2_below).saturating_add(s / p));
        work = work
            .saturating_add(rebuilds.saturating_mul(a))
            .saturating_add(s);
    }
    work.saturating_add(slots.saturating_mul(a))
}

/// The decode work a stream of `stream_bytes` bytes with a codebook of `k` entries may
/// cost: [`WORK_PER_BYTE`] per byte of the stream, of the codebook's `8 k` bytes and of the
/// 4 bytes (at least) of the index section's tag and parameters.
pub fn work_budget(stream_bytes: usize, k: usize) -> u64 {
    WORK_PER_BYTE.saturating_mul((stream_bytes as u64).saturating_add(8 * k as u64 + 4))
}

/// Counts and the frozen coding table of one context. The counts are cleared at each layer
/// through `touched`, so a layer costs what it holds, not the alphabet.
struct Context {
    counts: Vec<u64>,
    touched: Vec<usize>,
    total: u64,
    model: Option<Model>,
}

/// The adaptive model's state; encoder and decoder drive it identically.
struct State<'a> {
    params: AdaptiveParams,
    alphabet: usize,
    /// Context id (before the layer split) of every codebook entry and marker.
    bin_of: Vec<usize>,
    /// Context used when the weight is the first of its layer.
    no_prev: usize,
    layer_sizes: &'a [usize],
    // u64: a count cannot overflow on any index that fits in memory.
    global: Vec<u64>,
    global_total: u64,
    layer: Vec<u64>,
    layer_touched: Vec<usize>,
    layer_total: u64,
    contexts: Vec<Option<Context>>,
    probs: Vec<f64>,
    /// Work spent so far (see [`decode_work`]).
    work: u64,
}

impl<'a> State<'a> {
    fn new(
        params: AdaptiveParams,
        codebook_mu: &[f32],
        layer_sizes: &'a [usize],
    ) -> Result<Self, String> {
        params.check()?;
        let k = codebook_mu.len();
        let alphabet = k + 2;
        let (bin_of, no_prev) = match params.context {
            ContextKind::Layer => (vec![0; alphabet], 0),
            ContextKind::LayerPrevMu { bins } => {
                let bins = usize::from(bins);
                let mut order: Vec<usize> = (0..k).collect();
                order.sort_by(|&a, &b| codebook_mu[a].total_cmp(&codebook_mu[b]).then(a.cmp(&b)));
                let mut bin_of = vec![0; alphabet];
                for (rank, &c) in order.iter().enumerate() {
                    bin_of[c] = rank * bins / k.max(1);
                }
                bin_of[k] = bins;
                bin_of[k + 1] = bins + 1;
                (bin_of, bins + 2)
            }
        };
        let mut contexts = Vec::new();
        contexts.resize_with(params.contexts_per_layer(), || None);
        Ok(Self {
            params,
            alphabet,
            bin_of,
            no_prev,
            layer_sizes,
            global: vec![0; alphabet],
            global_total: 0,
            layer: vec![0; alphabet],
            layer_touched: Vec::new(),
            layer_total: 0,
            contexts,
            probs: vec![0.0; alphabet],
            work: alphabet as u64,
        })
    }

    /// Starts a new layer: forgets the previous layer's counts and tables.
    fn start_layer(&mut self) {
        for &s in &self.layer_touched {
            self.layer[s] = 0;
        }
        self.layer_touched.clear();
        self.layer_total = 0;
        for ctx in self.contexts.iter_mut().flatten() {
            for &s in &ctx.touched {
                ctx.counts[s] = 0;
            }
            ctx.touched.clear();
            ctx.total = 0;
            ctx.model = None;
        }
    }

    /// The coding table of context `c`, rebuilt first if its count calls for it.
    fn model(&mut self, c: usize) -> Result<&Model, String> {
        let alphabet = self.alphabet;
        if self.contexts[c].is_none() {
            self.work += alphabet as u64;
        }
        let ctx = self.contexts[c].get_or_insert_with(|| Context {
            counts: vec![0; alphabet],
            touched: Vec::new(),
            total: 0,
            model: None,
        });
        let n = ctx.total;
        let period = u64::from(self.params.rebuild);
        let due =
            ctx.model.is_none() || (n.is_power_of_two() && n < period) || n.is_multiple_of(period);
        if due {
            self.work += alphabet as u64;
            let b = f64::from(self.params.backoff);
            let (ng, nl, nc) = (self.global_total as f64, self.layer_total as f64, n as f64);
            let uniform = 1.0 / alphabet as f64;
            for s in 0..alphabet {
                let pg = (self.global[s] as f64 + uniform) / (ng + 1.0);
                let pl = (self.layer[s] as f64 + b * pg) / (nl + b);
                self.probs[s] = (ctx.counts[s] as f64 + b * pl) / (nc + b);
            }
            cap(&mut self.probs);
            ctx.model = Some(
                Model::from_floating_point_probabilities_fast(&self.probs, None)
                    .map_err(|()| format!("cannot build a coding table over {alphabet} symbols"))?,
            );
        }
        Ok(ctx.model.as_ref().expect("built above"))
    }

    fn update(&mut self, c: usize, s: usize) {
        self.work += 1;
        self.global[s] += 1;
        self.global_total += 1;
        if self.layer[s] == 0 {
            self.layer_touched.push(s);
        }
        self.layer[s] += 1;
        self.layer_total += 1;
        let ctx = self.contexts[c].as_mut().expect("model() created it");
        if ctx.counts[s] == 0 {
            ctx.touched.push(s);
        }
        ctx.counts[s] += 1;
        ctx.total += 1;
    }

    /// Visits every weight in order with its context id; `code` codes (or decodes) the
    /// weight's symbol with the given table and returns it.
    fn run(
        &mut self,
        mut code: impl FnMut(usize, &Model) -> Result<usize, String>,
    ) -> Result<(), String> {
        let mut i = 0usize;
        for &size in self.layer_sizes.iter().filter(|&&s| s > 0) {
            self.start_layer();
            let mut prev = None;
            for _ in 0..size {
                let c = prev.map_or(self.no_prev, |p: usize| self.bin_of[p]);
                let s = code(i, self.model(c)?)?;
                self.update(c, s);
                prev = Some(s);
                i += 1;
            }
        }
        Ok(())
    }
}

/// Caps the largest probability at [`P_MAX`], giving the excess to the others in proportion
/// (every probability is positive, so the others sum to more than zero).
fn cap(probs: &mut [f64]) {
    let (j, &top) = probs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .expect("alphabet has at least two symbols");
    let total: f64 = probs.iter().sum();
    if top <= P_MAX * total {
        return;
    }
    let scale = (1.0 - P_MAX) * total / (total - top);
    for p in probs.iter_mut() {
        *p *= scale;
    }
    probs[j] = P_MAX * total;
}

/// Encodes `symbols` (each `< K + 2`, see [`index`](super::index)) of weights laid out in
/// layers of `layer_sizes` weights, for a codebook with means `codebook_mu`.
pub fn encode(
    symbols: &[u32],
    codebook_mu: &[f32],
    layer_sizes: &[usize],
    params: AdaptiveParams,
) -> Result<AdaptiveStream, String> {
    if layer_sizes.iter().sum::<usize>() != symbols.len() {
        return Err(format!(
            "layers hold {} weights but there are {} symbols",
            layer_sizes.iter().sum::<usize>(),
            symbols.len()
        ));
    }
    let mut state = State::new(params, codebook_mu, layer_sizes)?;
    let alphabet = state.alphabet;
    let mut encoder = DefaultRangeEncoder::new();
    state.run(|i, model| {
        let s = symbols[i] as usize;
        if s >= alphabet {
            return Err(format!("symbol {i} is {s}, alphabet has {alphabet}"));
        }
        encoder
            .encode_symbol(s, model)
            .map_err(|e| format!("symbol {i}: {e}"))?;
        Ok(s)
    })?;
    let words = encoder
        .into_compressed()
        .map_err(|e| format!("range coder: {e:?}"))?;
    let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    Ok(AdaptiveStream { params, bytes })
}

/// Decodes the symbols of `layer_sizes` weights from `stream`; an error (never a panic) on
/// a stream that is not one [`encode`] wrote for the same codebook means and layer sizes.
pub fn decode(
    stream: &AdaptiveStream,
    codebook_mu: &[f32],
    layer_sizes: &[usize],
) -> Result<Vec<u32>, String> {
    let n = layer_sizes
        .iter()
        .try_fold(0usize, |acc, &s| acc.checked_add(s))
        .ok_or("weight count overflows")?;
    if !stream.bytes.len().is_multiple_of(4) {
        return Err(format!(
            "{} bytes is not a whole number of 32-bit words",
            stream.bytes.len()
        ));
    }
    if n > max_symbols(stream.words()) {
        return Err(format!(
            "{n} symbols cannot fit in {} words",
            stream.words()
        ));
    }
    let alphabet = codebook_mu.len() + 2;
    let work = max_decode_work(stream.params, alphabet, layer_sizes);
    let budget = work_budget(stream.bytes.len(), codebook_mu.len());
    if work > budget {
        return Err(format!(
            "decoding {} layers over {alphabet} symbols with rebuild period {} may cost {work} \
             work units, more than the {budget} that {} stream bytes and {} codebook entries allow",
            layer_sizes.iter().filter(|&&s| s > 0).count(),
            stream.params.rebuild,
            stream.bytes.len(),
            codebook_mu.len()
        ));
    }
    let mut state = State::new(stream.params, codebook_mu, layer_sizes)?;
    let words: Vec<u32> = stream
        .bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut decoder =
        DefaultRangeDecoder::from_compressed(words).map_err(|e| format!("range coder: {e:?}"))?;
    let mut out = Vec::with_capacity(n);
    let result = state.run(|i, model| {
        let s = decoder
            .decode_symbol(model)
            .map_err(|e| format!("symbol {i}: {e}"))?;
        out.push(s as u32);
        Ok(s)
    });
    add_work(state.work);
    debug_assert!(
        state.work <= work,
        "decode work {} above its bound {work}",
        state.work
    );
    result?;
    if !decoder.maybe_exhausted() {
        return Err("words left over after the last symbol".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn codebook(k: usize) -> Vec<f32> {
        // Not sorted, so the rank bins differ from the entry order.
        (0..k).map(|c| ((c * 7919) % 1000) as f32 * 1e-3).collect()
    }

    #[test]
    fn cap_keeps_the_sum_and_limits_the_top() {
        let mut p = vec![0.97, 0.01, 0.02];
        cap(&mut p);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(p[0], 0.5);
        assert!((p[2] / p[1] - 2.0).abs() < 1e-9);
        let mut q = vec![0.4, 0.3, 0.3];
        cap(&mut q);
        assert_eq!(q, vec![0.4, 0.3, 0.3]);
    }

    #[test]
    fn constant_stream_costs_about_one_bit_per_symbol_and_round_trips() {
        // The tightest case of the size bound: every symbol at the cap.
        let k = 3;
        let syms = vec![1u32; 4000];
        let layers = [1000, 3000];
        let enc = encode(&syms, &codebook(k), &layers, AdaptiveParams::DEFAULT).unwrap();
        let bits = enc.bytes.len() * 8;
        assert!((3990..=4200).contains(&bits), "{bits} bits");
        assert!(syms.len() <= max_symbols(enc.words()));
        assert_eq!(decode(&enc, &codebook(k), &layers).unwrap(), syms);
    }

    #[test]
    fn skewed_stream_beats_fixed_width() {
        // Each layer uses its own few components: the layer context should find that.
        let k = 200;
        let mut syms = Vec::new();
        for l in 0..4u32 {
            syms.extend((0..5000u32).map(|i| l * 50 + (i * i + 3 * i) % 7));
        }
        let layers = [5000; 4];
        let enc = encode(&syms, &codebook(k), &layers, AdaptiveParams::DEFAULT).unwrap();
        let bits_per = (enc.bytes.len() * 8) as f64 / syms.len() as f64;
        assert!(bits_per < 3.0, "{bits_per} bit/weight");
        assert_eq!(decode(&enc, &codebook(k), &layers).unwrap(), syms);
    }

    #[test]
    fn bad_input_is_an_error() {
        let cb = codebook(4);
        assert!(encode(&[7], &cb, &[1], AdaptiveParams::DEFAULT).is_err());
        assert!(encode(&[1, 2], &cb, &[1], AdaptiveParams::DEFAULT).is_err());
        let bad = AdaptiveParams {
            backoff: 0,
            ..AdaptiveParams::DEFAULT
        };
        assert!(encode(&[1], &cb, &[1], bad).is_err());
        let enc = encode(&[1, 2, 3], &cb, &[3], AdaptiveParams::DEFAULT).unwrap();
        // Far more symbols than the words can hold: refused before decoding.
        assert!(decode(&enc, &cb, &[usize::MAX / 2]).is_err());
        assert!(decode(&enc, &cb, &[usize::MAX, 2]).is_err());
        // Extra words after the last symbol.
        let mut long = enc.clone();
        long.bytes
            .extend([0xde, 0xad, 0xbe, 0xef, 0x12, 0x34, 0x56, 0x78]);
        assert!(decode(&long, &cb, &[3]).is_err());
        let mut ragged = enc.clone();
        ragged.bytes.push(0);
        assert!(decode(&ragged, &cb, &[3]).is_err());
        let zero_bins = AdaptiveStream {
            params: AdaptiveParams {
                context: ContextKind::LayerPrevMu { bins: 0 },
                ..AdaptiveParams::DEFAULT
            },
            bytes: enc.bytes.clone(),
        };
        assert!(decode(&zero_bins, &cb, &[3]).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(
            k in 1usize..300,
            raw in prop::collection::vec(any::<u32>(), 0..1500),
            split in prop::collection::vec(0usize..1500, 0..4),
            skew in 0i32..4,
            bins in 1u8..12,
            backoff in 1u16..64,
            rebuild in 1u16..80,
            layer_only in any::<bool>(),
        ) {
            let alphabet = k + 2;
            let syms: Vec<u32> = raw
                .iter()
                .map(|&r| {
                    let u = f64::from(r) / f64::from(u32::MAX);
                    ((u.powi(skew + 1) * alphabet as f64) as u32).min(alphabet as u32 - 1)
                })
                .collect();
            let mut cuts: Vec<usize> = split.iter().map(|&c| c.min(syms.len())).collect();
            cuts.push(0);
            cuts.push(syms.len());
            cuts.sort_unstable();
            let layers: Vec<usize> = cuts.windows(2).map(|w| w[1] - w[0]).collect();
            let params = AdaptiveParams {
                context: if layer_only { ContextKind::Layer } else { ContextKind::LayerPrevMu { bins } },
                backoff,
                rebuild,
            };
            let cb = codebook(k);
            let enc = encode(&syms, &cb, &layers, params).unwrap();
            prop_assert!(syms.len() <= max_symbols(enc.words()));
            let bound = max_decode_work(params, k + 2, &layers);
            let before = decode_work();
            let back = decode(&enc, &cb, &layers);
            let spent = decode_work() - before;
            if bound > work_budget(enc.bytes.len(), k) {
                // Refused from the sizes alone, before any work.
                prop_assert!(back.unwrap_err().contains("work units"));
                prop_assert_eq!(spent, 0);
            } else {
                prop_assert_eq!(back.unwrap(), syms);
                prop_assert!(spent <= bound, "{} > {}", spent, bound);
            }
        }

        #[test]
        fn corrupt_words_are_an_error_or_other_symbols_never_a_panic(
            raw in prop::collection::vec(0u32..40, 1..600),
            flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            cut in 0usize..9,
        ) {
            let cb = codebook(38);
            let layers = [raw.len()];
            let mut enc = encode(&raw, &cb, &layers, AdaptiveParams::DEFAULT).unwrap();
            for (at, x) in flips {
                let n = enc.bytes.len();
                if n > 0 {
                    enc.bytes[at % n] ^= x;
                }
            }
            let keep = enc.bytes.len().saturating_sub(cut);
            enc.bytes.truncate(keep);
            if let Ok(back) = decode(&enc, &cb, &layers) {
                prop_assert_eq!(back.len(), raw.len());
                prop_assert!(back.iter().all(|&s| (s as usize) < cb.len() + 2));
            }
        }
    }
}
