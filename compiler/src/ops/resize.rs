//! Resize `(X, roi?, scales?, sizes?)` (and Upsample, which the ONNX frontend lowers to it):
//! each listed axis (all by default) resampled to a new length by a nearest, linear or cubic
//! filter. One runtime kernel, `kernels::resize::resize`, computes each position's taps from
//! the lengths and scales it is given at run time, for the interpreter and generated code.
//!
//! Output dims: `floor(s·len)` for constant scales (in f64, as ONNX), the sizes for `sizes`;
//! under `keep_aspect_ratio_policy` one scale for all axes, the min or max of sizes / lengths.
use super::{input, numel, Arg, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::f64_lit;
use crate::codegen::CodegenError;
use crate::ir::axis::{distinct_axes, norm_axis};
use crate::ir::DimExpr;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::resize as k;
pub use burnc_runtime::kernels::resize::{Coord, Filter, Mode, Nearest};

/// `keep_aspect_ratio_policy`: how requested sizes become one scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AspectPolicy {
    /// Each axis to its requested size.
    Stretch,
    /// The smallest scale of the axes: no axis exceeds its size.
    NotLarger,
    /// The largest: no axis falls short.
    NotSmaller,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resize {
    pub filter: Filter,
    /// The axes `scales`, `sizes` and `roi` list (`None`: every axis).
    pub axes: Option<Vec<i64>>,
    pub policy: AspectPolicy,
}

/// The scale an axis's source coordinates use.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    Given(f64),
    /// Output length / input length, at run time (requested sizes).
    Ratio,
}

/// Output dims and each axis's scale.
struct Plan {
    out: Vec<DimExpr>,
    scales: Vec<Scale>,
}

/// An optional input that is given: present and not empty (opsets 11-12 pass empty roi and
/// scales for "absent").
fn given(cx: &ShapeCx, i: usize) -> Option<&Arg> {
    cx.opt(i).filter(|a| a.dims.as_ref().is_none_or(|d| super::product(d).as_const() != Some(0)))
}

/// `floor(s·x)` as the interpreter computes it (an f64 product). `s = p / 2^e` exactly (a
/// float is a dyadic rational), and `x·p` is exact in f64 below 2^53, so there the floor is the
/// integer `floor(x·p / 2^e)`; larger inputs are refused at run time.
fn scaled(cx: &mut ShapeCx, axis: usize, x: &DimExpr, s: f64) -> R<DimExpr> {
    if let Some(c) = x.as_const() {
        let o = (s * c as f64).floor();
        if o > (1u64 << 32) as f64 {
            return Err(format!("output size {o} is too large"));
        }
        return Ok(DimExpr::constant(o as i64));
    }
    if s.fract() == 0.0 {
        return if s <= (1 << 20) as f64 { Ok(x.scale(s as i64)) } else { Err(format!("the scale {s} is too large")) };
    }
    // s = m · 2^e with an odd m and e < 0 (s is not an integer).
    let bits = s.to_bits();
    let (exp, frac) = (((bits >> 52) & 0x7ff) as i64, bits & ((1 << 52) - 1));
    let (mut m, mut e) = if exp == 0 { (frac, -1074) } else { (frac | (1 << 52), exp - 1075) };
    let tz = i64::from(m.trailing_zeros().min(63));
    m >>= tz;
    e += tz;
    if e < -62 {
        return Err(format!("`Resize` by the scale {s} with bounded dims is not supported: floor(len·{s}) has no exact form as a fraction of integers"));
    }
    let p = m as i64;
    cx.at_most(&format!("Resize axis {axis}'s length (scaled exactly by {s})"), x, &DimExpr::constant((1i64 << 53) / p))?;
    Ok(x.scale(p).floor_div(1i64 << -e))
}

impl Resize {
    fn axes(&self, r: usize) -> R<Vec<usize>> {
        let Some(a) = &self.axes else { return Ok((0..r).collect()) };
        distinct_axes(a, r, norm_axis)
    }

