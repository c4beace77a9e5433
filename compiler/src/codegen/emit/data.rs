//! Data movement: Concat, Gather, Expand and ConstantOfShape (reshapes are views,
//! `ops::view::copy_unless_alias`; Transpose is `ops::transpose`).
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, Op};
use crate::ops::{around, product, EmitCx};
use crate::tensor::Tensor;

/// Concat, Gather, Expand and ConstantOfShape: one emitter for fixed shapes and bounded dims. Sizes
/// come from [`EmitCx::size`], literals for fixed dims, so fixed shapes keep their literal
/// geometry.
pub(crate) fn emit_movement(cx: &EmitCx) -> Result<Option<String>, CodegenError> {
    let out = cx.output(0)?;
    match &cx.node().op {
        Op::Concat { .. } if !cx.placed().is_empty() => {
            // The output holds the inputs as consecutive runs (`concat_runs`) and the plan put
            // some there already: copy only the others, each into its own run.
            let elem = cx.dtype(out)?.size();
            let mut s = String::new();
            for (i, at) in concat_runs(cx.ctx().g, cx.id()) {
                let v = cx.input(i)?;
                let len = cx.dims(v)?.iter().map(|d| d.as_const().and_then(|d| usize::try_from(d).ok())).product::<Option<usize>>().ok_or_else(|| cx.err("a placed Concat needs fixed shapes"))?;
                if len > 0 && !cx.placed().contains(&i) {
                    s += &format!("rt::kernels::concat::concat_part({}, {}, 1, {len}, 0, {len});\n", cx.write_run(out, at / elem, len)?, cx.read(v)?);
                }
            }
            Ok(Some(s))
        }
        Op::Concat { axis } => {
            let os = cx.dims(out)?;
            let ax = norm_axis(cx, *axis, os.len())?;
            let (outer, row) = (cx.size(&product(&os[..ax]))?, cx.size(&product(&os[ax..]))?);
            let mut s = format!("let y = {};\n", cx.write(out)?);
            // Each input contributes a chunk of `chunk` elements per outer index.
            let mut start = DimExpr::constant(0);
            for v in cx.node().inputs.iter().flatten() {
                let chunk = product(&cx.dims(*v)?[ax..]);
                if chunk.as_const() != Some(0) {
                    s += &format!("rt::kernels::concat::concat_part(y, {}, {outer}, {row}, {}, {});\n", cx.read(*v)?, cx.size(&start)?, cx.size(&chunk)?);
                }
                start = start.add(&chunk);
            }
            Ok(Some(s))
        }
        Op::Gather { axis } => {
            let (x, iv) = (cx.input(0)?, cx.input(1)?);
            let xs = cx.dims(x)?;
            let a = norm_axis(cx, *axis, xs.len())?;
            let [outer, len, inner] = around(&xs, a);
            let idx = match cx.konst(iv) {
                Some(t) => {
                    let mut v = t.to_i64_vec().ok_or_else(|| cx.err("indices are not integers"))?;
                    // An index out of range is an error: here on a fixed axis, in `forward` on
                    // a bounded one (`len + i + 1` or `len − i` must be at least 1).
                    for i in &mut v {
                        match len.as_const() {
                            Some(l) if (-l..l).contains(i) => *i = if *i < 0 { *i + l } else { *i },
                            Some(l) => return Err(cx.err(format!("index {i} is out of range for a dim of {l}"))),
                            None => {
                                cx.size(&if *i < 0 { len.add(&DimExpr::constant(*i + 1)) } else { len.sub(&DimExpr::constant(*i)) })?;
                            }
                        }
                    }
                    match v.len() {
                        0 => "&[0i64; 0]".to_string(),
                        1..=32 => format!("&[{}i64{}]", v[0], v[1..].iter().map(|i| format!(", {i}")).collect::<String>()),
                        _ => cx.table(&v),
                    }
                }
                // Run-time indices: one out of range reads a row of zeros (generated code does
                // not fail at run time).
                None => cx.read(iv)?,
            };
            Ok(Some(format!(
                "rt::kernels::gather::gather({}, [{}, {}, {}], {idx}, Default::default(), {});",
                cx.read(x)?,
                cx.size(&outer)?,
                cx.size(&len)?,
                cx.size(&inner)?,
                cx.write(out)?
            )))
        }
        Op::Expand => {
            let x = cx.input(0)?;
            let (xs, os) = (cx.dims(x)?, cx.dims(out)?);
            if os.len() > 16 {
                return Err(cx.err("rank above 16"));
            }
            let st = cx.broadcast_strides(&xs, &os)?;
            Ok(Some(format!("rt::kernels::broadcast::expand({}, &[{}], {}, &{});", cx.read(x)?, st.join(", "), cx.write(out)?, cx.sizes(&os)?)))
        }
        Op::ConstantOfShape { value } => {
            let t = cx.elem(out)?;
            Ok(Some(format!("{}.fill({});", cx.write(out)?, scalar_lit(value, t).ok_or_else(|| cx.err("unsupported fill value"))?)))
        }
        _ => Err(cx.err("not a data-movement op")),
    }
}

