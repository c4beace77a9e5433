//! ArgMax and ArgMin: the index of the largest (smallest) element along one axis, as i64, by
//! the runtime's `kernels::reduce::arg_reduce` over the `[outer, len, inner]` view around it.
use super::{around, view_sizes, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis;
use crate::ir::{DType, DimExpr, ValueId};
use crate::tensor::Tensor;

/// `max`: ArgMax, else ArgMin. `select_last_index`: the last of equal extremes, else the first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArgReduce {
    pub max: bool,
    pub axis: i64,
    pub keepdims: bool,
    pub select_last_index: bool,
}

impl ArgReduce {
    /// The reduced axis of an input of rank `rank` (none for a scalar).
    fn axis_of(&self, rank: usize) -> R<Option<usize>> {
        if rank == 0 {
            return Ok(None);
        }
        norm_axis(self.axis, rank).map(Some)
    }
}

impl OpDef for ArgReduce {
    none_of!(cuda, scratch_bytes, in_place, decides_shapes, forwards_values);

    // One invocation per output: the first (or last) index of the extreme value; NaN wins, as
    // in the interpreter's comparison.
    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        if !crate::codegen::wgsl::scalar::is_float(x.dtype) {
            return Err(cx.err(format!("{} on {} is not supported by the wgpu target yet", self.name(), x.dtype)));
        }
        let (outer, len, inner): (usize, usize, usize) = match self.axis_of(x.shape.len()).map_err(|e| cx.err(e))? {
            None => (1, 1, 1),
            Some(a) => (x.shape[..a].iter().product(), x.shape[a], x.shape[a + 1..].iter().product()),
        };
        let _ = outer;
        let (cmp, eq) = (if self.max { ">" } else { "<" }, if self.select_last_index { "||  v == best" } else { "" });
        Ok(vec![cx.pointwise(&y, |i| {
            let at = |k: &str| x.load(&format!("({i} / {inner}u * {len}u + {k}) * {inner}u + {i} % {inner}u"));
            Ok((
                format!("var best = {};\nvar arg = 0;\nfor (var k = 1u; k < {len}u; k++) {{ let v = {}; if (!is_nan(best) && (v {cmp} best {eq} || is_nan(v))) {{ best = v; arg = i32(k); }} }}\n", at("0u"), at("k")),
                "arg".into(),
            ))
        })?])
    }

    name!(max ? "ArgMax" : "ArgMin");

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        let dims = match &x.dims {
            None => None,
            Some(d) => Some(match self.axis_of(d.len())? {
                None => vec![],
                Some(a) if self.keepdims => {
                    let mut v = d.clone();
                    v[a] = DimExpr::constant(1);
                    v
                }
                Some(a) => d.iter().enumerate().filter(|&(i, _)| i != a).map(|(_, e)| e.clone()).collect(),
            }),
        };
        Ok(vec![OutType { dtype: DType::I64, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = super::input(ins, 0)?;
        Ok(vec![crate::interp::ops::reduce::arg_reduce(x, self.max, self.axis, self.keepdims, self.select_last_index)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, out) = (cx.input(0)?, cx.output(0)?);
        let xs = cx.dims(x)?;
        let view = match self.axis_of(xs.len()).map_err(|e| cx.err(e))? {
            None => [DimExpr::constant(1), DimExpr::constant(1), DimExpr::constant(1)],
            Some(a) => around(&xs, a),
        };
        Ok(format!(
            "rt::kernels::reduce::arg_reduce({}, {}, {}, {}, {});",
            cx.read(x)?,
            view_sizes(cx, &view)?,
            self.max,
            self.select_last_index,
            cx.write(out)?
        ))
    }

    // One comparison per input element.
    flops!(per_input 1);

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err(format!("{} has no gradient: its output is an index", self.name()))
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|i| ((i * 7) % 11) as f32).collect());
    let a = |max, axis, keepdims, select_last_index| OpRef::new(ArgReduce { max, axis, keepdims, select_last_index });
    vec![
        super::Example { consts: vec![], op: a(true, 1, true, false), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: a(false, -1, false, true), inputs: vec![x] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_max_and_min_pick_the_first_or_last_extreme() {
        let x = Tensor::from_f32s(vec![2, 3], vec![1.0, 5.0, 5.0, 0.0, -2.0, 0.0]);
        let run = |max, last, keepdims| {
            let y = ArgReduce { max, axis: 1, keepdims, select_last_index: last }.eval(&[Some(&x)]).expect("eval");
            (y[0].shape.clone(), y[0].to_i64_vec().unwrap_or_default())
        };
        assert_eq!(run(true, false, true), (vec![2, 1], vec![1, 0]));
        assert_eq!(run(true, true, false), (vec![2], vec![2, 2]));
        assert_eq!(run(false, false, false), (vec![2], vec![0, 1]));
        let arg = Some(crate::ops::Arg { dtype: DType::F32, dims: Some(vec![DimExpr::var("n"), DimExpr::constant(3)]), value: None });
        let out = ArgReduce { max: true, axis: -1, keepdims: false, select_last_index: false }.shapes(&mut ShapeCx::new(vec![arg.clone()])).expect("shapes");
        assert_eq!(out[0], OutType { dtype: DType::I64, dims: Some(vec![DimExpr::var("n")]) });
        assert!(ArgReduce { max: true, axis: 2, keepdims: false, select_last_index: false }.shapes(&mut ShapeCx::new(vec![arg])).is_err());
    }
}
