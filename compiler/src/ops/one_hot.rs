//! OneHot `(indices, depth, values)`: a new axis of length `depth` at `axis`, `values[1]` where
//! the position equals the index (negative indices count from the end) and `values[0]`
//! elsewhere; an index out of range gives an all-off row. The depth decides the output's shape,
//! so it must be a constant or a shape value.
use super::{input, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::shape::take;
use crate::ir::axis::norm_axis_or_scalar;
use crate::ir::DimExpr;
use crate::tensor::Tensor;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OneHot {
    pub axis: i64,
}

impl OneHot {
    /// The depth: a constant (of any numeric type, as ONNX allows) or a shape value; `None`
    /// when computed from data.
    fn depth(cx: &ShapeCx) -> R<Option<DimExpr>> {
        if let Some(t) = cx.opt(1).and_then(|a| a.value.as_ref()) {
            let v = t.to_f64_vec();
            let &[d] = v.as_slice() else { return Err(format!("depth must hold one element, got {}", v.len())) };
            if d.is_nan() || !(1.0..=(1u64 << 32) as f64).contains(&d) {
                return Err(format!("depth {d} must be a positive number"));
            }
            return Ok(Some(DimExpr::constant(d as i64)));
        }
        Ok(match cx.ints(1).as_deref() {
            Some([d]) => Some(d.clone()),
            _ => None,
        })
    }

    /// `[outer, depth, inner]` and the output's dims, for indices of dims `is`.
    fn view(&self, is: &[DimExpr], depth: DimExpr) -> R<([DimExpr; 3], Vec<DimExpr>)> {
        let a = norm_axis_or_scalar(self.axis, is.len() + 1)?;
        let mut out = is.to_vec();
        out.insert(a, depth.clone());
        Ok(([super::product(&is[..a]), depth, super::product(&is[a..])], out))
    }
}

impl OpDef for OneHot {
    name!("OneHot");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (ind, values) = (cx.arg(0)?.clone(), cx.arg(2)?.clone());
        if !ind.dtype.is_int() && !ind.dtype.is_float() {
            return Err(format!("indices must be numeric, got {}", ind.dtype));
        }
        if let Some(vs) = &values.dims {
            cx.equal("the element count of values ([off, on])", &super::product(vs), &DimExpr::constant(2))?;
        }
        let dims = match (&ind.dims, Self::depth(cx)?) {
            (Some(is), Some(d)) => Some(self.view(is, d)?.1),
            _ => None,
        };
        Ok(vec![OutType { dtype: values.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (ind, values) = (input(ins, 0)?, input(ins, 2)?);
        let cx = ShapeCx::of_tensors(ins);
        if values.numel() != 2 {
            return Err(format!("values must hold [off, on], got {} elements", values.numel()));
        }
        let depth = Self::depth(&cx)?.ok_or("depth must be given")?;
        let is: Vec<DimExpr> = ind.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect();
        let (v, out) = self.view(&is, depth)?;
        let [outer, depth, inner] = v.map(|e| e.as_const().unwrap_or(0).max(0) as usize);
        let iv = ind.to_i64_vec().ok_or("indices must be numeric")?;
        let mut idx = vec![0usize; outer * depth * inner];
        for o in 0..outer {
            for i in 0..inner {
                let k = iv[o * inner + i];
                let k = if k < 0 { k + depth as i64 } else { k };
                if let Some(d) = usize::try_from(k).ok().filter(|&d| d < depth) {
                    idx[(o * depth + d) * inner + i] = 1;
                }
            }
        }
        let shape = out.iter().map(|e| e.as_const().unwrap_or(0).max(0) as usize).collect();
        Ok(vec![Tensor::new(shape, take(&values.data, &idx))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (ind, values, y) = (cx.input(0)?, cx.input(2)?, cx.output(0)?);
        // The depth is the output's extent along the axis (known whether or not the depth
        // input is a constant).
        let is = cx.dims(ind)?;
        let a = norm_axis_or_scalar(self.axis, is.len() + 1).map_err(|e| cx.err(e))?;
        let depth = cx.dims(y)?.get(a).cloned().ok_or_else(|| cx.err("the output's rank does not fit"))?;
        let ([outer, depth, inner], _) = self.view(&is, depth).map_err(|e| cx.err(e))?;
        Ok(format!(
            "let (ind, vals, y) = ({}, {}, {});\nlet (outer, depth, inner) = ({}, {}, {});\n\
             for o in 0..outer {{\n    for i in 0..inner {{\n        let k = rt::Elem::to_i64(ind[o * inner + i]);\n        \
             let k = if k < 0 {{ k + depth as i64 }} else {{ k }};\n        \
             for d in 0..depth {{\n            y[(o * depth + d) * inner + i] = if k == d as i64 {{ vals[1] }} else {{ vals[0] }};\n        }}\n    }}\n}}",
            cx.read(ind)?,
            cx.read(values)?,
            cx.write(y)?,
            cx.size(&outer)?,
            cx.size(&depth)?,
            cx.size(&inner)?
        ))
    }

    // Data movement: no arithmetic.

    shape_inputs!(1);
}

pub fn examples() -> Vec<super::Example> {
    let ind = Tensor::from_i64s(vec![2, 3], vec![0, 2, -1, 5, 1, -4]);
    let depth = Tensor::from_i64s(vec![], vec![4]);
    let values = Tensor::from_f32s(vec![2], vec![-1.0, 3.0]);
    vec![
        super::Example { consts: vec![1], op: OpRef::new(OneHot { axis: -1 }), inputs: vec![ind.clone(), depth.clone(), values.clone()] },
        super::Example { consts: vec![1], op: OpRef::new(OneHot { axis: 1 }), inputs: vec![ind, depth, values] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_and_out_of_range_indices() {
        let ind = Tensor::from_i64s(vec![3], vec![1, -1, 3]);
        let depth = Tensor::from_f32s(vec![], vec![3.0]);
        let values = Tensor::from_i64s(vec![2], vec![0, 7]);
        let y = OneHot { axis: -1 }.eval(&[Some(&ind), Some(&depth), Some(&values)]).expect("eval");
        assert_eq!(y[0].shape, vec![3, 3]);
        assert_eq!(y[0].to_i64_vec(), Some(vec![0, 7, 0, 0, 0, 7, 0, 0, 0]));
        let three = Tensor::from_i64s(vec![3], vec![0, 1, 2]);
        assert!(OneHot { axis: 0 }.eval(&[Some(&ind), Some(&depth), Some(&three)]).is_err());
    }
}