    /// The output dims and scales; `None` when they depend on values not known (computed
    /// scales, or sizes neither constant nor computed from dims).
    fn plan(&self, cx: &mut ShapeCx) -> R<Option<Plan>> {
        let f = &self.filter;
        if f.antialias && f.mode == Mode::Nearest {
            return Err("antialias is not defined for mode `nearest`".into());
        }
        let Some(xs) = cx.arg(0)?.dims.clone() else { return Ok(None) };
        let r = xs.len();
        if r > k::MAX_RANK {
            return Err(format!("Resize of rank {r} is not supported (at most {})", k::MAX_RANK));
        }
        let axes = self.axes(r)?;
        let na = axes.len();
        if f.coord == Coord::TfCropAndResize && given(cx, 1).is_none() {
            return Err("tf_crop_and_resize needs a roi input".into());
        }
        let mut out = xs.clone();
        let mut scales = vec![Scale::Given(1.0); r];
        match (given(cx, 2).is_some(), given(cx, 3).map(|a| a.dtype)) {
            (true, Some(_)) => return Err("only one of scales and sizes may be given".into()),
            (false, None) => return Err("one of scales and sizes must be given".into()),
            (true, None) => {
                let Some(s) = given(cx, 2).and_then(|a| a.value.as_ref()).map(|t| t.to_f64_vec()) else { return Ok(None) };
                if s.len() != na {
                    return Err(format!("scales has {} entries for {na} axes", s.len()));
                }
                for (&d, &s) in axes.iter().zip(&s) {
                    if s.is_nan() || s <= 0.0 || !s.is_finite() {
                        return Err(format!("scale {s} must be positive"));
                    }
                    scales[d] = Scale::Given(s);
                    out[d] = scaled(cx, d, &xs[d], s)?;
                }
            }
            (false, Some(dt)) => {
                if !dt.is_int() {
                    return Err("sizes must be an integer tensor".into());
                }
                let Some(sizes) = cx.ints(3) else { return Ok(None) };
                if sizes.len() != na {
                    return Err(format!("sizes has {} entries for {na} axes", sizes.len()));
                }
                for (&d, s) in axes.iter().zip(&sizes) {
                    if let Some(v) = s.as_const().filter(|&v| v < 0) {
                        return Err(format!("negative output size {v}"));
                    }
                    if xs[d].as_const() == Some(0) {
                        return Err(format!("cannot resize the empty axis {d}"));
                    }
                    out[d] = s.clone();
                    scales[d] = Scale::Ratio;
                }
                if self.policy != AspectPolicy::Stretch && na > 0 {
                    // One scale for every axis: a min or max over them, which dim expressions
                    // cannot say, so only constant dims take it.
                    let c = |e: &DimExpr| e.as_const().map(|v| v as f64);
                    let ratios: Option<Vec<f64>> = axes.iter().zip(&sizes).map(|(&d, s)| Some(c(s)? / c(&xs[d])?)).collect();
                    let Some(ratios) = ratios else {
                        return Err("`Resize` with keep_aspect_ratio_policy over bounded dims is not supported: the output dims are a min or max over the input dims, which a dim expression cannot express, and there is no output dim computed at run time yet; pin them with --input".into());
                    };
                    let s = match self.policy {
                        AspectPolicy::NotLarger => ratios.iter().copied().fold(f64::INFINITY, f64::min),
                        _ => ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    };
                    for &d in &axes {
                        let len = c(&xs[d]).unwrap_or(0.0);
                        scales[d] = Scale::Given(s);
                        out[d] = DimExpr::constant((s * len + 0.5) as i64);
                    }
                }
            }
        }
        let fixed: Option<Vec<i64>> = out.iter().map(DimExpr::as_const).collect();
        if let Some(fixed) = fixed {
            fixed.iter().try_fold(1usize, |a, &d| a.checked_mul(d as usize)).ok_or("the output is too large")?;
        }
        if f.antialias {
            for &d in &axes {
                let s = match (scales[d], out[d].as_const(), xs[d].as_const()) {
                    (Scale::Given(s), _, _) => s,
                    (Scale::Ratio, Some(o), Some(i)) => o as f64 / i as f64,
                    (Scale::Ratio, _, _) => continue,
                };
                if 1.0 / s > 1e6 {
                    return Err("antialias with a scale below 1e-6 is not supported".into());
                }
            }
        }
        Ok(Some(Plan { out, scales }))
    }

