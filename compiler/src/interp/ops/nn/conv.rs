//! Conv and ConvTranspose: shape checks, geometry, and the call into the im2col + GEMM
//! kernels (f32 and widened f16/bf16 via sgemm, f64 via dgemm).
use super::geom::{attrs, resolve};
use crate::interp::ops::norm::float::Work;
use crate::interp::ops::util::numel;
use crate::ir::{AutoPad, Window};
use crate::tensor::Tensor;
use burnc_runtime::kernels::conv::{self as k, ConvDims, Dgemm, MatMul, Sgemm};
use burnc_runtime::kernels::window::Window3;

/// Common checks: float types, ranks, and the kernel shape (from W, or the attribute when it
/// agrees).
fn check(x: &Tensor, w: &Tensor, win: &Window, what: &str) -> Result<Vec<usize>, String> {
    if !x.dtype().is_float() || x.dtype() != w.dtype() {
        return Err(format!("{what} needs X and W of one float type, got {} and {}", x.dtype(), w.dtype()));
    }
    if x.rank() < 3 || w.rank() != x.rank() {
        return Err(format!("{what} needs X of rank >= 3 and W of the same rank, got {:?} and {:?}", x.shape, w.shape));
    }
    let kernel = w.shape[2..].to_vec();
    if !win.kernel_shape.is_empty() && win.kernel_shape != kernel {
        return Err(format!("kernel_shape {:?} does not match W {:?}", win.kernel_shape, w.shape));
    }
    Ok(kernel)
}

fn check_bias(b: Option<&Tensor>, x: &Tensor, c_out: usize) -> Result<(), String> {
    match b {
        Some(b) if b.numel() != c_out || b.dtype() != x.dtype() => {
            Err(format!("bias must be {} with {c_out} elements, got {} {:?}", x.dtype(), b.dtype(), b.shape))
        }
        _ => Ok(()),
    }
}

fn out_shape(x: &Tensor, c_out: usize, spatial: &[usize]) -> Vec<usize> {
    let n = x.rank() - 2;
    let mut s = vec![x.shape[0], c_out];
    s.extend_from_slice(&spatial[3 - n..]);
    s
}

/// Dispatch on precision with the matching GEMM.
macro_rules! run {
    ($x:expr, $f:ident($($arg:expr),*)) => {
        if crate::interp::ops::norm::float::wide($x.dtype(), "convolution")? {
            $f::<f64>($($arg,)* &Dgemm)
        } else {
            $f::<f32>($($arg,)* &Sgemm)
        }
    };
}

pub fn conv(x: &Tensor, w: &Tensor, b: Option<&Tensor>, window: &Window, group: usize) -> Result<Tensor, String> {
    let kernel = check(x, w, window, "Conv")?;
    let (c_in, c_out) = (x.shape[1], w.shape[0]);
    if group == 0 || !c_in.is_multiple_of(group) || !c_out.is_multiple_of(group) || w.shape[1] != c_in / group {
        return Err(format!("X {:?} and W {:?} do not fit group = {group}", x.shape, w.shape));
    }
    check_bias(b, x, c_out)?;
    let win = resolve(window, &kernel, &x.shape[2..])?;
    let d = ConvDims { batch: x.shape[0], c_in, c_out, group };
    let shape = out_shape(x, c_out, &win.output);
    numel(&shape)?;
    numel(&[k::conv_scratch_len(&d, &win)])?;
    fn go<R: Work>(x: &Tensor, w: &Tensor, b: Option<&Tensor>, d: ConvDims, win: Window3, shape: Vec<usize>, mm: &impl MatMul<R>) -> Result<Tensor, String> {
        let (xs, ws) = (R::view(x), R::view(w));
        let bs = b.map(R::view);
        let mut y = vec![R::default(); shape.iter().product()];
        let mut col = vec![R::default(); k::conv_scratch_len(&d, &win)];
        k::conv(&xs, &ws, bs.as_deref(), &mut y, &d, &win, &mut col, mm);
        Ok(Tensor::new(shape, R::into_data(y, x.dtype())))
    }
    run!(x, go(x, w, b, d, win, shape))
}

