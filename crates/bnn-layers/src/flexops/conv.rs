//! f32 2-D convolution on host slices: im2col + `gemm`, NCHW tensors, `[c_out, c_in, kh, kw]`
//! weights, one group.
//!
//! Every image is handled by one task from its im2col to its output, so an output element is
//! computed the same way whatever the number of threads. The weight gradient sums over images in
//! a fixed number of chunks (a function of the shapes only), and the chunk sums are added in
//! chunk order: the same inputs give the same bits on any thread count.
//!
//! Column buffers are per-thread scratch that keeps its capacity between calls: fresh zeroed
//! pages for every image were 13 % of a ResNet-20 step with burn-flex's convolution.

use std::cell::RefCell;
use std::mem::MaybeUninit;

use gemm::Parallelism;
use rayon::prelude::*;

/// Most partial weight-gradient sums (chunks of images) in flight.
const MAX_WEIGHT_CHUNKS: usize = 16;
/// Memory the partial weight-gradient sums may take, in `f32`s (64 MiB).
const MAX_PARTIAL_FLOATS: usize = 16 << 20;

/// The shapes and geometry of one convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvShape {
    /// Images.
    pub batch: usize,
    /// Input channels.
    pub c_in: usize,
    /// Input height and width.
    pub input: [usize; 2],
    /// Output channels.
    pub c_out: usize,
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Stride.
    pub stride: [usize; 2],
    /// Zero padding before each spatial dimension (top, left).
    pub pad_begin: [usize; 2],
    /// Zero padding after each spatial dimension (bottom, right).
    pub pad_end: [usize; 2],
    /// Dilation.
    pub dilation: [usize; 2],
}

impl ConvShape {
    /// Output height and width, `None` when the (dilated) kernel does not fit the padded input
    /// or a stride or dilation is 0.
    pub fn output(&self) -> Option<[usize; 2]> {
        let mut out = [0; 2];
        for (d, o) in out.iter_mut().enumerate() {
            if self.stride[d] == 0 || self.dilation[d] == 0 || self.kernel[d] == 0 {
                return None;
            }
            let padded = self.input[d] + self.pad_begin[d] + self.pad_end[d];
            let span = self.dilation[d] * (self.kernel[d] - 1) + 1;
            if padded < span {
                return None;
            }
            *o = (padded - span) / self.stride[d] + 1;
        }
        Some(out)
    }

    fn out_hw(&self) -> [usize; 2] {
        self.output()
            .expect("convolution shape checked by the caller")
    }

    /// Rows of a column matrix: `c_in * kh * kw`.
    fn rows(&self) -> usize {
        self.c_in * self.kernel[0] * self.kernel[1]
    }

    /// Output pixels per image.
    fn pixels(&self) -> usize {
        let [oh, ow] = self.out_hw();
        oh * ow
    }

    fn input_len(&self) -> usize {
        self.c_in * self.input[0] * self.input[1]
    }

    fn output_len(&self) -> usize {
        self.c_out * self.pixels()
    }

    /// Elements of an `[batch, c_in, h, w]` input.
    pub fn x_len(&self) -> usize {
        self.batch * self.input_len()
    }

    /// Elements of the `[c_out, c_in, kh, kw]` weight.
    pub fn w_len(&self) -> usize {
        self.c_out * self.rows()
    }

    /// Elements of the `[batch, c_out, oh, ow]` output.
    pub fn y_len(&self) -> usize {
        self.batch * self.output_len()
    }

    /// A 1x1 kernel at stride 1 without padding: an image is its own column matrix.
    fn is_pointwise(&self) -> bool {
        self.kernel == [1, 1]
            && self.stride == [1, 1]
            && self.pad_begin == [0, 0]
            && self.pad_end == [0, 0]
    }
}

/// `dst (m x n) = [dst +] lhs (m x k) * rhs (k x n)`, matrices given by pointer, row stride and
/// column stride.
struct Mat<T> {
    ptr: T,
    rs: usize,
    cs: usize,
}

/// # Safety
/// The three matrices must be valid for the given sizes and strides; `dst` must not overlap
/// the others. With `accumulate == false`, `dst` is only written.
unsafe fn matmul(
    [m, n, k]: [usize; 3],
    dst: Mat<*mut f32>,
    accumulate: bool,
    lhs: Mat<*const f32>,
    rhs: Mat<*const f32>,
    parallelism: Parallelism,
) {
    // SAFETY: forwarded from the caller. gemm computes dst = alpha dst + beta lhs rhs and does
    // not read dst when `read_dst` is false.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.ptr,
            dst.cs as isize,
            dst.rs as isize,
            accumulate,
            lhs.ptr,
            lhs.cs as isize,
            lhs.rs as isize,
            rhs.ptr,
            rhs.cs as isize,
            rhs.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with two per-thread buffers of `a` and `b` floats (contents unspecified).
fn with_scratch<R>(a: usize, b: usize, f: impl FnOnce(&mut [f32], &mut [f32]) -> R) -> R {
    let split = |buf: &mut [f32]| {
        let (first, rest) = buf.split_at_mut(a);
        f(first, &mut rest[..b])
    };
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < a + b {
                buf.resize(a + b, 0.0);
            }
            split(&mut buf)
        }
        // Re-entered on this thread (a task stolen while waiting): buffers of its own.
        Err(_) => split(&mut vec![0.0; a + b]),
    })
}

