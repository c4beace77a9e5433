//! The one builder of a generated module. Fixed-shape inference (`module.rs`), bounded dims
//! (`bounded.rs`), training (`train.rs`) and the GPU hosts (`gpu/host.rs`) say only what
//! differs — their constants, types and entry functions — and share what is here: the header
//! comment, the inputs and outputs, the arena-like buffer types, the node blocks grouped into
//! part functions, the entry functions' prologue, and formatting with prettyplease.
use super::emit::{self, rust_ty, Ctx};
use super::names;
use super::{CodegenError, CodegenOptions, IoDesc};
use crate::ir::{Graph, ValueId, ValueKind};
use crate::memory::MemoryPlan;
use crate::ops::Sym;
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
    /// Whether `forward` takes a `&mut rt::strings::Heap` (first, after the arena) for the
    /// strings the model makes.
    pub heap: bool,
}

impl Generated {
    /// A module's source with what the compiler knows of it: the weights blob and the plan's
    /// sizes.
    pub(crate) fn of(source: String, weights: Vec<u8>, plan: &MemoryPlan, inputs: Vec<IoDesc>, outputs: Vec<IoDesc>, profiled_nodes: usize, heap: bool) -> Generated {
        Generated {
            source,
            weights_bytes: weights.len(),
            weights,
            arena_bytes: plan.arena_bytes.max(64),
            lower_bound_bytes: plan.lower_bound_bytes,
            total_buffer_bytes: plan.total_buffer_bytes,
            inputs,
            outputs,
            profiled_nodes,
            heap,
        }
    }
}

/// A graph input or output as the API exposes it (`taken` holds the identifiers used so far):
/// a tensor of a static shape and a dtype codegen supports.
pub(crate) fn io(g: &Graph, id: ValueId, taken: &mut HashSet<String>) -> Result<IoDesc, CodegenError> {
    let v = g.value(id);
    let err = |r: &str| CodegenError::Graph { what: format!("value `{}`", v.name), reason: r.into() };
    let t = g.tensor_type(id).ok_or_else(|| err("is not a tensor with a known type"))?;
    let shape = t.shape.as_ref().and_then(|s| s.as_fixed()).ok_or_else(|| err("has no static shape (pin it with --input NAME=DIMS)"))?;
    rust_ty(t.dtype).ok_or_else(|| err(&format!("has dtype {}, not supported by codegen yet", t.dtype)))?;
    Ok(IoDesc { name: v.name.clone(), ident: names::ident(&v.name, taken), dtype: t.dtype, shape })
}

/// The graph's outputs (identifiers of their own, apart from the inputs'), each computed by a
/// node into an arena slot of `plan`. `reserve` takes the names an output needs besides its
/// own (it may rename the output) before the next output is named.
pub(crate) fn outputs(g: &Graph, plan: &MemoryPlan, mut reserve: impl FnMut(&mut IoDesc, &mut HashSet<String>)) -> Result<Vec<IoDesc>, CodegenError> {
    let mut taken = HashSet::new();
    let mut outputs = Vec::new();
    for &o in &g.outputs {
        let mut d = io(g, o, &mut taken)?;
        reserve(&mut d, &mut taken);
        outputs.push(d);
    }
    for (&o, d) in g.outputs.iter().zip(&outputs) {
        if !matches!(g.value(o).kind, ValueKind::Node(_)) || !plan.slots.contains_key(&o) {
            return Err(CodegenError::Graph { what: format!("output `{}`", d.name), reason: "is not computed by a node".into() });
        }
    }
    Ok(outputs)
}

/// The element type of a graph input or output: string handles carry the lifetime `life`.
pub(crate) fn elem_ty(d: crate::ir::DType, life: &str) -> String {
    match d {
        crate::ir::DType::Str => format!("rt::strings::Str<{life}>"),
        d => rust_ty(d).unwrap_or("f32").to_string(),
    }
}

/// `[T; N]`: a fixed-shape input or output as the API takes or gives it.
pub(crate) fn fixed_array(d: &IoDesc, life: &str) -> String {
    format!("[{}; {}]", elem_ty(d.dtype, life), d.shape.iter().product::<usize>())
}

