//! Slice `(data, starts, ends, axes?, steps?)`: along each listed axis, the elements from
//! `starts` towards `ends` (exclusive) every `steps` (negative steps walk backwards); starts
//! and ends are clamped to the dim, negative ones count from its end. They decide the output's
//! shape, so they are constants or shape values. One runtime kernel,
//! `kernels::slice::slice`, moves the elements in generated code and, on their indices, in
//! the interpreter (so every dtype, strings too).
use super::{input, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::shape::take;
use crate::ir::axis::norm_axis;
use crate::ir::{DimExpr, ValueId};
use crate::tensor::Tensor;
use burnc_runtime::kernels::slice::slice;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slice;

/// Starts and ends at least this large (ONNX's "to the end", `INT_MAX` or `INT64_MAX`) clamp to
/// any dim.
const END: i64 = i32::MAX as i64;

/// Per dim of the input: the first index read, the output length and the step.
struct Plan {
    start: Vec<DimExpr>,
    len: Vec<DimExpr>,
    step: Vec<i64>,
}

fn c(v: i64) -> DimExpr {
    DimExpr::constant(v)
}

impl Slice {
    /// The plan over input dims `xs`; `None` while starts, ends, axes or steps are not known
    /// constants. A fixed dim is clamped as ONNX says; for a bounded one the clamps that the
    /// dim decides become run-time checks (the start inside the dim and not past the end).
    fn plan(cx: &mut ShapeCx, xs: &[DimExpr]) -> R<Option<Plan>> {
        let consts = |cx: &ShapeCx, i: usize| -> R<Option<Vec<i64>>> {
            let t = cx.arg(i)?.dtype;
            if !t.is_int() {
                return Err(format!("input #{i} must be integers, got {t}"));
            }
            Ok(cx.ints(i).and_then(|v| v.iter().map(DimExpr::as_const).collect()))
        };
        let (Some(starts), Some(ends)) = (consts(cx, 1)?, consts(cx, 2)?) else { return Ok(None) };
        let axes = match cx.opt(3) {
            Some(_) => match consts(cx, 3)? {
                Some(a) => a,
                None => return Ok(None),
            },
            None => (0..starts.len() as i64).collect(),
        };
        let steps = match cx.opt(4) {
            Some(_) => match consts(cx, 4)? {
                Some(s) => s,
                None => return Ok(None),
            },
            None => vec![1; starts.len()],
        };
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            return Err("starts, ends, axes and steps differ in length".into());
        }
        let r = xs.len();
        let mut p = Plan { start: vec![c(0); r], len: xs.to_vec(), step: vec![1; r] };
        for (((&ax, &s0), &e0), &st) in axes.iter().zip(&starts).zip(&ends).zip(&steps) {
            let a = norm_axis(ax, r)?;
            if st == 0 {
                return Err("slice step 0".into());
            }
            let l = &xs[a];
            let (start, len) = match l.as_const() {
                Some(n) => fixed(n, s0, e0, st),
                None => bounded(cx, l, s0, e0, st)?,
            };
            (p.start[a], p.len[a], p.step[a]) = (start, len, st);
        }
        Ok(Some(p))
    }
}

/// Start and length along a dim of `n` elements, clamped as ONNX says.
fn fixed(n: i64, s0: i64, e0: i64, st: i64) -> (DimExpr, DimExpr) {
    if n == 0 {
        return (c(0), c(0));
    }
    let norm = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (b, e) = if st > 0 { (norm(s0).clamp(0, n), norm(e0).clamp(0, n)) } else { (norm(s0).clamp(0, n - 1), norm(e0).clamp(-1, n - 1)) };
    // Ceiling division of a non-negative span by a positive step.
    let len = if st > 0 { ((e - b).max(0) + st - 1) / st } else { ((b - e).max(0) - st - 1) / -st };
    (c(b), c(len))
}

