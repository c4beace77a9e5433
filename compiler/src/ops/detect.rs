//! RoiAlign and 2-D DeformConv over float tensors: one runtime kernel each in
//! `kernels::detect`, for the interpreter and generated code, which takes its geometry (a
//! struct of sizes) at run time, so batch, channels and spatial dims may be bounded. The
//! kernel dims of DeformConv's W must be fixed. NonMaxSuppression, whose output length depends
//! on the values, runs in the interpreter (and folds).
use super::{input, numel, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use super::window::attrs;
use crate::interp::ops::norm::float::{by_precision, Work};
use crate::ir::{DType, DimExpr, ValueId, Window};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::detect::{self as k, Nms};

const K: &str = "rt::kernels::detect";

fn c(v: i64) -> DimExpr {
    DimExpr::constant(v)
}

/// A dim of an evaluation's (fixed) shapes.
fn at(d: &DimExpr) -> usize {
    d.as_const().unwrap_or(0).max(0) as usize
}

/// The element count of `shape`, refused past 2^40 elements.
fn len_of(shape: &[usize], what: &str) -> R<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).filter(|&n| n <= 1 << 40).ok_or_else(|| format!("{what} is too large"))
}

/// Every float operand shares X's dtype, which is f32 or f64 in generated code.
fn float_type(cx: &ShapeCx, inputs: &[usize]) -> R<DType> {
    let x = cx.arg(0)?.dtype;
    if !x.is_float() {
        return Err(format!("X must be a float tensor, got {x}"));
    }
    for &i in inputs {
        if let Some(a) = cx.opt(i) {
            if a.dtype != x {
                return Err(format!("input #{i} must have X's type {x}, got {}", a.dtype));
            }
        }
    }
    Ok(x)
}

/// The Rust type generated code runs the kernel on.
fn kernel_ty(cx: &EmitCx, x: ValueId) -> Result<&'static str, CodegenError> {
    match cx.dtype(x)? {
        DType::F32 => Ok("f32"),
        DType::F64 => Ok("f64"),
        d => Err(cx.err(format!("{d} is not supported by codegen yet"))),
    }
}

/// `X [N, C, H, W]`, `rois [R, 4]` (x1, y1, x2, y2), `batch_indices [R]` → `[R, C,
/// output_height, output_width]`: each roi's bins averaged (or maxed) over bilinear samples.
#[derive(Debug, Clone, PartialEq)]
pub struct RoiAlign {
    pub max_mode: bool,
    /// half_pixel coordinates; else output_half_pixel (RoiAlign-10's).
    pub half_pixel: bool,
    pub output_height: usize,
    pub output_width: usize,
    /// Samples per bin along each axis; 0: adaptive.
    pub sampling_ratio: usize,
    pub spatial_scale: f32,
}

/// RoiAlign's sizes: X's dims and the roi count.
struct RoiDims {
    x: [DimExpr; 4],
    rois: DimExpr,
}

impl RoiAlign {
    /// The sizes, with the operands checked; `None` while a rank is not known.
    fn dims(&self, cx: &mut ShapeCx) -> R<Option<RoiDims>> {
        if self.output_height == 0 || self.output_width == 0 {
            return Err("output_height and output_width must be positive".into());
        }
        float_type(cx, &[1])?;
        let b = cx.arg(2)?.clone();
        if !b.dtype.is_int() {
            return Err(format!("batch_indices must be integers, got {}", b.dtype));
        }
        let (Some(xs), Some(rs), Some(bs)) = (cx.arg(0)?.dims.clone(), cx.arg(1)?.dims.clone(), b.dims) else { return Ok(None) };
        let x = <[DimExpr; 4]>::try_from(xs).map_err(|xs| format!("X must be [N, C, H, W], got rank {}", xs.len()))?;
        if rs.len() != 2 || bs.len() != 1 {
            return Err(format!("rois must be [R, 4] and batch_indices [R], got ranks {} and {}", rs.len(), bs.len()));
        }
        cx.equal("rois dim 1 and 4", &rs[1], &c(4))?;
        cx.equal("the roi counts of rois and batch_indices", &bs[0], &rs[0])?;
        Ok(Some(RoiDims { x, rois: rs[0].clone() }))
    }

