//! Generated code with bounded dims (`--input x=1x3x{h<=64}x{w<=64}`): one module whose arena
//! is sized for the bounds and whose `forward` takes the actual dims at run time.
//!
//! The road: the symbolic targets of Reshapes that shape subgraphs compute are recorded by
//! node name (`passes::symbolic::reshape_targets`); the graph is pinned at the bounds and goes through
//! the usual passes, fusion and memory plan (so offsets stay constants and every buffer has
//! its size at the bound); the symbolic analysis then gives every value's dims as expressions
//! of the named dims, checked against the static shapes at the bound. Every node goes through
//! the one emitter (`codegen::emit::emit_node`): nodes whose shapes do not depend on a named
//! dim get literals as in a fixed-shape module, the others run-time sizes (`sz[i]`, computed
//! once in `forward`) passed to the same runtime kernels.

use super::emit::{rust_ty, Ctx};
// The conv scratch bounds live next to the conv emitter (`plan_bounded` calls them as `emit::`).
use super::emit::nn as emit;
use super::builder::{self, elem_ty, emit_parts, input_names, needs_heap, params, Entry, Generated, ModuleBuilder, Params, Parts, MODEL_STRUCT};
use super::names;
use super::pin_dims::{check_at_bounds, constant_at, forced_dims};
use super::{weights, CodegenError, CodegenOptions, IoDesc, Lowering};
use crate::ir::{Dim, DimExpr, Graph, Op, Shape, TensorType, ValueId, ValueType};
use crate::memory::{self, MemoryPlan, PlanOptions};
use crate::passes::symbolic::{self, SymInfo};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write;

/// What a bounded module takes and gives beyond [`Generated`]'s bound-sized descriptions.
#[derive(Debug, Clone)]
pub struct BoundedInfo {
    /// Named dims with their bounds, in the order of the generated `Dims` struct.
    pub dims: Vec<(String, usize)>,
    /// Each input's and output's dims as expressions of the named dims.
    pub input_shapes: Vec<Vec<DimExpr>>,
    pub output_shapes: Vec<Vec<DimExpr>>,
}

pub(super) fn graph_err(what: impl Into<String>, reason: impl Into<String>) -> CodegenError {
    CodegenError::Graph { what: what.into(), reason: reason.into() }
}

/// The named dims of `g`'s inputs (every symbolic dim must have a bound), and each input's
/// dims as expressions, by input position.
type InputDims = (Vec<(String, usize)>, Vec<Vec<DimExpr>>);

fn input_dims(g: &Graph) -> Result<InputDims, CodegenError> {
    let mut dims: Vec<(String, usize)> = Vec::new();
    let mut map = Vec::new();
    for &i in &g.inputs {
        let v = g.value(i);
        let shape = g.tensor_type(i).and_then(|t| t.shape.clone()).ok_or_else(|| graph_err(format!("input `{}`", v.name), "has no known rank"))?;
        let mut ex = Vec::new();
        for d in &shape.0 {
            ex.push(match d {
                Dim::Fixed(n) => DimExpr::constant(*n as i64),
                Dim::Sym { name, bound: Some(b) } => {
                    match dims.iter().find(|(n, _)| n == name) {
                        Some((_, ob)) if ob != b => return Err(graph_err(format!("dim `{name}`"), format!("has two bounds, {ob} and {b}"))),
                        Some(_) => {}
                        None => dims.push((name.clone(), *b)),
                    }
                    DimExpr::var(name)
                }
                Dim::Sym { name, bound: None } => {
                    return Err(graph_err(format!("input `{}`", v.name), format!("dim `{name}` has no bound: give `{{{name}<=N}}` or a number with --input")))
                }
            });
        }
        map.push(ex);
    }
    let mut seen = HashSet::new();
    if let Some((n, _)) = dims.iter().find(|(n, _)| !seen.insert(dim_field(n))) {
        return Err(graph_err(format!("dim `{n}`"), "has the same field name as another dim once lowercased; rename one"));
    }
    Ok((dims, map))
}

