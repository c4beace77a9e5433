//! Loss ops (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and RMSNormalization,
//! computed in f64 and returned in the input's type.
use super::util::{arg, broadcast_shapes, broadcast_strides, norm_axis, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{DType, LossReduction, Op};
use crate::tensor::{Data, Tensor};

fn back(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor, String> {
    super::cast::cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    match op {
        Op::NllLoss { softmax, reduction, ignore_index } => nll(args, *softmax, *reduction, *ignore_index),
        Op::RmsNorm { axis, epsilon } => rms_norm(args, *axis, *epsilon),
        _ => Err(format!("{} is not a loss op", op.name())),
    }
}

fn nll(args: &[Option<RtValue>], softmax: bool, reduction: LossReduction, ignore: Option<i64>) -> OpResult {
    let x = arg(args, 0)?;
    let target = arg(args, 1)?;
    let weight = opt_arg(args, 2)?.map(|w| w.to_f64_vec());
    if x.rank() < 2 {
        return Err(format!("input must have rank >= 2, got {:?}", x.shape));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let d: usize = x.shape[2..].iter().product();
    let mut want_t = vec![n];
    want_t.extend_from_slice(&x.shape[2..]);
    if target.shape != want_t {
        return Err(format!("target shape {:?} must be {want_t:?}", target.shape));
    }
    let t = target.to_i64_vec().ok_or("target must be integers")?;
    if let Some(w) = &weight {
        if w.len() != c {
            return Err(format!("weight has {} entries for {c} classes", w.len()));
        }
    }
    let mut xv = x.to_f64_vec();
    if softmax {
        // log-softmax over the class axis.
        for i in 0..n {
            for k in 0..d {
                let at = |j: usize| (i * c + j) * d + k;
                let mx = (0..c).map(|j| xv[at(j)]).fold(f64::NEG_INFINITY, f64::max);
                let lse = mx + (0..c).map(|j| (xv[at(j)] - mx).exp()).sum::<f64>().ln();
                for j in 0..c {
                    xv[at(j)] -= lse;
                }
            }
        }
    }
    let mut loss = vec![0.0f64; n * d];
    let mut wts = vec![1.0f64; n * d];
    for i in 0..n {
        for k in 0..d {
            let tv = t[i * d + k];
            if Some(tv) == ignore {
                wts[i * d + k] = 0.0;
                continue;
            }
            if tv < 0 || tv as usize >= c {
                return Err(format!("target {tv} is out of range for {c} classes"));
            }
            let w = weight.as_ref().map(|w| w[tv as usize]).unwrap_or(1.0);
            wts[i * d + k] = w;
            loss[i * d + k] = -xv[(i * c + tv as usize) * d + k] * w;
        }
    }
    let out = match reduction {
        LossReduction::None => back(x.dtype(), want_t, loss)?,
        LossReduction::Sum => back(x.dtype(), vec![], vec![loss.iter().sum()])?,
        LossReduction::Mean => {
            let denom: f64 = if weight.is_some() || ignore.is_some() { wts.iter().sum() } else { (n * d) as f64 };
            back(x.dtype(), vec![], vec![loss.iter().sum::<f64>() / denom])?
        }
    };
    let mut outs = vec![RtValue::Tensor(out)];
    if softmax {
        outs.push(RtValue::Tensor(back(x.dtype(), x.shape.clone(), xv)?));
    }
    Ok(outs)
}

fn rms_norm(args: &[Option<RtValue>], axis: i64, eps: f32) -> OpResult {
    let x = arg(args, 0)?;
    let scale = arg(args, 1)?;
    if x.rank() == 0 {
        return Err("input must have rank >= 1".into());
    }
    let ax = norm_axis(axis, x.rank())?;
    let inner: usize = x.shape[ax..].iter().product();
    let outer: usize = x.shape[..ax].iter().product();
    let xv = x.to_f64_vec();
    let sv = scale.to_f64_vec();
    let out_shape = broadcast_shapes(&x.shape, &scale.shape)?;
    if out_shape != x.shape {
        return Err(format!("scale {:?} does not broadcast to X {:?}", scale.shape, x.shape));
    }
    let st = broadcast_strides(&scale.shape, &x.shape);
    let mut y = vec![0.0; xv.len()];
    let mut idx = vec![0usize; x.rank()];
    for o in 0..outer {
        let row = &xv[o * inner..(o + 1) * inner];
        let ms = row.iter().map(|v| v * v).sum::<f64>() / inner.max(1) as f64;
        // Reference rounds the statistics to f32 (stash_type float).
        let inv = 1.0 / ((ms as f32 + eps) as f64).sqrt();
        for j in 0..inner {
            let flat = o * inner + j;
            let mut rem = flat;
            for dd in (0..x.rank()).rev() {
                idx[dd] = rem % x.shape[dd];
                rem /= x.shape[dd];
            }
            let s_off: usize = idx.iter().zip(&st).map(|(i, s)| i * s).sum();
            y[flat] = row[j] * inv * sv[s_off];
        }
    }
    Ok(vec![RtValue::Tensor(back(x.dtype(), x.shape.clone(), y)?)])
}
