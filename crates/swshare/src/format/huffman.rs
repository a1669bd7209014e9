//! Canonical Huffman coding of a symbol stream (the optional entropy-coded index).
//!
//! The code is described by one code length per alphabet symbol (0 = unused), so the table
//! costs one byte per symbol; codes are assigned canonically (by length, then symbol) and
//! written most-significant bit first. Code lengths are limited to [`MAX_CODE_LEN`] by
//! repeatedly halving the frequencies, which keeps the decoder's tables tiny at a negligible
//! cost in size for realistic streams.

use serde::{Deserialize, Serialize};

/// Longest code length the encoder produces and the decoder accepts.
pub const MAX_CODE_LEN: u8 = 24;
const MAX_LEN: usize = MAX_CODE_LEN as usize;

/// A Huffman-coded symbol stream: the code table and the packed bits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HuffmanStream {
    /// Code length of every alphabet symbol (0 = symbol does not occur).
    pub lengths: Vec<u8>,
    /// The codes of the stream, MSB first, the last byte padded with zero bits.
    pub bits: Vec<u8>,
}

/// Encodes `symbols`, each `< alphabet`; fails if a symbol is out of range.
pub fn encode(symbols: &[u32], alphabet: usize) -> Result<HuffmanStream, String> {
    let mut freqs = vec![0u64; alphabet];
    for (i, &s) in symbols.iter().enumerate() {
        *freqs
            .get_mut(s as usize)
            .ok_or_else(|| format!("symbol {i} is {s}, alphabet has {alphabet}"))? += 1;
    }
    let lengths = code_lengths(&freqs);
    let codes = canonical_codes(&lengths);
    let mut writer = BitWriter::default();
    for &s in symbols {
        writer.put(codes[s as usize], lengths[s as usize]);
    }
    Ok(HuffmanStream {
        lengths,
        bits: writer.finish(),
    })
}

/// Decodes `count` symbols; fails on an invalid table, an invalid code or too few bits.
pub fn decode(stream: &HuffmanStream, count: usize) -> Result<Vec<u32>, String> {
    // Every code has at least one bit: refuse absurd counts before allocating.
    if count > stream.bits.len().saturating_mul(8) {
        return Err(format!(
            "{count} symbols cannot fit in {} bytes",
            stream.bits.len()
        ));
    }
    let table = DecodeTable::new(&stream.lengths)?;
    let mut reader = BitReader {
        bytes: &stream.bits,
        pos: 0,
    };
    (0..count)
        .map(|i| {
            table
                .decode_one(&mut reader)
                .map_err(|e| format!("symbol {i}: {e}"))
        })
        .collect()
}

/// Huffman code lengths for `freqs`, limited to [`MAX_CODE_LEN`].
fn code_lengths(freqs: &[u64]) -> Vec<u8> {
    let mut freqs = freqs.to_vec();
    loop {
        let depths = huffman_depths(&freqs);
        if depths.iter().all(|&d| d <= MAX_LEN) {
            return depths.into_iter().map(|d| d as u8).collect();
        }
        // Flatter frequencies give a shallower tree; non-zero ones stay non-zero.
        for f in &mut freqs {
            *f = f.div_ceil(2);
        }
    }
}

/// Plain Huffman tree depths (0 for unused symbols; a lone symbol gets depth 1).
fn huffman_depths(freqs: &[u64]) -> Vec<usize> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let used: Vec<usize> = (0..freqs.len()).filter(|&s| freqs[s] > 0).collect();
    let mut depths = vec![0usize; freqs.len()];
    match used.len() {
        0 => return depths,
        1 => {
            depths[used[0]] = 1;
            return depths;
        }
        _ => {}
    }
    // Nodes 0..m are the leaves (in `used` order), later ids are internal nodes; the id breaks
    // weight ties so the tree (and the file) is deterministic.
    let m = used.len();
    let mut parent = vec![0usize; 2 * m - 1];
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = used
        .iter()
        .enumerate()
        .map(|(i, &s)| Reverse((freqs[s], i)))
        .collect();
    let mut next = m;
    while let (Some(Reverse((wa, a))), Some(Reverse((wb, b)))) = (heap.pop(), heap.pop()) {
        parent[a] = next;
        parent[b] = next;
        heap.push(Reverse((wa + wb, next)));
        next += 1;
    }
    // Parents have larger ids than their children, so one descending pass sets all depths.
    let root = 2 * m - 2;
    let mut node_depth = vec![0usize; 2 * m - 1];
    for id in (0..root).rev() {
        node_depth[id] = node_depth[parent[id]] + 1;
    }
    for (i, &s) in used.iter().enumerate() {
        depths[s] = node_depth[i];
    }
    depths
}

/// Canonical codes for the given lengths (shorter codes first, ties by symbol).
fn canonical_codes(lengths: &[u8]) -> Vec<u32> {
    let mut count = [0u32; MAX_LEN + 1];
    for &l in lengths {
        count[l as usize] += 1;
    }
    count[0] = 0;
    let mut next = [0u32; MAX_LEN + 1];
    let mut code = 0u32;
    for len in 1..=MAX_LEN {
        code = (code + count[len - 1]) << 1;
        next[len] = code;
    }
    lengths
        .iter()
        .map(|&l| {
            let l = l as usize;
            if l == 0 {
                return 0;
            }
            let c = next[l];
            next[l] += 1;
            c
        })
        .collect()
}

/// Canonical decoding tables: symbols per length, and the symbols sorted by (length, symbol).
struct DecodeTable {
    count: [u32; MAX_LEN + 1],
    sorted: Vec<u32>,
}

