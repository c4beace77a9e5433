//! Newer ONNX ops: GroupNormalization, RotaryEmbedding and
//! CenterCropPad. Arithmetic is done in f64 and cast back to the
//! input's type.
use super::shape::{index_map, take_or};
use super::util::{arg, ints_arg, norm_axis_or_scalar, opt_arg, strides};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{DType, Op};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::extra::Rotary;

fn back(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor, String> {
    super::cast::cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

fn one_t(t: Tensor) -> OpResult {
    Ok(vec![RtValue::Tensor(t)])
}

fn float_in(t: &Tensor, op: &str) -> Result<Vec<f64>, String> {
    if !t.dtype().is_float() {
        return Err(format!("{op} is not defined on {}", t.dtype()));
    }
    Ok(t.to_f64_vec())
}

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    match op {
        Op::RotaryEmbedding { interleaved, rotary_embedding_dim, num_heads } => {
            rotary(args, *interleaved, *rotary_embedding_dim, *num_heads)
        }
        Op::CenterCropPad { axes } => center_crop_pad(args, axes.as_deref()),
        _ => Err(format!("{} is not handled by the extra ops", op.name())),
    }
}

/// GroupNormalization, in f64 whatever the storage type (rounded once at the end).
pub fn group_norm(x: &Tensor, scale: &Tensor, bias: &Tensor, groups: usize, eps: f64, per_channel: bool) -> Result<Tensor, String> {
    let (scale, bias) = (scale.to_f64_vec(), bias.to_f64_vec());
    let xv = float_in(x, "GroupNormalization")?;
    if x.rank() < 2 {
        return Err(format!("input must have rank >= 2, got {:?}", x.shape));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    if groups == 0 || c % groups != 0 {
        return Err(format!("num_groups {groups} must divide the {c} channels"));
    }
    let want = if per_channel { c } else { groups };
    if scale.len() != want || bias.len() != want {
        return Err(format!("scale and bias must have {want} entries, got {} and {}", scale.len(), bias.len()));
    }
    let spatial: usize = x.shape[2..].iter().product();
    let mut out = vec![0.0f64; xv.len()];
    burnc_runtime::kernels::norm::group_norm(&xv, &mut out, n, c, spatial, groups, &scale, &bias, per_channel, eps);
    back(x.dtype(), x.shape.clone(), out)
}

fn rotary(args: &[Option<RtValue>], interleaved: bool, rdim: usize, num_heads: usize) -> OpResult {
    let x = arg(args, 0)?;
    let cos_t = arg(args, 1)?;
    let sin_t = arg(args, 2)?;
    let pos = match opt_arg(args, 3)? {
        Some(p) => Some(p.to_i64_vec().ok_or("position_ids must be integers")?),
        None => None,
    };
    let xv = float_in(x, "RotaryEmbedding")?;
    let (cos, sin) = (cos_t.to_f64_vec(), sin_t.to_f64_vec());
    let (r, max_pos) = rotary_geometry(&x.shape, &cos_t.shape, &sin_t.shape, pos.as_ref().map(|p| p.len()), interleaved, rdim, num_heads)?;
    let mut out = vec![0.0; xv.len()];
    burnc_runtime::kernels::extra::rotary(&xv, &cos, &sin, pos.as_deref(), max_pos, r, &mut out)
        .map_err(|v| format!("position id {v} is out of range for a cache of {max_pos} rows"))?;
    one_t(back(x.dtype(), x.shape.clone(), out)?)
}

/// RotaryEmbedding's geometry from the shapes (and the number of position ids, if given),
/// and the cache's row count.
pub fn rotary_geometry(
    xs: &[usize],
    cos: &[usize],
    sin: &[usize],
    n_pos: Option<usize>,
    interleaved: bool,
    rdim: usize,
    num_heads: usize,
) -> Result<(Rotary, usize), String> {
    // Dimensions [batch, seq, heads, head].
    let (b, s, h, d, four) = match *xs {
        [b, h, s, d] => (b, s, h, d, true),
        [b, s, hidden] => {
            if num_heads == 0 || hidden % num_heads != 0 {
                return Err(format!("num_heads {num_heads} must divide the hidden size {hidden} of a 3-D input"));
            }
            (b, s, num_heads, hidden / num_heads, false)
        }
        ref other => return Err(format!("input must have rank 3 or 4, got {other:?}")),
    };
    let rd = if rdim == 0 { d } else { rdim };
    if rd > d || rd % 2 != 0 {
        return Err(format!("rotary_embedding_dim {rd} must be even and at most the head size {d}"));
    }
    let half = rd / 2;
    if cos != sin {
        return Err(format!("cos_cache {cos:?} and sin_cache {sin:?} differ in shape"));
    }
    if cos.last() != Some(&half) {
        return Err(format!("caches must end in rotary_embedding_dim/2 = {half}, got {cos:?}"));
    }
    let max_pos = match n_pos {
        Some(n) => {
            if cos.len() != 2 {
                return Err(format!("with position_ids the caches must be 2-D, got {cos:?}"));
            }
            if n != b * s {
                return Err(format!("position_ids must have shape [{b}, {s}], got {n} elements"));
            }
            cos[0]
        }
        None => {
            if cos != [b, s, half] {
                return Err(format!("without position_ids the caches must have shape [{b}, {s}, {half}], got {cos:?}"));
            }
            b * s
        }
    };
    Ok((Rotary { batch: b, seq: s, heads: h, head: d, half, four, interleaved }, max_pos))
}

fn center_crop_pad(args: &[Option<RtValue>], axes: Option<&[i64]>) -> OpResult {
    let x = arg(args, 0)?;
    let shape = ints_arg(args, 1)?;
    let rank = x.rank();
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| norm_axis_or_scalar(a, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if shape.len() != axes.len() {
        return Err(format!("shape has {} entries for {} axes", shape.len(), axes.len()));
    }
    let mut out_shape = x.shape.clone();
    // Output index o on an axis reads input index o + shift.
    let mut shift = vec![0i64; rank];
    for (&ax, &sh) in axes.iter().zip(&shape) {
        if sh < 0 {
            return Err(format!("negative target size {sh}"));
        }
        let dim = x.shape[ax] as i64;
        out_shape[ax] = sh as usize;
        shift[ax] = if sh <= dim { (dim - sh) / 2 } else { -((sh - dim) / 2) };
    }
    let st = strides(&x.shape);
    let idx = index_map(&out_shape, |o| {
        let mut at = 0usize;
        for k in 0..rank {
            let i = o[k] as i64 + shift[k];
            if i < 0 || i >= x.shape[k] as i64 {
                return None;
            }
            at += i as usize * st[k];
        }
        Some(at)
    })?;
    let fill = Data::zeros(x.dtype(), 1);
    one_t(Tensor::new(out_shape, take_or(&x.data, &idx, &fill)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: Vec<usize>, v: Vec<f32>) -> Option<RtValue> {
        Some(RtValue::Tensor(Tensor::from_f32s(shape, v)))
    }
    fn i(shape: Vec<usize>, v: Vec<i64>) -> Option<RtValue> {
        Some(RtValue::Tensor(Tensor::from_i64s(shape, v)))
    }

    #[test]
    fn bad_inputs_are_errors() {
        let f = |s: Vec<usize>, v: f32| Tensor::from_f32s(s.clone(), vec![v; s.iter().product()]);
        assert!(group_norm(&f(vec![1, 4, 1], 0.0), &f(vec![4], 1.0), &f(vec![4], 0.0), 3, 1e-5, true).is_err());
        let op = Op::RotaryEmbedding { interleaved: false, rotary_embedding_dim: 0, num_heads: 0 };
        let x = t(vec![1, 1, 2, 4], vec![0.0; 8]);
        let c = t(vec![3, 2], vec![1.0; 6]);
        assert!(eval(&op, &[x.clone(), c.clone(), c.clone(), i(vec![1, 2], vec![0, 7])]).is_err());
        assert!(eval(&op, &[x.clone(), c.clone(), c.clone(), i(vec![1, 2], vec![0, 2])]).is_ok());
        assert!(eval(&op, &[x, c.clone(), c, None]).is_err());
        let op = Op::CenterCropPad { axes: Some(vec![5]) };
        assert!(eval(&op, &[t(vec![2], vec![0.0; 2]), i(vec![1], vec![1])]).is_err());
    }

    #[test]
    fn center_crop_pad_odd() {
        let op = Op::CenterCropPad { axes: None };
        let out = eval(&op, &[t(vec![5], vec![1.0, 2.0, 3.0, 4.0, 5.0]), i(vec![1], vec![2])]).unwrap();
        assert_eq!(out[0].as_tensor().unwrap().to_f64_vec(), vec![2.0, 3.0]);
        let out = eval(&op, &[t(vec![2], vec![1.0, 2.0]), i(vec![1], vec![5])]).unwrap();
        assert_eq!(out[0].as_tensor().unwrap().to_f64_vec(), vec![0.0, 1.0, 2.0, 0.0, 0.0]);
    }
}
