//! NonMaxSuppression, RoiAlign and DeformConv: geometry checked here (shared with inference
//! and codegen), math in `burnc_runtime::kernels::detect`. NonMaxSuppression's output length
//! depends on the values, so generated code sees it folded when its inputs are constants.
use super::norm::float::{by_precision, Work};
use super::util::{arg, numel, one, opt_arg};
use super::OpResult;
use crate::interp::ops::nn::geom;
use crate::interp::RtValue;
use crate::ir::{AutoPad, Op, Window};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::detect::{self as k, DeformConv, Nms, RoiAlign};

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    match op {
        Op::NonMaxSuppression { center_point_box } => one(nms(args, *center_point_box)?),
        Op::RoiAlign { .. } => {
            let (x, rois, bi) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
            let (d, shape) = roi_dims(op, &x.shape, &rois.shape, &bi.shape)?;
            check_float(x, &[rois], "RoiAlign")?;
            let batch = bi.to_i64_vec().filter(|_| bi.dtype().is_int()).ok_or("batch_indices must be integers")?;
            if let Some(b) = batch.iter().find(|&&b| b < 0 || b as usize >= d.n) {
                return Err(format!("batch index {b} is out of range for {} batches", d.n));
            }
            fn go<R: Work>(x: &Tensor, rois: &Tensor, batch: &[i64], d: &RoiAlign, shape: Vec<usize>) -> Result<Tensor, String> {
                let mut y = vec![R::default(); numel(&shape)?];
                k::roi_align(&R::view(x), &R::view(rois), batch, d, &mut y);
                Ok(Tensor::new(shape, R::into_data(y, x.dtype())))
            }
            one(by_precision!(x.dtype(), "RoiAlign", go(x, rois, &batch, &d, shape))?)
        }
        Op::DeformConv { .. } => {
            let (x, w, off) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
            let (b, mask) = (opt_arg(args, 3)?, opt_arg(args, 4)?);
            let d = deform_dims(op, &x.shape, &w.shape, &off.shape, b.map(|t| &t.shape[..]), mask.map(|t| &t.shape[..]))?;
            let others: Vec<&Tensor> = [Some(w), Some(off), b, mask].into_iter().flatten().collect();
            check_float(x, &others, "DeformConv")?;
            let shape = vec![d.n, d.m, d.oh, d.ow];
            numel(&shape)?;
            numel(&[k::deform_conv_scratch_len(&d)])?;
            fn go<R: Work>(x: &Tensor, w: &Tensor, off: &Tensor, b: Option<&Tensor>, mask: Option<&Tensor>, d: &DeformConv, shape: Vec<usize>) -> Result<Tensor, String> {
                let mut y = vec![R::default(); shape.iter().product()];
                let mut col = vec![R::default(); k::deform_conv_scratch_len(d)];
                let (bv, mv) = (b.map(R::view).unwrap_or_default(), mask.map(R::view).unwrap_or_default());
                k::deform_conv(&R::view(x), &R::view(w), &R::view(off), &bv, &mv, d, &mut col, &mut y);
                Ok(Tensor::new(shape, R::into_data(y, x.dtype())))
            }
            one(by_precision!(x.dtype(), "DeformConv", go(x, w, off, b, mask, &d, shape))?)
        }
        _ => Err(format!("{} is not a detection op", op.name())),
    }
}

/// Every operand must share X's float type.
fn check_float(x: &Tensor, others: &[&Tensor], what: &str) -> Result<(), String> {
    if !x.dtype().is_float() || others.iter().any(|t| t.dtype() != x.dtype()) {
        return Err(format!("{what} needs float operands of one type, got X {} and {:?}", x.dtype(), others.iter().map(|t| t.dtype()).collect::<Vec<_>>()));
    }
    Ok(())
}

/// RoiAlign geometry and output shape [rois, C, output_height, output_width].
pub fn roi_dims(op: &Op, xs: &[usize], rs: &[usize], bs: &[usize]) -> Result<(RoiAlign, Vec<usize>), String> {
    let Op::RoiAlign { max_mode, half_pixel, output_height, output_width, sampling_ratio, spatial_scale } = *op else {
        return Err("not RoiAlign".into());
    };
    if xs.len() != 4 || rs.len() != 2 || rs[1] != 4 || bs.len() != 1 || bs[0] != rs[0] {
        return Err(format!("RoiAlign needs X [N, C, H, W], rois [R, 4] and batch_indices [R], got {xs:?}, {rs:?} and {bs:?}"));
    }
    if output_height == 0 || output_width == 0 {
        return Err("output_height and output_width must be positive".into());
    }
    let d = RoiAlign {
        n: xs[0],
        c: xs[1],
        h: xs[2],
        w: xs[3],
        rois: rs[0],
        out_h: output_height,
        out_w: output_width,
        sampling_ratio,
        spatial_scale,
        half_pixel,
        max_mode,
    };
    Ok((d, vec![rs[0], xs[1], output_height, output_width]))
}

