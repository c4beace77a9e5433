//! Attention as a model's graph spells it — `MatMul(Q, Kᵀ)`, elementwise steps on the scores
//! (a scale, an additive mask), `Softmax` over the keys, `MatMul(P, V)` — in one f32 kernel
//! that never writes the scores to memory: blocks of query rows whose scores fit in L2 (about
//! 256 KiB), each through the packed GEMM, the steps and an exponential pass in place, the
//! second product, and the softmax's division applied to the `dv`-wide result instead of the
//! `sk`-wide probabilities. An SVTR layer's 6 × 960 × 960 scores went through memory four
//! times (product, scale, softmax, product) where they now stay in cache.
//!
//! Operands are strided views, so transposes that only reorder Q, K, V or the output (heads
//! split from a `[seq, heads · d]` row) are read and written in place instead of run. Blocks
//! of rows are split over the thread pool; each task writes only its rows of the output.
use super::packed;

/// Element `(b…, r, c)` of a view is at `Σ b_i · batch[i] + r · rows + c · cols` (elements).
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    pub batch: &'a [usize],
    pub rows: usize,
    pub cols: usize,
}

/// A view and the buffer it reads.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    pub data: &'a [f32],
    pub view: View<'a>,
}

/// Sizes: batch dims (heads among them), query rows `sq`, keys `sk`, head size `d` and value
/// width `dv`. Q is `sq × d`, Kᵀ `d × sk`, V `sk × dv`, the output `sq × dv`, per batch entry.
#[derive(Clone, Copy, Debug)]
pub struct Dims<'a> {
    pub batch: &'a [usize],
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
    pub dv: usize,
}

/// One elementwise step on the scores, in the graph's order. Steps that are all scalar
/// factors (a positive product) are folded into the exponentials' argument; others run one
/// by one on each row, each rounding to f32 as the unfused node does.
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    Mul(f32),
    Div(f32),
    /// An additive bias (a mask) over `[batch…, sq, sk]`, broadcast by zero strides.
    Add(Matrix<'a>),
}

/// Scores per block of rows (f32 elements): the block, its packed copy and the products'
/// panels stay in a 1 MiB L2.
const SCORES_PER_BLOCK: usize = 1 << 16;

/// Query rows per block: a multiple of the GEMM's tile height, at most `sq`.
fn block_rows(sq: usize, sk: usize) -> usize {
    let mr = packed::MR;
    let rows = (SCORES_PER_BLOCK / sk.max(1)) / mr * mr;
    rows.max(mr).min(sq.max(1))
}

/// Whether the packed GEMM reads an operand of `width` columns in place (unit column
/// stride, rows at least as long); others are copied.
fn direct(v: &View, width: usize) -> bool {
    v.cols == 1 && v.rows >= width
}

/// Lengths of the copies of Kᵀ, V (per batch entry) and a block of `r` Q rows: 0 for
/// operands read in place.
fn copies(d: &Dims, q: &View, kt: &View, v: &View, r: usize) -> [usize; 3] {
    let len = |view: &View, width: usize, n: usize| if direct(view, width) { 0 } else { n };
    [len(kt, d.sk, d.d * d.sk), len(v, d.dv, d.sk * d.dv), len(q, d.d, r * d.d)]
}

/// Scratch (f32 elements) one task needs: the copies of operands not read in place, a block
/// of scores, of output rows, the row sums and the GEMM's packing space.
pub fn scratch_len(d: &Dims, q: &View, kt: &View, v: &View) -> usize {
    let r = block_rows(d.sq, d.sk);
    let gemm = packed::scratch_len(r, d.d).max(packed::scratch_len(r, d.sk));
    copies(d, q, kt, v, r).iter().sum::<usize>() + r * (d.sk + d.dv + 1) + gemm
}

