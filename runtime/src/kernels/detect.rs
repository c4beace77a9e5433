//! Detection ops: NonMaxSuppression, RoiAlign and 2-D DeformConv, shared by the interpreter
//! and generated code. Arithmetic follows the ONNX reference (in the input's precision).
use super::real::Real;
use core::cmp::Ordering;

/// Order of NMS candidates: score descending, then box index ascending. NaN scores sort
/// last; -0 equals 0. A total order, so sorting cannot misbehave on odd data.
fn score_cmp<R: Real>(scores: &[R], a: usize, b: usize) -> Ordering {
    let (sa, sb) = (scores[a], scores[b]);
    let by_score = match sb.partial_cmp(&sa) {
        Some(o) => o,
        // At least one NaN: NaN after every number, NaNs equal.
        None => (sa.partial_cmp(&sa).is_none()).cmp(&sb.partial_cmp(&sb).is_none()),
    };
    by_score.then(a.cmp(&b))
}

#[inline]
fn min_max<R: Real>(a: R, b: R) -> (R, R) {
    if a >= b {
        (b, a)
    } else {
        (a, b)
    }
}

#[inline]
fn maxr<R: Real>(a: R, b: R) -> R {
    if a >= b {
        a
    } else {
        b
    }
}

#[inline]
fn minr<R: Real>(a: R, b: R) -> R {
    if a <= b {
        a
    } else {
        b
    }
}

/// Corners (x_min, x_max, y_min, y_max) of a box: [y1, x1, y2, x2] (either corner order) or,
/// with `center`, [x_center, y_center, width, height].
fn corners<R: Real>(b: &[R], center: bool) -> (R, R, R, R) {
    if center {
        let two = R::from_f64(2.0);
        let (hw, hh) = (b[2].div(two), b[3].div(two));
        (b[0].sub(hw), b[0].add(hw), b[1].sub(hh), b[1].add(hh))
    } else {
        let (x0, x1) = min_max(b[1], b[3]);
        let (y0, y1) = min_max(b[0], b[2]);
        (x0, x1, y0, y1)
    }
}

#[inline]
fn gt<R: Real>(a: R, b: R) -> bool {
    a.partial_cmp(&b) == Some(Ordering::Greater)
}

/// Whether box `a` suppresses box `b`: IoU strictly above `iou` (degenerate boxes never do).
fn suppresses<R: Real>(a: &[R], b: &[R], center: bool, iou: R) -> bool {
    let (ax0, ax1, ay0, ay1) = corners(a, center);
    let (bx0, bx1, by0, by1) = corners(b, center);
    let (ix0, ix1) = (maxr(ax0, bx0), minr(ax1, bx1));
    let (iy0, iy1) = (maxr(ay0, by0), minr(ay1, by1));
    // `gt` is false for NaN, so NaN coordinates give "no overlap".
    if !gt(ix1, ix0) || !gt(iy1, iy0) {
        return false;
    }
    let inter = ix1.sub(ix0).mul(iy1.sub(iy0));
    let zero = R::from_f64(0.0);
    let (area_a, area_b) = (ax1.sub(ax0).mul(ay1.sub(ay0)), bx1.sub(bx0).mul(by1.sub(by0)));
    let union = area_a.add(area_b).sub(inter);
    if !gt(inter, zero) || !gt(area_a, zero) || !gt(area_b, zero) || !gt(union, zero) {
        return false;
    }
    inter.div(union) > iou
}

/// NonMaxSuppression geometry and thresholds. `score_threshold`: keep only scores above it.
pub struct Nms<R> {
    pub batches: usize,
    pub classes: usize,
    pub boxes: usize,
    pub max_per_class: usize,
    pub iou_threshold: R,
    pub score_threshold: Option<R>,
    pub center_point_box: bool,
}

/// Most rows NonMaxSuppression can select.
pub fn nms_max_rows<R>(p: &Nms<R>) -> usize {
    p.batches * p.classes * p.boxes.min(p.max_per_class)
}

