//! Conv: shape checks, geometry, and the call into the im2col + GEMM
//! kernels (f32 and widened f16/bf16 via sgemm, f64 via dgemm).
use crate::ops::window::resolve;
use crate::interp::ops::norm::float::Work;
use crate::interp::ops::util::numel;
use crate::ir::Window;
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

/// Which of the runtime's im2col + GEMM kernels [`run_conv`] calls.
#[derive(Clone, Copy)]
pub(crate) enum ConvKernel {
    Conv,
    Transpose,
}

/// `kernel` on X, W and the bias into an output of `shape`, at X's precision: f32 (f16 and
/// bf16 widened) by sgemm, f64 by dgemm. `what` names the op in a dtype error.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_conv(kernel: ConvKernel, x: &Tensor, w: &Tensor, b: Option<&Tensor>, d: ConvDims, win: Window3, shape: Vec<usize>, what: &str) -> Result<Tensor, String> {
    #[allow(clippy::too_many_arguments)]
    fn go<R: Work>(kernel: ConvKernel, x: &Tensor, w: &Tensor, b: Option<&Tensor>, d: ConvDims, win: Window3, shape: Vec<usize>, mm: &impl MatMul<R>) -> Result<Tensor, String> {
        let (xs, ws) = (R::view(x), R::view(w));
        let bs = b.map(R::view);
        let mut y = vec![R::default(); shape.iter().product()];
        let scratch = match kernel {
            ConvKernel::Conv => k::conv_scratch_len(&d, &win),
            ConvKernel::Transpose => k::conv_transpose_scratch_len(&d, &win),
        };
        let mut col = vec![R::default(); scratch];
        match kernel {
            ConvKernel::Conv => k::conv(&xs, &ws, bs.as_deref(), &mut y, &d, &win, &mut col, mm),
            ConvKernel::Transpose => k::conv_transpose(&xs, &ws, bs.as_deref(), &mut y, &d, &win, &mut col, mm),
        }
        Ok(Tensor::new(shape, R::into_data(y, x.dtype())))
    }
    if crate::interp::ops::norm::float::wide(x.dtype(), what)? {
        go::<f64>(kernel, x, w, b, d, win, shape, &Dgemm)
    } else {
        go::<f32>(kernel, x, w, b, d, win, shape, &Sgemm)
    }
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
    run_conv(ConvKernel::Conv, x, w, b, d, win, shape, "convolution")
}
