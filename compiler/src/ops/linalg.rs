//! Det: the determinant of each trailing `n × n` matrix of a float tensor, by Gaussian
//! elimination with partial pivoting in f64 (`kernels::det::det_batch`), rounded once to the
//! element type, in the interpreter and generated code alike.
use super::{input, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::cast::cast;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::det::det_batch;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Det;

impl Det {
    /// The batch dims and the matrix size `n` of a `[..., n, n]` input.
    fn dims(cx: &mut ShapeCx) -> R<(Vec<DimExpr>, DimExpr)> {
        let x = cx.arg(0)?;
        if !x.dtype.is_float() {
            return Err(format!("Det needs a float tensor, got {}", x.dtype));
        }
        let xs = x.dims()?.to_vec();
        let [batch @ .., rows, cols] = xs.as_slice() else { return Err(format!("Det needs [..., n, n], got rank {}", xs.len())) };
        cx.equal("the matrices' rows and columns", rows, cols)?;
        Ok((batch.to_vec(), rows.clone()))
    }
}

impl OpDef for Det {
    name!("Det");
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let dims = match x.dims {
            Some(_) => Some(Self::dims(cx)?.0),
            None => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let (_, n) = Self::dims(&mut ShapeCx::of_shapes([Some((x.dtype(), &x.shape[..]))]))?;
        let n = n.as_const().unwrap_or(0) as usize;
        let batch = x.shape[..x.rank() - 2].to_vec();
        let mut out = vec![0.0; batch.iter().product()];
        det_batch(&x.to_f64_vec(), n, &mut vec![0.0; n * n], &mut out);
        Ok(vec![cast(&Tensor::new(batch, Data::F64(out)), x.dtype(), false)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let xd = cx.dtype(x)?;
        if xd.is_small() {
            return Err(cx.err(format!("Det on {xd} is not supported by codegen yet")));
        }
        let (_, n) = Self::dims(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        Ok(format!("rt::kernels::det::det_batch({}, {}, {}, {});", cx.read(x)?, cx.size(&n)?, cx.scratch(DType::F64)?, cx.write(cx.output(0)?)?))
    }

    /// One matrix as f64, eliminated in place.
    fn scratch_bytes(&self, inputs: &[Option<(DType, Vec<usize>)>]) -> usize {
        let n = inputs.first().cloned().flatten().and_then(|(_, s)| s.last().copied()).unwrap_or(0);
        n * n * 8
    }

    // Elimination of each n×n matrix: about 2n³/3.
    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        let x = ins.first()?.as_ref()?;
        let k = *x.last()? as u64;
        let matrices = super::numel(&Some(x.clone()))? / k.saturating_mul(k).max(1);
        Some(matrices.saturating_mul(2 * k * k * k / 3))
    }
}

pub fn examples() -> Vec<super::Example> {
    let v = |n: usize| (0..n).map(|i| ((i * 7) % 11) as f32 * 0.5 - 2.0).collect::<Vec<f32>>();
    let x = Tensor::from_f32s(vec![2, 3, 3], v(18));
    let x64 = cast(&Tensor::from_f32s(vec![4, 4], v(16)), DType::F64, false).unwrap_or_else(|_| Tensor::zeros(DType::F64, vec![4, 4]));
    vec![
        super::Example { consts: vec![], op: OpRef::new(Det), inputs: vec![x] },
        super::Example { consts: vec![], op: OpRef::new(Det), inputs: vec![x64] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn determinants_and_refusals() {
        let x = Tensor::from_f32s(vec![2, 2, 2], vec![2., 0., 0., 3., 0., 1., 1., 0.]);
        assert_eq!(Det.eval(&[Some(&x)]).unwrap()[0], Tensor::from_f32s(vec![2], vec![6., -1.]));
        assert!(Det.eval(&[Some(&Tensor::from_f32s(vec![2, 3], vec![0.; 6]))]).is_err());
        assert!(Det.eval(&[Some(&Tensor::from_f32s(vec![3], vec![0.; 3]))]).is_err());
        assert!(Det.eval(&[Some(&Tensor::from_i64s(vec![1, 1], vec![1]))]).is_err());
    }
}
