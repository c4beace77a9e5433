//! RNN, GRU and LSTM through the runtime's recurrent kernel (f32 and f64).
use super::util::{arg, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{RnnAttrs, RnnCell};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::rnn::{self, Dims, Inputs, Outputs};

/// Sizes of a recurrent node from the shapes of X, W and R, checking the optional inputs'
/// shapes (`opt[i]` is input `3 + i`'s shape: B, sequence_lens, initial_h, initial_c, P).
pub fn resolve_dims(a: &RnnAttrs, x: &[usize], w: &[usize], r: &[usize], opt: &[Option<&[usize]>]) -> Result<Dims, String> {
    let dirs = a.direction.count();
    let g = a.cell.gates();
    let &[d0, d1, input] = x else { return Err(format!("X must have rank 3, got {x:?}")) };
    let (seq, batch) = if a.batch_first { (d1, d0) } else { (d0, d1) };
    let hidden = match (a.hidden_size, r.last()) {
        (Some(h), _) => h,
        (None, Some(&h)) => h,
        (None, None) => return Err("R must have rank 3".into()),
    };
    let want = |name: &str, got: &[usize], exp: &[usize]| -> Result<(), String> {
        if got == exp {
            Ok(())
        } else {
            Err(format!("{name} must have shape {exp:?}, got {got:?}"))
        }
    };
    want("W", w, &[dirs, g * hidden, input])?;
    want("R", r, &[dirs, g * hidden, hidden])?;
    let state: [usize; 3] = if a.batch_first { [batch, dirs, hidden] } else { [dirs, batch, hidden] };
    let is_lstm = matches!(a.cell, RnnCell::Lstm { .. });
    let names = ["B", "sequence_lens", "initial_h", "initial_c", "P"];
    for (i, s) in opt.iter().enumerate() {
        let Some(s) = s else { continue };
        match i {
            0 => want(names[i], s, &[dirs, 2 * g * hidden])?,
            1 => want(names[i], s, &[batch])?,
            2 => want(names[i], s, &state)?,
            3 | 4 if !is_lstm => return Err(format!("{} is an input of LSTM only", names[i])),
            3 => want(names[i], s, &state)?,
            4 => want(names[i], s, &[dirs, 3 * hidden])?,
            _ => return Err(format!("too many inputs ({})", 3 + opt.len())),
        }
    }
    if a.activations.len() != a.cell.acts() * dirs {
        return Err(format!("{} activations for {dirs} direction(s)", a.activations.len()));
    }
    Ok(Dims { cell: a.cell, direction: a.direction, seq, batch, input, hidden, batch_first: a.batch_first, clip: a.clip })
}

/// Output shapes: Y, Y_h, Y_c.
pub fn output_shapes(d: &Dims) -> [Vec<usize>; 3] {
    let dirs = d.direction.count();
    let y = if d.batch_first { vec![d.batch, d.seq, dirs, d.hidden] } else { vec![d.seq, dirs, d.batch, d.hidden] };
    let st = if d.batch_first { vec![d.batch, dirs, d.hidden] } else { vec![dirs, d.batch, d.hidden] };
    [y, st.clone(), st]
}

pub fn eval(a: &RnnAttrs, args: &[Option<RtValue>], n_outputs: usize) -> OpResult {
    let (x, w, r) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
    if n_outputs > 3 || (n_outputs == 3 && !matches!(a.cell, RnnCell::Lstm { .. })) {
        return Err(format!("{} has at most {} outputs", a_name(a), if matches!(a.cell, RnnCell::Lstm { .. }) { 3 } else { 2 }));
    }
    let opt: Vec<Option<&Tensor>> = (3..args.len().max(3)).map(|i| opt_arg(args, i)).collect::<Result<_, _>>()?;
    let shapes: Vec<Option<&[usize]>> = opt.iter().map(|t| t.map(|t| t.shape.as_slice())).collect();
    let d = resolve_dims(a, &x.shape, &w.shape, &r.shape, &shapes)?;
    let get = |i: usize| opt.get(i).copied().flatten();
    let seq_lens: Option<Vec<i32>> = match get(1) {
        Some(t) => {
            let v = t.to_i64_vec().ok_or("sequence_lens must be integers")?;
            if let Some(bad) = v.iter().find(|&&l| l < 0 || l as usize > d.seq) {
                return Err(format!("sequence_lens value {bad} is outside 0..={}", d.seq));
            }
            Some(v.into_iter().map(|l| l as i32).collect())
        }
        None => None,
    };
    let shapes = output_shapes(&d);
    macro_rules! go {
        ($variant:ident, $t:ty) => {{
            let f = |t: &Tensor, name: &str| -> Result<Vec<$t>, String> {
                match &t.data {
                    Data::$variant(v) => Ok(v.clone()),
                    other => Err(format!("{name} must have X's type {}, got {}", x.dtype(), other.dtype())),
                }
            };
            let opt_f = |i: usize, name: &str| get(i).map(|t| f(t, name)).transpose();
            let (xv, wv, rv) = (f(x, "X")?, f(w, "W")?, f(r, "R")?);
            let (bv, h0, c0, pv) = (opt_f(0, "B")?, opt_f(2, "initial_h")?, opt_f(3, "initial_c")?, opt_f(4, "P")?);
            let inp = Inputs {
                x: &xv,
                w: &wv,
                r: &rv,
                b: bv.as_deref(),
                seq_lens: seq_lens.as_deref(),
                h0: h0.as_deref(),
                c0: c0.as_deref(),
                p: pv.as_deref(),
            };
            let mut bufs: Vec<Vec<$t>> = shapes.iter().map(|s| vec![0.0; s.iter().product()]).collect();
            let mut scratch = vec![0.0; rnn::scratch_len(d.cell, d.hidden)];
            {
                let [y, yh, yc] = &mut bufs[..] else { return Err("internal: three output buffers".into()) };
                let mut out = Outputs { y: Some(y), y_h: Some(yh), y_c: Some(yc) };
                rnn::rnn(&d, &a.activations, &inp, &mut out, &mut scratch);
            }
            bufs.into_iter().zip(shapes).take(n_outputs).map(|(b, s)| RtValue::Tensor(Tensor::new(s, Data::$variant(b)))).collect()
        }};
    }
    let outs: Vec<RtValue> = match &x.data {
        Data::F32(_) => go!(F32, f32),
        Data::F64(_) => go!(F64, f64),
        other => return Err(format!("{} on {} is not supported (f32 and f64 are)", a_name(a), other.dtype())),
    };
    Ok(outs)
}

fn a_name(a: &RnnAttrs) -> &'static str {
    match a.cell {
        RnnCell::Rnn => "RNN",
        RnnCell::Gru { .. } => "GRU",
        RnnCell::Lstm { .. } => "LSTM",
    }
}
