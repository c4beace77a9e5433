//! The memory plan: every node output lives in one arena at an offset decided here.
//!
//! Steps: a schedule (see [`crate::schedule`]), buffers (views such as Reshape alias their input's
//! buffer; elementwise ops may run in place over an input that dies with them), liveness
//! intervals over the schedule, then offsets by greedy-by-size packing: largest buffer first, each
//! at the lowest `ALIGN`-aligned offset free for its whole interval. Weights (Param/Const) and graph
//! inputs are not in the arena.
use crate::ir::{Graph, NodeId, ValueId, ValueKind, ValueType};
use crate::schedule::{alias_source, name_map, node_uses, schedule, value_bytes};
use std::collections::{HashMap, HashSet};
use thiserror::Error;

/// Alignment of every arena slot, in bytes.
pub const ALIGN: usize = 64;

/// A region of the arena. `bytes` is the value's own size; slots are spaced by `bytes` rounded up
/// to [`ALIGN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub offset: usize,
    pub bytes: usize,
}

pub struct PlanOptions<'a> {
    /// Extra temporary bytes a node needs while it runs (e.g. im2col buffer), given by codegen.
    pub scratch: &'a dyn Fn(&Graph, NodeId) -> usize,
    /// Whether node `n`'s output 0 may reuse input `i`'s buffer in place. Only asked when input `i`
    /// is a node output whose buffer dies at `n`, is no graph output, and has output 0's size.
    pub can_inplace: &'a dyn Fn(&Graph, NodeId, usize) -> bool,
    /// Values node `n` reads besides its inputs (kept live through it): a node whose work
    /// another's kernel does early reads what that kernel reads.
    pub also_reads: &'a dyn Fn(&Graph, NodeId) -> Vec<ValueId>,
    /// Bytes of a node output in place of its static size (bounded codegen sizes a buffer
    /// for the largest size within the bounds, which need not be the size at the bounds).
    pub bytes: &'a dyn Fn(&Graph, ValueId) -> Option<usize>,
    /// The most bytes the arena may take ([`crate::size::DEFAULT_MAX_ARENA_BYTES`] unless the
    /// user sets `--max-arena`); a plan above it is an error naming the largest buffer.
    pub max_arena: usize,
    /// Inputs that node `n`'s output 0 holds unchanged as one contiguous run, as (input index,
    /// byte offset): a Concat whose dims before its axis are all 1. The plan gives such an
    /// input its place there where it can ([`placements`]), so its producer writes it in place
    /// and `n` copies nothing for it ([`MemoryPlan::placed`]).
    pub holds: &'a dyn Fn(&Graph, NodeId) -> Vec<(usize, usize)>,
}

impl Default for PlanOptions<'_> {
    fn default() -> Self {
        PlanOptions { scratch: &|_, _| 0, can_inplace: &|_, _, _| false, also_reads: &|_, _| Vec::new(), bytes: &|_, _| None, max_arena: crate::size::DEFAULT_MAX_ARENA_BYTES, holds: &|_, _| Vec::new() }
    }
}

#[derive(Debug, Clone)]
pub struct MemoryPlan {
    pub order: Vec<NodeId>,
    /// Arena slot of every node output value (aliases share the slot of what they alias).
    pub slots: HashMap<ValueId, Slot>,
    /// Scratch slot per node that asked for one.
    pub scratch: HashMap<NodeId, Slot>,
    /// Nodes whose output 0 is in place over an input: node -> input index.
    pub inplace: HashMap<NodeId, usize>,
    /// Values that alias another value's slot (Reshape/Flatten/Squeeze/Unsqueeze/Identity of a
    /// node output): value -> its input 0.
    pub aliases: HashMap<ValueId, ValueId>,
    /// Nodes whose output 0 already holds some of their inputs, placed there by the plan
    /// ([`PlanOptions::holds`]): node -> those input indices (the node copies only the others).
    pub placed: HashMap<NodeId, Vec<usize>>,
    pub arena_bytes: usize,
    /// Max over the schedule of bytes live at once (sizes rounded up to `ALIGN`; aliases and
    /// in-place counted once, scratch included): no plan can be smaller for this order.
    pub lower_bound_bytes: usize,
    /// Sum of all node-output buffers (aliases excluded) and scratch, rounded up to `ALIGN`,
    /// without any reuse.
    pub total_buffer_bytes: usize,
    /// Sum of the Param/Const bytes the nodes use.
    pub weights_bytes: usize,
    /// Every placed buffer and scratch area with the steps it is live over, for pictures
    /// (`memory_svg`) and reports.
    pub blocks: Vec<Block>,
}

/// One rectangle of the plan: `bytes` at `offset`, live from step `start` to `end` (inclusive,
/// indices into `order`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub start: usize,
    pub end: usize,
    pub offset: usize,
    pub bytes: usize,
    /// The value it holds first (later values share it in place or as aliases), or
    /// `scratch of NODE`.
    pub what: String,
}

#[derive(Debug, Error)]
pub enum PlanError {
    #[error("node `{node}`: output `{value}` {reason}; the memory plan needs static tensor shapes (pin symbolic dims)")]
    NotStatic { node: String, value: String, reason: &'static str },
    #[error("node `{node}`: the arena would need {bytes} bytes, more than the limit of {limit} (--max-arena); its largest buffer is `{value}`, {largest} bytes")]
    TooLarge { node: String, value: String, bytes: usize, largest: usize, limit: usize },
    #[error("internal: the memory plan fails its verifier: {0}")]
    Verify(String),
}

/// `n` rounded up to [`ALIGN`], saturating (a saturated size is over every limit).
pub fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN).saturating_mul(ALIGN)
}

/// A buffer: one or more values sharing storage (a value, its views, in-place results over it).
struct Buffer {
    bytes: usize,
    start: usize,
    end: usize,
}

