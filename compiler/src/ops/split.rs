//! Split `(x, split?)`: `outputs` parts of X along one axis, of the sizes `split` gives (an
//! attribute before opset 13, a constant input after) or, without one, equal parts (the last
//! smaller when the dim does not divide, as opset 18's `num_outputs`; with bounded dims, more
//! than two parts must be equal). Each part is one strided
//! copy, `kernels::concat::split_part`.
use super::{input, product, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis;
use crate::ir::{DimExpr, ValueId};
use crate::tensor::Tensor;

#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    pub axis: i64,
    /// The sizes as an attribute (opset < 13); else input 1 or equal parts.
    pub sizes: Option<Vec<i64>>,
    /// How many parts (the node's outputs).
    pub outputs: usize,
}

impl Split {
    /// The split axis and each part's size along it; `None` while input 1's sizes are not
    /// known (computed at run time).
    fn parts(&self, cx: &mut ShapeCx) -> R<Option<(usize, Vec<DimExpr>)>> {
        let xs = cx.arg(0)?.dims()?.to_vec();
        let a = norm_axis(self.axis, xs.len())?;
        let d = xs[a].clone();
        let given: Option<Vec<DimExpr>> = match (&self.sizes, cx.opt(1)) {
            (Some(s), _) => Some(s.iter().map(|&v| DimExpr::constant(v)).collect()),
            (None, Some(_)) => match cx.ints(1) {
                Some(v) => Some(v),
                None => return Ok(None),
            },
            (None, None) => None,
        };
        let k = self.outputs.max(1);
        let sizes = match given {
            Some(s) => {
                if s.len() != k {
                    return Err(format!("split has {} sizes for {k} outputs", s.len()));
                }
                if let Some(v) = s.iter().find(|v| v.as_const().is_some_and(|c| c < 0)) {
                    return Err(format!("negative split {v}"));
                }
                let sizes = s;
                cx.equal("the split sizes' sum and the dim", &sizes.iter().fold(DimExpr::constant(0), |a, b| a.add(b)), &d)?;
                sizes
            }
            None => match d.as_const() {
                Some(n) => {
                    let chunk = (n.max(0) as usize).div_ceil(k);
                    (0..k).map(|i| DimExpr::constant(chunk.min((n.max(0) as usize).saturating_sub(i * chunk)) as i64)).collect()
                }
                // Halves are ⌈d/2⌉ and ⌊d/2⌋ exactly; more parts of a bounded dim must be
                // equal (the last part of ⌈d/k⌉-sized ones shrinks as d grows, which the
                // memory plan cannot size), checked at run time.
                None if k == 2 => vec![d.add(&DimExpr::constant(1)).floor_div(2), d.floor_div(2)],
                None => vec![cx.divide(&format!("the dim split into {k} equal parts"), &d, k as i64)?; k],
            },
        };
        Ok(Some((a, sizes)))
    }
}

impl OpDef for Split {
    name!("Split");
    none_of!(cuda, scratch_bytes, in_place, forwards_values, flops);

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let x = cx.input(0)?;
        let a = norm_axis(self.axis, x.shape.len()).map_err(|e| cx.err(e))?;
        let inner: usize = x.shape[a + 1..].iter().product();
        let len = x.shape[a];
        let mut ks = Vec::new();
        let mut start = 0;
        for k in 0..self.outputs.max(1) {
            let y = cx.output(k)?;
            let part = y.shape[a];
            if cx.used_output(k)?.is_some() && y.numel() > 0 {
                let mut kernel = cx.pointwise(&y, |i| Ok((String::new(), x.load(&format!("({i} / {}u * {len}u + {start}u + ({i} / {inner}u) % {part}u) * {inner}u + {i} % {inner}u", inner * part)))))?;
                if !ks.is_empty() {
                    let new = format!("{}_{k}", kernel.name);
                    kernel = kernel.renamed(&new);
                }
                ks.push(kernel);
            }
            start += part;
        }
        Ok(ks)
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let parts = match &x.dims {
            Some(_) => self.parts(cx)?,
            None => None,
        };
        Ok((0..self.outputs.max(1))
            .map(|i| OutType {
                dtype: x.dtype,
                dims: parts.as_ref().zip(x.dims.as_ref()).map(|((a, s), xs)| {
                    let mut d = xs.clone();
                    d[*a] = s[i].clone();
                    d
                }),
            })
            .collect())
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let (a, sizes) = self.parts(&mut ShapeCx::of_tensors(ins))?.ok_or("split must be integers")?;
        let mut start = 0usize;
        let mut out = Vec::with_capacity(sizes.len());
        for s in sizes {
            let s = s.as_const().ok_or("a split size is not fixed")?.max(0) as usize;
            out.push(crate::interp::ops::shape::slice_axis(x, a, start, s)?);
            start += s;
        }
        Ok(out)
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let xs = cx.dims(x)?;
        let (a, sizes) = self.parts(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("split must be a constant for codegen"))?;
        let (outer, inner) = (product(&xs[..a]), product(&xs[a + 1..]));
        let row = xs[a].mul(&inner);
        let mut s = String::new();
        let mut start = DimExpr::constant(0);
        for (k, size) in sizes.iter().enumerate() {
            if let Some(y) = cx.used_output(k) {
                s += &format!(
                    "rt::kernels::concat::split_part({}, {}, {}, {}, {}, {});\n",
                    cx.read(x)?,
                    cx.write(y)?,
                    cx.size(&outer)?,
                    cx.size(&row)?,
                    cx.size(&start.mul(&inner))?,
                    cx.size(&size.mul(&inner))?
                );
            }
            start = start.add(size);
        }
        Ok(s)
    }

    // The parts' gradients concatenated back (zeros for a part nobody used).
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::shape::split(cx.b, cx.n, cx.dys, self.axis)
    }

    shape_inputs!(1);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![4, 6], (0..24).map(|i| i as f32 * 0.5 - 3.0).collect());
    let sizes = Tensor::from_i64s(vec![3], vec![1, 2, 3]);
    vec![
        super::Example { consts: vec![1], op: OpRef::new(Split { axis: 1, sizes: None, outputs: 3 }), inputs: vec![x.clone(), sizes] },
        super::Example { consts: vec![], op: OpRef::new(Split { axis: 0, sizes: None, outputs: 2 }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(Split { axis: -1, sizes: Some(vec![4, 2]), outputs: 2 }), inputs: vec![x] },
    ]
}
