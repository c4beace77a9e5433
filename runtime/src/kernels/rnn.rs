//! Recurrent layers (ONNX RNN, GRU, LSTM): one kernel for the three cells, all directions,
//! both layouts, per-batch sequence lengths, optional initial states, peepholes and clipping.
//! The state of one batch row is carried through its sequence in `scratch`, row by row.
use super::real::{dot, Real};
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
    /// Evaluated in f64 whatever the storage type, so f32 and f64 share one formula.
    pub fn apply<R: Real>(self, x: R) -> R {
        let v = x.to_f64();
        let r = match self {
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
        };
        R::from_f64(r)
    }
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

/// Scratch elements [`rnn`] needs: state h, c, the gates and one more hidden-sized row.
pub const fn scratch_len(cell: Cell, hidden: usize) -> usize {
    (3 + cell.gates()) * hidden
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
pub fn rnn<R: Real>(d: &Dims, acts: &[Act], inp: &Inputs<'_, R>, out: &mut Outputs<'_, R>, scratch: &mut [R]) {
    let (hs, is, g) = (d.hidden, d.input, d.cell.gates());
    let dirs = d.direction.count();
    let na = d.cell.acts();
    let (h, rest) = scratch.split_at_mut(hs);
    let (c, rest) = rest.split_at_mut(hs);
    let (gates, tmp) = rest.split_at_mut(g * hs);
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
    for dir in 0..dirs {
        let w = &inp.w[dir * g * hs * is..(dir + 1) * g * hs * is];
        let r = &inp.r[dir * g * hs * hs..(dir + 1) * g * hs * hs];
        let bias = inp.b.map(|b| &b[dir * 2 * g * hs..(dir + 1) * 2 * g * hs]);
        let peep = inp.p.map(|p| &p[dir * 3 * hs..(dir + 1) * 3 * hs]);
        let a = &acts[dir * na..(dir + 1) * na];
        // Sum of the input and recurrence biases of gate row j.
        let bsum = |j: usize| bias.map_or(zero, |b| b[j].add(b[g * hs + j]));
        for b in 0..d.batch {
            let len = inp.seq_lens.map_or(d.seq, |s| (s[b].max(0) as usize).min(d.seq));
            let st = st_at(dir, b);
            match inp.h0 {
                Some(h0) => h.copy_from_slice(&h0[st..st + hs]),
                None => h.fill(zero),
            }
            match inp.c0 {
                Some(c0) => c.copy_from_slice(&c0[st..st + hs]),
                None => c.fill(zero),
            }
            for step in 0..len {
                let t = if d.direction.backwards(dir) { len - 1 - step } else { step };
                let xt = &inp.x[x_at(t, b)..x_at(t, b) + is];
                match d.cell {
                    Cell::Rnn => {
                        for (j, gj) in gates.iter_mut().enumerate() {
                            let v = dot(&w[j * is..(j + 1) * is], xt).add(dot(&r[j * hs..(j + 1) * hs], h)).add(bsum(j));
                            *gj = a[0].apply(clip(v, d.clip));
                        }
                        h.copy_from_slice(gates);
                    }
                    Cell::Lstm { input_forget } => {
                        for (j, gj) in gates.iter_mut().enumerate() {
                            *gj = dot(&w[j * is..(j + 1) * is], xt).add(dot(&r[j * hs..(j + 1) * hs], h)).add(bsum(j));
                        }
                        let pk = |k: usize, j: usize| peep.map_or(zero, |p| p[k * hs + j]);
                        for j in 0..hs {
                            let cj = c[j];
                            let f = a[0].apply(clip(gates[2 * hs + j].add(pk(2, j).mul(cj)), d.clip));
                            let i = if input_forget {
                                one.sub(f)
                            } else {
                                a[0].apply(clip(gates[j].add(pk(0, j).mul(cj)), d.clip))
                            };
                            let cand = a[1].apply(clip(gates[3 * hs + j], d.clip));
                            let cn = f.mul(cj).add(i.mul(cand));
                            let o = a[0].apply(clip(gates[hs + j].add(pk(1, j).mul(cn)), d.clip));
                            c[j] = cn;
                            h[j] = o.mul(a[2].apply(cn));
                        }
                    }
                    Cell::Gru { linear_before_reset } => {
                        // z and r from x and h; then the candidate from r.
                        for (j, gj) in gates[..2 * hs].iter_mut().enumerate() {
                            let v = dot(&w[j * is..(j + 1) * is], xt).add(dot(&r[j * hs..(j + 1) * hs], h)).add(bsum(j));
                            *gj = a[0].apply(clip(v, d.clip));
                        }
                        for j in 0..hs {
                            tmp[j] = gates[hs + j].mul(h[j]);
                        }
                        for j in 0..hs {
                            let row = 2 * hs + j;
                            let (wb, rb) = bias.map_or((zero, zero), |bb| (bb[row], bb[g * hs + row]));
                            let wx = dot(&w[row * is..(row + 1) * is], xt);
                            let v = if linear_before_reset {
                                wx.add(gates[hs + j].mul(dot(&r[row * hs..(row + 1) * hs], h).add(rb))).add(wb)
                            } else {
                                wx.add(dot(&r[row * hs..(row + 1) * hs], tmp)).add(rb).add(wb)
                            };
                            gates[row] = a[1].apply(clip(v, d.clip));
                        }
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
        let mut s = vec![0.0; scratch_len(d.cell, d.hidden)];
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
}
