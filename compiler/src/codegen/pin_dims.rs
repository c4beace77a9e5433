//! Where the named dims of a bounded module are pinned for planning: at their bounds, or
//! lower where the graph's constraints allow only smaller values (a dim an op fixes, a product a
//! constant Reshape target fixes, a relation found by search), and the check that every analysed
//! shape is the static one at those pins.

use super::bounded::graph_err;
use super::CodegenError;
use crate::ir::{DimExpr, Graph, Op, ValueId, ValueKind};
use crate::passes::symbolic::SymInfo;
use std::collections::HashMap;

/// Every analysed shape must be the static one at the bounds, Scan bodies' too; the bytes of
/// each buffer whose size can be larger below the bounds (its largest over the box). A body's
/// buffers are planned at the bounds, so there such a size is refused.
pub(super) fn check_at_bounds(g: &Graph, info: &SymInfo, bound: &dyn Fn(&str) -> Option<i64>, range: &dyn Fn(&str) -> Option<(i64, i64)>) -> Result<HashMap<ValueId, usize>, CodegenError> {
    let mut most: HashMap<ValueId, usize> = HashMap::new();
    for (v, ex) in &info.shapes {
        if let Some(e) = ex.iter().find(|e| !e.is_monotone()) {
            let name = &g.value(*v).name;
            // A constant (a fill folded at the bounds) has its size at the bounds.
            if !matches!(g.value(*v).kind, ValueKind::Node(_)) {
                return Err(graph_err(format!("value `{name}`"), format!("has a size {e} that can shrink as a bounded dim grows; pin the dims with --input")));
            }
            let elems = ex.iter().try_fold(1usize, |a, e| a.checked_mul(usize::try_from(e.max_over(range)?.max(1)).ok()?));
            let dt = g.tensor_type(*v).map_or(1, |t| t.dtype.size());
            let bytes = elems.and_then(|n| n.checked_mul(dt)).ok_or_else(|| graph_err(format!("value `{name}`"), "is too large within the bounds"))?;
            most.insert(*v, bytes);
        }
        let at_bound: Option<Vec<usize>> = ex.iter().map(|e| e.eval(&bound).map(|x| x.max(0) as usize)).collect();
        let fixed = g.tensor_type(*v).and_then(|t| t.shape.as_ref()?.as_fixed());
        if at_bound != fixed {
            return Err(graph_err(
                format!("value `{}`", g.value(*v).name),
                format!("has shape {fixed:?} at the bounds but {:?} by the bounded-dims analysis (a size was folded at the bound)", ex.iter().map(|e| e.to_string()).collect::<Vec<_>>()),
            ));
        }
    }
    for (&id, sub) in &info.subs {
        if let Op::Scan { body, .. } = &g.node(id).op {
            let body = super::with_output_copies(body).unwrap_or_else(|| (**body).clone());
            if let Some(v) = check_at_bounds(&body, sub, bound, range)?.keys().next() {
                return Err(graph_err(format!("value `{}`", body.value(*v).name), "in a Scan body has a size that can shrink as a bounded dim grows; pin the dims with --input"));
            }
        }
    }
    Ok(most)
}

/// `e` at the pinned dims, as a constant (itself when a dim has no value).
pub(super) fn constant_at(e: &DimExpr, bound: &dyn Fn(&str) -> Option<i64>) -> DimExpr {
    e.eval(bound).map_or_else(|| e.clone(), DimExpr::constant)
}

