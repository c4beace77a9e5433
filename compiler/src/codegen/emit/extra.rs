//! Einsum, Det and BitCast: calls into the runtime kernels the interpreter uses, with the
//! geometry the interpreter resolves (from static shapes) written out.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::linalg::{det_size, einsum_plan};
use crate::ir::{DType, Graph, Node, NodeId, Op};
use burnc_runtime::kernels::einsum::{MAX_INPUTS, MAX_LABELS};

/// Det eliminates on an f64 copy of one matrix.
pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    let n = g.node(id);
    if !matches!(n.op, Op::Det) {
        return 0;
    }
    let shape = n.inputs.first().copied().flatten().and_then(|x| g.tensor_type(x)?.shape.as_ref()?.as_fixed());
    shape.and_then(|s| det_size(&s).ok()).map_or(0, |k| k * k * 8)
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let x = cx.input(n, 0)?;
    let (xd, xs) = cx.ty(n, x)?;
    let name = n.op.name();
    let float = xd.is_float() && !xd.is_small();
    let y = cx.write(n, out)?;
    match &n.op {
        Op::BitCast { to } => {
            let (od, _) = cx.ty(n, out)?;
            let plain = |d: DType| d != DType::Bool && !d.is_small();
            if od != *to || !plain(xd) || !plain(od) || xd.size() != od.size() {
                return Err(cx.err(n, format!("BitCast from {xd} to {to} is not supported by codegen yet")));
            }
            let t = cx.elem(n, out)?;
            // Same bytes, little-endian as the interpreter's packing.
            Ok(Some(format!("for (o, &v) in {y}.iter_mut().zip({}) {{ *o = <{t}>::from_le_bytes(v.to_le_bytes()); }}", cx.read(n, x)?)))
        }
        Op::Det if float => {
            let k = det_size(&xs).map_err(|e| cx.err(n, e))?;
            Ok(Some(format!(
                "rt::kernels::det::det_batch({}, {k}, {}, {y});",
                cx.read(n, x)?,
                cx.scratch(n, id, "f64", k * k)?
            )))
        }
        Op::Einsum { equation } => {
            if xd == DType::Bool || xd.is_small() {
                return Err(cx.err(n, format!("Einsum on {xd} is not supported by codegen yet")));
            }
            let mut shapes = Vec::new();
            let mut reads = Vec::new();
            for v in n.inputs.iter() {
                let v = v.ok_or_else(|| cx.err(n, "missing input"))?;
                let (d, s) = cx.ty(n, v)?;
                if d != xd {
                    return Err(cx.err(n, "Einsum inputs must share a type"));
                }
                shapes.push(s);
                reads.push(cx.read(n, v)?);
            }
            let refs: Vec<&[usize]> = shapes.iter().map(|s| &s[..]).collect();
            let p = einsum_plan(equation, &refs).map_err(|e| cx.err(n, e))?;
            if p.dims.len() > MAX_LABELS || reads.len() > MAX_INPUTS {
                return Err(cx.err(n, "Einsum with more labels or inputs than the kernel handles"));
            }
            // The kernel's only error is those limits, checked above.
            Ok(Some(format!(
                "let _ = rt::kernels::einsum::einsum(&[{}], &{:?}, &{:?}, {}, {y});",
                reads.join(", "),
                p.strides,
                p.dims,
                p.out_shape.len()
            )))
        }
        _ => Err(cx.err(n, format!("{name} on {xd} is not supported by codegen yet"))),
    }
}
