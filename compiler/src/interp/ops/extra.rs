//! GroupNormalization. Arithmetic is done in f64 and cast back to the input's type.
use crate::ir::DType;
use crate::tensor::{Data, Tensor};

fn back(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor, String> {
    super::cast::cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

fn float_in(t: &Tensor, op: &str) -> Result<Vec<f64>, String> {
    if !t.dtype().is_float() {
        return Err(format!("{op} is not defined on {}", t.dtype()));
    }
    Ok(t.to_f64_vec())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs_are_errors() {
        let f = |s: Vec<usize>, v: f32| Tensor::from_f32s(s.clone(), vec![v; s.iter().product()]);
        assert!(group_norm(&f(vec![1, 4, 1], 0.0), &f(vec![4], 1.0), &f(vec![4], 0.0), 3, 1e-5, true).is_err());
    }
}