    /// The kernel's geometry as a struct literal of `size`'s expressions.
    fn geometry<E>(&self, d: &RoiDims, size: impl Fn(&DimExpr) -> Result<String, E>) -> Result<String, E> {
        Ok(format!(
            "{K}::RoiAlign {{ n: {}, c: {}, h: {}, w: {}, rois: {}, out_h: {}, out_w: {}, sampling_ratio: {}, spatial_scale: {:?}, half_pixel: {}, max_mode: {} }}",
            size(&d.x[0])?,
            size(&d.x[1])?,
            size(&d.x[2])?,
            size(&d.x[3])?,
            size(&d.rois)?,
            self.output_height,
            self.output_width,
            self.sampling_ratio,
            self.spatial_scale,
            self.half_pixel,
            self.max_mode
        ))
    }
}

impl OpDef for RoiAlign {
    name!("RoiAlign");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        let dims = self.dims(cx)?.map(|d| vec![d.rois, d.x[1].clone(), c(self.output_height as i64), c(self.output_width as i64)]);
        Ok(vec![OutType { dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, rois, bi) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        let d = self.dims(&mut ShapeCx::of_shapes(ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..])))))?.ok_or("shapes are not known")?;
        let kd = k::RoiAlign {
            n: at(&d.x[0]),
            c: at(&d.x[1]),
            h: at(&d.x[2]),
            w: at(&d.x[3]),
            rois: at(&d.rois),
            out_h: self.output_height,
            out_w: self.output_width,
            sampling_ratio: self.sampling_ratio,
            spatial_scale: self.spatial_scale,
            half_pixel: self.half_pixel,
            max_mode: self.max_mode,
        };
        let batch = bi.to_i64_vec().ok_or("batch_indices must be integers")?;
        if let Some(b) = batch.iter().find(|&&b| b < 0 || b as usize >= kd.n) {
            return Err(format!("batch index {b} is out of range for {} batches", kd.n));
        }
        let shape = vec![kd.rois, kd.c, kd.out_h, kd.out_w];
        let len = len_of(&shape, "RoiAlign's output")?;
        fn go<R: Work>(x: &Tensor, rois: &Tensor, batch: &[i64], d: &k::RoiAlign, shape: Vec<usize>, len: usize) -> Result<Tensor, String> {
            let mut y = vec![R::default(); len];
            k::roi_align(&R::view(x), &R::view(rois), batch, d, &mut y);
            Ok(Tensor::new(shape, R::into_data(y, x.dtype())))
        }
        Ok(vec![by_precision!(x.dtype(), "RoiAlign", go(x, rois, &batch, &kd, shape, len))?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, rois, bi) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
        let t = kernel_ty(cx, x)?;
        if cx.dtype(bi)? != DType::I64 {
            return Err(cx.err(format!("batch_indices must be int64 for codegen, got {}", cx.dtype(bi)?)));
        }
        if !self.spatial_scale.is_finite() {
            return Err(cx.err("spatial_scale must be finite"));
        }
        let d = self.dims(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("shapes are not known"))?;
        // A batch index out of range gives zeros (the interpreter refuses it).
        Ok(format!(
            "{K}::roi_align::<{t}>({}, {}, {}, &{}, {});",
            cx.read(x)?,
            cx.read(rois)?,
            cx.read(bi)?,
            self.geometry(&d, |s| cx.size(s))?,
            cx.write(cx.output(0)?)?
        ))
    }

    // Four weighted corners per sample, about one sample per output element.
    flops!(per_output 8);
}

