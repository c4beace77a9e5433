//! Recurrent layers (ONNX RNN, GRU, LSTM): one kernel for the three cells, all directions,
//! both layouts, per-batch sequence lengths, optional initial states, peepholes and clipping.
//! The state of one batch row is carried through its sequence in `scratch`, row by row.
use super::real::{matvec_t_add, transpose, Real};
use crate::math;

/// An activation of the ONNX recurrent ops, with its alpha/beta resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Act {
    Relu,
    Tanh,
    Sigmoid,
    /// alpha * x + beta
    Affine(f32, f32),
    LeakyRelu(f32),
    ThresholdedRelu(f32),
    /// alpha * tanh(beta * x)
    ScaledTanh(f32, f32),
    /// clamp(alpha * x + beta, 0, 1)
    HardSigmoid(f32, f32),
    Elu(f32),
    Softsign,
    Softplus,
}

impl Act {
    /// The activation of one value. Sigmoid and Tanh (the common gates) in the storage type
    /// with the runtime's branch-free `exp`/`tanh`, so rows of them vectorize; the rest in f64.
    pub fn apply<R: Real>(self, x: R) -> R {
        match self {
            Act::Tanh => x.tanh(),
            Act::Sigmoid => sigmoid(x),
            Act::Relu => relu(x),
            _ => R::from_f64(self.apply_f64(x.to_f64())),
        }
    }

    /// The activation in f64 (the rarer ones, whatever the storage type).
    fn apply_f64(self, v: f64) -> f64 {
        match self {
            Act::Relu => v.max(0.0),
            Act::Tanh => math::tanh(v),
            Act::Sigmoid => 1.0 / (1.0 + math::exp(-v)),
            Act::Affine(a, b) => a as f64 * v + b as f64,
            Act::LeakyRelu(a) => if v >= 0.0 { v } else { a as f64 * v },
            Act::ThresholdedRelu(a) => if v > a as f64 { v } else { 0.0 },
            Act::ScaledTanh(a, b) => a as f64 * math::tanh(b as f64 * v),
            Act::HardSigmoid(a, b) => (a as f64 * v + b as f64).clamp(0.0, 1.0),
            Act::Elu(a) => if v >= 0.0 { v } else { a as f64 * (math::exp(v) - 1.0) },
            Act::Softsign => v / (1.0 + if v < 0.0 { -v } else { v }),
            Act::Softplus => math::log1p(math::exp(v)),
        }
    }

    /// [`Act::apply`] over a row, the match outside the loop.
    pub fn apply_all<R: Real>(self, xs: &mut [R]) {
        #[inline(always)]
        fn each<R: Real>(xs: &mut [R], f: impl Fn(R) -> R) {
            for v in xs.iter_mut() {
                *v = f(*v);
            }
        }
        match self {
            Act::Tanh => each(xs, |v| v.tanh()),
            Act::Sigmoid => each(xs, sigmoid),
            Act::Relu => each(xs, relu),
            other => each(xs, |v| other.apply(v)),
        }
    }
}

/// 1 / (1 + e^-x), or e^x / (1 + e^x) below 0: one exp of -|x|, no branch.
#[inline(always)]
fn sigmoid<R: Real>(x: R) -> R {
    let zero = R::from_f64(0.0);
    let one = R::from_f64(1.0);
    let e = (if x < zero { x } else { zero.sub(x) }).exp();
    (if x < zero { e } else { one }).div(one.add(e))
}

#[inline(always)]
fn relu<R: Real>(x: R) -> R {
    let zero = R::from_f64(0.0);
    if x > zero { x } else { zero }
}

/// The cell and its cell-specific switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Rnn,
    Gru { linear_before_reset: bool },
    Lstm { input_forget: bool },
}