/// Output columns a matrix product should have at least: below that, packing the weight
/// (repeated for every product) outweighs the arithmetic.
const MIN_COLUMNS: usize = 256;

/// Images per matrix product: one, or enough for [`MIN_COLUMNS`] columns when the images are
/// small (ResNet-20's 7x7 and 14x14 maps). Depends on the shapes only.
fn group_len(s: &ConvShape) -> usize {
    let p = s.pixels().max(1);
    MIN_COLUMNS.div_ceil(p).clamp(1, s.batch.max(1))
}

/// How groups of images run: in parallel, one task each, when there are at least as many
/// groups as threads; otherwise one after the other with a parallel matrix product.
fn group_parallelism(groups: usize) -> Option<Parallelism> {
    let threads = rayon::current_num_threads();
    (groups < threads && threads > 1).then_some(Parallelism::Rayon(threads))
}

/// For output column `ox`, the input column is `ox * stride + offset`. The range of `ox` in
/// `0..out` whose input column lies in `0..len`.
#[inline]
fn valid_range(offset: isize, stride: usize, len: usize, out: usize) -> (usize, usize) {
    let s = stride as isize;
    let lo = if offset >= 0 {
        0
    } else {
        ((-offset + s - 1) / s) as usize
    };
    let last = len as isize - 1 - offset;
    let hi = if last < 0 { 0 } else { (last / s) as usize + 1 };
    let lo = lo.min(out);
    (lo, hi.clamp(lo, out))
}

/// Where row `(c, i, j)` of a column matrix reads its image plane.
struct Tap {
    /// Offsets of the input row and column from `oy * stride`, `ox * stride`.
    offset: [isize; 2],
    /// Output rows `y_lo..y_hi` and columns `x_lo..x_hi` that read inside the image.
    rows: (usize, usize),
    cols: (usize, usize),
}

/// The `kh * kw` taps of a convolution, in `(i, j)` order.
fn taps(s: &ConvShape) -> Vec<Tap> {
    let [h, w] = s.input;
    let [oh, ow] = s.out_hw();
    let mut taps = Vec::with_capacity(s.kernel[0] * s.kernel[1]);
    for i in 0..s.kernel[0] {
        let y_off = (i * s.dilation[0]) as isize - s.pad_begin[0] as isize;
        for j in 0..s.kernel[1] {
            let x_off = (j * s.dilation[1]) as isize - s.pad_begin[1] as isize;
            taps.push(Tap {
                offset: [y_off, x_off],
                rows: valid_range(y_off, s.stride[0], h, oh),
                cols: valid_range(x_off, s.stride[1], w, ow),
            });
        }
    }
    taps
}

/// Stride 1 and as many output columns as input columns ("same" width, as ResNet's 3x3
/// convolutions): output pixel `q = oy * ow + ox` then reads input pixel `q + offset` of the
/// plane, so a tap's whole row is one contiguous copy, with the few pixels that fall in the
/// padding fixed afterwards.
fn is_flat(s: &ConvShape) -> bool {
    s.stride == [1, 1] && s.out_hw()[1] == s.input[1]
}

/// Stride 2 over an image of even height and width with an output half its size in each
/// direction (ResNet's down-sampling layers). Split into its four phases (even or odd rows, by
/// even or odd columns), each `[h / 2, w / 2]`, a tap reads a single phase at stride 1 and the
/// output's width, so its row is one contiguous copy as in [`is_flat`]. The strided gather of
/// short rows it replaces was a quarter of a 3x3 stride-2 layer's time; a 1x1 kernel reads one
/// phase only, so splitting all four costs it more than it saves (measured) and it keeps the
/// gather.
fn is_polyphase(s: &ConvShape) -> bool {
    let [h, w] = s.input;
    s.stride == [2, 2]
        && s.kernel[0] > 1
        && s.kernel[1] > 1
        && s.dilation == [1, 1]
        && h % 2 == 0
        && w % 2 == 0
        && s.out_hw() == [h / 2, w / 2]
}

