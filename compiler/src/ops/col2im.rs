//! Col2Im `(input [N, C·K, L], image_shape, block_shape)` → `[N, C, image…]`: the adjoint of
//! im2col, each column's block of K values added back into the image, overlaps summed. The
//! image and block shapes decide the output's shape and must be constants; N and C may be
//! bounded. One runtime kernel, `kernels::unpool::col2im_batch`, for the interpreter and
//! generated code.
use super::{input, or_fill, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::DimExpr;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::unpool::col2im_batch;
use burnc_runtime::kernels::window::Window3;

#[derive(Debug, Clone, PartialEq)]
pub struct Col2Im {
    /// Per spatial dim; empty: 1 each.
    pub dilations: Vec<usize>,
    /// Leading pads, then trailing ones; empty: none.
    pub pads: Vec<usize>,
    /// Per spatial dim; empty: 1 each.
    pub strides: Vec<usize>,
}

/// The kernel's arguments: batch and channels as dims, the window over the image.
struct Geometry {
    n: DimExpr,
    c: DimExpr,
    win: Window3,
    image: Vec<usize>,
}

impl Col2Im {
    /// Input `i`'s constant sizes, `None` while they are not known.
    fn sizes(cx: &ShapeCx, i: usize, what: &str) -> R<Option<Vec<usize>>> {
        let Some(v) = cx.ints(i) else { return Ok(None) };
        let mut out = Vec::with_capacity(v.len());
        for d in v {
            match d.as_const() {
                None => return Ok(None),
                Some(c) => out.push(usize::try_from(c).map_err(|_| format!("{what} has negative entry {c}"))?),
            }
        }
        Ok(Some(out))
    }

    /// The geometry, with the input's dims checked against it; `None` while the image or
    /// block shape is not known.
    fn geometry(&self, cx: &mut ShapeCx) -> R<Option<Geometry>> {
        let (Some(image), Some(block)) = (Self::sizes(cx, 1, "image_shape")?, Self::sizes(cx, 2, "block_shape")?) else { return Ok(None) };
        let n = image.len();
        if block.len() != n || n == 0 {
            return Err(format!("image_shape {image:?} and block_shape {block:?} must have one (non-zero) length"));
        }
        let xs = cx.arg(0)?.dims()?.to_vec();
        let [batch, rows, len] = <[DimExpr; 3]>::try_from(xs).map_err(|xs| format!("input must have rank 3, got rank {}", xs.len()))?;
        let (dil, st, pads) = (or_fill(&self.dilations, n, 1, "dilations")?, or_fill(&self.strides, n, 1, "strides")?, or_fill(&self.pads, 2 * n, 0, "pads")?);
        let mut blocks = Vec::with_capacity(n);
        for i in 0..n {
            let span = dil[i].checked_mul(block[i].saturating_sub(1)).and_then(|s| s.checked_add(1)).ok_or("block too large")?;
            let padded = image[i].checked_add(pads[i] + pads[i + n]).ok_or("image too large")?;
            if block[i] == 0 || padded < span || st[i] == 0 {
                return Err(format!("block {} (dilated to {span}) does not fit the padded image dim {padded}", block[i]));
            }
            blocks.push((padded - span) / st[i] + 1);
        }
        let k = block.iter().try_fold(1i64, |a, &b| a.checked_mul(b as i64)).ok_or("block too large")?;
        let c = cx.divide("input dim 1 by the block size", &rows, k)?;
        let l = blocks.iter().try_fold(1i64, |a, &b| a.checked_mul(b as i64)).ok_or("too many blocks")?;
        cx.equal("input dim 2 and the number of blocks", &len, &DimExpr::constant(l))?;
        let pb: Vec<isize> = pads[..n].iter().map(|&p| p as isize).collect();
        let pe: Vec<isize> = pads[n..].iter().map(|&p| p as isize).collect();
        let win = Window3::new(&image, &blocks, &block, &st, &dil, &pb, &pe).ok_or("Col2Im supports at most 3 spatial dims")?;
        Ok(Some(Geometry { n: batch, c, win, image }))
    }
}

impl OpDef for Col2Im {
    name!("Col2Im");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        for i in [1, 2] {
            if !cx.arg(i)?.dtype.is_int() {
                return Err(format!("input #{i} must be integers, got {}", cx.arg(i)?.dtype));
            }
        }
        let dims = match x.dims {
            Some(_) => self.geometry(cx)?.map(|g| [g.n, g.c].into_iter().chain(g.image.iter().map(|&d| DimExpr::constant(d as i64))).collect()),
            None => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let mut cx = ShapeCx::of_shapes(ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..]))));
        for i in [1, 2] {
            let t = input(ins, i)?;
            let v = t.to_i64_vec().filter(|_| t.dtype().is_int()).ok_or_else(|| format!("input #{i} must be integers"))?;
            cx.set_ints(i, v.into_iter().map(DimExpr::constant).collect());
        }
        let g = self.geometry(&mut cx)?.ok_or("image_shape and block_shape must be given")?;
        let at = |d: &DimExpr| d.as_const().unwrap_or(0).max(0) as usize;
        let (n, c) = (at(&g.n), at(&g.c));
        let mut shape = vec![n, c];
        shape.extend(&g.image);
        let len = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("Col2Im's output is too large")?;
        macro_rules! go {
            ($($t:ident),*) => {
                match &x.data {
                    $(Data::$t(v) => {
                        let mut y = vec![Default::default(); len];
                        col2im_batch(v, n, c, &g.win, &mut y);
                        Data::$t(y)
                    })*
                    other => return Err(format!("Col2Im on {} is not supported", other.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
        Ok(vec![Tensor::new(shape, data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let g = self.geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("image_shape and block_shape must be constants for codegen"))?;
        Ok(format!(
            "rt::kernels::unpool::col2im_batch({}, {}, {}, &{}, {});",
            cx.read(x)?,
            cx.size(&g.n)?,
            cx.size(&g.c)?,
            crate::codegen::emit::nn::window_lit(&g.win),
            cx.write(cx.output(0)?)?
        ))
    }

    // One addition per input element.
    flops!(per_input 1);

    shape_inputs!(1 | 2);
}

pub fn examples() -> Vec<super::Example> {
    let shape = |v: Vec<i64>| Tensor::from_i64s(vec![v.len()], v);
    // 2×2 blocks over a 3×3 image: 4 blocks, the middle pixel in all of them.
    let x = Tensor::from_f32s(vec![2, 8, 4], (0..64).map(|i| ((i * 7) % 13) as f32 - 6.0).collect());
    // Strides, dilations and pads: a 4×5 image, blocks 2×2 dilated along W, 2 × 4 of them.
    let xi = Tensor::new(vec![3, 8, 8], Data::I32((0..192).map(|i| (i % 11) - 5).collect()));
    vec![
        super::Example { consts: vec![1, 2], op: OpRef::new(Col2Im { dilations: vec![], pads: vec![], strides: vec![] }), inputs: vec![x, shape(vec![3, 3]), shape(vec![2, 2])] },
        super::Example {
            consts: vec![1, 2],
            op: OpRef::new(Col2Im { dilations: vec![1, 2], pads: vec![1, 0, 0, 1], strides: vec![2, 1] }),
            inputs: vec![xi, shape(vec![4, 5]), shape(vec![2, 2])],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_sum_and_bad_geometry_is_refused() {
        // 1-D image of 3, blocks of 2 at stride 1: positions 0,1 and 1,2; the middle sums.
        let x = Tensor::from_f32s(vec![1, 2, 2], vec![1.0, 10.0, 2.0, 20.0]);
        let (image, block) = (Tensor::from_i64s(vec![1], vec![3]), Tensor::from_i64s(vec![1], vec![2]));
        let op = Col2Im { dilations: vec![], pads: vec![], strides: vec![] };
        let y = op.eval(&[Some(&x), Some(&image), Some(&block)]).expect("eval");
        assert_eq!((y[0].shape.clone(), y[0].to_f64_vec()), (vec![1, 1, 3], vec![1.0, 12.0, 20.0]));
        // Three blocks' worth of columns for two blocks; a block larger than the image.
        let x3 = Tensor::from_f32s(vec![1, 2, 3], vec![0.0; 6]);
        assert!(op.eval(&[Some(&x3), Some(&image), Some(&block)]).is_err());
        let big = Tensor::from_i64s(vec![1], vec![4]);
        assert!(op.eval(&[Some(&x), Some(&image), Some(&big)]).is_err());
    }
}
