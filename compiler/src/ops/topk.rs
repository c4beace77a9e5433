//! TopK `(X, K)`: the `K` largest (or smallest) elements along an axis and their indices,
//! best first, equal values in index order (ONNX's `sorted = 0` allows any order; this one
//! serves both). K decides the outputs' shapes, so it is a constant or a shape value. One
//! runtime kernel, `kernels::reduce::top_k`, for the interpreter and generated code.
use super::{around, input, view_sizes, Arg, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::reduce::top_k;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopK {
    pub axis: i64,
    pub largest: bool,
}

impl TopK {
    /// The axis and `K` (`None` when computed from data), with K checked against the axis.
    fn geometry(&self, cx: &mut ShapeCx) -> R<Option<(usize, DimExpr)>> {
        let x = cx.arg(0)?;
        if matches!(x.dtype, DType::Bool | DType::Str) || x.dtype.is_small() {
            return Err(format!("TopK is not defined on {}", x.dtype));
        }
        let xs = x.dims()?.to_vec();
        if xs.is_empty() {
            return Err("TopK needs an input of rank >= 1".into());
        }
        let a = norm_axis(self.axis, xs.len())?;
        let k = match cx.ints(1).as_deref() {
            Some([k]) => k.clone(),
            Some(v) => return Err(format!("K must hold one element, got {}", v.len())),
            None => return Ok(None),
        };
        if let Some(c) = k.as_const().filter(|&c| c < 0) {
            return Err(format!("K = {c} is negative"));
        }
        cx.at_most("K and the axis size", &k, &xs[a])?;
        Ok(Some((a, k)))
    }
}

impl OpDef for TopK {
    name!("TopK");
    none_of!(cuda, wgsl, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let dims = match &x.dims {
            Some(xs) => self.geometry(cx)?.map(|(a, k)| {
                let mut o = xs.clone();
                o[a] = k;
                o
            }),
            None => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims: dims.clone() }, OutType { dtype: DType::I64, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let arg = |t: &Tensor, value: bool| Arg { dtype: t.dtype(), dims: Some(t.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()), value: value.then(|| t.clone()) };
        let mut cx = ShapeCx::new(vec![Some(arg(x, false)), ins.get(1).copied().flatten().map(|k| arg(k, true))]);
        let (a, k) = self.geometry(&mut cx)?.ok_or("K must be given")?;
        let k = k.as_const().unwrap_or(0) as usize;
        let [outer, len, inner] = [x.shape[..a].iter().product(), x.shape[a], x.shape[a + 1..].iter().product::<usize>()];
        let mut shape = x.shape.clone();
        shape[a] = k;
        let n = outer * k * inner;
        let mut idx = vec![0i64; n];
        let mut scratch = vec![0u64; len];
        macro_rules! go {
            ($($variant:ident),*) => {
                match &x.data {
                    $(Data::$variant(v) => {
                        let mut vals = vec![Default::default(); n];
                        top_k(v, outer, len, inner, k, self.largest, &mut scratch, Some(&mut vals), Some(&mut idx));
                        Data::$variant(vals)
                    })*
                    d => return Err(format!("TopK is not defined on {}", d.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
        Ok(vec![Tensor::new(shape.clone(), data), Tensor::from_i64s(shape, idx)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let (a, k) = self.geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("K must be a constant for codegen"))?;
        Ok(format!(
            "rt::kernels::reduce::top_k({}, {}, {}, {}, {}, {}, {});",
            cx.read(x)?,
            view_sizes(cx, &around(&cx.dims(x)?, a))?,
            cx.size(&k)?,
            self.largest,
            cx.scratch(DType::U64)?,
            cx.write_used(0)?,
            cx.write_used(1)?
        ))
    }

    /// The sort's positions along the axis.
    fn scratch_bytes(&self, inputs: &[Option<(DType, Vec<usize>)>]) -> usize {
        let Some(Some((_, xs))) = inputs.first() else { return 0 };
        norm_axis(self.axis, xs.len()).map_or(0, |a| xs[a] * 8)
    }

    // A comparison per element, about (the sort is n log n along the axis).
    flops!(per_input 1);

    shape_inputs!(1);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![3, 5], (0..15).map(|i| ((i * 7) % 5) as f32 - 1.5).collect());
    let xi = Tensor::from_i64s(vec![4, 3], vec![3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]);
    let k = |v| Tensor::from_i64s(vec![1], vec![v]);
    let op = |axis, largest| OpRef::new(TopK { axis, largest });
    vec![
        super::Example { consts: vec![1], op: op(-1, true), inputs: vec![x.clone(), k(3)] },
        super::Example { consts: vec![1], op: op(1, false), inputs: vec![x, k(2)] },
        super::Example { consts: vec![1], op: op(0, true), inputs: vec![xi, k(2)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_in_order_and_refuses_bad_k() {
        let x = Tensor::from_f32s(vec![4], vec![3., 1., 3., 2.]);
        let k = |v| Tensor::from_i64s(vec![1], vec![v]);
        let y = TopK { axis: 0, largest: true }.eval(&[Some(&x), Some(&k(3))]).unwrap();
        assert_eq!(y[0], Tensor::from_f32s(vec![3], vec![3., 3., 2.]));
        assert_eq!(y[1], Tensor::from_i64s(vec![3], vec![0, 2, 3]));
        let op = TopK { axis: 0, largest: false };
        assert!(op.eval(&[Some(&x), Some(&k(5))]).is_err());
        assert!(op.eval(&[Some(&x), Some(&k(-1))]).is_err());
        assert!(op.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![2], vec![1, 1]))]).is_err());
        assert!(TopK { axis: 1, largest: true }.eval(&[Some(&x), Some(&k(1))]).is_err());
    }
}