/// ConvTranspose output size and pads per the ONNX spec: from `output_shape` or auto_pad
/// SAME (output = input · stride, total padding split by auto_pad), or explicit pads.
pub fn conv_transpose(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    window: &Window,
    group: usize,
    output_padding: &[usize],
    output_shape: &[usize],
) -> Result<Tensor, String> {
    let kernel = check(x, w, window, "ConvTranspose")?;
    let (d, win) = conv_transpose_geometry(&x.shape, &w.shape, &kernel, window, group, output_padding, output_shape)?;
    let c_out = d.c_out;
    check_bias(b, x, c_out)?;
    let shape = out_shape(x, c_out, &win.input);
    numel(&shape)?;
    numel(&[k::conv_transpose_scratch_len(&d, &win)])?;
    fn go<R: Work>(x: &Tensor, w: &Tensor, b: Option<&Tensor>, d: ConvDims, win: Window3, shape: Vec<usize>, mm: &impl MatMul<R>) -> Result<Tensor, String> {
        let (xs, ws) = (R::view(x), R::view(w));
        let bs = b.map(R::view);
        let mut y = vec![R::default(); shape.iter().product()];
        let mut col = vec![R::default(); k::conv_transpose_scratch_len(&d, &win)];
        k::conv_transpose(&xs, &ws, bs.as_deref(), &mut y, &d, &win, &mut col, mm);
        Ok(Tensor::new(shape, R::into_data(y, x.dtype())))
    }
    run!(x, go(x, w, b, d, win, shape))
}

/// ConvTranspose geometry (shared with codegen): the dims and the forward conv window that
/// maps Y to X (`win.input` = Y's spatial size).
pub(crate) fn conv_transpose_geometry(
    xs: &[usize],
    ws: &[usize],
    kernel: &[usize],
    window: &Window,
    group: usize,
    output_padding: &[usize],
    output_shape: &[usize],
) -> Result<(ConvDims, Window3), String> {
    let c_in = xs[1];
    if group == 0 || !c_in.is_multiple_of(group) || ws[0] != c_in {
        return Err(format!("X {:?} and W {:?} do not fit group = {group}", xs, ws));
    }
    let c_out = ws[1].checked_mul(group).ok_or("ConvTranspose output channels overflow")?;
    let a = attrs(window, kernel)?;
    let n = kernel.len();
    let opad = if output_padding.is_empty() { vec![0; n] } else { output_padding.to_vec() };
    let oshape = if output_shape.len() == n + 2 { &output_shape[2..] } else { output_shape };
    if opad.len() != n || !(oshape.is_empty() || oshape.len() == n) {
        return Err(format!("output_padding {output_padding:?} / output_shape {output_shape:?} do not fit {n} spatial dims"));
    }
    let (mut out, mut pb, mut pe) = (vec![0usize; n], vec![0isize; n], vec![0isize; n]);
    for i in 0..n {
        let inp = xs[2 + i];
        if opad[i] > 1 << 31 || oshape.get(i).is_some_and(|&o| o > 1 << 40) {
            return Err("output_padding / output_shape out of range".into());
        }
        let big = || format!("ConvTranspose output along spatial dim {i} is too large");
        let full = a.strides[i]
            .checked_mul(inp.saturating_sub(1))
            .and_then(|v| v.checked_add(opad[i] + (a.kernel[i] - 1) * a.dilations[i] + 1))
            .filter(|&v| v <= 1 << 40)
            .ok_or_else(big)? as isize;
        let same = matches!(window.auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
        if !oshape.is_empty() || same {
            let target = if oshape.is_empty() { inp.checked_mul(a.strides[i]).filter(|&v| v <= 1 << 40).ok_or_else(big)? } else { oshape[i] };
            let total = full - target as isize;
            let half = total.div_euclid(2); // floor, as the ONNX reference
            (pb[i], pe[i]) = if window.auto_pad == AutoPad::SameUpper { (half, total - half) } else { (total - half, half) };
            out[i] = target;
        } else {
            if window.auto_pad != AutoPad::Valid {
                (pb[i], pe[i]) = (a.pads[i] as isize, a.pads[n + i] as isize);
            }
            let o = full - pb[i] - pe[i];
            if o <= 0 {
                return Err(format!("ConvTranspose output size {o} along spatial dim {i} is not positive"));
            }
            out[i] = o as usize;
        }
    }
    // The forward conv that maps Y (size `out`) to X.
    let win = Window3::new(&out, &xs[2..], &a.kernel, &a.strides, &a.dilations, &pb, &pe).ok_or("bad window geometry")?;
    let d = ConvDims { batch: xs[0], c_in, c_out, group };
    Ok((d, win))
}