/// Start and length along bounded dim `l`: where the clamps would depend on `l`, the start must
/// lie inside the dim and not past the end (checks at run time).
fn bounded(cx: &mut ShapeCx, l: &DimExpr, s0: i64, e0: i64, st: i64) -> R<(DimExpr, DimExpr)> {
    let what = "the slice's start inside the dim and not past its end";
    if st > 0 {
        let a = match s0 {
            s if s <= -END => c(0),
            s if s < 0 => {
                cx.at_most(what, &c(-s), l)?;
                l.add(&c(s))
            }
            s => c(s),
        };
        let b = match e0 {
            e if e >= END => l.clone(),
            e if e <= -END => c(0),
            e if e < 0 => l.add(&c(e)),
            e => c(e).min_with(l),
        };
        cx.at_most(what, &a, &b)?;
        let len = b.sub(&a).ceil_div(st);
        Ok((a, len))
    } else {
        let last = l.sub(&c(1));
        let a = match s0 {
            s if s >= END => last.clone(),
            s if s <= -END => c(0),
            s if s < 0 => {
                cx.at_most(what, &c(-s), l)?;
                l.add(&c(s))
            }
            s => c(s).min_with(&last),
        };
        let b = match e0 {
            e if e <= -END => c(-1),
            e if e < 0 => l.add(&c(e)),
            e if e >= END => last.clone(),
            // Not clamped: the check below keeps it under the start.
            e => c(e),
        };
        cx.at_most(what, &b, &a)?;
        let len = a.sub(&b).ceil_div(-st);
        Ok((a, len))
    }
}

