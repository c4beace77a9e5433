//! Pad `(data, pads, constant_value?, axes?)`: each listed axis (all by default) grows by its
//! leading and trailing pad (a negative pad crops), filled by the mode. `pads` and `axes` are
//! constants; the fill may be computed. One runtime kernel, `kernels::pad::pad`, for the
//! interpreter and generated code, every dtype. CenterCropPad is the same kernel with the
//! leading pads that center each axis.
use super::{input, move_bytes, EmitCx, GradCx, MoveBytes, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::data::scalar_lit;
use crate::codegen::CodegenError;
use crate::interp::ops::cast::cast;
use crate::ir::axis::norm_axis;
use crate::ir::{DimExpr, PadMode, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::pad::{center_lead, pad};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pad {
    pub mode: PadMode,
}

impl Pad {
    /// The leading and trailing pad of every dim of a rank-`r` input, from the pads (constants
    /// or, computed from bounded dims, expressions) and axes.
    fn per_dim(pads: &[DimExpr], axes: Option<&[i64]>, r: usize) -> R<(Vec<DimExpr>, Vec<DimExpr>)> {
        let axes: Vec<usize> = match axes {
            Some(a) => a.iter().map(|&a| norm_axis(a, r)).collect::<R<_>>()?,
            None => (0..r).collect(),
        };
        if pads.len() != 2 * axes.len() {
            return Err(format!("pads has {} entries for {} axes", pads.len(), axes.len()));
        }
        let zero = DimExpr::constant(0);
        let (mut before, mut after) = (vec![zero.clone(); r], vec![zero.clone(); r]);
        let mut seen = vec![false; r];
        for (i, &a) in axes.iter().enumerate() {
            if std::mem::replace(&mut seen[a], true) {
                return Err(format!("axis {a} is listed twice"));
            }
            before[a] = pads[i].clone();
            after[a] = pads[i + axes.len()].clone();
        }
        Ok((before, after))
    }

    /// The output dims: each input dim plus its pads (a constant below 0 is an error).
    fn out_dims(xs: &[DimExpr], before: &[DimExpr], after: &[DimExpr]) -> R<Vec<DimExpr>> {
        xs.iter()
            .zip(before.iter().zip(after))
            .enumerate()
            .map(|(d, (x, (b, e)))| {
                let o = x.add(b).add(e);
                match o.as_const() {
                    Some(v) if v < 0 => Err(format!("pads {b}, {e} make axis {d} negative")),
                    _ => Ok(o),
                }
            })
            .collect()
    }
}

impl OpDef for Pad {
    name!("Pad");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let pads = cx.ints(1);
        let axes = match cx.opt(3) {
            None => Some(None),
            Some(a) => a.value.as_ref().and_then(|t| t.to_i64_vec()).map(Some),
        };
        // Pads or axes computed at run time: the output dims depend on values.
        let dims = match (&x.dims, pads, axes) {
            (Some(xs), Some(p), Some(a)) => {
                let (b, e) = Self::per_dim(&p, a.as_deref(), xs.len())?;
                Some(Self::out_dims(xs, &b, &e)?)
            }
            _ => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let pads: Vec<DimExpr> = input(ins, 1)?.to_i64_vec().ok_or("pads must be integers")?.into_iter().map(DimExpr::constant).collect();
        let axes = match ins.get(3).copied().flatten() {
            Some(a) => Some(a.to_i64_vec().ok_or("axes must be integers")?),
            None => None,
        };
        let (before, after) = Self::per_dim(&pads, axes.as_deref(), x.rank())?;
        let cdims: Vec<DimExpr> = x.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect();
        let shape: Vec<usize> = Self::out_dims(&cdims, &before, &after)?.iter().map(|d| d.as_const().unwrap_or(0) as usize).collect();
        let before: Vec<i64> = before.iter().map(|d| d.as_const().unwrap_or(0)).collect();
        if self.mode != PadMode::Constant && x.shape.iter().zip(&shape).any(|(&d, &o)| d == 0 && o > 0) {
            return Err("cannot reflect, edge- or wrap-pad an empty axis".into());
        }
        let fill = match ins.get(2).copied().flatten() {
            Some(v) if v.numel() > 0 => Some(cast(v, x.dtype(), true)?),
            _ => None,
        };
        let k = PadBytes { dims: &x.shape, before: &before, mode: self.mode, out: &shape };
        Ok(vec![move_bytes("Pad", x, fill.as_ref(), shape.clone(), &k)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let ty = cx.elem(x)?;
        let xs = cx.dims(x)?;
        let scx = cx.shape_cx()?;
        let pads = scx.ints(1).ok_or_else(|| cx.err("pads must be a constant for codegen"))?;
        let axes = match cx.opt_input(3) {
            Some(_) => Some(cx.const_ints(3).ok_or_else(|| cx.err("axes must be a constant for codegen"))?),
            None => None,
        };
        let (before, after) = Self::per_dim(&pads, axes.as_deref(), xs.len()).map_err(|e| cx.err(e))?;
        let out = Self::out_dims(&xs, &before, &after).map_err(|e| cx.err(e))?;
        let fill = match cx.opt_input(2) {
            None => "Default::default()".to_string(),
            Some(v) => match cx.konst(v) {
                Some(t) if t.numel() == 0 => "Default::default()".to_string(),
                Some(t) => {
                    let t = cast(&t, cx.dtype(x)?, true).map_err(|e| cx.err(e))?;
                    scalar_lit(&t, ty).ok_or_else(|| cx.err(format!("a pad value of {}", t.dtype())))?
                }
                None if cx.dtype(v)? == cx.dtype(x)? => format!("({}).first().copied().unwrap_or_default()", cx.read(v)?),
                None => return Err(cx.err("a computed pad value of another type than the data")),
            },
        };
        // Leading pads as i64 (a constant may be negative: a crop).
        let lead = before
            .iter()
            .map(|b| match b.as_const() {
                Some(c) => Ok(c.to_string()),
                None => cx.size(b).map(|s| format!("{s} as i64")),
            })
            .collect::<Result<Vec<_>, _>>()?
            .join(", ");
        emit_pad(cx, &xs, &lead, self.mode, &fill, &out)
    }

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::shape::pad(cx, self.mode)
    }

    shape_inputs!(1 | 3);
}

/// CenterCropPad `(X, shape)`: each listed axis (all by default) cropped or zero-padded to its
/// target length around its center. `shape` decides the output's shape: a constant or a
/// shape computation; the leading pads come from the input's dims at run time
/// (`kernels::pad::center_lead`).
#[derive(Debug, Clone, PartialEq)]
pub struct CenterCropPad {
    pub axes: Option<Vec<i64>>,
}

impl CenterCropPad {
    /// The output dims: the input's, each listed axis at its target length.
    fn out_dims(&self, xs: &[DimExpr], targets: &[DimExpr]) -> R<Vec<DimExpr>> {
        let r = xs.len();
        let axes: Vec<usize> = match &self.axes {
            Some(a) => a.iter().map(|&a| norm_axis(a, r)).collect::<R<_>>()?,
            None => (0..r).collect(),
        };
        if targets.len() != axes.len() {
            return Err(format!("shape has {} entries for {} axes", targets.len(), axes.len()));
        }
        let mut out = xs.to_vec();
        let mut seen = vec![false; r];
        for (&a, t) in axes.iter().zip(targets) {
            if std::mem::replace(&mut seen[a], true) {
                return Err(format!("axis {a} is listed twice"));
            }
            if let Some(v) = t.as_const().filter(|&v| v < 0) {
                return Err(format!("negative target size {v}"));
            }
            out[a] = t.clone();
        }
        Ok(out)
    }
}

impl OpDef for CenterCropPad {
    name!("CenterCropPad");
    none_of!(cuda, scratch_bytes, in_place, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        if !cx.arg(1)?.dtype.is_int() {
            return Err(format!("shape must be integers, got {}", cx.arg(1)?.dtype));
        }
        let dims = match (&x.dims, cx.ints(1)) {
            (Some(xs), Some(t)) => Some(self.out_dims(xs, &t)?),
            _ => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let t = input(ins, 1)?;
        let t: Vec<DimExpr> = t.to_i64_vec().filter(|_| t.dtype().is_int()).ok_or("shape must be integers")?.into_iter().map(DimExpr::constant).collect();
        let xs: Vec<DimExpr> = x.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect();
        let shape: Vec<usize> = self.out_dims(&xs, &t)?.iter().map(|d| d.as_const().unwrap_or(0).max(0) as usize).collect();
        let before: Vec<i64> = x.shape.iter().zip(&shape).map(|(&d, &o)| center_lead(d, o)).collect();
        let k = PadBytes { dims: &x.shape, before: &before, mode: PadMode::Constant, out: &shape };
        Ok(vec![move_bytes("CenterCropPad", x, None, shape.clone(), &k)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let xs = cx.dims(x)?;
        let t = cx.shape_cx()?.ints(1).ok_or_else(|| cx.err("shape must be a constant for codegen"))?;
        let out = self.out_dims(&xs, &t).map_err(|e| cx.err(e))?;
        let lead = xs
            .iter()
            .zip(&out)
            .map(|(d, o)| match (d.as_const(), o.as_const()) {
                _ if d == o => Ok("0".to_string()),
                (Some(d), Some(o)) => Ok(center_lead(d as usize, o as usize).to_string()),
                _ => Ok(format!("rt::kernels::pad::center_lead({}, {})", cx.size(d)?, cx.size(o)?)),
            })
            .collect::<Result<Vec<_>, CodegenError>>()?
            .join(", ");
        emit_pad(cx, &xs, &lead, PadMode::Constant, "Default::default()", &out)
    }

    // A gather through the interpreter's index table.
    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        Ok(vec![cx.by_table()?])
    }

    shape_inputs!(1);
}

/// The kernel on raw elements (see [`move_bytes`]).
struct PadBytes<'a> {
    dims: &'a [usize],
    before: &'a [i64],
    mode: PadMode,
    out: &'a [usize],
}

impl MoveBytes for PadBytes<'_> {
    fn run<const W: usize>(&self, x: &[[u8; W]], fill: [u8; W]) -> Vec<[u8; W]> {
        let mut y = vec![fill; self.out.iter().product()];
        pad(x, self.dims, self.before, self.mode, fill, self.out, &mut y);
        y
    }
}

/// The runtime's pad kernel from input 0 (dims `xs`; `lead`: the leading pad of each dim, i64
/// expressions, negative to crop) into output 0 (dims `out`).
fn emit_pad(cx: &EmitCx, xs: &[DimExpr], lead: &str, mode: PadMode, fill: &str, out: &[DimExpr]) -> Result<String, CodegenError> {
    Ok(format!(
        "rt::kernels::pad::pad({}, &{}, &[{lead}], rt::kernels::pad::PadMode::{mode:?}, {fill}, &{}, {});",
        cx.read(cx.input(0)?)?,
        cx.sizes(xs)?,
        cx.sizes(out)?,
        cx.write(cx.output(0)?)?
    ))
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![3, 4], (0..12).map(|i| i as f32 - 5.0).collect());
    let xi = Tensor::from_i64s(vec![3, 2, 2], (0..12).collect());
    let p = |v: Vec<i64>| Tensor::from_i64s(vec![v.len()], v);
    let op = |mode| OpRef::new(Pad { mode });
    vec![
        super::Example { consts: vec![1, 2], op: op(PadMode::Constant), inputs: vec![x.clone(), p(vec![1, 2, 0, 1]), Tensor::from_f32s(vec![], vec![2.5])] },
        super::Example { consts: vec![1], op: op(PadMode::Reflect), inputs: vec![x.clone(), p(vec![2, 1, 2, 3])] },
        super::Example { consts: vec![1], op: op(PadMode::Edge), inputs: vec![xi.clone(), p(vec![0, 1, -1, 0, 2, 1])] },
        super::Example { consts: vec![1, 2, 3], op: op(PadMode::Wrap), inputs: vec![xi.clone(), p(vec![1, 2]), Tensor::new(vec![0], Data::F32(vec![])), p(vec![-1])] },
        // Crop the first axis, pad the second (odd differences: the extra element at the end).
        super::Example { consts: vec![1], op: OpRef::new(CenterCropPad { axes: None }), inputs: vec![x, p(vec![2, 7])] },
        super::Example { consts: vec![1], op: OpRef::new(CenterCropPad { axes: Some(vec![-1, 0]) }), inputs: vec![xi, p(vec![3, 2])] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::Arg;

    #[test]
    fn pads_computed_from_a_bounded_dim() {
        // Pad [s] by (0, 8 - s): a shape computation's pads, as the bounded analysis gives them.
        let s = DimExpr::var("s");
        let x = Some(Arg { dtype: DType::F32, dims: Some(vec![s.clone()]), value: None });
        let p = Some(Arg { dtype: DType::I64, dims: Some(vec![DimExpr::constant(2)]), value: None });
        let mut cx = ShapeCx::new(vec![x, p]);
        cx.set_ints(1, vec![DimExpr::constant(0), DimExpr::constant(8).sub(&s)]);
        let out = Pad { mode: PadMode::Constant }.shapes(&mut cx).expect("shapes");
        assert_eq!(out[0].dims, Some(vec![DimExpr::constant(8)]));
        // Without the computed values the output dims are unknown, not guessed.
        let x = Some(Arg { dtype: DType::F32, dims: Some(vec![s]), value: None });
        let p = Some(Arg { dtype: DType::I64, dims: Some(vec![DimExpr::constant(2)]), value: None });
        assert_eq!(Pad { mode: PadMode::Constant }.shapes(&mut ShapeCx::new(vec![x, p])).expect("shapes")[0].dims, None);
    }

    #[test]
    fn center_crop_pad_odd_lengths_and_bad_axes() {
        let run = |x: Vec<f32>, t: i64, axes: Option<Vec<i64>>| {
            let (x, t) = (Tensor::from_f32s(vec![x.len()], x), Tensor::from_i64s(vec![1], vec![t]));
            CenterCropPad { axes }.eval(&[Some(&x), Some(&t)]).map(|y| y[0].to_f64_vec())
        };
        assert_eq!(run(vec![1.0, 2.0, 3.0, 4.0, 5.0], 2, None), Ok(vec![2.0, 3.0]));
        assert_eq!(run(vec![1.0, 2.0], 5, None), Ok(vec![0.0, 1.0, 2.0, 0.0, 0.0]));
        assert!(run(vec![1.0, 2.0], 1, Some(vec![5])).is_err());
        assert!(run(vec![1.0, 2.0], -1, None).is_err());
    }
}
