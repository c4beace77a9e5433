//! Shape and data-movement ops. Most are written as "which source element lands where"
//! (a flat index per output element) and then one generic gather, so every dtype works.
use super::util::{arg, broadcast_shapes, broadcast_strides, norm_axis_or_scalar, numel, one, strides, ints_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;
use crate::tensor::{Data, Tensor};

pub fn eval(op: &Op, args: &[Option<RtValue>], _n_outputs: usize) -> OpResult {
    match op {
        Op::Reshape { allowzero } => one(reshape(arg(args, 0)?, &ints_arg(args, 1)?, *allowzero)?),
        Op::Concat { axis } => {
            let parts: Vec<&Tensor> = args.iter().flatten().map(|v| v.as_tensor()).collect::<Result<_, _>>()?;
            one(concat(&parts, *axis)?)
        }
        Op::Expand => {
            let x = arg(args, 0)?;
            let shape = to_dims(&ints_arg(args, 1)?)?;
            let out = broadcast_shapes(&x.shape, &shape)?;
            one(broadcast_to(x, &out)?)
        }
        Op::ConstantOfShape { value } => {
            let shape = to_dims(&ints_arg(args, 0)?)?;
            let n = numel(&shape)?;
            let idx = vec![0usize; n];
            one(Tensor::new(shape, take(&value.data, &idx)))
        }
        _ => Err(format!("{} is not implemented in the interpreter yet", op.name())),
    }
}

/// Non-negative dims from an int vector.
pub fn to_dims(v: &[i64]) -> Result<Vec<usize>, String> {
    v.iter().map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}"))).collect()
}

/// Gather `data[idx[i]]` for every i, any dtype.
pub fn take(data: &Data, idx: &[usize]) -> Data {
    match data {
        Data::F8(d, v) => Data::F8(*d, idx.iter().map(|&i| v[i]).collect()),
        _ => crate::map_data!(data, v => idx.iter().map(|&i| v[i]).collect(), f8 => Data::F32(Vec::new())),
    }
}

/// Like [`take`], with `None` filled by element 0 of `fill` (a one-element tensor of the
/// same dtype).
pub fn take_or(data: &Data, idx: &[Option<usize>], fill: &Data) -> Result<Data, String> {
    macro_rules! go {
        ($($variant:ident),*) => {
            match (data, fill) {
                $((Data::$variant(v), Data::$variant(f)) => {
                    let f0 = *f.first().ok_or("empty fill value")?;
                    Data::$variant(idx.iter().map(|i| i.map(|i| v[i]).unwrap_or(f0)).collect())
                })*
                (Data::F8(d, v), Data::F8(_, f)) => {
                    let f0 = *f.first().ok_or("empty fill value")?;
                    Data::F8(*d, idx.iter().map(|i| i.map(|i| v[i]).unwrap_or(f0)).collect())
                }
                _ => return Err(format!("fill value type {} differs from data type {}", fill.dtype(), data.dtype())),
            }
        };
    }
    Ok(go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool))
}

/// Flat source index for every output position, row-major over `out`.
pub fn index_map<I>(out: &[usize], f: impl Fn(&[usize]) -> I) -> Result<Vec<I>, String> {
    let n = numel(out)?;
    let mut res = Vec::with_capacity(n);
    let mut ix = vec![0usize; out.len()];
    for _ in 0..n {
        res.push(f(&ix));
        for d in (0..out.len()).rev() {
            ix[d] += 1;
            if ix[d] < out[d] {
                break;
            }
            ix[d] = 0;
        }
    }
    Ok(res)
}

pub fn reshape(x: &Tensor, shape: &[i64], allowzero: bool) -> Result<Tensor, String> {
    let mut out = Vec::with_capacity(shape.len());
    let mut infer = None;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            -1 => {
                if infer.replace(i).is_some() {
                    return Err("more than one -1 in the target shape".into());
                }
                out.push(1);
            }
            0 if !allowzero => out.push(*x.shape.get(i).ok_or_else(|| format!("0 at index {i} beyond input rank"))?),
            d if d < 0 => return Err(format!("invalid target dim {d}")),
            d => out.push(d as usize),
        }
    }
    let known: usize = numel(&out)?;
    if let Some(i) = infer {
        if known == 0 || !x.numel().is_multiple_of(known) {
            return Err(format!("cannot reshape {:?} to {shape:?}", x.shape));
        }
        out[i] = x.numel() / known;
    }
    if numel(&out)? != x.numel() {
        return Err(format!("cannot reshape {:?} ({} elements) to {shape:?}", x.shape, x.numel()));
    }
    Ok(Tensor::new(out, x.data.clone()))
}