/// Whether a node makes string tensors, so `forward` takes a heap for the text.
pub(crate) fn needs_heap(g: &Graph) -> bool {
    g.nodes.iter().flat_map(|n| &n.outputs).any(|&o| g.tensor_type(o).is_some_and(|t| t.dtype == crate::ir::DType::Str))
}

/// The inputs as `forward` takes them, as the part functions take them, and the arguments
/// `forward` passes on; the heap first when the model makes strings.
pub(crate) struct Params {
    pub forward: Vec<String>,
    pub parts: Vec<String>,
    pub args: Vec<String>,
}

/// [`Params`] for `inputs`, input `d` being a `&{slice(d, lifetime)}`. Strings a caller passes
/// carry `forward`'s `'a`: they must outlive the outputs, which may point into them.
pub(crate) fn params(inputs: &[IoDesc], heap: bool, slice: impl Fn(&IoDesc, &str) -> String) -> Params {
    let mut p = Params {
        forward: inputs.iter().map(|d| format!("{}: &{}", d.ident, slice(d, "'a"))).collect(),
        parts: inputs.iter().map(|d| format!("{}: &{}", part_param(&d.ident), slice(d, "'_"))).collect(),
        args: inputs.iter().map(|d| d.ident.clone()).collect(),
    };
    if heap {
        p.forward.insert(0, "heap: &'a mut rt::strings::Heap".into());
        p.parts.insert(0, "h: &mut rt::strings::Heap".into());
        p.args.insert(0, "heap".into());
    }
    p
}

/// Where inputs live inside the part functions: `in_<ident>`, a name no emitter's local takes.
pub(crate) fn part_param(ident: &str) -> String {
    format!("in_{ident}")
}

/// How the part functions read the graph inputs, for [`Ctx::inputs`]: each parameter, or the
/// parameter as a slice where it is an array (`arrays`).
pub(crate) fn input_names(g: &Graph, inputs: &[IoDesc], arrays: bool) -> HashMap<ValueId, String> {
    g.inputs.iter().zip(inputs).map(|(&v, d)| (v, if arrays { array_read(&d.ident) } else { part_param(&d.ident) })).collect()
}

/// An array parameter of the part functions read as a slice.
pub(crate) fn array_read(ident: &str) -> String {
    format!("&{}[..]", part_param(ident))
}

/// A block label (`'conv1: { … }`) naming a node in the generated code: an identifier made
/// like every other (labels live in a namespace of their own, `taken` holds the labels).
pub(crate) fn block_label(name: &str, taken: &mut HashSet<String>) -> String {
    names::ident(name, taken)
}

/// The fields of an `Outputs` struct of fixed-shape outputs: each borrowed from the arena.
pub(crate) fn fixed_output_fields(outputs: &[IoDesc]) -> Vec<String> {
    outputs.iter().map(|d| format!("/// `{}`: {} {:?}\npub {}: &'a {},", names::text(&d.name), d.dtype, d.shape, d.ident, fixed_array(d, "'a"))).collect()
}

/// The `Outputs { … }` expression ending `forward`: each fixed-shape output borrowed from its
/// slot.
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