/// Plan the arena for `g` (which must have static shapes: run `passes::prepare` first).
pub fn plan(g: &Graph, opts: &PlanOptions) -> Result<MemoryPlan, PlanError> {
    let order = schedule(g);
    let names = name_map(g);
    let mut step = vec![0usize; g.nodes.len()];
    for (s, n) in order.iter().enumerate() {
        step[n.0 as usize] = s;
    }
    let last_step = order.len().saturating_sub(1);
    let uses: Vec<Vec<ValueId>> = (0..g.nodes.len()).map(|i| node_uses(g, &names, NodeId(i as u32))).collect();

    // Sizes (and the static-shape check) of every node output.
    let mut bytes: HashMap<ValueId, usize> = HashMap::new();
    for &n in &order {
        let node = g.node(n);
        for &o in &node.outputs {
            let reason = match &g.value(o).ty {
                ValueType::Tensor(t) if t.shape.is_none() => Some("has unknown rank"),
                ValueType::Tensor(_) => match (opts.bytes)(g, o).or_else(|| value_bytes(g, o)) {
                    Some(b) => {
                        bytes.insert(o, b);
                        None
                    }
                    None => Some("has a symbolic shape"),
                },
                ValueType::Unknown => Some("has no inferred type"),
                _ => Some("is not a tensor"),
            };
            if let Some(reason) = reason {
                return Err(PlanError::NotStatic { node: node.name.clone(), value: g.value(o).name.clone(), reason });
            }
        }
    }

    // Last step each value is needed at.
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    let mut last_use: HashMap<ValueId, usize> = HashMap::new();
    for &n in &order {
        for &o in &g.node(n).outputs {
            last_use.insert(o, step[n.0 as usize]);
        }
    }
    for &n in &order {
        for v in uses[n.0 as usize].iter().copied().chain((opts.also_reads)(g, n)) {
            let e = last_use.entry(v).or_insert(0);
            *e = (*e).max(step[n.0 as usize]);
        }
    }
    for v in &outputs {
        last_use.insert(*v, last_step);
    }

    // Scratch areas, live only during their node.
    let mut scratch_at: Vec<(NodeId, usize, usize)> = Vec::new(); // node, step, bytes
    for &n in &order {
        let sc = (opts.scratch)(g, n);
        if sc > 0 {
            scratch_at.push((n, step[n.0 as usize], sc));
        }
    }
    let cx = Walk { g, order: &order, step: &step, bytes: &bytes, last_use: &last_use, outputs: &outputs, opts };
    let peak = |bufs: &Buffers| {
        let spans = bufs.list.iter().map(|b| (b.start, b.end, align_up(b.bytes))).chain(scratch_at.iter().map(|&(_, s, sc)| (s, s, align_up(sc))));
        live_peak(spans, order.len())
    };

    // Inputs placed inside the outputs that hold them (a Concat's parts), one at a time in
    // schedule order, each kept only where it does not raise the peak of live bytes: a holder's
    // buffer is live from its first placed member on, at its full size, so a member made long
    // before its Concat (a skip connection) can cost more memory than its copy saves.
    let mut parent: HashMap<ValueId, (ValueId, usize)> = HashMap::new();
    let mut bufs = cx.buffers(&parent);
    let mut lower_bound = peak(&bufs);
    // Each try walks the graph once: a graph of very many parts (a hostile file) must not
    // make planning quadratic, so tries stop after PLACEMENT_BUDGET node visits in all.
    let tries = PLACEMENT_BUDGET / order.len().max(1);
    for (x, at) in placements(g, &order, opts, &bytes, &outputs).into_iter().take(tries) {
        parent.insert(x, at);
        let tried = cx.buffers(&parent);
        let p = peak(&tried);
        if p <= lower_bound {
            (bufs, lower_bound) = (tried, p);
        } else {
            parent.remove(&x);
        }
    }
    let Buffers { list: buffers, of: buffer_of, within, aliases, inplace } = bufs;
    let mut placed: HashMap<NodeId, Vec<usize>> = HashMap::new();
    for (&x, &(holder, _)) in &parent {
        if let ValueKind::Node(n) = g.value(holder).kind {
            let i = g.node(n).inputs.iter().position(|v| *v == Some(x)).expect("a placed value is an input of its holder");
            placed.entry(n).or_default().push(i);
        }
    }
    for v in placed.values_mut() {
        v.sort_unstable();
    }

    // Rectangles to place: buffers, then scratch.
    struct Rect {
        start: usize,
        end: usize,
        size: usize,
    }
    let mut rects: Vec<Rect> =
        buffers.iter().map(|b| Rect { start: b.start, end: b.end, size: align_up(b.bytes) }).collect();
    let mut scratch_rect: Vec<(NodeId, usize, usize)> = Vec::new(); // node, rect index, bytes
    for &(n, s, sc) in &scratch_at {
        scratch_rect.push((n, rects.len(), sc));
        rects.push(Rect { start: s, end: s, size: align_up(sc) });
    }

    // Above the limit: refuse before packing when even a buffer or the sum of all is
    // (packed offsets never exceed the sum), and after it when the packed arena is.
    let total: usize = rects.iter().fold(0usize, |a, r| a.saturating_add(r.size));
    let too_large = |bytes: usize| {
        let (k, largest) = rects.iter().enumerate().map(|(k, r)| (k, r.size)).max_by_key(|&(_, s)| s).unwrap_or((0, 0));
        let (node, value) = rect_owner(g, &buffer_of, &scratch_rect, k);
        PlanError::TooLarge { node, value, bytes, largest, limit: opts.max_arena }
    };
    if rects.iter().any(|r| r.size > opts.max_arena) || total >= usize::MAX / 2 {
        return Err(too_large(total));
    }
    let spans: Vec<(usize, usize, usize)> = rects.iter().map(|r| (r.start, r.end, r.size)).collect();
    let offsets = pack(&spans);
    let arena_bytes = rects.iter().zip(&offsets).map(|(r, o)| o + r.size).max().unwrap_or(0);
    if arena_bytes > opts.max_arena {
        return Err(too_large(arena_bytes));
    }
    verify_packing(&spans, &offsets, arena_bytes).map_err(|(i, j)| {
        let owner = |k| rect_owner(g, &buffer_of, &scratch_rect, k);
        PlanError::Verify(format!("{:?} and {:?} overlap while both are live", owner(i), owner(j)))
    })?;

    let mut first_value: Vec<Option<ValueId>> = vec![None; buffers.len()];
    for &n in &order {
        for &o in &g.node(n).outputs {
            if let Some(&b) = buffer_of.get(&o) {
                first_value[b].get_or_insert(o);
            }
        }
    }
    let mut blocks: Vec<Block> = rects
        .iter()
        .zip(&offsets)
        .enumerate()
        .map(|(k, (r, &offset))| {
            let what = match first_value.get(k).copied().flatten() {
                Some(v) => g.value(v).name.clone(),
                None => scratch_rect.iter().find(|s| s.1 == k).map(|s| format!("scratch of {}", g.node(s.0).name)).unwrap_or_default(),
            };
            Block { start: r.start, end: r.end, offset, bytes: r.size, what }
        })
        .collect();
    blocks.retain(|b| b.bytes > 0);
    let slots = buffer_of.iter().map(|(&v, &b)| (v, Slot { offset: offsets[b] + within.get(&v).copied().unwrap_or(0), bytes: bytes[&v] })).collect();
    let scratch = scratch_rect.iter().map(|&(n, r, sc)| (n, Slot { offset: offsets[r], bytes: sc })).collect();
    let total_buffer_bytes = bytes
        .iter()
        .filter(|(v, _)| !aliases.contains_key(*v))
        .map(|(_, b)| align_up(*b))
        .chain(scratch_rect.iter().map(|r| align_up(r.2)))
        .fold(0usize, usize::saturating_add);

    let mut weights = HashSet::new();
    for v in uses.iter().flatten().chain(&g.outputs) {
        if matches!(g.value(*v).kind, ValueKind::Param(_) | ValueKind::Const(_)) {
            weights.insert(*v);
        }
    }
    let weights_bytes = weights
        .iter()
        .map(|v| match &g.value(*v).kind {
            ValueKind::Param(p) => p.bytes.len(),
            ValueKind::Const(t) => t.shape.iter().product::<usize>() * t.dtype().size(),
            _ => 0,
        })
        .sum();

    Ok(MemoryPlan {
        order,
        slots,
        scratch,
        inplace,
        aliases,
        placed,
        arena_bytes,
        lower_bound_bytes: lower_bound,
        total_buffer_bytes,
        weights_bytes,
        blocks,
    })
}

