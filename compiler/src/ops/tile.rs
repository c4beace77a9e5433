//! Tile `(input, repeats)`: the input repeated `repeats[d]` times along each dim `d`. The
//! repeats decide the output's shape, so they are a constant or a shape value. One runtime
//! kernel, `kernels::tile::tile`, moves the elements in generated code and, on their indices,
//! in the interpreter (so every dtype, strings too).
use super::{input, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::shape::take;
use crate::ir::{DimExpr, ValueId};
use crate::tensor::Tensor;
use burnc_runtime::kernels::tile::tile;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tile;

impl Tile {
    /// The repeats, one per dim of `xs` (`None` when computed from data).
    fn repeats(cx: &ShapeCx, xs: &[DimExpr]) -> R<Option<Vec<DimExpr>>> {
        let t = cx.arg(1)?.dtype;
        if !t.is_int() {
            return Err(format!("repeats must be integers, got {t}"));
        }
        let Some(reps) = cx.ints(1) else { return Ok(None) };
        if reps.len() != xs.len() {
            return Err(format!("repeats has {} entries for rank {}", reps.len(), xs.len()));
        }
        if let Some(r) = reps.iter().find_map(|r| r.as_const().filter(|&r| r < 0)) {
            return Err(format!("negative repeat {r}"));
        }
        Ok(Some(reps))
    }
}

impl OpDef for Tile {
    name!("Tile");
    none_of!(cuda, scratch_bytes, in_place, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let dims = match &x.dims {
            Some(xs) => Self::repeats(cx, xs)?.map(|r| xs.iter().zip(&r).map(|(d, k)| d.mul(k)).collect()),
            None => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let xs: Vec<DimExpr> = x.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect();
        let reps = Self::repeats(&ShapeCx::of_tensors(&[None, ins.get(1).copied().flatten()]), &xs)?.ok_or("repeats must be given")?;
        let reps: Vec<usize> = reps.iter().map(|r| r.as_const().unwrap_or(0) as usize).collect();
        let out: Vec<usize> = x.shape.iter().zip(&reps).map(|(d, r)| d.checked_mul(*r)).collect::<Option<_>>().ok_or("repeats make the output too large")?;
        let n = out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).filter(|&n| n <= 1 << 40).ok_or("repeats make the output too large")?;
        let iota: Vec<usize> = (0..x.numel()).collect();
        let mut idx = vec![0; n];
        tile(&iota, &x.shape, &reps, &mut idx);
        Ok(vec![Tensor::new(out, take(&x.data, &idx))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let xs = cx.dims(x)?;
        let reps = Self::repeats(&cx.shape_cx()?, &xs).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("repeats must be a constant for codegen (pin it with --const)"))?;
        Ok(format!("rt::kernels::tile::tile({}, &{}, &{}, {});", cx.read(x)?, cx.sizes(&xs)?, cx.sizes(&reps)?, cx.write(cx.output(0)?)?))
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        Ok(vec![cx.by_table()?])
    }

    // Every copy's gradient summed back onto the element it repeats.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::shape::picked(cx)
    }

    shape_inputs!(1);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![3, 2], (0..6).map(|i| i as f32 - 2.5).collect());
    let xi = Tensor::from_i64s(vec![2, 3, 2], (0..12).collect());
    vec![
        super::Example { consts: vec![1], op: OpRef::new(Tile), inputs: vec![x, Tensor::from_i64s(vec![2], vec![2, 3])] },
        super::Example { consts: vec![1], op: OpRef::new(Tile), inputs: vec![xi, Tensor::from_i64s(vec![3], vec![1, 2, 1])] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_and_refusals() {
        let x = Tensor::from_f32s(vec![2], vec![1., 2.]);
        let y = Tile.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![1], vec![3]))]).unwrap();
        assert_eq!(y[0], Tensor::from_f32s(vec![6], vec![1., 2., 1., 2., 1., 2.]));
        assert!(Tile.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![1], vec![-1]))]).is_err());
        assert!(Tile.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![2], vec![1, 1]))]).is_err());
        assert!(Tile.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![1], vec![i64::MAX]))]).is_err());
    }
}
