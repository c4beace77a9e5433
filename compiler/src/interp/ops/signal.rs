//! DFT, STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix: geometry resolved here
//! (shared with inference and codegen), math in `burnc_runtime::kernels::spectral`.
use super::util::{arg, norm_axis_or_scalar, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{DType, Op, WindowKind};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::spectral::{self, DftDims, StftDims};


/// Map the float variants of `$data` through `$body` (`$v`: the typed slice); other types fail.
macro_rules! floats {
    ($data:expr, $v:ident => $body:expr, $what:expr) => {
        match $data {
            Data::F32($v) => Data::F32($body),
            Data::F64($v) => Data::F64($body),
            Data::F16($v) => Data::F16($body),
            Data::BF16($v) => Data::BF16($body),
            d => return Err(format!("{} is not defined on {}", $what, d.dtype())),
        }
    };
}

/// A scalar (or one-element) integer operand.
pub fn scalar_int(t: &Tensor, what: &str) -> Result<i64, String> {
    match t.to_i64_vec().as_deref() {
        Some(&[v]) if t.dtype().is_int() => Ok(v),
        _ => Err(format!("{what} must be one integer, got {:?} of {}", t.shape, t.dtype())),
    }
}

fn positive(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| format!("{what} must be positive, got {v}"))
}

/// DFT geometry and output shape from the input shape and the (optional) dft_length and axis.
pub fn dft_dims(xs: &[usize], dft_length: Option<i64>, axis: Option<i64>, inverse: bool, onesided: bool) -> Result<(DftDims, Vec<usize>), String> {
    let rank = xs.len();
    let c_in = *xs.last().ok_or("DFT needs an input of rank >= 2")?;
    if rank < 2 || !(1..=2).contains(&c_in) {
        return Err(format!("DFT input must end in a dim of 1 or 2, got {xs:?}"));
    }
    let ax = norm_axis_or_scalar(axis.unwrap_or(-2), rank)?;
    if ax == rank - 1 {
        return Err("DFT axis cannot be the last (real/imaginary) dim".into());
    }
    let len_in = xs[ax];
    let n = match dft_length {
        Some(l) => positive(l, "dft_length")?,
        None if inverse && onesided => positive(2 * (len_in as i64 - 1), "the irfft length 2·(n - 1)")?,
        None => positive(len_in as i64, "the signal length")?,
    };
    let d = DftDims {
        outer: xs[..ax].iter().product(),
        inner: xs[ax + 1..rank - 1].iter().product(),
        len_in,
        c_in,
        n,
        inverse,
        onesided,
    };
    let mut out = xs.to_vec();
    out[ax] = d.len_out();
    out[rank - 1] = d.c_out();
    Ok((d, out))
}

/// STFT geometry from the signal shape, frame_step, window length and frame_length.
pub fn stft_dims(xs: &[usize], frame_step: i64, window: Option<usize>, frame_length: Option<i64>, onesided: bool) -> Result<StftDims, String> {
    let &[batch, len, c_in] = xs else { return Err(format!("STFT signal must be [batch, length, 1 | 2], got {xs:?}")) };
    if !(1..=2).contains(&c_in) {
        return Err(format!("STFT signal must end in a dim of 1 or 2, got {xs:?}"));
    }
    let frame_step = positive(frame_step, "frame_step")?;
    let frame_length = match (frame_length, window) {
        (Some(l), _) => positive(l, "frame_length")?,
        (None, Some(w)) => positive(w as i64, "the window length")?,
        (None, None) => positive(len as i64, "the signal length")?,
    };
    if window.is_some_and(|w| w != frame_length) {
        return Err(format!("window has {} points but frame_length is {frame_length}", window.unwrap_or(0)));
    }
    if frame_length > len {
        return Err(format!("frame_length {frame_length} exceeds the signal length {len}"));
    }
    Ok(StftDims { batch, len, c_in, frame_step, frame_length, frames: 1 + (len - frame_length) / frame_step, onesided })
}

pub fn stft_shape(d: &StftDims) -> Vec<usize> {
    vec![d.batch, d.frames, d.bins(), 2]
}

pub fn window_coeffs(kind: WindowKind) -> [f64; 3] {
    match kind {
        WindowKind::Hann => spectral::HANN,
        WindowKind::Hamming => spectral::HAMMING,
        WindowKind::Blackman => spectral::BLACKMAN,
    }
}