impl Cell {
    /// Gates stacked in W and R: 1 (RNN), 3 (GRU: z, r, h), 4 (LSTM: i, o, f, c).
    pub const fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 3,
            Cell::Lstm { .. } => 4,
        }
    }
    /// Activations per direction: f (RNN); f, g (GRU); f, g, h (LSTM).
    pub const fn acts(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 2,
            Cell::Lstm { .. } => 3,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Reverse,
    Bidirectional,
}

impl Direction {
    pub const fn count(self) -> usize {
        if matches!(self, Direction::Bidirectional) {
            2
        } else {
            1
        }
    }
    /// Whether direction index `d` runs from the end of each sequence.
    const fn backwards(self, d: usize) -> bool {
        matches!(self, Direction::Reverse) || (matches!(self, Direction::Bidirectional) && d == 1)
    }
}

/// Sizes and options of one recurrent node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dims {
    pub cell: Cell,
    pub direction: Direction,
    pub seq: usize,
    pub batch: usize,
    pub input: usize,
    pub hidden: usize,
    /// layout = 1: X is [batch, seq, input], Y [batch, seq, dirs, hidden], states [batch, dirs, hidden].
    pub batch_first: bool,
    /// Gate pre-activations are clamped to [-clip, clip].
    pub clip: Option<f32>,
}

/// Inputs, in the ONNX shapes (see [`Dims::batch_first`]); optional ones default to zeros
/// (sequence lengths to `seq`).
pub struct Inputs<'a, R> {
    pub x: &'a [R],
    /// [dirs, gates·hidden, input]
    pub w: &'a [R],
    /// [dirs, gates·hidden, hidden]
    pub r: &'a [R],
    /// [dirs, 2·gates·hidden]: input biases, then recurrence biases.
    pub b: Option<&'a [R]>,
    /// [batch]; values outside 0..=seq are clamped.
    pub seq_lens: Option<&'a [i32]>,
    pub h0: Option<&'a [R]>,
    pub c0: Option<&'a [R]>,
    /// [dirs, 3·hidden]: peepholes of the i, o, f gates (LSTM).
    pub p: Option<&'a [R]>,
}

/// Outputs; any may be absent. Steps past a row's sequence length are zero in `y`.
pub struct Outputs<'a, R> {
    pub y: Option<&'a mut [R]>,
    pub y_h: Option<&'a mut [R]>,
    pub y_c: Option<&'a mut [R]>,
}

/// Steps whose input projections `W·x` one GEMM computes together.
pub const STEP_BLOCK: usize = 32;

/// Scratch elements [`rnn`] needs: state h, c, the gates, one more hidden-sized row, the
/// summed biases, one direction's R transposed, for a block of up to [`STEP_BLOCK`] steps
/// their inputs and input projections, and room for W transposed or the projections
/// transposed (see `rnn`).
pub const fn scratch_len(cell: Cell, hidden: usize, input: usize, seq: usize) -> usize {
    let block = if seq < STEP_BLOCK { seq } else { STEP_BLOCK };
    let rows = cell.gates().saturating_mul(hidden);
    let per_step = block.saturating_mul(rows.saturating_add(input));
    let (wt, projt) = (rows.saturating_mul(input), block.saturating_mul(rows));
    let aux = if wt > projt { wt } else { projt };
    hidden.saturating_mul(3).saturating_add(rows.saturating_mul(2)).saturating_add(rows.saturating_mul(hidden)).saturating_add(per_step).saturating_add(aux)
}

fn clip<R: Real>(v: R, c: Option<f32>) -> R {
    match c {
        Some(c) => {
            let (lo, hi) = (R::from_f64(-(c as f64)), R::from_f64(c as f64));
            if v < lo {
                lo
            } else if v > hi {
                hi
            } else {
                v
            }
        }
        None => v,
    }
}