/// The statements of every node in `plan.order` (bounded dims with `sym`), grouped into chunks
/// of `nodes_per_fn` nodes (one part function each), each node in a labelled block named after
/// it. With `profile`, each block is timed into `PROFILE_NS[k]` and `(op, name)` of node `k`
/// is pushed onto it.
pub(crate) fn emit_parts(cx: &Ctx, sym: Option<Sym>, nodes_per_fn: usize, mut profile: Option<&mut Vec<(String, String)>>) -> Result<Vec<String>, CodegenError> {
    let g = cx.g;
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut in_part = 0;
    let mut labels = HashSet::new();
    for &id in &cx.plan.order {
        let n = g.node(id);
        if let Some(stmts) = emit::emit_node(cx, sym, id)? {
            let op = n.source_op.as_ref().map(|s| s.0.clone()).unwrap_or_else(|| n.op.name());
            // A labelled block keeps the node's name readable after formatting; the comment
            // right above it (op, operands and their types) is put back after formatting
            // ([`format_pieces`]: comments do not survive prettyplease).
            let label = block_label(&n.name, &mut labels);
            let mut comment = node_comment(g, sym, n, &op);
            if let Some(placed) = cx.plan.placed.get(&id) {
                let names: Vec<String> = placed.iter().filter_map(|&i| n.inputs.get(i).copied().flatten()).map(|v| format!("`{}`", g.value(v).name)).collect();
                let by = if names.len() == 1 { "its producer" } else { "their producers" };
                comment += &format!(" ({})", names::text(&format!("{} written here by {by}", names.join(", "))));
            }
            let block = format!("{comment}\n'{label}: {{\n{stmts}\n}}");
            let block = match profile.as_deref_mut() {
                Some(nodes) => {
                    let k = nodes.len();
                    nodes.push((op.clone(), n.name.clone()));
                    format!("let __t = rt::profile::now_ns();\n{block}\nrt::profile::add(&PROFILE_NS[{k}], __t);")
                }
                None => block,
            };
            let _ = writeln!(current, "{block}");
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

/// The comment above a node's block, `// MaxPool `pool1`: x f32 [1, 3, 8, 8] -> y f32 [1, 3, 4, 4]`:
/// the op, the node, its operands with their types; every name escaped, on one line.
/// Under bounded dims, the dims are the analysis' expressions of the named dims.
fn node_comment(g: &Graph, sym: Option<Sym>, n: &crate::ir::Node, op: &str) -> String {
    let operand = |v: ValueId| {
        let named = sym.and_then(|s| s.info.shapes.get(&v));
        let ty = match (&g.value(v).ty, named) {
            (crate::ir::ValueType::Tensor(t), Some(dims)) => format!(" {} [{}]", t.dtype, dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
            (crate::ir::ValueType::Tensor(t), None) => match &t.shape {
                Some(s) => format!(" {} {s}", t.dtype),
                None => format!(" {}", t.dtype),
            },
            _ => String::new(),
        };
        format!("{}{ty}", g.value(v).name)
    };
    // Absent optional inputs at the end are left out, those before a present one shown as `_`.
    let given = n.inputs.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    let ins: Vec<String> = n.inputs[..given].iter().map(|v| v.map_or_else(|| "_".to_string(), operand)).collect();
    let outs: Vec<String> = n.outputs.iter().map(|&o| operand(o)).collect();
    // Escaped as a whole: names and named dims come from the model file.
    format!("// {}", names::text(&format!("{op} `{}`: {} -> {}", n.name, ins.join(", "), outs.join(", "))))
}

/// The part functions one entry function calls in order, each a run of node blocks over the
/// arena `a` and the weights `w`.
pub(crate) struct Parts<'p> {
    /// The functions are `{prefix}_{i}`.
    pub prefix: &'static str,
    /// What every part takes after `a` and `w`, before the inputs, as a parameter and as an
    /// argument: the size table `sz` of bounded dims, the state `s` of training.
    pub more: Option<(&'static str, &'static str)>,
    /// The inputs as the parts take them.
    pub params: &'p [String],
    /// Lints allowed besides those every part allows.
    pub lints: &'static [&'static str],
    /// The node blocks of each part ([`emit_parts`]).
    pub bodies: Vec<String>,
}

impl Parts<'_> {
    /// Every parameter a part may take, declared: the region, the weights, `more`, the inputs.
    fn declarations(&self) -> Vec<&str> {
        let mut all = vec!["a: rt::arena::Region", "w: &[u8]"];
        all.extend(self.more.map(|(decl, _)| decl));
        all.extend(self.params.iter().map(String::as_str));
        all
    }

    /// For each part, the indices in [`Self::declarations`] of the parameters its body names.
    fn taken(&self) -> Vec<Vec<usize>> {
        let all = self.declarations();
        self.bodies
            .iter()
            .map(|body| {
                let words = words(body);
                (0..all.len()).filter(|&k| words.contains(all[k].split(':').next().unwrap_or(all[k]))).collect()
            })
            .collect()
    }

    /// The entry function's calls of the parts, passing `args` (the inputs as the entry
    /// function names them) on; an argument no part reads (an input that decides only shapes
    /// or types) is consumed by `let _`.
    pub fn calls(&self, args: &[String]) -> String {
        let mut all = vec!["a", "w"];
        all.extend(self.more.map(|(_, arg)| arg));
        all.extend(args.iter().map(String::as_str));
        let taken = self.taken();
        let mut s = String::new();
        for (k, arg) in all.iter().enumerate().skip(all.len() - args.len()) {
            if !taken.iter().flatten().any(|&t| t == k) {
                let _ = writeln!(s, "    let _ = {arg};");
            }
        }
        for (i, taken) in taken.iter().enumerate() {
            let args: Vec<&str> = taken.iter().map(|&k| all[k]).collect();
            let _ = writeln!(s, "    {}_{i}({});", self.prefix, args.join(", "));
        }
        s
    }

    /// The part functions, one item each.
    fn functions(self) -> Vec<String> {
        let all = self.declarations();
        let taken: Vec<Vec<&str>> = self.taken().iter().map(|t| t.iter().map(|&k| all[k]).collect()).collect();
        let Parts { prefix, lints, bodies, .. } = &self;
        bodies
            .iter()
            .zip(taken)
            .enumerate()
            .map(|(i, (body, params))| {
                // Each node's block is labelled with its name, which is never a `break` target;
                // a model's constants are its data (a 3.1416 is what it was trained with, not a
                // slip for π).
                let mut allow = vec!["unused_labels", "clippy::approx_constant"];
                allow.extend(lints.iter());
                if params.len() > 7 {
                    allow.push("clippy::too_many_arguments");
                }
                format!("#[inline(never)]\n#[allow({})]\nfn {prefix}_{i}({}) {{\n{body}}}\n", allow.join(", "), params.join(", "))
            })
            .collect()
    }
}

/// The names generated `code` uses outside its `//` comment lines: whole words, not fields
/// (`.a`, `a: 1` in a struct literal) or lifetimes (`'a`). One pass over the code, however
/// many names are asked about.
fn words(code: &str) -> HashSet<&str> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = HashSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(start) = rest.find(word) {
            // Never a word character: the previous word took them all.
            let before = rest[..start].chars().next_back();
            let len = rest[start..].find(|c: char| !word(c)).unwrap_or(rest.len() - start);
            let (w, after) = (&rest[start..start + len], &rest[start + len..]);
            let field = after.starts_with(':') && !after.starts_with("::");
            if !before.is_some_and(|c| c == '.' || c == '\'') && !field {
                found.insert(w);
            }
            rest = after;
        }
    }
    found
}

