//! GEMM/MatMul and reductions: one
//! emitter for fixed shapes and bounded dims. Sizes come from [`EmitCx::size`] (a literal for a
//! fixed dim, the run-time size table for a bounded one), so the same statements serve both.
use super::elementwise::f32_lit;
use super::f64_lit;
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, Op, ValueId};
use crate::ops::EmitCx;

type Res = Result<Option<String>, CodegenError>;

pub(crate) fn emit(cx: &EmitCx) -> Res {
    let n = cx.node();
    let out = cx.output(0)?;
    let od = cx.dtype(out)?;
    match &n.op {
        Op::Gemm { alpha, beta, trans_a, trans_b } => gemm(cx, out, od, *alpha, *beta, *trans_a, *trans_b),
        Op::MatMul => matmul(cx, out, od),
        _ => Err(cx.err("not a layer op")),
    }
}

/// A `gemm::Layout` literal; a size that is not a plain number is converted to `isize`.
fn layout(row: &str, col: &str) -> String {
    let s = |e: &str| if e.parse::<usize>().is_ok() { e.to_string() } else { format!("{e} as isize") };
    format!("rt::kernels::gemm::Layout {{ row_stride: {}, col_stride: {} }}", s(row), s(col))
}

fn gemm(cx: &EmitCx, out: ValueId, od: DType, alpha: f32, beta: f32, trans_a: bool, trans_b: bool) -> Res {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let (ash, bsh, osh) = (cx.dims(a)?, cx.dims(b)?, cx.dims(out)?);
    if ash.len() != 2 || bsh.len() != 2 || osh.len() != 2 || !matches!(od, DType::F32 | DType::F64) {
        return Err(cx.err("Gemm needs 2-D float operands"));
    }
    let (m, k) = if trans_a { (&ash[1], &ash[0]) } else { (&ash[0], &ash[1]) };
    let (m_d, nn_d) = (m.clone(), osh[1].clone());
    let (m, k, nn) = (cx.size(m)?, cx.size(k)?, cx.size(&nn_d)?);
    let la = if trans_a { layout("1", "m") } else { layout("k", "1") };
    let lb = if trans_b { layout("1", "k") } else { layout("nn", "1") };
    let (gemm, lit): (&str, fn(f32) -> String) = if od == DType::F32 { ("sgemm", f32_lit) } else { ("dgemm", |v| f64_lit(v as f64)) };
    // As the interpreter: y = A @ B, then y *= alpha, then y += beta * C, so both give the
    // same bits.
    let mut s = format!(
        "let (m, k, nn) = ({m}, {k}, {nn});\nlet y = {};\n\
         rt::kernels::gemm::{gemm}(m, k, nn, 1.0, {}, {la}, {}, {lb}, 0.0, y, {});\n",
        cx.write(out)?,
        cx.read(a)?,
        cx.read(b)?,
        layout("nn", "1")
    );
    if alpha != 1.0 {
        s += &format!("for v in y.iter_mut() {{ *v *= {}; }}\n", lit(alpha));
    }
    if let Some(c) = cx.opt_input(2) {
        let st = cx.broadcast_strides(&cx.dims(c)?, &[m_d, nn_d])?;
        let scaled = if beta == 1.0 { "c[i * s0 + j * s1]".to_string() } else { format!("c[i * s0 + j * s1] * {}", lit(beta)) };
        s += &format!(
            "let c = {};\nlet (s0, s1): (usize, usize) = ({}, {});\n\
             for i in 0..m {{ for j in 0..nn {{ y[i * nn + j] += {scaled}; }} }}\n",
            cx.read(c)?,
            st[0],
            st[1]
        );
    }
    Ok(Some(s))
}

