//! Dead code elimination: nodes none of whose outputs reach a graph output go, then values
//! nothing refers to (unused constants and weights, outputs of removed nodes). Graph inputs stay.
//! Subgraphs (If/Loop/Scan bodies) read enclosing values by name; those values are kept.
use super::fold::renumber;
use super::PassError;
use crate::ir::{Graph, Op, ValueId, ValueKind};
use std::collections::{HashMap, HashSet};

pub fn dce(g: &mut Graph) -> Result<(), PassError> {
    let nv = g.values.len();
    let mut live = vec![false; nv];
    for &o in &g.outputs {
        live[o.0 as usize] = true;
    }
    // Latest value of each name, for subgraph references.
    let mut by_name: HashMap<&str, ValueId> = HashMap::new();
    for (i, v) in g.values.iter().enumerate() {
        by_name.insert(v.name.as_str(), ValueId(i as u32));
    }
    let mut keep_node = vec![false; g.nodes.len()];
    for (ni, n) in g.nodes.iter().enumerate().rev() {
        if !n.outputs.iter().any(|o| live[o.0 as usize]) {
            continue;
        }
        keep_node[ni] = true;
        for v in n.inputs.iter().flatten() {
            live[v.0 as usize] = true;
        }
        let mut names = HashSet::new();
        outer_names(&n.op, &mut names);
        for name in names {
            if let Some(v) = by_name.get(name.as_str()) {
                live[v.0 as usize] = true;
            }
        }
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().zip(keep_node).filter(|(_, k)| *k).map(|(n, _)| n).collect();

    // Compact values: keep inputs, Outer values, and everything the kept nodes touch.
    let mut keep = live;
    for &i in &g.inputs {
        keep[i.0 as usize] = true;
    }
    for n in &g.nodes {
        for o in &n.outputs {
            keep[o.0 as usize] = true;
        }
    }
    for (i, v) in g.values.iter().enumerate() {
        if matches!(v.kind, ValueKind::Outer) {
            keep[i] = true;
        }
    }
    if keep.iter().all(|&k| k) {
        renumber(g);
        return Ok(());
    }
    let mut remap = vec![None; nv];
    let mut next = 0u32;
    for (i, &k) in keep.iter().enumerate() {
        if k {
            remap[i] = Some(ValueId(next));
            next += 1;
        }
    }
    let values = std::mem::take(&mut g.values);
    g.values = values.into_iter().zip(&keep).filter(|(_, k)| **k).map(|(v, _)| v).collect();
    let m = |v: &mut ValueId| *v = remap[v.0 as usize].expect("kept value");
    for n in &mut g.nodes {
        n.inputs.iter_mut().flatten().for_each(m);
        n.outputs.iter_mut().for_each(m);
    }
    g.inputs.iter_mut().for_each(m);
    g.outputs.iter_mut().for_each(m);
    renumber(g);
    Ok(())
}

/// Names a node's subgraphs read from enclosing graphs (recursively).
pub(super) fn outer_names(op: &Op, out: &mut HashSet<String>) {
    for sg in op.subgraphs() {
        for v in &sg.values {
            if matches!(v.kind, ValueKind::Outer) {
                out.insert(v.name.clone());
            }
        }
        for n in &sg.nodes {
            outer_names(&n.op, out);
        }
    }
}