/// Node visits the placement of Concat parts may spend (one buffer walk per part tried):
/// DenseNet-121 (246 nodes after fusion, 116 parts) takes 1/580 of it.
const PLACEMENT_BUDGET: usize = 1 << 24;

/// The most bytes live at one step of `steps`, over (start, end, size) spans (inclusive steps).
fn live_peak(spans: impl Iterator<Item = (usize, usize, usize)>, steps: usize) -> usize {
    let mut delta = vec![0i64; steps + 1];
    for (start, end, size) in spans {
        delta[start] += size as i64;
        delta[end + 1] -= size as i64;
    }
    let (mut live, mut peak) = (0i64, 0i64);
    for d in &delta {
        live += d;
        peak = peak.max(live);
    }
    peak as usize
}

/// What the buffer walk reads: the graph, its schedule and each value's size and last use.
struct Walk<'w, 'o> {
    g: &'w Graph,
    order: &'w [NodeId],
    step: &'w [usize],
    bytes: &'w HashMap<ValueId, usize>,
    last_use: &'w HashMap<ValueId, usize>,
    outputs: &'w HashSet<ValueId>,
    opts: &'w PlanOptions<'o>,
}

/// The buffers of a plan and which values share them.
struct Buffers {
    list: Vec<Buffer>,
    /// Value -> its buffer.
    of: HashMap<ValueId, usize>,
    /// Value -> its byte offset in its buffer (0 unless placed inside a holder).
    within: HashMap<ValueId, usize>,
    aliases: HashMap<ValueId, ValueId>,
    inplace: HashMap<NodeId, usize>,
}

impl Walk<'_, '_> {
    /// Buffers in schedule order: a view shares its input's; an op in place over an input that
    /// dies with it shares that one's; a value placed in a holder (`parent`: value -> (holder,
    /// byte offset)) shares the outermost holder's, one buffer of that holder's size live from
    /// its first member's producer to its members' last use; anything else gets its own.
    fn buffers(&self, parent: &HashMap<ValueId, (ValueId, usize)>) -> Buffers {
        let (g, bytes) = (self.g, self.bytes);
        let root = |mut v: ValueId| {
            let mut at = 0;
            while let Some(&(p, off)) = parent.get(&v) {
                (v, at) = (p, at + off);
            }
            (v, at)
        };
        let holders: HashSet<ValueId> = parent.values().map(|&(p, _)| p).collect();
        let grouped = |o: &ValueId| parent.contains_key(o) || holders.contains(o);
        let mut group: HashMap<ValueId, usize> = HashMap::new(); // outermost holder -> buffer
        let mut out = Buffers { list: Vec::new(), of: HashMap::new(), within: HashMap::new(), aliases: HashMap::new(), inplace: HashMap::new() };
        let mut pinned: Vec<bool> = Vec::new();
        for &n in self.order {
            let s = self.step[n.0 as usize];
            let node = g.node(n);
            let alias = alias_source(g, n);
            let mut in_place_src: Option<usize> = None;
            if alias.is_none() && !node.outputs.is_empty() && !node.outputs.iter().any(grouped) {
                let out0 = node.outputs[0];
                for (i, x) in node.inputs.iter().enumerate() {
                    let Some(x) = *x else { continue };
                    let Some(&b) = out.of.get(&x) else { continue };
                    // The buffer dies here: every member's last use is this step (later members
                    // would have to read one of these after this step).
                    let dies = out.list[b].end <= s && !pinned[b];
                    if dies && out.list[b].bytes == bytes[&out0] && bytes[&x] == bytes[&out0] && (self.opts.can_inplace)(g, n, i) {
                        in_place_src = Some(i);
                        out.inplace.insert(n, i);
                        break;
                    }
                }
            }
            for (k, &o) in node.outputs.iter().enumerate() {
                // A grouped value's outermost holder and its byte offset there.
                let holder = grouped(&o).then(|| root(o));
                let shared = if let Some((r, at)) = holder {
                    out.within.insert(o, at);
                    group.get(&r).copied()
                } else if k != 0 {
                    None
                } else if let Some(src) = alias {
                    out.aliases.insert(o, src);
                    out.within.insert(o, out.within.get(&src).copied().unwrap_or(0));
                    Some(out.of[&src])
                } else {
                    in_place_src.map(|i| {
                        let x = node.inputs[i].expect("checked");
                        out.within.insert(o, out.within.get(&x).copied().unwrap_or(0));
                        out.of[&x]
                    })
                };
                let b = shared.unwrap_or_else(|| {
                    let size = holder.map_or_else(|| bytes[&o], |(r, _)| bytes[&r]);
                    out.list.push(Buffer { bytes: size, start: s, end: s });
                    pinned.push(false);
                    if let Some((r, _)) = holder {
                        group.insert(r, out.list.len() - 1);
                    }
                    out.list.len() - 1
                });
                out.of.insert(o, b);
                out.list[b].end = out.list[b].end.max(self.last_use[&o]);
                pinned[b] |= self.outputs.contains(&o);
            }
        }
        out
    }
}