/// `X [N, C, H, W]`, `W [M, C / group, kh, kw]`, `offset [N, offset_group · kh · kw · 2, oh,
/// ow]`, optional `B [M]` and `mask [N, offset_group · kh · kw, oh, ow]` → `[N, M, oh, ow]`: a
/// convolution whose taps are moved by the offsets (bilinear samples) and scaled by the mask.
#[derive(Debug, Clone, PartialEq)]
pub struct DeformConv {
    /// kernel_shape, strides, pads and dilations (no auto_pad, no ceil_mode).
    pub window: Window,
    pub group: usize,
    pub offset_group: usize,
}

/// DeformConv's sizes: dims that may be bounded, the window's constants.
struct DeformDims {
    n: DimExpr,
    c: DimExpr,
    h: DimExpr,
    w: DimExpr,
    m: DimExpr,
    oh: DimExpr,
    ow: DimExpr,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 2],
}

impl DeformConv {
    /// The sizes, with every operand's dims checked; `None` while a rank is not known.
    fn dims(&self, cx: &mut ShapeCx) -> R<Option<DeformDims>> {
        float_type(cx, &[1, 2, 3, 4])?;
        let dims = |cx: &ShapeCx, i: usize| cx.opt(i).map(|a| a.dims.clone());
        let (Some(Some(xs)), Some(Some(ws)), Some(Some(os))) = (dims(cx, 0), dims(cx, 1), dims(cx, 2)) else { return Ok(None) };
        if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
            return Err(format!("DeformConv supports 2-D inputs only: X, W and offset have ranks {}, {} and {}", xs.len(), ws.len(), os.len()));
        }
        let Some(kernel) = super::conv_transpose::kernel_of(cx, &self.window, &ws)? else { return Ok(None) };
        let a = attrs(&self.window, &kernel)?;
        let (group, og) = (self.group, self.offset_group);
        if group == 0 || og == 0 {
            return Err("group and offset_group must be positive".into());
        }
        let (xc, m) = (xs[1].clone(), ws[0].clone());
        cx.equal("X's channels and W's input channels times group", &xc, &ws[1].scale(group as i64))?;
        cx.divides("group and W's output channels", &c(group as i64), &m)?;
        cx.divides("offset_group and X's channels", &c(og as i64), &xc)?;
        let mut out = Vec::with_capacity(2);
        for i in 0..2 {
            let dk = ((kernel[i] - 1) * a.dilations[i] + 1) as i64;
            let padded = xs[2 + i].add(&c((a.pads[i] + a.pads[2 + i]) as i64));
            cx.at_most(&format!("the dilated kernel and the padded input along spatial dim {i}"), &c(dk), &padded)?;
            out.push(padded.sub(&c(dk)).floor_div(a.strides[i] as i64).add(&c(1)));
        }
        let [oh, ow] = <[DimExpr; 2]>::try_from(out).map_err(|_| "two spatial dims")?;
        let kk = (kernel[0] * kernel[1]) as i64;
        let want = |ch: i64| [xs[0].clone(), c(og as i64 * kk * ch), oh.clone(), ow.clone()];
        let (bs, ms) = (dims(cx, 3), dims(cx, 4));
        let mut expect = |what: &str, got: &[DimExpr], want: &[DimExpr]| -> R<()> {
            if got.len() != want.len() {
                return Err(format!("{what} has rank {}, expected {}", got.len(), want.len()));
            }
            for (j, (g, w)) in got.iter().zip(want).enumerate() {
                cx.equal(&format!("{what} dim {j}"), g, w)?;
            }
            Ok(())
        };
        expect("offset", &os, &want(2))?;
        if let Some(Some(bs)) = bs {
            expect("B", &bs, std::slice::from_ref(&m))?;
        }
        if let Some(Some(ms)) = ms {
            expect("mask", &ms, &want(1))?;
        }
        Ok(Some(DeformDims {
            n: xs[0].clone(),
            c: xc,
            h: xs[2].clone(),
            w: xs[3].clone(),
            m,
            oh,
            ow,
            kernel: [kernel[0], kernel[1]],
            stride: [a.strides[0], a.strides[1]],
            dilation: [a.dilations[0], a.dilations[1]],
            pad: [a.pads[0], a.pads[1]],
        }))
    }

    /// The kernel's geometry at fixed sizes.
    fn fixed(&self, d: &DeformDims) -> k::DeformConv {
        k::DeformConv {
            n: at(&d.n),
            c: at(&d.c),
            h: at(&d.h),
            w: at(&d.w),
            m: at(&d.m),
            kh: d.kernel[0],
            kw: d.kernel[1],
            oh: at(&d.oh),
            ow: at(&d.ow),
            stride: d.stride,
            dilation: d.dilation,
            pad: d.pad,
            group: self.group,
            offset_group: self.offset_group,
        }
    }
}

