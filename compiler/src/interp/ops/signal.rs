//! The Hann/Hamming/Blackman windows and MelWeightMatrix: geometry resolved here (shared with
//! inference and codegen), math in `burnc_runtime::kernels::spectral`.
use super::util::arg;
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{DType, Op, WindowKind};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::spectral;

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