/// The inputs that may go inside the outputs that hold them ([`PlanOptions::holds`]), in
/// schedule order of their holders: (value, (holder, byte offset there)). An input qualifies
/// when it is a node output that its producer writes afresh (not a view of another buffer),
/// no graph output, not a candidate of an earlier holder, read once by the node, non-empty,
/// and its run lies inside the holder's bytes without overlapping another's run. Its holder's
/// buffer then spans its members' lives ([`Walk::buffers`]), so no other buffer and no
/// in-place result takes those bytes while a member is live.
fn placements(g: &Graph, order: &[NodeId], opts: &PlanOptions, bytes: &HashMap<ValueId, usize>, outputs: &HashSet<ValueId>) -> Vec<(ValueId, (ValueId, usize))> {
    let mut seen: HashSet<ValueId> = HashSet::new();
    let mut found = Vec::new();
    for &n in order {
        let node = g.node(n);
        let Some(&out) = node.outputs.first() else { continue };
        let mut runs: Vec<(usize, usize)> = Vec::new(); // [offset, end) of the runs taken
        for (i, off) in (opts.holds)(g, n) {
            let Some(Some(x)) = node.inputs.get(i).copied() else { continue };
            let ValueKind::Node(p) = g.value(x).kind else { continue };
            let len = bytes.get(&x).copied().unwrap_or(0);
            let end = off.checked_add(len).filter(|&e| e <= bytes[&out]);
            let once = node.inputs.iter().filter(|v| **v == Some(x)).count() == 1;
            let Some(end) = end else { continue };
            if len == 0 || !once || outputs.contains(&x) || seen.contains(&x) || x == out || alias_source(g, p).is_some() {
                continue;
            }
            if runs.iter().any(|&(a, b)| off < b && a < end) {
                continue;
            }
            runs.push((off, end));
            seen.insert(x);
            found.push((x, (out, off)));
        }
    }
    found
}

/// The plan's verifier: every (start, end, size) rectangle at its offset lies inside the
/// arena, and no two live at one step share a byte. A sweep over the steps keeps the live
/// rectangles ordered by offset and checks each new one against its neighbours. Err: the
/// indices of two rectangles that overlap (or one twice when it leaves the arena).
pub fn verify_packing(rects: &[(usize, usize, usize)], offsets: &[usize], arena: usize) -> Result<(), (usize, usize)> {
    use std::cmp::Reverse;
    use std::collections::{BTreeMap, BinaryHeap};
    let mut order: Vec<usize> = (0..rects.len()).collect();
    order.sort_by_key(|&k| rects[k].0);
    let mut live: BTreeMap<usize, usize> = BTreeMap::new(); // offset -> rectangle
    let mut ends: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new(); // (end step, offset)
    for k in order {
        let (start, end, size) = rects[k];
        let off = offsets[k];
        if off.checked_add(size).is_none_or(|e| e > arena) {
            return Err((k, k));
        }
        if size == 0 {
            continue;
        }
        while let Some(&Reverse((e, o))) = ends.peek() {
            if e >= start {
                break;
            }
            ends.pop();
            live.remove(&o);
        }
        if let Some((&o, &j)) = live.range(..=off).next_back() {
            if o + rects[j].2 > off {
                return Err((j, k));
            }
        }
        if let Some((&o, &j)) = live.range(off..).next() {
            if o < off + size {
                return Err((j, k));
            }
        }
        live.insert(off, k);
        ends.push(Reverse((end, off)));
    }
    Ok(())
}

/// The node and value (or "scratch") that rectangle `k` of the plan holds, for errors.
fn rect_owner(g: &Graph, buffer_of: &HashMap<ValueId, usize>, scratch: &[(NodeId, usize, usize)], k: usize) -> (String, String) {
    if let Some(&(n, _, _)) = scratch.iter().find(|s| s.1 == k) {
        return (g.node(n).name.clone(), "scratch".into());
    }
    match buffer_of.iter().filter(|(_, &b)| b == k).map(|(&v, _)| v).min_by_key(|v| v.0) {
        Some(v) => {
            let node = match g.value(v).kind {
                ValueKind::Node(n) => g.node(n).name.clone(),
                _ => String::new(),
            };
            (node, g.value(v).name.clone())
        }
        None => (String::new(), String::new()),
    }
}

/// Offsets for (start, end, size) rectangles (inclusive step intervals, sizes multiples of
/// `ALIGN`). Offline packing is NP-hard; a few greedy orders (largest first, earliest first,
/// longest-lived first, largest area first), each with lowest-offset and best-fit placement,
/// are tried and the smallest arena wins. Deterministic.
fn pack(rects: &[(usize, usize, usize)]) -> Vec<usize> {
    type Key = fn(&(usize, usize, usize)) -> (std::cmp::Reverse<usize>, usize);
    let orders: [Key; 4] = [
        |r| (std::cmp::Reverse(r.2), r.0),
        |r| (std::cmp::Reverse(usize::MAX - r.0), std::cmp::Reverse(r.2).0),
        |r| (std::cmp::Reverse(r.1 - r.0), std::cmp::Reverse(r.2).0),
        |r| (std::cmp::Reverse(r.2.saturating_mul(r.1 - r.0 + 1)), r.0),
    ];
    let arena_of = |offsets: &[usize]| rects.iter().zip(offsets).map(|(r, o)| o + r.2).max().unwrap_or(0);
    // (arena, offsets, order, best_fit)
    let mut best: Option<(usize, Vec<usize>, Vec<usize>, bool)> = None;
    for key in orders {
        for best_fit in [false, true] {
            let mut idx: Vec<usize> = (0..rects.len()).collect();
            idx.sort_by_key(|&i| (key(&rects[i]), i));
            let offsets = place(rects, &idx, best_fit);
            let arena = arena_of(&offsets);
            if best.as_ref().is_none_or(|b| arena < b.0) {
                best = Some((arena, offsets, idx, best_fit));
            }
        }
    }
    let Some((mut arena, mut offsets, mut order, best_fit)) = best else { return Vec::new() };
    // Local search from the best greedy order: move one rectangle earlier in the order and
    // keep the result when the arena does not grow (growing buffers, as in DenseNet's concats,
    // fragment every fixed order). A fixed seed keeps it deterministic; the number of tries
    // shrinks with the square of the rectangle count so large graphs stay fast to compile.
    let n = rects.len();
    if n > 2 {
        let tries = (400_000_000 / (n * n)).clamp(16, 2000);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        for t in 0..tries {
            // Every other try moves a rectangle that reaches the top of the arena.
            let (a, b) = if t % 2 == 0 {
                let top: Vec<usize> = (0..n).filter(|&k| offsets[order[k]] + rects[order[k]].2 == arena).collect();
                (top[next(top.len().max(1)).min(top.len().saturating_sub(1))], next(n))
            } else {
                (next(n), next(n))
            };
            let (from, to) = (a.max(b), a.min(b));
            if from == to {
                continue;
            }
            let mut cand = order.clone();
            let r = cand.remove(from);
            cand.insert(to, r);
            let offs = place(rects, &cand, best_fit);
            let ar = arena_of(&offs);
            if ar <= arena {
                (arena, offsets, order) = (ar, offs, cand);
            }
        }
    }
    offsets
}

