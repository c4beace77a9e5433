//! CumSum and CumProd: running sums (products) along one axis, given as a constant input,
//! optionally exclusive (each element left out of its own result) and from the end. The runtime
//! kernels `kernels::reduce::{cumsum, cumprod}` over the `[outer, len, inner]` view.
use super::{around, input, view_sizes, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis_or_scalar;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::reduce as k;

/// `product`: CumProd, else CumSum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cumulative {
    pub product: bool,
    pub exclusive: bool,
    pub reverse: bool,
}

impl Cumulative {
    /// The axis input's one value.
    fn axis(v: Option<Vec<i64>>) -> R<i64> {
        match v.as_deref() {
            Some([a]) => Ok(*a),
            Some(v) => Err(format!("axis must hold one element, got {}", v.len())),
            None => Err("axis must be a constant".into()),
        }
    }

    /// `[outer, len, inner]` of an input of dims `xs` around `axis`.
    fn view(xs: &[DimExpr], axis: i64) -> R<[DimExpr; 3]> {
        if xs.is_empty() {
            return Err("the input must have rank >= 1".into());
        }
        Ok(around(xs, norm_axis_or_scalar(axis, xs.len())?))
    }
}

impl OpDef for Cumulative {
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    name!(product ? "CumProd" : "CumSum");

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        if x.dtype == DType::Bool {
            return Err(format!("{} is not defined on bool", self.name()));
        }
        // A computed axis leaves only the rank unchecked.
        if let (Some(xs), Some(a)) = (&x.dims, cx.arg(1)?.value.as_ref()) {
            Self::view(xs, Self::axis(a.to_i64_vec())?)?;
        }
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let axis = Self::axis(input(ins, 1)?.to_i64_vec())?;
        let dims: Vec<DimExpr> = x.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect();
        let v = Self::view(&dims, axis)?.map(|d| d.as_const().unwrap_or(0) as usize);
        let (outer, len, inner) = (v[0], v[1], v[2]);
        let (ex, rev, prod) = (self.exclusive, self.reverse, self.product);
        macro_rules! go {
            ($($variant:ident),*) => {
                match &x.data {
                    $(Data::$variant(v) => {
                        let mut out = vec![Default::default(); v.len()];
                        if prod { k::cumprod(v, outer, len, inner, ex, rev, &mut out) } else { k::cumsum(v, outer, len, inner, ex, rev, &mut out) }
                        Data::$variant(out)
                    })*
                    d => return Err(format!("{} is not defined on {}", self.name(), d.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
        Ok(vec![Tensor::new(x.shape.clone(), data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let axis = Self::axis(cx.const_ints(1)).map_err(|e| cx.err(e))?;
        let view = Self::view(&cx.dims(x)?, axis).map_err(|e| cx.err(e))?;
        Ok(format!(
            "rt::kernels::reduce::{}({}, {}, {}, {}, {});",
            if self.product { "cumprod" } else { "cumsum" },
            cx.read(x)?,
            view_sizes(cx, &view)?,
            self.exclusive,
            self.reverse,
            cx.write(cx.output(0)?)?
        ))
    }

    flops!(per_output 1);

    shape_inputs!(1);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![3, 4], (0..12).map(|i| (i % 5) as f32 - 1.5).collect());
    let axis = |a| Tensor::from_i64s(vec![1], vec![a]);
    let op = |product, exclusive, reverse| OpRef::new(Cumulative { product, exclusive, reverse });
    vec![
        super::Example { consts: vec![1], op: op(false, false, false), inputs: vec![x.clone(), axis(0)] },
        super::Example { consts: vec![1], op: op(true, true, true), inputs: vec![x, axis(-1)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumprod_exclusive_reverse_and_a_bad_axis() {
        let x = Tensor::from_i64s(vec![4], vec![1, 2, 3, 4]);
        let run = |product, exclusive, reverse, axis| {
            let a = Tensor::from_i64s(vec![1], vec![axis]);
            Cumulative { product, exclusive, reverse }.eval(&[Some(&x), Some(&a)]).map(|y| y[0].to_i64_vec().unwrap_or_default())
        };
        assert_eq!(run(true, false, false, 0), Ok(vec![1, 2, 6, 24]));
        assert_eq!(run(true, true, true, 0), Ok(vec![24, 12, 4, 1]));
        assert_eq!(run(false, true, false, -1), Ok(vec![0, 1, 3, 6]));
        assert!(run(true, false, false, 1).is_err());
    }
}