/// Named dims an op allows only one value (a grid's last dim must be its spatial rank, a past
/// key's heads K's, a batch a constant Reshape target fixes), a point of a product a constant
/// Reshape target fixes ([`product_point`]), or less than their bound (a past state one step shorter than a bounded
/// kernel): pinned at that value rather than at the bound, where the graph would not be
/// valid; `forward` still checks the value (the constraint stays). Found in the bounded
/// analysis of the unpinned graph.
pub(super) fn forced_dims(g: &Graph, info: &SymInfo, dims: &[(String, usize)]) -> Result<HashMap<String, i64>, CodegenError> {
    let mut forced = HashMap::new();
    let mut products = Vec::new();
    for c in info.constraints.iter().filter(|c| c.rel == crate::ir::Rel::Equal) {
        // `a · d == k` (a batch that a constant Reshape target fixes) or a product of dims,
        // after cancelling the dims both sides share (dims are at least 1).
        let (Some((ca, mut va)), Some((cb, mut vb))) = (c.left.as_monomial(), c.right.as_monomial()) else { continue };
        for v in va.clone() {
            if let (Some(i), Some(j)) = (va.iter().position(|x| *x == v), vb.iter().position(|x| *x == v)) {
                va.remove(i);
                vb.remove(j);
            }
        }
        let (a, vars, k) = match (va.is_empty(), vb.is_empty()) {
            (false, true) => (ca, va, cb),
            (true, false) => (cb, vb, ca),
            _ => continue,
        };
        if a < 1 {
            continue;
        }
        let e = DimExpr::constant(a).mul(&vars.iter().fold(DimExpr::constant(1), |p, v| p.mul(&DimExpr::var(v))));
        if vars.len() > 1 {
            if k % a == 0 {
                products.push((vars, k / a));
            }
            continue;
        }
        let Some((name, b)) = dims.iter().find(|(n, _)| vars.first() == Some(n)) else { continue };
        if k % a != 0 || k / a < 1 || k / a > *b as i64 {
            return Err(graph_err(format!("dim `{name}`"), format!("must make {e} equal {k} ({}), which no value in 1..={b} does", c.what)));
        }
        forced.insert(name.clone(), k / a);
    }
    for (vars, k) in products {
        if let Some(point) = product_point(g, info, dims, &forced, &vars, k) {
            forced.extend(point);
        }
    }
    // `d == R(other dims)` with R monotone: d never exceeds R at the others' bounds, so a
    // smaller value than d's bound is where the graph is valid; nor, for `a·d + e <= R`
    // (a > 0: a kernel that must fit its input), (R − e) / a. Each pin lowers a dim, so this
    // ends.
    let limit = |forced: &HashMap<String, i64>, n: &str| forced.get(n).copied().or_else(|| dims.iter().find(|(d, _)| d == n).map(|(_, b)| *b as i64));
    let mut changed = true;
    while changed {
        changed = false;
        for c in info.constraints.iter().filter(|c| c.rel == crate::ir::Rel::Equal) {
            let diff = c.left.sub(&c.right);
            for (name, _) in dims {
                let v = DimExpr::var(name);
                let r = if !diff.sub(&v).vars().contains(name) {
                    diff.sub(&v).scale(-1)
                } else if !diff.add(&v).vars().contains(name) {
                    diff.add(&v)
                } else {
                    continue;
                };
                if r.as_const().is_some() || !r.is_monotone() {
                    continue;
                }
                let (Some(at), Some(now)) = (r.eval(&|n| limit(&forced, n)), limit(&forced, name)) else { continue };
                if (1..now).contains(&at) {
                    forced.insert(name.clone(), at);
                    changed = true;
                }
            }
        }
        for c in info.constraints.iter().filter(|c| c.rel == crate::ir::Rel::AtMost) {
            for (name, _) in dims {
                let e = c.left.substitute(name, &DimExpr::constant(0));
                let Some(a) = c.left.sub(&e).exact_div(&DimExpr::var(name)).and_then(|a| a.as_const()) else { continue };
                let r = c.right.sub(&e);
                if a < 1 || c.right.vars().contains(name) || r.as_const().is_some() || !r.is_monotone() {
                    continue;
                }
                let (Some(at), Some(now)) = (r.eval(&|n| limit(&forced, n)), limit(&forced, name)) else { continue };
                if (1..now).contains(&at.div_euclid(a)) {
                    forced.insert(name.clone(), at.div_euclid(a));
                    changed = true;
                }
            }
        }
        if !changed {
            // What the rules above cannot solve (floors of windows, products of them), searched.
            for c in &info.constraints {
                let failing = c.rel != crate::ir::Rel::Divides && c.holds_at(&|n| limit(&forced, n)) == Some(false);
                if let Some(point) = failing.then(|| dominating_point(info, c, dims, &|n| limit(&forced, n))).transpose()?.flatten() {
                    forced.extend(point);
                    changed = true;
                    break;
                }
            }
        }
    }
    Ok(forced)
}

/// The dims of `c`, which fails at their limits, at the greatest point where it and every other
/// constraint over those dims alone hold, when that point is at or above every such point (a
/// dense head's `16·⌊⌊h/2⌋/2⌋·⌊⌊w/2⌋/2⌋ == 784` holds for h, w in 28..=31: pinned at 31, 31). Every
/// size `forward` accepts is then within the pins, where the plan is made. Searched over the box
/// of the dims' values when it is small; `None` when it is not, or no such point exists (the dims
/// stay at their limits and the graph's own check reports the conflict). An error when nothing in
/// the box satisfies the constraints.
fn dominating_point(info: &SymInfo, c: &crate::ir::Constraint, dims: &[(String, usize)], limit: &dyn Fn(&str) -> Option<i64>) -> Result<Option<Vec<(String, i64)>>, CodegenError> {
    const MOST_POINTS: i64 = 1 << 20;
    let vars: Vec<String> = c.left.vars().union(&c.right.vars()).cloned().collect();
    if vars.is_empty() || vars.iter().any(|v| !dims.iter().any(|(d, _)| d == v)) {
        return Ok(None);
    }
    let Some(lims) = vars.iter().map(|v| limit(v).filter(|&l| l >= 1)).collect::<Option<Vec<i64>>>() else { return Ok(None) };
    if lims.iter().try_fold(1i64, |a, &l| a.checked_mul(l).filter(|&p| p <= MOST_POINTS)).is_none() {
        return Ok(None);
    }
    let over_vars = |k: &crate::ir::Constraint| k.left.vars().union(&k.right.vars()).all(|v| vars.contains(v));
    let related: Vec<&crate::ir::Constraint> = info.constraints.iter().filter(|k| over_vars(k)).collect();
    let mut point = vec![1i64; vars.len()];
    let mut top: Option<Vec<i64>> = None;
    loop {
        let val = |n: &str| vars.iter().position(|v| v == n).map(|i| point[i]);
        if related.iter().all(|k| k.holds_at(&val) == Some(true)) {
            top = Some(match top {
                Some(t) => t.iter().zip(&point).map(|(a, b)| *a.max(b)).collect(),
                None => point.clone(),
            });
        }
        // The next point of the box, odometer order.
        let Some(i) = (0..point.len()).find(|&i| point[i] < lims[i]) else { break };
        point[i] += 1;
        point[..i].fill(1);
    }
    let Some(top) = top else {
        let box_text = vars.iter().zip(&lims).map(|(v, l)| format!("{v} in 1..={l}")).collect::<Vec<_>>().join(", ");
        return Err(graph_err(c.what.clone(), format!("cannot hold for any size within the bounds ({box_text}): {}", c.failure_at(limit))));
    };
    let val = |n: &str| vars.iter().position(|v| v == n).map(|i| top[i]);
    if !related.iter().all(|k| k.holds_at(&val) == Some(true)) {
        return Ok(None);
    }
    Ok(Some(vars.into_iter().zip(top).collect()))
}

