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
    let it = cx.konst(ind).ok_or_else(|| cx.err(n, "indices must be a constant for codegen (pin it with --const)"))?;
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
