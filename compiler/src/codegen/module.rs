//! Assembling the module: constants, the arena type, the model API and the node functions,
//! formatted with prettyplease.
use super::emit::{self, rust_ty, Ctx};
use super::names;
use super::{CodegenError, CodegenOptions, IoDesc};
use crate::ir::{Graph, ValueKind};
use crate::memory::MemoryPlan;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// The generated module and what the compiler knows about it.
pub struct Generated {
    pub source: String,
    pub weights: Vec<u8>,
    pub arena_bytes: usize,
    pub lower_bound_bytes: usize,
    pub weights_bytes: usize,
    pub total_buffer_bytes: usize,
    pub inputs: Vec<IoDesc>,
    pub outputs: Vec<IoDesc>,
    /// Nodes timed by `PROFILE_NS` (0 unless `CodegenOptions::profile`).
    pub profiled_nodes: usize,
}

/// Where inputs live inside the part functions: `in_<ident>`, a name no emitter's local takes.
pub(crate) fn part_param(ident: &str) -> String {
    format!("in_{ident}")
}

/// A block label (`'conv1: { … }`) naming a node in the generated code: an identifier made
/// like every other (labels live in a namespace of their own, `taken` holds the labels).
pub(crate) fn block_label(name: &str, taken: &mut HashSet<String>) -> String {
    names::ident(name, taken)
}

pub(crate) fn io(g: &Graph, id: crate::ir::ValueId, taken: &mut HashSet<String>) -> Result<IoDesc, CodegenError> {
    let v = g.value(id);
    let err = |r: &str| CodegenError::Graph { what: format!("value `{}`", v.name), reason: r.into() };
    let t = g.tensor_type(id).ok_or_else(|| err("is not a tensor with a known type"))?;
    let shape = t.shape.as_ref().and_then(|s| s.as_fixed()).ok_or_else(|| err("has no static shape (pin it with --input NAME=DIMS)"))?;
    rust_ty(t.dtype).ok_or_else(|| err(&format!("has dtype {}, not supported by codegen yet", t.dtype)))?;
    Ok(IoDesc { name: v.name.clone(), ident: names::ident(&v.name, taken), dtype: t.dtype, shape })
}

/// The `Outputs { … }` expression ending `forward`: each graph output borrowed from its slot.
pub(crate) fn outputs_literal(g: &Graph, plan: &MemoryPlan, outputs: &[IoDesc]) -> Result<String, CodegenError> {
    let mut s = String::from("    Outputs {\n");
    for (&o, d) in g.outputs.iter().zip(outputs) {
        let slot = plan.slots.get(&o).ok_or_else(|| CodegenError::Graph { what: format!("output `{}`", d.name), reason: "has no arena slot".into() })?;
        let _ = writeln!(
            s,
            "        // SAFETY: the plan keeps graph outputs live to the end; the slot is aligned.\n        {}: unsafe {{ rt::arena::view_array::<{}, {}>(a, {}) }},",
            d.ident,
            rust_ty(d.dtype).unwrap_or("f32"),
            d.shape.iter().product::<usize>(),
            slot.offset
        );
    }
    s.push_str("    }\n");
    Ok(s)
}

