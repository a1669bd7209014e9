//! The index: one symbol per shareable weight, stored plain (fixed width), range-coded with a
//! context-adaptive model ([`adaptive`], written since format version 2) or
//! Huffman-coded (written by version 1, still read).
//!
//! Symbol `k < K` means `Shared(k)`; two reserved symbols mark the other fates:
//! [`ellipse_marker`]` = K` for `Ellipse` and [`outlier_marker`]` = K + 1` for `Outlier`. The
//! ellipse number and the outlier cause are not in the index: ellipses are numbered in weight
//! order, and the causes live in the outlier section.
//!
//! **Width rule.** With the markers the alphabet has `K + 2` symbols, so the plain index uses
//! one byte per weight when `K + 2 <= 256` (K <= 254) and two bytes (little endian) when
//! `K + 2 <= 65536` (K <= 65534); larger codebooks are rejected.

use serde::{Deserialize, Serialize};

use super::adaptive::{self, AdaptiveParams, AdaptiveStream, max_decode_work, work_budget};
use super::huffman::{self, HuffmanStream};
use crate::fate::{OutlierCause, WeightFate};

/// Bytes per weight of the plain (not entropy-coded) index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexWidth {
    /// One byte per weight (`K + 2 <= 256`).
    U8,
    /// Two bytes per weight (`K + 2 <= 65536`).
    U16,
}

impl IndexWidth {
    /// The width for a codebook of `k` entries, or an error when `K + 2 > 65536`.
    pub fn for_codebook(k: usize) -> Result<Self, String> {
        match k + 2 {
            0..=256 => Ok(IndexWidth::U8),
            257..=65536 => Ok(IndexWidth::U16),
            _ => Err(format!(
                "codebook has {k} entries; the index supports at most 65534"
            )),
        }
    }

    /// Bytes per stored symbol.
    pub fn bytes(self) -> usize {
        match self {
            IndexWidth::U8 => 1,
            IndexWidth::U16 => 2,
        }
    }
}

/// The index symbol reserved for `Ellipse` fates in a codebook of `k` entries.
pub fn ellipse_marker(k: usize) -> u32 {
    k as u32
}

/// The index symbol reserved for `Outlier` fates in a codebook of `k` entries.
pub fn outlier_marker(k: usize) -> u32 {
    k as u32 + 1
}

/// The stored index section. New variants go at the end: the variant number is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IndexSection {
    /// Fixed width ([`IndexWidth::for_codebook`]), little endian.
    Plain(Vec<u8>),
    /// Canonical Huffman over the alphabet `0..K + 2` (format version 1).
    Huffman(HuffmanStream),
    /// Context-adaptive range coding (format version 2).
    Adaptive(AdaptiveStream),
}

/// What the decoder knows before the index: the codebook means and the layer sizes.
pub(crate) struct IndexContext<'a> {
    /// Codebook means (`K` entries).
    pub codebook_mu: &'a [f32],
    /// Number of weights of each layer, in order.
    pub layer_sizes: &'a [usize],
}

impl IndexContext<'_> {
    fn k(&self) -> usize {
        self.codebook_mu.len()
    }
}

/// Maps fates to index symbols (the caller has validated `Shared(c)` has `c < k`).
pub(crate) fn to_symbols(fates: &[WeightFate], k: usize) -> Vec<u32> {
    fates
        .iter()
        .map(|f| match *f {
            WeightFate::Shared(c) => c,
            WeightFate::Ellipse(_) => ellipse_marker(k),
            WeightFate::Outlier(_) => outlier_marker(k),
        })
        .collect()
}

/// Rebuilds fates from index symbols, numbering ellipses in order and taking the outlier
/// causes in order from `causes`.
pub(crate) fn from_symbols(
    symbols: &[u32],
    k: usize,
    causes: &[OutlierCause],
) -> Result<Vec<WeightFate>, String> {
    let (mut n_ellipse, mut causes_iter) = (0u32, causes.iter());
    symbols
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            Ok(if (s as usize) < k {
                WeightFate::Shared(s)
            } else if s == ellipse_marker(k) {
                n_ellipse += 1;
                WeightFate::Ellipse(n_ellipse - 1)
            } else if s == outlier_marker(k) {
                let cause = causes_iter
                    .next()
                    .ok_or_else(|| format!("weight {i} is an outlier without a stored cause"))?;
                WeightFate::Outlier(*cause)
            } else {
                return Err(format!("weight {i} has symbol {s}, alphabet has {}", k + 2));
            })
        })
        .collect()
}

/// Encodes the symbols; `entropy` selects the adaptive range coder over the plain layout.
pub(crate) fn encode(
    symbols: &[u32],
    ctx: &IndexContext<'_>,
    entropy: bool,
) -> Result<IndexSection, String> {
    let k = ctx.k();
    if entropy {
        return encode_adaptive(symbols, ctx).map(IndexSection::Adaptive);
    }
    Ok(IndexSection::Plain(match IndexWidth::for_codebook(k)? {
        IndexWidth::U8 => symbols.iter().map(|&s| s as u8).collect(),
        IndexWidth::U16 => symbols
            .iter()
            .flat_map(|&s| (s as u16).to_le_bytes())
            .collect(),
    }))
}