/// Run the recurrence. `acts` holds `cell.acts()` activations per direction, forward first.
///
/// For each direction and batch row, the steps go in blocks of [`STEP_BLOCK`]: one GEMM gives
/// `W·x` for the block's steps (the bulk of the arithmetic when the input is wide), then each
/// step adds the biases (summed once per direction) and `R·h` (from R transposed once per
/// direction, [`matvec_t_add`]) and applies the gates, each activation over a whole gate row
/// where no peephole ties the gates to the cell state.
pub fn rnn<R: Real>(d: &Dims, acts: &[Act], inp: &Inputs<'_, R>, out: &mut Outputs<'_, R>, scratch: &mut [R]) {
    let (hs, is, g) = (d.hidden, d.input, d.cell.gates());
    let dirs = d.direction.count();
    let na = d.cell.acts();
    let block = d.seq.min(STEP_BLOCK);
    let (h, rest) = scratch.split_at_mut(hs);
    let (c, rest) = rest.split_at_mut(hs);
    let (gates, rest) = rest.split_at_mut(g * hs);
    let (tmp, rest) = rest.split_at_mut(hs);
    let (bsum, rest) = rest.split_at_mut(g * hs);
    let (rt, rest) = rest.split_at_mut(g * hs * hs);
    let (proj, rest) = rest.split_at_mut(block * g * hs);
    let (xt, aux) = rest.split_at_mut(block * is);
    let x_at = |t: usize, b: usize| if d.batch_first { (b * d.seq + t) * is } else { (t * d.batch + b) * is };
    let y_at = |t: usize, dir: usize, b: usize| {
        if d.batch_first {
            ((b * d.seq + t) * dirs + dir) * hs
        } else {
            ((t * dirs + dir) * d.batch + b) * hs
        }
    };
    let st_at = |dir: usize, b: usize| if d.batch_first { (b * dirs + dir) * hs } else { (dir * d.batch + b) * hs };
    let zero = R::from_f64(0.0);
    let one = R::from_f64(1.0);
    // Gate rows that take R·h and the recurrence bias with the input: all but GRU's candidate
    // rows (h enters those after the reset gate).
    let rows_with_h = if matches!(d.cell, Cell::Gru { .. }) { 2 * hs } else { g * hs };
    for dir in 0..dirs {
        let w = &inp.w[dir * g * hs * is..(dir + 1) * g * hs * is];
        let r = &inp.r[dir * g * hs * hs..(dir + 1) * g * hs * hs];
        let bias = inp.b.map(|b| &b[dir * 2 * g * hs..(dir + 1) * 2 * g * hs]);
        let peep = inp.p.map(|p| &p[dir * 3 * hs..(dir + 1) * 3 * hs]);
        let a = &acts[dir * na..(dir + 1) * na];
        // Column k of R as row k of `rt` (`g·hs` apart): R·h then walks contiguous columns.
        transpose(r, g * hs, hs, rt);
        let ld = g * hs;
        // Each step reads its gate rows' projections contiguously: from a product that gives
        // them one step per row (x rows · Wᵀ) when Wᵀ, made here on every call, costs no more
        // than transposing every block's projections (inputs no wider than the sequence is
        // long: a voice model's 40 features over 100 steps), else from the product W · xᵀ
        // transposed block by block (a CRNN's 2048-wide inputs).
        let w_rows = is <= d.seq;
        if w_rows {
            transpose(w, g * hs, is, &mut aux[..g * hs * is]);
        }
        for (j, s) in bsum.iter_mut().enumerate() {
            *s = bias.map_or(zero, |bb| if j < rows_with_h { bb[j].add(bb[g * hs + j]) } else { bb[j] });
        }
        for b in 0..d.batch {
            let len = inp.seq_lens.map_or(d.seq, |s| (s[b].max(0) as usize).min(d.seq));
            let time = |step: usize| if d.direction.backwards(dir) { len - 1 - step } else { step };
            let st = st_at(dir, b);
            match inp.h0 {
                Some(h0) => h.copy_from_slice(&h0[st..st + hs]),
                None => h.fill(zero),
            }
            match inp.c0 {
                Some(c0) => c.copy_from_slice(&c0[st..st + hs]),
                None => c.fill(zero),
            }
            for s0 in (0..len).step_by(block.max(1)) {
                let nb = block.min(len - s0);
                let step_rows: &[R] = if w_rows {
                    // The block's inputs as rows, times Wᵀ: `proj[q·g·hs + j]` is gate row j
                    // at step s0 + q.
                    for q in 0..nb {
                        xt[q * is..(q + 1) * is].copy_from_slice(&inp.x[x_at(time(s0 + q), b)..][..is]);
                    }
                    R::matmul(nb, is, g * hs, &xt[..nb * is], &aux[..g * hs * is], &mut proj[..nb * g * hs]);
                    &proj[..nb * g * hs]
                } else {
                    // The inputs as columns, W·x (`proj[j·nb + q]`), then transposed.
                    for q in 0..nb {
                        let x = &inp.x[x_at(time(s0 + q), b)..][..is];
                        for (k, &v) in x.iter().enumerate() {
                            xt[k * nb + q] = v;
                        }
                    }
                    R::matmul(g * hs, is, nb, w, &xt[..is * nb], &mut proj[..g * hs * nb]);
                    transpose(&proj[..g * hs * nb], g * hs, nb, &mut aux[..nb * g * hs]);
                    &aux[..nb * g * hs]
                };
                for q in 0..nb {
                    let t = time(s0 + q);
                    // Pre-activations of the gates from x, h and both biases.
                    for ((gj, &pj), &bj) in gates.iter_mut().zip(&step_rows[q * g * hs..(q + 1) * g * hs]).zip(bsum.iter()) {
                        *gj = pj.add(bj);
                    }
                    matvec_t_add(rt, ld, h, &mut gates[..rows_with_h]);
                    match d.cell {
                        Cell::Rnn => {
                            activate(a[0], d.clip, gates);
                            h.copy_from_slice(gates);
                        }
                        Cell::Lstm { input_forget } => lstm_step(gates, c, h, tmp, a, d.clip, peep, input_forget),
                        Cell::Gru { linear_before_reset } => {
                            // z and r; then the candidate from r.
                            activate(a[0], d.clip, &mut gates[..2 * hs]);
                            let rb = |row: usize| bias.map_or(zero, |bb| bb[g * hs + row]);
                            let r_c = &rt[2 * hs..];
                            if linear_before_reset {
                                // r ⊙ (R_c·h + Rb_c)
                                tmp.fill(zero);
                                matvec_t_add(r_c, ld, h, tmp);
                                for j in 0..hs {
                                    let row = 2 * hs + j;
                                    gates[row] = gates[row].add(gates[hs + j].mul(tmp[j].add(rb(row))));
                                }
                            } else {
                                // R_c·(r ⊙ h) + Rb_c
                                for j in 0..hs {
                                    tmp[j] = gates[hs + j].mul(h[j]);
                                }
                                for j in 0..hs {
                                    let row = 2 * hs + j;
                                    gates[row] = gates[row].add(rb(row));
                                }
                                matvec_t_add(r_c, ld, tmp, &mut gates[2 * hs..]);
                            }
                            activate(a[1], d.clip, &mut gates[2 * hs..]);
                            for j in 0..hs {
                                let z = gates[j];
                                h[j] = one.sub(z).mul(gates[2 * hs + j]).add(z.mul(h[j]));
                            }
                        }
                    }
                    if let Some(y) = out.y.as_deref_mut() {
                        let o = y_at(t, dir, b);
                        y[o..o + hs].copy_from_slice(h);
                    }
                }
            }
            if let Some(y) = out.y.as_deref_mut() {
                for t in len..d.seq {
                    let o = y_at(t, dir, b);
                    y[o..o + hs].fill(zero);
                }
            }
            if let Some(yh) = out.y_h.as_deref_mut() {
                yh[st..st + hs].copy_from_slice(h);
            }
            if let Some(yc) = out.y_c.as_deref_mut() {
                yc[st..st + hs].copy_from_slice(c);
            }
        }
    }
}

