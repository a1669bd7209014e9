//! Candidate components packed in blocks of four (structure of arrays per block) so the hot
//! loops compile to 4-wide SIMD; the tail block is padded with components of density 0.

use crate::math::Comp;

/// Four components.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct Lane {
    pub mx: [f64; 4],
    pub my: [f64; 4],
    pub pa: [f64; 4],
    pub pb2: [f64; 4],
    pub pc: [f64; 4],
    pub logc: [f64; 4],
}

/// Padding lane entry: `q = -inf` everywhere.
const PAD: Lane = Lane {
    mx: [0.0; 4],
    my: [0.0; 4],
    pa: [0.0; 4],
    pb2: [0.0; 4],
    pc: [0.0; 4],
    logc: [f64::NEG_INFINITY; 4],
};

/// A packed candidate list plus a per-candidate scratch row.
#[derive(Default)]
pub(crate) struct Packed {
    pub lanes: Vec<Lane>,
    pub q: Vec<[f64; 4]>,
    /// Number of real candidates (`<= 4 * lanes.len()`).
    pub len: usize,
}

impl Packed {
    pub(crate) fn load(&mut self, cands: &[u32], comps: &[Comp]) {
        let nl = cands.len().div_ceil(4);
        self.len = cands.len();
        self.lanes.clear();
        self.lanes.resize(nl, PAD);
        self.q.clear();
        self.q.resize(nl, [0.0; 4]);
        for (j, &k) in cands.iter().enumerate() {
            let c = &comps[k as usize];
            let (l, t) = (&mut self.lanes[j / 4], j % 4);
            l.mx[t] = c.mx;
            l.my[t] = c.my;
            l.pa[t] = c.pa;
            l.pb2[t] = 2.0 * c.pb;
            l.pc[t] = c.pc;
            l.logc[t] = c.logc;
        }
    }

    /// The real entries of the scratch row.
    pub(crate) fn q(&self) -> &[f64] {
        &self.q.as_flattened()[..self.len]
    }
}
