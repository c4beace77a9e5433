//! BatchNormalization in training mode: a call of the runtime kernel the interpreter uses,
//! with every size resolved at compile time. (Instance-, Group- and MeanVarianceNormalization
//! are `ops::channel_norm`.)
use crate::codegen::emit::f64_lit;
use super::Ctx;
use crate::codegen::CodegenError;
use crate::ir::{DType, Node, Op};

pub fn emit(cx: &Ctx, n: &Node) -> Result<Option<String>, CodegenError> {
    let Op::BatchNormTraining { epsilon, momentum } = &n.op else { return Err(cx.err(n, "not a training BatchNormalization")) };
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let x = cx.input(n, 0)?;
    let (xd, xs) = cx.ty(n, x)?;
    if !matches!(xd, DType::F32 | DType::F64) {
        return Err(cx.err(n, format!("BatchNormalization on {xd} is not supported by codegen yet")));
    }
    let c = *xs.get(1).ok_or_else(|| cx.err(n, "BatchNormalization needs rank >= 2"))?;
    let dims = [xs[0], c, xs[2..].iter().product::<usize>()];
    let mut args = Vec::new();
    for i in 1..5 {
        let v = cx.input(n, i)?;
        let (d, s) = cx.ty(n, v)?;
        if d != xd || s.iter().product::<usize>() != c {
            return Err(cx.err(n, format!("input #{i} must be {c} values of {xd}")));
        }
        args.push(cx.read(n, v)?);
    }
    // Running statistics nobody reads have no slot: the kernel skips empty outputs.
    let stat = |i: usize| match n.outputs.get(i).filter(|o| cx.plan.slots.contains_key(o)) {
        Some(&o) => cx.write(n, o),
        None => Ok("&mut []".into()),
    };
    let (rm, rv) = (stat(1)?, stat(2)?);
    Ok(Some(format!(
        "rt::kernels::norm::batch_norm_train({}, {}, {dims:?}, {}, {}, {}, {}, {}, {}, {rm}, {rv});",
        cx.read(n, x)?,
        cx.write(n, out)?,
        args[0],
        args[1],
        args[2],
        args[3],
        f64_lit(*epsilon as f64),
        f64_lit(*momentum as f64)
    )))
}
