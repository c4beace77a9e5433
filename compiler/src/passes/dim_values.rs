//! Bounded dims: a shape computation whose values reach data (a graph output, a Cast to float,
//! a comparison) gets a [`DimValues`] node that computes them from the run-time dims, since
//! the graph is pinned at the bounds before it folds (see `ops::dim_values`).
use super::fold::renumber;
use super::symbolic::{analyze_at, Targets};
use super::PassError;
use crate::ir::{DimExpr, Graph, Node, Op, ValueId, ValueType};
use crate::ops::dim_values::DimValues;
use crate::ops::OpRef;
use std::collections::{BTreeSet, HashMap, HashSet};

/// Give each dim-valued value that a node reads as data, or that is a graph output, a
/// `DimValues` node reading the graph inputs its dims come from, and point those readers and
/// outputs at it (an output keeps its name). Shape readers keep the symbolic value. Returns how
/// many values were made; a value whose dims have no input to come from is left as it is (the
/// bounded analysis refuses it by name). Comparisons of dims are decided at `at`.
pub fn materialize(g: &mut Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>, at: &HashMap<String, i64>) -> Result<usize, PassError> {
    let info = analyze_at(g, inputs, &Targets::new(), at)?;
    // Each named dim from the first input axis that is exactly it.
    let mut source: HashMap<String, (ValueId, usize)> = HashMap::new();
    for &x in &g.inputs {
        for (a, d) in inputs.get(&x).into_iter().flatten().enumerate() {
            if let Some(name) = d.vars().into_iter().next().filter(|n| *d == DimExpr::var(n)) {
                source.entry(name).or_insert((x, a));
            }
        }
    }
    let mut wanted: Vec<ValueId> = Vec::new();
    let mut readers: Vec<(usize, usize, ValueId)> = Vec::new();
    for (ni, n) in g.nodes.iter().enumerate() {
        for (i, v) in n.inputs.iter().enumerate() {
            if let Some(v) = v.filter(|&v| info.dim_valued(v) && !info.reads_as_shape(n, i)) {
                readers.push((ni, i, v));
                if !wanted.contains(&v) {
                    wanted.push(v);
                }
            }
        }
    }
    for &o in &g.outputs {
        if info.dim_valued(o) && !wanted.contains(&o) {
            wanted.push(o);
        }
    }

    let mut node_names: HashSet<String> = g.nodes.iter().map(|n| n.name.clone()).collect();
    let mut made: HashMap<ValueId, ValueId> = HashMap::new();
    let mut new_nodes: Vec<Node> = Vec::new();
    for v in wanted {
        let Some(op) = values_op(g, &info.ints[&v], v, &source) else { continue };
        let (op, srcs) = op;
        let base = format!("{}_dims", g.value(v).name);
        let mut name = base.clone();
        let mut k = 1;
        while !node_names.insert(name.clone()) {
            k += 1;
            name = format!("{base}_{k}");
        }
        let ty = g.value(v).ty.clone();
        let (nid, outs) = g.add_node(name.clone(), Op::Def(OpRef::new(op)), srcs.into_iter().map(Some).collect(), &[name]);
        g.value_mut(outs[0]).ty = ty;
        new_nodes.push(g.nodes.remove(nid.0 as usize));
        made.insert(v, outs[0]);
    }
    for (ni, i, v) in readers {
        if let Some(&m) = made.get(&v) {
            g.nodes[ni].inputs[i] = Some(m);
        }
    }
    for k in 0..g.outputs.len() {
        if let Some(&m) = made.get(&g.outputs[k]) {
            // The output keeps its name; the symbolic value (if shape readers remain) takes the other.
            let old = g.outputs[k];
            let (a, b) = (g.value(old).name.clone(), g.value(m).name.clone());
            g.value_mut(old).name = b;
            g.value_mut(m).name = a;
            g.outputs[k] = m;
        }
    }
    // Their inputs are graph inputs: first in the schedule.
    let count = new_nodes.len();
    g.nodes.splice(0..0, new_nodes);
    renumber(g);
    Ok(count)
}

/// The `DimValues` op for value `v` (its `ints` from the analysis) and the graph inputs it reads.
fn values_op(g: &Graph, ints: &[DimExpr], v: ValueId, source: &HashMap<String, (ValueId, usize)>) -> Option<(DimValues, Vec<ValueId>)> {
    let ValueType::Tensor(t) = &g.value(v).ty else { return None };
    let rank = t.shape.as_ref()?.0.len();
    if !DimValues::holds(t.dtype) || rank > 1 || (rank == 0 && ints.len() != 1) {
        return None;
    }
    let names: BTreeSet<String> = ints.iter().flat_map(|e| e.vars()).collect();
    let mut srcs: Vec<ValueId> = Vec::new();
    let mut dims = Vec::new();
    for name in names {
        let &(x, a) = source.get(&name)?;
        let k = srcs.iter().position(|&s| s == x).unwrap_or_else(|| {
            srcs.push(x);
            srcs.len() - 1
        });
        dims.push((name, k, a));
    }
    Some((DimValues { values: ints.to_vec(), dims, scalar: rank == 0, dtype: t.dtype }, srcs))
}
