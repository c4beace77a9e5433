//! Control flow as real loops and branches. A subgraph (a Scan body, an If branch) is planned
//! like a graph of its own, and its arena is a region of the node's scratch; its inputs and the
//! enclosing graph's values it reads are bound to names before its code, and its outputs are
//! copied out after it.
use super::{emit_node, rust_ty, Ctx};
use crate::codegen::module::block_label;
use crate::codegen::weights::{value_bytes, WeightsLayout};
use crate::codegen::{plan_memory, with_output_copies, CodegenError, Lowering};
use crate::ir::{DType, Graph, Node, NodeId, Op, ValueId, ValueKind};
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

fn prepare_sub(body: &Graph, lw: Lowering) -> Result<Sub, String> {
    let g = with_output_copies(body).unwrap_or_else(|| body.clone());
    let plan = plan_memory(&g, lw, crate::size::DEFAULT_MAX_ARENA_BYTES).map_err(|e| format!("subgraph: {e}"))?;
    Ok(Sub { g, plan })
}

fn fixed(g: &Graph, v: ValueId) -> Result<(DType, Vec<usize>), String> {
    let t = g.tensor_type(v).ok_or_else(|| format!("`{}` is not a tensor", g.value(v).name))?;
    let s = t.shape.as_ref().and_then(|s| s.as_fixed()).ok_or_else(|| format!("`{}` has no static shape", g.value(v).name))?;
    Ok((t.dtype, s))
}

/// `[outer, len, inner]` of `shape` around `axis`.
fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

use crate::ir::axis::norm_axis;

/// Everything about a Scan that decides its code and its scratch.
struct ScanPlan {
    sub: Sub,
    n_state: usize,
    len: usize,
    /// Per scan input: (outer, inner, reverse).
    ins: Vec<(usize, usize, bool)>,
    /// Per scan output: (outer, inner, reverse).
    outs: Vec<(usize, usize, bool)>,
    /// Scratch layout: body arena at 0, then one buffer per state and per scan-input slice.
    state_off: Vec<usize>,
    slice_off: Vec<usize>,
    scratch: usize,
}