/// NonMaxSuppression over boxes [batches, boxes, 4] and scores [batches, classes, boxes].
/// Writes (batch, class, box) rows into `out` (room for `nms_max_rows`) and returns how many;
/// `order` and `kept` are scratch of `boxes` each.
pub fn nms<R: Real>(boxes: &[R], scores: &[R], p: &Nms<R>, order: &mut [usize], kept: &mut [usize], out: &mut [i64]) -> usize {
    let nb = p.boxes;
    let mut rows = 0;
    for b in 0..p.batches {
        let bx = &boxes[b * nb * 4..(b + 1) * nb * 4];
        for c in 0..p.classes {
            let sc = &scores[(b * p.classes + c) * nb..(b * p.classes + c + 1) * nb];
            let mut m = 0;
            for (i, &s) in sc.iter().enumerate() {
                if p.score_threshold.is_none_or(|t| s > t) {
                    order[m] = i;
                    m += 1;
                }
            }
            order[..m].sort_unstable_by(|&x, &y| score_cmp(sc, x, y));
            let mut k = 0;
            for &i in &order[..m] {
                if k >= p.max_per_class {
                    break;
                }
                let bi = &bx[i * 4..i * 4 + 4];
                if kept[..k].iter().any(|&j| suppresses(bi, &bx[j * 4..j * 4 + 4], p.center_point_box, p.iou_threshold)) {
                    continue;
                }
                kept[k] = i;
                k += 1;
                out[rows * 3..rows * 3 + 3].copy_from_slice(&[b as i64, c as i64, i as i64]);
                rows += 1;
            }
        }
    }
    rows
}

/// RoiAlign geometry: X [n, c, h, w], `rois` boxes [x1, y1, x2, y2] per output
/// [rois, c, out_h, out_w].
#[derive(Clone, Copy, Debug)]
pub struct RoiAlign {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub rois: usize,
    pub out_h: usize,
    pub out_w: usize,
    /// Samples per bin along each axis; 0: ceil(roi size / output size).
    pub sampling_ratio: usize,
    pub spatial_scale: f32,
    /// half_pixel coordinates (shifted by -0.5, no minimum roi size); else output_half_pixel.
    pub half_pixel: bool,
    /// Max of the weighted corner values instead of the average of the samples.
    pub max_mode: bool,
}

/// Bilinear corner offsets and weights of sample point (y, x), as the reference computes
/// them; `None` outside [-1, h] × [-1, w] (the sample counts as zero).
fn roi_sample<R: Real>(y: R, x: R, h: usize, w: usize) -> Option<([usize; 4], [R; 4])> {
    let (hf, wf) = (R::from_f64(h as f64), R::from_f64(w as f64));
    let (m1, zero, one) = (R::from_f64(-1.0), R::from_f64(0.0), R::from_f64(1.0));
    if y < m1 || y > hf || x < m1 || x > wf || h == 0 || w == 0 {
        return None;
    }
    let (mut y, mut x) = (maxr(y, zero), maxr(x, zero));
    let mut y_low = y.to_f64() as usize;
    let mut x_low = x.to_f64() as usize;
    let y_high = if y_low >= h - 1 {
        y_low = h - 1;
        y = R::from_f64(y_low as f64);
        y_low
    } else {
        y_low + 1
    };
    let x_high = if x_low >= w - 1 {
        x_low = w - 1;
        x = R::from_f64(x_low as f64);
        x_low
    } else {
        x_low + 1
    };
    let ly = y.sub(R::from_f64(y_low as f64));
    let lx = x.sub(R::from_f64(x_low as f64));
    let (hy, hx) = (one.sub(ly), one.sub(lx));
    let pos = [y_low * w + x_low, y_low * w + x_high, y_high * w + x_low, y_high * w + x_high];
    Some((pos, [hy.mul(hx), hy.mul(lx), ly.mul(hx), ly.mul(lx)]))
}

