//! Transpose: output axis `i` is input axis `perm[i]` (the axes reversed when no `perm` is
//! given). Pure data movement, any dtype (string tensors move through the interpreter's
//! string path, `crate::codegen::emit::data::is_movement`).
use super::{input, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::gpu::{transposed_index, Dialect};
use crate::codegen::CodegenError;
use crate::ir::{Op, ValueId};
use crate::tensor::Tensor;

#[derive(Debug, Clone, PartialEq)]
pub struct Transpose {
    pub perm: Option<Vec<usize>>,
}

impl Transpose {
    /// The permutation for an input of rank `rank` (not checked: see [`Self::checked_perm`]).
    pub fn perm(&self, rank: usize) -> Vec<usize> {
        self.perm.clone().unwrap_or_else(|| (0..rank).rev().collect())
    }

    /// [`Self::perm`], which must name each of the `rank` axes once.
    fn checked_perm(&self, rank: usize) -> R<Vec<usize>> {
        let perm = self.perm(rank);
        let mut seen = vec![false; rank];
        if perm.len() != rank || perm.iter().any(|&p| p >= rank || std::mem::replace(&mut seen[p], true)) {
            return Err(format!("perm {perm:?} is not a permutation of the {rank} axes"));
        }
        Ok(perm)
    }
}

/// The permutation of a Transpose over `rank` axes, when `op` is one whose `perm` fits that
/// rank (the attention matcher follows Q, K and V through them).
pub fn perm_of(op: &Op, rank: usize) -> Option<Vec<usize>> {
    let Op::Def(d) = op else { return None };
    Some(d.get::<Transpose>()?.perm(rank)).filter(|p| p.len() == rank)
}

impl OpDef for Transpose {
    name!("Transpose");
    none_of!(scratch_bytes, in_place, decides_shapes, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        let dims = match &x.dims {
            Some(xs) => Some(self.checked_perm(xs.len())?.iter().map(|&p| xs[p].clone()).collect()),
            None => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        Ok(vec![crate::interp::ops::shape::transpose(x, &self.perm(x.rank()))?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let xs = cx.dims(x)?;
        let perm = self.perm(xs.len());
        if xs.len() > 16 {
            return Err(cx.err("rank above 16"));
        }
        Ok(format!("rt::kernels::permute::permute({}, &{}, &{perm:?}, {});", cx.read(x)?, cx.sizes(&xs)?, cx.write(cx.output(0)?)?))
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        let (xv, out) = (cx.input(0)?, cx.output(0)?);
        let ((_, xs), (_, ys)) = (cx.ty(xv)?, cx.ty(out)?);
        let src = transposed_index(Dialect::Cuda, "i", &ys, &xs, &self.perm(xs.len()));
        Ok(vec![cx.pointwise(ys.iter().product(), &format!("{}[i] = {}[{src}];", cx.ptr(out)?, cx.ptr(xv)?))])
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let perm = self.perm(x.shape.len());
        Ok(vec![cx.pointwise(&y, |i| Ok((String::new(), x.load(&transposed_index(Dialect::Wgsl, i, &y.shape, &x.shape, &perm)))))?])
    }

    /// The inverse permutation of dY.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (x, dy) = (cx.input(0)?, cx.dy()?);
        let perm = self.perm(cx.b.rank(x)?);
        let mut inv = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            *inv.get_mut(p).ok_or_else(|| format!("perm {perm:?} is not a permutation"))? = i;
        }
        Ok(vec![Some(cx.b.transpose(dy, inv)?)])
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|i| i as f32 / 4.0 - 2.0).collect());
    vec![
        super::Example { consts: vec![], op: OpRef::new(Transpose { perm: Some(vec![1, 2, 0]) }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(Transpose { perm: None }), inputs: vec![x] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::check_gradient;
    use crate::ops::IntoOp;

    #[test]
    fn transpose_moves_axes_and_refuses_non_permutations() {
        let x = Tensor::from_f32s(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let y = Transpose { perm: None }.eval(&[Some(&x)]).expect("transpose").remove(0);
        assert_eq!((y.shape.clone(), y.to_f64_vec()), (vec![3, 2], vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]));
        assert!(Transpose { perm: Some(vec![0, 0]) }.checked_perm(2).is_err());
        assert!(Transpose { perm: Some(vec![1, 0, 2]) }.checked_perm(2).is_err());
        assert_eq!(perm_of(&Transpose { perm: None }.op(), 3), Some(vec![2, 1, 0]));
        assert_eq!(perm_of(&Transpose { perm: Some(vec![1, 0]) }.op(), 3), None);
    }

    #[test]
    fn transpose_gradient_matches_finite_differences() {
        check_gradient(Transpose { perm: Some(vec![1, 2, 0]) }.op(), &[&[2, 3, 4]], -2.0, 2.0);
        check_gradient(Transpose { perm: None }.op(), &[&[2, 3, 4]], -2.0, 2.0);
    }
}
