//! The seeded RNG and the mutator: one to four byte-level mutations of a valid input.

/// xorshift64*: small, seedable, fast.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    pub(crate) fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

const INTERESTING: [u64; 14] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    i64::MAX as u64,
    u64::MAX,
];

/// Applies one to four mutations to `input`; `pool` gives splice material.
pub(crate) fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[Vec<u8>]) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(10) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = [0u8, 1, 0x7f, 0x80, 0xff, 0xfb, 0xfc, 0xfd][rng.below(8)];
            }
            2 => input.truncate(rng.below(len + 1)),
            3 => {
                // Splice: a chunk of another seed (or this input) over a random position.
                let src = &pool[rng.below(pool.len())];
                if !src.is_empty() {
                    let from = rng.below(src.len());
                    let n = 1 + rng.below((src.len() - from).min(256));
                    let at = rng.below(len + 1);
                    let chunk = src[from..from + n].to_vec();
                    if rng.chance(2) {
                        input.splice(at..at, chunk);
                    } else {
                        let end = (at + n).min(len);
                        input.splice(at..end, chunk);
                    }
                }
            }
            4 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(32);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            5 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(64));
                input.drain(at..at + n);
            }
            6 if len > 0 => {
                // A length field blown up: 2, 4 or 8 bytes, either byte order.
                let value = INTERESTING[rng.below(INTERESTING.len())]
                    .wrapping_add(rng.below(3) as u64)
                    .wrapping_sub(1);
                let width = [2usize, 4, 8][rng.below(3)];
                let bytes = if rng.chance(2) {
                    value.to_le_bytes()[..width].to_vec()
                } else {
                    value.to_be_bytes()[8 - width..].to_vec()
                };
                let at = rng.below(len);
                let end = (at + width).min(len);
                input.splice(at..end, bytes);
            }
            7 if len > 0 => {
                // The .swb varint's longest form: 253 + u64 (251 + u16 and 252 + u32 are the others).
                let value = INTERESTING[rng.below(INTERESTING.len())];
                let mut bytes = vec![253u8];
                bytes.extend_from_slice(&value.to_le_bytes());
                let at = rng.below(len);
                let end = (at + 1).min(len);
                input.splice(at..end, bytes);
            }
            8 if len > 0 => {
                // Repeat a range (makes lengths and contents disagree).
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(128));
                let chunk = input[at..at + n].to_vec();
                input.splice(at..at, chunk);
            }
            9 => json_number(rng, input),
            _ => {}
        }
    }
}

/// Replaces one number of JSON text by an extreme one (a no-op on other bytes).
fn json_number(rng: &mut Rng, input: &mut Vec<u8>) {
    let starts: Vec<usize> = (0..input.len())
        .filter(|&i| input[i].is_ascii_digit() && (i == 0 || !input[i - 1].is_ascii_digit()))
        .collect();
    if starts.is_empty() {
        return;
    }
    let at = starts[rng.below(starts.len())];
    let end = (at..input.len())
        .find(|&i| !(input[i].is_ascii_digit() || matches!(input[i], b'.' | b'e' | b'-')))
        .unwrap_or(input.len());
    let replacement = [
        "0",
        "-1",
        "4294967296",
        "18446744073709551615",
        "1e308",
        "1e999",
        "-0",
        "65535",
        "1000000000",
        "0.5",
    ][rng.below(10)];
    input.splice(at..end, replacement.bytes());
}
