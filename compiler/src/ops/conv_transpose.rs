//! ConvTranspose `(X [N, C, in…], W [C, M / group, k…], B? [M])` → `[N, M, out…]`, up to 3
//! spatial dims: the adjoint of the forward convolution that maps Y onto X, run by the
//! runtime's im2col + GEMM kernel (`kernels::conv::conv_transpose`), which takes the dims and
//! the window at run time. With fixed shapes every size is a literal; batch, channels and
//! spatial dims may be bounded, and so may the kernel dims when W is a graph input (the
//! output grows with the kernel, so buffers sized at the bounds hold it).
use super::{input, numel, product, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::nn::conv::{run_conv, ConvKernel};
use crate::ops::window::attrs;
use crate::ir::{AutoPad, DType, DimExpr, Window};
use crate::tensor::Tensor;
use burnc_runtime::kernels::conv::{self as k, ConvDims};
use burnc_runtime::kernels::window::Window3;

#[derive(Debug, Clone, PartialEq)]
pub struct ConvTranspose {
    pub window: Window,
    pub group: usize,
    /// Extra trailing output rows per spatial dim (empty: none).
    pub output_padding: Vec<usize>,
    /// The output's spatial dims (or all its dims); empty: from the window. Decides the pads.
    pub output_shape: Vec<usize>,
}

fn c(v: i64) -> DimExpr {
    DimExpr::constant(v)
}

/// The sizes: batch and channels, the spatial dims of Y and X (the forward convolution's
/// input and output) and the pads of that convolution (constants, possibly negative, or
/// shifted expressions, which stay positive as run-time sizes must).
struct Geometry {
    batch: DimExpr,
    c_in: DimExpr,
    c_out: DimExpr,
    y: Vec<DimExpr>,
    x: Vec<DimExpr>,
    pads: Vec<(Pad, Pad)>,
    kernel: Vec<DimExpr>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
}

kernel_dims!(Geometry => ConvDims, "rt::kernels::conv::ConvDims" (group: usize) { batch: dim batch, c_in: dim c_in, c_out: dim c_out, group: arg group });

enum Pad {
    Fixed(i64),
    /// `(e, k)`: the pad is `e − k`.
    Shifted(DimExpr, i64),
}

impl Geometry {
    /// ConvDims and the window at fixed sizes.
    fn fixed(&self, group: usize) -> R<(ConvDims, Window3)> {
        let at = |d: &DimExpr| d.as_const().map(|v| v.max(0) as usize).ok_or_else(|| format!("dim {d} is not fixed"));
        let pad = |p: &Pad| match p {
            Pad::Fixed(v) => Ok(*v as isize),
            Pad::Shifted(d, k) => Ok(at(d)? as isize - *k as isize),
        };
        let y: Vec<usize> = self.y.iter().map(at).collect::<R<_>>()?;
        let x: Vec<usize> = self.x.iter().map(at).collect::<R<_>>()?;
        let pb: Vec<isize> = self.pads.iter().map(|(b, _)| pad(b)).collect::<R<_>>()?;
        let pe: Vec<isize> = self.pads.iter().map(|(_, e)| pad(e)).collect::<R<_>>()?;
        let kernel: Vec<usize> = self.kernel.iter().map(at).collect::<R<_>>()?;
        let win = Window3::new(&y, &x, &kernel, &self.strides, &self.dilations, &pb, &pe).ok_or("bad window geometry")?;
        Ok((self.fixed_dims(group)?, win))
    }
}

impl ConvTranspose {
    /// The geometry, with the operands checked; `None` while a rank is not known.
    fn geometry(&self, cx: &mut ShapeCx) -> R<Option<Geometry>> {
        let (xt, wt) = (cx.arg(0)?.dtype, cx.arg(1)?.dtype);
        if !xt.is_float() || xt != wt {
            return Err(format!("X and W must have one float type, got {xt} and {wt}"));
        }
        if let Some(b) = cx.opt(2) {
            if b.dtype != xt {
                return Err(format!("B must have X's type {xt}, got {}", b.dtype));
            }
        }
        let (Some(xs), Some(ws)) = (cx.arg(0)?.dims.clone(), cx.arg(1)?.dims.clone()) else { return Ok(None) };
        if xs.len() < 3 || xs.len() > 5 || ws.len() != xs.len() {
            return Err(format!("X must have 1 to 3 spatial dims and W X's rank, got ranks {} and {}", xs.len(), ws.len()));
        }
        let n = xs.len() - 2;
        let kernel = kernel_dims_of(cx, &self.window, &ws)?;
        let group = self.group;
        if group == 0 {
            return Err("group must be positive".into());
        }
        let c_in = xs[1].clone();
        cx.equal("X's channels and W's dim 0", &c_in, &ws[0])?;
        cx.divides("group and X's channels", &c(group as i64), &c_in)?;
        let c_out = ws[1].scale(group as i64);
        if let Some(Some(bs)) = cx.opt(2).map(|b| b.dims.clone()) {
            cx.equal("B's size and the output channels", &product(&bs), &c_out)?;
        }
        // A bounded kernel dim is at least 1.
        let a = attrs(&self.window, &kernel.iter().map(|k| k.as_const().map_or(1, |v| v.max(0) as usize)).collect::<Vec<_>>())?;
        let opad = if self.output_padding.is_empty() { vec![0; n] } else { self.output_padding.clone() };
        let oshape = if self.output_shape.len() == n + 2 { &self.output_shape[2..] } else { &self.output_shape[..] };
        if opad.len() != n || !(oshape.is_empty() || oshape.len() == n) {
            return Err(format!("output_padding {:?} / output_shape {:?} do not fit {n} spatial dims", self.output_padding, self.output_shape));
        }
        if opad.iter().any(|&p| p > 1 << 31) || oshape.iter().any(|&o| o > 1 << 40) {
            return Err("output_padding / output_shape out of range".into());
        }
        let same = matches!(self.window.auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
        let (mut y, mut pads) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n {
            let (inp, s) = (&xs[2 + i], a.strides[i] as i64);
            let dk = kernel[i].sub(&c(1)).scale(a.dilations[i] as i64).add(&c(1));
            // (in − 1)·s + dk + output_padding, an empty input counted as 1.
            let full = match (inp.as_const(), dk.as_const()) {
                (Some(v), Some(dk)) => c((v - 1).max(0).saturating_mul(s).saturating_add(dk + opad[i] as i64)),
                (Some(v), None) => c((v - 1).max(0).saturating_mul(s).saturating_add(opad[i] as i64)).add(&dk),
                _ => inp.sub(&c(1)).scale(s).add(&dk).add(&c(opad[i] as i64)),
            };
            if full.as_const().is_some_and(|v| v > 1 << 40) {
                return Err(format!("ConvTranspose output along spatial dim {i} is too large"));
            }
            if !oshape.is_empty() || same {
                let target = if oshape.is_empty() { inp.scale(s) } else { c(oshape[i] as i64) };
                // The total pad, split as the ONNX reference: the odd one at the end for
                // SAME_UPPER, at the start otherwise.
                let total = full.sub(&target);
                let upper = self.window.auto_pad == AutoPad::SameUpper;
                let pair = match total.as_const() {
                    Some(t) => {
                        let half = t.div_euclid(2);
                        (Pad::Fixed(if upper { half } else { t - half }), Pad::Fixed(if upper { t - half } else { half }))
                    }
                    None => {
                        // A bounded input (with output_shape) or kernel: the total grows with
                        // each, from its value where they are 1, so the halves shifted by `k`
                        // are at least 1.
                        if !total.is_monotone() {
                            return Err(format!("ConvTranspose's pad {total} along spatial dim {i} shrinks as a dim grows"));
                        }
                        let least = total.eval(&|_| Some(1)).ok_or("ConvTranspose's pads overflow")?.div_euclid(2);
                        let k = 1 - least.min(0);
                        let (lo, hi) = (total.add(&c(2 * k)).floor_div(2), total.add(&c(2 * k)).ceil_div(2));
                        let (lo, hi) = (Pad::Shifted(lo, k), Pad::Shifted(hi, k));
                        if upper { (lo, hi) } else { (hi, lo) }
                    }
                };
                y.push(target);
                pads.push(pair);
            } else {
                let (pb, pe) = if self.window.auto_pad == AutoPad::Valid { (0, 0) } else { (a.pads[i] as i64, a.pads[n + i] as i64) };
                let o = full.sub(&c(pb + pe));
                if let Some(v) = o.as_const().filter(|&v| v <= 0) {
                    return Err(format!("ConvTranspose output size {v} along spatial dim {i} is not positive"));
                }
                cx.at_most(&format!("1 and the output along spatial dim {i}"), &c(1), &o)?;
                y.push(o);
                pads.push((Pad::Fixed(pb), Pad::Fixed(pe)));
            }
        }
        Ok(Some(Geometry { batch: xs[0].clone(), c_in, c_out, y, x: xs[2..].to_vec(), pads, kernel, strides: a.strides, dilations: a.dilations }))
    }

    fn fixed_geometry(&self, ins: &[Option<(DType, &[usize])>]) -> R<(ConvDims, Window3)> {
        let g = self.geometry(&mut ShapeCx::of_shapes(ins.iter().copied()))?.ok_or("shapes are not known")?;
        g.fixed(self.group)
    }
}

impl OpDef for ConvTranspose {
    name!("ConvTranspose");
    none_of!(cuda, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        let dims = self.geometry(cx)?.map(|g| [g.batch, g.c_out].into_iter().chain(g.y).collect());
        Ok(vec![OutType { dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, w, b) = (input(ins, 0)?, input(ins, 1)?, ins.get(2).copied().flatten());
        let shapes: Vec<_> = ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..]))).collect();
        let (d, win) = self.fixed_geometry(&shapes)?;
        let mut shape = vec![d.batch, d.c_out];
        shape.extend_from_slice(&win.input[5 - x.rank()..]);
        for len in [shape.iter().try_fold(1usize, |a, &v| a.checked_mul(v)), Some(k::conv_transpose_scratch_len(&d, &win))] {
            len.filter(|&v| v <= 1 << 40).ok_or("ConvTranspose's output is too large")?;
        }
        Ok(vec![run_conv(ConvKernel::Transpose, x, w, b, d, win, shape, "ConvTranspose")?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, w) = (cx.input(0)?, cx.input(1)?);
        let dt = cx.dtype(x)?;
        let gemm = match dt {
            DType::F32 => "rt::kernels::conv::Sgemm",
            DType::F64 => "rt::kernels::conv::Dgemm",
            _ => return Err(cx.err(format!("ConvTranspose on {dt} is not supported by codegen yet"))),
        };
        let g = self.geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("shapes are not known"))?;
        let win = match g.fixed(self.group) {
            Ok((_, win)) => crate::codegen::emit::nn::window_lit(&win),
            Err(_) => {
                // Run-time sizes; dims X lacks are 1, its pads 0.
                let k = g.x.len();
                let fill = |v: Vec<String>, d: &str| [vec![d.to_string(); 3 - k], v].concat().join(", ");
                let sizes = |ds: &[DimExpr]| ds.iter().map(|d| cx.size(d)).collect::<Result<Vec<_>, _>>();
                let pad = |p: &Pad| match p {
                    Pad::Fixed(v) => Ok(format!("{v}")),
                    Pad::Shifted(d, k) => Ok(format!("{} as isize - {k}", cx.size(d)?)),
                };
                let pb = g.pads.iter().map(|(b, _)| pad(b)).collect::<Result<Vec<_>, CodegenError>>()?;
                let pe = g.pads.iter().map(|(_, e)| pad(e)).collect::<Result<Vec<_>, CodegenError>>()?;
                let lit = |v: &[usize]| fill(v.iter().map(|d| d.to_string()).collect(), "1");
                format!(
                    "rt::kernels::window::Window3 {{ input: [{}], output: [{}], kernel: [{}], strides: [{}], dilations: [{}], pads_begin: [{}], pads_end: [{}] }}",
                    fill(sizes(&g.y)?, "1"),
                    fill(sizes(&g.x)?, "1"),
                    fill(sizes(&g.kernel)?, "1"),
                    lit(&g.strides),
                    lit(&g.dilations),
                    fill(pb, "0"),
                    fill(pe, "0")
                )
            }
        };
        let bias = match cx.opt_input(2) {
            Some(b) => format!("Some({})", cx.read(b)?),
            None => "None".into(),
        };
        Ok(format!(
            "let d = {};\n\
             let win = {win};\n\
             rt::kernels::conv::conv_transpose({}, {}, {bias}, {}, &d, &win, {}, &{gemm});",
            g.dims_lit(cx, self.group)?,
            cx.read(x)?,
            cx.read(w)?,
            cx.write(cx.output(0)?)?,
            cx.scratch(dt)?
        ))
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        Ok(vec![wgsl(self, cx)?])
    }

    /// The column buffer, at the bounds.
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        let shapes: Vec<_> = ins.iter().map(|i| i.as_ref().map(|(d, s)| (*d, &s[..]))).collect();
        let size = ins.first().and_then(|i| i.as_ref()).map_or(4, |(d, _)| d.size());
        self.fixed_geometry(&shapes).map_or(0, |(d, win)| k::conv_transpose_scratch_len(&d, &win).saturating_mul(size))
    }

    // Each input element times its column of W.
    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        let per = numel(&Some(ins.get(1)?.as_ref()?.get(1..)?.to_vec()))?;
        numel(ins.first()?)?.checked_mul(per)?.checked_mul(2)
    }
}

