//! k-means++ (or random) seeding on a weighted sample of histogram cells.

use rayon::prelude::*;

use crate::cells::CellStat;
use crate::config::Init;
use crate::mixture::{Mix, Stat};
use crate::rng::Rng;

const SEED_CHUNK: usize = 4096;

/// Seeds up to `k` components; fewer if the sample has fewer distinct cell means.
pub(crate) fn seed(
    cells: &[CellStat],
    k: usize,
    sample: usize,
    init: Init,
    seed: u64,
    floor: f64,
) -> Mix {
    let mut rng = Rng::stream(seed, 0x5eed);
    // Weighted sample: all cells if few, else systematic probability-proportional-to-weight
    // sampling (multiplicity = weight).
    let (pts, w): (Vec<CellStat>, Vec<f64>) = if cells.len() <= sample {
        (cells.to_vec(), cells.iter().map(|c| c.w).collect())
    } else {
        let total: f64 = cells.iter().map(|c| c.w).sum();
        let step = total / sample as f64;
        let mut next = rng.uniform() * step;
        let mut cum = 0.0;
        let mut out = (Vec::new(), Vec::new());
        for c in cells {
            cum += c.w;
            let mut m = 0usize;
            while next < cum {
                m += 1;
                next += step;
            }
            if m > 0 {
                out.0.push(*c);
                out.1.push(m as f64);
            }
        }
        out
    };
    let n = pts.len();
    let mut d2 = vec![f64::INFINITY; n];
    let mut near = vec![0u32; n];
    let mut seeds: Vec<usize> = Vec::with_capacity(k);
    let score = |d: f64| match init {
        Init::KMeansPlusPlus => d,
        Init::Random => {
            if d > 0.0 {
                1.0
            } else {
                0.0
            }
        }
    };
    // First seed proportional to weight.
    let mut chunk_tot: Vec<f64> = w.chunks(SEED_CHUNK).map(|c| c.iter().sum()).collect();
    loop {
        let total: f64 = chunk_tot.iter().sum();
        if !(total > 0.0) || seeds.len() == k {
            break;
        }
        let mut u = rng.uniform() * total;
        let mut pick = None;
        for (ci, &t) in chunk_tot.iter().enumerate() {
            if u < t || ci + 1 == chunk_tot.len() {
                let base = ci * SEED_CHUNK;
                let end = (base + SEED_CHUNK).min(n);
                let mut last = None;
                for i in base..end {
                    let v = if seeds.is_empty() {
                        w[i]
                    } else {
                        w[i] * score(d2[i])
                    };
                    if v > 0.0 {
                        last = Some(i);
                        if u < v {
                            break;
                        }
                        u -= v;
                    }
                }
                pick = last;
                if pick.is_some() {
                    break;
                }
            }
            u -= t;
        }
        let Some(p) = pick else { break };
        let j = seeds.len() as u32;
        seeds.push(p);
        let (sx, sy) = (pts[p].mx, pts[p].my);
        chunk_tot = d2
            .par_chunks_mut(SEED_CHUNK)
            .zip(near.par_chunks_mut(SEED_CHUNK))
            .enumerate()
            .map(|(ci, (dc, nc))| {
                let base = ci * SEED_CHUNK;
                let mut s = 0.0;
                for (o, (d, nr)) in dc.iter_mut().zip(nc.iter_mut()).enumerate() {
                    let q = &pts[base + o];
                    let e = (q.mx - sx) * (q.mx - sx) + (q.my - sy) * (q.my - sy);
                    if e < *d {
                        *d = e;
                        *nr = j;
                    }
                    s += w[base + o] * score(*d);
                }
                s
            })
            .collect();
    }
    // Initial parameters: weighted moments of each seed's Voronoi members (including the
    // cells' own spread), regularised towards an isotropic covariance of the mean squared
    // distance to the nearest seed, so single-member seeds do not start as spikes.
    let kk = seeds.len();
    let wsum: f64 = w.iter().sum();
    let tau = (0..n).map(|i| w[i] * d2[i]).sum::<f64>() / wsum;
    let tau = if tau > floor { tau } else { floor.max(1e-6) };
    let w0 = wsum / n as f64;
    let mut st: Vec<Stat> = vec![[0.0; 6]; kk];
    for i in 0..n {
        let q = &pts[i];
        let s = &mut st[near[i] as usize];
        let wi = w[i];
        s[0] += wi;
        s[1] += wi * q.mx;
        s[2] += wi * q.my;
        s[3] += wi * (q.cxx + q.mx * q.mx);
        s[4] += wi * (q.cxy + q.mx * q.my);
        s[5] += wi * (q.cyy + q.my * q.my);
    }
    for (j, s) in st.iter_mut().enumerate() {
        let c = &pts[seeds[j]];
        // Prior pseudo-observation at the seed with covariance tau I.
        let prior = Mix::stat_of(w0, [c.mx, c.my], [tau, 0.0, tau]);
        for t in 0..6 {
            s[t] += prior[t];
        }
    }
    Mix::from_stats(&st, floor)
}