/// `xs = act(clip(xs))`, the activation chosen once for the whole row.
fn activate<R: Real>(act: Act, c: Option<f32>, xs: &mut [R]) {
    if c.is_some() {
        for v in xs.iter_mut() {
            *v = clip(*v, c);
        }
    }
    act.apply_all(xs);
}

/// One LSTM step from the gates' pre-activations `[i, o, f, c]` (x, h and biases in): the new
/// cell state in `c`, the new hidden state in `h`.
#[allow(clippy::too_many_arguments)]
fn lstm_step<R: Real>(gates: &mut [R], c: &mut [R], h: &mut [R], tmp: &mut [R], a: &[Act], cl: Option<f32>, peep: Option<&[R]>, input_forget: bool) {
    let hs = c.len();
    let one = R::from_f64(1.0);
    let Some(p) = peep else {
        // No peepholes: every gate is a function of its own pre-activation, one row at a time.
        activate(a[0], cl, &mut gates[..3 * hs]);
        activate(a[1], cl, &mut gates[3 * hs..]);
        let (i, rest) = gates.split_at(hs);
        let (o, rest) = rest.split_at(hs);
        let (f, cand) = rest.split_at(hs);
        for j in 0..hs {
            let ij = if input_forget { one.sub(f[j]) } else { i[j] };
            c[j] = f[j].mul(c[j]).add(ij.mul(cand[j]));
        }
        tmp.copy_from_slice(c);
        a[2].apply_all(tmp);
        for j in 0..hs {
            h[j] = o[j].mul(tmp[j]);
        }
        return;
    };
    for j in 0..hs {
        let cj = c[j];
        let f = a[0].apply(clip(gates[2 * hs + j].add(p[2 * hs + j].mul(cj)), cl));
        let i = if input_forget { one.sub(f) } else { a[0].apply(clip(gates[j].add(p[j].mul(cj)), cl)) };
        let cand = a[1].apply(clip(gates[3 * hs + j], cl));
        let cn = f.mul(cj).add(i.mul(cand));
        let o = a[0].apply(clip(gates[hs + j].add(p[hs + j].mul(cn)), cl));
        c[j] = cn;
        h[j] = o.mul(a[2].apply(cn));
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn run(d: &Dims, acts: &[Act], inp: &Inputs<'_, f64>) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let dirs = d.direction.count();
        let mut y = vec![9.0; d.seq * dirs * d.batch * d.hidden];
        let mut yh = vec![9.0; dirs * d.batch * d.hidden];
        let mut yc = yh.clone();
        let mut s = vec![0.0; scratch_len(d.cell, d.hidden, d.input, d.seq)];
        rnn(d, acts, inp, &mut Outputs { y: Some(&mut y), y_h: Some(&mut yh), y_c: Some(&mut yc) }, &mut s);
        (y, yh, yc)
    }

    fn dims(cell: Cell, direction: Direction, seq: usize, batch: usize) -> Dims {
        Dims { cell, direction, seq, batch, input: 1, hidden: 1, batch_first: false, clip: None }
    }

    fn inputs<'a>(x: &'a [f64], w: &'a [f64], r: &'a [f64]) -> Inputs<'a, f64> {
        Inputs { x, w, r, b: None, seq_lens: None, h0: None, c0: None, p: None }
    }

    #[test]
    fn rnn_by_hand_with_sequence_lengths() {
        // h_t = tanh(0.5 x_t + 2 h_{t-1}); row 1 stops after one step.
        let d = dims(Cell::Rnn, Direction::Forward, 2, 2);
        let x = [1.0, -1.0, 2.0, 3.0]; // [seq=2, batch=2, 1]
        let lens = [2, 1];
        let inp = Inputs { seq_lens: Some(&lens), ..inputs(&x, &[0.5], &[2.0]) };
        let (y, yh, _) = run(&d, &[Act::Tanh], &inp);
        let h0 = libm::tanh(0.5);
        let h1 = libm::tanh(1.0 + 2.0 * h0);
        let g0 = libm::tanh(-0.5);
        assert_eq!(y, vec![h0, g0, h1, 0.0]);
        assert_eq!(yh, vec![h1, g0]);
    }

    #[test]
    fn reverse_starts_at_each_rows_last_step() {
        // With lengths, the reverse direction starts at step len-1, not at seq-1.
        let d = dims(Cell::Rnn, Direction::Reverse, 3, 1);
        let x = [1.0, 2.0, 100.0];
        let lens = [2];
        let inp = Inputs { seq_lens: Some(&lens), ..inputs(&x, &[1.0], &[1.0]) };
        let (y, yh, _) = run(&d, &[Act::Affine(1.0, 0.0)], &inp);
        assert_eq!(y, vec![3.0, 2.0, 0.0]);
        assert_eq!(yh, vec![3.0]);
    }

    #[test]
    fn clip_bounds_the_pre_activation() {
        let d = Dims { clip: Some(0.5), ..dims(Cell::Rnn, Direction::Forward, 1, 1) };
        let (y, _, _) = run(&d, &[Act::Affine(1.0, 0.0)], &inputs(&[10.0], &[1.0], &[0.0]));
        assert_eq!(y, vec![0.5]);
    }

    #[test]
    fn gru_linear_before_reset_by_hand() {
        // z = r = sigmoid(0) = 0.5 with zero W/R rows for z and r; candidate row W=1, R=2, Rb=1.
        let w = [0.0, 0.0, 1.0];
        let r = [0.0, 0.0, 2.0];
        let b = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        let h0 = [1.0];
        for lbr in [false, true] {
            let d = dims(Cell::Gru { linear_before_reset: lbr }, Direction::Forward, 1, 1);
            let inp = Inputs { b: Some(&b), h0: Some(&h0), ..inputs(&[3.0], &w, &r) };
            let (_, yh, _) = run(&d, &[Act::Sigmoid, Act::Tanh], &inp);
            // default: tanh(3 + 2·(0.5·1) + 1); linear_before_reset: tanh(3 + 0.5·(2·1 + 1)).
            let cand = if lbr { libm::tanh(3.0 + 0.5 * 3.0) } else { libm::tanh(3.0 + 1.0 + 1.0) };
            assert!((yh[0] - (0.5 * cand + 0.5 * 1.0)).abs() < 1e-12, "lbr={lbr}: {}", yh[0]);
        }
    }

    #[test]
    fn lstm_bidirectional_and_batch_first_agree() {
        // The same data in both layouts gives the same values, permuted.
        let (seq, batch) = (2, 2);
        let x = [0.1, 0.2, 0.3, 0.4]; // [seq, batch, 1]
        let xb = [0.1, 0.3, 0.2, 0.4]; // [batch, seq, 1]
        let w: Vec<f64> = (0..8).map(|i| 0.1 * i as f64 - 0.3).collect();
        let r: Vec<f64> = (0..8).map(|i| 0.05 * i as f64).collect();
        let acts = [Act::Sigmoid, Act::Tanh, Act::Tanh, Act::Sigmoid, Act::Tanh, Act::Tanh];
        let d = dims(Cell::Lstm { input_forget: false }, Direction::Bidirectional, seq, batch);
        let (y, yh, yc) = run(&d, &acts, &inputs(&x, &w, &r));
        let (yb, yhb, ycb) = run(&Dims { batch_first: true, ..d }, &acts, &inputs(&xb, &w, &r));
        for t in 0..seq {
            for dir in 0..2 {
                for b in 0..batch {
                    assert_eq!(y[(t * 2 + dir) * batch + b], yb[(b * seq + t) * 2 + dir]);
                }
            }
        }
        for dir in 0..2 {
            for b in 0..batch {
                assert_eq!(yh[dir * batch + b], yhb[b * 2 + dir]);
                assert_eq!(yc[dir * batch + b], ycb[b * 2 + dir]);
            }
        }
        // The backward direction's final state is its value at step 0.
        assert_eq!(yh[batch], y[2]);
    }

    /// A bidirectional LSTM over more steps than one projection block, rows of different
    /// lengths, against the cell equations written out step by step (in f64).
    #[test]
    fn lstm_over_several_step_blocks_matches_the_equations() {
        // Inputs narrower than the sequence (x rows · Wᵀ) and wider (W · xᵀ, transposed).
        for is in [5, 2 * STEP_BLOCK + 9] {
            let (seq, batch, hs) = (2 * STEP_BLOCK + 7, 2, 3);
            let d = Dims { input: is, hidden: hs, ..dims(Cell::Lstm { input_forget: false }, Direction::Bidirectional, seq, batch) };
            let val = |i: usize, salt: usize| (((i * 7919 + salt * 104_729) % 1000) as f64 - 500.0) / 900.0;
            let x: Vec<f64> = (0..seq * batch * is).map(|i| val(i, 1)).collect();
            let w: Vec<f64> = (0..2 * 4 * hs * is).map(|i| val(i, 2)).collect();
            let r: Vec<f64> = (0..2 * 4 * hs * hs).map(|i| val(i, 3)).collect();
            let bias: Vec<f64> = (0..2 * 8 * hs).map(|i| val(i, 4)).collect();
            let lens = [seq as i32, STEP_BLOCK as i32 + 3];
            let inp = Inputs { b: Some(&bias), seq_lens: Some(&lens), ..inputs(&x, &w, &r) };
            let acts = [Act::Sigmoid, Act::Tanh, Act::Tanh, Act::Sigmoid, Act::Tanh, Act::Tanh];
            let (y, yh, yc) = run(&d, &acts, &inp);
            let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
            for dir in 0..2 {
                for b in 0..batch {
                    let len = lens[b] as usize;
                    let (mut h, mut c) = (vec![0.0; hs], vec![0.0; hs]);
                    for step in 0..len {
                        let t = if dir == 1 { len - 1 - step } else { step };
                        let pre = |gate: usize, j: usize| {
                            let row = gate * hs + j;
                            let wx: f64 = (0..is).map(|k| w[(dir * 4 * hs + row) * is + k] * x[(t * batch + b) * is + k]).sum();
                            let rh: f64 = (0..hs).map(|k| r[(dir * 4 * hs + row) * hs + k] * h[k]).sum();
                            wx + rh + bias[dir * 8 * hs + row] + bias[dir * 8 * hs + 4 * hs + row]
                        };
                        let gates: Vec<[f64; 4]> = (0..hs).map(|j| [sig(pre(0, j)), sig(pre(1, j)), sig(pre(2, j)), pre(3, j).tanh()]).collect();
                        for j in 0..hs {
                            let [i, o, f, g] = gates[j];
                            c[j] = f * c[j] + i * g;
                            h[j] = o * c[j].tanh();
                        }
                        for j in 0..hs {
                            let got = y[((t * 2 + dir) * batch + b) * hs + j];
                            assert!((got - h[j]).abs() < 1e-12, "dir {dir} row {b} t {t}: {got} vs {}", h[j]);
                        }
                    }
                    for t in len..seq {
                        assert!((0..hs).all(|j| y[((t * 2 + dir) * batch + b) * hs + j] == 0.0));
                    }
                    for j in 0..hs {
                        assert!((yh[(dir * batch + b) * hs + j] - h[j]).abs() < 1e-12);
                        assert!((yc[(dir * batch + b) * hs + j] - c[j]).abs() < 1e-12);
                    }
                }
            }
        }
    }
}
