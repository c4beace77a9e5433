//! Newer ONNX ops: GroupNormalization and CenterCropPad. Arithmetic is done in f64 and cast
//! back to the input's type.
use super::shape::{index_map, take_or};
use super::util::{arg, ints_arg, norm_axis_or_scalar, strides};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{DType, Op};
use crate::tensor::{Data, Tensor};

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
