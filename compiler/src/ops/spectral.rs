//! DFT `(x, dft_length?, axis?)` and STFT `(signal, frame_step, window?, frame_length?)` in
//! ONNX's layout: real and imaginary parts in a trailing dim of 2 (1 for a real signal). The
//! lengths, step and axis decide the output's shape, so they are constants or shape values.
//! One runtime kernel each (`kernels::spectral`), which takes the geometry at run time and
//! needs no scratch. The windows (Hann, Hamming, Blackman) and MelWeightMatrix that go with
//! them: their sizes decide their shapes; generated code computes the values with the
//! interpreter's kernels.
use super::{input, product, Arg, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::spectral::{self, DftDims, StftDims};

/// Input 0, which the kernels take in f32, f64, f16 or bf16.
fn float_x(cx: &ShapeCx, op: &str) -> R<Arg> {
    let x = cx.arg(0)?.clone();
    if !matches!(x.dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        return Err(format!("{op} is not defined on {}", x.dtype));
    }
    Ok(x)
}

/// Input `i`, a scalar integer, as a dim expression (`None`: absent or not known).
fn scalar(cx: &ShapeCx, i: usize, what: &str) -> R<Option<DimExpr>> {
    match cx.ints(i).as_deref() {
        None => Ok(None),
        Some([v]) => Ok(Some(v.clone())),
        Some(v) => Err(format!("{what} must be one integer, got {} values", v.len())),
    }
}

/// `d >= 1`: a constant that is not is an error, others a check.
fn positive(cx: &mut ShapeCx, what: &str, d: &DimExpr) -> R<()> {
    cx.at_most(&format!("1 and {what}"), &DimExpr::constant(1), d)
}

/// The trailing real/imaginary dim, 1 or 2.
fn channels(cx: &mut ShapeCx, op: &str, c: &DimExpr) -> R<()> {
    match c.as_const() {
        Some(1 | 2) => Ok(()),
        Some(c) => Err(format!("{op} input must end in a dim of 1 or 2, got {c}")),
        // A named dim is a complex signal's (a real one's is the constant 1).
        None => cx.equal("the real/imaginary dim and 2", c, &DimExpr::constant(2)),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dft {
    pub inverse: bool,
    /// Forward: keep bins 0..=n/2. Inverse: the input holds bins 0..=n/2 of a real signal.
    pub onesided: bool,
}

/// [`DftDims`] over dim expressions, and the output dims.
struct DftGeom {
    outer: DimExpr,
    inner: DimExpr,
    len_in: DimExpr,
    c_in: DimExpr,
    n: DimExpr,
    out: Vec<DimExpr>,
}

kernel_dims!(DftGeom => DftDims, "rt::kernels::spectral::DftDims" (inverse: bool, onesided: bool) {
    outer: dim outer, inner: dim inner, len_in: dim len_in, c_in: dim c_in, n: dim n, inverse: arg inverse, onesided: arg onesided,
});

impl Dft {
    /// `None` while the rank, dft_length or axis is not known.
    fn geometry(&self, cx: &mut ShapeCx) -> R<Option<DftGeom>> {
        let x = float_x(cx, "DFT")?;
        let Some(xs) = x.dims else { return Ok(None) };
        let rank = xs.len();
        if rank < 2 {
            return Err("DFT needs an input of rank >= 2".into());
        }
        let c_in = xs[rank - 1].clone();
        channels(cx, "DFT", &c_in)?;
        let axis = match (cx.opt(2).is_some(), scalar(cx, 2, "axis")?) {
            (false, _) => -2,
            (true, Some(a)) => a.as_const().ok_or("DFT's axis must be a constant")?,
            (true, None) => return Ok(None),
        };
        let ax = norm_axis(axis, rank)?;
        if ax == rank - 1 {
            return Err("DFT axis cannot be the last (real/imaginary) dim".into());
        }
        let len_in = xs[ax].clone();
        let n = match (cx.opt(1).is_some(), scalar(cx, 1, "dft_length")?) {
            (true, Some(l)) => l,
            (true, None) => return Ok(None),
            (false, _) if self.inverse && self.onesided => len_in.scale(2).sub(&DimExpr::constant(2)),
            (false, _) => len_in.clone(),
        };
        positive(cx, "the DFT length", &n)?;
        let mut out = xs.clone();
        out[ax] = if self.onesided && !self.inverse { n.floor_div(2).add(&DimExpr::constant(1)) } else { n.clone() };
        out[rank - 1] = DimExpr::constant(if self.onesided && self.inverse { 1 } else { 2 });
        Ok(Some(DftGeom { outer: product(&xs[..ax]), inner: product(&xs[ax + 1..rank - 1]), len_in, c_in, n, out }))
    }
}

impl OpDef for Dft {
    name!("DFT");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        let dims = self.geometry(cx)?.map(|g| g.out);
        Ok(vec![OutType { dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let g = self.geometry(&mut ShapeCx::of_tensors(ins))?.ok_or("DFT's dft_length and axis must be known")?;
        let d = g.fixed_dims(self.inverse, self.onesided)?;
        let shape = g.out.iter().map(super::fixed_size).collect::<R<Vec<_>>>()?;
        macro_rules! go {
            ($($variant:ident),*) => {
                match &x.data {
                    $(Data::$variant(v) => {
                        let mut y = vec![Default::default(); d.out_len()];
                        spectral::dft(v, &d, &mut y);
                        Data::$variant(y)
                    })*
                    d => return Err(format!("DFT is not defined on {}", d.dtype())),
                }
            };
        }
        Ok(vec![Tensor::new(shape, go!(F32, F64, F16, BF16))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let g = self.geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("DFT needs constant dft_length and axis for codegen"))?;
        Ok(format!(
            "rt::kernels::spectral::dft({}, &{}, {});",
            cx.read(cx.input(0)?)?,
            g.dims_lit(cx, self.inverse, self.onesided)?,
            cx.write(cx.output(0)?)?
        ))
    }

    // A complex multiply-add per output bin and input sample (about: the axis is not known here).
    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        let x = ins.first()?.as_ref()?;
        let len = *x.get(x.len().checked_sub(2)?)? as u64;
        Some(super::numel(outs.first()?)?.saturating_mul(8).saturating_mul(len))
    }

    shape_inputs!(1 | 2);
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stft {
    /// Keep bins 0..=frame_length/2.
    pub onesided: bool,
}

/// [`StftDims`] over dim expressions (`len` the signal's).
struct StftGeom {
    batch: DimExpr,
    len: DimExpr,
    c_in: DimExpr,
    step: DimExpr,
    frame_length: DimExpr,
    frames: DimExpr,
    bins: DimExpr,
}

kernel_dims!(StftGeom => StftDims, "rt::kernels::spectral::StftDims" (onesided: bool) {
    batch: dim batch, len: dim len, c_in: dim c_in, frame_step: dim step, frame_length: dim frame_length, frames: dim frames, onesided: arg onesided,
});

impl Stft {
    /// `None` while the signal's dims, frame_step or frame_length is not known.
    fn geometry(&self, cx: &mut ShapeCx) -> R<Option<StftGeom>> {
        let x = float_x(cx, "STFT")?;
        let window = cx.opt(2).cloned();
        if let Some(w) = &window {
            if w.dtype != x.dtype || w.dims.as_ref().is_some_and(|d| d.len() != 1) {
                return Err(format!("STFT's window must be 1-D of the signal's type, got {}", w.dtype));
            }
        }
        let Some(xs) = x.dims else { return Ok(None) };
        let [batch, len, c_in] = xs.as_slice() else { return Err(format!("STFT signal must be [batch, length, 1 | 2], got rank {}", xs.len())) };
        channels(cx, "STFT", c_in)?;
        let Some(step) = scalar(cx, 1, "frame_step")? else { return Ok(None) };
        positive(cx, "frame_step", &step)?;
        let wlen = window.as_ref().and_then(|w| w.dims.as_ref().map(|d| d[0].clone()));
        let frame_length = match (cx.opt(3).is_some(), scalar(cx, 3, "frame_length")?, &wlen) {
            (true, Some(l), _) => l,
            (true, None, _) => return Ok(None),
            (false, _, Some(w)) => w.clone(),
            (false, _, None) if window.is_some() => return Ok(None),
            (false, _, None) => len.clone(),
        };
        positive(cx, "frame_length", &frame_length)?;
        if let Some(w) = &wlen {
            cx.equal("the window's length and frame_length", w, &frame_length)?;
        }
        cx.at_most("frame_length and the signal length", &frame_length, len)?;
        let rest = len.sub(&frame_length);
        let frames = match step.as_const() {
            Some(s) => rest.floor_div(s),
            None => rest.div_floor(&step).ok_or("STFT's frame_step must be a constant when the frame count is not")?,
        }
        .add(&DimExpr::constant(1));
        let bins = if self.onesided { frame_length.floor_div(2).add(&DimExpr::constant(1)) } else { frame_length.clone() };
        Ok(Some(StftGeom { batch: batch.clone(), len: len.clone(), c_in: c_in.clone(), step, frame_length, frames, bins }))
    }
}

impl OpDef for Stft {
    name!("STFT");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        let dims = self.geometry(cx)?.map(|g| vec![g.batch, g.frames, g.bins, DimExpr::constant(2)]);
        Ok(vec![OutType { dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let window = ins.get(2).copied().flatten();
        let g = self.geometry(&mut ShapeCx::of_tensors(ins))?.ok_or("STFT's frame_step and frame_length must be known")?;
        let d = g.fixed_dims(self.onesided)?;
        macro_rules! go {
            ($($variant:ident),*) => {
                match (&x.data, window.map(|w| &w.data)) {
                    $((Data::$variant(v), w) => {
                        let w = match w {
                            Some(Data::$variant(w)) => Some(&w[..]),
                            Some(_) => return Err("STFT's window type differs from the signal's".into()),
                            None => None,
                        };
                        let mut y = vec![Default::default(); d.out_len()];
                        spectral::stft(v, w, &d, &mut y);
                        Data::$variant(y)
                    })*
                    (d, _) => return Err(format!("STFT is not defined on {}", d.dtype())),
                }
            };
        }
        Ok(vec![Tensor::new(vec![d.batch, d.frames, d.bins(), 2], go!(F32, F64, F16, BF16))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let g = self.geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("STFT needs constant frame_step and frame_length for codegen"))?;
        let w = match cx.opt_input(2) {
            Some(w) => format!("Some({})", cx.read(w)?),
            None => "None".into(),
        };
        Ok(format!(
            "rt::kernels::spectral::stft({}, {w}, &{}, {});",
            cx.read(cx.input(0)?)?,
            g.dims_lit(cx, self.onesided)?,
            cx.write(cx.output(0)?)?
        ))
    }

    // A complex multiply-add per output bin and frame sample (about: frame_length is not known
    // here, the signal length bounds it).
    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        let len = *ins.first()?.as_ref()?.get(1)? as u64;
        Some(super::numel(outs.first()?)?.saturating_mul(8).saturating_mul(len))
    }

    shape_inputs!(1 | 3);
}

/// Which cosine window (ONNX HannWindow, HammingWindow, BlackmanWindow): `a0 − a1·cos(2πn/N) +
/// a2·cos(4πn/N)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowKind {
    Hann,
    Hamming,
    Blackman,
}

impl WindowKind {
    fn coeffs(self) -> [f64; 3] {
        match self {
            WindowKind::Hann => spectral::HANN,
            WindowKind::Hamming => spectral::HAMMING,
            WindowKind::Blackman => spectral::BLACKMAN,
        }
    }
}

/// A scalar (or one-element) integer operand of an evaluation.
fn scalar_int(t: &Tensor, what: &str) -> R<i64> {
    match t.to_i64_vec().as_deref() {
        Some(&[v]) if t.dtype().is_int() => Ok(v),
        _ => Err(format!("{what} must be one integer, got {:?} of {}", t.shape, t.dtype())),
    }
}

/// A count that must be at least 1.
fn count(v: i64, what: &str) -> R<usize> {
    usize::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| format!("{what} must be positive, got {v}"))
}

/// An output buffer of one of the float types the kernels write.
enum Out<'a> {
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
    F16(&'a mut [half::f16]),
    BF16(&'a mut [half::bf16]),
}

/// A tensor of `dtype` filled by `f`: in the float type itself (as generated code does), or in
/// f64 and cast for other types.
fn typed(dtype: DType, shape: Vec<usize>, mut f: impl FnMut(Out<'_>)) -> R<Tensor> {
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
            return if dtype == DType::F64 { Ok(t) } else { crate::interp::ops::cast::cast(&t, dtype, true) };
        }
    };
    Ok(Tensor::new(shape, data))
}

/// The output of a generated window or filter bank: a float type (the kernels' `Elem`s).
fn float_out(cx: &EmitCx) -> Result<String, CodegenError> {
    let y = cx.output(0)?;
    let d = cx.dtype(y)?;
    if !matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        return Err(cx.err(format!("output type {d} is not supported by codegen")));
    }
    cx.write(y)
}

/// HannWindow, HammingWindow, BlackmanWindow `(size)`: the window of `size` values of `dtype`,
/// periodic (of length size + 1, the last left out) or symmetric. The size decides the shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CosineWindow {
    pub kind: WindowKind,
    pub periodic: bool,
    pub dtype: DType,
}

impl OpDef for CosineWindow {
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    fn name(&self) -> &'static str {
        match self.kind {
            WindowKind::Hann => "HannWindow",
            WindowKind::Hamming => "HammingWindow",
            WindowKind::Blackman => "BlackmanWindow",
        }
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let len = match cx.opt(0).and_then(|a| a.value.as_ref()).and_then(|t| t.to_i64_vec()).and_then(|v| v.first().copied()) {
            Some(n) => DimExpr::constant(n.max(0)),
            None => cx.unknown(),
        };
        Ok(vec![OutType { dtype: self.dtype, dims: Some(vec![len]) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let size = scalar_int(input(ins, 0)?, "size")?;
        let size = usize::try_from(size).map_err(|_| format!("size must be >= 0, got {size}"))?;
        let (a, periodic) = (self.kind.coeffs(), self.periodic);
        Ok(vec![typed(self.dtype, vec![size], |y| match y {
            Out::F32(y) => spectral::cosine_window(a, periodic, y),
            Out::F64(y) => spectral::cosine_window(a, periodic, y),
            Out::F16(y) => spectral::cosine_window(a, periodic, y),
            Out::BF16(y) => spectral::cosine_window(a, periodic, y),
        })?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let y = float_out(cx)?;
        let [a0, a1, a2] = self.kind.coeffs();
        Ok(format!("rt::kernels::spectral::cosine_window([{a0:?}_f64, {a1:?}_f64, {a2:?}_f64], {}, {y});", self.periodic))
    }

    // About four operations per value (two cosines, their weighting).
    flops!(per_output 4);

    shape_inputs!(0);
}

/// MelWeightMatrix `(num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
/// upper_edge_hertz)`: the `[dft_length/2 + 1, num_mel_bins]` triangular filter bank of `dtype`.
/// The bin count and DFT length decide the shape; the rate and edges are read when it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MelWeightMatrix {
    pub dtype: DType,
}

/// The filter bank's shape `[dft_length/2 + 1, num_mel_bins]`.
fn mel_shape(num_mel_bins: i64, dft_length: i64) -> R<Vec<usize>> {
    Ok(vec![count(dft_length, "dft_length")? / 2 + 1, count(num_mel_bins, "num_mel_bins")?])
}

impl OpDef for MelWeightMatrix {
    name!("MelWeightMatrix");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let value = |i: usize| cx.opt(i).and_then(|a| a.value.as_ref()).and_then(|t| t.to_i64_vec()).and_then(|v| v.first().copied());
        let dims = match (value(0), value(1)) {
            (Some(bins), Some(len)) => mel_shape(bins, len)?.into_iter().map(|d| DimExpr::constant(d as i64)).collect(),
            _ => vec![cx.unknown(), cx.unknown()],
        };
        Ok(vec![OutType { dtype: self.dtype, dims: Some(dims) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let bins = scalar_int(input(ins, 0)?, "num_mel_bins")?;
        let dft_len = scalar_int(input(ins, 1)?, "dft_length")?;
        let rate = scalar_int(input(ins, 2)?, "sample_rate")?;
        let edge = |i: usize, what: &str| -> R<f64> {
            match input(ins, i)?.to_f64_vec().as_slice() {
                &[v] => Ok(v),
                _ => Err(format!("{what} must be one value")),
            }
        };
        let (lo, hi) = (edge(3, "lower_edge_hertz")?, edge(4, "upper_edge_hertz")?);
        let shape = mel_shape(bins, dft_len)?;
        let (nb, dl) = (shape[1], count(dft_len, "dft_length")?);
        let rate = count(rate, "sample_rate")? as f64;
        let mut ok = true;
        let t = typed(self.dtype, shape, |y| {
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
        Ok(vec![t])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let y = float_out(cx)?;
        let out = cx.output(0)?;
        let (rows, bins) = match cx.dims(out)?.as_slice() {
            [r, b] => (r.as_const(), cx.size(b)?),
            _ => return Err(cx.err("output must be 2-D")),
        };
        let dft_len = match cx.const_ints(1).and_then(|v| v.first().copied()) {
            Some(v) if v > 0 && Some(v / 2 + 1) == rows => v,
            _ => return Err(cx.err("dft_length must be a constant matching the output shape")),
        };
        // sample_rate and the edges may be run-time values: one element each.
        let scalar = |i: usize| -> Result<String, CodegenError> { Ok(format!("rt::Elem::to_f64(({})[0])", cx.read_input(i)?)) };
        Ok(format!("let _ = rt::kernels::spectral::mel_weight_matrix({bins}, {dft_len}, {}, {}, {}, {y});", scalar(2)?, scalar(3)?, scalar(4)?))
    }

    // About four operations per weight.
    flops!(per_output 4);

    shape_inputs!(0..=1);
}

pub fn examples() -> Vec<super::Example> {
    let sig = |shape: Vec<usize>| {
        let n = shape.iter().product::<usize>();
        Tensor::from_f32s(shape, (0..n).map(|i| ((i * 7) % 5) as f32 - 1.5).collect())
    };
    let int = |v: i64| Tensor::from_i64s(vec![], vec![v]);
    let dft = |inverse, onesided| OpRef::new(Dft { inverse, onesided });
    let window = Tensor::from_f32s(vec![4], vec![0.0, 0.5, 1.0, 0.5]);
    let window3 = Tensor::from_f32s(vec![3], vec![0.5, 1.0, 0.25]);
    vec![
        super::Example { consts: vec![1, 2], op: dft(false, false), inputs: vec![sig(vec![2, 5, 1]), int(5), int(1)] },
        super::Example { consts: vec![1, 2], op: dft(false, true), inputs: vec![sig(vec![3, 6, 2]), int(6), int(-2)] },
        super::Example { consts: vec![1, 2], op: dft(true, false), inputs: vec![sig(vec![4, 3, 2]), int(5), int(0)] },
        super::Example { consts: vec![1, 2], op: dft(true, true), inputs: vec![sig(vec![2, 4, 2]), int(6), int(1)] },
        super::Example { consts: vec![1, 2], op: OpRef::new(Stft { onesided: true }), inputs: vec![sig(vec![2, 9, 1]), int(2), window] },
        super::Example { consts: vec![1, 2, 3], op: OpRef::new(Stft { onesided: false }), inputs: vec![sig(vec![1, 7, 2]), int(3), window3, int(3)] },
        // Too long to fold: generated code computes them.
        super::Example { consts: vec![0], op: OpRef::new(CosineWindow { kind: WindowKind::Hann, periodic: true, dtype: DType::F32 }), inputs: vec![int(70_000)] },
        super::Example { consts: vec![0], op: OpRef::new(CosineWindow { kind: WindowKind::Blackman, periodic: false, dtype: DType::F64 }), inputs: vec![int(66_001)] },
        // The rate and edges are read when the model runs.
        super::Example {
            consts: vec![0, 1],
            op: OpRef::new(MelWeightMatrix { dtype: DType::F32 }),
            inputs: vec![int(40), int(4096), int(16_000), Tensor::from_f32s(vec![], vec![20.0]), Tensor::from_f32s(vec![], vec![7600.0])],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_refusals() {
        let x = Tensor::from_f32s(vec![1, 4, 1], vec![1.0, 2.0, 3.0, 4.0]);
        let int = |v: i64| Tensor::from_i64s(vec![], vec![v]);
        let y = Dft { inverse: false, onesided: true }.eval(&[Some(&x), None, None]).unwrap().remove(0);
        assert_eq!(y.shape, vec![1, 3, 2]);
        assert_eq!(y.to_f64_vec()[..4], [10.0, 0.0, -2.0, 2.0]);
        let op = Dft { inverse: false, onesided: false };
        assert!(op.eval(&[Some(&x), Some(&int(0)), None]).is_err());
        assert!(op.eval(&[Some(&x), None, Some(&int(2))]).is_err());
        assert!(op.eval(&[Some(&Tensor::from_f32s(vec![4, 3], vec![0.0; 12])), None, None]).is_err());
        let s = Stft { onesided: false };
        let y = s.eval(&[Some(&x), Some(&int(1)), None, Some(&int(2))]).unwrap().remove(0);
        assert_eq!(y.shape, vec![1, 3, 2, 2]);
        assert!(s.eval(&[Some(&x), Some(&int(0)), None, Some(&int(2))]).is_err());
        assert!(s.eval(&[Some(&x), Some(&int(1)), None, Some(&int(5))]).is_err());
        let w = Tensor::from_f32s(vec![3], vec![1.0; 3]);
        assert!(s.eval(&[Some(&x), Some(&int(1)), Some(&w), Some(&int(2))]).is_err());
    }
}