/// Whether generated `code` names `ident` ([`words`]).
pub(crate) fn names(code: &str, ident: &str) -> bool {
    words(code).contains(ident)
}

/// `let NAME = EXPR;` lines for the bindings `code` reads, in order.
pub(crate) fn lets_read(code: &str, bindings: &[(String, String)]) -> String {
    let words = words(code);
    bindings.iter().filter(|(name, _)| words.contains(name.as_str())).map(|(name, e)| format!("let {name} = {e};\n")).collect()
}

/// An entry function of `Model` (`forward`, `train_step`): `setup`, then the arena `arena` as
/// the region `a` and the weights as `w`, `then`, the calls of its parts, and `result`.
pub(crate) struct Entry<'e> {
    /// The doc comment, each line `/// …` ending in a newline.
    pub doc: &'e str,
    /// Lints allowed besides `clippy::too_many_arguments`.
    pub lints: &'e [&'e str],
    /// The signature after `pub fn `.
    pub sig: String,
    /// Statements before the arena is taken: the dims checked, the step's scalars.
    pub setup: String,
    /// Statements after `a` and `w`: the heap emptied, the state as a region.
    pub then: String,
    /// [`Parts::calls`].
    pub calls: String,
    /// The function's value, last.
    pub result: String,
}

impl Entry<'_> {
    /// The function's source.
    pub fn render(&self) -> String {
        let Entry { doc, lints, sig, setup, then, calls, result } = self;
        let lints: String = lints.iter().map(|l| format!(", {l}")).collect();
        // The region and the weights are bound where something reads them.
        let rest = format!("{then}{calls}{result}");
        let a = if names(&rest, "a") { "    let a = rt::arena::Region::of(&mut arena.0);\n" } else { "    let _ = arena;\n" };
        let w = if names(&rest, "w") { "    let w = self.w;\n" } else { "    let _ = self.w;\n" };
        format!("{doc}#[allow(clippy::too_many_arguments{lints})]\npub fn {sig} {{\n{setup}{a}{w}{rest}}}\n")
    }
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