fn scan_plan(g: &Graph, n: &Node, lw: Lowering) -> Result<ScanPlan, String> {
    let Op::Scan { body, num_scan_inputs: m, input_axes, output_axes, input_directions, output_directions } = &n.op else {
        return Err("not a Scan".into());
    };
    let n_state = n.inputs.len().checked_sub(*m).ok_or("fewer inputs than num_scan_inputs")?;
    if body.inputs.len() != n.inputs.len() || body.outputs.len() < n_state {
        return Err("the body's inputs and outputs do not match the node's".into());
    }
    let sub = prepare_sub(body, lw)?;
    let mut off = align(sub.plan.arena_bytes);
    let mut state_off = Vec::new();
    for i in 0..n_state {
        let (d, s) = fixed(&sub.g, sub.g.inputs[i])?;
        state_off.push(off);
        off += align(d.size() * s.iter().product::<usize>());
    }
    let (mut ins, mut slice_off, mut len) = (Vec::new(), Vec::new(), None);
    for j in 0..*m {
        let v = n.inputs[n_state + j].ok_or_else(|| format!("scan input #{j} is missing"))?;
        let (d, s) = fixed(g, v)?;
        let ax = norm_axis(input_axes.get(j).copied().unwrap_or(0), s.len())?;
        let (outer, l, inner) = around(&s, ax);
        if *len.get_or_insert(l) != l {
            return Err(format!("scan input #{j} has length {l} along its axis, expected {}", len.unwrap_or(0)));
        }
        ins.push((outer, inner, input_directions.get(j).copied().unwrap_or(0) != 0));
        slice_off.push(off);
        off += align(d.size() * outer * inner);
    }
    let len = len.ok_or("Scan without scan inputs")?;
    let mut outs = Vec::new();
    for (k, &o) in n.outputs.iter().enumerate().skip(n_state) {
        let (_, s) = fixed(g, o)?;
        let ax = norm_axis(output_axes.get(k - n_state).copied().unwrap_or(0), s.len())?;
        let (outer, l, inner) = around(&s, ax);
        if l != len {
            return Err(format!("scan output #{} has length {l}, expected {len}", k - n_state));
        }
        outs.push((outer, inner, output_directions.get(k - n_state).copied().unwrap_or(0) != 0));
    }
    Ok(ScanPlan { sub, n_state, len, ins, outs, state_off, slice_off, scratch: off })
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
    let sub = prepare_sub(body, lw)?;
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
    let (t, e) = (prepare_sub(then_branch, lw)?, prepare_sub(else_branch, lw)?);
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
        Op::Scan { .. } => scan_plan(g, n, lw).map_or(0, |p| p.scratch),
        Op::Loop { .. } => loop_plan(g, n, lw).map_or(0, |p| p.scratch),
        _ => 0,
    }
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    match &n.op {
        Op::Scan { .. } => emit_scan(cx, id, n),
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
        s += &bind_outer(cx, n, &sub.g, &format!("{tag}_{k}"), &mut names)?;
        s += "{
";
        let _ = writeln!(s, "let a = {tag}_base;");
        s += &emit_sub(cx, sub, names)?;
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
    let mut s = bind_outer(cx, n, &sub.g, &tag, &mut names)?;
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
    let _ = writeln!(s, "{{");
    for (i, &bi) in sub.g.inputs.iter().enumerate() {
        let off = match i {
            0 => p.iter_off,
            1 => p.cond_off,
            _ => p.carried_off[i - 2],
        };
        let name = format!("{tag}_in_{i}");
        let _ = writeln!(s, "let {name} = {};", view_at(bi, off, false)?);
        names.insert(bi, name);
    }
    let _ = writeln!(s, "let a = {base};");
    s += &emit_sub(cx, sub, names)?;
    let _ = writeln!(s, "}}");
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
fn bind_outer(cx: &Ctx, n: &Node, sub: &Graph, tag: &str, names: &mut HashMap<ValueId, String>) -> Result<String, CodegenError> {
    let mut s = String::new();
    for (k, v) in sub.values.iter().enumerate() {
        if !matches!(v.kind, ValueKind::Outer) || !is_read(sub, ValueId(k as u32)) {
            continue;
        }
        let ov = (0..cx.g.values.len())
            .rev()
            .map(|o| ValueId(o as u32))
            .find(|&o| cx.g.value(o).name == v.name)
            .ok_or_else(|| cx.err(n, format!("subgraph reads `{}`, which the enclosing graph does not define", v.name)))?;
        // Weights only a subgraph reads are not in the enclosing layout yet.
        if !cx.weights.borrow().offsets.contains_key(&ov) {
            if let Some(b) = value_bytes(&cx.g.value(ov).kind) {
                let mut wl = cx.weights.borrow_mut();
                let off = wl.push_table(&b);
                wl.offsets.insert(ov, off);
            }
        }
        let name = format!("{tag}_outer_{k}");
        let _ = writeln!(s, "let {name} = {};", cx.read(n, ov)?);
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

/// The subgraph's statements, with its weights appended to the enclosing blob.
fn emit_sub(cx: &Ctx, sub: &Sub, names: HashMap<ValueId, String>) -> Result<String, CodegenError> {
    let blob = std::mem::take(&mut cx.weights.borrow_mut().blob);
    let mut wl = WeightsLayout { offsets: HashMap::new(), packed: HashMap::new(), blob };
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
        match emit_node(&bcx, nid) {
            Ok(Some(stmts)) => {
                let label = block_label(&sub.g.node(nid).name, &mut labels);
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
    let (d, s) = fixed(&sub.g, v)?;
    let t = rust_ty(d).ok_or_else(|| format!("dtype {d} is not supported by codegen yet"))?;
    let slot = sub.plan.slots.get(&v).ok_or_else(|| format!("`{}` has no arena slot", sub.g.value(v).name))?;
    let f = if mutable { "view_mut" } else { "view" };
    Ok(format!("unsafe {{ rt::arena::{f}::<{t}>({base}, {}, {}) }}", slot.offset, s.iter().product::<usize>()))
}

fn emit_scan(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let p = scan_plan(cx.g, n, cx.lowering).map_err(|e| cx.err(n, e))?;
    let e = |m: String| cx.err(n, m);
    let scr = cx.plan.scratch.get(&id).ok_or_else(|| e("no scratch slot".into()))?.offset;
    let sub = &p.sub;
    let tag = format!("scan{}", id.0);
    let mut names = HashMap::new();
    let mut s = bind_outer(cx, n, &sub.g, &tag, &mut names)?;
    let _ = writeln!(s, "let {tag}_base = a.at({scr});");
    // States live in scratch buffers across iterations.
    let view_at = |v: ValueId, off: usize, mutable: bool| -> Result<String, CodegenError> {
        let (d, shape) = fixed(&sub.g, v).map_err(e)?;
        let t = rust_ty(d).ok_or_else(|| cx.err(n, format!("dtype {d} is not supported by codegen yet")))?;
        let f = if mutable { "view_mut" } else { "view" };
        Ok(format!("unsafe {{ rt::arena::{f}::<{t}>(a, {}, {}) }}", scr + off, shape.iter().product::<usize>()))
    };
    for i in 0..p.n_state {
        let src = n.inputs[i].ok_or_else(|| cx.err(n, format!("state input #{i} is missing")))?;
        let _ = writeln!(s, "{}.copy_from_slice({});", view_at(sub.g.inputs[i], p.state_off[i], true)?, cx.read(n, src)?);
    }
    let _ = writeln!(s, "for it in 0..{}usize {{", p.len);
    for (j, &(outer, inner, rev)) in p.ins.iter().enumerate() {
        let x = n.inputs[p.n_state + j].ok_or_else(|| cx.err(n, "scan input missing"))?;
        let pos = if rev { format!("{} - it", p.len - 1) } else { "it".into() };
        let dst = view_at(sub.g.inputs[p.n_state + j], p.slice_off[j], true)?;
        let _ = writeln!(s, "rt::kernels::slab::take({}, {outer}, {}, {inner}, {pos}, {dst});", cx.read(n, x)?, p.len);
    }
    // The body, with its inputs bound and `a` naming its arena.
    let _ = writeln!(s, "{{");
    for (i, &bi) in sub.g.inputs.iter().enumerate() {
        let off = if i < p.n_state { p.state_off[i] } else { p.slice_off[i - p.n_state] };
        let name = format!("{tag}_in_{i}");
        let _ = writeln!(s, "let {name} = {};", view_at(bi, off, false)?);
        names.insert(bi, name);
    }
    let _ = writeln!(s, "let a = {tag}_base;");
    s += &emit_sub(cx, sub, names)?;
    let _ = writeln!(s, "}}");
    // Outputs: new states back into their buffers, scan outputs into their slabs.
    for i in 0..p.n_state {
        let bo = sub.g.outputs[i];
        let _ = writeln!(
            s,
            "{}.copy_from_slice({});",
            view_at(sub.g.inputs[i], p.state_off[i], true)?,
            sub_view(sub, bo, &format!("{tag}_base"), false).map_err(e)?
        );
    }
    for (k, &(outer, inner, rev)) in p.outs.iter().enumerate() {
        let o = n.outputs[p.n_state + k];
        if !cx.plan.slots.contains_key(&o) {
            continue;
        }
        let pos = if rev { format!("{} - it", p.len - 1) } else { "it".into() };
        let src = sub_view(sub, sub.g.outputs[p.n_state + k], &format!("{tag}_base"), false).map_err(e)?;
        let _ = writeln!(s, "rt::kernels::slab::put({src}, {outer}, {}, {inner}, {pos}, {});", p.len, cx.write(n, o)?);
    }
    let _ = writeln!(s, "}}");
    for i in 0..p.n_state {
        let o = n.outputs[i];
        if cx.plan.slots.contains_key(&o) {
            let _ = writeln!(s, "{}.copy_from_slice({});", cx.write(n, o)?, view_at(sub.g.inputs[i], p.state_off[i], false)?);
        }
    }
    Ok(Some(s))
}