/// 2-D DeformConv geometry from the shapes of X, W, offset, B and mask.
pub fn deform_dims(op: &Op, xs: &[usize], ws: &[usize], os: &[usize], bs: Option<&[usize]>, ms: Option<&[usize]>) -> Result<DeformConv, String> {
    let Op::DeformConv { window, group, offset_group } = op else { return Err("not DeformConv".into()) };
    let (group, og) = (*group, *offset_group);
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return Err(format!("DeformConv supports 2-D inputs only: X {xs:?}, W {ws:?}, offset {os:?}"));
    }
    let kernel = if window.kernel_shape.is_empty() { ws[2..].to_vec() } else { window.kernel_shape.clone() };
    if kernel != ws[2..] {
        return Err(format!("kernel_shape {kernel:?} differs from W's {:?}", &ws[2..]));
    }
    let win = Window { auto_pad: AutoPad::NotSet, ceil_mode: false, ..window.clone() };
    let w3 = geom::resolve(&win, &kernel, &xs[2..])?;
    let a = geom::attrs(&win, &kernel)?;
    let (c, m) = (xs[1], ws[0]);
    if group == 0 || og == 0 || !c.is_multiple_of(group) || !m.is_multiple_of(group) || ws[1] * group != c || !c.is_multiple_of(og) {
        return Err(format!("X {xs:?} and W {ws:?} do not fit group {group} and offset_group {og}"));
    }
    let (oh, ow) = (w3.output[w3.output.len() - 2], w3.output[w3.output.len() - 1]);
    let kk = kernel[0] * kernel[1];
    if os != [xs[0], og * kk * 2, oh, ow] {
        return Err(format!("offset has shape {os:?}, expected {:?}", [xs[0], og * kk * 2, oh, ow]));
    }
    if let Some(b) = bs {
        if b != [m] {
            return Err(format!("B has shape {b:?}, expected [{m}]"));
        }
    }
    if let Some(ms) = ms {
        if ms != [xs[0], og * kk, oh, ow] {
            return Err(format!("mask has shape {ms:?}, expected {:?}", [xs[0], og * kk, oh, ow]));
        }
    }
    Ok(DeformConv {
        n: xs[0],
        c,
        h: xs[2],
        w: xs[3],
        m,
        kh: kernel[0],
        kw: kernel[1],
        oh,
        ow,
        stride: [a.strides[0], a.strides[1]],
        dilation: [a.dilations[0], a.dilations[1]],
        pad: [a.pads[0], a.pads[1]],
        group,
        offset_group: og,
    })
}

/// A scalar-like optional input (`None` when absent or empty).
fn first(t: Option<&Tensor>) -> Option<f64> {
    t.and_then(|t| t.to_f64_vec().first().copied())
}

fn nms(args: &[Option<RtValue>], center_point_box: bool) -> Result<Tensor, String> {
    let (boxes, scores) = (arg(args, 0)?, arg(args, 1)?);
    let (bs, ss) = (&boxes.shape, &scores.shape);
    if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(format!("NonMaxSuppression needs boxes [B, N, 4] and scores [B, C, N], got {bs:?} and {ss:?}"));
    }
    check_float(boxes, &[scores], "NonMaxSuppression")?;
    let max_out = opt_arg(args, 2)?;
    if max_out.is_some_and(|t| !t.dtype().is_int()) {
        return Err("max_output_boxes_per_class must be an integer".into());
    }
    // Absent: no boxes per class (the spec's default 0); negative counts as 0.
    let max_per_class = max_out.and_then(|t| t.to_i64_vec()).and_then(|v| v.first().copied()).unwrap_or(0).max(0);
    let iou = first(opt_arg(args, 3)?).unwrap_or(0.0);
    let score = first(opt_arg(args, 4)?);
    fn go<R: Work>(boxes: &Tensor, scores: &Tensor, max: usize, iou: f64, score: Option<f64>, center: bool) -> Result<Tensor, String> {
        let (bs, ss) = (&boxes.shape, &scores.shape);
        let p = Nms {
            batches: bs[0],
            classes: ss[1],
            boxes: bs[1],
            max_per_class: max,
            iou_threshold: <R as burnc_runtime::kernels::real::Real>::from_f64(iou),
            score_threshold: score.map(<R as burnc_runtime::kernels::real::Real>::from_f64),
            center_point_box: center,
        };
        let mut out = vec![0i64; numel(&[k::nms_max_rows(&p), 3])?];
        let (mut order, mut kept) = (vec![0usize; p.boxes], vec![0usize; p.boxes]);
        let rows = k::nms(&R::view(boxes), &R::view(scores), &p, &mut order, &mut kept, &mut out);
        out.truncate(rows * 3);
        Ok(Tensor::new(vec![rows, 3], Data::I64(out)))
    }
    let max = usize::try_from(max_per_class).unwrap_or(usize::MAX);
    by_precision!(boxes.dtype(), "NonMaxSuppression", go(boxes, scores, max, iou, score, center_point_box))
}