/// The statements of every node in `plan.order`, grouped into chunks of `nodes_per_fn` nodes
/// (one generated function each), each node in a labelled block named after it. With
/// `profile`, each block is timed into `PROFILE_NS[k]` and `(op, name)` of node `k` is pushed
/// onto it.
pub(crate) fn emit_parts(cx: &Ctx, plan: &MemoryPlan, nodes_per_fn: usize, mut profile: Option<&mut Vec<(String, String)>>) -> Result<Vec<String>, CodegenError> {
    let g = cx.g;
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut in_part = 0;
    let mut labels = HashSet::new();
    for &id in &plan.order {
        let n = g.node(id);
        if let Some(stmts) = emit::emit_node(cx, id)? {
            let outs: Vec<String> = n.outputs.iter().map(|&o| g.value(o).name.clone()).collect();
            let op = n.source_op.as_ref().map(|s| s.0.clone()).unwrap_or_else(|| n.op.name());
            // A labelled block keeps the node's name readable after formatting (comments do not
            // survive prettyplease).
            let label = block_label(&n.name, &mut labels);
            let block = format!("'{label}: {{\n{stmts}\n}}");
            let block = match profile.as_deref_mut() {
                Some(nodes) => {
                    let k = nodes.len();
                    nodes.push((op.clone(), n.name.clone()));
                    format!("let __t = rt::profile::now_ns();\n{block}\nrt::profile::add(&PROFILE_NS[{k}], __t);")
                }
                None => block,
            };
            let _ = writeln!(current, "// {} {} -> {}\n{block}", names::text(&op), names::text(&n.name), names::text(&outs.join(", ")));
            in_part += 1;
        }
        if in_part >= nodes_per_fn.max(1) {
            parts.push(std::mem::take(&mut current));
            in_part = 0;
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    Ok(parts)
}

/// Parse and pretty-print module source given as pieces of whole items, one piece at a time
/// (each piece's text is dropped once formatted): the syntax tree of a model with a million
/// nodes never exists at once. The output is what formatting the concatenation would give.
pub(crate) fn format_pieces(pieces: Vec<String>) -> Result<String, CodegenError> {
    let mut out = String::new();
    for piece in pieces {
        let file = syn::parse_file(&piece).map_err(|e| CodegenError::Format(e.to_string()))?;
        drop(piece);
        out.push_str(&prettyplease::unparse(&file));
    }
    Ok(out)
}

/// The profiling tables of a module built with `CodegenOptions::profile`.
pub(crate) fn profile_statics(nodes: &[(String, String)]) -> String {
    let n = nodes.len();
    let entries: Vec<String> = nodes.iter().map(|(op, name)| format!("({}, {})", names::str_lit(op), names::str_lit(name))).collect();
    format!(
        "/// `(op, node)` of every timed node, in the order `forward` runs them.\npub const PROFILE_NODES: [(&str, &str); {n}] = [{}];\n\
         /// Nanoseconds spent in each node of [`PROFILE_NODES`] over every `forward` so far.\n\
         pub static PROFILE_NS: [core::sync::atomic::AtomicU64; {n}] = [const {{ core::sync::atomic::AtomicU64::new(0) }}; {n}];",
        entries.join(", ")
    )
}

/// `Model` (borrowing the embedded weights blob or a caller's copy) and the opening of its impl
/// block, shared by static and bounded modules; `forward` follows.
pub(crate) const MODEL_STRUCT: &str = "/// The compiled model. Weights are borrowed: the embedded blob, or a caller's copy.
pub struct Model<'w> {
    w: &'w [u8],
}
impl Model<'static> {
    /// The model with the weights embedded at compile time.
    pub fn new() -> Self { Model { w: &WEIGHTS.0 } }
}
impl Default for Model<'static> {
    fn default() -> Self { Self::new() }
}
impl<'w> Model<'w> {
/// The model with weights from elsewhere (flash, a file): `WEIGHTS_BYTES` bytes, 64-byte aligned.
pub fn with_weights(w: &'w [u8]) -> Result<Self, rt::arena::WeightsError> {
    rt::arena::check_weights(w, WEIGHTS_BYTES)?;
    Ok(Model { w })
}";

pub fn build(p: super::Plan, opts: &CodegenOptions) -> Result<Generated, CodegenError> {
    let (g, plan) = (&p.graph, &p.memory);
    let mut taken = HashSet::new();
    let inputs: Vec<IoDesc> = g.inputs.iter().map(|&i| io(g, i, &mut taken)).collect::<Result<_, _>>()?;
    let mut out_taken = HashSet::new();
    let outputs: Vec<IoDesc> = g.outputs.iter().map(|&o| io(g, o, &mut out_taken)).collect::<Result<_, _>>()?;
    for (&o, d) in g.outputs.iter().zip(&outputs) {
        if !matches!(g.value(o).kind, ValueKind::Node(_)) || !plan.slots.contains_key(&o) {
            return Err(CodegenError::Graph { what: format!("output `{}`", d.name), reason: "is not computed by a node".into() });
        }
    }
    let cx = Ctx {
        g,
        plan,
        weights: std::cell::RefCell::new(p.weights),
        inputs: g.inputs.iter().zip(&inputs).map(|(&v, d)| (v, part_param(&d.ident))).collect::<HashMap<_, _>>(),
        state: HashMap::new(),
        lowering: p.lowering,
    };

    // Node statements, grouped into functions of `nodes_per_fn` nodes.
    let param = |name: &str, d: &IoDesc| format!("{name}: &[{}; {}]", rust_ty(d.dtype).unwrap_or("f32"), d.shape.iter().product::<usize>());
    let input_params: Vec<String> = inputs.iter().map(|d| param(&d.ident, d)).collect();
    let part_params: Vec<String> = inputs.iter().map(|d| param(&part_param(&d.ident), d)).collect();
    let input_args: Vec<String> = inputs.iter().map(|d| d.ident.clone()).collect();
    let mut timed = Vec::new();
    let parts = emit_parts(&cx, plan, opts.nodes_per_fn, opts.profile.then_some(&mut timed))?;

    let wl = cx.weights.into_inner();
    let mut header = String::new();
    let _ = writeln!(header, "// Generated by burnc {} from `{}`. Do not edit: regenerate.", env!("CARGO_PKG_VERSION"), names::text(&opts.source_name));
    let _ = writeln!(header, "//");
    for d in &inputs {
        let _ = writeln!(header, "// input  `{}`: {} {:?}", names::text(&d.name), d.dtype, d.shape);
    }
    for d in &outputs {
        let _ = writeln!(header, "// output `{}`: {} {:?}", names::text(&d.name), d.dtype, d.shape);
    }
    let _ = writeln!(header, "// arena {} bytes (lower bound {}), weights {} bytes", plan.arena_bytes, plan.lower_bound_bytes, wl.blob.len());
    let mut src = String::new();
    let _ = writeln!(src, "use burnc_runtime as rt;");
    let _ = writeln!(src, "/// Bytes of working memory `forward` needs: the size of [`Arena`].\npub const ARENA_BYTES: usize = {};", plan.arena_bytes.max(64));
    let _ = writeln!(src, "/// Bytes of the weights blob (`{}`).\npub const WEIGHTS_BYTES: usize = {};", names::text(&opts.weights_file), wl.blob.len());
    let _ = writeln!(
        src,
        "/// The working memory of [`Model::forward`]: one buffer, sized by the compiler. Keep it in a\n\
         /// `static`, on the heap, or on the stack when small; reuse it across calls.\n\
         #[repr(C, align(64))]\npub struct Arena(pub [u8; ARENA_BYTES]);\n\
         impl Arena {{\n    pub const fn new() -> Self {{ Arena([0; ARENA_BYTES]) }}\n}}\n\
         impl Default for Arena {{\n    fn default() -> Self {{ Self::new() }}\n}}"
    );
    let _ = writeln!(
        src,
        "static WEIGHTS: &rt::arena::Aligned<[u8; WEIGHTS_BYTES]> = &rt::arena::Aligned(*include_bytes!({}));",
        names::str_lit(&opts.weights_file)
    );
    // Outputs struct.
    let _ = writeln!(src, "/// The model's outputs, borrowed from the arena.\npub struct Outputs<'a> {{");
    for d in &outputs {
        let _ = writeln!(src, "    /// `{}`: {} {:?}\n    pub {}: &'a [{}; {}],", names::text(&d.name), d.dtype, d.shape, d.ident, rust_ty(d.dtype).unwrap_or("f32"), d.shape.iter().product::<usize>());
    }
    let _ = writeln!(src, "}}");
    if opts.profile {
        let _ = writeln!(src, "{}", profile_statics(&timed));
    }
    let _ = writeln!(src, "{MODEL_STRUCT}");
    let mut fwd = format!(
        "/// Run the model. Every shape is fixed at compile time, so this cannot fail.\n#[allow(clippy::too_many_arguments)]\npub fn forward<'a>(&self, arena: &'a mut Arena, {}) -> Outputs<'a> {{\n    let a = rt::arena::Region::of(&mut arena.0);\n    let w = self.w;\n",
        input_params.join(", ")
    );
    for (i, _) in parts.iter().enumerate() {
        let _ = writeln!(fwd, "    part_{i}(a, w, {});", input_args.join(", "));
    }
    fwd.push_str(&outputs_literal(g, plan, &outputs)?);
    let _ = writeln!(fwd, "}}\n}}");
    src.push_str(&fwd);
    let mut pieces = vec![src];
    for (i, body) in parts.into_iter().enumerate() {
        pieces.push(format!(
            "#[inline(never)]\n#[allow(unused_unsafe, unused_variables, unused_labels, clippy::all)]\nfn part_{i}(a: rt::arena::Region, w: &[u8], {}) {{\n{body}}}\n",
            part_params.join(", ")
        ));
    }
    let source = format!("{header}{}", format_pieces(pieces)?);
    Ok(Generated {
        source,
        weights_bytes: wl.blob.len(),
        weights: wl.blob,
        arena_bytes: plan.arena_bytes.max(64),
        lower_bound_bytes: plan.lower_bound_bytes,
        total_buffer_bytes: plan.total_buffer_bytes,
        inputs,
        outputs,
        profiled_nodes: timed.len(),
    })
}