/// Generate a module for `g` (loaded, weights applied, not yet prepared) whose inputs have
/// bounded symbolic dims.
pub fn generate_bounded(g: &Graph, opts: &CodegenOptions) -> Result<(Generated, BoundedInfo), CodegenError> {
    let mut g = g.clone();
    let (dims, by_pos) = input_dims(&g)?;
    // Passes renumber values; the inputs keep their positions.
    let inputs_of = |g: &Graph| -> HashMap<ValueId, Vec<DimExpr>> { g.inputs.iter().copied().zip(by_pos.iter().cloned()).collect() };
    unique_node_names(&mut g);
    // Constant subexpressions fold now (shape subgraphs on named dims stay).
    crate::passes::prepare(&mut g)?;
    // Dim values that reach data are computed at run time, not folded at the bounds.
    // Comparisons of dims (head counts, say) are decided at the bounds, where the graph is
    // pinned and folds them; `forward` checks that they hold for the run-time dims.
    let at: HashMap<String, i64> = dims.iter().map(|(n, b)| (n.clone(), *b as i64)).collect();
    let ins = inputs_of(&g);
    crate::passes::dim_values::materialize(&mut g, &ins, &at)?;
    symbolic::check_no_dim_values(&g, &inputs_of(&g), &at)?;
    let (targets, unpinned) = symbolic::reshape_targets(&g, &inputs_of(&g), &at)?;

    // Pin every named dim at its bound (or at the one value an op allows it, below): the
    // graph the plan and the static emitters see.
    let forced = forced_dims(&g, &unpinned, &dims)?;
    let bound = |n: &str| forced.get(n).copied().or_else(|| dims.iter().find(|(d, _)| d == n).map(|(_, b)| *b as i64));
    let ins = inputs_of(&g);
    for &i in &g.inputs.clone() {
        let ex = ins.get(&i).ok_or_else(|| graph_err(format!("input `{}`", g.value(i).name), "lost its dims"))?;
        let fixed: Vec<usize> = ex.iter().map(|e| e.eval(&bound).unwrap_or(0) as usize).collect();
        let v = g.value_mut(i);
        if let ValueType::Tensor(t) = &v.ty {
            v.ty = ValueType::Tensor(TensorType { dtype: t.dtype, shape: Some(Shape::fixed(&fixed)) });
        }
    }
    crate::passes::prepare(&mut g)?;
    // Counted loops whose shapes change with the iteration (a Slice at `i`) unroll into
    // copies of static shapes, as the fixed-shape harness does.
    let forms = crate::passes::unseq::unroll_sequences(&mut g, &[])?;
    if !forms.iter().all(|f| matches!(f, crate::passes::unseq::OutputForm::Tensor)) {
        return Err(graph_err("the outputs", "include sequences or optionals, which bounded dims do not support"));
    }
    crate::passes::prepare(&mut g)?;
    if opts.fuse {
        g = super::optimize(&g, crate::passes::fuse::Sizes::Bounded)?.0;
    } else {
        crate::passes::fuse::fuse_exact(&mut g)?;
    }
    if let Some(c) = super::with_output_copies(&g) {
        g = c;
    }
    let sym_inputs = inputs_of(&g);
    let mut info = symbolic::analyze_at(&g, &sym_inputs, &targets, &at)?;
    let guards: Vec<crate::ir::Constraint> = unpinned.guards.iter().chain(&info.guards).cloned().collect();
    for guard in &guards {
        // A dim pinned below its bound could decide a comparison otherwise.
        let at_pin = crate::ir::Constraint { left: constant_at(&guard.left, &bound), right: constant_at(&guard.right, &bound), ..guard.clone() };
        if at_pin.holds() != Some(true) {
            return Err(graph_err(guard.what.clone(), format!("is decided otherwise where the dims are pinned ({}); pin the dims with --input", at_pin.failure())));
        }
        if !info.constraints.contains(guard) {
            info.constraints.push(guard.clone());
        }
    }
    // A recorded Reshape that the passes removed (an identity at the bounds, say) would have
    // been decided at the bound: refuse rather than guess.
    for name in targets.keys().filter(|k| !k.starts_with('\0')) {
        if !g.nodes.iter().any(|n| &n.name == name && matches!(n.op, Op::Reshape { .. })) {
            return Err(graph_err(format!("Reshape `{name}`"), "was folded away at the bounds; pin the dims with --input"));
        }
    }
    // Buffers are sized for the largest size over the box of dims, each in 1..= its pinned
    // value: the size at the bounds when every dim of a value grows with the dims, else more
    // (a conv output `x + 1 - k` is largest at the least kernel k, not at the bounds).
    let range = |n: &str| bound(n).map(|b| (1, b));
    let most = check_at_bounds(&g, &info, &bound, &range)?;
    let plan = plan_bounded(&g, &info, &range, &most)?;
    build(&g, &plan, &info, &dims, &sym_inputs, opts)
}

/// Give every node a unique, non-empty name: Reshape targets are recorded by node name.
fn unique_node_names(g: &mut Graph) {
    let mut seen = HashSet::new();
    for i in 0..g.nodes.len() {
        let base = if g.nodes[i].name.is_empty() { format!("{}_{i}", g.nodes[i].op.name()) } else { g.nodes[i].name.clone() };
        g.nodes[i].name = crate::ir::unique_name(base, &mut seen);
    }
}

