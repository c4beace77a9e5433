//! Node order for execution: a topological order of the graph chosen to lower peak live bytes.
//!
//! Greedy list scheduling: among the ready nodes, run the one whose net allocation (bytes it
//! allocates minus bytes it frees) is smallest; ties go to the node that comes first in the
//! graph. The greedy order is kept only when its simulated peak beats the graph's own order, so
//! scheduling never makes a model worse. Deterministic.
use crate::ir::{Graph, NodeId, ValueId, ValueKind};
use std::collections::{BTreeSet, HashMap};

/// A topological order of `g.nodes` chosen to lower peak live bytes.
pub fn schedule(g: &Graph) -> Vec<NodeId> {
    let info = Liveness::new(g);
    let original: Vec<NodeId> = (0..g.nodes.len() as u32).map(NodeId).collect();
    let greedy = info.greedy(g);
    if info.peak(&greedy) < info.peak(&original) {
        greedy
    } else {
        original
    }
}

/// Whether node `n`'s output 0 is a free view of its input 0 (same bytes), when input 0 is a node
/// output: the op is a view ([`Op::is_view`]) and the sizes agree.
pub(crate) fn alias_source(g: &Graph, n: NodeId) -> Option<ValueId> {
    let node = g.node(n);
    if !node.op.is_view() || node.outputs.is_empty() {
        return None;
    }
    let src = (*node.inputs.first()?)?;
    if !matches!(g.value(src).kind, ValueKind::Node(_)) {
        return None;
    }
    // Same byte size (a view); anything else gets its own buffer.
    let (a, b) = (value_bytes(g, src)?, value_bytes(g, node.outputs[0])?);
    (a == b).then_some(src)
}

/// Bytes of a value with a tensor type and fully static shape.
pub(crate) fn value_bytes(g: &Graph, v: ValueId) -> Option<usize> {
    let t = g.tensor_type(v)?;
    Some(t.shape.as_ref()?.numel()? * t.dtype.size())
}

/// Every value a node reads: its inputs, plus for If/Loop/Scan/SequenceMap the values of `g`
/// their bodies name as outer values (bodies read outer values by name). Deduplicated, in order.
pub(crate) fn node_uses(g: &Graph, names: &HashMap<&str, ValueId>, n: NodeId) -> Vec<ValueId> {
    let node = g.node(n);
    let mut uses: Vec<ValueId> = Vec::new();
    for v in node.inputs.iter().flatten() {
        if !uses.contains(v) {
            uses.push(*v);
        }
    }
    let mut outer = Vec::new();
    for body in node.op.subgraphs() {
        collect_outer_names(body, &mut outer);
    }
    for name in outer {
        if let Some(&v) = names.get(name.as_str()) {
            if !uses.contains(&v) {
                uses.push(v);
            }
        }
    }
    uses
}


fn collect_outer_names(body: &Graph, out: &mut Vec<String>) {
    for v in &body.values {
        if matches!(v.kind, ValueKind::Outer) {
            out.push(v.name.clone());
        }
    }
    // Nested bodies may name values of any enclosing scope.
    for n in &body.nodes {
        for sub in n.op.subgraphs() {
            collect_outer_names(sub, out);
        }
    }
}

pub(crate) fn name_map(g: &Graph) -> HashMap<&str, ValueId> {
    let mut m = HashMap::new();
    for (i, v) in g.values.iter().enumerate() {
        m.entry(v.name.as_str()).or_insert(ValueId(i as u32));
    }
    m
}

/// Static facts the scheduler needs: which buffer (alias root) each value lives in, buffer sizes,
/// and how many (node, value) reads each buffer gets.
struct Liveness {
    /// Per node: the values it reads.
    uses: Vec<Vec<ValueId>>,
    /// Per node: its outputs.
    outputs: Vec<Vec<ValueId>>,
    /// Per node: predecessor nodes (deduplicated).
    preds: Vec<Vec<usize>>,
    /// value -> buffer root (itself unless an alias).
    root: HashMap<ValueId, ValueId>,
    /// Bytes of each root buffer (node outputs only; 0 when unknown).
    size: HashMap<ValueId, usize>,
    /// Total reads of each root buffer over all its member values.
    reads: HashMap<ValueId, usize>,
    /// Roots that hold a graph output: never freed.
    pinned: BTreeSet<ValueId>,
}

