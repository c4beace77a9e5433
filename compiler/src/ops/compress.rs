//! Compress `(X, condition)`: the slices of X along `axis` (of X flattened when there is none)
//! whose condition entry is true. The output's length is the number of true entries, so the
//! condition decides the shape: code generation needs it constant (the other dims may be
//! bounded; `forward` checks that the axis reaches the last selected index). One runtime
//! kernel, `kernels::gather::compress`, for the interpreter and generated code.
//!
//! NonZero `(X)`: the indices of X's nonzero elements, `[rank, count]`. The count depends on
//! X's values, so only a constant X (folded before code generation) gets through codegen.
use super::{around, input, product, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::interp::ops::util::strides;
use crate::codegen::CodegenError;
use crate::interp::ops::shape::take;
use crate::ir::axis::norm_axis;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::gather::compress;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compress {
    /// `None`: over X flattened.
    pub axis: Option<i64>,
}

/// Inline up to this many kept indices in generated code; more go to the weights blob.
const INLINE: usize = 32;

impl Compress {
    /// The indices whose condition entry is true.
    fn keep(cond: &Tensor) -> R<Vec<i64>> {
        let Data::Bool(c) = &cond.data else { return Err(format!("condition must be bool, got {}", cond.dtype())) };
        if cond.rank() != 1 {
            return Err(format!("condition must be 1-D, got shape {:?}", cond.shape));
        }
        Ok(c.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i as i64).collect())
    }

    /// X as `[outer, len, inner]` around the axis, and the output dims, with the axis checked
    /// to reach the last kept index.
    fn view(&self, cx: &mut ShapeCx, xs: &[DimExpr], keep: &[i64]) -> R<([DimExpr; 3], Vec<DimExpr>)> {
        let m = DimExpr::constant(keep.len() as i64);
        let (v, out) = match self.axis {
            Some(a) => {
                let a = norm_axis(a, xs.len())?;
                let mut out = xs.to_vec();
                out[a] = m;
                (around(xs, a), out)
            }
            None => ([DimExpr::constant(1), product(xs), DimExpr::constant(1)], vec![m]),
        };
        if let Some(&last) = keep.last() {
            cx.at_most("the condition's last selected index + 1 and the axis length", &DimExpr::constant(last + 1), &v[1])?;
        }
        Ok((v, out))
    }
}

impl OpDef for Compress {
    name!("Compress");
    none_of!(cuda, scratch_bytes, in_place, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (x, c) = (cx.arg(0)?.clone(), cx.arg(1)?.clone());
        if c.dtype != DType::Bool {
            return Err(format!("condition must be bool, got {}", c.dtype));
        }
        if let Some(cs) = c.dims.as_ref().filter(|d| d.len() != 1) {
            return Err(format!("condition must be 1-D, got rank {}", cs.len()));
        }
        // A condition known only at run time: the output's length is too.
        let dims = match (&x.dims, &c.value) {
            (Some(xs), Some(cond)) => Some(self.view(cx, xs, &Self::keep(cond)?)?.1),
            _ => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, cond) = (input(ins, 0)?, input(ins, 1)?);
        let keep = Self::keep(cond)?;
        let xs: Vec<DimExpr> = x.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect();
        let (v, out) = self.view(&mut ShapeCx::new(vec![]), &xs, &keep)?;
        let at = |d: &DimExpr| d.as_const().unwrap_or(0).max(0) as usize;
        let (v, shape): ([usize; 3], Vec<usize>) = (v.each_ref().map(at), out.iter().map(at).collect());
        // The kernel on element positions, then the elements (every dtype, strings too).
        let pos: Vec<usize> = (0..x.numel()).collect();
        let mut idx = vec![0; shape.iter().product()];
        compress(&pos, v, &keep, 0, &mut idx);
        Ok(vec![Tensor::new(shape, take(&x.data, &idx))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, c) = (cx.input(0)?, cx.input(1)?);
        let cond = cx.konst(c).ok_or_else(|| cx.err("the condition must be a constant for codegen: it decides the output's length"))?;
        let keep = Self::keep(&cond).map_err(|e| cx.err(e))?;
        let (v, _) = self.view(&mut cx.shape_cx()?, &cx.dims(x)?, &keep).map_err(|e| cx.err(e))?;
        let keep = if keep.len() <= INLINE { format!("&{keep:?}") } else { cx.table(&keep) };
        Ok(format!(
            "rt::kernels::gather::compress({}, {}, {keep}, Default::default(), {});",
            cx.read(x)?,
            cx.sizes(&v)?,
            cx.write(cx.output(0)?)?
        ))
    }

    // A gather through the interpreter's index table.
    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        Ok(vec![cx.by_table()?])
    }