/// Splits the `[h, w]` `plane` into its four phases, written one after another to `phases`
/// (phase `2 * (row parity) + column parity`, each `[h / 2, w / 2]`).
fn split_phases(plane: &[f32], w: usize, phases: &mut [f32]) {
    let pw = w / 2;
    let quarter = phases.len() / 4;
    for (iy, row) in plane.chunks_exact(w).enumerate() {
        let at = (iy % 2) * 2 * quarter + (iy / 2) * pw;
        let (even, odd) = phases[at..].split_at_mut(quarter);
        for ((e, o), pair) in even[..pw]
            .iter_mut()
            .zip(&mut odd[..pw])
            .zip(row.chunks_exact(2))
        {
            *e = pair[0];
            *o = pair[1];
        }
    }
}

/// Adds the four phases of [`split_phases`] back onto the `[h, w]` `plane`.
fn add_phases(phases: &[f32], w: usize, plane: &mut [f32]) {
    let pw = w / 2;
    let quarter = phases.len() / 4;
    for (iy, row) in plane.chunks_exact_mut(w).enumerate() {
        let at = (iy % 2) * 2 * quarter + (iy / 2) * pw;
        let (even, odd) = (&phases[at..][..pw], &phases[at + quarter..][..pw]);
        for ((e, o), pair) in even.iter().zip(odd).zip(row.chunks_exact_mut(2)) {
            pair[0] += e;
            pair[1] += o;
        }
    }
}

impl Tap {
    /// For [`is_flat`] shapes: the plane offset, and the output pixels `q_lo..q_hi` whose
    /// input pixel `q + offset` lies in the plane (a superset of the valid ones).
    fn flat(&self, s: &ConvShape) -> (isize, usize, usize) {
        let [h, w] = s.input;
        let off = self.offset[0] * w as isize + self.offset[1];
        self.span(off, h * w, s.out_hw()[1])
    }

    /// For [`is_polyphase`] shapes: the phase the tap reads, its offset in that phase, and the
    /// output pixels `q_lo..q_hi` whose pixel `q + offset` lies in the phase, as [`Tap::flat`].
    fn phase(&self, s: &ConvShape) -> (usize, isize, usize, usize) {
        let [h, w] = s.input;
        let [dy, dx] = self.offset.map(|o| o.div_euclid(2));
        let phase = (self.offset[0].rem_euclid(2) * 2 + self.offset[1].rem_euclid(2)) as usize;
        let off = dy * (w / 2) as isize + dx;
        let (off, lo, hi) = self.span(off, h * w / 4, s.out_hw()[1]);
        (phase, off, lo, hi)
    }

    fn span(&self, off: isize, plane_len: usize, ow: usize) -> (isize, usize, usize) {
        let end = self.rows.1 * ow;
        let lo = (self.rows.0 * ow).max((-off).max(0) as usize).min(end);
        let hi = end.min((plane_len as isize - off).max(0) as usize);
        (off, lo, hi.max(lo))
    }
}

/// Fills the column row `row` of a tap whose output pixel `q` reads `plane[q + off]` for
/// `q` in `lo..hi` (from [`Tap::flat`] or [`Tap::phase`]), zeroing what reads the padding.
fn copy_flat(
    row: &mut [f32],
    plane: &[f32],
    (off, lo, hi): (isize, usize, usize),
    tap: &Tap,
    ow: usize,
) {
    row[..lo].fill(0.0);
    row[hi..].fill(0.0);
    if hi > lo {
        row[lo..hi].copy_from_slice(&plane[(lo as isize + off) as usize..][..hi - lo]);
    }
    let ((y_lo, y_hi), (x_lo, x_hi)) = (tap.rows, tap.cols);
    if x_lo > 0 || x_hi < ow {
        zero_edges(&mut row[y_lo * ow..y_hi * ow], ow, x_lo, x_hi);
    }
}

/// The transpose of [`copy_flat`]: adds `row` onto `plane`, after zeroing the entries of `row`
/// that read the padding.
fn add_flat(
    row: &mut [f32],
    plane: &mut [f32],
    (off, lo, hi): (isize, usize, usize),
    tap: &Tap,
    ow: usize,
) {
    let ((y_lo, y_hi), (x_lo, x_hi)) = (tap.rows, tap.cols);
    if x_lo > 0 || x_hi < ow {
        zero_edges(&mut row[y_lo * ow..y_hi * ow], ow, x_lo, x_hi);
    }
    if hi == lo {
        return;
    }
    let dst = &mut plane[(lo as isize + off) as usize..][..hi - lo];
    for (d, v) in dst.iter_mut().zip(&row[lo..hi]) {
        *d += v;
    }
}

/// Zeroes columns `..lo` and `hi..` of every `width`-long row of `rows`. Those are one or two
/// columns for the usual kernels, written directly: as `fill` they became a `memset` call per
/// row, 5 % of a ResNet-20 step.
#[inline]
fn zero_edges(rows: &mut [f32], width: usize, lo: usize, hi: usize) {
    for r in rows.chunks_exact_mut(width) {
        match lo {
            0 => {}
            1 => r[0] = 0.0,
            _ => r[..lo].fill(0.0),
        }
        match width - hi {
            0 => {}
            1 => r[hi] = 0.0,
            _ => r[hi..].fill(0.0),
        }
    }
}