impl DecodeTable {
    fn new(lengths: &[u8]) -> Result<Self, String> {
        let mut count = [0u32; MAX_LEN + 1];
        for (s, &l) in lengths.iter().enumerate() {
            if l > MAX_CODE_LEN {
                return Err(format!("symbol {s} has code length {l} > {MAX_CODE_LEN}"));
            }
            count[l as usize] += 1;
        }
        // Kraft inequality: an over-subscribed table would make codes ambiguous.
        let kraft: u64 = (1..=MAX_LEN)
            .map(|l| u64::from(count[l]) << (MAX_LEN - l))
            .sum();
        if kraft > 1u64 << MAX_LEN {
            return Err("code lengths are over-subscribed (Kraft sum > 1)".into());
        }
        let mut sorted: Vec<u32> = (0..lengths.len() as u32)
            .filter(|&s| lengths[s as usize] > 0)
            .collect();
        sorted.sort_by_key(|&s| (lengths[s as usize], s));
        Ok(Self { count, sorted })
    }

    fn decode_one(&self, reader: &mut BitReader<'_>) -> Result<u32, String> {
        // Walk the lengths, comparing the code read so far with the first code of that length.
        let (mut code, mut first, mut index) = (0u64, 0u64, 0u64);
        for len in 1..=MAX_LEN {
            code |= u64::from(reader.bit().ok_or("bit stream ends early")?);
            let count = u64::from(self.count[len]);
            if code < first + count {
                return Ok(self.sorted[(index + code - first) as usize]);
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err("invalid code".into())
    }
}

#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    acc: u64,
    n: u32,
}

impl BitWriter {
    fn put(&mut self, code: u32, len: u8) {
        self.acc = (self.acc << len) | u64::from(code);
        self.n += u32::from(len);
        while self.n >= 8 {
            self.n -= 8;
            self.bytes.push((self.acc >> self.n) as u8);
        }
        self.acc &= (1u64 << self.n) - 1;
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.bytes.push((self.acc << (8 - self.n)) as u8);
        }
        self.bytes
    }
}

struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn bit(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.pos / 8)?;
        let bit = (byte >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        Some(bit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_stream() {
        let enc = encode(&[], 5).unwrap();
        assert!(enc.bits.is_empty());
        assert_eq!(enc.lengths, vec![0; 5]);
        assert_eq!(decode(&enc, 0).unwrap(), Vec::<u32>::new());
        assert!(decode(&enc, 1).is_err());
    }

    #[test]
    fn single_symbol_stream_uses_one_bit_per_symbol() {
        let syms = vec![3u32; 17];
        let enc = encode(&syms, 4).unwrap();
        assert_eq!(enc.lengths, vec![0, 0, 0, 1]);
        assert_eq!(enc.bits.len(), 3);
        assert_eq!(decode(&enc, 17).unwrap(), syms);
    }

    #[test]
    fn known_code_for_a_small_distribution() {
        // Frequencies 4, 2, 1, 1 give lengths 1, 2, 3, 3 and canonical codes 0, 10, 110, 111.
        let syms = [0, 0, 0, 0, 1, 1, 2, 3];
        let enc = encode(&syms, 4).unwrap();
        assert_eq!(enc.lengths, vec![1, 2, 3, 3]);
        // 0 0 0 0 10 10 110 111 -> 00001010 11011100 (padding zeros)
        assert_eq!(enc.bits, vec![0b0000_1010, 0b1101_1100]);
    }

    #[test]
    fn fibonacci_frequencies_are_length_limited() {
        // Fibonacci frequencies make the deepest possible Huffman tree (depth n - 1).
        let mut freqs = vec![1u64, 1];
        while freqs.len() < 40 {
            let n = freqs.len();
            freqs.push(freqs[n - 1] + freqs[n - 2]);
        }
        assert!(huffman_depths(&freqs).iter().any(|&d| d > MAX_LEN));
        let lens = code_lengths(&freqs);
        assert!(lens.iter().all(|&l| (1..=MAX_CODE_LEN).contains(&l)));
        let kraft: f64 = lens.iter().map(|&l| 0.5f64.powi(l as i32)).sum();
        assert!(kraft <= 1.0);
    }

    #[test]
    fn bad_tables_and_streams_are_errors() {
        let over = HuffmanStream {
            lengths: vec![1, 1, 1],
            bits: vec![0],
        };
        assert!(decode(&over, 1).is_err());
        let too_long = HuffmanStream {
            lengths: vec![30, 1],
            bits: vec![0],
        };
        assert!(decode(&too_long, 1).is_err());
        // Only code "0" exists; bit 1 is an invalid code.
        let incomplete = HuffmanStream {
            lengths: vec![1],
            bits: vec![0x80],
        };
        assert!(decode(&incomplete, 1).is_err());
        assert!(encode(&[7], 3).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(
            alphabet in 1usize..300,
            raw in prop::collection::vec(any::<u32>(), 0..2000),
            skew in 0u32..4,
        ) {
            // Squaring/cubing uniform draws skews the distribution towards small symbols.
            let syms: Vec<u32> = raw
                .iter()
                .map(|&r| {
                    let u = f64::from(r) / f64::from(u32::MAX);
                    ((u.powi(skew as i32 + 1) * alphabet as f64) as u32).min(alphabet as u32 - 1)
                })
                .collect();
            let enc = encode(&syms, alphabet).unwrap();
            prop_assert_eq!(decode(&enc, syms.len()).unwrap(), syms.clone());
            // Never worse than a fixed-width code of ceil(log2(alphabet)) bits (+ padding).
            let fixed_bits = (alphabet as f64).log2().ceil().max(1.0) as usize;
            prop_assert!(enc.bits.len() <= (syms.len() * fixed_bits).div_ceil(8));
        }
    }
}
