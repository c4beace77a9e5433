//! DepthToSpace and SpaceToDepth on NCHW data: blocks of `blocksize × blocksize` channels
//! become pixels and back, the channels ordered (block row, block col, channel) — DCR — or
//! (channel, block row, block col) — CRD. Each is a permutation of a 6-D view of the input,
//! so both run the runtime's `kernels::permute::permute` over dims given at run time, in the
//! interpreter (on the elements' bytes, every dtype) and in generated code.
use super::{input, move_bytes, EmitCx, GradCx, IntoOp, MoveBytes, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DimExpr, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::permute::permute;

/// Channels into pixels: [N, C, H, W] → [N, C / b², H·b, W·b].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DepthToSpace {
    pub blocksize: usize,
    /// Channels ordered (channel, block row, block col) (ONNX mode CRD); else DCR.
    pub crd: bool,
}

/// Pixels into channels: [N, C, H, W] → [N, C·b², H / b, W / b].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpaceToDepth {
    pub blocksize: usize,
    /// Channels ordered (channel, block row, block col) (ONNX mode CRD); else DCR.
    pub crd: bool,
}

/// The input's 6-D view and the permutation of it that gives the output, with the output dims.
struct Moves {
    view: [DimExpr; 6],
    perm: [usize; 6],
    out: Vec<DimExpr>,
}

/// The input's dims [N, C, H, W] and the block size as a dim.
fn nchw(cx: &ShapeCx, b: usize) -> R<([DimExpr; 4], DimExpr)> {
    let xs = cx.arg(0)?.dims()?;
    let dims: [DimExpr; 4] = xs.to_vec().try_into().map_err(|_| format!("expects an NCHW input, got rank {}", xs.len()))?;
    if b == 0 {
        return Err("blocksize must be at least 1".into());
    }
    Ok((dims, DimExpr::constant(b as i64)))
}

impl DepthToSpace {
    fn moves(&self, cx: &mut ShapeCx) -> R<Moves> {
        let ([n, c, h, w], b) = nchw(cx, self.blocksize)?;
        let bb = i64::try_from(self.blocksize * self.blocksize).map_err(|_| "blocksize too large".to_string())?;
        let oc = cx.divide(&format!("the channels by blocksize² {bb}"), &c, bb)?;
        let out = vec![n.clone(), oc.clone(), h.mul(&b), w.mul(&b)];
        // DCR: [N, b, b, C', H, W] → [N, C', H, b, W, b]; CRD: [N, C', b, b, H, W] → the same.
        Ok(if self.crd {
            Moves { view: [n, oc, b.clone(), b, h, w], perm: [0, 1, 4, 2, 5, 3], out }
        } else {
            Moves { view: [n, b.clone(), b, oc, h, w], perm: [0, 3, 4, 1, 5, 2], out }
        })
    }
}

impl SpaceToDepth {
    fn moves(&self, cx: &mut ShapeCx) -> R<Moves> {
        let ([n, c, h, w], b) = nchw(cx, self.blocksize)?;
        let k = self.blocksize as i64;
        let (oh, ow) = (cx.divide(&format!("the height by blocksize {k}"), &h, k)?, cx.divide(&format!("the width by blocksize {k}"), &w, k)?);
        let out = vec![n.clone(), c.mul(&b).mul(&b), oh.clone(), ow.clone()];
        // [N, C, H', b, W', b] → DCR [N, b, b, C, H', W'], CRD [N, C, b, b, H', W'].
        let perm = if self.crd { [0, 1, 3, 5, 2, 4] } else { [0, 3, 5, 1, 2, 4] };
        Ok(Moves { view: [n, c, oh, b.clone(), ow, b], perm, out })
    }
}

