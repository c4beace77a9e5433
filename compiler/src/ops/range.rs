//! Range `(start, limit, delta)`: `start + i·delta` for `i < ⌈(limit − start) / delta⌉` (none
//! when that is below 1), of the inputs' type. The three values decide the output's length, so
//! they are constants for code generation (a short range folds to a constant; a long one, or
//! one whose limit a shape computation gives under bounded dims, is computed when the model
//! runs, from start and delta read then).
use super::{input, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::cast::cast;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range;

/// Longest range the interpreter makes.
const MAX_LEN: u128 = 1 << 32;

impl Range {
    /// The output's length, when the values decide it before the op runs: constants, or under
    /// bounded dims integer shape computations with a constant delta.
    fn len(cx: &ShapeCx) -> R<Option<DimExpr>> {
        let value = |i: usize| cx.opt(i).and_then(|a| a.value.as_ref());
        if let (Some(s), Some(l), Some(d)) = (value(0), value(1), value(2)) {
            return Ok(const_len(s, l, d)?.map(|n| DimExpr::constant(i64::try_from(n).unwrap_or(i64::MAX))));
        }
        if !cx.arg(0)?.dtype.is_int() {
            return Ok(None);
        }
        let (Some(s), Some(l), Some(d)) = (cx.ints(0), cx.ints(1), cx.ints(2)) else { return Ok(None) };
        let ([s], [l], [d]) = (&s[..], &l[..], &d[..]) else { return Ok(None) };
        Ok(match d.as_const() {
            Some(0) => return Err("delta is 0".into()),
            Some(k) if k > 0 => Some(l.sub(s).ceil_div(k)),
            Some(k) => Some(s.sub(l).ceil_div(-k)),
            None => None,
        })
    }
}

/// The length of a range of constants (`None` when one of them is empty).
fn const_len(s: &Tensor, l: &Tensor, d: &Tensor) -> R<Option<u128>> {
    let int = |t: &Tensor| if t.dtype().is_int() { t.to_i64_vec().and_then(|v| v.first().copied()) } else { None };
    if let (Some(s), Some(l), Some(d)) = (int(s), int(l), int(d)) {
        if d == 0 {
            return Err("delta is 0".into());
        }
        return Ok(Some(range_len_int(s, l, d)));
    }
    let first = |t: &Tensor| t.to_f64_vec().first().copied();
    match (first(s), first(l), first(d)) {
        (_, _, Some(d)) if d == 0.0 => Err("delta is 0".into()),
        (Some(s), Some(l), Some(d)) => Ok(Some(((l - s) / d).ceil().max(0.0) as u128)),
        _ => Ok(None),
    }
}

/// Element count of an integer Range: ceil((limit - start) / delta), at least 0, exact for
/// any i64 bounds (the difference is taken in i128; f64 rounds it near the limits). `delta`
/// is not 0.
fn range_len_int(start: i64, limit: i64, delta: i64) -> u128 {
    let (span, step) = (limit as i128 - start as i128, delta as i128);
    let (span, step) = if step < 0 { (-span, -step) } else { (span, step) };
    if span <= 0 {
        0
    } else {
        ((span + step - 1) / step) as u128
    }
}

impl OpDef for Range {
    name!("Range");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        if cx.arg(1)?.dtype != dtype || cx.arg(2)?.dtype != dtype {
            return Err("start, limit and delta must share a type".into());
        }
        let len = match Self::len(cx)? {
            Some(n) => n,
            None => cx.unknown(),
        };
        Ok(vec![OutType { dtype, dims: Some(vec![len]) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (s, l, d) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        if s.dtype() != l.dtype() || s.dtype() != d.dtype() {
            return Err("start, limit and delta must share a type".into());
        }
        let n = const_len(s, l, d)?.ok_or("start, limit and delta must each hold a value")?;
        if n > MAX_LEN {
            return Err("range too long".into());
        }
        let n = n as usize;
        let dtype = s.dtype();
        if dtype.is_float() {
            let first = |t: &Tensor| t.to_f64_vec().first().copied().unwrap_or(0.0);
            let (a, c) = (first(s), first(d));
            let vals: Vec<f64> = (0..n).map(|i| a + i as f64 * c).collect();
            Ok(vec![cast(&Tensor::new(vec![n], Data::F64(vals)), dtype, true)?])
        } else {
            let first = |t: &Tensor| t.to_i64_vec().and_then(|v| v.first().copied()).ok_or("empty scalar");
            let (a, c) = (first(s)?, first(d)?);
            // Every element lies between start and limit, so it fits an i64; i128 keeps `i * c`
            // exact.
            let vals: Vec<i64> = (0..n as i128).map(|i| (a as i128 + i * c as i128) as i64).collect();
            Ok(vec![cast(&Tensor::from_i64s(vec![n], vals), dtype, true)?])
        }
    }

    // `start + i·delta` for each element of the output, when the values decide its length (a
    // length declared in the model alone says nothing of the values the model is run with).
    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let y = cx.output(0)?;
        let len = Self::len(&cx.shape_cx()?).map_err(|e| cx.err(e))?;
        if len.is_none_or(|n| cx.dims(y).ok() != Some(vec![n])) {
            return Err(cx.err("start, limit and delta must be constants for codegen: they decide the output's length"));
        }
        let (d, t) = (cx.dtype(y)?, cx.elem(y)?);
        let wide = match d {
            DType::F32 | DType::F64 => "f64",
            d if d.is_int() => "i128",
            d => return Err(cx.err(format!("Range on {d} is not supported by codegen yet"))),
        };
        Ok(format!(
            "let (s, d) = (({})[0] as {wide}, ({})[0] as {wide});\nfor (i, o) in {}.iter_mut().enumerate() {{ *o = (s + i as {wide} * d) as {t}; }}",
            cx.read_input(0)?,
            cx.read_input(2)?,
            cx.write(y)?
        ))
    }

    shape_inputs!(_);
}

/// Ranges too long to fold (more than `fold::MAX_FOLD_ELEMS` elements), so generated code
/// computes them.
pub fn examples() -> Vec<super::Example> {
    let sc = |v: i64| Tensor::scalar_i64(v);
    let f = |v: f32| Tensor::from_f32s(vec![], vec![v]);
    let i32s = |v: i32| Tensor::new(vec![], Data::I32(vec![v]));
    vec![
        super::Example { consts: vec![0, 1, 2], op: OpRef::new(Range), inputs: vec![sc(5), sc(-140_000), sc(-2)] },
        super::Example { consts: vec![0, 1, 2], op: OpRef::new(Range), inputs: vec![f(0.5), f(7000.25), f(0.0999)] },
        super::Example { consts: vec![0, 1, 2], op: OpRef::new(Range), inputs: vec![i32s(-3), i32s(66_000), i32s(1)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{f, i};

    #[test]
    fn lengths_values_and_refusals() {
        let run = |s: &Tensor, l: &Tensor, d: &Tensor| Range.eval(&[Some(s), Some(l), Some(d)]).map(|y| y.into_iter().next());
        let sc = |v: i64| Tensor::scalar_i64(v);
        assert_eq!(run(&sc(10), &sc(4), &sc(-3)), Ok(Some(i(&[2], &[10, 7]))));
        assert_eq!(run(&sc(1), &sc(1), &sc(1)), Ok(Some(i(&[0], &[]))));
        assert_eq!(run(&f(&[], &[1.0]), &f(&[], &[2.0]), &f(&[], &[0.25])), Ok(Some(f(&[4], &[1.0, 1.25, 1.5, 1.75]))));
        assert!(run(&sc(0), &sc(5), &sc(0)).is_err());
        assert!(run(&sc(0), &f(&[], &[5.0]), &sc(1)).is_err());
        assert!(run(&sc(i64::MIN), &sc(i64::MAX), &sc(1)).is_err());
        assert!(run(&f(&[0], &[]), &f(&[], &[5.0]), &f(&[], &[1.0])).is_err());
        // The length of a shape computation's range, and an unknown one.
        let arg = |dtype| Some(crate::ops::Arg { dtype, dims: Some(vec![]), value: None });
        let mut cx = ShapeCx::new(vec![arg(DType::I64), arg(DType::I64), arg(DType::I64)]);
        cx.set_ints(0, vec![DimExpr::constant(0)]);
        cx.set_ints(1, vec![DimExpr::var("n")]);
        cx.set_ints(2, vec![DimExpr::constant(2)]);
        assert_eq!(Range.shapes(&mut cx).unwrap()[0].dims, Some(vec![DimExpr::var("n").ceil_div(2)]));
        let mut cx = ShapeCx::new(vec![arg(DType::F32), arg(DType::F32), arg(DType::F32)]);
        assert!(crate::ops::is_unknown(&Range.shapes(&mut cx).unwrap()[0].dims.as_ref().unwrap()[0]));
    }
}