impl OpDef for DeformConv {
    name!("DeformConv");
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        let dims = self.dims(cx)?.map(|d| vec![d.n, d.m, d.oh, d.ow]);
        Ok(vec![OutType { dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, w, off) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        let (b, mask) = (ins.get(3).copied().flatten(), ins.get(4).copied().flatten());
        let d = self.dims(&mut ShapeCx::of_shapes(ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..])))))?.ok_or("shapes are not known")?;
        let kd = self.fixed(&d);
        let shape = vec![kd.n, kd.m, kd.oh, kd.ow];
        let (len, cols) = (len_of(&shape, "DeformConv's output")?, len_of(&[k::deform_conv_scratch_len(&kd)], "DeformConv's column buffer")?);
        #[allow(clippy::too_many_arguments)]
        fn go<R: Work>(x: &Tensor, w: &Tensor, off: &Tensor, b: Option<&Tensor>, mask: Option<&Tensor>, d: &k::DeformConv, shape: Vec<usize>, len: usize, cols: usize) -> Result<Tensor, String> {
            let (mut y, mut col) = (vec![R::default(); len], vec![R::default(); cols]);
            let (bv, mv) = (b.map(R::view).unwrap_or_default(), mask.map(R::view).unwrap_or_default());
            k::deform_conv(&R::view(x), &R::view(w), &R::view(off), &bv, &mv, d, &mut col, &mut y);
            Ok(Tensor::new(shape, R::into_data(y, x.dtype())))
        }
        Ok(vec![by_precision!(x.dtype(), "DeformConv", go(x, w, off, b, mask, &kd, shape, len, cols))?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let t = kernel_ty(cx, x)?;
        let d = self.dims(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("shapes are not known"))?;
        let opt = |i: usize| cx.opt_input(i).map_or(Ok("&[]".to_string()), |v| cx.read(v));
        let geometry = format!(
            "{K}::DeformConv {{ n: {}, c: {}, h: {}, w: {}, m: {}, kh: {}, kw: {}, oh: {}, ow: {}, stride: {:?}, dilation: {:?}, pad: {:?}, group: {}, offset_group: {} }}",
            cx.size(&d.n)?,
            cx.size(&d.c)?,
            cx.size(&d.h)?,
            cx.size(&d.w)?,
            cx.size(&d.m)?,
            d.kernel[0],
            d.kernel[1],
            cx.size(&d.oh)?,
            cx.size(&d.ow)?,
            d.stride,
            d.dilation,
            d.pad,
            self.group,
            self.offset_group
        );
        Ok(format!(
            "{K}::deform_conv::<{t}>({}, {}, {}, {}, {}, &{geometry}, {}, {});",
            cx.read(x)?,
            cx.read(cx.input(1)?)?,
            cx.read(cx.input(2)?)?,
            opt(3)?,
            opt(4)?,
            cx.scratch(cx.dtype(x)?)?,
            cx.write(cx.output(0)?)?
        ))
    }

    /// The column buffer of one group's sampled inputs, at the bounds.
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        let mut cx = ShapeCx::of_shapes(ins.iter().map(|i| i.as_ref().map(|(d, s)| (*d, &s[..]))));
        let size = ins.first().and_then(|i| i.as_ref()).map_or(4, |(d, _)| d.size());
        match self.dims(&mut cx) {
            Ok(Some(d)) => k::deform_conv_scratch_len(&self.fixed(&d)).saturating_mul(size),
            _ => 0,
        }
    }

    // The convolution's multiply-adds, and bilinear sampling of every tap.
    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        let taps = numel(&Some(ins.get(1)?.as_ref()?.get(1..)?.to_vec()))?;
        numel(outs.first()?)?.checked_mul(taps.saturating_mul(2).saturating_add(8))
    }
}