impl Liveness {
    fn new(g: &Graph) -> Liveness {
        let names = name_map(g);
        let mut root = HashMap::new();
        let mut size = HashMap::new();
        let mut uses = Vec::with_capacity(g.nodes.len());
        let mut preds = Vec::with_capacity(g.nodes.len());
        let mut reads: HashMap<ValueId, usize> = HashMap::new();
        // Nodes are in topological order, so an alias's source root is known before it.
        for i in 0..g.nodes.len() {
            let n = NodeId(i as u32);
            let alias = alias_source(g, n);
            for (k, &o) in g.node(n).outputs.iter().enumerate() {
                match alias.filter(|_| k == 0) {
                    Some(src) => {
                        let r = *root.get(&src).unwrap_or(&src);
                        root.insert(o, r);
                    }
                    None => {
                        root.insert(o, o);
                        size.insert(o, value_bytes(g, o).unwrap_or(0));
                    }
                }
            }
        }
        for i in 0..g.nodes.len() {
            let n = NodeId(i as u32);
            let u = node_uses(g, &names, n);
            let mut p: Vec<usize> = Vec::new();
            for v in &u {
                if let ValueKind::Node(pn) = g.value(*v).kind {
                    if !p.contains(&(pn.0 as usize)) && pn.0 as usize != i {
                        p.push(pn.0 as usize);
                    }
                }
                if let Some(r) = root.get(v) {
                    *reads.entry(*r).or_insert(0) += 1;
                }
            }
            uses.push(u);
            preds.push(p);
        }
        // A node that overwrites an input (an optimizer update in place) runs after every other
        // node reading that value. Graph order already satisfies this (updates come last), so
        // the fallback order stays valid.
        for i in 0..g.nodes.len() {
            let node = &g.nodes[i];
            for &k in node.op.mutated_inputs() {
                let Some(Some(v)) = node.inputs.get(k) else { continue };
                for (j, u) in uses.iter().enumerate() {
                    if j != i && u.contains(v) && !preds[i].contains(&j) {
                        preds[i].push(j);
                    }
                }
            }
        }
        let pinned = g.outputs.iter().filter_map(|v| root.get(v).copied()).collect();
        Liveness { uses, outputs: g.nodes.iter().map(|n| n.outputs.clone()).collect(), preds, root, size, reads, pinned }
    }

    /// (bytes allocated, bytes freed) when node `i` runs, given the remaining reads per root.
    fn effect(&self, i: usize, remaining: &HashMap<ValueId, usize>) -> (usize, usize) {
        let alloc: usize = self.outputs[i].iter().filter_map(|o| self.size.get(o)).sum();
        let mut mine: Vec<(ValueId, usize)> = Vec::new();
        for v in &self.uses[i] {
            if let Some(&r) = self.root.get(v) {
                match mine.iter_mut().find(|(x, _)| *x == r) {
                    Some(e) => e.1 += 1,
                    None => mine.push((r, 1)),
                }
            }
        }
        let freed = mine
            .iter()
            .filter(|(r, c)| !self.pinned.contains(r) && remaining.get(r).copied().unwrap_or(0) == *c)
            .map(|(r, _)| self.size.get(r).copied().unwrap_or(0))
            .sum();
        (alloc, freed)
    }

    fn apply(&self, i: usize, remaining: &mut HashMap<ValueId, usize>) {
        for v in &self.uses[i] {
            if let Some(r) = self.root.get(v) {
                if let Some(c) = remaining.get_mut(r) {
                    *c = c.saturating_sub(1);
                }
            }
        }
    }

    /// Simulated peak of live bytes for an order (outputs allocated while inputs are still live).
    fn peak(&self, order: &[NodeId]) -> usize {
        let mut remaining = self.reads.clone();
        let (mut live, mut peak) = (0usize, 0usize);
        for n in order {
            let i = n.0 as usize;
            let (alloc, freed) = self.effect(i, &remaining);
            live += alloc;
            peak = peak.max(live);
            live -= freed.min(live);
            self.apply(i, &mut remaining);
        }
        peak
    }

    fn greedy(&self, g: &Graph) -> Vec<NodeId> {
        let n = g.nodes.len();
        let mut indeg: Vec<usize> = self.preds.iter().map(Vec::len).collect();
        let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, p) in self.preds.iter().enumerate() {
            for &j in p {
                succs[j].push(i);
            }
        }
        let mut ready: BTreeSet<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
        let mut remaining = self.reads.clone();
        let mut order = Vec::with_capacity(n);
        while !ready.is_empty() {
            let mut best: Option<(i64, usize)> = None;
            for &i in &ready {
                let (alloc, freed) = self.effect(i, &remaining);
                let score = alloc as i64 - freed as i64;
                if best.is_none_or(|(s, _)| score < s) {
                    best = Some((score, i));
                }
            }
            let (_, i) = best.expect("ready is not empty");
            ready.remove(&i);
            self.apply(i, &mut remaining);
            order.push(NodeId(i as u32));
            for &s in &succs[i] {
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    ready.insert(s);
                }
            }
        }
        // A cycle (never in a verified graph) leaves nodes unscheduled: fall back to graph order.
        if order.len() != n {
            return (0..n as u32).map(NodeId).collect();
        }
        order
    }
}
