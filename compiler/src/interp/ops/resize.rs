//! Resize (and Upsample, which the frontend lowers to it): inputs (X, roi?, scales?, sizes?).
//! Interpolation is separable, so each resized axis is done on its own in f64 through the
//! runtime's `resample_axis`, with a tap table (source indices and weights per output
//! position) computed here exactly as the ONNX reference does: the `n` taps nearest the source
//! coordinate, edge-clamped, with nearest / linear / cubic (optionally antialiased) weights.
use super::util::{arg, norm_axes, opt_arg};
use crate::interp::RtValue;
use crate::ir::ResizeAttrs;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::resize::{narrow, resample_axis};
use burnc_runtime::Elem;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq)]
enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
    /// Opset 11's `tf_half_pixel_for_nn` (TensorFlow's nearest resize with half-pixel centers,
    /// as tf2onnx emits it): half_pixel without the -0.5.
    TfHalfPixelForNn,
}

#[derive(Clone, Copy, PartialEq)]
enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    /// Resize-10 / Upsample (set by the frontend): floor when upsampling, ceil when
    /// downsampling, as ONNX Runtime and the opset-10 backend tests do.
    Simple,
}

struct Cfg {
    mode: Mode,
    coord: Coord,
    nearest: Nearest,
    a: f64,
    exclude_outside: bool,
    antialias: bool,
}

fn cfg(at: &ResizeAttrs) -> Result<Cfg, String> {
    let mode = match at.mode.as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        m => return Err(format!("unknown mode `{m}`")),
    };
    let coord = match at.coordinate_transformation_mode.as_str() {
        "half_pixel" => Coord::HalfPixel,
        "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coord::PytorchHalfPixel,
        "align_corners" => Coord::AlignCorners,
        "asymmetric" => Coord::Asymmetric,
        "tf_crop_and_resize" => Coord::TfCropAndResize,
        "tf_half_pixel_for_nn" => Coord::TfHalfPixelForNn,
        m => return Err(format!("unknown coordinate_transformation_mode `{m}`")),
    };
    let nearest = match at.nearest_mode.as_str() {
        "round_prefer_floor" => Nearest::RoundPreferFloor,
        "round_prefer_ceil" => Nearest::RoundPreferCeil,
        "floor" => Nearest::Floor,
        "ceil" => Nearest::Ceil,
        "simple" => Nearest::Simple,
        m => return Err(format!("unknown nearest_mode `{m}`")),
    };
    if at.antialias && mode == Mode::Nearest {
        return Err("antialias is not defined for mode `nearest`".into());
    }
    Ok(Cfg { mode, coord, nearest, a: at.cubic_coeff_a as f64, exclude_outside: at.exclude_outside, antialias: at.antialias })
}

/// An optional input; an empty tensor counts as absent (opset 11-12 pass empty roi/scales).
fn given(args: &[Option<RtValue>], i: usize) -> Result<Option<&Tensor>, String> {
    Ok(opt_arg(args, i)?.filter(|t| t.numel() > 0))
}