/// The largest element offset `+ 1` a view reaches over `[batch…, rows, cols]`, or `None` on
/// overflow.
fn extent(v: &View, batch: &[usize], rows: usize, cols: usize) -> Option<usize> {
    if batch.contains(&0) || rows == 0 || cols == 0 {
        return Some(0);
    }
    let mut last = (rows - 1).checked_mul(v.rows)?.checked_add((cols - 1).checked_mul(v.cols)?)?;
    for (&n, &s) in batch.iter().zip(v.batch) {
        last = last.checked_add((n - 1).checked_mul(s)?)?;
    }
    last.checked_add(1)
}

/// Whether no two elements of a view over `dims` share an offset: sorted by stride, each
/// stride passes the span of the smaller ones (sufficient; the views transposes give pass).
fn injective(v: &View, dims: &[usize]) -> bool {
    let mut axes: [(usize, usize); 18] = [(0, 0); 18];
    let n = dims.len();
    if n > axes.len() {
        return false;
    }
    for (i, (&d, &s)) in dims.iter().zip(v.batch.iter().chain([&v.rows, &v.cols])).enumerate() {
        axes[i] = (s, d);
    }
    let axes = &mut axes[..n];
    axes.sort_unstable();
    let mut span = 0usize;
    for &(s, d) in axes.iter() {
        if d <= 1 {
            continue;
        }
        if s == 0 || s <= span {
            return false;
        }
        span = match (d - 1).checked_mul(s).and_then(|x| x.checked_add(span)) {
            Some(x) => x,
            None => return false,
        };
    }
    true
}

/// Offset of batch entry `z` (row-major over `dims`) under `strides`.
fn batch_offset(mut z: usize, dims: &[usize], strides: &[usize]) -> usize {
    let mut off = 0;
    for (&n, &s) in dims.iter().zip(strides).rev() {
        off += (z % n) * s;
        z /= n;
    }
    off
}

/// `y` (viewed by `yv`) = softmax(steps(Q · Kᵀ)) · V for every batch entry. `scratch` holds
/// [`scratch_len`] elements (used when the work stays on this thread).
///
/// # Panics
/// When a view's rank differs from the batch's, a view reaches past its buffer, the output
/// view maps two elements to one place, or `scratch` is short.
#[allow(clippy::too_many_arguments)]
pub fn attention(dims: &Dims, q: Matrix, kt: Matrix, v: Matrix, steps: &[Step], y: &mut [f32], yv: View, scratch: &mut [f32]) {
    let Dims { batch, sq, sk, d, dv } = *dims;
    let zs: usize = batch.iter().product();
    if zs == 0 || sq == 0 || dv == 0 {
        return;
    }
    let rank = batch.len();
    let fits = |m: &Matrix, r: usize, c: usize| m.view.batch.len() == rank && extent(&m.view, batch, r, c).is_some_and(|e| e <= m.data.len());
    assert!(fits(&q, sq, d) && fits(&kt, d, sk) && fits(&v, sk, dv), "attention: an operand's view reaches past its buffer");
    for s in steps {
        if let Step::Add(m) = s {
            assert!(fits(m, sq, sk), "attention: the bias's view reaches past its buffer");
        }
    }
    assert!(yv.batch.len() == rank && extent(&yv, batch, sq, dv).is_some_and(|e| e <= y.len()), "attention: the output view reaches past its buffer");
    let mut ydims = [0usize; 18];
    assert!(rank + 2 <= ydims.len(), "attention: at most 16 batch dims");
    ydims[..rank].copy_from_slice(batch);
    ydims[rank] = sq;
    ydims[rank + 1] = dv;
    assert!(injective(&yv, &ydims[..rank + 2]), "attention: the output view overlaps itself");
    if sk == 0 {
        // No keys: an empty softmax, and a product over nothing.
        for z in 0..zs {
            let base = batch_offset(z, batch, yv.batch);
            for i in 0..sq {
                for c in 0..dv {
                    y[base + i * yv.rows + c * yv.cols] = 0.0;
                }
            }
        }
        return;
    }
    let need = scratch_len(dims, &q.view, &kt.view, &v.view);
    let r = block_rows(sq, sk);
    let blocks = sq.div_ceil(r);
    let units = zs * blocks;
    let scale = steps.iter().try_fold(1.0f32, |c, s| match s {
        Step::Mul(m) => Some(c * m),
        Step::Div(d) => Some(c / d),
        Step::Add(_) => None,
    });
    let scale = scale.filter(|c| c.is_finite() && *c > 0.0);
    let job = Job { dims: *dims, q, kt, v, steps, yv, y: super::SendPtr(y.as_mut_ptr()), scale, r, blocks };
    #[cfg(feature = "std")]
    {
        let work = zs.saturating_mul(sq).saturating_mul(sk).saturating_mul(d + dv);
        let threads = crate::pool::threads();
        if threads > 1 && units >= 2 && work >= crate::PARALLEL_WORK {
            let tasks = units.min(threads * 2);
            let per = units.div_ceil(tasks);
            crate::pool::parallel_for(units.div_ceil(per), &|t| {
                with_task_scratch(need, |s| job.run(t * per, ((t + 1) * per).min(units), s));
            });
            return;
        }
    }
    assert!(scratch.len() >= need, "attention: scratch too short");
    job.run(0, units, &mut scratch[..need]);
}

