//! Shrink: elementwise, so one emitter serves fixed and bounded dims.
use crate::codegen::CodegenError;
use crate::ir::Op;

/// Shrink: elementwise, so one emitter serves fixed and bounded dims (sizes only reach it
/// through the views).
pub(crate) fn emit_shrink(cx: &crate::ops::EmitCx) -> Result<Option<String>, CodegenError> {
    let Op::Shrink { lambd, bias } = &cx.node().op else { return Err(cx.err("not a Shrink")) };
    let x = cx.input(0)?;
    let t = cx.elem(x)?;
    let (l, b) = (*lambd as f64, *bias as f64);
    if !l.is_finite() || !b.is_finite() {
        return Err(cx.err("non-finite Shrink parameters"));
    }
    // Through f64 and back, as the interpreter.
    let e = format!("<{t} as rt::Elem>::from_f64({{ let v = rt::Elem::to_f64(v); if v < -{l:?} {{ v + {b:?} }} else if v > {l:?} {{ v - {b:?} }} else {{ 0.0 }} }})");
    Ok(Some(format!("for (o, &v) in {}.iter_mut().zip({}) {{ *o = {e}; }}", cx.write(cx.output(0)?)?, cx.read(x)?)))
}