/// Every operand must share X's float type.
fn check_float(x: &Tensor, others: &[&Tensor], what: &str) -> R<()> {
    if !x.dtype().is_float() || others.iter().any(|t| t.dtype() != x.dtype()) {
        return Err(format!("{what} needs float operands of one type, got X {} and {:?}", x.dtype(), others.iter().map(|t| t.dtype()).collect::<Vec<_>>()));
    }
    Ok(())
}

/// NonMaxSuppression `(boxes [B, N, 4], scores [B, C, N], max_output_boxes_per_class?,
/// iou_threshold?, score_threshold?)`: `[selected, 3]` int64 rows (batch, class, box), per
/// batch and class the boxes by descending score that overlap no kept one by more than the
/// threshold. The row count depends on every input's values, so only constant inputs (folded
/// before code generation) get through codegen; the math is `kernels::detect::nms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonMaxSuppression {
    pub center_point_box: bool,
}

impl OpDef for NonMaxSuppression {
    name!("NonMaxSuppression");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        Ok(vec![OutType { dtype: DType::I64, dims: Some(vec![cx.unknown(), DimExpr::constant(3)]) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (boxes, scores) = (input(ins, 0)?, input(ins, 1)?);
        let (bs, ss) = (&boxes.shape, &scores.shape);
        if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
            return Err(format!("NonMaxSuppression needs boxes [B, N, 4] and scores [B, C, N], got {bs:?} and {ss:?}"));
        }
        check_float(boxes, &[scores], "NonMaxSuppression")?;
        let opt = |i: usize| ins.get(i).copied().flatten();
        let max_out = opt(2);
        if max_out.is_some_and(|t| !t.dtype().is_int()) {
            return Err("max_output_boxes_per_class must be an integer".into());
        }
        // Absent: no boxes per class (the spec's default 0); negative counts as 0.
        let max_per_class = max_out.and_then(|t| t.to_i64_vec()).and_then(|v| v.first().copied()).unwrap_or(0).max(0);
        // A scalar-like optional input (`None` when absent or empty).
        let first = |t: Option<&Tensor>| t.and_then(|t| t.to_f64_vec().first().copied());
        let iou = first(opt(3)).unwrap_or(0.0);
        let score = first(opt(4));
        fn go<W: Work>(boxes: &Tensor, scores: &Tensor, max: usize, iou: f64, score: Option<f64>, center: bool) -> R<Tensor> {
            let (bs, ss) = (&boxes.shape, &scores.shape);
            let p = Nms {
                batches: bs[0],
                classes: ss[1],
                boxes: bs[1],
                max_per_class: max,
                iou_threshold: <W as burnc_runtime::kernels::real::Real>::from_f64(iou),
                score_threshold: score.map(<W as burnc_runtime::kernels::real::Real>::from_f64),
                center_point_box: center,
            };
            let mut out = vec![0i64; crate::interp::ops::util::numel(&[k::nms_max_rows(&p), 3])?];
            let (mut order, mut kept) = (vec![0usize; p.boxes], vec![0usize; p.boxes]);
            let rows = k::nms(&W::view(boxes), &W::view(scores), &p, &mut order, &mut kept, &mut out);
            out.truncate(rows * 3);
            Ok(Tensor::new(vec![rows, 3], Data::I64(out)))
        }
        let max = usize::try_from(max_per_class).unwrap_or(usize::MAX);
        Ok(vec![by_precision!(boxes.dtype(), "NonMaxSuppression", go(boxes, scores, max, iou, score, self.center_point_box))?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        Err(cx.err("NonMaxSuppression's output length depends on its inputs' values: codegen needs them to be constants"))
    }

    // The overlaps computed depend on the scores.
    fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        None
    }

    shape_inputs!(_);
}

pub fn examples() -> Vec<super::Example> {
    let f = |shape: Vec<usize>, k: usize, s: f32| {
        let n = shape.iter().product::<usize>();
        Tensor::from_f32s(shape, (0..n).map(|i| ((i * k) % 17) as f32 * s - 1.0).collect())
    };
    // Rois inside and partly outside a 6×5 map; batch index 0 so every batch size has it.
    let rois = Tensor::from_f32s(vec![3, 4], vec![0.0, 0.0, 4.0, 3.0, 1.5, 0.5, 6.5, 5.0, -1.0, 2.0, 2.0, 7.0]);
    let batch = Tensor::new(vec![3], Data::I64(vec![0, 0, 0]));
    let roi = |max_mode, half_pixel, sampling_ratio| RoiAlign { max_mode, half_pixel, output_height: 2, output_width: 3, sampling_ratio, spatial_scale: 0.75 };
    let w = f(vec![4, 1, 2, 2], 5, 0.25);
    // Offsets of 2 offset groups · 4 taps · 2, over the 2×2 output of a 3×4 input padded by 1
    // (top, right) at stride 2 (kernel 2).
    let window = Window { kernel_shape: vec![2, 2], strides: vec![2, 2], pads: vec![1, 0, 0, 1], dilations: vec![], auto_pad: crate::ir::AutoPad::NotSet, ceil_mode: false };
    let deform = DeformConv { window, group: 2, offset_group: 2 };
    vec![
        super::Example { consts: vec![], op: OpRef::new(roi(false, true, 0)), inputs: vec![f(vec![2, 3, 6, 5], 3, 0.5), rois.clone(), batch.clone()] },
        super::Example { consts: vec![], op: OpRef::new(roi(true, false, 2)), inputs: vec![f(vec![2, 3, 6, 5], 7, 0.5), rois, batch] },
        super::Example {
            consts: vec![1],
            op: OpRef::new(deform.clone()),
            inputs: vec![f(vec![1, 2, 3, 4], 3, 0.5), w.clone(), f(vec![1, 16, 2, 2], 5, 0.1), Tensor::from_f32s(vec![4], vec![0.5, -1.0, 0.0, 2.0]), f(vec![1, 8, 2, 2], 2, 0.1)],
        },
        super::Example { consts: vec![1], op: OpRef::new(deform), inputs: vec![f(vec![2, 2, 3, 4], 4, 0.5), w, f(vec![2, 16, 2, 2], 5, 0.1)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_shapes_are_refused() {
        let x = Tensor::from_f32s(vec![1, 1, 4, 4], vec![0.0; 16]);
        let rois = Tensor::from_f32s(vec![1, 3], vec![0.0; 3]);
        let batch = Tensor::new(vec![1], Data::I64(vec![0]));
        let op = RoiAlign { max_mode: false, half_pixel: true, output_height: 1, output_width: 1, sampling_ratio: 0, spatial_scale: 1.0 };
        assert!(op.eval(&[Some(&x), Some(&rois), Some(&batch)]).is_err());
        let rois = Tensor::from_f32s(vec![1, 4], vec![0.0, 0.0, 2.0, 2.0]);
        let far = Tensor::new(vec![1], Data::I64(vec![3]));
        assert!(op.eval(&[Some(&x), Some(&rois), Some(&far)]).is_err());
        assert!(op.eval(&[Some(&x), Some(&rois), Some(&batch)]).is_ok());
        // A 5×5 kernel does not fit a 4×4 input.
        let w = Tensor::from_f32s(vec![1, 1, 5, 5], vec![0.0; 25]);
        let off = Tensor::from_f32s(vec![1, 50, 0, 0], vec![]);
        let window = Window { kernel_shape: vec![], strides: vec![], pads: vec![], dilations: vec![], auto_pad: crate::ir::AutoPad::NotSet, ceil_mode: false };
        let dc = DeformConv { window, group: 1, offset_group: 1 };
        assert!(dc.eval(&[Some(&x), Some(&w), Some(&off)]).is_err());
    }
}