/// The rules both ops share, over their [`Moves`].
macro_rules! block_op {
    ($t:ty, $name:literal, $inverse:ident) => {
        impl OpDef for $t {
            none_of!(cuda, scratch_bytes, in_place, decides_shapes, forwards_values);

            fn name(&self) -> &'static str {
                $name
            }

            fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
                let x = cx.arg(0)?.clone();
                let dims = match x.dims {
                    Some(_) => Some(self.moves(cx)?.out),
                    None => None,
                };
                Ok(vec![OutType { dtype: x.dtype, dims }])
            }

            fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
                let x = input(ins, 0)?;
                let m = self.moves(&mut ShapeCx::of_tensors(ins))?;
                let fixed = |d: &DimExpr| d.as_const().map(|v| v as usize).ok_or_else(|| format!("dim {d} is not fixed"));
                let view = m.view.iter().map(fixed).collect::<R<Vec<_>>>()?;
                let out = m.out.iter().map(fixed).collect::<R<Vec<_>>>()?;
                Ok(vec![permuted($name, x, view, m.perm, out)?])
            }

            fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
                let x = cx.input(0)?;
                let m = self.moves(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
                Ok(format!("rt::kernels::permute::permute({}, &{}, &{:?}, {});", cx.read(x)?, cx.sizes(&m.view)?, m.perm, cx.write(cx.output(0)?)?))
            }

            // Output element i reads the input at the view's coordinates, which are i's in the
            // permuted order.
            fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
                let (x, y) = (cx.input(0)?, cx.output(0)?);
                let m = self.moves(&mut ShapeCx::of_shapes([Some((x.dtype, &x.shape[..]))])).map_err(|e| cx.err(e))?;
                let view: Vec<usize> = m.view.iter().map(|d| d.as_const().unwrap_or(0) as usize).collect();
                let vs = crate::codegen::index::strides(&view);
                let od: Vec<usize> = m.perm.iter().map(|&p| view[p]).collect();
                let os = crate::codegen::index::strides(&od);
                Ok(vec![cx.pointwise(&y, |i| {
                    let terms: Vec<String> = (0..6).filter(|&k| od[k] != 1).map(|k| format!("(({i} / {}u) % {}u) * {}u", os[k], od[k], vs[m.perm[k]])).collect();
                    let src = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
                    Ok((String::new(), x.load(&src)))
                })?])
            }

            fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
                Some(0)
            }

            // A permutation: its gradient is the inverse one, the other op in the same mode.
            fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
                let dy = cx.dy()?;
                let inverse = $inverse { blocksize: self.blocksize, crd: self.crd };
                Ok(vec![Some(cx.b.node(inverse.op(), &[dy])?)])
            }
        }
    };
}

block_op!(DepthToSpace, "DepthToSpace", SpaceToDepth);
block_op!(SpaceToDepth, "SpaceToDepth", DepthToSpace);

/// `x` seen as `view`, permuted by `perm`, as a tensor of `shape`; strings moved by number.
fn permuted(name: &str, x: &Tensor, view: Vec<usize>, perm: [usize; 6], shape: Vec<usize>) -> R<Tensor> {
    if let Data::Str(v) = &x.data {
        let ids: Vec<usize> = (0..v.len()).collect();
        let mut out = vec![0; v.len()];
        permute(&ids, &view, &perm, &mut out);
        return Ok(Tensor::new(shape, Data::Str(out.into_iter().map(|i| v.get(i).cloned().unwrap_or_default()).collect())));
    }
    move_bytes(name, x, None, shape, &Permute { view, perm })
}

struct Permute {
    view: Vec<usize>,
    perm: [usize; 6],
}

impl MoveBytes for Permute {
    fn run<const W: usize>(&self, x: &[[u8; W]], zero: [u8; W]) -> Vec<[u8; W]> {
        let mut y = vec![zero; x.len()];
        permute(x, &self.view, &self.perm, &mut y);
        y
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 8, 2, 3], (0..96).map(|i| i as f32 * 0.25 - 7.0).collect());
    let s = Tensor::new(vec![2, 2, 4, 6], Data::I64((0..96).collect()));
    let mut v = Vec::new();
    for crd in [false, true] {
        v.push(super::Example { consts: vec![], op: OpRef::new(DepthToSpace { blocksize: 2, crd }), inputs: vec![x.clone()] });
        v.push(super::Example { consts: vec![], op: OpRef::new(SpaceToDepth { blocksize: 2, crd }), inputs: vec![s.clone()] });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_of_each_other_in_both_modes() {
        let x = Tensor::from_f32s(vec![1, 8, 2, 3], (0..48).map(|i| i as f32).collect());
        for crd in [false, true] {
            let d2s = DepthToSpace { blocksize: 2, crd }.eval(&[Some(&x)]).expect("d2s").remove(0);
            assert_eq!(d2s.shape, vec![1, 2, 4, 6]);
            let back = SpaceToDepth { blocksize: 2, crd }.eval(&[Some(&d2s)]).expect("s2d").remove(0);
            assert_eq!(back, x);
        }
        // DCR takes each block from channels C' apart, CRD from neighbouring channels.
        let dcr = DepthToSpace { blocksize: 2, crd: false }.eval(&[Some(&x)]).expect("dcr").remove(0);
        assert_eq!(dcr.to_f64_vec()[..4], [0., 12., 1., 13.]);
        let crd = DepthToSpace { blocksize: 2, crd: true }.eval(&[Some(&x)]).expect("crd").remove(0);
        assert_eq!(crd.to_f64_vec()[..4], [0., 6., 1., 7.]);
        assert!(SpaceToDepth { blocksize: 2, crd: false }.eval(&[Some(&Tensor::from_f32s(vec![1, 1, 3, 2], vec![0.; 6]))]).is_err());
    }
}