/// Writes the column matrix `[c_in * kh * kw, oh * ow]` of one `[c_in, h, w]` image; row `r`
/// starts at `col[r * ld]`.
fn im2col(s: &ConvShape, taps: &[Tap], x: &[f32], col: &mut [f32], ld: usize) {
    let [h, w] = s.input;
    let [oh, ow] = s.out_hw();
    let [sh, sw] = s.stride;
    let p = oh * ow;
    let flat = is_flat(s);
    let mut phases = vec![0.0; if is_polyphase(s) { h * w } else { 0 }];
    let mut rows = col.chunks_mut(ld);
    for plane in x.chunks_exact(h * w) {
        if !phases.is_empty() {
            split_phases(plane, w, &mut phases);
        }
        for tap in taps {
            let row = &mut rows.next().expect("column matrix has c_in * kh * kw rows")[..p];
            let (y_lo, y_hi) = tap.rows;
            let (x_lo, x_hi) = tap.cols;
            if flat {
                copy_flat(row, plane, tap.flat(s), tap, ow);
                continue;
            }
            if !phases.is_empty() {
                let (phase, off, lo, hi) = tap.phase(s);
                copy_flat(
                    row,
                    &phases[phase * h * w / 4..][..h * w / 4],
                    (off, lo, hi),
                    tap,
                    ow,
                );
                continue;
            }
            row[..y_lo * ow].fill(0.0);
            row[y_hi * ow..].fill(0.0);
            if x_lo == x_hi {
                row[y_lo * ow..y_hi * ow].fill(0.0);
                continue;
            }
            // Rows of a few pixels (7-28 here): per-row `fill` and iterator set-up were most of
            // the time of a stride-2 layer, so the edges are written directly (`zero_edges`)
            // and the strided copy indexes a slice cut to its exact extent.
            let (n, first) = (x_hi - x_lo, (x_lo * sw) as isize + tap.offset[1]);
            for oy in y_lo..y_hi {
                let dst = &mut row[oy * ow..][..ow];
                zero_edges(dst, ow, x_lo, x_hi);
                let iy = ((oy * sh) as isize + tap.offset[0]) as usize;
                let src = &plane[iy * w + first as usize..][..(n - 1) * sw + 1];
                let dst = &mut dst[x_lo..x_hi];
                if sw == 1 {
                    dst.copy_from_slice(src);
                } else {
                    for (i, d) in dst.iter_mut().enumerate() {
                        *d = src[i * sw];
                    }
                }
            }
        }
    }
}

/// Adds a column matrix (row `r` at `col[r * ld]`) back onto its `[c_in, h, w]` image, the
/// transpose of [`im2col`]; `x` must hold zeros or the values to add to. Clobbers the entries
/// of `col` that fall in the padding.
fn col2im(s: &ConvShape, taps: &[Tap], col: &mut [f32], ld: usize, x: &mut [f32]) {
    let [h, w] = s.input;
    let [oh, ow] = s.out_hw();
    let [sh, sw] = s.stride;
    let p = oh * ow;
    let flat = is_flat(s);
    let polyphase = is_polyphase(s);
    let mut phases = vec![0.0; if polyphase { h * w } else { 0 }];
    let mut rows = col.chunks_mut(ld);
    for plane in x.chunks_exact_mut(h * w) {
        phases.fill(0.0);
        for tap in taps {
            let row = &mut rows.next().expect("column matrix has c_in * kh * kw rows")[..p];
            let (y_lo, y_hi) = tap.rows;
            let (x_lo, x_hi) = tap.cols;
            if x_lo == x_hi {
                continue;
            }
            if flat {
                add_flat(row, plane, tap.flat(s), tap, ow);
                continue;
            }
            if polyphase {
                let (phase, off, lo, hi) = tap.phase(s);
                let quarter = &mut phases[phase * h * w / 4..][..h * w / 4];
                add_flat(row, quarter, (off, lo, hi), tap, ow);
                continue;
            }
            let first = ((x_lo * sw) as isize + tap.offset[1]) as usize;
            let n = x_hi - x_lo;
            for oy in y_lo..y_hi {
                let iy = ((oy * sh) as isize + tap.offset[0]) as usize;
                // Cut to the exact extent, as in `im2col`: short rows, no per-row set-up.
                let dst = &mut plane[iy * w + first..][..(n - 1) * sw + 1];
                let src = &row[oy * ow + x_lo..oy * ow + x_hi];
                if sw == 1 {
                    for (d, v) in dst.iter_mut().zip(src) {
                        *d += v;
                    }
                } else {
                    for (i, v) in src.iter().enumerate() {
                        dst[i * sw] += v;
                    }
                }
            }
        }
        if polyphase {
            add_phases(&phases, w, plane);
        }
    }
}