/// The inputs a Concat's output holds as one contiguous run each, as (input index, byte
/// offset): all of them when the output's dims before the axis are 1 (so each input is one
/// run, in order), none otherwise or without fixed shapes. The memory plan may place them
/// there ([`crate::memory::PlanOptions::holds`]).
pub(crate) fn concat_runs(g: &crate::ir::Graph, id: crate::ir::NodeId) -> Vec<(usize, usize)> {
    let n = g.node(id);
    let Op::Concat { axis } = n.op else { return Vec::new() };
    let fixed = |v: Option<crate::ir::ValueId>| g.tensor_type(v?).and_then(|t| Some((t.dtype, t.shape.as_ref()?.as_fixed()?)));
    let Some((dtype, os)) = fixed(n.outputs.first().copied()) else { return Vec::new() };
    let ax = if axis < 0 { axis + os.len() as i64 } else { axis };
    // Types stored one element per `size()` bytes (not strings' handles, not sub-byte types).
    use DType::*;
    let plain = matches!(dtype, F32 | F64 | F16 | BF16 | I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64 | Bool);
    if !plain || ax < 0 || ax as usize >= os.len() || os[..ax as usize].iter().any(|&d| d != 1) {
        return Vec::new();
    }
    let mut runs = Vec::new();
    let mut at = 0usize;
    for (i, v) in n.inputs.iter().enumerate() {
        let Some((dt, shape)) = fixed(*v) else { return Vec::new() };
        let Some(bytes) = shape.iter().try_fold(dt.size(), |a, &d| a.checked_mul(d)) else { return Vec::new() };
        if dt != dtype {
            return Vec::new();
        }
        runs.push((i, at));
        at = match at.checked_add(bytes) {
            Some(a) => a,
            None => return Vec::new(),
        };
    }
    runs
}

/// Axis `a` of a rank-`r` tensor, counted from the end when negative.
fn norm_axis(cx: &EmitCx, a: i64, r: usize) -> Result<usize, CodegenError> {
    let v = if a < 0 { a + r as i64 } else { a };
    if v < 0 || v >= r as i64 {
        return Err(cx.err(format!("axis {a} is out of range for rank {r}")));
    }
    Ok(v as usize)
}

/// A Rust literal for element 0 of `t`, typed as `ty`.
pub fn scalar_lit(t: &Tensor, ty: &str) -> Option<String> {
    let v = t.to_f64_vec();
    let x = *v.first()?;
    Some(match t.dtype() {
        DType::F32 => super::elementwise::f32_lit(x as f32),
        DType::F64 if x.is_finite() => format!("{x:?}_f64"),
        DType::F64 => format!("({} as f64)", super::elementwise::f32_lit(x as f32)),
        DType::F16 | DType::BF16 => format!("{ty}::from_f32({})", super::elementwise::f32_lit(x as f32)),
        DType::Bool => format!("{}_u8", (x != 0.0) as u8),
        d if d.is_int() => format!("{}_{ty}", t.to_i64_vec()?.first()?),
        _ => return None,
    })
}

/// Which inputs of a pure data-movement op carry data (the others must be constants).
fn data_inputs(op: &Op, n_inputs: usize) -> Option<Vec<usize>> {
    Some(match op {
        Op::Reshape { .. } => vec![0],
        Op::Def(d) if d.get::<crate::ops::transpose::Transpose>().is_some() => vec![0],
        Op::Unary(crate::ir::UnaryOp::Identity) => vec![0],
        Op::Gather { .. } | Op::Expand => vec![0],
        Op::Concat { .. } => (0..n_inputs).collect(),
        _ => return None,
    })
}

pub fn is_movement(op: &Op) -> bool {
    data_inputs(op, 1).is_some()
}
