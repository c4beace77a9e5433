//! MaxUnpool: the runtime's unpool kernel with the geometry the interpreter resolves
//! (`interp::ops::unpool`), from a constant output shape.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::unpool::max_unpool_shapes;
use crate::ir::{Node, Op};

pub fn emit(cx: &Ctx, n: &Node) -> Result<Option<String>, CodegenError> {
    let x = cx.input(n, 0)?;
    let (_, xs) = cx.ty(n, x)?;
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let konst = |i: usize, what: &str| -> Result<Option<Vec<i64>>, CodegenError> {
        match n.inputs.get(i).copied().flatten() {
            None => Ok(None),
            Some(v) => cx
                .konst(v)
                .and_then(|t| t.to_i64_vec())
                .map(Some)
                .ok_or_else(|| cx.err(n, format!("{what} must be a constant (pin it with --const)"))),
        }
    };
    let (rx, y) = (cx.read(n, x)?, cx.write(n, out)?);
    match &n.op {
        Op::MaxUnpool { .. } => {
            let (inferred, shape) = max_unpool_shapes(&n.op, &xs, konst(2, "output_shape")?.as_deref()).map_err(|e| cx.err(n, e))?;
            let idx = cx.input(n, 1)?;
            if cx.elem(n, idx)? != "i64" {
                return Err(cx.err(n, "I must be int64"));
            }
            Ok(Some(format!("rt::kernels::unpool::max_unpool({rx}, {}, &{inferred:?}, &{shape:?}, {y});", cx.read(n, idx)?)))
        }
        _ => Err(cx.err(n, "not an unpool op")),
    }
}