/// RoiAlign. A roi whose batch index is out of range gives zeros (callers that can report
/// errors check the indices first).
pub fn roi_align<R: Real>(x: &[R], rois: &[R], batch: &[i64], d: &RoiAlign, y: &mut [R]) {
    let plane = d.h * d.w;
    let (ph, pw) = (d.out_h, d.out_w);
    let zero = R::from_f64(0.0);
    for r in 0..d.rois {
        let out = &mut y[r * d.c * ph * pw..(r + 1) * d.c * ph * pw];
        let bi = batch[r];
        if bi < 0 || bi as usize >= d.n {
            out.fill(zero);
            continue;
        }
        let bi = bi as usize;
        let scale = R::from_f64(d.spatial_scale as f64);
        let off = R::from_f64(if d.half_pixel { 0.5 } else { 0.0 });
        let roi = &rois[r * 4..r * 4 + 4];
        let (sw, sh) = (roi[0].mul(scale).sub(off), roi[1].mul(scale).sub(off));
        let (ew, eh) = (roi[2].mul(scale).sub(off), roi[3].mul(scale).sub(off));
        let (mut rw, mut rh) = (ew.sub(sw), eh.sub(sh));
        if !d.half_pixel {
            let one = R::from_f64(1.0);
            rw = maxr(rw, one);
            rh = maxr(rh, one);
        }
        let bin_h = rh.div(R::from_f64(ph as f64));
        let bin_w = rw.div(R::from_f64(pw as f64));
        let grid = |v: R| -> usize {
            if d.sampling_ratio > 0 {
                d.sampling_ratio
            } else {
                let c = libm::ceil(v.to_f64());
                if c > 0.0 {
                    c as usize
                } else {
                    0
                }
            }
        };
        let (gh, gw) = (grid(bin_h), grid(bin_w));
        let count = R::from_f64((gh * gw).max(1) as f64);
        let (gh_r, gw_r) = (R::from_f64(gh as f64), R::from_f64(gw as f64));
        for c in 0..d.c {
            let xc = &x[(bi * d.c + c) * plane..(bi * d.c + c + 1) * plane];
            for oy in 0..ph {
                for ox in 0..pw {
                    let mut acc = zero;
                    let mut first = true;
                    for iy in 0..gh {
                        let yy = sh
                            .add(R::from_f64(oy as f64).mul(bin_h))
                            .add(R::from_f64(iy as f64 + 0.5).mul(bin_h).div(gh_r));
                        for ix in 0..gw {
                            let xx = sw
                                .add(R::from_f64(ox as f64).mul(bin_w))
                                .add(R::from_f64(ix as f64 + 0.5).mul(bin_w).div(gw_r));
                            let (pos, wt) = roi_sample(yy, xx, d.h, d.w).unwrap_or(([0; 4], [zero; 4]));
                            let t = [wt[0].mul(xc[pos[0]]), wt[1].mul(xc[pos[1]]), wt[2].mul(xc[pos[2]]), wt[3].mul(xc[pos[3]])];
                            if d.max_mode {
                                let v = maxr(maxr(t[0], t[1]), maxr(t[2], t[3]));
                                acc = if first { v } else { maxr(acc, v) };
                                first = false;
                            } else {
                                acc = acc.add(t[0].add(t[1]).add(t[2]).add(t[3]));
                            }
                        }
                    }
                    out[(c * ph + oy) * pw + ox] = if d.max_mode { acc } else { acc.div(count) };
                }
            }
        }
    }
}

/// 2-D DeformConv geometry: X [n, c, h, w], W [m, c / group, kh, kw], offset
/// [n, offset_group · kh · kw · 2, oh, ow], mask [n, offset_group · kh · kw, oh, ow].
#[derive(Clone, Copy, Debug)]
pub struct DeformConv {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub m: usize,
    pub kh: usize,
    pub kw: usize,
    pub oh: usize,
    pub ow: usize,
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// Top and left padding.
    pub pad: [usize; 2],
    pub group: usize,
    pub offset_group: usize,
}

