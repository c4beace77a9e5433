//! Einsum: a call into the runtime kernels the interpreter uses, with the
//! geometry the interpreter resolves (from static shapes) written out.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::linalg::einsum_plan;
use crate::ir::{DType, Node, NodeId, Op};
use burnc_runtime::kernels::einsum::{MAX_INPUTS, MAX_LABELS};

pub fn emit(cx: &Ctx, _id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let x = cx.input(n, 0)?;
    let xd = cx.ty(n, x)?.0;
    let name = n.op.name();
    let y = cx.write(n, out)?;
    match &n.op {
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