    shape_inputs!(1);
}

/// NonZero: the indices of the nonzero elements in row-major order, one row per dim of X.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonZero;

impl OpDef for NonZero {
    name!("NonZero");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let rank = cx.arg(0)?.dims.as_ref().map(|d| DimExpr::constant(d.len() as i64));
        let rank = rank.unwrap_or_else(|| cx.unknown());
        Ok(vec![OutType { dtype: DType::I64, dims: Some(vec![rank, cx.unknown()]) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let mask: Vec<bool> = match &x.data {
            Data::F8(..) => x.to_f64_vec().iter().map(|&v| v != 0.0).collect(),
            d => crate::with_data!(d, v => v.iter().map(|&e| e != Default::default()).collect(), f8 => Vec::new()),
        };
        let r = x.rank();
        let hits: Vec<usize> = mask.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i).collect();
        let n = hits.len();
        let st = strides(&x.shape);
        let mut out = vec![0i64; r * n];
        for (j, &flat) in hits.iter().enumerate() {
            let mut rem = flat;
            for d in 0..r {
                out[d * n + j] = (rem / st[d]) as i64;
                rem %= st[d];
            }
        }
        Ok(vec![Tensor::from_i64s(vec![r, n], out)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        Err(cx.err("NonZero's output length depends on its input's values: codegen needs the input to be a constant"))
    }

    shape_inputs!(0);
}

pub fn examples() -> Vec<super::Example> {
    let cond = |v: &[bool]| Tensor::new(vec![v.len()], Data::Bool(v.to_vec()));
    let x = Tensor::from_f32s(vec![3, 4], (0..12).map(|i| i as f32 * 0.5 - 2.0).collect());
    let xi = Tensor::from_i64s(vec![2, 3], (0..6).collect());
    let op = |axis| OpRef::new(Compress { axis });
    vec![
        // Rows 1 and 2: refused when the first dim is below 3.
        super::Example { consts: vec![1], op: op(Some(0)), inputs: vec![x.clone(), cond(&[false, true, true])] },
        // Columns 0 and 3 (a condition shorter than the axis), whatever the number of rows.
        super::Example { consts: vec![1], op: op(Some(-1)), inputs: vec![x, cond(&[true, false, false, true])] },
        super::Example { consts: vec![1], op: op(None), inputs: vec![xi, cond(&[true, false, false, true, true])] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_selected_slices_and_refuses_bad_conditions() {
        let x = Tensor::from_f32s(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let run = |axis, c: Vec<bool>| {
            let c = Tensor::new(vec![c.len()], Data::Bool(c));
            Compress { axis }.eval(&[Some(&x), Some(&c)]).map(|y| (y[0].shape.clone(), y[0].to_f64_vec()))
        };
        assert_eq!(run(Some(0), vec![false, true, true]), Ok((vec![2, 2], vec![3.0, 4.0, 5.0, 6.0])));
        assert_eq!(run(Some(1), vec![false, true]), Ok((vec![3, 1], vec![2.0, 4.0, 6.0])));
        assert_eq!(run(None, vec![false, true, false, false, false, true]), Ok((vec![2], vec![2.0, 6.0])));
        // An index beyond the axis; a trailing false beyond it is fine.
        assert!(run(Some(1), vec![false, false, true]).is_err());
        assert_eq!(run(Some(1), vec![true, false, false]), Ok((vec![3, 1], vec![1.0, 3.0, 5.0])));
        assert!(run(Some(2), vec![true]).is_err());
        let f = Tensor::from_f32s(vec![1], vec![1.0]);
        assert!(Compress { axis: None }.eval(&[Some(&x), Some(&f)]).is_err());
    }

    #[test]
    fn nonzero_lists_indices_row_major() {
        let x = Tensor::from_f32s(vec![2, 2], vec![1., 0., 1., 1.]);
        assert_eq!(NonZero.eval(&[Some(&x)]).unwrap()[0], Tensor::from_i64s(vec![2, 3], vec![0, 1, 1, 0, 0, 1]));
        let s = Tensor::from_i64s(vec![], vec![3]);
        assert_eq!(NonZero.eval(&[Some(&s)]).unwrap()[0], Tensor::from_i64s(vec![0, 1], vec![]));
        // The count is not known before the op runs; the rank is.
        let arg = crate::ops::Arg { dtype: DType::F32, dims: Some(vec![DimExpr::var("n"), DimExpr::constant(4)]), value: None };
        let dims = NonZero.shapes(&mut ShapeCx::new(vec![Some(arg)])).unwrap()[0].dims.clone().unwrap();
        assert_eq!(dims[0], DimExpr::constant(2));
        assert!(crate::ops::is_unknown(&dims[1]));
    }
}