/// Whether node `id` reads or writes a value whose dims depend on a named dim (or has a body
/// that does).
pub(crate) fn node_is_symbolic(g: &Graph, info: &SymInfo, id: crate::ir::NodeId) -> bool {
    let n = g.node(id);
    info.subs.contains_key(&id) || n.inputs.iter().flatten().chain(&n.outputs).any(|&v| info.is_symbolic(v))
}

/// The memory plan at the bounds, with the buffers `most` gives more than their size at the
/// bounds. Symbolic convolutions get the whole im2col buffer at the
/// bound as scratch (the runtime's tiling picks a tile per size, and a smaller size can ask
/// for a larger tile); in place is kept to unary ops and to ops of `crate::ops` that allow it, whose output has
/// the input's shape.
pub(crate) fn plan_bounded(g: &Graph, info: &SymInfo, range: &dyn Fn(&str) -> Option<(i64, i64)>, most: &HashMap<ValueId, usize>) -> Result<MemoryPlan, CodegenError> {
    let mut scratch_of = HashMap::new();
    for id in (0..g.nodes.len()).map(|i| crate::ir::NodeId(i as u32)) {
        if let Some(sub) = info.subs.get(&id) {
            scratch_of.insert(id, super::emit::control::scan_scratch_bounded(g, id, sub));
            continue;
        }
        if !node_is_symbolic(g, info, id) {
            continue;
        }
        let b = match emit::conv_scratch_bound(g, info, id, range, Lowering::EXACT) {
            Some(b) => b,
            None => {
                let b = super::emit::scratch_bytes(g, id, Lowering::EXACT);
                // Other ops size their scratch at the bounds, too small for a size that is
                // larger below them.
                let n = g.node(id);
                if b > 0 && n.inputs.iter().flatten().chain(&n.outputs).any(|v| most.contains_key(v)) {
                    return Err(graph_err(format!("node `{}` ({})", n.name, n.op.name()), "needs scratch for sizes larger below the bounds than at them; pin the dims with --input"));
                }
                b
            }
        };
        scratch_of.insert(id, b);
    }
    let scratch = |g: &Graph, id| scratch_of.get(&id).copied().unwrap_or_else(|| super::emit::scratch_bytes(g, id, Lowering::EXACT));
    let inplace = |g: &Graph, id, i| {
        super::emit::can_inplace(g, id, i) && (!node_is_symbolic(g, info, id) || matches!(g.node(id).op, Op::Unary(_) | Op::Def(_)))
    };
    let bytes = |_: &Graph, v| most.get(&v).copied();
    Ok(memory::plan(g, &PlanOptions { scratch: &scratch, can_inplace: &inplace, bytes: &bytes, ..PlanOptions::default() })?)
}

pub use names::dim_field;

/// The run-time size table: every distinct non-constant dim expression, in a fixed order
/// (those of the analysed shapes first; an emitter may add more, `forward` computes them all).
pub(crate) struct Sizes {
    index: std::cell::RefCell<HashMap<DimExpr, usize>>,
    list: std::cell::RefCell<Vec<DimExpr>>,
}

impl Sizes {
    fn new(info: &SymInfo) -> Sizes {
        let set: BTreeSet<DimExpr> = info.shapes.values().flatten().filter(|d| d.as_const().is_none()).cloned().collect();
        let list: Vec<DimExpr> = set.into_iter().collect();
        let index = list.iter().enumerate().map(|(i, d)| (d.clone(), i)).collect();
        Sizes { index: std::cell::RefCell::new(index), list: std::cell::RefCell::new(list) }
    }

    /// A `usize` expression for dim `d` in generated code.
    pub fn dim(&self, d: &DimExpr) -> String {
        if let Some(c) = d.as_const() {
            return format!("{}usize", c.max(0));
        }
        let mut index = self.index.borrow_mut();
        let i = *index.entry(d.clone()).or_insert_with(|| {
            let mut list = self.list.borrow_mut();
            list.push(d.clone());
            list.len() - 1
        });
        format!("sz[{i}]")
    }

    /// The element count of dims `ds`: the sizes' product, the constant dims folded into one
    /// factor last; in parentheses when more than one factor.
    pub fn numel(&self, ds: &[DimExpr]) -> String {
        let known: i64 = ds.iter().filter_map(DimExpr::as_const).map(|c| c.max(0)).product();
        let mut factors: Vec<String> = ds.iter().filter(|d| d.as_const().is_none()).map(|d| self.dim(d)).collect();
        if known != 1 || factors.is_empty() {
            factors.push(format!("{known}usize"));
        }
        match factors.as_slice() {
            [one] => one.clone(),
            _ => format!("({})", factors.join(" * ")),
        }
    }
}