pub fn transpose(x: &Tensor, perm: &[usize]) -> Result<Tensor, String> {
    let r = x.rank();
    let mut seen = vec![false; r];
    if perm.len() != r || perm.iter().any(|&p| p >= r || std::mem::replace(&mut seen[p], true)) {
        return Err(format!("perm {perm:?} is not a permutation of rank {r}"));
    }
    if r > 16 {
        return Err("rank above 16 is not supported".into());
    }
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    let data = match &x.data {
        Data::F8(d, v) => {
            let mut out = v.clone();
            burnc_runtime::kernels::permute::permute(v, &x.shape, perm, &mut out);
            Data::F8(*d, out)
        }
        d => crate::map_data!(d, v => {
            let mut out = v.clone();
            burnc_runtime::kernels::permute::permute(v, &x.shape, perm, &mut out);
            out
        }, f8 => Data::F32(Vec::new())),
    };
    Ok(Tensor::new(shape, data))
}

pub fn concat(parts: &[&Tensor], axis: i64) -> Result<Tensor, String> {
    let first = parts.first().ok_or("Concat needs at least one input")?;
    let rank = first.rank();
    let ax = norm_axis_or_scalar(axis, rank)?;
    let mut shape = first.shape.clone();
    shape[ax] = 0;
    for p in parts {
        if p.rank() != rank || p.dtype() != first.dtype() {
            return Err(format!("inputs differ in rank or type: {:?} {} vs {:?} {}", p.shape, p.dtype(), first.shape, first.dtype()));
        }
        for d in 0..rank {
            if d != ax && p.shape[d] != first.shape[d] {
                return Err(format!("input shapes {:?} and {:?} differ off axis {ax}", p.shape, first.shape));
            }
        }
        shape[ax] += p.shape[ax];
    }
    let outer: usize = shape[..ax].iter().product();
    // Flat indices into the concatenation of all parts' data.
    let mut bases = Vec::new();
    let mut acc = 0;
    for p in parts {
        bases.push(acc);
        acc += p.numel();
    }
    let mut idx = Vec::with_capacity(numel(&shape)?);
    for o in 0..outer {
        for (p, &base) in parts.iter().zip(&bases) {
            let chunk: usize = p.shape[ax..].iter().product();
            idx.extend((0..chunk).map(|j| base + o * chunk + j));
        }
    }
    let all = concat_data(parts)?;
    Ok(Tensor::new(shape, take(&all, &idx)))
}

/// All parts' data end to end (same dtype).
fn concat_data(parts: &[&Tensor]) -> Result<Data, String> {
    let mut all = parts[0].data.clone();
    for p in &parts[1..] {
        macro_rules! ext {
            ($($variant:ident),*) => {
                match (&mut all, &p.data) {
                    $((Data::$variant(a), Data::$variant(b)) => a.extend_from_slice(b),)*
                    (Data::F8(_, a), Data::F8(_, b)) => a.extend_from_slice(b),
                    _ => return Err("Concat inputs differ in type".into()),
                }
            };
        }
        ext!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool);
    }
    Ok(all)
}

pub fn slice_axis(x: &Tensor, ax: usize, start: usize, len: usize) -> Result<Tensor, String> {
    let mut shape = x.shape.clone();
    shape[ax] = len;
    let st = strides(&x.shape);
    let idx = index_map(&shape, |ix| ix.iter().enumerate().map(|(d, &i)| (if d == ax { i + start } else { i }) * st[d]).sum())?;
    Ok(Tensor::new(shape, take(&x.data, &idx)))
}

pub fn broadcast_to(x: &Tensor, out: &[usize]) -> Result<Tensor, String> {
    let st = broadcast_strides(&x.shape, out);
    let idx = index_map(out, |ix| ix.iter().zip(&st).map(|(i, s)| i * s).sum())?;
    Ok(Tensor::new(out.to_vec(), take(&x.data, &idx)))
}
