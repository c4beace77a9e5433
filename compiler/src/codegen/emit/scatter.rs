//! ScatterElements / ScatterND with a reduction: the output starts as a copy of the data, then
//! the runtime's scatter kernel (the interpreter's) combines the updates in order, at offsets
//! the interpreter resolves from the constant indices and stores as a table.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::index::scatter_targets;
use crate::ir::{DType, Node, NodeId, Op, ScatterReduction};

pub fn emit(cx: &Ctx, _id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let (Op::ScatterElements { reduction, .. } | Op::ScatterNd { reduction }) = &n.op else {
        return Err(cx.err(n, "not a scatter"));
    };
    let mode = match reduction {
        ScatterReduction::None => "Replace",
        ScatterReduction::Add => "Add",
        ScatterReduction::Mul => "Mul",
        ScatterReduction::Max => "Max",
        ScatterReduction::Min => "Min",
    };
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let (data, ind, upd) = (cx.input(n, 0)?, cx.input(n, 1)?, cx.input(n, 2)?);
    let ((dd, ds), (ud, us)) = (cx.ty(n, data)?, cx.ty(n, upd)?);
    // Bools are 0/1 bytes here, where the interpreter's reductions are logical.
    if dd != ud || dd == DType::Bool || dd.is_small() {
        return Err(cx.err(n, format!("scatter with reduction on {dd} / {ud} is not supported by codegen")));
    }
    let Some(it) = cx.konst(ind) else { return runtime_1d(cx, n, mode).map(Some) };
    let (dst, chunk) = scatter_targets(&n.op, &ds, &it, &us).map_err(|e| cx.err(n, e))?;
    let table: Vec<u32> = dst.iter().map(|&d| u32::try_from(d)).collect::<Result<_, _>>().map_err(|_| cx.err(n, "data too large for an index table"))?;
    let (rx, y) = (cx.read(n, data)?, cx.write(n, out)?);
    let mut s = format!("let y = {y};\ny.copy_from_slice({rx});\n");
    if !table.is_empty() {
        let (ru, tab) = (cx.read(n, upd)?, cx.table(&table));
        s += &format!("rt::kernels::scatter::scatter(y, {ru}, {tab}, {chunk}, rt::kernels::scatter::ScatterMode::{mode});\n");
    }
    Ok(Some(s))
}

/// ScatterElements on 1-D data with indices known only at run time (the gradient of MaxPool
/// scatters dY to the argmax the forward pass found): a loop over the indices. Negative
/// indices count from the end; out-of-range ones are skipped, as `forward` cannot fail.
fn runtime_1d(cx: &Ctx, n: &Node, mode: &str) -> Result<String, CodegenError> {
    let refuse = || cx.err(n, "indices must be a constant for codegen (pin it with --const), except for 1-D ScatterElements");
    if !matches!(n.op, Op::ScatterElements { .. }) {
        return Err(refuse());
    }
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let (data, ind, upd) = (cx.input(n, 0)?, cx.input(n, 1)?, cx.input(n, 2)?);
    let ((_, ds), (idt, is)) = (cx.ty(n, data)?, cx.ty(n, ind)?);
    if ds.len() != 1 || is.len() != 1 || !matches!(idt, DType::I64 | DType::I32) {
        return Err(refuse());
    }
    let combine = match mode {
        "Replace" => "u",
        "Add" => "rt::Elem::add(*o, u)",
        "Mul" => "rt::Elem::mul(*o, u)",
        "Max" => "rt::Elem::max_of(*o, u)",
        _ => "rt::Elem::min_of(*o, u)",
    };
    let (rx, ri, ru, y) = (cx.read(n, data)?, cx.read(n, ind)?, cx.read(n, upd)?, cx.write(n, out)?);
    Ok(format!(
        "let y = {y};\ny.copy_from_slice({rx});\nlet len = y.len() as i64;\n\
         for (&i, &u) in {ri}.iter().zip({ru}) {{ let i = i as i64; let i = if i < 0 {{ i + len }} else {{ i }}; \
         if let Some(o) = usize::try_from(i).ok().and_then(|i| y.get_mut(i)) {{ *o = {combine}; }} }}\n"
    ))
}