/// Column buffer DeformConv needs: one group's sampled inputs, (c / group · kh · kw) × (oh · ow).
pub fn deform_conv_scratch_len(d: &DeformConv) -> usize {
    (d.c / d.group.max(1)) * d.kh * d.kw * d.oh * d.ow
}

/// X at (y, x) by bilinear interpolation, zero outside the image (GridSample with zeros
/// padding and aligned corners, in pixel units).
fn bilinear<R: Real>(xc: &[R], h: usize, w: usize, y: R, x: R) -> R {
    let zero = R::from_f64(0.0);
    let (yf, xf) = (libm::floor(y.to_f64()), libm::floor(x.to_f64()));
    if !yf.is_finite() || !xf.is_finite() {
        return zero;
    }
    let (dy, dx) = (y.sub(R::from_f64(yf)), x.sub(R::from_f64(xf)));
    let one = R::from_f64(1.0);
    let at = |yi: f64, xi: f64| -> R {
        if yi >= 0.0 && xi >= 0.0 && yi < h as f64 && xi < w as f64 {
            xc[yi as usize * w + xi as usize]
        } else {
            zero
        }
    };
    let top = at(yf, xf).mul(one.sub(dx)).add(at(yf, xf + 1.0).mul(dx));
    let bottom = at(yf + 1.0, xf).mul(one.sub(dx)).add(at(yf + 1.0, xf + 1.0).mul(dx));
    top.mul(one.sub(dy)).add(bottom.mul(dy))
}

/// DeformConv: per batch and group, sample the deformed (and masked) input columns, then
/// multiply by the group's weights. `mask` and `bias` empty: ones and zeros.
#[allow(clippy::too_many_arguments)]
pub fn deform_conv<R: Real>(x: &[R], wt: &[R], offset: &[R], bias: &[R], mask: &[R], d: &DeformConv, col: &mut [R], y: &mut [R]) {
    let (kk, plane, op) = (d.kh * d.kw, d.h * d.w, d.oh * d.ow);
    let cg = d.c / d.group;
    let mg = d.m / d.group;
    let c_per_og = d.c / d.offset_group;
    let zero = R::from_f64(0.0);
    for b in 0..d.n {
        for g in 0..d.group {
            for ci in 0..cg {
                let c = g * cg + ci;
                let og = c / c_per_og;
                let xc = &x[(b * d.c + c) * plane..(b * d.c + c + 1) * plane];
                for k in 0..kk {
                    let (ki, kj) = (k / d.kw, k % d.kw);
                    let ch = (b * d.offset_group + og) * kk + k;
                    let (off_y, off_x) = (&offset[(2 * ch) * op..(2 * ch + 1) * op], &offset[(2 * ch + 1) * op..(2 * ch + 2) * op]);
                    let row = &mut col[(ci * kk + k) * op..(ci * kk + k + 1) * op];
                    for i in 0..d.oh {
                        let base_y = (i * d.stride[0] + ki * d.dilation[0]) as f64 - d.pad[0] as f64;
                        for j in 0..d.ow {
                            let base_x = (j * d.stride[1] + kj * d.dilation[1]) as f64 - d.pad[1] as f64;
                            let p = i * d.ow + j;
                            let v = bilinear(xc, d.h, d.w, R::from_f64(base_y).add(off_y[p]), R::from_f64(base_x).add(off_x[p]));
                            row[p] = if mask.is_empty() { v } else { v.mul(mask[ch * op + p]) };
                        }
                    }
                }
            }
            for mi in 0..mg {
                let oc = g * mg + mi;
                let wrow = &wt[oc * cg * kk..(oc + 1) * cg * kk];
                let yo = &mut y[(b * d.m + oc) * op..(b * d.m + oc + 1) * op];
                let b0 = bias.get(oc).copied().unwrap_or(zero);
                for (p, o) in yo.iter_mut().enumerate() {
                    let mut acc = zero;
                    for (r, &wv) in wrow.iter().enumerate() {
                        acc = acc.add(wv.mul(col[r * op + p]));
                    }
                    *o = b0.add(acc);
                }
            }
        }
    }
}
