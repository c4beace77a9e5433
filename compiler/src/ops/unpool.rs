//! MaxUnpool `(X, I, output_shape?)`: each pooled value of X goes back to the position I
//! recorded for it (a flat index into the unpooled shape, as MaxPool's indices), zeros
//! elsewhere. The unpooled shape follows from X's spatial dims, the kernel, strides and pads;
//! `output_shape` may make the output larger (it decides the shape, so it is a constant or a
//! shape value). One runtime kernel, `kernels::unpool::max_unpool`, for the interpreter and
//! generated code; the interpreter refuses an index outside the unpooled shape, generated code
//! skips it.
use super::{input, or_fill, Arg, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::unpool::max_unpool;

#[derive(Debug, Clone, PartialEq)]
pub struct MaxUnpool {
    pub kernel_shape: Vec<usize>,
    /// Leading then trailing pad of each spatial dim (empty: none).
    pub pads: Vec<usize>,
    /// Empty: 1 along each spatial dim.
    pub strides: Vec<usize>,
}

impl MaxUnpool {
    /// The unpooled shape the indices refer to and the output dims (`None` when
    /// `output_shape` is computed from data).
    fn shapes_of(&self, cx: &mut ShapeCx) -> R<(Vec<DimExpr>, Option<Vec<DimExpr>>)> {
        let xs = cx.arg(0)?.dims()?.to_vec();
        let n = self.kernel_shape.len();
        if xs.len() != n + 2 {
            return Err(format!("X has rank {} for a {n}-d kernel", xs.len()));
        }
        let (st, pads) = (or_fill(&self.strides, n, 1, "strides")?, or_fill(&self.pads, 2 * n, 0, "pads")?);
        let mut inferred = xs[..2].to_vec();
        for i in 0..n {
            // (x - 1)·stride + kernel - pads, an empty X dim counted as 1.
            let x = match xs[i + 2].as_const() {
                Some(c) => DimExpr::constant(c.max(1)),
                None => xs[i + 2].clone(),
            };
            let extra = self.kernel_shape[i] as i64 - (pads[i] + pads[i + n]) as i64;
            let d = x.sub(&DimExpr::constant(1)).scale(st[i] as i64).add(&DimExpr::constant(extra));
            if d.as_const().is_some_and(|c| c < 0) {
                return Err("pads exceed the unpooled size".into());
            }
            inferred.push(d);
        }
        let i = cx.arg(1)?.clone();
        if i.dtype != DType::I64 {
            return Err(format!("I must be int64, got {}", i.dtype));
        }
        if let Some(is) = &i.dims {
            if is.len() != xs.len() {
                return Err(format!("I has rank {}, X {}", is.len(), xs.len()));
            }
            for (k, (a, b)) in is.iter().zip(&xs).enumerate() {
                cx.equal(&format!("dims {k} of I and X"), a, b)?;
            }
        }
        let out = match cx.opt(2) {
            None => Some(inferred.clone()),
            Some(_) => cx.ints(2),
        };
        if let Some(out) = &out {
            if out.len() != inferred.len() {
                return Err(format!("output_shape has {} entries for rank {}", out.len(), inferred.len()));
            }
            for (k, (o, u)) in out.iter().zip(&inferred).enumerate() {
                cx.at_most(&format!("the unpooled dim {k} and output_shape's"), u, o)?;
            }
        }
        Ok((inferred, out))
    }
}

impl OpDef for MaxUnpool {
    name!("MaxUnpool");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let dims = match x.dims {
            Some(_) => self.shapes_of(cx)?.1,
            None => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, idx) = (input(ins, 0)?, input(ins, 1)?);
        // Only output_shape's values are read.
        let arg = |t: &Tensor, value: bool| Arg { dtype: t.dtype(), dims: Some(t.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()), value: value.then(|| t.clone()) };
        let mut cx = ShapeCx::new(vec![Some(arg(x, false)), Some(arg(idx, false)), ins.get(2).copied().flatten().map(|s| arg(s, true))]);
        let (inferred, out) = self.shapes_of(&mut cx)?;
        let fixed = |ds: &[DimExpr]| ds.iter().map(|d| d.as_const().map(|c| c.max(0) as usize).ok_or_else(|| "a dim is not fixed".to_string())).collect::<R<Vec<usize>>>();
        let (inferred, out) = (fixed(&inferred)?, fixed(&out.ok_or("output_shape must be given")?)?);
        let Data::I64(iv) = &idx.data else { return Err(format!("I must be int64, got {}", idx.dtype())) };
        let total: usize = inferred.iter().product();
        if let Some(bad) = iv.iter().find(|&&i| i < 0 || i as usize >= total) {
            return Err(format!("index {bad} is outside the unpooled shape {inferred:?}"));
        }
        let len: usize = out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).filter(|&n| n <= 1 << 40).ok_or("output_shape is too large")?;
        macro_rules! go {
            ($($variant:ident),*) => {
                match &x.data {
                    $(Data::$variant(v) => {
                        let mut y = vec![Default::default(); len];
                        max_unpool(v, iv, &inferred, &out, &mut y);
                        Data::$variant(y)
                    })*
                    d => return Err(format!("MaxUnpool on {} is not supported", d.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
        Ok(vec![Tensor::new(out, data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, idx) = (cx.input(0)?, cx.input(1)?);
        let (inferred, out) = self.shapes_of(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        let out = out.ok_or_else(|| cx.err("output_shape must be a constant (pin it with --const)"))?;
        Ok(format!(
            "rt::kernels::unpool::max_unpool({}, {}, &{}, &{}, {});",
            cx.read(x)?,
            cx.read(idx)?,
            cx.sizes(&inferred)?,
            cx.sizes(&out)?,
            cx.write(cx.output(0)?)?
        ))
    }

    shape_inputs!(2);
}

pub fn examples() -> Vec<super::Example> {
    // A 2×2 pool at stride 2 of [2, 1, 4, 4]: each value back at one position of its window.
    let x = Tensor::from_f32s(vec![2, 1, 2, 2], (0..8).map(|i| i as f32 + 0.5).collect());
    let idx = Tensor::from_i64s(vec![2, 1, 2, 2], vec![0, 3, 9, 14, 16, 18, 25, 31]);
    let op = MaxUnpool { kernel_shape: vec![2, 2], pads: vec![], strides: vec![2, 2] };
    // (A constant output_shape would not grow with the bounded dims; the unit test covers it.)
    vec![super::Example { consts: vec![], op: OpRef::new(op), inputs: vec![x, idx] }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpools_and_refuses_bad_indices() {
        let op = MaxUnpool { kernel_shape: vec![2], pads: vec![], strides: vec![2] };
        let x = Tensor::from_f32s(vec![1, 1, 2], vec![5., 7.]);
        let y = op.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![1, 1, 2], vec![1, 2]))]).unwrap();
        assert_eq!(y[0], Tensor::from_f32s(vec![1, 1, 4], vec![0., 5., 7., 0.]));
        assert!(op.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![1, 1, 2], vec![1, 4]))]).is_err());
        assert!(op.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![1, 2], vec![1, 2]))]).is_err());
        let i = Tensor::from_i64s(vec![1, 1, 2], vec![1, 2]);
        let small = Tensor::from_i64s(vec![3], vec![1, 1, 3]);
        assert!(op.eval(&[Some(&x), Some(&i), Some(&small)]).is_err());
        let bigger = op.eval(&[Some(&x), Some(&i), Some(&Tensor::from_i64s(vec![3], vec![1, 1, 5]))]).unwrap();
        assert_eq!(bigger[0], Tensor::from_f32s(vec![1, 1, 5], vec![0., 5., 7., 0., 0.]));
    }
}
