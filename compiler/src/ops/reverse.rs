//! ReverseSequence `(input, sequence_lens)`: the batch and time axes are 0 and 1 in some
//! order; for each batch entry the first `sequence_lens[b]` steps along time are reversed, the
//! rest kept. One runtime kernel, `kernels::reverse::reverse_sequence`, moves the elements in
//! generated code and, on their indices, in the interpreter (so every dtype, strings too).
use super::{input, product, EmitCx, GradCx, IntoOp, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::shape::take;
use crate::ir::axis::norm_axis;
use crate::ir::{DimExpr, ValueId};
use crate::tensor::Tensor;
use burnc_runtime::kernels::reverse::reverse_sequence;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReverseSequence {
    pub batch_axis: i64,
    pub time_axis: i64,
}

impl ReverseSequence {
    /// The input as `[d0, d1, inner]` and the time axis of that view (0 or 1), with the
    /// lengths' count checked against the batch size.
    fn view(&self, cx: &mut ShapeCx) -> R<([DimExpr; 3], usize)> {
        let xs = cx.arg(0)?.dims()?.to_vec();
        if xs.len() < 2 {
            return Err(format!("needs an input of rank >= 2, got rank {}", xs.len()));
        }
        let (ba, ta) = (norm_axis(self.batch_axis, xs.len())?, norm_axis(self.time_axis, xs.len())?);
        if ba == ta || ba > 1 || ta > 1 {
            return Err(format!("batch_axis {} and time_axis {} must be 0 and 1 in some order", self.batch_axis, self.time_axis));
        }
        let lens = cx.arg(1)?.clone();
        if !lens.dtype.is_int() {
            return Err(format!("sequence_lens must be integers, got {}", lens.dtype));
        }
        if let Some(ls) = &lens.dims {
            let [n] = ls.as_slice() else { return Err(format!("sequence_lens must be 1-D, got rank {}", ls.len())) };
            cx.equal("sequence_lens' length and the batch size", n, &xs[ba])?;
        }
        Ok(([xs[0].clone(), xs[1].clone(), product(&xs[2..])], ta))
    }
}

impl OpDef for ReverseSequence {
    name!("ReverseSequence");
    none_of!(cuda, scratch_bytes, in_place, decides_shapes, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        if x.dims.is_some() {
            self.view(cx)?;
        }
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, lens) = (input(ins, 0)?, input(ins, 1)?);
        let (view, ta) = self.view(&mut ShapeCx::of_shapes(ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..])))))?;
        let dims = view.map(|d| d.as_const().unwrap_or(0).max(0) as usize);
        let lv = lens.to_i64_vec().ok_or("sequence_lens must be integers")?;
        if let Some(l) = lv.iter().find(|&&l| l < 0 || l > dims[ta] as i64) {
            return Err(format!("sequence length {l} is out of range 0..={}", dims[ta]));
        }
        let iota: Vec<usize> = (0..x.numel()).collect();
        let mut idx = vec![0; x.numel()];
        reverse_sequence(&iota, dims, &lv, ta, &mut idx);
        Ok(vec![Tensor::new(x.shape.clone(), take(&x.data, &idx))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, lens) = (cx.input(0)?, cx.input(1)?);
        let (view, ta) = self.view(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        Ok(format!(
            "rt::kernels::reverse::reverse_sequence({}, {}, {}, {ta}, {});",
            cx.read(x)?,
            cx.sizes(&view)?,
            cx.read(lens)?,
            cx.write(cx.output(0)?)?
        ))
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        Ok(vec![cx.by_table()?])
    }

    // Reversing the same prefixes again undoes it.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (dy, lens) = (cx.dy()?, cx.input(1)?);
        Ok(vec![Some(cx.b.node(self.op(), &[dy, lens])?), None])
    }
}

pub fn examples() -> Vec<super::Example> {
    let op = |batch_axis, time_axis| OpRef::new(ReverseSequence { batch_axis, time_axis });
    // Batch first: the lengths follow the batch as the bounded run resizes it.
    let x = Tensor::from_f32s(vec![3, 5], (0..15).map(|i| i as f32 * 0.5 - 2.0).collect());
    let lens = Tensor::from_i64s(vec![3], vec![5, 1, 3]);
    // Time first: lengths that fit every size the run tries.
    let xt = Tensor::from_i64s(vec![4, 3, 2], (0..24).collect());
    let short = Tensor::new(vec![3], crate::tensor::Data::I32(vec![1, 0, 1]));
    vec![
        super::Example { consts: vec![], op: op(0, 1), inputs: vec![x, lens] },
        super::Example { consts: vec![], op: op(1, 0), inputs: vec![xt, short] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverses_prefixes_and_refuses_bad_lengths() {
        let x = Tensor::from_f32s(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]);
        let op = ReverseSequence { batch_axis: 0, time_axis: 1 };
        let y = op.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![2], vec![2, 3]))]).unwrap();
        assert_eq!(y[0], Tensor::from_f32s(vec![2, 3], vec![2., 1., 3., 6., 5., 4.]));
        assert!(op.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![2], vec![4, 0]))]).is_err());
        assert!(op.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![3], vec![1, 1, 1]))]).is_err());
        let bad = ReverseSequence { batch_axis: 1, time_axis: 1 };
        assert!(bad.eval(&[Some(&x), Some(&Tensor::from_i64s(vec![3], vec![1, 1, 1]))]).is_err());
    }
}