    /// The roi over every axis (starts then ends) from the listed axes' values, or empty.
    fn full_roi(&self, roi: Option<Vec<f64>>, r: usize) -> R<Vec<f64>> {
        let Some(rv) = roi else { return Ok(Vec::new()) };
        let axes = self.axes(r)?;
        let na = axes.len();
        if rv.len() != 2 * na {
            return Err(format!("roi has {} entries, expected {}", rv.len(), 2 * na));
        }
        let mut full = vec![0.0; r];
        full.extend(std::iter::repeat_n(1.0, r));
        for (i, &d) in axes.iter().enumerate() {
            full[d] = rv[i];
            full[r + d] = rv[na + i];
        }
        Ok(full)
    }

    /// The plan at fixed dims, as numbers: output dims and scales.
    fn fixed(&self, cx: &mut ShapeCx) -> R<(Vec<usize>, Vec<f64>)> {
        let p = self.plan(cx)?.ok_or("Resize needs constant scales or sizes")?;
        let xs: Vec<i64> = cx.arg(0)?.dims()?.iter().map(|d| d.as_const().unwrap_or(0)).collect();
        let out: Vec<usize> = p.out.iter().map(|d| d.as_const().ok_or_else(|| "Resize output dims are not fixed".to_string()).map(|v| v.max(0) as usize)).collect::<R<_>>()?;
        let scales = p.scales.iter().enumerate().map(|(d, s)| match s {
            Scale::Given(s) => *s,
            Scale::Ratio => out[d] as f64 / xs[d] as f64,
        });
        Ok((out.clone(), scales.collect()))
    }

    /// The constant roi of a node (empty when absent).
    fn const_roi(&self, roi: Option<Option<Tensor>>, r: usize) -> R<Vec<f64>> {
        match roi {
            None => Ok(Vec::new()),
            Some(None) => Err("roi must be a constant".into()),
            Some(Some(t)) if t.numel() == 0 => Ok(Vec::new()),
            Some(Some(t)) => self.full_roi(Some(t.to_f64_vec()), r),
        }
    }
}

