//! CausalConvWithState and LinearAttention: calls into the runtime kernels the interpreter
//! uses, with the sizes it resolves (`interp::ops::recurrent`) written out as literals.
use super::elementwise::f32_lit;
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::recurrent as rec;
use crate::ir::{Graph, Node, NodeId, Op, ValueId};

fn fixed_shape(g: &Graph, n: &Node, i: usize) -> Option<Vec<usize>> {
    g.tensor_type(n.inputs.get(i).copied().flatten()?)?.shape.as_ref()?.as_fixed()
}

fn linear_attention_dims(g: &Graph, n: &Node) -> Option<burnc_runtime::kernels::linear_attention::Dims> {
    let Op::LinearAttention(a) = &n.op else { return None };
    let sh = |i| fixed_shape(g, n, i);
    rec::linear_attention_dims(a, &sh(0)?, &sh(1)?, &sh(2)?, sh(4).as_deref(), sh(5).as_deref()).ok()
}

pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    linear_attention_dims(g, g.node(id)).map_or(0, |d| burnc_runtime::kernels::linear_attention::scratch_len(&d) * 4)
}

/// `Some(expr)` for an optional input, else `None`.
fn opt_read(cx: &Ctx, n: &Node, i: usize) -> Result<String, CodegenError> {
    Ok(match n.inputs.get(i).copied().flatten() {
        Some(v) => format!("Some({})", cx.read(n, v)?),
        None => "None".into(),
    })
}

/// `Some(expr)` for output `i` when it has an arena slot (it is used), else `None`.
fn opt_write(cx: &Ctx, n: &Node, i: usize) -> Result<String, CodegenError> {
    let v: Option<ValueId> = n.outputs.get(i).copied().filter(|v| cx.plan.slots.contains_key(v));
    Ok(match v {
        Some(v) => format!("Some({})", cx.write(n, v)?),
        None => "None".into(),
    })
}

/// Every present input of `n` in `idx` has the dtype of input 0.
fn same_dtype(cx: &Ctx, n: &Node, idx: &[usize]) -> Result<(), CodegenError> {
    let d0 = cx.ty(n, cx.input(n, 0)?)?.0;
    for &i in idx {
        if let Some(v) = n.inputs.get(i).copied().flatten() {
            if cx.ty(n, v)?.0 != d0 {
                return Err(cx.err(n, format!("input {i} has another type than input 0")));
            }
        }
    }
    Ok(())
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let x = cx.input(n, 0)?;
    let (xd, _) = cx.ty(n, x)?;
    if !xd.is_float() || cx.elem(n, x).is_err() {
        return Err(cx.err(n, format!("{} on {xd} is not supported", n.op.name())));
    }
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let (rx, y) = (cx.read(n, x)?, cx.write(n, out)?);
    match &n.op {
        Op::CausalConv { silu } => {
            same_dtype(cx, n, &[1, 2, 3])?;
            let sh = |i| fixed_shape(cx.g, n, i);
            let xs = sh(0).ok_or_else(|| cx.err(n, "input shape is not static"))?;
            let ws = sh(1).ok_or_else(|| cx.err(n, "weight shape is not static"))?;
            let d = rec::causal_conv_dims(&xs, &ws, sh(2).as_deref(), sh(3).as_deref()).map_err(|e| cx.err(n, e))?;
            Ok(Some(format!(
                "let d = rt::kernels::causal_conv::Dims {{ batch: {}, channels: {}, len: {}, k: {} }};\n\
                 let inp = rt::kernels::causal_conv::Inputs {{ x: {rx}, w: {}, bias: {}, past: {} }};\n\
                 rt::kernels::causal_conv::causal_conv(&d, &inp, {silu}, {y}, {});",
                d.batch,
                d.channels,
                d.len,
                d.k,
                cx.read(n, cx.input(n, 1)?)?,
                opt_read(cx, n, 2)?,
                opt_read(cx, n, 3)?,
                opt_write(cx, n, 1)?,
            )))
        }
        Op::LinearAttention(a) => {
            same_dtype(cx, n, &[1, 2, 4, 5])?;
            let d = linear_attention_dims(cx.g, n).ok_or_else(|| cx.err(n, "shapes are not static or do not fit"))?;
            let p = rec::linear_attention_params(a, &d);
            Ok(Some(format!(
                "let d = rt::kernels::linear_attention::Dims {{ batch: {}, seq: {}, q_heads: {}, kv_heads: {}, dk: {}, dv: {}, decay_per_key: {}, beta_per_head: {} }};\n\
                 let p = rt::kernels::linear_attention::Params {{ gated: {}, delta: {}, scale: {} }};\n\
                 let inp = rt::kernels::linear_attention::Inputs {{ q: {rx}, k: {}, v: {}, past: {}, decay: {}, beta: {} }};\n\
                 rt::kernels::linear_attention::linear_attention(&d, &p, &inp, {y}, {}, {});",
                d.batch,
                d.seq,
                d.q_heads,
                d.kv_heads,
                d.dk,
                d.dv,
                d.decay_per_key,
                d.beta_per_head,
                p.gated,
                p.delta,
                f32_lit(p.scale),
                cx.read(n, cx.input(n, 1)?)?,
                cx.read(n, cx.input(n, 2)?)?,
                opt_read(cx, n, 3)?,
                opt_read(cx, n, 4)?,
                opt_read(cx, n, 5)?,
                opt_write(cx, n, 1)?,
                cx.scratch(n, id, "f32", burnc_runtime::kernels::linear_attention::scratch_len(&d))?
            )))
        }
        _ => Err(cx.err(n, "not a recurrent op")),
    }
}