/// One generated module being assembled: its header comment, its items in order, then the part
/// functions. [`ModuleBuilder::finish`] formats it.
pub(crate) struct ModuleBuilder {
    header: String,
    items: String,
    parts: Vec<String>,
}

impl ModuleBuilder {
    /// A module compiled from `source_name` (`what` says for which target or use, with a
    /// leading space, or is empty); its items start by naming the runtime `rt`.
    pub fn new(source_name: &str, what: &str) -> ModuleBuilder {
        let mut header = String::new();
        let _ = writeln!(header, "// Generated by burnc {} from `{}`{what}. Do not edit: regenerate.", env!("CARGO_PKG_VERSION"), names::text(source_name));
        let _ = writeln!(header, "//");
        ModuleBuilder { header, items: "use burnc_runtime as rt;\n".into(), parts: Vec::new() }
    }

    /// A line of the header comment.
    pub fn note(&mut self, line: &str) {
        let _ = writeln!(self.header, "// {line}");
    }

    /// The header line of an input, output or target (`role`, padded to six letters) of the
    /// shape `shape`, as written.
    pub fn io_line(&mut self, role: &str, d: &IoDesc, shape: &str) {
        let _ = writeln!(self.header, "// {role:<6} `{}`: {} {}", names::text(&d.name), d.dtype, names::text(shape));
    }

    /// The header lines of fixed-shape inputs and outputs.
    pub fn io_lines(&mut self, inputs: &[IoDesc], outputs: &[IoDesc]) {
        for d in inputs {
            self.io_line("input", d, &format!("{:?}", d.shape));
        }
        for d in outputs {
            self.io_line("output", d, &format!("{:?}", d.shape));
        }
    }

    /// Items as written.
    pub fn item(&mut self, text: &str) {
        self.items.push_str(text);
        if !text.ends_with('\n') {
            self.items.push('\n');
        }
    }

    /// A `usize` constant with its doc comment.
    pub fn constant(&mut self, name: &str, doc: &str, value: impl std::fmt::Display) {
        let _ = writeln!(self.items, "/// {doc}\npub const {name}: usize = {value};");
    }

    /// `WEIGHTS_BYTES`, the size of the blob of `bytes` bytes.
    pub fn weights_bytes(&mut self, opts: &CodegenOptions, bytes: usize) {
        self.constant("WEIGHTS_BYTES", &format!("Bytes of the weights blob (`{}`).", names::text(&opts.weights_file)), bytes);
    }

    /// The `WEIGHTS` static: the blob, embedded or linked.
    pub fn weights_static(&mut self, opts: &CodegenOptions) {
        self.items.push_str(&super::weights::weights_static(opts));
    }

    /// A caller-owned buffer type `name` of `bytes` (a constant's name) bytes, 64-byte aligned:
    /// an arena, a state; `doc` is its doc comment's text.
    pub fn buffer(&mut self, name: &str, bytes: &str, doc: &str) {
        let _ = writeln!(
            self.items,
            "/// {doc}\n#[repr(C, align(64))]\npub struct {name}(pub [u8; {bytes}]);\n\
             impl {name} {{\n    pub const fn new() -> Self {{ {name}([0; {bytes}]) }}\n}}\n\
             impl Default for {name} {{\n    fn default() -> Self {{ Self::new() }}\n}}"
        );
    }