fn isclose(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// One resampled axis: the shape as `[outer, in_len, inner]` and its tap table.
pub struct AxisStep {
    pub outer: usize,
    pub in_len: usize,
    pub inner: usize,
    pub out_len: usize,
    pub idx: Vec<u32>,
    pub w: Vec<f64>,
    pub taps: usize,
    pub extrap: Vec<u8>,
}

/// The whole resize as a sequence of per-axis steps (axes that do not change are skipped),
/// and the output shape. Depends only on the input shape, attributes and the constant
/// roi / scales / sizes, so codegen computes it at compile time.
pub fn plan(
    at: &ResizeAttrs,
    xshape: &[usize],
    roi: Option<Vec<f64>>,
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<i64>>,
) -> Result<(Vec<AxisStep>, Vec<usize>), String> {
    let c = cfg(at)?;
    let r = xshape.len();
    let axes: Vec<usize> = match &at.axes {
        Some(a) => norm_axes(a, r)?,
        None => (0..r).collect(),
    };
    let na = axes.len();
    // Full-rank roi (starts then ends), scales and output sizes.
    let mut roi_full: Option<Vec<f64>> = None;
    if let Some(rv) = &roi {
        if rv.len() != 2 * na {
            return Err(format!("roi has {} entries, expected {}", rv.len(), 2 * na));
        }
        let mut full = vec![0.0; r];
        full.extend(std::iter::repeat_n(1.0, r));
        for (i, &d) in axes.iter().enumerate() {
            full[d] = rv[i];
            full[r + d] = rv[na + i];
        }
        roi_full = Some(full);
    }
    if c.coord == Coord::TfCropAndResize && roi_full.is_none() {
        return Err("tf_crop_and_resize needs a roi input".into());
    }
    let mut scale = vec![1.0f64; r];
    let mut out = xshape.to_vec();
    match (&scales, &sizes) {
        (Some(_), Some(_)) => return Err("only one of scales and sizes may be given".into()),
        (None, None) => return Err("one of scales and sizes must be given".into()),
        (Some(s), None) => {
            if s.len() != na {
                return Err(format!("scales has {} entries for {na} axes", s.len()));
            }
            for (i, &d) in axes.iter().enumerate() {
                if s[i].is_nan() || s[i] <= 0.0 || !s[i].is_finite() {
                    return Err(format!("scale {} must be positive", s[i]));
                }
                scale[d] = s[i];
                let o = (s[i] * xshape[d] as f64).floor();
                if o > (1u64 << 32) as f64 {
                    return Err(format!("output size {o} is too large"));
                }
                out[d] = o as usize;
            }
        }
        (None, Some(s)) => {
            if s.len() != na {
                return Err(format!("sizes has {} entries for {na} axes", s.len()));
            }
            for (i, &d) in axes.iter().enumerate() {
                out[d] = usize::try_from(s[i]).map_err(|_| format!("negative output size {}", s[i]))?;
                if xshape[d] == 0 {
                    return Err(format!("cannot resize the empty axis {d}"));
                }
                scale[d] = out[d] as f64 / xshape[d] as f64;
            }
            let policy = at.keep_aspect_ratio_policy.as_str();
            if policy != "stretch" && na > 0 {
                let pick = axes.iter().map(|&d| scale[d]);
                let s = match policy {
                    "not_larger" => pick.fold(f64::INFINITY, f64::min),
                    "not_smaller" => pick.fold(f64::NEG_INFINITY, f64::max),
                    p => return Err(format!("unknown keep_aspect_ratio_policy `{p}`")),
                };
                for &d in &axes {
                    scale[d] = s;
                    out[d] = (s * xshape[d] as f64 + 0.5) as usize;
                }
            }
        }
    }
    super::util::numel(&out)?;
    if c.antialias && axes.iter().any(|&d| 1.0 / scale[d] > 1e6) {
        return Err("antialias with a scale below 1e-6 is not supported".into());
    }

    let mut steps = Vec::new();
    let mut shape = xshape.to_vec();
    for d in 0..r {
        let trivial_roi = roi_full.as_ref().is_none_or(|rf| isclose(rf[d], 0.0) && isclose(rf[r + d], 1.0));
        if isclose(scale[d], 1.0) && out[d] == shape[d] && trivial_roi {
            continue;
        }
        if shape[d] == 0 && out[d] > 0 {
            return Err(format!("cannot resize the empty axis {d}"));
        }
        let roi_d = roi_full.as_ref().map(|rf| (rf[d], rf[r + d]));
        let (idx, w, taps, extrap) = taps_for_axis(&c, shape[d], out[d], scale[d], roi_d);
        let outer: usize = shape[..d].iter().product();
        let inner: usize = shape[d + 1..].iter().product();
        let idx = idx.into_iter().map(|i| u32::try_from(i).map_err(|_| "Resize input too large".to_string())).collect::<Result<_, _>>()?;
        let extrap = extrap.into_iter().map(u8::from).collect();
        steps.push(AxisStep { outer, in_len: shape[d], inner, out_len: out[d], idx, w, taps, extrap });
        shape[d] = out[d];
    }
    Ok((steps, shape))
}

pub fn resize(at: &ResizeAttrs, args: &[Option<RtValue>]) -> Result<Tensor, String> {
    let x = arg(args, 0)?;
    let roi = given(args, 1)?.map(|t| t.to_f64_vec());
    let scales = given(args, 2)?.map(|t| t.to_f64_vec());
    let sizes = match given(args, 3)? {
        Some(t) => Some(t.to_i64_vec().filter(|_| t.dtype().is_int()).ok_or("sizes must be an integer tensor")?),
        None => None,
    };
    let (steps, shape) = plan(at, &x.shape, roi, scales, sizes)?;
    let mut cur = x.to_f64_vec();
    for s in &steps {
        let mut next = vec![0.0; s.outer * s.out_len * s.inner];
        resample_axis(&cur, s.outer, s.in_len, s.inner, &s.idx, &s.w, s.taps, &s.extrap, at.extrapolation_value as f64, &mut next);
        cur = next;
    }
    Ok(Tensor::new(shape, from_f64(&cur, x)?))
}

/// Source coordinate of output position `y` along one axis.
fn source_coord(c: &Cfg, y: f64, in_len: usize, out_len: usize, scale: f64, roi: Option<(f64, f64)>) -> f64 {
    let inw = in_len as f64;
    let outw = scale * inw;
    match c.coord {
        Coord::AlignCorners => {
            if outw == 1.0 {
                0.0
            } else {
                y * (inw - 1.0) / (outw - 1.0)
            }
        }
        Coord::Asymmetric => y / scale,
        Coord::TfCropAndResize => {
            let (s, e) = roi.unwrap_or((0.0, 1.0));
            let x = if outw == 1.0 { (e - s) * (inw - 1.0) / 2.0 } else { y * (e - s) * (inw - 1.0) / (outw - 1.0) };
            x + s * (inw - 1.0)
        }
        Coord::PytorchHalfPixel => {
            if outw == 1.0 {
                -0.5
            } else {
                (y + 0.5) / scale - 0.5
            }
        }
        Coord::HalfPixel => (y + 0.5) / scale - 0.5,
        Coord::TfHalfPixelForNn => (y + 0.5) / scale,
        Coord::HalfPixelSymmetric => {
            let adjustment = out_len as f64 / outw;
            let center = inw / 2.0;
            center * (1.0 - adjustment) + (y + 0.5) / scale - 0.5
        }
    }
}

/// Weights of the taps around a source coordinate with fractional part `ratio` in (0, 1].
fn coeffs(c: &Cfg, ratio: f64, scale: f64) -> Vec<f64> {
    match c.mode {
        Mode::Nearest => {
            let ceil = if ratio == 1.0 {
                true
            } else {
                match c.nearest {
                    Nearest::RoundPreferFloor => ratio > 0.5,
                    Nearest::RoundPreferCeil => ratio >= 0.5,
                    Nearest::Floor => false,
                    Nearest::Ceil => true,
                    Nearest::Simple => scale < 1.0,
                }
            };
            if ceil {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        Mode::Linear if !c.antialias => vec![1.0 - ratio, ratio],
        Mode::Linear => {
            let s = scale.min(1.0);
            let start = (-1.0 / s).floor() as i64 + 1;
            let n = 2 - 2 * start;
            let w: Vec<f64> = (start..start + n).map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0)).collect();
            normalize(w)
        }
        Mode::Cubic if !c.antialias => {
            let a = c.a;
            let (r1, q) = (ratio + 1.0, 1.0 - ratio);
            let q1 = q + 1.0;
            vec![
                ((a * r1 - 5.0 * a) * r1 + 8.0 * a) * r1 - 4.0 * a,
                ((a + 2.0) * ratio - (a + 3.0)) * ratio * ratio + 1.0,
                ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                ((a * q1 - 5.0 * a) * q1 + 8.0 * a) * q1 - 4.0 * a,
            ]
        }
        Mode::Cubic => {
            let a = c.a;
            let s = scale.min(1.0);
            let k = |x: f64| {
                let x = x.abs();
                let (x2, x3) = (x * x, x * x * x);
                if x <= 1.0 {
                    (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                } else if x < 2.0 {
                    a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            };
            let start = (-2.0 / s).floor() as i64 + 1;
            let end = 2 - start;
            normalize((start..end).map(|i| k(s * (i as f64 - ratio))).collect())
        }
    }
}

fn normalize(mut w: Vec<f64>) -> Vec<f64> {
    let sum: f64 = w.iter().sum();
    if sum != 0.0 {
        w.iter_mut().for_each(|v| *v /= sum);
    }
    w
}

type Taps = (Vec<usize>, Vec<f64>, usize, Vec<bool>);

/// Tap table for one axis: per output position `taps` clamped source indices and weights, and
/// whether the position is outside the crop (tf_crop_and_resize).
fn taps_for_axis(c: &Cfg, in_len: usize, out_len: usize, scale: f64, roi: Option<(f64, f64)>) -> Taps {
    let mut idx = Vec::new();
    let mut w = Vec::new();
    let mut extrap = vec![false; out_len];
    let mut taps = 0;
    for (y, ex) in extrap.iter_mut().enumerate() {
        let x = source_coord(c, y as f64, in_len, out_len, scale, roi);
        if c.coord == Coord::TfCropAndResize && (x < 0.0 || x > in_len as f64 - 1.0) {
            *ex = true;
        }
        // Only a wild roi takes x this far (and then the position is extrapolated); keep the
        // index arithmetic below far from i64 overflow.
        let x = x.clamp(-1e12, 1e12);
        let xi = x.floor();
        let frac = x - xi;
        let ratio = if frac == 0.0 { 1.0 } else { frac };
        let mut cw = coeffs(c, ratio, scale);
        let n = cw.len() as i64;
        taps = cw.len();
        let start = if n % 2 == 0 {
            xi as i64 - n / 2 + i64::from(frac != 0.0)
        } else {
            xi as i64 - (n - 1) / 2 + i64::from(frac > 0.5)
        };
        if c.exclude_outside {
            for (j, v) in cw.iter_mut().enumerate() {
                let s = start + j as i64;
                if s < 0 || s >= in_len as i64 {
                    *v = 0.0;
                }
            }
            cw = normalize(cw);
        }
        for (j, v) in cw.into_iter().enumerate() {
            idx.push((start + j as i64).clamp(0, in_len as i64 - 1) as usize);
            w.push(v);
        }
    }
    (idx, w, taps, extrap)
}

/// Back to the input's dtype (the runtime's `narrow`: floats round once, integers round half
/// to even and saturate).
fn from_f64(v: &[f64], like: &Tensor) -> Result<Data, String> {
    fn conv<T: Elem + Default>(v: &[f64]) -> Vec<T> {
        let mut o = vec![T::default(); v.len()];
        narrow(v, &mut o);
        o
    }
    Ok(match &like.data {
        Data::F32(_) => Data::F32(conv(v)),
        Data::F64(_) => Data::F64(v.to_vec()),
        Data::F16(_) => Data::F16(conv(v)),
        Data::BF16(_) => Data::BF16(conv(v)),
        Data::I8(_) => Data::I8(conv(v)),
        Data::I16(_) => Data::I16(conv(v)),
        Data::I32(_) => Data::I32(conv(v)),
        Data::I64(_) => Data::I64(conv(v)),
        Data::U8(_) => Data::U8(conv(v)),
        Data::U16(_) => Data::U16(conv(v)),
        Data::U32(_) => Data::U32(conv(v)),
        Data::U64(_) => Data::U64(conv(v)),
        d => return Err(format!("Resize is not defined on {}", d.dtype())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(mode: &str, coord: &str) -> ResizeAttrs {
        ResizeAttrs {
            mode: mode.into(),
            coordinate_transformation_mode: coord.into(),
            nearest_mode: "round_prefer_floor".into(),
            cubic_coeff_a: -0.75,
            exclude_outside: false,
            extrapolation_value: 0.0,
            antialias: false,
            axes: None,
            keep_aspect_ratio_policy: "stretch".into(),
        }
    }

    fn run(at: &ResizeAttrs, x: Tensor, scales: &[f32]) -> Result<Tensor, String> {
        let s = Tensor::from_f32s(vec![scales.len()], scales.to_vec());
        resize(at, &[Some(RtValue::Tensor(x)), None, Some(RtValue::Tensor(s)), None])
    }

    #[test]
    fn nearest_upsample_asymmetric() {
        let x = Tensor::from_f32s(vec![1, 2], vec![1., 2.]);
        let mut at = attrs("nearest", "asymmetric");
        at.nearest_mode = "floor".into();
        let y = run(&at, x, &[1.0, 2.0]).unwrap();
        assert_eq!(y, Tensor::from_f32s(vec![1, 4], vec![1., 1., 2., 2.]));
    }

    #[test]
    fn resize10_nearest_downsample_takes_ceil() {
        // The opset-10 backend case test_resize_downsample_nearest: [[1, 3]].
        let x = Tensor::from_f32s(vec![1, 1, 2, 4], vec![1., 2., 3., 4., 5., 6., 7., 8.]);
        let mut at = attrs("nearest", "asymmetric");
        at.nearest_mode = "simple".into();
        let y = run(&at, x, &[1.0, 1.0, 0.6, 0.6]).unwrap();
        assert_eq!(y, Tensor::from_f32s(vec![1, 1, 1, 2], vec![1., 3.]));
    }

    #[test]
    fn linear_half_pixel() {
        let x = Tensor::from_f32s(vec![2], vec![0., 4.]);
        let y = run(&attrs("linear", "half_pixel"), x, &[2.0]).unwrap();
        assert_eq!(y, Tensor::from_f32s(vec![4], vec![0., 1., 3., 4.]));
    }

    #[test]
    fn nearest_tf_half_pixel_for_nn() {
        // TensorFlow's half-pixel nearest: source index floor((y + 0.5) / scale).
        let x = Tensor::from_f32s(vec![3], vec![10., 20., 30.]);
        let mut at = attrs("nearest", "tf_half_pixel_for_nn");
        at.nearest_mode = "floor".into();
        let y = run(&at, x.clone(), &[2.0]).unwrap();
        assert_eq!(y, Tensor::from_f32s(vec![6], vec![10., 10., 20., 20., 30., 30.]));
        let y = run(&at, x, &[0.5]).unwrap();
        // (0 + 0.5) / 0.5 = 1: the middle element, where half_pixel would take the first.
        assert_eq!(y, Tensor::from_f32s(vec![1], vec![20.]));
    }

    #[test]
    fn wild_roi_extrapolates() {
        let mut at = attrs("linear", "tf_crop_and_resize");
        at.extrapolation_value = 7.0;
        let x = Tensor::from_f32s(vec![2], vec![0., 4.]);
        let roi = Tensor::from_f32s(vec![2], vec![-1e30, 1e30]);
        let s = Tensor::from_f32s(vec![1], vec![2.0]);
        let y = resize(&at, &[Some(RtValue::Tensor(x)), Some(RtValue::Tensor(roi)), Some(RtValue::Tensor(s)), None]).unwrap();
        assert_eq!(y, Tensor::from_f32s(vec![4], vec![7.0; 4]));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let x = Tensor::from_f32s(vec![2], vec![0., 4.]);
        assert!(run(&attrs("linear", "half_pixel"), x.clone(), &[2.0, 1.0]).is_err());
        assert!(run(&attrs("linear", "half_pixel"), x.clone(), &[-1.0]).is_err());
        assert!(run(&attrs("box", "half_pixel"), x, &[2.0]).is_err());
    }
}
