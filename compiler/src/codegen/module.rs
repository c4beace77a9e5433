//! The fixed-shape inference module: every shape a literal, `forward` infallible; optionally
//! each node timed (`CodegenOptions::profile`). Assembled by [`super::builder`].
use super::builder::{self, emit_parts, fixed_array, fixed_output_fields, input_names, needs_heap, outputs_literal, params, Entry, Generated, ModuleBuilder, Params, Parts, MODEL_STRUCT};
use super::emit::Ctx;
use super::names;
use super::{CodegenError, CodegenOptions, IoDesc};
use std::collections::{HashMap, HashSet};

/// The profiling tables of a module built with `CodegenOptions::profile`.
fn profile_statics(nodes: &[(String, String)]) -> String {
    let n = nodes.len();
    let entries: Vec<String> = nodes.iter().map(|(op, name)| format!("({}, {})", names::str_lit(op), names::str_lit(name))).collect();
    format!(
        "/// `(op, node)` of every timed node, in the order `forward` runs them.\npub const PROFILE_NODES: [(&str, &str); {n}] = [{}];\n\
         /// Nanoseconds spent in each node of [`PROFILE_NODES`] over every `forward` so far.\n\
         pub static PROFILE_NS: [core::sync::atomic::AtomicU64; {n}] = [const {{ core::sync::atomic::AtomicU64::new(0) }}; {n}];",
        entries.join(", ")
    )
}

pub fn build(p: super::Plan, opts: &CodegenOptions) -> Result<Generated, CodegenError> {
    let (g, plan) = (&p.graph, &p.memory);
    let mut taken = HashSet::new();
    let inputs: Vec<IoDesc> = g.inputs.iter().map(|&i| builder::io(g, i, &mut taken)).collect::<Result<_, _>>()?;
    let outputs = builder::outputs(g, plan, |_, _| {})?;
    let cx = Ctx { g, plan, weights: std::cell::RefCell::new(p.weights), inputs: input_names(g, &inputs, true), state: HashMap::new(), lowering: p.lowering };
    let heap = needs_heap(g);
    let Params { forward: input_params, parts: part_params, args: input_args } = params(&inputs, heap, fixed_array);
    let mut timed = Vec::new();
    let parts = Parts { prefix: "part", more: None, params: &part_params, lints: &[], bodies: emit_parts(&cx, None, opts.nodes_per_fn, opts.profile.then_some(&mut timed))? };
    let wl = cx.weights.into_inner();

    let mut m = ModuleBuilder::new(&opts.source_name, "");
    m.io_lines(&inputs, &outputs);
    if g.values.iter().any(|v| matches!(&v.ty, crate::ir::ValueType::Tensor(t) if t.dtype == crate::ir::DType::Str)) {
        m.note("string tensors: needs burnc-runtime's `strings` feature");
    }
    m.note(&format!("arena {} bytes (lower bound {}), weights {} bytes", plan.arena_bytes, plan.lower_bound_bytes, wl.blob.len()));
    m.constant("ARENA_BYTES", "Bytes of working memory `forward` needs: the size of [`Arena`].", plan.arena_bytes.max(64));
    m.weights_bytes(opts, wl.blob.len());
    m.buffer(
        "Arena",
        "ARENA_BYTES",
        "The working memory of [`Model::forward`]: one buffer, sized by the compiler. Keep it in a\n\
         /// `static`, on the heap, or on the stack when small; reuse it across calls.",
    );
    m.weights_static(opts);
    m.outputs_struct("The model's outputs, borrowed from the arena.", &fixed_output_fields(&outputs));
    if opts.profile {
        m.item(&profile_statics(&timed));
    }
    let forward = Entry {
        doc: if heap {
            "/// Run the model. Every shape is fixed at compile time, so this cannot fail.\n\
             /// Strings the model makes are kept in `heap` (emptied first) until the next call.\n"
        } else {
            "/// Run the model. Every shape is fixed at compile time, so this cannot fail.\n"
        },
        lints: &[],
        sig: format!("forward<'a>(&self, arena: &'a mut Arena, {}) -> Outputs<'a>", input_params.join(", ")),
        setup: String::new(),
        then: if heap { "    heap.clear();\n".into() } else { String::new() },
        calls: parts.calls(&input_args),
        result: outputs_literal(g, plan, &outputs)?,
    };
    m.model(MODEL_STRUCT, &[forward]);
    m.parts(parts);
    Ok(Generated::of(m.finish()?, wl.blob, plan, inputs, outputs, timed.len(), heap))
}
