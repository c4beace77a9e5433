//! Data movement: reshapes (free aliases in the arena, or a copy when the source is a graph
//! input or weight), Concat and Transpose.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::ir::{Node, NodeId, Op};

pub fn emit(cx: &Ctx, _id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let (_, oshape) = cx.ty(n, out)?;
    match &n.op {
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            if cx.plan.aliases.contains_key(&out) {
                return Ok(None);
            }
            Ok(Some(format!("{}.copy_from_slice({});", cx.write(n, out)?, cx.read(n, cx.input(n, 0)?)?)))
        }
        Op::Concat { axis } => {
            let r = oshape.len() as i64;
            let ax = if *axis < 0 { axis + r } else { *axis };
            if ax < 0 || ax >= r {
                return Err(cx.err(n, format!("axis {axis} out of range")));
            }
            let ax = ax as usize;
            let outer: usize = oshape[..ax].iter().product();
            let mut s = format!("let y = {};\n", cx.write(n, out)?);
            // Each input contributes a chunk of `chunk` elements per outer index.
            let mut start = 0usize;
            let row: usize = oshape[ax..].iter().product();
            for v in n.inputs.iter().flatten() {
                let (_, shape) = cx.ty(n, *v)?;
                let chunk: usize = shape[ax..].iter().product();
                if chunk > 0 {
                    s += &format!(
                        "{{ let x = {}; for o in 0..{outer} {{ y[o * {row} + {start}..o * {row} + {}].copy_from_slice(&x[o * {chunk}..(o + 1) * {chunk}]); }} }}\n",
                        cx.read(n, *v)?,
                        start + chunk
                    );
                }
                start += chunk;
            }
            Ok(Some(s))
        }
        Op::Transpose { perm } => {
            let x = cx.input(n, 0)?;
            let (_, xs) = cx.ty(n, x)?;
            let perm = perm.clone().unwrap_or_else(|| (0..xs.len()).rev().collect());
            if xs.len() > 16 {
                return Err(cx.err(n, "rank above 16"));
            }
            Ok(Some(format!(
                "rt::kernels::permute::permute({}, &{xs:?}, &{perm:?}, {});",
                cx.read(n, x)?,
                cx.write(n, out)?
            )))
        }
        _ => Err(cx.err(n, "not a data-movement op")),
    }
}