/// Range-codes the symbols with [`AdaptiveParams::DEFAULT`], doubling the rebuild period
/// until the stream's decode work fits its budget ([`adaptive::work_budget`]), so the reader
/// never refuses a file this writer made. Realistic models fit at the default period.
fn encode_adaptive(symbols: &[u32], ctx: &IndexContext<'_>) -> Result<AdaptiveStream, String> {
    let k = ctx.k();
    let mut params = AdaptiveParams::DEFAULT;
    loop {
        let stream = adaptive::encode(symbols, ctx.codebook_mu, ctx.layer_sizes, params)?;
        let work = max_decode_work(params, k + 2, ctx.layer_sizes);
        let budget = work_budget(stream.bytes.len(), k);
        if work <= budget {
            return Ok(stream);
        }
        params.rebuild = params.rebuild.checked_mul(2).ok_or_else(|| {
            format!(
                "a range-coded index of {} layers over {} symbols would cost {work} work \
                 units to decode, more than the {budget} its size allows; save with the \
                 plain index",
                ctx.layer_sizes.len(),
                k + 2
            )
        })?;
    }
}

/// Decodes the symbols of the `n` weights of `ctx.layer_sizes`, from a file of format
/// `version`.
pub(crate) fn decode(
    section: &IndexSection,
    ctx: &IndexContext<'_>,
    n: usize,
    version: u16,
) -> Result<Vec<u32>, String> {
    let k = ctx.k();
    match section {
        IndexSection::Adaptive(_) if version < 2 => Err(format!(
            "range-coded index in a format version {version} file (it needs version 2)"
        )),
        IndexSection::Adaptive(stream) => {
            adaptive::decode(stream, ctx.codebook_mu, ctx.layer_sizes)
        }
        IndexSection::Huffman(stream) => {
            if stream.lengths.len() != k + 2 {
                return Err(format!(
                    "Huffman table has {} entries, expected K + 2 = {}",
                    stream.lengths.len(),
                    k + 2
                ));
            }
            let out = huffman::decode(stream, n)?;
            adaptive::add_work((k + 2 + n) as u64);
            Ok(out)
        }
        IndexSection::Plain(bytes) => {
            let width = IndexWidth::for_codebook(k)?;
            if Some(bytes.len()) != n.checked_mul(width.bytes()) {
                return Err(format!(
                    "{} bytes for {n} weights of width {}",
                    bytes.len(),
                    width.bytes()
                ));
            }
            adaptive::add_work(n as u64);
            Ok(match width {
                IndexWidth::U8 => bytes.iter().map(|&b| u32::from(b)).collect(),
                IndexWidth::U16 => bytes
                    .chunks_exact(2)
                    .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
                    .collect(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::FORMAT_VERSION;
    use super::*;

    #[test]
    fn width_rule_boundaries() {
        assert_eq!(IndexWidth::for_codebook(0), Ok(IndexWidth::U8));
        assert_eq!(IndexWidth::for_codebook(254), Ok(IndexWidth::U8));
        assert_eq!(IndexWidth::for_codebook(255), Ok(IndexWidth::U16));
        assert_eq!(IndexWidth::for_codebook(65534), Ok(IndexWidth::U16));
        assert!(IndexWidth::for_codebook(65535).is_err());
    }

    #[test]
    fn plain_index_uses_the_width_and_round_trips() {
        let fates = [
            WeightFate::Shared(3),
            WeightFate::Outlier(OutlierCause::Gradient),
            WeightFate::Ellipse(0),
            WeightFate::Ellipse(1),
        ];
        for (k, width) in [(254usize, 1usize), (255, 2), (2000, 2)] {
            let syms = to_symbols(&fates, k);
            assert_eq!(syms, vec![3, k as u32 + 1, k as u32, k as u32]);
            let mu = vec![0.0; k];
            let sizes = [fates.len()];
            let ctx = IndexContext {
                codebook_mu: &mu,
                layer_sizes: &sizes,
            };
            let sec = encode(&syms, &ctx, false).unwrap();
            let IndexSection::Plain(bytes) = &sec else {
                panic!("expected a plain index")
            };
            assert_eq!(bytes.len(), fates.len() * width);
            let back = decode(&sec, &ctx, fates.len(), FORMAT_VERSION).unwrap();
            assert_eq!(
                from_symbols(&back, k, &[OutlierCause::Gradient]).unwrap(),
                fates
            );
        }
    }

    #[test]
    fn bad_symbols_and_lengths_are_errors() {
        assert!(from_symbols(&[5], 3, &[]).is_err());
        assert!(from_symbols(&[4], 3, &[]).is_err()); // outlier without a cause
        let mu = [0.0; 3];
        let ctx = IndexContext {
            codebook_mu: &mu,
            layer_sizes: &[4],
        };
        let plain = IndexSection::Plain(vec![0; 3]);
        assert!(decode(&plain, &ctx, 4, FORMAT_VERSION).is_err());
        assert!(decode(&plain, &ctx, usize::MAX, FORMAT_VERSION).is_err());
        // A version 1 file cannot hold a range-coded index.
        let Ok(IndexSection::Adaptive(stream)) = encode(&[0, 1, 2, 0], &ctx, true) else {
            panic!("expected a range-coded index")
        };
        let sec = IndexSection::Adaptive(stream);
        assert_eq!(decode(&sec, &ctx, 4, 2).unwrap(), vec![0, 1, 2, 0]);
        assert!(decode(&sec, &ctx, 4, 1).unwrap_err().contains("version 1"));
    }
}
