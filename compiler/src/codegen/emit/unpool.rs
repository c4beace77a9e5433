//! Col2Im: the runtime's unpool kernel with the geometry the interpreter
//! resolves (`interp::ops::unpool`), from constant shape inputs.
use super::nn::window_lit;
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::unpool::col2im_geom;
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
        Op::Col2Im { .. } => {
            let image = konst(1, "image_shape")?.ok_or_else(|| cx.err(n, "missing image_shape"))?;
            let block = konst(2, "block_shape")?.ok_or_else(|| cx.err(n, "missing block_shape"))?;
            let (batch, ch, win, _) = col2im_geom(&n.op, &xs, &image, &block).map_err(|e| cx.err(n, e))?;
            Ok(Some(format!("rt::kernels::unpool::col2im_batch({rx}, {batch}, {ch}, &{}, {y});", window_lit(&win))))
        }
        _ => Err(cx.err(n, "not an unpool op")),
    }
}