impl OpDef for Resize {
    name!("Resize");
    none_of!(cuda, scratch_bytes, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        if let Some(t) = given(cx, 1).and_then(|a| a.value.as_ref()) {
            self.full_roi(Some(t.to_f64_vec()), cx.arg(0)?.dims()?.len())?;
        }
        Ok(vec![OutType { dtype, dims: self.plan(cx)?.map(|p| p.out) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let (out, scales) = self.fixed(&mut ShapeCx::of_tensors(ins))?;
        let roi = match ins.get(1).copied().flatten() {
            Some(t) if t.numel() > 0 => self.full_roi(Some(t.to_f64_vec()), x.rank())?,
            _ => Vec::new(),
        };
        let len = crate::interp::ops::util::numel(&out)?;
        fn run<T: burnc_runtime::Elem + Default>(x: &[T], xd: &[usize], yd: &[usize], s: &[f64], roi: &[f64], f: &Filter, len: usize) -> Vec<T> {
            let mut y = vec![T::default(); len];
            k::resize(x, xd, yd, s, roi, f, &mut y);
            y
        }
        macro_rules! go {
            ($($v:ident),*) => {
                match &x.data {
                    $(Data::$v(v) => Data::$v(run(v, &x.shape, &out, &scales, &roi, &self.filter, len)),)*
                    d => return Err(format!("Resize is not defined on {}", d.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
        Ok(vec![Tensor::new(out, data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let xd = cx.dtype(x)?;
        if !(xd.is_float() || xd.is_int()) || xd.is_small() {
            return Err(cx.err(format!("Resize on {xd} is not supported by codegen yet")));
        }
        cx.elem(x)?;
        let y = cx.output(0)?;
        let xs = cx.dims(x)?;
        let plan = self.plan(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        let plan = plan.ok_or_else(|| cx.err("Resize needs constant scales, or sizes known at compile time, for codegen"))?;
        let roi = match cx.opt_input(1) {
            None => None,
            Some(v) => match cx.konst(v) {
                Some(t) => Some(Some(t)),
                None if super::product(&cx.dims(v)?).as_const() == Some(0) => None,
                None => Some(None),
            },
        };
        let roi = self.const_roi(roi, xs.len()).map_err(|e| cx.err(e))?;
        let ys = cx.dims(y)?;
        if plan.out != ys {
            return Err(cx.err(format!("the output dims {ys:?} are not the planned {:?}", plan.out)));
        }
        if roi.is_empty() && ys == xs && plan.scales.iter().all(|s| *s == Scale::Given(1.0)) {
            return Ok(format!("{}.copy_from_slice({});", cx.write(y)?, cx.read(x)?));
        }
        let mut scales = Vec::with_capacity(xs.len());
        for (d, s) in plan.scales.iter().enumerate() {
            scales.push(match (s, ys[d].as_const(), xs[d].as_const()) {
                (Scale::Given(s), _, _) => f64_lit(*s),
                (Scale::Ratio, Some(o), Some(i)) => f64_lit(o as f64 / i as f64),
                (Scale::Ratio, _, _) => format!("{} as f64 / {} as f64", cx.size(&ys[d])?, cx.size(&xs[d])?),
            });
        }
        let f = &self.filter;
        Ok(format!(
            "{{\n    use rt::kernels::resize::{{resize, Coord, Filter, Mode, Nearest}};\n    \
             let f = Filter {{ mode: Mode::{:?}, coord: Coord::{:?}, nearest: Nearest::{:?}, cubic_coeff_a: {}, exclude_outside: {}, antialias: {}, extrapolation_value: {} }};\n    \
             resize({}, &{}, &{}, &[{}], &[{}], &f, {});\n}}",
            f.mode,
            f.coord,
            f.nearest,
            f64_lit(f.cubic_coeff_a),
            f.exclude_outside,
            f.antialias,
            f64_lit(f.extrapolation_value),
            cx.read(x)?,
            cx.sizes(&xs)?,
            cx.sizes(&ys)?,
            scales.join(", "),
            roi.iter().map(|&v| f64_lit(v)).collect::<Vec<_>>().join(", "),
            cx.write(y)?
        ))
    }

    /// Per resized axis, a table of taps (source index and weight per output position, made
    /// when burnc runs), and one kernel that sums over the product of the axes' taps, as the
    /// runtime kernel does. An output position outside the roi (tf_crop_and_resize) is the
    /// extrapolation value.
    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        use crate::codegen::index::strides;
        use crate::codegen::wgsl::scalar;
        use std::fmt::Write;
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        if !scalar::is_float(x.dtype) {
            return Err(cx.err(format!("Resize on {} is not supported by the wgpu target yet", x.dtype)));
        }
        let konst = |i: usize| cx.konst(i).ok_or_else(|| cx.err(format!("input #{i} must be a constant for the wgpu target")));
        let mut args = Vec::new();
        for i in 0..4 {
            args.push(match cx.has_input(i) {
                false => None,
                true if i == 0 => Some(Arg { dtype: x.dtype, dims: Some(x.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()), value: None }),
                true => {
                    let t = konst(i)?;
                    Some(Arg { dtype: t.dtype(), dims: Some(t.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()), value: Some(t) })
                }
            });
        }
        let (out, scales) = self.fixed(&mut ShapeCx::new(args)).map_err(|e| cx.err(e))?;
        if out != y.shape {
            return Err(cx.err("Resize plan does not match the output shape"));
        }
        let roi = self.const_roi(cx.has_input(1).then(|| cx.konst(1)), x.shape.len()).map_err(|e| cx.err(e))?;
        let f = &self.filter;
        let (ys, xs) = (strides(&y.shape), strides(&x.shape));
        // The resized axes and their tables.
        let mut resized = Vec::new();
        for a in 0..x.shape.len() {
            let roi_a = (!roi.is_empty()).then(|| (roi[a], roi[x.shape.len() + a]));
            if !k::resamples(x.shape[a], out[a], scales[a], roi_a) {
                continue;
            }
            let (mut idx, mut w, mut ext) = (Vec::new(), Vec::new(), Vec::new());
            for o in 0..out[a] {
                let outside = k::position_taps(f, x.shape[a], out[a], scales[a], roi_a, o, &mut |i, wt| {
                    idx.extend_from_slice(&(i as u32).to_le_bytes());
                    w.extend_from_slice(&(wt as f32).to_le_bytes());
                });
                ext.extend_from_slice(&u32::from(outside).to_le_bytes());
            }
            let taps = k::tap_count(f, scales[a]);
            resized.push((a, taps, cx.table(&idx)?, cx.table(&w)?, cx.table(&ext)?));
        }
        let extrap = scalar::f32_lit(f.extrapolation_value as f32);
        Ok(vec![cx.pointwise(&y, |i| {
            // The input offset of the axes that keep their length.
            let kept: Vec<String> = (0..y.shape.len())
                .filter(|a| !resized.iter().any(|r| r.0 == *a) && y.shape[*a] != 1)
                .map(|a| format!("(({i} / {}u) % {}u) * {}u", ys[a], y.shape[a], xs[a]))
                .collect();
            let mut s = format!("let base = {};\nvar acc = 0.0;\nvar outside = false;\n", if kept.is_empty() { "0u".into() } else { kept.join(" + ") });
            let mut close = String::new();
            let mut term = vec!["1.0".to_string()];
            let mut src = vec!["base".to_string()];
            for (k, (a, taps, (ib, iw), (wb, ww), (eb, ew))) in resized.iter().enumerate() {
                let _ = write!(
                    s,
                    "let o{k} = ({i} / {}u) % {}u;\nif ({eb}[{ew}u + o{k}] != 0u) {{ outside = true; }}\n\
                     for (var t{k} = 0u; t{k} < {taps}u; t{k}++) {{\nlet j{k} = o{k} * {taps}u + t{k};\n\
                     let w{k} = bitcast<f32>({wb}[{ww}u + j{k}]);\nlet i{k} = {ib}[{iw}u + j{k}];\n",
                    ys[*a], y.shape[*a],
                );
                close.push_str("}\n");
                term.push(format!("w{k}"));
                src.push(format!("i{k} * {}u", xs[*a]));
            }
            s.push_str(&format!("acc += {} * {};\n", term.join(" * "), x.load(&src.join(" + "))));
            s.push_str(&close);
            Ok((s, format!("select(acc, {extrap}, outside)")))
        })?])
    }

    fn flops(&self, _: &[Option<Vec<usize>>], outputs: &[Option<Vec<usize>>]) -> Option<u64> {
        numel(outputs.first()?).map(|n| n.saturating_mul(8))
    }

    // roi, scales and sizes: the kernel takes them as numbers, and scales and sizes decide
    // the output dims.
    shape_inputs!(1..);
}

pub fn examples() -> Vec<super::Example> {
    let filter = |mode, coord| Filter { mode, coord, nearest: Nearest::RoundPreferFloor, cubic_coeff_a: -0.75, exclude_outside: false, antialias: false, extrapolation_value: 0.0 };
    let op = |filter, axes: Option<Vec<i64>>| OpRef::new(Resize { filter, axes, policy: AspectPolicy::Stretch });
    let x = Tensor::from_f32s(vec![4, 3], (0..12).map(|i| (i * i % 7) as f32 - 2.5).collect());
    let xi = Tensor::from_i64s(vec![3, 2, 2], (0..12).map(|i| i * 10 - 40).collect());
    let none = || Tensor::new(vec![0], Data::F32(vec![]));
    let f = |v: Vec<f32>| Tensor::from_f32s(vec![v.len()], v);
    let sizes = |v: Vec<i64>| Tensor::from_i64s(vec![v.len()], v);
    vec![
        // A non-integer scale: floor(0.6·len) at every length.
        super::Example { consts: vec![1, 2], op: op(filter(Mode::Linear, Coord::HalfPixel), None), inputs: vec![x.clone(), none(), f(vec![0.6, 1.5])] },
        super::Example { consts: vec![1, 2], op: op(filter(Mode::Cubic, Coord::AlignCorners), None), inputs: vec![x.clone(), none(), f(vec![2.0, 1.0])] },
        // Sizes: constant output dims, the scale out / in at run time.
        super::Example { consts: vec![1, 2, 3], op: op(filter(Mode::Nearest, Coord::Asymmetric), Some(vec![0])), inputs: vec![xi.clone(), none(), none(), sizes(vec![5])] },
        super::Example {
            consts: vec![1, 2],
            op: op(Filter { antialias: true, ..filter(Mode::Linear, Coord::PytorchHalfPixel) }, None),
            inputs: vec![xi, none(), f(vec![0.7, 1.0, 0.5])],
        },
        super::Example {
            consts: vec![1, 2],
            op: op(Filter { extrapolation_value: 9.0, ..filter(Mode::Linear, Coord::TfCropAndResize) }, Some(vec![0])),
            inputs: vec![x, f(vec![0.2, 1.1]), f(vec![1.25])],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(mode: Mode, coord: Coord) -> Resize {
        let filter = Filter { mode, coord, nearest: Nearest::RoundPreferFloor, cubic_coeff_a: -0.75, exclude_outside: false, antialias: false, extrapolation_value: 0.0 };
        Resize { filter, axes: None, policy: AspectPolicy::Stretch }
    }

    fn run(at: &Resize, x: Tensor, scales: &[f32]) -> R<Tensor> {
        let s = Tensor::from_f32s(vec![scales.len()], scales.to_vec());
        Ok(at.eval(&[Some(&x), None, Some(&s), None])?.remove(0))
    }

    #[test]
    fn nearest_upsample_asymmetric() {
        let mut at = attrs(Mode::Nearest, Coord::Asymmetric);
        at.filter.nearest = Nearest::Floor;
        let y = run(&at, Tensor::from_f32s(vec![1, 2], vec![1., 2.]), &[1.0, 2.0]).unwrap();
        assert_eq!(y, Tensor::from_f32s(vec![1, 4], vec![1., 1., 2., 2.]));
    }

    #[test]
    fn resize10_nearest_downsample_takes_ceil() {
        // The opset-10 backend case test_resize_downsample_nearest: [[1, 3]].
        let mut at = attrs(Mode::Nearest, Coord::Asymmetric);
        at.filter.nearest = Nearest::Simple;
        let x = Tensor::from_f32s(vec![1, 1, 2, 4], vec![1., 2., 3., 4., 5., 6., 7., 8.]);
        let y = run(&at, x, &[1.0, 1.0, 0.6, 0.6]).unwrap();
        assert_eq!(y, Tensor::from_f32s(vec![1, 1, 1, 2], vec![1., 3.]));
    }

    #[test]
    fn nearest_tf_half_pixel_for_nn() {
        // TensorFlow's half-pixel nearest: source index floor((y + 0.5) / scale).
        let mut at = attrs(Mode::Nearest, Coord::TfHalfPixelForNn);
        at.filter.nearest = Nearest::Floor;
        let x = Tensor::from_f32s(vec![3], vec![10., 20., 30.]);
        assert_eq!(run(&at, x.clone(), &[2.0]).unwrap(), Tensor::from_f32s(vec![6], vec![10., 10., 20., 20., 30., 30.]));
        // (0 + 0.5) / 0.5 = 1: the middle element, where half_pixel would take the first.
        assert_eq!(run(&at, x, &[0.5]).unwrap(), Tensor::from_f32s(vec![1], vec![20.]));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let x = Tensor::from_f32s(vec![2], vec![0., 4.]);
        let at = attrs(Mode::Linear, Coord::HalfPixel);
        assert!(run(&at, x.clone(), &[2.0, 1.0]).is_err());
        assert!(run(&at, x.clone(), &[-1.0]).is_err());
        let roi_less = attrs(Mode::Linear, Coord::TfCropAndResize);
        assert!(run(&roi_less, x, &[2.0]).is_err());
    }

    #[test]
    fn fractional_scales_are_exact_floors() {
        // floor(h·s) in f64 equals the dim expression at every length, 0.7f32 (just below 0.7)
        // included, whose floor at h = 10 is 6.
        for s in [0.6f32, 0.7, 0.8, 1.7, 0.25, 3.0] {
            let mut cx = ShapeCx::new(vec![]);
            let e = scaled(&mut cx, 0, &DimExpr::var("h"), s as f64).unwrap();
            for h in 1..2000i64 {
                assert_eq!(e.eval(&|_| Some(h)), Some((s as f64 * h as f64).floor() as i64), "{s} at {h}");
            }
        }
    }
}
