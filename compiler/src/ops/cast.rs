//! Cast and CastLike between every dtype (float8, float4 and 2/4-bit ints as raw bits): floats
//! through f64, ints through i64/u64, anything to bool as `!= 0`, float to int truncating and
//! saturating (docs/DECISIONS.md, "Float to integer casts"). The interpreter's conversion is
//! `interp::ops::cast::cast`; generated code writes the same rules per element.
use super::{input, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::rust_ty;
use crate::codegen::CodegenError;
use crate::float8::small_of;
use crate::interp::ops::cast::cast;
use crate::ir::{DType, Op, ValueId};
use crate::tensor::Tensor;

/// The IR node of a Cast to `to`.
pub fn op(to: DType, saturate: bool) -> Op {
    Op::Def(OpRef::new(Cast { to: Some(to), saturate }))
}

/// The IR node of a CastLike (to the dtype of its second input).
pub fn like(saturate: bool) -> Op {
    Op::Def(OpRef::new(Cast { to: None, saturate }))
}

/// Cast to `to`, or with `to` `None` CastLike: to the dtype of input 1, whose values are not
/// read. `saturate`: float8 targets clamp to their finite range (ONNX's attribute); other
/// targets ignore it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cast {
    pub to: Option<DType>,
    pub saturate: bool,
}

impl OpDef for Cast {
    none_of!(scratch_bytes, in_place, decides_shapes);

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let e = crate::codegen::wgsl::scalar::cast("x", x.dtype, y.dtype).ok_or_else(|| cx.err(format!("cast from {} to {} is not supported by the wgpu target yet", x.dtype, y.dtype)))?;
        Ok(vec![cx.pointwise(&y, |i| Ok((format!("let x = {};\n", x.load(i)), e.clone())))?])
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let ((xd, xs), to) = (cx.ty(x)?, cx.ty(y)?.0);
        let e = crate::codegen::cuda::scalar::cast(&format!("{}[i]", cx.ptr(x)?), xd, to).ok_or_else(|| cx.err(format!("cast from {xd} to {to} is not supported by the CUDA target yet")))?;
        Ok(vec![cx.pointwise(xs.iter().product(), &format!("{}[i] = {e};", cx.ptr(y)?))])
    }

    fn name(&self) -> &'static str {
        if self.to.is_some() {
            "Cast"
        } else {
            "CastLike"
        }
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = match self.to {
            Some(t) => t,
            None => cx.arg(1)?.dtype,
        };
        Ok(vec![OutType { dtype, dims: cx.arg(0)?.dims.clone() }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let to = match self.to {
            Some(t) => t,
            None => input(ins, 1)?.dtype(),
        };
        Ok(vec![cast(input(ins, 0)?, to, self.saturate)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let to = match self.to {
            Some(t) => t,
            None => cx.dtype(cx.input(1)?)?,
        };
        emit_cast(cx, to, self.saturate)
    }

    flops!(per_output 1);

    // Between float types the gradient is cast back; input 1 of CastLike needs none.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (x, dy) = (cx.input(0)?, cx.dy()?);
        let to = cx.b.dtype(x)?;
        let dx = if cx.b.dtype(dy)? == to { dy } else { cx.b.node(op(to, false), &[dy])? };
        Ok(vec![Some(dx), None])
    }

    // A shape cast to an integer type keeps its dims (Shape → Cast → Concat → Reshape);
    // CastLike's target is not known here, so it passes nothing (as before it moved).
    fn forwards_values(&self, _: &[Option<Vec<i64>>]) -> Option<usize> {
        self.to.map(|_| 0)
    }
}

/// BitCast to `to`: each element's bits reinterpreted as another type of the same width
/// (little-endian, as the interpreter packs them). The shape is kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BitCast {
    pub to: DType,
}