impl OpDef for Slice {
    name!("Slice");
    none_of!(cuda, scratch_bytes, in_place, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let Some(xs) = &x.dims else { return Ok(vec![OutType { dtype: x.dtype, dims: None }]) };
        let Some(p) = Self::plan(cx, xs)? else { return Ok(vec![OutType { dtype: x.dtype, dims: None }]) };
        // A slice of a shape value keeps those of its contents (`Shape(x)[2:]`).
        if let (Some(v), [a], [n], [st]) = (cx.ints(0), &p.start[..], &p.len[..], &p.step[..]) {
            if let (Some(a), Some(n)) = (a.as_const(), n.as_const()) {
                let picked: Option<Vec<DimExpr>> = (0..n).map(|i| v.get(usize::try_from(a + i * st).ok()?).cloned()).collect();
                if let Some(picked) = picked {
                    cx.set_out_ints(0, picked);
                }
            }
        }
        Ok(vec![OutType { dtype: x.dtype, dims: Some(p.len) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let xs: Vec<DimExpr> = x.shape.iter().map(|&d| c(d as i64)).collect();
        let p = Self::plan(&mut ShapeCx::of_tensors(ins), &xs)?.ok_or("starts and ends must be given")?;
        let usizes = |v: &[DimExpr]| v.iter().map(|d| d.as_const().and_then(|d| usize::try_from(d).ok())).collect::<Option<Vec<usize>>>().ok_or("a slice bound out of range");
        let (start, out) = (usizes(&p.start)?, usizes(&p.len)?);
        let step: Vec<isize> = p.step.iter().map(|&s| isize::try_from(s).map_err(|_| format!("step {s} out of range"))).collect::<R<_>>()?;
        let n = out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("the output is too large")?;
        let iota: Vec<usize> = (0..x.numel()).collect();
        let mut idx = vec![0; n];
        slice(&iota, &x.shape, &start, &step, &mut idx, &out);
        Ok(vec![Tensor::new(out, take(&x.data, &idx))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let xs = cx.dims(x)?;
        let p = Self::plan(&mut cx.shape_cx()?, &xs)
            .map_err(|e| cx.err(e))?
            .ok_or_else(|| cx.err("starts, ends, axes and steps must be constants for codegen (pin them with --const)"))?;
        // Every run-time size is at least 1, and a start may be 0: a bounded start `a` is
        // written as `(a + 1) - 1`.
        let starts = p
            .start
            .iter()
            .map(|a| if a.as_const().is_some() { cx.size(a) } else { Ok(format!("({} - 1)", cx.size(&a.add(&c(1)))?)) })
            .collect::<Result<Vec<_>, _>>()?;
        let steps: Vec<String> = p.step.iter().map(i64::to_string).collect();
        Ok(format!(
            "rt::kernels::slice::slice({}, &{}, &[{}], &[{}], {}, &{});",
            cx.read(x)?,
            cx.sizes(&xs)?,
            starts.join(", "),
            steps.join(", "),
            cx.write(cx.output(0)?)?,
            cx.sizes(&p.len)?
        ))
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        Ok(vec![cx.by_table()?])
    }

    // The picked elements' gradients scattered back; the rest get zero.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::shape::picked(cx)
    }

    shape_inputs!(1..);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![3, 4, 5], (0..60).map(|i| i as f32 * 0.5 - 7.0).collect());
    let xi = Tensor::from_i64s(vec![4, 6], (0..24).collect());
    let ints = |v: &[i64]| Tensor::from_i64s(vec![v.len()], v.to_vec());
    vec![
        // Rows of the last dim: a run per row.
        super::Example { consts: vec![1, 2, 3], op: OpRef::new(Slice), inputs: vec![x.clone(), ints(&[1]), ints(&[i64::MAX]), ints(&[1])] },
        // An end past the dim; a negative start and a step of 2 on the last dim.
        super::Example { consts: vec![1, 2, 3, 4], op: OpRef::new(Slice), inputs: vec![x.clone(), ints(&[1, -3]), ints(&[1000, i64::MAX]), ints(&[0, 2]), ints(&[1, 2])] },
        // Backwards from the end.
        super::Example { consts: vec![1, 2, 3, 4], op: OpRef::new(Slice), inputs: vec![xi, ints(&[-1, 4]), ints(&[i64::MIN, 0]), ints(&[0, 1]), ints(&[-1, -2])] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(x: &Tensor, s: &[i64], e: &[i64], a: &[i64], st: &[i64]) -> R<Tensor> {
        let ints = |v: &[i64]| Tensor::from_i64s(vec![v.len()], v.to_vec());
        let (s, e, a, st) = (ints(s), ints(e), ints(a), ints(st));
        Ok(Slice.eval(&[Some(x), Some(&s), Some(&e), Some(&a), Some(&st)])?.remove(0))
    }

    #[test]
    fn clamps_and_steps() {
        let x = Tensor::from_i64s(vec![2, 5], (0..10).collect());
        assert_eq!(run(&x, &[1], &[100], &[1], &[2]).unwrap(), Tensor::from_i64s(vec![2, 2], vec![1, 3, 6, 8]));
        assert_eq!(run(&x, &[-1, 10], &[-100, -100], &[0, 1], &[-1, -2]).unwrap(), Tensor::from_i64s(vec![2, 3], vec![9, 7, 5, 4, 2, 0]));
        assert_eq!(run(&x, &[3], &[1], &[1], &[1]).unwrap().shape, vec![2, 0]);
        assert!(run(&x, &[0], &[1], &[1], &[0]).is_err());
        assert!(run(&x, &[0], &[1], &[2], &[1]).is_err());
        let empty = Tensor::from_i64s(vec![0, 5], vec![]);
        assert_eq!(run(&empty, &[-1], &[i64::MIN], &[0], &[-1]).unwrap().shape, vec![0, 5]);
    }

    #[test]
    fn bounded_dims_get_checks() {
        let arg = |dims: Vec<DimExpr>, value: Option<Tensor>| Some(crate::ops::Arg { dtype: crate::ir::DType::I64, dims: Some(dims), value });
        let ints = |v: &[i64]| Some(Tensor::from_i64s(vec![v.len()], v.to_vec()));
        let h = DimExpr::var("h");
        let mut cx = ShapeCx::new(vec![arg(vec![h.clone()], None), arg(vec![c(1)], ints(&[1])), arg(vec![c(1)], ints(&[999]))]);
        let out = Slice.shapes(&mut cx).unwrap();
        assert_eq!(out[0].dims, Some(vec![c(999).min_with(&h).sub(&c(1))]));
        assert_eq!(cx.checks.len(), 1);
    }
}
