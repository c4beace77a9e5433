//! BatchNormalization in training mode: a call of the runtime kernel the interpreter uses,
//! with sizes through [`EmitCx`] (literals for fixed shapes, run-time sizes for bounded dims).
//! (Instance-, Group- and MeanVarianceNormalization are `ops::channel_norm`.)
use crate::codegen::emit::f64_lit;
use crate::codegen::CodegenError;
use crate::ir::{DType, Op};
use crate::ops::{product, EmitCx};

pub fn emit(cx: &EmitCx) -> Result<Option<String>, CodegenError> {
    let Op::BatchNormTraining { epsilon, momentum } = &cx.node().op else { return Err(cx.err("not a training BatchNormalization")) };
    let x = cx.input(0)?;
    let (xd, xs) = (cx.dtype(x)?, cx.dims(x)?);
    if !matches!(xd, DType::F32 | DType::F64) {
        return Err(cx.err(format!("BatchNormalization on {xd} is not supported by codegen yet")));
    }
    let c = xs.get(1).ok_or_else(|| cx.err("BatchNormalization needs rank >= 2"))?;
    let dims = format!("[{}, {}, {}]", cx.size(&xs[0])?, cx.size(c)?, cx.size(&product(&xs[2..]))?);
    let mut args = Vec::new();
    for i in 1..5 {
        let v = cx.input(i)?;
        // Bounded sizes are checked at run time (the shape rule's constraints); fixed ones here.
        let len = product(&cx.dims(v)?);
        if cx.dtype(v)? != xd || matches!((len.as_const(), c.as_const()), (Some(a), Some(b)) if a != b) {
            return Err(cx.err(format!("input #{i} must be one {xd} per channel")));
        }
        args.push(cx.read(v)?);
    }
    // Running statistics nobody reads have no slot: the kernel skips empty outputs.
    let stat = |k: usize| cx.used_output(k).map_or_else(|| Ok("&mut []".to_string()), |o| cx.write(o));
    let (rm, rv) = (stat(1)?, stat(2)?);
    Ok(Some(format!(
        "rt::kernels::norm::batch_norm_train({}, {}, {dims}, {}, {}, {}, {}, {}, {}, {rm}, {rv});",
        cx.read(x)?,
        cx.write(cx.output(0)?)?,
        args[0],
        args[1],
        args[2],
        args[3],
        f64_lit(*epsilon as f64),
        f64_lit(*momentum as f64)
    )))
}