/// MelWeightMatrix output shape [dft_length/2 + 1, num_mel_bins].
pub fn mel_shape(num_mel_bins: i64, dft_length: i64) -> Result<Vec<usize>, String> {
    Ok(vec![positive(dft_length, "dft_length")? / 2 + 1, positive(num_mel_bins, "num_mel_bins")?])
}

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    let t = match op {
        Op::Dft { inverse, onesided } => {
            let x = arg(args, 0)?;
            let len = opt_arg(args, 1)?.map(|t| scalar_int(t, "dft_length")).transpose()?;
            let axis = opt_arg(args, 2)?.map(|t| scalar_int(t, "axis")).transpose()?;
            let (d, shape) = dft_dims(&x.shape, len, axis, *inverse, *onesided)?;
            let mut tw = vec![0.0; 2 * d.n];
            let data = floats!(&x.data, v => {
                let mut y = vec![Default::default(); d.out_len()];
                spectral::dft(v, &d, &mut tw, &mut y);
                y
            }, "DFT");
            Tensor::new(shape, data)
        }
        Op::Stft { onesided } => {
            let x = arg(args, 0)?;
            let step = scalar_int(arg(args, 1)?, "frame_step")?;
            let window = opt_arg(args, 2)?;
            if let Some(w) = window {
                if w.rank() != 1 || w.dtype() != x.dtype() {
                    return Err(format!("window must be 1-D of the signal's type, got {:?} of {}", w.shape, w.dtype()));
                }
            }
            let fl = opt_arg(args, 3)?.map(|t| scalar_int(t, "frame_length")).transpose()?;
            let d = stft_dims(&x.shape, step, window.map(|w| w.numel()), fl, *onesided)?;
            let mut tw = vec![0.0; 2 * d.frame_length];
            macro_rules! go {
                ($($variant:ident),*) => {
                    match (&x.data, window.map(|w| &w.data)) {
                        $((Data::$variant(v), w) => {
                            let w = match w {
                                Some(Data::$variant(w)) => Some(&w[..]),
                                Some(_) => return Err("window type differs from the signal's".into()),
                                None => None,
                            };
                            let mut y = vec![Default::default(); d.out_len()];
                            spectral::stft(v, w, &d, &mut tw, &mut y);
                            Data::$variant(y)
                        })*
                        (d, _) => return Err(format!("STFT is not defined on {}", d.dtype())),
                    }
                };
            }
            Tensor::new(stft_shape(&d), go!(F32, F64, F16, BF16))
        }
        Op::Window { kind, periodic, dtype } => {
            let size = scalar_int(arg(args, 0)?, "size")?;
            let size = usize::try_from(size).map_err(|_| format!("size must be >= 0, got {size}"))?;
            let a = window_coeffs(*kind);
            typed(*dtype, vec![size], |y| match y {
                Out::F32(y) => spectral::cosine_window(a, *periodic, y),
                Out::F64(y) => spectral::cosine_window(a, *periodic, y),
                Out::F16(y) => spectral::cosine_window(a, *periodic, y),
                Out::BF16(y) => spectral::cosine_window(a, *periodic, y),
            })?
        }
        Op::MelWeightMatrix { dtype } => {
            let bins = scalar_int(arg(args, 0)?, "num_mel_bins")?;
            let dft_len = scalar_int(arg(args, 1)?, "dft_length")?;
            let rate = scalar_int(arg(args, 2)?, "sample_rate")?;
            let edge = |i: usize, what: &str| -> Result<f64, String> {
                match arg(args, i)?.to_f64_vec().as_slice() {
                    &[v] => Ok(v),
                    _ => Err(format!("{what} must be one value")),
                }
            };
            let (lo, hi) = (edge(3, "lower_edge_hertz")?, edge(4, "upper_edge_hertz")?);
            let shape = mel_shape(bins, dft_len)?;
            let (nb, dl) = (shape[1], positive(dft_len, "dft_length")?);
            let rate = positive(rate, "sample_rate")? as f64;
            let mut ok = true;
            let t = typed(*dtype, shape, |y| {
                ok = match y {
                    Out::F32(y) => spectral::mel_weight_matrix(nb, dl, rate, lo, hi, y),
                    Out::F64(y) => spectral::mel_weight_matrix(nb, dl, rate, lo, hi, y),
                    Out::F16(y) => spectral::mel_weight_matrix(nb, dl, rate, lo, hi, y),
                    Out::BF16(y) => spectral::mel_weight_matrix(nb, dl, rate, lo, hi, y),
                }
            })?;
            if !ok {
                return Err(format!("the mel filters of {lo}..{hi} Hz fall outside the {} spectrogram bins", dl / 2 + 1));
            }
            t
        }
        _ => return Err(format!("{} is not a signal op", op.name())),
    };
    Ok(vec![RtValue::Tensor(t)])
}

/// A typed output buffer for [`typed`].
pub enum Out<'a> {
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
    F16(&'a mut [half::f16]),
    BF16(&'a mut [half::bf16]),
}

/// Fill a tensor of `dtype` with `f`: in the float type itself (as generated code does), or in
/// f64 and cast for non-float types.
fn typed(dtype: DType, shape: Vec<usize>, mut f: impl FnMut(Out<'_>)) -> Result<Tensor, String> {
    let n: usize = shape.iter().product();
    let data = match dtype {
        DType::F32 => {
            let mut v = vec![0f32; n];
            f(Out::F32(&mut v));
            Data::F32(v)
        }
        DType::F16 => {
            let mut v = vec![half::f16::ZERO; n];
            f(Out::F16(&mut v));
            Data::F16(v)
        }
        DType::BF16 => {
            let mut v = vec![half::bf16::ZERO; n];
            f(Out::BF16(&mut v));
            Data::BF16(v)
        }
        _ => {
            let mut v = vec![0f64; n];
            f(Out::F64(&mut v));
            let t = Tensor::new(shape, Data::F64(v));
            return if dtype == DType::F64 { Ok(t) } else { super::cast::cast(&t, dtype, true) };
        }
    };
    Ok(Tensor::new(shape, data))
}