    /// The `Outputs` struct (`doc` is its doc comment's text) with `fields`.
    pub fn outputs_struct(&mut self, doc: &str, fields: &[String]) {
        let _ = writeln!(self.items, "/// {doc}\npub struct Outputs<'a> {{");
        for f in fields {
            let _ = writeln!(self.items, "    {f}");
        }
        let _ = writeln!(self.items, "}}");
    }

    /// `Model`: `head` declares it and ends by opening its `impl` block, which the entry
    /// functions `entries` close.
    pub fn model(&mut self, head: &str, entries: &[Entry]) {
        self.item(head);
        for e in entries {
            self.items.push_str(&e.render());
        }
        self.items.push_str("}\n");
    }

    /// The part functions `parts`, after every item.
    pub fn parts(&mut self, parts: Parts) {
        self.parts.extend(parts.functions());
    }

    /// The module's source: the header, then the items and parts formatted.
    pub fn finish(self) -> Result<String, CodegenError> {
        let ModuleBuilder { header, items, parts } = self;
        let mut pieces = vec![items];
        pieces.extend(parts);
        Ok(format!("{header}{}", format_pieces(pieces)?))
    }
}

/// Parse and pretty-print module source given as pieces of whole items, one piece at a time
/// (each piece's text is dropped once formatted): the syntax tree of a model with a million
/// nodes never exists at once. The output is what formatting the concatenation would give.
/// The node comments (a `//` line right above a labelled block, [`emit_parts`]) are put back
/// above their blocks.
fn format_pieces(pieces: Vec<String>) -> Result<String, CodegenError> {
    let mut out = String::new();
    for piece in pieces {
        // The error shows the piece: generated code that does not parse is a compiler bug.
        let file = syn::parse_file(&piece).map_err(|e| CodegenError::Format(format!("{e}\n{piece}")))?;
        let comments = block_comments(&piece);
        drop(piece);
        let text = prettyplease::unparse(&file);
        if comments.is_empty() {
            out.push_str(&text);
            continue;
        }
        for line in text.lines() {
            let code = line.trim_start();
            // An empty block (a Concat whose parts are all in place) is formatted on one line.
            let label = code.strip_suffix(": {").or_else(|| code.strip_suffix(": {}"));
            if let Some(c) = label.filter(|l| l.starts_with('\'')).and_then(|l| comments.get(l)) {
                out.push_str(&line[..line.len() - code.len()]);
                out.push_str(c);
                out.push('\n');
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// The `//` comment line right above each block label line (`'label: {`) of unformatted
/// source, by label.
fn block_comments(src: &str) -> HashMap<String, String> {
    let mut map = HashMap::new();
    let mut prev: Option<&str> = None;
    for line in src.lines() {
        let line = line.trim();
        if let (Some(c), Some(label)) = (prev, line.strip_suffix(": {").filter(|l| l.starts_with('\''))) {
            map.insert(label.to_string(), c.to_string());
        }
        prev = line.starts_with("//").then_some(line);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_a_whole_word_outside_comments() {
        assert!(names("let y = f(a, w);", "a"));
        assert!(names("x(&in_x[..])", "in_x"));
        assert!(names("rt::f(a::b)", "a"));
        for (code, ident) in [("// a\nlet b = 1;", "a"), ("d.a + ca", "a"), ("&'a [u8]", "a"), ("in_x2", "in_x"), ("sa_b", "a"), ("Dims { a: 3 }", "a")] {
            assert!(!names(code, ident), "{code}");
        }
    }

    #[test]
    fn entry_calls_every_part_with_what_it_reads() {
        let params = vec!["in_x: &[f32]".to_string()];
        let bodies = vec!["let _ = (a, w, sz, &in_x[..]);\n".to_string(), "// reads a and in_x\nlet _ = in_x.len();\n".to_string()];
        let p = Parts { prefix: "part", more: Some(("sz: &[usize]", "sz")), params: &params, lints: &["unused_parens"], bodies };
        let mut m = ModuleBuilder::new("m.onnx", " for a test");
        m.note("a note");
        m.constant("ARENA_BYTES", "Bytes.", 64);
        m.weights_bytes(&CodegenOptions::default(), 0);
        m.buffer("Arena", "ARENA_BYTES", "The arena.");
        m.weights_static(&CodegenOptions::default());
        let forward = Entry {
            doc: "/// Run.\n",
            lints: &["unused_parens"],
            sig: "forward(&self, arena: &mut Arena, x: &[f32])".into(),
            setup: "    let sz = &[1usize][..];\n".into(),
            then: String::new(),
            calls: p.calls(&["x".to_string()]),
            result: String::new(),
        };
        m.model(MODEL_STRUCT, &[forward]);
        m.parts(p);
        let src = m.finish().expect("formats");
        assert!(src.starts_with(&format!("// Generated by burnc {} from `m.onnx` for a test. Do not edit: regenerate.\n//\n// a note\n", env!("CARGO_PKG_VERSION"))), "{src}");
        for want in ["part_0(a, w, sz, x);", "part_1(x);", "fn part_1(in_x: &[f32])", "#[allow(unused_labels, clippy::approx_constant, unused_parens)]\nfn part_0(", "#[allow(clippy::too_many_arguments, unused_parens)]"] {
            assert!(src.contains(want), "{want} missing:\n{src}");
        }
    }

    #[test]
    fn formatting_by_pieces_is_formatting_the_whole() {
        let pieces = vec!["struct A;\nimpl A { fn f(&self) -> u8 { 1 } }\n".to_string(), "fn g() -> u8 { let x = 2; x }\n".to_string()];
        let whole = prettyplease::unparse(&syn::parse_file(&pieces.concat()).expect("parses"));
        assert_eq!(format_pieces(pieces).expect("formats"), whole);
    }

    #[test]
    fn node_comments_come_back_above_their_blocks() {
        let src = "fn part_0() {\n// Relu `a`: x f32 [2] -> y f32 [2]\n'a: {\nlet _ = 1;\n}\n// not above a block\nlet z = 2;\n'b: {\nlet _ = z;\n}\n// Concat `c`: in place\n'c: {\n}\n}\n";
        let out = format_pieces(vec![src.to_string()]).expect("formats");
        assert_eq!(out, "fn part_0() {\n    // Relu `a`: x f32 [2] -> y f32 [2]\n    'a: {\n        let _ = 1;\n    }\n    let z = 2;\n    'b: {\n        let _ = z;\n    }\n    // Concat `c`: in place\n    'c: {}\n}\n");
    }

    /// A node comment is one escaped line whatever the model's names and dims hold.
    #[test]
    fn node_comments_escape_the_model_names() {
        use crate::ir::{DType, Dim, Op, Shape, TensorType, ValueType};
        let mut g = Graph::default();
        let hostile = "x\n}\nfn evil() {}\n//";
        let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(vec![Dim::Sym { name: "n\r\n'a: {".into(), bound: None }])) });
        let x = g.add_value(hostile.to_string(), ty, ValueKind::Input);
        let (id, _) = g.add_node(hostile.to_string(), Op::Unary(crate::ir::UnaryOp::Relu), vec![Some(x)], &["y\u{202e}".to_string()]);
        let c = node_comment(&g, None, g.node(id), "Relu");
        assert!(c.starts_with("// Relu `x\\n}\\nfn evil() {}\\n//`") && !c.contains('\n') && !c.contains('\r') && !c.contains('\u{202e}'), "{c}");
    }

    #[test]
    fn a_piece_that_does_not_parse_is_shown() {
        let err = format_pieces(vec!["fn ok() {}\n".into(), "fn broken( {\n".into()]).expect_err("does not parse").to_string();
        assert!(err.contains("fn broken(") && !err.contains("fn ok"), "{err}");
    }
}