fn check_lengths(s: &ConvShape, lens: [(usize, usize, &str); 3]) {
    assert!(s.output().is_some(), "convolution does not fit: {s:?}");
    for (got, want, what) in lens {
        assert_eq!(got, want, "{what}: {got} elements for {s:?}");
    }
}

/// Runs `task(first image, images, chunk of out)` over groups of `group` images, `out` split
/// into `per_image` elements per image: in parallel over groups, or one after the other with a
/// parallel matrix product when there are fewer groups than threads.
fn for_groups<T: Send>(
    out: &mut [T],
    per_image: usize,
    group: usize,
    task: impl Fn(usize, usize, &mut [T], Parallelism) + Sync,
) {
    let len = per_image * group;
    let groups = out.len().div_ceil(len);
    match group_parallelism(groups) {
        Some(par) => out
            .chunks_mut(len)
            .enumerate()
            .for_each(|(i, o)| task(i * group, o.len() / per_image, o, par)),
        None => out
            .par_chunks_mut(len)
            .enumerate()
            .for_each(|(i, o)| task(i * group, o.len() / per_image, o, Parallelism::None)),
    }
}

/// Copies `count` images' `[rows, p]` blocks from `src` (image after image) into `dst` as one
/// `[rows, count * p]` matrix.
fn gather_images(src: &[f32], rows: usize, p: usize, count: usize, dst: &mut [f32]) {
    let ld = count * p;
    for (g, image) in src.chunks_exact(rows * p).take(count).enumerate() {
        for (r, row) in image.chunks_exact(p).enumerate() {
            dst[r * ld + g * p..][..p].copy_from_slice(row);
        }
    }
}

/// The convolution `y = x * w`: `x` is `[batch, c_in, h, w]`, `w` `[c_out, c_in, kh, kw]`;
/// returns `[batch, c_out, oh, ow]`.
pub fn forward(s: &ConvShape, x: &[f32], w: &[f32]) -> Vec<f32> {
    let mut y = Vec::with_capacity(s.y_len());
    forward_into(s, x, w, &mut y.spare_capacity_mut()[..s.y_len()]);
    // SAFETY: `forward_into` wrote every element of the first `y_len` slots.
    unsafe { y.set_len(s.y_len()) };
    y
}

fn forward_into(s: &ConvShape, x: &[f32], w: &[f32], y: &mut [MaybeUninit<f32>]) {
    check_lengths(
        s,
        [
            (x.len(), s.x_len(), "input"),
            (w.len(), s.w_len(), "weight"),
            (y.len(), s.y_len(), "output"),
        ],
    );
    if s.y_len() == 0 {
        return;
    }
    let (k, p) = (s.rows(), s.pixels());
    let taps = taps(s);
    let task = |n0: usize, count: usize, y_g: &mut [MaybeUninit<f32>], par: Parallelism| {
        let x_g = &x[n0 * s.input_len()..][..count * s.input_len()];
        let cols = count * p;
        // y (c_out x cols) = w (c_out x k) * col (k x cols), all row-major.
        let product = |col: &[f32], dst: *mut f32| {
            // SAFETY: the sizes above; dst holds c_out * cols floats.
            unsafe {
                matmul(
                    [s.c_out, cols, k],
                    Mat {
                        ptr: dst,
                        rs: cols,
                        cs: 1,
                    },
                    false,
                    Mat {
                        ptr: w.as_ptr(),
                        rs: k,
                        cs: 1,
                    },
                    Mat {
                        ptr: col.as_ptr(),
                        rs: cols,
                        cs: 1,
                    },
                    par,
                )
            }
        };
        if count == 1 && s.is_pointwise() {
            return product(x_g, y_g.as_mut_ptr().cast());
        }
        let out_scratch = if count == 1 { 0 } else { s.c_out * cols };
        with_scratch(k * cols, out_scratch, |col, out| {
            for (g, x_n) in x_g.chunks_exact(s.input_len()).enumerate() {
                im2col(s, &taps, x_n, &mut col[g * p..], cols);
            }
            if count == 1 {
                return product(col, y_g.as_mut_ptr().cast());
            }
            product(col, out.as_mut_ptr());
            for (g, y_n) in y_g.chunks_exact_mut(s.output_len()).enumerate() {
                for (co, dst) in y_n.chunks_exact_mut(p).enumerate() {
                    for (d, v) in dst.iter_mut().zip(&out[co * cols + g * p..][..p]) {
                        d.write(*v);
                    }
                }
            }
        })
    };
    for_groups(y, s.output_len(), group_len(s), task);
}