/// Place rectangles in the order `idx`, each at the lowest (or best-fitting) free offset.
fn place(rects: &[(usize, usize, usize)], idx: &[usize], best_fit: bool) -> Vec<usize> {
    let mut offsets = vec![0usize; rects.len()];
    let mut placed: Vec<usize> = Vec::new();
    for &i in idx {
        let (start, end, size) = rects[i];
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|&&j| rects[j].0 <= end && start <= rects[j].1 && rects[j].2 > 0)
            .map(|&j| (offsets[j], offsets[j] + rects[j].2))
            .collect();
        busy.sort_unstable();
        let mut at = 0;
        if size > 0 {
            // Gaps between busy ranges (the last one is unbounded).
            let mut gaps: Vec<(usize, usize)> = Vec::new();
            let mut cur = 0;
            for &(lo, hi) in &busy {
                if lo > cur {
                    gaps.push((cur, lo - cur));
                }
                cur = cur.max(hi);
            }
            gaps.push((cur, usize::MAX));
            let fits = gaps.iter().filter(|g| g.1 >= size);
            at = if best_fit {
                fits.min_by_key(|g| (g.1, g.0)).map(|g| g.0).unwrap_or(cur)
            } else {
                fits.map(|g| g.0).min().unwrap_or(cur)
            };
        }
        offsets[i] = at;
        placed.push(i);
    }
    offsets
}

#[cfg(test)]
mod verifier_tests {
    use super::verify_packing;

