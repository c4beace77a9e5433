//! MaxUnpool through the runtime's unpool kernel; the geometry helper is shared with inference
//! and codegen.
use super::util::{arg, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::unpool;

fn dims(v: &[i64], what: &str) -> Result<Vec<usize>, String> {
    v.iter().map(|&d| usize::try_from(d).map_err(|_| format!("{what} has negative entry {d}"))).collect()
}

/// `attr` or, when empty, `n` copies of `d`.
fn or_fill(attr: &[usize], n: usize, d: usize, what: &str) -> Result<Vec<usize>, String> {
    match attr.len() {
        0 => Ok(vec![d; n]),
        l if l == n => Ok(attr.to_vec()),
        l => Err(format!("{what} has {l} entries, expected {n}")),
    }
}

/// MaxUnpool shapes: (unpooled shape the indices refer to, output shape).
pub fn max_unpool_shapes(op: &Op, x: &[usize], output_shape: Option<&[i64]>) -> Result<(Vec<usize>, Vec<usize>), String> {
    let Op::MaxUnpool { kernel_shape, pads, strides } = op else { return Err("not MaxUnpool".into()) };
    let n = kernel_shape.len();
    if x.len() != n + 2 {
        return Err(format!("X has rank {} for a {n}-d kernel", x.len()));
    }
    let (st, pads) = (or_fill(strides, n, 1, "strides")?, or_fill(pads, 2 * n, 0, "pads")?);
    let mut inferred = x[..2].to_vec();
    for i in 0..n {
        let full = (x[i + 2].max(1) - 1) * st[i] + kernel_shape[i];
        let v = full.checked_sub(pads[i] + pads[i + n]).ok_or("pads exceed the unpooled size")?;
        inferred.push(v);
    }
    let out = match output_shape {
        Some(s) => dims(s, "output_shape")?,
        None => inferred.clone(),
    };
    if out.len() != inferred.len() || out.iter().zip(&inferred).any(|(o, i)| o < i) {
        return Err(format!("output_shape {out:?} must be at least the unpooled shape {inferred:?}"));
    }
    Ok((inferred, out))
}

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    let x = arg(args, 0)?;
    macro_rules! each {
        ($data:expr, $out_len:expr, |$v:ident, $o:ident| $body:expr) => {
            match $data {
                Data::F32($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::F32($o) }
                Data::F64($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::F64($o) }
                Data::F16($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::F16($o) }
                Data::BF16($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::BF16($o) }
                Data::I8($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::I8($o) }
                Data::I16($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::I16($o) }
                Data::I32($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::I32($o) }
                Data::I64($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::I64($o) }
                Data::U8($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::U8($o) }
                Data::U16($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::U16($o) }
                Data::U32($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::U32($o) }
                Data::U64($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::U64($o) }
                other => return Err(format!("{} on {} is not supported", op.name(), other.dtype())),
            }
        };
    }
    let (shape, data) = match op {
        Op::MaxUnpool { .. } => {
            let idx = arg(args, 1)?;
            let os = match opt_arg(args, 2)? {
                Some(t) => Some(t.to_i64_vec().ok_or("output_shape must be integers")?),
                None => None,
            };
            let (inferred, out) = max_unpool_shapes(op, &x.shape, os.as_deref())?;
            if idx.shape != x.shape {
                return Err(format!("I has shape {:?}, X {:?}", idx.shape, x.shape));
            }
            let iv = match &idx.data {
                Data::I64(v) => v,
                other => return Err(format!("I must be int64, got {}", other.dtype())),
            };
            let total: usize = inferred.iter().product();
            if let Some(bad) = iv.iter().find(|&&i| i < 0 || i as usize >= total) {
                return Err(format!("index {bad} is outside the unpooled shape {inferred:?}"));
            }
            let len = out.iter().product();
            let data = each!(&x.data, len, |v, o| unpool::max_unpool(v, iv, &inferred, &out, &mut o));
            (out, data)
        }
        _ => return Err(format!("{} is not an unpool op", op.name())),
    };
    Ok(vec![RtValue::Tensor(Tensor::new(shape, data))])
}