fn build(
    g: &Graph,
    plan: &MemoryPlan,
    info: &SymInfo,
    dims: &[(String, usize)],
    sym_inputs: &HashMap<ValueId, Vec<DimExpr>>,
    opts: &CodegenOptions,
) -> Result<(Generated, BoundedInfo), CodegenError> {
    let mut taken: HashSet<String> = dims.iter().map(|(n, _)| dim_field(n)).collect();
    let inputs: Vec<IoDesc> = g.inputs.iter().map(|&i| builder::io(g, i, &mut taken)).collect::<Result<_, _>>()?;
    // Each output has two fields, `x` and `x_shape`: both names must be free.
    let outputs = builder::outputs(g, plan, |d, taken| {
        while !taken.insert(format!("{}_shape", d.ident)) {
            d.ident = names::ident(&d.ident, taken);
        }
    })?;
    let output_shapes: Vec<Vec<DimExpr>> =
        g.outputs.iter().map(|o| info.shapes.get(o).cloned().ok_or_else(|| graph_err(format!("output `{}`", g.value(*o).name), "has no bounded shape"))).collect::<Result<_, _>>()?;
    let input_shapes: Vec<Vec<DimExpr>> = g
        .inputs
        .iter()
        .map(|i| sym_inputs.get(i).cloned().ok_or_else(|| graph_err(format!("input `{}`", g.value(*i).name), "lost its dims")))
        .collect::<Result<_, _>>()?;
    let sizes = Sizes::new(info);
    let cx = Ctx {
        g,
        plan,
        weights: std::cell::RefCell::new(weights::layout(g, &plan.order, Lowering::EXACT)),
        inputs: input_names(g, &inputs, false),
        state: HashMap::new(),
        lowering: Lowering::EXACT,
    };
    let sym = crate::ops::Sym { info, sizes: &sizes };
    let heap = needs_heap(g);
    let Params { forward: input_params, parts: part_params, args: input_args } = params(&inputs, heap, |d, life| format!("[{}]", elem_ty(d.dtype, life)));
    // Products of run-time sizes stay in parentheses wherever they go, so that every place
    // that prints one is right whatever operator surrounds it; the lint would flag those
    // passed as arguments.
    let parts = Parts { prefix: "part", more: Some(("sz: &[usize]", "sz")), params: &part_params, lints: &["unused_parens"], bodies: emit_parts(&cx, Some(sym), opts.nodes_per_fn, None)? };
    let wl = cx.weights.into_inner();

    let shape_str = |ex: &[DimExpr]| format!("[{}]", ex.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "));
    let mut m = ModuleBuilder::new(&opts.source_name, "");
    for (d, ex) in inputs.iter().zip(&input_shapes) {
        m.io_line("input", d, &shape_str(ex));
    }
    for (d, ex) in outputs.iter().zip(&output_shapes) {
        m.io_line("output", d, &shape_str(ex));
    }
    let bounds: Vec<String> = dims.iter().map(|(n, b)| format!("{n} <= {b}")).collect();
    m.note(&format!("bounded dims: {}", names::text(&bounds.join(", "))));
    m.note(&format!("arena {} bytes at the bounds (lower bound {}), weights {} bytes", plan.arena_bytes, plan.lower_bound_bytes, wl.blob.len()));

    m.item("pub use rt::dims::DimError;");
    for (n, b) in dims {
        m.constant(&format!("{}_MAX", names::const_ident(n)), &format!("Upper bound of dim `{}`: the arena is sized for it.", names::text(n)), b);
    }
    m.constant("ARENA_BYTES", "Bytes of working memory `forward` needs at the bounds: the size of [`Arena`].", plan.arena_bytes.max(64));
    m.weights_bytes(opts, wl.blob.len());
    m.buffer("Arena", "ARENA_BYTES", "The working memory of [`Model::forward`]: one buffer, sized by the compiler for the bounds.");
    m.weights_static(opts);
    let mut dims_struct = String::from("/// The actual sizes of the bounded dims for one call of [`Model::forward`].\n#[derive(Debug, Clone, Copy, PartialEq, Eq)]\npub struct Dims {\n");
    for (n, b) in dims {
        let _ = writeln!(dims_struct, "    /// `{}`, at most {b}.\n    pub {}: usize,", names::text(n), dim_field(n));
    }
    m.item(&(dims_struct + "}"));
    let fields: Vec<String> = outputs
        .iter()
        .zip(&output_shapes)
        .map(|(d, ex)| format!("/// `{}`: {} {}\npub {}: &'a [{}],\npub {}_shape: [usize; {}],", names::text(&d.name), d.dtype, names::text(&shape_str(ex)), d.ident, elem_ty(d.dtype, "'a"), d.ident, ex.len()))
        .collect();
    m.outputs_struct("The model's outputs, borrowed from the arena, with their run-time shapes.", &fields);

    // Output shapes and input lengths may name sizes too: render them before the table.
    let out_fields: Vec<(String, String)> = output_shapes.iter().map(|ex| (sizes.numel(ex), ex.iter().map(|e| sizes.dim(e)).collect::<Vec<_>>().join(", "))).collect();
    let in_lens: Vec<String> = input_shapes.iter().map(|ex| sizes.numel(ex)).collect();
    let mut result = String::from("    Ok(Outputs {\n");
    for ((&o, d), (len, dims_lit)) in g.outputs.iter().zip(&outputs).zip(&out_fields) {
        let slot = plan.slots.get(&o).ok_or_else(|| graph_err(format!("output `{}`", d.name), "has no arena slot"))?;
        let t = rust_ty(d.dtype).unwrap_or("f32");
        let _ = writeln!(
            result,
            "        // SAFETY: the plan keeps graph outputs live to the end; the slot is sized for the bounds.\n        {}: unsafe {{ rt::arena::view::<{t}>(a, {}, {len}) }},\n        {}_shape: [{dims_lit}],",
            d.ident,
            slot.offset,
            d.ident,
        );
    }
    result.push_str("    })\n");
    let forward = Entry {
        doc: "/// Run the model at `dims` (each within its bound). Errors when a dim is out of bounds, a\n\
              /// derived size is below 1, or an input's length does not match its dims.\n",
        lints: &["unused_parens"],
        sig: format!(
            "forward<'a>(&self, {}) -> Result<Outputs<'a>, DimError>",
            ["arena: &'a mut Arena".to_string()].into_iter().chain(input_params).chain(["dims: Dims".to_string()]).collect::<Vec<_>>().join(", ")
        ),
        setup: dim_checks(dims, &sizes, info, &inputs, &in_lens),
        then: if heap { "    heap.clear();\n".into() } else { String::new() },
        calls: parts.calls(&input_args),
        result,
    };
    m.model(MODEL_STRUCT, &[forward]);
    m.parts(parts);
    let gen = Generated::of(m.finish()?, wl.blob, plan, inputs, outputs, 0, heap);
    Ok((gen, BoundedInfo { dims: dims.to_vec(), input_shapes, output_shapes }))
}

/// The start of a bounded `forward`: each dim checked against its bound, the size table `sz`
/// computed, the sizes the ops need equal that the compiler could not prove equal checked, and
/// each input's length (`in_lens`) checked against its dims.
fn dim_checks(dims: &[(String, usize)], sizes: &Sizes, info: &SymInfo, inputs: &[IoDesc], in_lens: &[String]) -> String {
    let mut s = String::new();
    for (n, _) in dims {
        let _ = writeln!(s, "    let d_{id} = rt::dims::check({}, dims.{id}, {}_MAX)? as i64;", names::str_lit(n), names::const_ident(n), id = dim_field(n));
    }
    // `d_` keeps the dims apart from the inputs' names.
    let var = |n: &str| format!("d_{}", dim_field(n));
    let list = sizes.list.borrow().clone();
    let _ = writeln!(s, "    let mut sz = [0usize; {}];", list.len().max(1));
    for (i, e) in list.iter().enumerate() {
        let _ = writeln!(s, "    sz[{i}] = rt::dims::derived({}, {})?;", names::str_lit(&e.to_string()), e.to_rust(&var));
    }
    let _ = writeln!(s, "    let sz = &sz[..];");
    for c in &info.constraints {
        let what = format!("{} ({} and {})", c.what, c.left, c.right);
        let check = match c.rel {
            crate::ir::Rel::Equal => "same",
            crate::ir::Rel::AtMost => "at_most",
            crate::ir::Rel::Divides => "divides",
            crate::ir::Rel::Differ => "differ",
        };
        let _ = writeln!(s, "    rt::dims::{check}({}, {}, {})?;", names::str_lit(&what), c.left.to_rust(&var), c.right.to_rust(&var));
    }
    for (d, len) in inputs.iter().zip(in_lens) {
        let _ = writeln!(s, "    rt::dims::check_len({}, {}.len(), {len})?;", names::str_lit(&d.name), d.ident);
    }
    s
}