    #[test]
    fn overlaps_and_overruns_are_caught() {
        // (start, end, size): two buffers live together at steps 1..2.
        let rects = [(0, 2, 128), (1, 3, 64), (3, 4, 128)];
        assert_eq!(verify_packing(&rects, &[0, 128, 0], 192), Ok(()), "reuse after the first dies");
        assert_eq!(verify_packing(&rects, &[0, 64, 0], 192), Err((0, 1)), "live together, bytes shared");
        assert_eq!(verify_packing(&rects, &[0, 128, 128], 192), Err((2, 2)), "past the arena's end");
        assert_eq!(verify_packing(&rects, &[0, 128, 64], 256), Err((1, 2)), "step 3 shares bytes with the second");
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::view::Flatten;
    use super::*;
    use crate::ops::IntoOp;
    use crate::ir::{BinaryOp, DType, Dim, Op, Shape, TensorType, UnaryOp};
    use crate::tensor::Tensor;

    fn set_ty(g: &mut Graph, v: ValueId, elems: usize) {
        g.value_mut(v).ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(&[elems])) });
    }

    fn input(g: &mut Graph, elems: usize) -> ValueId {
        let v = g.add_value(format!("in{}", g.values.len()), ValueType::Unknown, ValueKind::Input);
        set_ty(g, v, elems);
        g.inputs.push(v);
        v
    }

    fn node(g: &mut Graph, op: Op, inputs: &[ValueId], out_elems: &[usize]) -> ValueId {
        let names: Vec<String> = (0..out_elems.len()).map(|k| format!("v{}_{k}", g.values.len())).collect();
        let (_, outs) = g.add_node(format!("n{}", g.nodes.len()), op, inputs.iter().map(|v| Some(*v)).collect(), &names);
        for (o, &e) in outs.iter().zip(out_elems) {
            set_ty(g, *o, e);
        }
        outs[0]
    }

    fn relu(g: &mut Graph, x: ValueId, elems: usize) -> ValueId {
        node(g, Op::Unary(UnaryOp::Relu), &[x], &[elems])
    }

    fn reshape(g: &mut Graph, x: ValueId, elems: usize) -> ValueId {
        let shape = g.add_const(format!("shape{}", g.values.len()), Tensor::from_i64s(vec![1], vec![elems as i64]));
        node(g, Op::Reshape { allowzero: false }, &[x, shape], &[elems])
    }

    fn elementwise(g: &Graph, n: NodeId, _i: usize) -> bool {
        matches!(g.node(n).op, Op::Unary(_) | Op::Binary(_))
    }

    fn inplace_opts() -> PlanOptions<'static> {
        PlanOptions { scratch: &|_, _| 0, can_inplace: &elementwise, ..PlanOptions::default() }
    }

    const B: usize = 4032; // 1000 f32 rounded up to ALIGN

    /// An input of 1000 f32 through `n` Relus, the last one the output.
    fn relu_chain(n: usize) -> Graph {
        let mut g = Graph::default();
        let mut x = input(&mut g, 1000);
        for _ in 0..n {
            x = relu(&mut g, x, 1000);
        }
        g.outputs.push(x);
        g
    }

    fn holds_opts() -> PlanOptions<'static> {
        PlanOptions { holds: &crate::codegen::emit::concat_runs, ..PlanOptions::default() }
    }

    fn concat(g: &mut Graph, parts: &[ValueId], elems: usize) -> ValueId {
        node(g, Op::Concat { axis: 0 }, parts, &[elems])
    }

    /// A Concat of two fresh values holds them: their producers write into its output, it
    /// copies nothing, and fewer bytes are live at once.
    #[test]
    fn concat_parts_are_written_in_place() {
        let mut g = Graph::default();
        let x = input(&mut g, 1000);
        let a = relu(&mut g, x, 1000);
        let b = relu(&mut g, x, 1000);
        let c = concat(&mut g, &[a, b], 2000);
        let y = relu(&mut g, c, 2000);
        g.outputs.push(y);
        let copied = plan(&g, &PlanOptions::default()).unwrap();
        let p = plan(&g, &holds_opts()).unwrap();
        let ValueKind::Node(cn) = g.value(c).kind else { panic!("c is a node output") };
        assert_eq!(p.placed.get(&cn), Some(&vec![0, 1]));
        assert!(copied.placed.is_empty());
        assert_eq!(p.slots[&a].offset, p.slots[&c].offset);
        assert_eq!(p.slots[&b].offset, p.slots[&c].offset + 4000);
        // Copied: a, b and c live at the Concat; placed: c, then c and y.
        assert_eq!((copied.lower_bound_bytes, p.lower_bound_bytes), (2 * B + 8000, 2 * 8000));
        assert!(p.arena_bytes < copied.arena_bytes);
    }

    /// A part made long before its Concat (a skip connection) would keep the whole output's
    /// bytes live across the branch in between; where that raises the peak it is copied, and
    /// the part made right before the Concat is still placed.
    #[test]
    fn a_part_that_would_raise_the_peak_is_copied() {
        let mut g = Graph::default();
        let x = input(&mut g, 1000);
        let skip = relu(&mut g, x, 1000);
        let wide = relu(&mut g, skip, 8000);
        let wider = relu(&mut g, wide, 8000);
        let last = relu(&mut g, wider, 1000);
        let c = concat(&mut g, &[skip, last], 2000);
        g.outputs.push(c);
        let copied = plan(&g, &PlanOptions::default()).unwrap();
        let p = plan(&g, &holds_opts()).unwrap();
        let ValueKind::Node(cn) = g.value(c).kind else { panic!("c is a node output") };
        assert_eq!(p.placed.get(&cn), Some(&vec![1]));
        assert_eq!(p.slots[&last].offset, p.slots[&c].offset + 4000);
        assert!(p.lower_bound_bytes <= copied.lower_bound_bytes);
    }

    /// A value read twice by one Concat, and a graph output, keep their own buffers.
    #[test]
    fn repeated_parts_and_graph_outputs_are_copied() {
        let mut g = Graph::default();
        let x = input(&mut g, 1000);
        let a = relu(&mut g, x, 1000);
        let b = relu(&mut g, x, 1000);
        let c = concat(&mut g, &[a, a, b], 3000);
        g.outputs.extend([c, b]);
        let p = plan(&g, &holds_opts()).unwrap();
        assert!(p.placed.is_empty(), "{:?}", p.placed);
    }

    /// Concats of Concats (DenseNet's blocks) nest: every part lands in the outermost output.
    #[test]
    fn nested_concats_share_the_outermost_buffer() {
        let mut g = Graph::default();
        let x = input(&mut g, 1000);
        let a = relu(&mut g, x, 1000);
        let b = relu(&mut g, a, 1000);
        let ab = concat(&mut g, &[a, b], 2000);
        let c = relu(&mut g, ab, 1000);
        let abc = concat(&mut g, &[ab, c], 3000);
        g.outputs.push(abc);
        let p = plan(&g, &holds_opts()).unwrap();
        let base = p.slots[&abc].offset;
        assert_eq!([a, b, ab, c].map(|v| p.slots[&v].offset), [base, base + 4000, base, base + 8000]);
        assert_eq!(p.placed.len(), 2);
    }

    #[test]
    fn relu_chain_reuses_two_buffers() {
        let g = relu_chain(5);
        let p = plan(&g, &PlanOptions::default()).unwrap();
        assert_eq!(p.arena_bytes, 2 * B);
        assert_eq!(p.lower_bound_bytes, 2 * B);
        assert_eq!(p.total_buffer_bytes, 5 * B);
        assert_eq!(p.slots.len(), 5);
        assert!(p.inplace.is_empty());
        let offs: HashSet<usize> = p.slots.values().map(|s| s.offset).collect();
        assert_eq!(offs.len(), 2);
    }

    #[test]
    fn relu_chain_in_place() {
        let g = relu_chain(4);
        let p = plan(&g, &inplace_opts()).unwrap();
        assert_eq!(p.arena_bytes, B);
        assert_eq!(p.lower_bound_bytes, B);
        // The first relu reads a graph input: not in place.
        assert_eq!(p.inplace.len(), 3);
        assert!(!p.inplace.contains_key(&NodeId(0)));
        assert!(p.slots.values().all(|s| s.offset == 0 && s.bytes == 4000));
    }

    #[test]
    fn in_place_refused_when_input_lives_on_or_is_output() {
        let mut g = Graph::default();
        let x = input(&mut g, 1000);
        let a = relu(&mut g, x, 1000);
        let b = relu(&mut g, a, 1000); // a is still read by c: not in place
        let c = node(&mut g, Op::Binary(BinaryOp::Add), &[a, b], &[1000]); // in place over a or b
        let d = relu(&mut g, c, 1000); // c is a graph output: not in place
        g.outputs.extend([c, d]);
        let p = plan(&g, &inplace_opts()).unwrap();
        assert!(!p.inplace.contains_key(&NodeId(1)));
        assert_eq!(p.inplace.get(&NodeId(2)), Some(&0));
        assert!(!p.inplace.contains_key(&NodeId(3)));
        assert_eq!(p.slots[&c], p.slots[&a]);
        assert_ne!(p.slots[&d].offset, p.slots[&c].offset);
        assert_eq!(p.arena_bytes, 2 * B);
    }

    #[test]
    fn reshape_aliases_its_input() {
        let mut g = Graph::default();
        let x = input(&mut g, 1000);
        let xr = reshape(&mut g, x, 1000); // of a graph input: own slot
        let a = relu(&mut g, xr, 1000);
        let b = reshape(&mut g, a, 1000);
        let b2 = node(&mut g, Flatten { axis: 1 }.op(), &[b], &[1000]);
        let c = relu(&mut g, b2, 1000);
        g.outputs.push(c);
        let p = plan(&g, &PlanOptions::default()).unwrap();
        assert!(!p.aliases.contains_key(&xr));
        assert_eq!(p.aliases.get(&b), Some(&a));
        assert_eq!(p.aliases.get(&b2), Some(&b));
        assert_eq!(p.slots[&b], p.slots[&a]);
        assert_eq!(p.slots[&b2], p.slots[&a]);
        // a's buffer lives until c through its aliases.
        assert_ne!(p.slots[&c].offset, p.slots[&a].offset);
        assert_eq!(p.arena_bytes, 2 * B);
        assert_eq!(p.total_buffer_bytes, 3 * B);
        assert_eq!(p.weights_bytes, 2 * 8);
        // In place over an alias chain whose buffer dies at c.
        let p = plan(&g, &inplace_opts()).unwrap();
        assert_eq!(p.inplace.get(&NodeId(4)), Some(&0));
        assert_eq!(p.slots[&c], p.slots[&a]);
    }

    #[test]
    fn diamond_keeps_three_buffers() {
        let mut g = Graph::default();
        let x = input(&mut g, 1000);
        let a = relu(&mut g, x, 1000);
        let b = relu(&mut g, a, 1000);
        let c = node(&mut g, Op::Unary(UnaryOp::Exp), &[a], &[1000]);
        let d = node(&mut g, Op::Binary(BinaryOp::Add), &[b, c], &[1000]);
        g.outputs.push(d);
        let p = plan(&g, &PlanOptions::default()).unwrap();
        assert_eq!(p.lower_bound_bytes, 3 * B);
        assert_eq!(p.arena_bytes, 3 * B);
        let sa = p.slots[&a].offset;
        assert!(sa != p.slots[&b].offset && sa != p.slots[&c].offset);
        assert_eq!(p.slots[&d].offset, sa); // a is dead when d is written
    }

    #[test]
    fn scratch_lives_only_during_its_node() {
        let g = relu_chain(3);
        let (a, b) = (g.nodes[0].outputs[0], g.nodes[1].outputs[0]);
        let scratch = |_: &Graph, n: NodeId| if n == NodeId(1) { 100 } else { 0 };
        let p = plan(&g, &PlanOptions { scratch: &scratch, can_inplace: &|_, _, _| false, ..PlanOptions::default() }).unwrap();
        assert_eq!(p.scratch.len(), 1);
        let s = p.scratch[&NodeId(1)];
        assert_eq!(s.bytes, 100);
        assert_eq!(s.offset % ALIGN, 0);
        for v in [a, b] {
            let o = p.slots[&v].offset;
            assert!(s.offset + 128 <= o || o + B <= s.offset);
        }
        assert_eq!(p.lower_bound_bytes, 2 * B + 128);
        assert_eq!(p.arena_bytes, 2 * B + 128);
        assert_eq!(p.total_buffer_bytes, 3 * B + 128);
    }

    #[test]
    fn symbolic_shape_is_an_error() {
        let mut g = Graph::default();
        let x = input(&mut g, 10);
        let a = relu(&mut g, x, 10);
        g.value_mut(a).ty = ValueType::Tensor(TensorType {
            dtype: DType::F32,
            shape: Some(Shape(vec![Dim::Sym { name: "N".into(), bound: None }])),
        });
        g.outputs.push(a);
        let e = plan(&g, &PlanOptions::default()).unwrap_err().to_string();
        assert!(e.contains("n0") && e.contains(&g.value(a).name) && e.contains("symbolic"), "{e}");
    }

    #[test]
    fn schedule_finishes_a_branch_before_starting_another() {
        // Two branches of (big, small): running each branch to its small end first halves the peak.
        let mut g = Graph::default();
        let x = input(&mut g, 10);
        let a1 = relu(&mut g, x, 10_000);
        let b1 = relu(&mut g, x, 10_000);
        let a2 = relu(&mut g, a1, 10);
        let b2 = relu(&mut g, b1, 10);
        let s = node(&mut g, Op::Binary(BinaryOp::Add), &[a2, b2], &[10]);
        g.outputs.push(s);
        let order = crate::schedule::schedule(&g);
        assert_eq!(order, vec![NodeId(0), NodeId(2), NodeId(1), NodeId(3), NodeId(4)]);
        let p = plan(&g, &PlanOptions::default()).unwrap();
        assert!(p.lower_bound_bytes < 2 * 40_000);
    }

    /// xorshift64*: deterministic randomness without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn random_graph(rng: &mut Rng) -> Graph {
        let mut g = Graph::default();
        let sizes = [0usize, 1, 7, 16, 100, 1000];
        let mut pool: Vec<(ValueId, usize)> = Vec::new();
        for _ in 0..1 + rng.below(2) {
            let e = sizes[1 + rng.below(5)];
            pool.push((input(&mut g, e), e));
        }
        let n_nodes = 1 + rng.below(40);
        for _ in 0..n_nodes {
            // Prefer recent values so chains form, sometimes reach far back.
            let pick = |rng: &mut Rng, pool: &[(ValueId, usize)]| {
                let k = if rng.below(3) == 0 { rng.below(pool.len()) } else { pool.len() - 1 - rng.below(pool.len().min(3)) };
                pool[k]
            };
            let (x, e) = pick(rng, &pool);
            match rng.below(5) {
                0 | 1 => pool.push((relu(&mut g, x, e), e)),
                2 => {
                    let (y, _) = pick(rng, &pool);
                    pool.push((node(&mut g, Op::Binary(BinaryOp::Add), &[x, y], &[e]), e));
                }
                3 => pool.push((reshape(&mut g, x, e), e)),
                _ => {
                    let e2 = sizes[rng.below(6)];
                    let op = crate::ops::split::Split { axis: 0, sizes: None, outputs: 2 }.op();
                    let first = node(&mut g, op, &[x], &[e2, e2]);
                    pool.push((first, e2));
                    pool.push((ValueId(first.0 + 1), e2));
                }
            }
        }
        let last = pool.last().unwrap().0;
        if matches!(g.value(last).kind, ValueKind::Node(_)) {
            g.outputs.push(last);
        }
        for &(v, _) in &pool {
            if rng.below(8) == 0 && !g.outputs.contains(&v) {
                g.outputs.push(v);
            }
        }
        g
    }

    /// Random graphs of Relus (new sizes or the same), Adds, Reshapes and Concats of two or
    /// three earlier values (repeats allowed), planned with Concat parts placed, then run on a
    /// simulated arena: every value's cells get fresh tags from its producer (a Concat's are
    /// its parts', copied unless placed, checked already there when placed), and every read
    /// checks that the value's slot still holds its tags. Catches a placed part overwritten
    /// while live, a part placed at the wrong offset, and a placed copy left out.
    #[test]
    fn random_concat_graphs_keep_every_value_intact() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        let sizes = [1usize, 3, 16, 100];
        let mut placed_parts = 0;
        for trial in 0..400 {
            let mut g = Graph::default();
            let mut pool: Vec<(ValueId, usize)> = Vec::new();
            let e = sizes[rng.below(4)];
            pool.push((input(&mut g, e), e));
            for _ in 0..1 + rng.below(30) {
                let pick = |rng: &mut Rng, pool: &[(ValueId, usize)]| pool[if rng.below(3) == 0 { rng.below(pool.len()) } else { pool.len() - 1 - rng.below(pool.len().min(3)) }];
                let (x, e) = pick(&mut rng, &pool);
                match rng.below(6) {
                    0 => pool.push((relu(&mut g, x, e), e)),
                    1 => {
                        let e2 = sizes[rng.below(4)];
                        pool.push((relu(&mut g, x, e2), e2));
                    }
                    2 => {
                        let (y, _) = pick(&mut rng, &pool);
                        pool.push((node(&mut g, Op::Binary(BinaryOp::Add), &[x, y], &[e]), e));
                    }
                    3 => pool.push((reshape(&mut g, x, e), e)),
                    _ => {
                        let parts: Vec<(ValueId, usize)> = (0..2 + rng.below(2)).map(|_| pick(&mut rng, &pool)).collect();
                        let total = parts.iter().map(|p| p.1).sum();
                        pool.push((concat(&mut g, &parts.iter().map(|p| p.0).collect::<Vec<_>>(), total), total));
                    }
                }
            }
            let last = pool.last().unwrap().0;
            if matches!(g.value(last).kind, ValueKind::Node(_)) {
                g.outputs.push(last);
            }
            let p = plan(&g, &PlanOptions { can_inplace: &elementwise, ..holds_opts() }).unwrap();
            placed_parts += p.placed.values().map(Vec::len).sum::<usize>();

            let mut arena = vec![u64::MAX; p.arena_bytes / 4];
            let mut content: HashMap<ValueId, Vec<u64>> = HashMap::new();
            let mut tag = 0u64;
            for &v in &g.inputs {
                let n = crate::schedule::value_bytes(&g, v).unwrap() / 4;
                content.insert(v, (0..n).map(|_| { tag += 1; tag }).collect());
            }
            let cells = |v: ValueId| p.slots[&v].offset / 4..(p.slots[&v].offset + p.slots[&v].bytes) / 4;
            for &n in &p.order {
                let node = g.node(n);
                for x in node.inputs.iter().flatten() {
                    if matches!(g.value(*x).kind, ValueKind::Node(_)) {
                        assert_eq!(&arena[cells(*x)], &content[x][..], "trial {trial}: `{}` overwritten before node {}", g.value(*x).name, node.name);
                    }
                }
                let out = node.outputs[0];
                let placed = p.placed.get(&n).cloned().unwrap_or_default();
                let value: Vec<u64> = match &node.op {
                    Op::Concat { .. } => {
                        let mut at = p.slots[&out].offset / 4;
                        for (i, x) in node.inputs.iter().enumerate() {
                            let part = content[&x.unwrap()].clone();
                            if placed.contains(&i) {
                                assert_eq!(p.slots[&x.unwrap()].offset / 4, at, "trial {trial}: placed part at the wrong offset");
                            } else {
                                arena[at..at + part.len()].copy_from_slice(&part);
                            }
                            at += part.len();
                        }
                        node.inputs.iter().flat_map(|x| content[&x.unwrap()].clone()).collect()
                    }
                    Op::Reshape { .. } => {
                        let v = content[&node.inputs[0].unwrap()].clone();
                        if !p.aliases.contains_key(&out) {
                            arena[cells(out)].copy_from_slice(&v);
                        }
                        v
                    }
                    _ => {
                        let v: Vec<u64> = cells(out).map(|_| { tag += 1; tag }).collect();
                        arena[cells(out)].copy_from_slice(&v);
                        v
                    }
                };
                assert_eq!(&arena[cells(out)], &value[..], "trial {trial}: node {} left its output incomplete", node.name);
                content.insert(out, value);
            }
            for v in &g.outputs {
                assert_eq!(&arena[cells(*v)], &content[v][..], "trial {trial}: output overwritten");
            }
        }
        assert!(placed_parts > 200, "the trials placed only {placed_parts} parts");
    }

    fn find(uf: &mut HashMap<ValueId, ValueId>, v: ValueId) -> ValueId {
        let p = *uf.get(&v).unwrap_or(&v);
        if p == v {
            v
        } else {
            let r = find(uf, p);
            uf.insert(v, r);
            r
        }
    }

    #[test]
    fn random_dags_never_overlap_live_slots() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for trial in 0..400 {
            let g = random_graph(&mut rng);
            let seed = trial as u32;
            let scratch = move |_: &Graph, n: NodeId| match (n.0 + seed) % 3 { 0 => ((n.0 * 37 + seed) % 500) as usize, _ => 0 };
            let p = plan(&g, &PlanOptions { scratch: &scratch, can_inplace: &elementwise, ..PlanOptions::default() }).unwrap();

            // The order is a topological permutation.
            let mut step = vec![usize::MAX; g.nodes.len()];
            for (s, n) in p.order.iter().enumerate() {
                assert_eq!(step[n.0 as usize], usize::MAX);
                step[n.0 as usize] = s;
            }
            for (i, node) in g.nodes.iter().enumerate() {
                for v in node.inputs.iter().flatten() {
                    if let ValueKind::Node(pn) = g.value(*v).kind {
                        assert!(step[pn.0 as usize] < step[i], "trial {trial}: order is not topological");
                    }
                }
            }

            // Own live interval of every node output, computed independently.
            let last = p.order.len() - 1;
            let mut iv: HashMap<ValueId, (usize, usize)> = HashMap::new();
            for (i, node) in g.nodes.iter().enumerate() {
                for &o in &node.outputs {
                    iv.insert(o, (step[i], step[i]));
                }
            }
            for (i, node) in g.nodes.iter().enumerate() {
                for v in node.inputs.iter().flatten() {
                    if let Some(e) = iv.get_mut(v) {
                        e.1 = e.1.max(step[i]);
                    }
                }
            }
            for v in &g.outputs {
                if let Some(e) = iv.get_mut(v) {
                    e.1 = last;
                }
            }

            // Values sharing storage legitimately: aliases and in-place results.
            let mut uf: HashMap<ValueId, ValueId> = HashMap::new();
            for (&a, &b) in &p.aliases {
                assert!(matches!(g.value(b).kind, ValueKind::Node(_)));
                assert_eq!(p.slots[&a], p.slots[&b]);
                let (ra, rb) = (find(&mut uf, a), find(&mut uf, b));
                uf.insert(ra, rb);
            }
            for (&n, &i) in &p.inplace {
                let x = g.node(n).inputs[i].unwrap();
                let o = g.node(n).outputs[0];
                assert_eq!(p.slots[&x].offset, p.slots[&o].offset);
                let (ra, rb) = (find(&mut uf, o), find(&mut uf, x));
                uf.insert(ra, rb);
            }
            // In place only over a buffer that dies at the node and holds no graph output.
            for (&n, &i) in &p.inplace {
                let s = step[n.0 as usize];
                let rx = find(&mut uf, g.node(n).inputs[i].unwrap());
                for (&w, &(ws, we)) in &iv {
                    if ws < s && find(&mut uf, w) == rx {
                        assert!(we <= s && !g.outputs.contains(&w), "trial {trial}: in place over a live buffer");
                    }
                }
            }

            let mut items: Vec<(ValueId, usize, usize, Slot)> = Vec::new(); // group, start, end, slot
            for (&v, &(s, e)) in &iv {
                let slot = p.slots[&v];
                assert_eq!(slot.bytes, crate::schedule::value_bytes(&g, v).unwrap());
                items.push((find(&mut uf, v), s, e, slot));
            }
            for (k, (&n, &slot)) in p.scratch.iter().enumerate() {
                let s = step[n.0 as usize];
                items.push((ValueId(u32::MAX - k as u32), s, s, slot));
            }
            let mut peak_check = vec![0usize; p.order.len()];
            for (idx, &(grp, s, e, slot)) in items.iter().enumerate() {
                assert_eq!(slot.offset % ALIGN, 0, "trial {trial}");
                assert!(slot.offset + align_up(slot.bytes) <= p.arena_bytes, "trial {trial}");
                if !items[..idx].iter().any(|it| it.0 == grp) {
                    // Count each group once, over its whole lifetime, for a lower bound sanity check.
                    let (gs, ge) = items.iter().filter(|it| it.0 == grp).fold((s, e), |a, it| (a.0.min(it.1), a.1.max(it.2)));
                    for c in &mut peak_check[gs..=ge] {
                        *c += align_up(slot.bytes);
                    }
                }
                for &(grp2, s2, e2, slot2) in &items[..idx] {
                    if grp2 == grp || slot.bytes == 0 || slot2.bytes == 0 || e < s2 || e2 < s {
                        continue;
                    }
                    let disjoint = slot.offset + align_up(slot.bytes) <= slot2.offset
                        || slot2.offset + align_up(slot2.bytes) <= slot.offset;
                    assert!(disjoint, "trial {trial}: {slot:?} and {slot2:?} overlap while both live");
                }
            }
            assert_eq!(p.lower_bound_bytes, peak_check.iter().copied().max().unwrap_or(0), "trial {trial}");
            assert!(p.arena_bytes >= p.lower_bound_bytes);
            assert!(p.total_buffer_bytes >= p.arena_bytes);
        }
    }
}