/// ConvTranspose on the wgpu target, one invocation per output element: the sum over the
/// input positions and taps that the forward convolution (`win`: Y → X) maps onto it.
fn wgsl(op: &ConvTranspose, cx: &super::WgslCx) -> Result<super::WgslKernel, CodegenError> {
    let (x, w, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
    if !crate::codegen::wgsl::scalar::is_float(x.dtype) {
        return Err(cx.err(format!("ConvTranspose on {} is not supported by the wgpu target yet", x.dtype)));
    }
    let bias = cx.opt_input(2)?;
    let shapes = [Some((x.dtype, &x.shape[..])), Some((w.dtype, &w.shape[..])), bias.as_ref().map(|b| (b.dtype, &b.shape[..]))];
    let (d, win) = op.fixed_geometry(&shapes).map_err(|e| cx.err(e))?;
    let (cg, mg) = (d.c_in / d.group.max(1), d.c_out / d.group.max(1));
    let [ydd, yh, yw] = win.input;
    let [xd, xh, xw] = win.output;
    let [kd, kh, kw] = win.kernel;
    let [sd, sh, sw] = win.strides;
    let [dd, dh, dw] = win.dilations;
    let [pd, ph, pw] = win.pads_begin;
    let (xs, ks) = (xd * xh * xw, kd * kh * kw);
    cx.pointwise(&y, |i| {
        let b = bias.as_ref().map(|b| b.load("m")).unwrap_or_else(|| "0.0".into());
        let tap = |v: &str, yv: &str, p: isize, k: &str, dl: usize, s: usize, n: usize| {
            format!("let t{v} = {yv} + {p} - {k} * {dl}; if (t{v} < 0 || t{v} % {s} != 0 || t{v} / {s} >= {n}) {{ continue; }} let {v} = t{v} / {s};")
        };
        Ok((
            format!(
                "let yx = i32({i} % {yw}u);\nlet yy = i32(({i} / {yw}u) % {yh}u);\nlet yz = i32(({i} / {}u) % {ydd}u);\nlet m = ({i} / {}u) % {}u;\nlet nb = {i} / {};\n\
                 let g = m / {mg}u;\nvar acc = {b};\n\
                 for (var c = 0u; c < {cg}u; c++) {{\nfor (var kz = 0; kz < {kd}; kz++) {{ {}\nfor (var ky = 0; ky < {kh}; ky++) {{ {}\nfor (var kx = 0; kx < {kw}; kx++) {{ {}\n\
                 acc += {} * {};\n}} }} }} }}\n",
                yh * yw,
                ydd * yh * yw,
                d.c_out,
                d.c_out * ydd * yh * yw,
                tap("xz", "yz", pd, "kz", dd, sd, xd),
                tap("xy", "yy", ph, "ky", dh, sh, xh),
                tap("xx", "yx", pw, "kx", dw, sw, xw),
                x.load(&format!("(nb * {}u + g * {cg}u + c) * {xs}u + u32((xz * {xh} + xy) * {xw} + xx)", d.c_in)),
                w.load(&format!("((g * {cg}u + c) * {mg}u + m % {mg}u) * {ks}u + u32((kz * {kh} + ky) * {kw} + kx)")),
            ),
            "acc".into(),
        ))
    })
}

/// A window's kernel: `kernel_shape`, which W's spatial dims must match, else W's spatial dims,
/// bounded when W is a graph input.
fn kernel_dims_of(cx: &mut ShapeCx, window: &crate::ir::Window, ws: &[DimExpr]) -> R<Vec<DimExpr>> {
    if window.kernel_shape.is_empty() {
        return Ok(ws.get(2..).unwrap_or_default().to_vec());
    }
    let k = kernel_of(cx, window, ws)?.ok_or("W's kernel dims are not known")?;
    Ok(k.iter().map(|&v| c(v as i64)).collect())
}

/// A window's kernel: `kernel_shape`, which W's spatial dims must match, else W's fixed dims
/// (`None` when they are named: the output's dims are then unknown).
pub(super) fn kernel_of(cx: &mut ShapeCx, window: &crate::ir::Window, ws: &[DimExpr]) -> R<Option<Vec<usize>>> {
    if window.kernel_shape.is_empty() {
        return Ok(ws.get(2..).unwrap_or_default().iter().map(|d| d.as_const().map(|v| v.max(0) as usize)).collect());
    }
    if window.kernel_shape.len() + 2 != ws.len() {
        return Err(format!("kernel_shape {:?} does not fit W's rank {}", window.kernel_shape, ws.len()));
    }
    for (i, &k) in window.kernel_shape.iter().enumerate() {
        cx.equal(&format!("kernel_shape and W's dim {}", i + 2), &ws[2 + i], &DimExpr::constant(k as i64))?;
    }
    Ok(Some(window.kernel_shape.clone()))
}

pub fn examples() -> Vec<super::Example> {
    let f = |shape: Vec<usize>, k: usize| {
        let n = shape.iter().product::<usize>();
        Tensor::from_f32s(shape, (0..n).map(|i| ((i * k) % 13) as f32 * 0.25 - 1.5).collect())
    };
    let window = |kernel: &[usize], strides: &[usize], pads: &[usize], auto_pad| Window {
        kernel_shape: kernel.to_vec(),
        strides: strides.to_vec(),
        pads: pads.to_vec(),
        dilations: vec![],
        auto_pad,
        ceil_mode: false,
    };
    let ct = |window, group, output_padding: &[usize], output_shape: &[usize]| {
        OpRef::new(ConvTranspose { window, group, output_padding: output_padding.to_vec(), output_shape: output_shape.to_vec() })
    };
    vec![
        // Stride 2 with pads and output padding, bias, 2 groups.
        super::Example {
            consts: vec![1, 2],
            op: ct(window(&[3, 3], &[2, 2], &[1, 0, 0, 1], AutoPad::NotSet), 2, &[1, 0], &[]),
            inputs: vec![f(vec![2, 4, 3, 4], 5), f(vec![4, 3, 3, 3], 7), f(vec![6], 3)],
        },
        // SAME_UPPER: the output is the input times the stride.
        super::Example { consts: vec![1], op: ct(window(&[], &[2], &[], AutoPad::SameUpper), 1, &[], &[]), inputs: vec![f(vec![3, 2, 5], 3), f(vec![2, 3, 4], 5)] },
        // output_shape decides the pads: negative along H (one more row than the windows
        // cover), positive along W.
        super::Example { consts: vec![1], op: ct(window(&[2, 2], &[3, 2], &[], AutoPad::NotSet), 1, &[], &[9, 5]), inputs: vec![f(vec![2, 2, 3, 3], 3), f(vec![2, 2, 2, 2], 5)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_spec_and_bad_geometry_is_refused() {
        let w = Tensor::from_f32s(vec![1, 1, 3, 3], vec![1.0; 9]);
        let x = Tensor::from_f32s(vec![1, 1, 3, 3], vec![1.0; 9]);
        let win = |pads: Vec<usize>| Window { kernel_shape: vec![], strides: vec![3, 2], pads, dilations: vec![], auto_pad: AutoPad::NotSet, ceil_mode: false };
        let op = ConvTranspose { window: win(vec![]), group: 1, output_padding: vec![1, 1], output_shape: vec![] };
        let y = op.eval(&[Some(&x), Some(&w), None]).expect("eval");
        assert_eq!(y[0].shape, vec![1, 1, 10, 8]);
        // Pads larger than the output; channels that do not match W.
        let op = ConvTranspose { window: win(vec![9, 9, 9, 9]), group: 1, output_padding: vec![], output_shape: vec![] };
        assert!(op.eval(&[Some(&x), Some(&w), None]).is_err());
        let x2 = Tensor::from_f32s(vec![1, 2, 3, 3], vec![1.0; 18]);
        let op = ConvTranspose { window: win(vec![]), group: 1, output_padding: vec![], output_shape: vec![] };
        assert!(op.eval(&[Some(&x2), Some(&w), None]).is_err());
    }
}