/// One task's buffer of `len` elements under std, this thread's own, kept between calls.
#[cfg(feature = "std")]
fn with_task_scratch(len: usize, f: impl FnOnce(&mut [f32])) {
    std::thread_local! {
        static BUF: core::cell::RefCell<std::vec::Vec<f32>> = const { core::cell::RefCell::new(std::vec::Vec::new()) };
    }
    super::with_thread_buffer(&BUF, len, f)
}

/// What every task shares: the operands and where the output goes.
struct Job<'a> {
    dims: Dims<'a>,
    q: Matrix<'a>,
    kt: Matrix<'a>,
    v: Matrix<'a>,
    steps: &'a [Step<'a>],
    yv: View<'a>,
    y: super::SendPtr,
    /// The steps as one factor, when they are all scalar multiplications and divisions whose
    /// product is positive: then `e^((s − max s)·c)` is the softmax of `s·c` without a pass.
    scale: Option<f32>,
    /// Rows per block and blocks per batch entry.
    r: usize,
    blocks: usize,
}

impl Job<'_> {
    /// Units `u0..u1` (batch entry `u / blocks`, rows block `u % blocks`) on this thread.
    fn run(&self, u0: usize, u1: usize, scratch: &mut [f32]) {
        let Dims { batch, sq, sk, d, dv } = self.dims;
        let r = self.r;
        let [kt_len, v_len, q_len] = copies(&self.dims, &self.q.view, &self.kt.view, &self.v.view, r);
        let (kt_buf, rest) = scratch.split_at_mut(kt_len);
        let (v_buf, rest) = rest.split_at_mut(v_len);
        let (q_buf, rest) = rest.split_at_mut(q_len);
        let (s, rest) = rest.split_at_mut(r * sk);
        let (o, rest) = rest.split_at_mut(r * dv);
        let (inv, gemm) = rest.split_at_mut(r);
        let direct = |m: &Matrix, width: usize| direct(&m.view, width);
        let mut loaded = usize::MAX;
        for u in u0..u1 {
            let (z, i0) = (u / self.blocks, (u % self.blocks) * r);
            let rows = r.min(sq - i0);
            let off = |m: &View| batch_offset(z, batch, m.batch);
            let (qo, kto, vo) = (off(&self.q.view), off(&self.kt.view), off(&self.v.view));
            // Kᵀ and V once per batch entry, when they are not rows the GEMM can read.
            if loaded != z {
                if !direct(&self.kt, sk) {
                    copy_matrix(&self.kt, kto, d, sk, kt_buf);
                }
                if !direct(&self.v, dv) {
                    copy_matrix(&self.v, vo, sk, dv, v_buf);
                }
                loaded = z;
            }
            let (ktm, ldk): (&[f32], usize) = if direct(&self.kt, sk) { (&self.kt.data[kto..], self.kt.view.rows) } else { (kt_buf, sk) };
            let (vm, ldv): (&[f32], usize) = if direct(&self.v, dv) { (&self.v.data[vo..], self.v.view.rows) } else { (v_buf, dv) };
            let qstart = qo + i0 * self.q.view.rows;
            let (qm, ldq): (&[f32], usize) = if direct(&self.q, d) {
                (&self.q.data[qstart..], self.q.view.rows)
            } else {
                copy_matrix(&self.q, qstart, rows, d, q_buf);
                (q_buf, d)
            };
            let s = &mut s[..rows * sk];
            packed::sgemm_packed(rows, d, sk, qm, ldq, ktm, ldk, s, sk, gemm);
            for (ri, line) in s.chunks_exact_mut(sk).enumerate() {
                let scale = match self.scale {
                    Some(c) => c,
                    None => {
                        self.apply_steps(z, i0 + ri, line);
                        1.0
                    }
                };
                inv[ri] = 1.0 / super::vexp::exp_shifted(line, scale);
            }
            packed::sgemm_packed(rows, sk, dv, s, sk, vm, ldv, &mut o[..rows * dv], dv, gemm);
            let yo = off(&self.yv);
            for (ri, line) in o[..rows * dv].chunks_exact(dv).enumerate() {
                let base = yo + (i0 + ri) * self.yv.rows;
                for (c, &val) in line.iter().enumerate() {
                    // SAFETY: inside `y` (`attention` checked the view's extent); rows of
                    // distinct units are distinct elements (the view is injective), and only
                    // this unit writes these.
                    unsafe { self.y.at(base + c * self.yv.cols).write(val * inv[ri]) };
                }
            }
        }
    }

    /// The steps on scores row `i` of batch entry `z`.
    fn apply_steps(&self, z: usize, i: usize, line: &mut [f32]) {
        for st in self.steps {
            match *st {
                Step::Mul(c) => line.iter_mut().for_each(|x| *x *= c),
                Step::Div(c) => line.iter_mut().for_each(|x| *x /= c),
                Step::Add(m) => {
                    let base = batch_offset(z, self.dims.batch, m.view.batch) + i * m.view.rows;
                    let n = line.len();
                    match m.view.cols {
                        0 => {
                            let b = m.data[base];
                            line.iter_mut().for_each(|x| *x += b);
                        }
                        1 => line.iter_mut().zip(&m.data[base..base + n]).for_each(|(x, b)| *x += b),
                        cs => line.iter_mut().enumerate().for_each(|(j, x)| *x += m.data[base + j * cs]),
                    }
                }
            }
        }
    }
}