/// The gradient of the loss with respect to `x`, given `dy = dL/dy` (`[batch, c_out, oh, ow]`)
/// and `w`; returns `[batch, c_in, h, w]`.
pub fn backward_input(s: &ConvShape, w: &[f32], dy: &[f32]) -> Vec<f32> {
    check_lengths(
        s,
        [
            (w.len(), s.w_len(), "weight"),
            (dy.len(), s.y_len(), "output gradient"),
            (s.x_len(), s.x_len(), "input gradient"),
        ],
    );
    let mut dx = vec![0.0f32; s.x_len()];
    if s.x_len() == 0 {
        return dx;
    }
    let (k, p) = (s.rows(), s.pixels());
    let taps = taps(s);
    let task = |n0: usize, count: usize, dx_g: &mut [f32], par: Parallelism| {
        let dy_g = &dy[n0 * s.output_len()..][..count * s.output_len()];
        let cols = count * p;
        // dcol (k x cols) = w^T (k x c_out) * dy (c_out x cols).
        let product = |dy: &[f32], dcol: *mut f32| {
            // SAFETY: the sizes above; w^T is w read with swapped strides.
            unsafe {
                matmul(
                    [k, cols, s.c_out],
                    Mat {
                        ptr: dcol,
                        rs: cols,
                        cs: 1,
                    },
                    false,
                    Mat {
                        ptr: w.as_ptr(),
                        rs: 1,
                        cs: k,
                    },
                    Mat {
                        ptr: dy.as_ptr(),
                        rs: cols,
                        cs: 1,
                    },
                    par,
                )
            }
        };
        if count == 1 && s.is_pointwise() {
            return product(dy_g, dx_g.as_mut_ptr());
        }
        let dy_scratch = if count == 1 { 0 } else { s.c_out * cols };
        with_scratch(k * cols, dy_scratch, |dcol, dy_cols| {
            if count == 1 {
                product(dy_g, dcol.as_mut_ptr());
            } else {
                gather_images(dy_g, s.c_out, p, count, dy_cols);
                product(dy_cols, dcol.as_mut_ptr());
            }
            for (g, dx_n) in dx_g.chunks_exact_mut(s.input_len()).enumerate() {
                col2im(s, &taps, &mut dcol[g * p..], cols, dx_n);
            }
        })
    };
    for_groups(&mut dx, s.input_len(), group_len(s), task);
    dx
}

/// Images per chunk of the weight gradient: at most [`MAX_WEIGHT_CHUNKS`] chunks, no more
/// partial sums than fit in [`MAX_PARTIAL_FLOATS`], a whole number of groups of `group`
/// images. Depends on the shapes only.
fn weight_chunk_len(s: &ConvShape, group: usize) -> usize {
    let by_memory = (MAX_PARTIAL_FLOATS / s.w_len().max(1)).max(1);
    let chunks = MAX_WEIGHT_CHUNKS.min(by_memory).min(s.batch).max(1);
    s.batch.div_ceil(chunks).next_multiple_of(group)
}

/// The gradient of the loss with respect to `w`, given `x` and `dy = dL/dy`; returns
/// `[c_out, c_in, kh, kw]`.
pub fn backward_weight(s: &ConvShape, x: &[f32], dy: &[f32]) -> Vec<f32> {
    check_lengths(
        s,
        [
            (x.len(), s.x_len(), "input"),
            (dy.len(), s.y_len(), "output gradient"),
            (s.w_len(), s.w_len(), "weight gradient"),
        ],
    );
    let wl = s.w_len();
    if wl == 0 {
        return Vec::new();
    }
    if s.batch == 0 || s.pixels() == 0 {
        return vec![0.0; wl];
    }
    let (k, p) = (s.rows(), s.pixels());
    let taps = taps(s);
    let group = group_len(s);
    // acc [+]= dy (c_out x cols) * col^T (cols x k), group after group in order, with acc
    // column-major (`[k, c_out]` in memory): gemm then keeps the small dy on the left and reads
    // the long column matrix as it lies, instead of transposing it into its packed panels.
    let chunk_sum = |images: std::ops::Range<usize>, acc: &mut [f32], par: Parallelism| {
        let mut first = true;
        for n0 in images.clone().step_by(group) {
            let count = group.min(images.end - n0);
            let cols = count * p;
            let x_g = &x[n0 * s.input_len()..][..count * s.input_len()];
            let dy_g = &dy[n0 * s.output_len()..][..count * s.output_len()];
            let acc_ptr = acc.as_mut_ptr();
            let product = |dy: &[f32], col: &[f32]| {
                // SAFETY: the sizes above; col^T is col read with swapped strides.
                unsafe {
                    matmul(
                        [s.c_out, k, cols],
                        Mat {
                            ptr: acc_ptr,
                            rs: 1,
                            cs: s.c_out,
                        },
                        !first,
                        Mat {
                            ptr: dy.as_ptr(),
                            rs: cols,
                            cs: 1,
                        },
                        Mat {
                            ptr: col.as_ptr(),
                            rs: 1,
                            cs: cols,
                        },
                        par,
                    )
                }
            };
            if count == 1 && s.is_pointwise() {
                product(dy_g, x_g);
            } else {
                let dy_scratch = if count == 1 { 0 } else { s.c_out * cols };
                with_scratch(k * cols, dy_scratch, |col, dy_cols| {
                    for (g, x_n) in x_g.chunks_exact(s.input_len()).enumerate() {
                        im2col(s, &taps, x_n, &mut col[g * p..], cols);
                    }
                    if count == 1 {
                        product(dy_g, col)
                    } else {
                        gather_images(dy_g, s.c_out, p, count, dy_cols);
                        product(dy_cols, col)
                    }
                });
            }
            first = false;
        }
    };
    let per = weight_chunk_len(s, group);
    let chunks = s.batch.div_ceil(per);
    let mut dw = vec![0.0f32; wl];
    if chunks == 1 {
        let par = group_parallelism(1).unwrap_or(Parallelism::None);
        chunk_sum(0..s.batch, &mut dw, par);
        return to_row_major(&dw, s.c_out, k);
    }
    // Chunk 0 accumulates into dw itself, the others into partial sums added after, in order.
    let mut partial = vec![0.0f32; (chunks - 1) * wl];
    rayon::iter::once(&mut dw[..])
        .chain(partial.par_chunks_mut(wl))
        .enumerate()
        .for_each(|(c, acc)| {
            let images = c * per..((c + 1) * per).min(s.batch);
            chunk_sum(images, acc, Parallelism::None)
        });
    const BLOCK: usize = 4096;
    dw.par_chunks_mut(BLOCK).enumerate().for_each(|(b, d)| {
        for part in partial.chunks_exact(wl) {
            for (d, v) in d.iter_mut().zip(&part[b * BLOCK..]) {
                *d += v;
            }
        }
    });
    to_row_major(&dw, s.c_out, k)
}

