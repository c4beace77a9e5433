//! Sequences and optionals: interpreter-level values (`RtValue::Sequence` / `RtValue::Optional`).
use super::shape::{concat, slice_axis};
use super::util::{arg, norm_axis_or_scalar, one};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{Op, SeqOp};
use crate::tensor::{Data, Tensor};

pub fn eval(op: &Op, args: &[Option<RtValue>], _n_outputs: usize) -> OpResult {
    let Op::Seq(sop) = op else { return Err(format!("{} is not a sequence op", op.name())) };
    match sop {
        SeqOp::Construct => {
            let items: Vec<Tensor> =
                args.iter().flatten().map(|v| v.as_tensor().cloned()).collect::<Result<_, _>>()?;
            if let Some(f) = items.first() {
                if let Some(t) = items.iter().find(|t| t.dtype() != f.dtype()) {
                    return Err(format!("sequence items must share a type, got {} and {}", f.dtype(), t.dtype()));
                }
            }
            let dtype = items.first().map(|t| t.dtype());
            Ok(vec![RtValue::Sequence(items, dtype)])
        }
        SeqOp::Empty { dtype } => Ok(vec![RtValue::Sequence(Vec::new(), Some(*dtype))]),
        SeqOp::At => {
            let (items, _) = seq_arg(args, 0)?;
            let i = position(args, 1, items.len(), false)?.ok_or("missing input #1 (position)")?;
            one(items[i].clone())
        }
        SeqOp::Insert => {
            let (items, dtype) = seq_arg(args, 0)?;
            let t = arg(args, 1)?;
            if let Some(d) = dtype.or(items.first().map(|t| t.dtype())) {
                if d != t.dtype() {
                    return Err(format!("cannot insert a {} tensor into a sequence of {d}", t.dtype()));
                }
            }
            let i = position(args, 2, items.len(), true)?.unwrap_or(items.len());
            let mut items = items.clone();
            items.insert(i, t.clone());
            Ok(vec![RtValue::Sequence(items, Some(t.dtype()))])
        }
        SeqOp::Erase => {
            let (items, dtype) = seq_arg(args, 0)?;
            if items.is_empty() {
                return Err("cannot erase from an empty sequence".into());
            }
            let i = position(args, 1, items.len(), false)?.unwrap_or(items.len() - 1);
            let mut items = items.clone();
            items.remove(i);
            Ok(vec![RtValue::Sequence(items, dtype)])
        }
        SeqOp::Length => {
            let (items, _) = seq_arg(args, 0)?;
            one(Tensor::scalar_i64(items.len() as i64))
        }
        SeqOp::ConcatFrom { axis, new_axis } => {
            let (items, _) = seq_arg(args, 0)?;
            let first = items.first().ok_or("ConcatFromSequence of an empty sequence")?;
            let refs: Vec<&Tensor>;
            let stacked: Vec<Tensor>;
            let ax = if *new_axis {
                let ax = norm_axis_or_scalar(*axis, first.rank() + 1)?;
                stacked = items
                    .iter()
                    .map(|t| {
                        let mut s = t.shape.clone();
                        s.insert(ax.min(s.len()), 1);
                        Tensor::new(s, t.data.clone())
                    })
                    .collect();
                refs = stacked.iter().collect();
                ax
            } else {
                refs = items.iter().collect();
                norm_axis_or_scalar(*axis, first.rank())?
            };
            one(concat(&refs, ax as i64)?)
        }
        SeqOp::SplitTo { axis, keepdims } => {
            let x = arg(args, 0)?;
            if x.rank() == 0 {
                return Err("SplitToSequence needs a tensor of rank >= 1".into());
            }
            let ax = norm_axis_or_scalar(*axis, x.rank())?;
            let dim = x.shape[ax];
            let split = match args.get(1) {
                Some(Some(v)) => Some(v.as_tensor()?),
                _ => None,
            };
            let mut items = Vec::new();
            match split {
                None => {
                    for i in 0..dim {
                        let mut s = slice_axis(x, ax, i, 1)?;
                        if !keepdims {
                            s.shape.remove(ax);
                        }
                        items.push(s);
                    }
                }
                Some(s) => {
                    let v = s.to_i64_vec().ok_or("split must be an integer tensor")?;
                    let sizes: Vec<usize> = if s.rank() == 0 {
                        let c = v[0];
                        if c <= 0 {
                            return Err(format!("split size must be positive, got {c}"));
                        }
                        let c = c as usize;
                        (0..dim.div_ceil(c)).map(|i| c.min(dim - i * c)).collect()
                    } else if s.rank() == 1 {
                        let sz: Vec<usize> = v
                            .iter()
                            .map(|&x| usize::try_from(x).map_err(|_| format!("negative split {x}")))
                            .collect::<Result<_, _>>()?;
                        if sz.iter().sum::<usize>() != dim {
                            return Err(format!("split sizes {sz:?} do not sum to dim {dim}"));
                        }
                        sz
                    } else {
                        return Err(format!("split must be a scalar or 1-D, got shape {:?}", s.shape));
                    };
                    let mut start = 0;
                    for n in sizes {
                        items.push(slice_axis(x, ax, start, n)?);
                        start += n;
                    }
                }
            }
            Ok(vec![RtValue::Sequence(items, Some(x.dtype()))])
        }
        SeqOp::OptionalMake => match args.first() {
            Some(Some(v)) => Ok(vec![RtValue::Optional(Some(Box::new(v.clone())))]),
            _ => Ok(vec![RtValue::Optional(None)]),
        },
        SeqOp::OptionalHasElement => {
            let has = match args.first() {
                Some(Some(RtValue::Optional(o))) => o.is_some(),
                Some(Some(_)) => true,
                _ => false,
            };
            one(Tensor::new(vec![], Data::Bool(vec![has])))
        }
        SeqOp::OptionalGetElement => match args.first() {
            Some(Some(RtValue::Optional(Some(v)))) => Ok(vec![(**v).clone()]),
            Some(Some(RtValue::Optional(None))) => Err("the optional is empty".into()),
            Some(Some(v)) => Ok(vec![v.clone()]),
            _ => Err("missing input #0".into()),
        },
    }
}

fn seq_arg(args: &[Option<RtValue>], i: usize) -> Result<(&Vec<Tensor>, Option<crate::ir::DType>), String> {
    match args.get(i) {
        Some(Some(RtValue::Sequence(items, d))) => Ok((items, *d)),
        Some(Some(_)) => Err(format!("input #{i} must be a sequence")),
        _ => Err(format!("missing input #{i}")),
    }
}

/// Optional position input `i`, normalised against `len` (`len` itself allowed when `insert`).
fn position(args: &[Option<RtValue>], i: usize, len: usize, insert: bool) -> Result<Option<usize>, String> {
    let t = match args.get(i) {
        Some(Some(v)) => v.as_tensor()?,
        _ => return Ok(None),
    };
    let v = t.to_i64_vec().filter(|v| v.len() == 1).ok_or("position must be an integer scalar")?;
    let p = v[0];
    let n = len as i64;
    let q = if p < 0 { p + n } else { p };
    let hi = if insert { n } else { n - 1 };
    if q < 0 || q > hi {
        return Err(format!("position {p} is out of range for a sequence of length {len}"));
    }
    Ok(Some(q as usize))
}