/// `rows × cols` of `m` from offset `at` into `out`, row-major.
fn copy_matrix(m: &Matrix, at: usize, rows: usize, cols: usize, out: &mut [f32]) {
    for (i, line) in out[..rows * cols].chunks_exact_mut(cols).enumerate() {
        let base = at + i * m.view.rows;
        for (j, x) in line.iter_mut().enumerate() {
            *x = m.data[base + j * m.view.cols];
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::{vec, vec::Vec};

    fn data(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 - 1001.0) / 500.0).collect()
    }

    /// The graph's way: scores, steps, softmax in f64, then the product.
    #[allow(clippy::too_many_arguments)]
    fn reference(dims: &Dims, q: &Matrix, kt: &Matrix, v: &Matrix, steps: &[Step], yv: &View, ylen: usize) -> Vec<f64> {
        let zs: usize = dims.batch.iter().product();
        let mut y = vec![f64::NAN; ylen];
        for z in 0..zs {
            let at = |m: &View, r: usize, c: usize| batch_offset(z, dims.batch, m.batch) + r * m.rows + c * m.cols;
            for i in 0..dims.sq {
                let mut s: Vec<f64> = (0..dims.sk)
                    .map(|j| (0..dims.d).map(|p| q.data[at(&q.view, i, p)] as f64 * kt.data[at(&kt.view, p, j)] as f64).sum())
                    .collect();
                for st in steps {
                    for (j, x) in s.iter_mut().enumerate() {
                        match st {
                            Step::Mul(c) => *x *= *c as f64,
                            Step::Div(c) => *x /= *c as f64,
                            Step::Add(m) => *x += m.data[at(&m.view, i, j)] as f64,
                        }
                    }
                }
                let max = s.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for c in 0..dims.dv {
                    y[at(yv, i, c)] = (0..dims.sk).map(|j| e[j] / sum * v.data[at(&v.view, j, c)] as f64).sum();
                }
            }
        }
        y
    }

    /// Heads split from `[seq, heads · d]` rows (the transposes of an encoder), Kᵀ read
    /// through strides, a broadcast mask and a scale; several row blocks (960 keys), and the
    /// contiguous layout; at one thread and split over the pool.
    #[test]
    fn matches_the_unfused_computation() {
        for (heads, sq, sk, d, dv) in [(2usize, 7usize, 5usize, 3usize, 4usize), (2, 130, 960, 32, 32), (3, 64, 64, 16, 8)] {
            let (qd, kd, vd) = (data(sq * heads * d, 1), data(sk * heads * d, 2), data(sk * heads * dv, 3));
            let mask = data(sk, 4);
            let batch = [1, heads];
            let (qb, kb, vb, yb) = ([0, d], [0, d], [0, dv], [0, dv]);
            let q = Matrix { data: &qd, view: View { batch: &qb, rows: heads * d, cols: 1 } };
            // Kᵀ[p][j] = K[j][h·d + p].
            let kt = Matrix { data: &kd, view: View { batch: &kb, rows: 1, cols: heads * d } };
            let v = Matrix { data: &vd, view: View { batch: &vb, rows: heads * dv, cols: 1 } };
            let mb = [0, 0];
            let steps = [Step::Div(5.5), Step::Add(Matrix { data: &mask, view: View { batch: &mb, rows: 0, cols: 1 } }), Step::Mul(1.5)];
            let yv = View { batch: &yb, rows: heads * dv, cols: 1 };
            let dims = Dims { batch: &batch, sq, sk, d, dv };
            let want = reference(&dims, &q, &kt, &v, &steps, &yv, sq * heads * dv);
            for threads in [1, 2] {
                #[cfg(feature = "std")]
                crate::pool::set_threads(threads);
                let mut y = vec![0f32; sq * heads * dv];
                let mut scratch = vec![0f32; scratch_len(&dims, &q.view, &kt.view, &v.view)];
                attention(&dims, q, kt, v, &steps, &mut y, yv, &mut scratch);
                for (i, (&g, &w)) in y.iter().zip(&want).enumerate() {
                    assert!((g as f64 - w).abs() <= 1e-5 + 1e-4 * w.abs(), "{heads}×{sq}×{sk}×{d}×{dv} at {threads} threads, element {i}: {g} vs {w}");
                }
            }
            #[cfg(feature = "std")]
            crate::pool::set_threads(1);
        }
    }

    #[test]
    fn refuses_views_past_their_buffers_and_overlapping_outputs() {
        let x = data(64, 1);
        let b = [0usize];
        let m = |rows, cols| Matrix { data: &x, view: View { batch: &b, rows, cols } };
        let dims = Dims { batch: &[1], sq: 4, sk: 4, d: 4, dv: 4 };
        let run = |q: Matrix, yv: View| {
            let mut y = vec![0f32; 16];
            let mut s = vec![0f32; scratch_len(&dims, &q.view, &m(4, 1).view, &m(4, 1).view)];
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| attention(&dims, q, m(4, 1), m(4, 1), &[], &mut y, yv, &mut s))).is_ok()
        };
        assert!(run(m(4, 1), View { batch: &b, rows: 4, cols: 1 }));
        assert!(!run(m(40, 1), View { batch: &b, rows: 4, cols: 1 }), "Q past its buffer");
        assert!(!run(m(4, 1), View { batch: &b, rows: 1, cols: 1 }), "output rows overlapping");
        assert!(!run(m(4, 1), View { batch: &b, rows: 5, cols: 1 }), "output past its buffer");
    }
}