/// MatMul with numpy semantics: 1-D operands promoted (and the added dim dropped again), the
/// batch dims broadcast; one GEMM per batch entry at offsets from the broadcast strides.
fn matmul(cx: &EmitCx, out: ValueId, od: DType) -> Res {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let (ash, bsh, osh) = (cx.dims(a)?, cx.dims(b)?, cx.dims(out)?);
    if ash.is_empty() || bsh.is_empty() {
        return Err(cx.err("MatMul of scalars"));
    }
    let one = DimExpr::constant(1);
    let a2: Vec<DimExpr> = if ash.len() == 1 { vec![one.clone(), ash[0].clone()] } else { ash.clone() };
    let b2: Vec<DimExpr> = if bsh.len() == 1 { vec![bsh[0].clone(), one] } else { bsh.clone() };
    let (m, k, nn) = (&a2[a2.len() - 2], &a2[a2.len() - 1], &b2[b2.len() - 1]);
    // The output is the batch dims, then m unless A was 1-D, then n unless B was 1-D.
    let kept = usize::from(ash.len() >= 2) + usize::from(bsh.len() >= 2);
    let batch = osh.get(..osh.len().checked_sub(kept).ok_or_else(|| cx.err("output rank too small"))?).unwrap_or(&[]);
    let (ba, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let (sa, sb) = (cx.broadcast_strides(ba, batch)?, cx.broadcast_strides(bb, batch)?);
    let args = "&a[oa..oa + m * k], rt::kernels::gemm::Layout { row_stride: k as isize, col_stride: 1 }, \
                &b[ob..ob + k * nn], rt::kernels::gemm::Layout { row_stride: nn as isize, col_stride: 1 }";
    let y = "yb, rt::kernels::gemm::Layout { row_stride: nn as isize, col_stride: 1 }";
    let call = match od {
        DType::F32 => format!("rt::kernels::gemm::sgemm(m, k, nn, 1.0, {args}, 0.0, {y})"),
        DType::F64 => format!("rt::kernels::gemm::dgemm(m, k, nn, 1.0, {args}, 0.0, {y})"),
        _ => format!("rt::kernels::gemm::gemm_generic(m, k, nn, {args}, {y})"),
    };
    let head = format!(
        "let (a, b, y) = ({}, {}, {});\nlet (m, k, nn): (usize, usize, usize) = ({}, {}, {});\n",
        cx.read(a)?,
        cx.read(b)?,
        cx.write(out)?,
        cx.size(m)?,
        cx.size(k)?,
        cx.size(nn)?
    );
    if batch.iter().all(|d| d.as_const() == Some(1)) {
        return Ok(Some(format!("{head}let (oa, ob, yb) = (0usize, 0usize, &mut y[..m * nn]);\n{call};")));
    }
    let nb = batch.len();
    // One batch entry: the operands' entries under broadcasting, and its GEMM.
    let entry = |y_at: &str| {
        format!(
            "// The operands' batch entries under broadcasting.\n\
             let (mut rest, mut oa, mut ob) = (bi, 0usize, 0usize);\n\
             for d in (0..{nb}).rev() {{ let ix = rest % batch[d]; rest /= batch[d]; oa += ix * sa[d]; ob += ix * sb[d]; }}\n\
             let (oa, ob) = (oa * m * k, ob * k * nn);\n\
             let yb = &mut y[{y_at} * m * nn..][..m * nn];\n\
             {call};\n"
        )
    };
    let head = format!(
        "{head}let batch: [usize; {nb}] = {};\nlet (sa, sb): ([usize; {nb}], [usize; {nb}]) = ([{}], [{}]);\n\
         let entries: usize = batch.iter().product();\n",
        cx.sizes(batch)?,
        sa.join(", "),
        sb.join(", ")
    );
    let macs = [m, k, nn].into_iter().chain(batch).try_fold(1usize, |acc, d| Some(acc.saturating_mul(usize::try_from(d.as_const()?).ok()?)));
    if macs.is_some_and(|w| w < burnc_runtime::PARALLEL_WORK) {
        // Too little work to split: one loop.
        return Ok(Some(format!("{head}for bi in 0..entries {{\n{}}}", entry("bi"))));
    }
    // Ranges of batch entries over the thread pool (a GEMM inside a task runs on its thread).
    Ok(Some(format!(
        "{head}rt::for_plane_ranges(entries, m * nn, entries * m * k * nn, y, &|b0, b1, y| {{\nfor bi in b0..b1 {{\n{}}}\n}});",
        entry("(bi - b0)")
    )))
}