impl OpDef for BitCast {
    name!("BitCast");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        if x.dtype.bits() != self.to.bits() || x.dtype == DType::Str {
            return Err(format!("BitCast needs equal widths, {} has {} bits and {} {}", x.dtype, x.dtype.bits(), self.to, self.to.bits()));
        }
        Ok(vec![OutType { dtype: self.to, dims: x.dims.clone() }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        self.shapes(&mut ShapeCx::of_shapes([Some((x.dtype(), &x.shape[..]))]))?;
        let data = crate::tensor::Data::from_packed(self.to, &x.data.to_packed(), x.numel()).ok_or("cannot reinterpret the bytes")?;
        Ok(vec![Tensor::new(x.shape.clone(), data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let xd = cx.dtype(x)?;
        // Types whose elements are whole bytes of their own (not bool, not packed).
        let plain = |d: DType| d != DType::Bool && !d.is_small();
        if !plain(xd) || !plain(self.to) || xd.size() != self.to.size() {
            return Err(cx.err(format!("BitCast from {xd} to {} is not supported by codegen yet", self.to)));
        }
        Ok(format!("for (o, &v) in {}.iter_mut().zip({}) {{ *o = <{}>::from_le_bytes(v.to_le_bytes()); }}", cx.write(y)?, cx.read(x)?, cx.elem(y)?))
    }
}

/// A loop converting input 0 to `to` element by element, with the interpreter's rules.
fn emit_cast(cx: &EmitCx, to: DType, saturate: bool) -> Result<String, CodegenError> {
    let (x, out) = (cx.input(0)?, cx.output(0)?);
    let xd = cx.dtype(x)?;
    let xt = cx.elem(x)?;
    let tt = rust_ty(to).ok_or_else(|| cx.err(format!("cast to {to} is not supported by codegen yet")))?;
    // Small types (float8/float4/2-4 bit ints) are raw bits; the runtime's `small` module
    // converts them with the interpreter's rules.
    let decoded = |xs: burnc_runtime::small::Small| format!("rt::small::small_to_f64(rt::small::Small::{xs:?}, v)");
    let conv = if xd == to {
        "v".to_string()
    } else if to == DType::Str {
        // The text is made here and kept in the call's heap (`runtime::strings::*_text`).
        let text = match small_of(xd) {
            Some(xs) if xd.is_int() => format!("rt::strings::int_text(({}) as i64)", decoded(xs)),
            Some(xs) => format!("rt::strings::float_text({})", decoded(xs)),
            None if xd.is_float() => "rt::strings::float_text(rt::Elem::to_f64(v))".into(),
            None if xd == DType::U64 => "rt::strings::uint_text(v)".into(),
            None if xd == DType::Bool => "rt::strings::int_text(v as i64)".into(),
            None => "rt::strings::int_text(rt::Elem::to_i64(v))".into(),
        };
        format!("h.keep({text})")
    } else if xd == DType::Str {
        // Text that is not a number reads as NaN (0 for integer types): generated code does not
        // fail, where the interpreter reports it.
        if to.is_int() {
            let i = "rt::strings::parse_int(v.as_str()).map_or(0, |i| i as i64)";
            match small_of(to) {
                Some(ts) => format!("rt::small::small_from_i64(rt::small::Small::{ts:?}, {i})"),
                None => format!("<{tt} as rt::Elem>::from_i64({i})"),
            }
        } else {
            let f = "rt::strings::parse_float(v.as_str()).unwrap_or(f64::NAN)";
            match small_of(to) {
                Some(ts) => format!("rt::small::small_from_f64(rt::small::Small::{ts:?}, ({f}) as f32 as f64, {saturate})"),
                None if to == DType::Bool => format!("(({f}) != 0.0) as u8"),
                None => format!("<{tt} as rt::Elem>::from_f64({f})"),
            }
        }
    } else if let Some(ts) = small_of(to) {
        let src_int = xd.is_int() || xd == DType::Bool;
        if to.is_int() && src_int {
            let i = match small_of(xd) {
                Some(xs) => format!("({}) as i64", decoded(xs)),
                None => "rt::Elem::to_i64(v)".into(),
            };
            format!("rt::small::small_from_i64(rt::small::Small::{ts:?}, {i})")
        } else {
            let f = match small_of(xd) {
                Some(xs) => decoded(xs),
                None if xd.is_float() => "rt::Elem::to_f64(v)".into(),
                None => format!("(if v < <{xt} as rt::Elem>::zero() {{ rt::Elem::to_i64(v) as f64 }} else {{ rt::Elem::to_u64(v) as f64 }})"),
            };
            let f = if to.is_int() { f } else { format!("({f}) as f32 as f64") };
            format!("rt::small::small_from_f64(rt::small::Small::{ts:?}, {f}, {saturate})")
        }
    } else if let Some(xs) = small_of(xd) {
        if to == DType::Bool {
            format!("(({}) as f32 != 0.0) as u8", decoded(xs))
        } else {
            format!("<{tt} as rt::Elem>::from_f64(({}) as f32 as f64)", decoded(xs))
        }
    } else if to == DType::Bool {
        format!("(v != <{xt} as rt::Elem>::zero()) as u8")
    } else if xd.is_float() {
        format!("<{tt} as rt::Elem>::from_f64(rt::Elem::to_f64(v))")
    } else if to.is_float() {
        format!("if v < <{xt} as rt::Elem>::zero() {{ <{tt} as rt::Elem>::from_f64(rt::Elem::to_i64(v) as f64) }} else {{ <{tt} as rt::Elem>::from_f64(rt::Elem::to_u64(v) as f64) }}")
    } else {
        format!("<{tt} as rt::Elem>::from_i64(rt::Elem::to_i64(v))")
    };
    Ok(format!("for (o, &v) in {}.iter_mut().zip({}) {{ *o = {conv}; }}", cx.write(out)?, cx.read(x)?))
}

fn ramp(shape: &[usize], dtype: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 29) % 41) as f32 * 0.75 - 15.0).collect();
    cast(&Tensor::from_f32s(shape.to_vec(), v), dtype, true).unwrap_or_else(|_| Tensor::zeros(dtype, shape.to_vec()))
}

pub fn examples() -> Vec<super::Example> {
    let mut v = Vec::new();
    for (from, to) in [(DType::F32, DType::I32), (DType::F32, DType::F16), (DType::I64, DType::F32), (DType::F32, DType::Bool), (DType::F32, DType::U8)] {
        v.push(super::Example { consts: vec![], op: OpRef::new(Cast { to: Some(to), saturate: true }), inputs: vec![ramp(&[2, 3, 4], from)] });
    }
    v.push(super::Example { consts: vec![], op: OpRef::new(Cast { to: None, saturate: true }), inputs: vec![ramp(&[3, 5], DType::F32), ramp(&[1], DType::F64)] });
    // To and from strings.
    for from in [DType::F32, DType::I64, DType::Bool, DType::F16] {
        v.push(super::Example { consts: vec![], op: OpRef::new(Cast { to: Some(DType::Str), saturate: true }), inputs: vec![ramp(&[2, 3], from)] });
    }
    let text = |v: &[&str]| Tensor::new(vec![v.len()], crate::tensor::Data::Str(v.iter().map(|s| s.to_string()).collect()));
    for to in [DType::F32, DType::I32, DType::U8, DType::F64] {
        v.push(super::Example { consts: vec![], op: OpRef::new(Cast { to: Some(to), saturate: true }), inputs: vec![text(&[" 12", "-3", "+7", "0"])] });
    }
    v.push(super::Example { consts: vec![], op: OpRef::new(Cast { to: Some(DType::F32), saturate: true }), inputs: vec![text(&["1.5", "NaN", "-inf", "1e3"])] });
    for (from, to) in [(DType::F32, DType::I32), (DType::I64, DType::F64), (DType::F16, DType::U16)] {
        v.push(super::Example { consts: vec![], op: OpRef::new(BitCast { to }), inputs: vec![ramp(&[3, 4], from)] });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cast_shapes_and_values() {
        let x = Tensor::from_f32s(vec![2, 2], vec![-1.7, 0.0, 2.5, 300.0]);
        let y = Cast { to: Some(DType::I8), saturate: true }.eval(&[Some(&x)]).expect("eval");
        // Truncated toward zero, saturated.
        assert_eq!(y[0].to_i64_vec(), Some(vec![-1, 0, 2, 127]));
        let like = Tensor::from_i64s(vec![1], vec![0]);
        let z = Cast { to: None, saturate: true }.eval(&[Some(&x), Some(&like)]).expect("eval");
        assert_eq!((z[0].dtype(), z[0].to_i64_vec()), (DType::I64, Some(vec![-1, 0, 2, 300])));
    }

    /// onnxruntime's text (`%.8g`, NaN, INF) and its reading back.
    #[test]
    fn cast_to_and_from_strings() {
        use crate::tensor::Data;
        let x = Tensor::from_f32s(vec![8], vec![0.3, 123456789.0, 1e-5, -0.0, f32::NAN, f32::NEG_INFINITY, 1e20, 100000.0]);
        let y = Cast { to: Some(DType::Str), saturate: true }.eval(&[Some(&x)]).expect("eval");
        let want = ["0.30000001", "1.2345679e+08", "9.9999997e-06", "-0", "NaN", "-INF", "1e+20", "100000"];
        let Data::Str(got) = &y[0].data else { panic!("not strings") };
        assert_eq!(got[..], want[..]);
        let back = Cast { to: Some(DType::F32), saturate: true }.eval(&[Some(&y[0])]).expect("eval");
        assert_eq!(back[0].to_f64_vec()[..2], [0.30000001192092896, 123456792.0]);
        let bad = Tensor::new(vec![1], Data::Str(vec!["abc".into()]));
        assert!(Cast { to: Some(DType::I32), saturate: true }.eval(&[Some(&bad)]).is_err());
    }
}