/// Values of the distinct named dims `vars` whose product is `k` (a constant Reshape target of
/// a bounded input), each within its bound, where no single point dominates every allowed one.
/// Pinned there only when that is sound: every arena buffer whose size depends on them holds a
/// multiple of their product (the same at every allowed point; graph inputs are the caller's),
/// and no node that needs scratch reads them (a Conv's im2col is sized from single dims).
/// `None` leaves them at their bounds.
fn product_point(g: &Graph, info: &SymInfo, dims: &[(String, usize)], forced: &HashMap<String, i64>, vars: &[String], k: i64) -> Option<HashMap<String, i64>> {
    let mut sorted = vars.to_vec();
    sorted.sort();
    sorted.dedup();
    if sorted.len() != vars.len() || vars.iter().any(|v| forced.contains_key(v)) {
        return None;
    }
    for (v, ex) in &info.shapes {
        if !ex.iter().any(|e| e.vars().iter().any(|n| sorted.contains(n))) || matches!(g.value(*v).kind, ValueKind::Input) {
            continue;
        }
        let size = forced.iter().fold(ex.iter().fold(DimExpr::constant(1), |a, d| a.mul(d)), |e, (n, v)| e.substitute(n, &DimExpr::constant(*v)));
        let (_, mut of) = size.as_monomial()?;
        of.sort();
        if of != sorted {
            return None;
        }
    }
    let depends = |v: &ValueId| info.shapes.get(v).is_some_and(|ex| ex.iter().any(|e| e.vars().iter().any(|n| sorted.contains(n))));
    // Scratch is sized from single dims, not their product: a node that takes any (at the
    // bounds, where it is largest) keeps the dims at their bounds.
    let bound_of = |n: &str| forced.get(n).copied().or_else(|| dims.iter().find(|(d, _)| d == n).map(|(_, b)| *b as i64));
    let at_bounds = |v: ValueId| -> Option<(crate::ir::DType, Vec<usize>)> {
        let dt = g.tensor_type(v)?.dtype;
        let shape = match info.shapes.get(&v) {
            Some(ex) => ex.iter().map(|e| e.eval(&bound_of).map(|x| x.max(0) as usize)).collect::<Option<Vec<_>>>()?,
            None => g.tensor_type(v)?.shape.as_ref()?.as_fixed()?,
        };
        Some((dt, shape))
    };
    let needs_scratch = |n: &crate::ir::Node| match &n.op {
        Op::Def(d) => d.scratch_bytes(&n.inputs.iter().map(|v| at_bounds((*v)?)).collect::<Vec<_>>()) > 0,
        op => {
            matches!(op, Op::Conv { .. } | Op::FusedConv { .. })
                || !op.subgraphs().is_empty()
        }
    };
    if g.nodes.iter().any(|n| n.inputs.iter().flatten().any(depends) && needs_scratch(n)) {
        return None;
    }
    let bounds: Vec<i64> = vars.iter().map(|v| dims.iter().find(|(n, _)| n == v).map(|(_, b)| *b as i64)).collect::<Option<_>>()?;
    // Depth-first over divisors, largest first; the budget keeps huge bounds cheap.
    fn go(bounds: &[i64], rest: i64, out: &mut Vec<i64>, budget: &mut u32) -> bool {
        let Some((&b, more)) = bounds.split_first() else { return rest == 1 };
        let mut d = b.min(rest);
        while d >= 1 {
            *budget = budget.saturating_sub(1);
            if *budget == 0 {
                return false;
            }
            if rest % d == 0 {
                out.push(d);
                if go(more, rest / d, out, budget) {
                    return true;
                }
                out.pop();
            }
            d -= 1;
        }
        false
    }
    let mut point = Vec::new();
    if k < 1 || !go(&bounds, k, &mut point, &mut 100_000) {
        return None;
    }
    Some(vars.iter().cloned().zip(point).collect())
}

