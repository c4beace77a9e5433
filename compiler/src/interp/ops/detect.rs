//! NonMaxSuppression: checks here, math in `burnc_runtime::kernels::detect`. Its output
//! length depends on the values, so generated code sees it folded when its inputs are constants.
use super::norm::float::{by_precision, Work};
use super::util::{arg, numel, opt_arg};
use crate::interp::RtValue;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::detect::{self as k, Nms};

/// Every operand must share X's float type.
fn check_float(x: &Tensor, others: &[&Tensor], what: &str) -> Result<(), String> {
    if !x.dtype().is_float() || others.iter().any(|t| t.dtype() != x.dtype()) {
        return Err(format!("{what} needs float operands of one type, got X {} and {:?}", x.dtype(), others.iter().map(|t| t.dtype()).collect::<Vec<_>>()));
    }
    Ok(())
}

/// A scalar-like optional input (`None` when absent or empty).
fn first(t: Option<&Tensor>) -> Option<f64> {
    t.and_then(|t| t.to_f64_vec().first().copied())
}

pub fn nms(args: &[Option<RtValue>], center_point_box: bool) -> Result<Tensor, String> {
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