/// The row-major `[rows, cols]` copy of a column-major `rows x cols` matrix.
fn to_row_major(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(m.len());
    for r in 0..rows {
        out.extend(m[r..].iter().step_by(rows).take(cols));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct definition of the convolution, in f64.
    fn reference(s: &ConvShape, x: &[f32], w: &[f32]) -> Vec<f64> {
        let [h, wd] = s.input;
        let [oh, ow] = s.out_hw();
        let [kh, kw] = s.kernel;
        let mut y = vec![0.0f64; s.y_len()];
        for n in 0..s.batch {
            for co in 0..s.c_out {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = 0.0f64;
                        for c in 0..s.c_in {
                            for i in 0..kh {
                                for j in 0..kw {
                                    let iy = (oy * s.stride[0] + i * s.dilation[0]) as isize
                                        - s.pad_begin[0] as isize;
                                    let ix = (ox * s.stride[1] + j * s.dilation[1]) as isize
                                        - s.pad_begin[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                        continue;
                                    }
                                    let xv =
                                        x[((n * s.c_in + c) * h + iy as usize) * wd + ix as usize];
                                    let wv = w[((co * s.c_in + c) * kh + i) * kw + j];
                                    acc += xv as f64 * wv as f64;
                                }
                            }
                        }
                        y[((n * s.c_out + co) * oh + oy) * ow + ox] = acc;
                    }
                }
            }
        }
        y
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let v = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
                (v % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn shape(batch: usize, c: [usize; 2], input: [usize; 2], k: [usize; 2]) -> ConvShape {
        ConvShape {
            batch,
            c_in: c[0],
            input,
            c_out: c[1],
            kernel: k,
            stride: [1, 1],
            pad_begin: [0, 0],
            pad_end: [0, 0],
            dilation: [1, 1],
        }
    }

    #[test]
    fn forward_matches_the_definition() {
        for (i, s) in cases().iter().enumerate() {
            let x = values(s.x_len(), i as u32);
            let w = values(s.w_len(), 100 + i as u32);
            let y = forward(s, &x, &w);
            for (a, b) in y.iter().zip(reference(s, &x, &w)) {
                assert!((*a as f64 - b).abs() < 1e-4, "{s:?}: {a} vs {b}");
            }
        }
    }

    /// The gradients by the definition: every (input, weight, output) triple of the forward
    /// sum passes `dy` back to both factors.
    fn reference_gradients(s: &ConvShape, x: &[f32], w: &[f32], dy: &[f32]) -> [Vec<f64>; 2] {
        let [h, wd] = s.input;
        let [oh, ow] = s.out_hw();
        let [kh, kw] = s.kernel;
        let mut dx = vec![0.0f64; s.x_len()];
        let mut dw = vec![0.0f64; s.w_len()];
        for n in 0..s.batch {
            for co in 0..s.c_out {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let g = dy[((n * s.c_out + co) * oh + oy) * ow + ox] as f64;
                        for c in 0..s.c_in {
                            for i in 0..kh {
                                for j in 0..kw {
                                    let iy = (oy * s.stride[0] + i * s.dilation[0]) as isize
                                        - s.pad_begin[0] as isize;
                                    let ix = (ox * s.stride[1] + j * s.dilation[1]) as isize
                                        - s.pad_begin[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                        continue;
                                    }
                                    let xi =
                                        ((n * s.c_in + c) * h + iy as usize) * wd + ix as usize;
                                    let wi = ((co * s.c_in + c) * kh + i) * kw + j;
                                    dx[xi] += g * w[wi] as f64;
                                    dw[wi] += g * x[xi] as f64;
                                }
                            }
                        }
                    }
                }
            }
        }
        [dx, dw]
    }

    fn cases() -> Vec<ConvShape> {
        let mut cases = vec![
            shape(3, [2, 3], [7, 6], [3, 3]),
            shape(1, [4, 5], [5, 5], [1, 1]),
            shape(2, [3, 2], [9, 8], [5, 3]),
            shape(4, [1, 5], [2, 6], [3, 3]),
            shape(20, [2, 2], [4, 4], [1, 1]),
            // "Same"-width stride-1 shapes (the contiguous-row path).
            shape(3, [2, 3], [7, 6], [3, 3]),
            shape(2, [3, 2], [5, 9], [5, 3]),
            shape(2, [2, 2], [6, 6], [3, 3]),
        ];
        cases[5].pad_begin = [1, 1];
        cases[5].pad_end = [1, 1];
        cases[6].dilation = [2, 2];
        cases[6].pad_begin = [3, 0];
        cases[6].pad_end = [5, 4];
        cases[7].pad_begin = [0, 2];
        cases[7].pad_end = [2, 0];
        cases[0].pad_begin = [1, 2];
        cases[0].pad_end = [0, 1];
        cases[2].stride = [2, 3];
        cases[2].dilation = [1, 2];
        cases[2].pad_begin = [2, 2];
        cases[2].pad_end = [2, 2];
        cases[3].stride = [2, 1];
        cases[3].dilation = [2, 1];
        cases[3].pad_begin = [2, 2];
        cases[3].pad_end = [2, 2];
        cases[4].stride = [2, 2];
        // Stride 2 to half the size: 3x3 with padding 1 and with uneven padding (the
        // polyphase path), and the 1x1 projection shortcut (not).
        let mut down = shape(2, [3, 4], [8, 6], [3, 3]);
        down.stride = [2, 2];
        down.pad_begin = [1, 1];
        down.pad_end = [1, 1];
        let mut uneven = down;
        uneven.pad_begin = [0, 1];
        uneven.pad_end = [1, 0];
        let mut shortcut = shape(3, [2, 5], [6, 4], [1, 1]);
        shortcut.stride = [2, 2];
        cases.extend([down, uneven, shortcut]);
        cases
    }

    #[test]
    fn gradients_match_the_definition() {
        assert!(cases()[5..8].iter().all(is_flat));
        assert!(cases()[8..10].iter().all(is_polyphase));
        assert!(!is_polyphase(&cases()[10]));
        for (i, s) in cases().iter().enumerate() {
            let x = values(s.x_len(), i as u32);
            let w = values(s.w_len(), 100 + i as u32);
            let dy = values(s.y_len(), 200 + i as u32);
            let [dx_ref, dw_ref] = reference_gradients(s, &x, &w, &dy);
            let dx = backward_input(s, &w, &dy);
            let dw = backward_weight(s, &x, &dy);
            for (j, (a, b)) in dx.iter().zip(&dx_ref).enumerate() {
                assert!((*a as f64 - b).abs() < 1e-4, "dx[{j}] {s:?}: {a} vs {b}");
            }
            for (j, (a, b)) in dw.iter().zip(&dw_ref).enumerate() {
                assert!((*a as f64 - b).abs() < 1e-4, "dw[{j}] {s:?}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn valid_range_covers_exactly_the_inside_columns() {
        for offset in -5isize..5 {
            for stride in 1..4 {
                for len in 1..6 {
                    let out = 7;
                    let (lo, hi) = valid_range(offset, stride, len, out);
                    for ox in 0..out {
                        let ix = (ox * stride) as isize + offset;
                        let inside = ix >= 0 && ix < len as isize;
                        assert_eq!(inside, (lo..hi).contains(&ox), "{offset} {stride} {len}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_weight_gradient_does_not_depend_on_the_thread_count() {
        let mut s = shape(37, [3, 4], [6, 5], [3, 3]);
        s.pad_begin = [1, 1];
        s.pad_end = [1, 1];
        let x = values(s.x_len(), 1);
        let dy = values(s.y_len(), 2);
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    (
                        backward_weight(&s, &x, &dy),
                        backward_input(&s, &values(s.w_len(), 3), &dy),
                    )
                })
        };
        let one = run(1);
        assert_eq!(one, run(3));
        assert_eq!(one, run(1));
    }
}
