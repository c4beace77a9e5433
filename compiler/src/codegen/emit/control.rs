//! Control flow as real loops and branches. A subgraph (a Scan body, an If branch) is planned
//! like a graph of its own, and its arena is a region of the node's scratch; its inputs and the
//! enclosing graph's values it reads are bound to names before its code, and its outputs are
//! copied out after it.
use super::{emit_node, rust_ty, Ctx};
use crate::codegen::builder::{block_label, lets_read};
use crate::codegen::weights::{value_bytes, WeightsLayout};
use crate::codegen::{plan_memory, with_output_copies, CodegenError, Lowering};
use crate::ir::{DType, DimExpr, Graph, Node, NodeId, Op, ValueId, ValueKind};
use crate::ops::{product, EmitCx, Sym};
use crate::passes::symbolic::SymInfo;
use crate::memory::{MemoryPlan, ALIGN};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

fn align(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// A subgraph ready for codegen: output copies added, memory planned.
struct Sub {
    g: Graph,
    plan: MemoryPlan,
}

/// With `info` (the body's bounded-dims analysis) the plan is the bounded one, at the bounds.
fn prepare_sub(body: &Graph, lw: Lowering, info: Option<&SymInfo>) -> Result<Sub, String> {
    let g = with_output_copies(body).unwrap_or_else(|| body.clone());
    let plan = match info {
        Some(info) => crate::codegen::bounded::plan_bounded(&g, info, &|_| None, &HashMap::new()).map_err(|e| format!("subgraph: {e}"))?,
        None => plan_memory(&g, lw, crate::size::DEFAULT_MAX_ARENA_BYTES).map_err(|e| format!("subgraph: {e}"))?,
    };
    Ok(Sub { g, plan })
}

fn fixed(g: &Graph, v: ValueId) -> Result<(DType, Vec<usize>), String> {
    let t = g.tensor_type(v).ok_or_else(|| format!("`{}` is not a tensor", g.value(v).name))?;
    let s = t.shape.as_ref().and_then(|s| s.as_fixed()).ok_or_else(|| format!("`{}` has no static shape", g.value(v).name))?;
    Ok((t.dtype, s))
}

use crate::ir::axis::norm_axis;

/// What decides a Scan's scratch: the body's plan, then one buffer per state and per
/// scan-input slice, each sized at the static shapes (the bounds, under bounded dims).
struct ScanPlan {
    sub: Sub,
    n_state: usize,
    state_off: Vec<usize>,
    slice_off: Vec<usize>,
    scratch: usize,
}

fn scan_plan(g: &Graph, n: &Node, lw: Lowering, info: Option<&SymInfo>) -> Result<ScanPlan, String> {
    let Op::Scan { body, num_scan_inputs: m, input_axes, output_axes, .. } = &n.op else {
        return Err("not a Scan".into());
    };
    let n_state = n.inputs.len().checked_sub(*m).ok_or("fewer inputs than num_scan_inputs")?;
    if body.inputs.len() != n.inputs.len() || body.outputs.len() < n.outputs.len() || n.outputs.len() < n_state {
        return Err("the body's inputs and outputs do not match the node's".into());
    }
    if *m == 0 {
        return Err("Scan without scan inputs".into());
    }
    let sub = prepare_sub(body, lw, info)?;
    let mut off = align(sub.plan.arena_bytes);
    let mut state_off = Vec::new();
    for i in 0..n_state {
        let (d, s) = fixed(&sub.g, sub.g.inputs[i])?;
        state_off.push(off);
        off += align(d.size() * s.iter().product::<usize>());
    }
    // The scan axes' lengths agree at the static shapes (bounded dims: at the bounds, and
    // `forward` checks them).
    let (mut slice_off, mut len) = (Vec::new(), None);
    for j in 0..*m {
        let v = n.inputs[n_state + j].ok_or_else(|| format!("scan input #{j} is missing"))?;
        let (d, s) = fixed(g, v)?;
        let ax = norm_axis(input_axes.get(j).copied().unwrap_or(0), s.len())?;
        if *len.get_or_insert(s[ax]) != s[ax] {
            return Err(format!("scan input #{j} has length {} along its axis, expected {}", s[ax], len.unwrap_or(0)));
        }
        slice_off.push(off);
        off += align(d.size() * s.iter().enumerate().filter(|&(k, _)| k != ax).map(|(_, &x)| x).product::<usize>());
    }
    for (k, &o) in n.outputs.iter().enumerate().skip(n_state) {
        let (_, s) = fixed(g, o)?;
        let ax = norm_axis(output_axes.get(k - n_state).copied().unwrap_or(0), s.len())?;
        if Some(s[ax]) != len {
            return Err(format!("scan output #{} has length {}, expected {}", k - n_state, s[ax], len.unwrap_or(0)));
        }
    }
    Ok(ScanPlan { sub, n_state, state_off, slice_off, scratch: off })
}

/// A bounded Scan's scratch: its body planned as bounded dims require, sized at the bounds.
pub(crate) fn scan_scratch_bounded(g: &Graph, id: NodeId, info: &SymInfo) -> usize {
    scan_plan(g, g.node(id), Lowering::EXACT, Some(info)).map_or(0, |p| p.scratch)
}

/// Everything about a Loop that decides its code and its scratch.
struct LoopPlan {
    sub: Sub,
    nc: usize,
    /// Scratch layout: body arena at 0, then the iteration number, the condition and one
    /// buffer per carried value.
    iter_off: usize,
    cond_off: usize,
    carried_off: Vec<usize>,
    scratch: usize,
}

fn loop_plan(g: &Graph, n: &Node, lw: Lowering) -> Result<LoopPlan, String> {
    let Op::Loop { body } = &n.op else { return Err("not a Loop".into()) };
    let nc = n.inputs.len().checked_sub(2).ok_or("a Loop takes at least two inputs")?;
    if body.inputs.len() != nc + 2 || body.outputs.len() < nc + 1 {
        return Err("the body's inputs and outputs do not match the node's".into());
    }
    let sub = prepare_sub(body, lw, None)?;
    let iter_off = align(sub.plan.arena_bytes);
    let cond_off = iter_off + ALIGN;
    let mut off = cond_off + ALIGN;
    let mut carried_off = Vec::new();
    for k in 0..nc {
        let (d, s) = fixed(&sub.g, sub.g.inputs[k + 2])?;
        let (d2, s2) = fixed(&sub.g, sub.g.outputs[k + 1])?;
        if (d, &s) != (d2, &s2) {
            return Err(format!("carried value #{k} changes from {d} {s:?} to {d2} {s2:?} inside the body; codegen needs it fixed"));
        }
        carried_off.push(off);
        off += align(d.size() * s.iter().product::<usize>());
    }
    for (j, &o) in n.outputs.iter().enumerate().skip(nc) {
        fixed(g, o).map_err(|e| format!("scan output #{}: {e} (the loop's trip count must be known)", j - nc))?;
    }
    Ok(LoopPlan { sub, nc, iter_off, cond_off, carried_off, scratch: off })
}

/// Both branches of an If, planned; they share the node's scratch (one runs).
fn if_plan(g: &Graph, n: &Node, lw: Lowering) -> Result<(Sub, Sub), String> {
    let Op::If { then_branch, else_branch } = &n.op else { return Err("not an If".into()) };
    let (t, e) = (prepare_sub(then_branch, lw, None)?, prepare_sub(else_branch, lw, None)?);
    for (name, b) in [("then", &t), ("else", &e)] {
        if b.g.outputs.len() < n.outputs.len() {
            return Err(format!("the {name} branch returns {} values for {} outputs", b.g.outputs.len(), n.outputs.len()));
        }
        for (k, &o) in n.outputs.iter().enumerate() {
            let want = fixed(g, o)?;
            let got = fixed(&b.g, b.g.outputs[k])?;
            if want != got {
                return Err(format!("output #{k} is {} {:?} in the {name} branch but {} {:?} after the If; codegen needs one static shape", got.0, got.1, want.0, want.1));
            }
        }
    }
    Ok((t, e))
}

pub fn scratch_bytes(g: &Graph, id: NodeId, lw: Lowering) -> usize {
    let n = g.node(id);
    match &n.op {
        Op::If { .. } => if_plan(g, n, lw).map_or(0, |(t, e)| t.plan.arena_bytes.max(e.plan.arena_bytes)),
        Op::Scan { .. } => scan_plan(g, n, lw, None).map_or(0, |p| p.scratch),
        Op::Loop { .. } => loop_plan(g, n, lw).map_or(0, |p| p.scratch),
        _ => 0,
    }
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    match &n.op {
        Op::Loop { .. } => emit_loop(cx, id, n),
        Op::If { .. } => emit_if(cx, id, n),
        _ => Err(cx.err(n, "not a control-flow op")),
    }
}

/// A real branch on a condition known only at run time.
fn emit_if(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let (t, e) = if_plan(cx.g, n, cx.lowering).map_err(|m| cx.err(n, m))?;
    let cond = n.inputs.first().copied().flatten().ok_or_else(|| cx.err(n, "missing condition"))?;
    let tag = format!("if{}", id.0);
    let base = match cx.plan.scratch.get(&id) {
        Some(slot) => format!("a.at({})", slot.offset),
        None => "a".into(), // both branches only copy or read: nothing of theirs lives in the arena
    };
    let mut s = format!("let {tag}_base = {base};
if ({})[0] != 0 {{
", cx.read(n, cond)?);
    for (k, sub) in [&t, &e].into_iter().enumerate() {
        if k == 1 {
            s += "} else {
";
        }
        let mut names = HashMap::new();
        s += &bind_outer(&EmitCx::fixed(cx, id), &sub.g, &format!("{tag}_{k}"), &mut names)?;
        s += "{
";
        let body = emit_sub(cx, sub, &tag, names, None)?;
        s += &lets_read(&body, &[("a".into(), format!("{tag}_base"))]);
        s += &body;
        s += "}
";
        for (j, &o) in n.outputs.iter().enumerate() {
            if cx.plan.slots.contains_key(&o) {
                let src = sub_view(sub, sub.g.outputs[j], &format!("{tag}_base"), false).map_err(|m| cx.err(n, m))?;
                let _ = writeln!(s, "{}.copy_from_slice({src});", cx.write(n, o)?);
            }
        }
    }
    s += "}
";
    Ok(Some(s))
}

/// A real `while` loop: trip count and condition read at run time unless constant.
fn emit_loop(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let p = loop_plan(cx.g, n, cx.lowering).map_err(|e| cx.err(n, e))?;
    let e = |m: String| cx.err(n, m);
    let scr = cx.plan.scratch.get(&id).ok_or_else(|| e("no scratch slot".into()))?.offset;
    let sub = &p.sub;
    let tag = format!("loop{}", id.0);
    let base = format!("{tag}_base");
    let mut names = HashMap::new();
    let mut s = bind_outer(&EmitCx::fixed(cx, id), &sub.g, &tag, &mut names)?;
    let _ = writeln!(s, "let {base} = a.at({scr});");
    let view_at = |v: ValueId, off: usize, mutable: bool| -> Result<String, CodegenError> {
        let (d, shape) = fixed(&sub.g, v).map_err(e)?;
        let t = rust_ty(d).ok_or_else(|| cx.err(n, format!("dtype {d} is not supported by codegen yet")))?;
        let f = if mutable { "view_mut" } else { "view" };
        Ok(format!("unsafe {{ rt::arena::{f}::<{t}>(a, {}, {}) }}", scr + off, shape.iter().product::<usize>()))
    };
    for k in 0..p.nc {
        let src = n.inputs[k + 2].ok_or_else(|| cx.err(n, format!("carried input #{k} is missing")))?;
        let _ = writeln!(s, "{}.copy_from_slice({});", view_at(sub.g.inputs[k + 2], p.carried_off[k], true)?, cx.read(n, src)?);
    }
    let trips = match n.inputs.first().copied().flatten() {
        None => "i64::MAX".to_string(),
        Some(v) => match cx.konst(v).and_then(|t| t.to_i64_vec()?.first().copied()) {
            Some(m) => format!("{m}_i64"),
            // ONNX's M is i64; a cast only for another integer type.
            None if cx.g.tensor_type(v).is_some_and(|t| t.dtype == crate::ir::DType::I64) => format!("({})[0]", cx.read(n, v)?),
            None => format!("({})[0] as i64", cx.read(n, v)?),
        },
    };
    let cond = match n.inputs.get(1).copied().flatten() {
        None => "true".to_string(),
        Some(v) => format!("({})[0] != 0", cx.read(n, v)?),
    };
    let _ = writeln!(s, "let trips: i64 = {trips};
let mut cond: bool = {cond};
let mut it: i64 = 0;");
    let _ = writeln!(s, "while cond && it < trips {{");
    let _ = writeln!(s, "({})[0] = it;", view_at(sub.g.inputs[0], p.iter_off, true)?);
    let _ = writeln!(s, "({})[0] = cond as u8;", view_at(sub.g.inputs[1], p.cond_off, true)?);
    let offsets = (0..sub.g.inputs.len()).map(|i| match i {
        0 => p.iter_off,
        1 => p.cond_off,
        _ => p.carried_off[i - 2],
    });
    s += &body_block(cx, sub, &tag, offsets, &view_at, &base, names, None)?;
    let _ = writeln!(s, "cond = ({})[0] != 0;", sub_view(sub, sub.g.outputs[0], &base, false).map_err(e)?);
    for k in 0..p.nc {
        let src = sub_view(sub, sub.g.outputs[k + 1], &base, false).map_err(e)?;
        let _ = writeln!(s, "{}.copy_from_slice({src});", view_at(sub.g.inputs[k + 2], p.carried_off[k], true)?);
    }
    for (j, &o) in n.outputs.iter().enumerate().skip(p.nc) {
        if !cx.plan.slots.contains_key(&o) {
            continue;
        }
        let (_, ys) = cx.ty(n, o)?;
        let len = ys.first().copied().unwrap_or(0);
        let inner: usize = ys.iter().skip(1).product();
        let src = sub_view(sub, sub.g.outputs[1 + j], &base, false).map_err(e)?;
        let _ = writeln!(s, "if (it as usize) < {len} {{ rt::kernels::slab::put({src}, 1, {len}, {inner}, it as usize, {}); }}", cx.write(n, o)?);
    }
    let _ = writeln!(s, "it += 1;
}}");
    for k in 0..p.nc {
        let o = n.outputs[k];
        if cx.plan.slots.contains_key(&o) {
            let _ = writeln!(s, "{}.copy_from_slice({});", cx.write(n, o)?, view_at(sub.g.inputs[k + 2], p.carried_off[k], false)?);
        }
    }
    Ok(Some(s))
}

/// `let <name> = <outer read>;` for every value of the enclosing graph the subgraph reads, so
/// they stay reachable once `a` names the subgraph's arena.
fn bind_outer(e: &EmitCx, sub: &Graph, tag: &str, names: &mut HashMap<ValueId, String>) -> Result<String, CodegenError> {
    let cx = e.ctx();
    let mut s = String::new();
    for (k, v) in sub.values.iter().enumerate() {
        if !matches!(v.kind, ValueKind::Outer) || !is_read(sub, ValueId(k as u32)) {
            continue;
        }
        let ov = (0..cx.g.values.len())
            .rev()
            .map(|o| ValueId(o as u32))
            .find(|&o| cx.g.value(o).name == v.name)
            .ok_or_else(|| e.err(format!("subgraph reads `{}`, which the enclosing graph does not define", v.name)))?;
        // Weights only a subgraph reads are not in the enclosing layout yet.
        if !cx.weights.borrow().offsets.contains_key(&ov) {
            if let Some(b) = value_bytes(&cx.g.value(ov).kind) {
                let mut wl = cx.weights.borrow_mut();
                let off = wl.push_table(&b);
                wl.offsets.insert(ov, off);
            }
        }
        let name = format!("{tag}_outer_{k}");
        let _ = writeln!(s, "let {name} = {};", e.read(ov)?);
        names.insert(ValueId(k as u32), name);
    }
    Ok(s)
}

/// Whether `g` reads `v`: a node's input, a graph output, or an outer value of a nested
/// subgraph with `v`'s name that the subgraph reads (a value read two levels down passes
/// through every graph between).
fn is_read(g: &Graph, v: ValueId) -> bool {
    if g.nodes.iter().any(|n| n.inputs.contains(&Some(v))) || g.outputs.contains(&v) {
        return true;
    }
    let name = &g.value(v).name;
    g.nodes.iter().flat_map(|n| n.op.subgraphs()).any(|sub| {
        sub.values.iter().enumerate().any(|(k, sv)| matches!(sv.kind, ValueKind::Outer) && sv.name == *name && is_read(sub, ValueId(k as u32)))
    })
}

/// The subgraph's statements, with its weights appended to the enclosing blob. With `sym` (the
/// body's bounded-dims analysis and the enclosing size table) nodes whose dims depend on a
/// named dim are emitted with run-time sizes.
/// The body's code in a block: input `i` bound to `{tag}_in_{i}`, a view at `offsets[i]` (by
/// `view_at`), and `a` naming the body's arena (`base`).
#[allow(clippy::too_many_arguments)]
fn body_block(
    cx: &Ctx,
    sub: &Sub,
    tag: &str,
    offsets: impl Iterator<Item = usize>,
    view_at: impl Fn(ValueId, usize, bool) -> Result<String, CodegenError>,
    base: &str,
    mut names: HashMap<ValueId, String>,
    sym: Option<Sym>,
) -> Result<String, CodegenError> {
    let mut bound = Vec::new();
    for (i, (&bi, off)) in sub.g.inputs.iter().zip(offsets).enumerate() {
        let name = format!("{tag}_in_{i}");
        bound.push((name.clone(), view_at(bi, off, false)?));
        names.insert(bi, name);
    }
    bound.push(("a".into(), base.to_string()));
    let body = emit_sub(cx, sub, tag, names, sym)?;
    // Only what the body reads is bound (a Loop body need not read its counter).
    Ok(format!("{{\n{}{body}}}\n", lets_read(&body, &bound)))
}

/// The body's node blocks, labelled `'{tag}_{node}` so that no label shadows the enclosing
/// node's.
fn emit_sub(cx: &Ctx, sub: &Sub, tag: &str, names: HashMap<ValueId, String>, sym: Option<Sym>) -> Result<String, CodegenError> {
    let blob = std::mem::take(&mut cx.weights.borrow_mut().blob);
    let mut wl = WeightsLayout { offsets: HashMap::new(), packed: HashMap::new(), packed_q8: HashMap::new(), blob };
    for &nid in &sub.plan.order {
        for &v in sub.g.node(nid).inputs.iter().flatten() {
            if !wl.offsets.contains_key(&v) {
                if let Some(b) = value_bytes(&sub.g.value(v).kind) {
                    let off = wl.push_table(&b);
                    wl.offsets.insert(v, off);
                }
            }
        }
    }
    let bcx = Ctx { g: &sub.g, plan: &sub.plan, weights: std::cell::RefCell::new(wl), inputs: names, state: Default::default(), lowering: cx.lowering };
    let mut s = String::new();
    let mut labels = HashSet::new();
    let mut res = Ok(());
    for &nid in &sub.plan.order {
        match emit_node(&bcx, sym, nid) {
            Ok(Some(stmts)) => {
                let label = block_label(&format!("{tag}_{}", sub.g.node(nid).name), &mut labels);
                let _ = writeln!(s, "'{label}: {{\n{stmts}\n}}");
            }
            Ok(None) => {}
            Err(e) => {
                res = Err(e);
                break;
            }
        }
    }
    cx.weights.borrow_mut().blob = bcx.weights.into_inner().blob;
    res.map(|_| s)
}

/// `unsafe { view[_mut]::<T>(base, off, len) }` of a value's slot in a subgraph's plan.
fn sub_view(sub: &Sub, v: ValueId, base: &str, mutable: bool) -> Result<String, String> {
    let (_, s) = fixed(&sub.g, v)?;
    sub_view_len(sub, v, base, mutable, &s.iter().product::<usize>().to_string())
}

/// [`sub_view`] of `len` elements (a run-time length under bounded dims).
fn sub_view_len(sub: &Sub, v: ValueId, base: &str, mutable: bool, len: &str) -> Result<String, String> {
    let (d, _) = fixed(&sub.g, v)?;
    let t = rust_ty(d).ok_or_else(|| format!("dtype {d} is not supported by codegen yet"))?;
    let slot = sub.plan.slots.get(&v).ok_or_else(|| format!("`{}` has no arena slot", sub.g.value(v).name))?;
    let f = if mutable { "view_mut" } else { "view" };
    Ok(format!("unsafe {{ rt::arena::{f}::<{t}>({base}, {}, {len}) }}", slot.offset))
}

/// A real loop over the scan axis: each iteration takes one slice of every scan input, runs
/// the body on the states and slices, and puts its scan outputs' slices. Under bounded dims
/// the trip count and the slices' sizes come from the size table and the body's nodes go
/// through the bounded emitter; the buffers are laid out at the bounds.
pub(crate) fn emit_scan(e: &EmitCx) -> Result<Option<String>, CodegenError> {
    let (cx, n, id) = (e.ctx(), e.node(), e.id());
    let Op::Scan { input_axes, output_axes, input_directions, output_directions, .. } = &n.op else {
        return Err(e.err("not a Scan"));
    };
    let sym = e.sym().and_then(|s| Some(Sym { info: s.info.subs.get(&id)?, sizes: s.sizes }));
    let p = scan_plan(cx.g, n, cx.lowering, sym.map(|s| s.info)).map_err(|m| e.err(m))?;
    let scr = cx.plan.scratch.get(&id).ok_or_else(|| e.err("no scratch slot"))?.offset;
    let sub = &p.sub;
    let tag = format!("scan{}", id.0);
    let base = format!("{tag}_base");
    // The body's dims: from its analysis, or its static types.
    let body_len = |v: ValueId| -> Result<String, CodegenError> {
        match sym.and_then(|s| s.info.shapes.get(&v)) {
            Some(d) => e.size(&product(d)),
            None => Ok(fixed(&sub.g, v).map_err(|m| e.err(m))?.1.iter().product::<usize>().to_string()),
        }
    };
    let mut names = HashMap::new();
    let mut s = bind_outer(e, &sub.g, &tag, &mut names)?;
    let _ = writeln!(s, "let {base} = a.at({scr});");
    // States live in scratch buffers across iterations.
    let view_at = |v: ValueId, off: usize, mutable: bool| -> Result<String, CodegenError> {
        let (d, _) = fixed(&sub.g, v).map_err(|m| e.err(m))?;
        let t = rust_ty(d).ok_or_else(|| e.err(format!("dtype {d} is not supported by codegen yet")))?;
        let f = if mutable { "view_mut" } else { "view" };
        Ok(format!("unsafe {{ rt::arena::{f}::<{t}>(a, {}, {}) }}", scr + off, body_len(v)?))
    };
    // `[outer, len, inner]` of `v` around its scan axis.
    let around = |v: ValueId, axis: i64| -> Result<[DimExpr; 3], CodegenError> {
        let d = e.dims(v)?;
        let ax = norm_axis(axis, d.len()).map_err(|m| e.err(m))?;
        Ok([product(&d[..ax]), d[ax].clone(), product(&d[ax + 1..])])
    };
    for i in 0..p.n_state {
        let _ = writeln!(s, "{}.copy_from_slice({});", view_at(sub.g.inputs[i], p.state_off[i], true)?, e.read_input(i)?);
    }
    let trips = around(e.input(p.n_state)?, input_axes.first().copied().unwrap_or(0))?[1].clone();
    let len = e.size(&trips)?;
    // Slice `it`, or counted from the end.
    let pos = |rev: bool| match (rev, trips.as_const()) {
        (false, _) => "it".to_string(),
        (true, Some(l)) => format!("{} - it", l - 1),
        (true, None) => format!("{len} - 1 - it"),
    };
    let _ = writeln!(s, "for it in 0..{len} {{");
    for j in 0..p.slice_off.len() {
        let [outer, l, inner] = around(e.input(p.n_state + j)?, input_axes.get(j).copied().unwrap_or(0))?;
        let dst = view_at(sub.g.inputs[p.n_state + j], p.slice_off[j], true)?;
        let rev = input_directions.get(j).copied().unwrap_or(0) != 0;
        let _ = writeln!(
            s,
            "rt::kernels::slab::take({}, {}, {}, {}, {}, {dst});",
            e.read_input(p.n_state + j)?,
            e.size(&outer)?,
            e.size(&l)?,
            e.size(&inner)?,
            pos(rev)
        );
    }
    // The body, with its inputs bound and `a` naming its arena.
    let offsets = (0..sub.g.inputs.len()).map(|i| if i < p.n_state { p.state_off[i] } else { p.slice_off[i - p.n_state] });
    s += &body_block(cx, sub, &tag, offsets, &view_at, &base, names, sym)?;
    // Outputs: new states back into their buffers, scan outputs into their slabs.
    for i in 0..p.n_state {
        let bo = sub.g.outputs[i];
        let src = sub_view_len(sub, bo, &base, false, &body_len(bo)?).map_err(|m| e.err(m))?;
        let _ = writeln!(s, "{}.copy_from_slice({src});", view_at(sub.g.inputs[i], p.state_off[i], true)?);
    }
    for k in p.n_state..n.outputs.len() {
        let Some(o) = e.used_output(k) else { continue };
        let [outer, l, inner] = around(o, output_axes.get(k - p.n_state).copied().unwrap_or(0))?;
        let bo = sub.g.outputs[k];
        let src = sub_view_len(sub, bo, &base, false, &body_len(bo)?).map_err(|m| e.err(m))?;
        let rev = output_directions.get(k - p.n_state).copied().unwrap_or(0) != 0;
        let _ = writeln!(s, "rt::kernels::slab::put({src}, {}, {}, {}, {}, {});", e.size(&outer)?, e.size(&l)?, e.size(&inner)?, pos(rev), e.write(o)?);
    }
    let _ = writeln!(s, "}}");
    for i in 0..p.n_state {
        if let Some(o) = e.used_output(i) {
            let _ = writeln!(s, "{}.copy_from_slice({});", e.write(o)?, view_at(sub.g.inputs[i], p.state_off[i], false)?);
        }
    }
    Ok(Some(s))
}
