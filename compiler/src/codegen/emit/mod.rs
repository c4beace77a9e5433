//! One emitter per core op family: each turns a node into Rust statements that call the
//! runtime's kernels with every shape and offset written out as literals.
pub(crate) mod control;
pub(crate) mod data;
mod elementwise;
pub(crate) mod nn;
pub(crate) use data::concat_runs;
pub(crate) use nn::prepacked_conv;
pub(crate) mod wide;

pub use elementwise::{f32_lit, f64_lit, unary_lit};
use super::weights::WeightsLayout;
use super::CodegenError;
use crate::ir::{DType, Graph, Node, NodeId, Op, ValueId, ValueKind};
use crate::memory::MemoryPlan;
use crate::ops::{EmitCx, Sym};
use std::collections::HashMap;

/// What emitters see: the graph, the memory plan and the weights layout.
pub struct Ctx<'a> {
    pub g: &'a Graph,
    pub plan: &'a MemoryPlan,
    pub weights: std::cell::RefCell<WeightsLayout>,
    /// Graph inputs (and a subgraph's bound values): value → the slice expression reading it
    /// in the generated functions (`&in_x[..]` of an array parameter, `in_x` of a slice).
    pub inputs: HashMap<ValueId, String>,
    /// Graph inputs kept in the caller's state buffer `s` (trainable parameters and optimizer
    /// moments of generated training code): value → byte offset.
    pub state: HashMap<ValueId, usize>,
    /// How convolutions are computed and their weights stored (the plan and layout's too).
    pub lowering: super::Lowering,
}

/// The Rust element type generated code uses for a dtype.
pub fn rust_ty(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F16 => "rt::half::f16",
        DType::BF16 => "rt::half::bf16",
        // Bools are bytes holding 0 or 1 (any bit pattern in the arena is a valid u8).
        DType::Bool => "u8",
        // Handles to text (runtime feature `strings`).
        DType::Str => "rt::strings::Str",
        // Small types are raw bits, one element per byte.
        d if d.is_small() => "u8",
        // The other types are Rust's own, named alike.
        d if d.is_float() || d.is_int() => d.name(),
        _ => return None,
    })
}

/// A constant slice of string handles (`&[rt::strings::Str]`): the strings as literals in the
/// module, promoted to a static.
pub fn str_array<S: AsRef<str>>(v: &[S]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("rt::strings::Str::new({:?})", s.as_ref())).collect();
    format!("{{ const S: [rt::strings::Str<'static>; {}] = [{}]; &S[..] }}", v.len(), items.join(", "))
}

impl<'a> Ctx<'a> {
    pub fn err(&self, n: &Node, reason: impl Into<String>) -> CodegenError {
        let op = n.source_op.as_ref().map(|(o, _)| o.clone()).unwrap_or_else(|| n.op.name());
        CodegenError::Unsupported { node: n.name.clone(), op, reason: reason.into() }
    }

    /// Static dtype and shape of a value.
    pub fn ty(&self, n: &Node, v: ValueId) -> Result<(DType, Vec<usize>), CodegenError> {
        let t = self.g.tensor_type(v).ok_or_else(|| self.err(n, format!("value `{}` has no tensor type", self.g.value(v).name)))?;
        let shape = t
            .shape
            .as_ref()
            .and_then(|s| s.as_fixed())
            .ok_or_else(|| self.err(n, format!("value `{}` has no static shape (pin inputs with --input)", self.g.value(v).name)))?;
        Ok((t.dtype, shape))
    }

    pub fn elem(&self, n: &Node, v: ValueId) -> Result<&'static str, CodegenError> {
        let (d, _) = self.ty(n, v)?;
        rust_ty(d).ok_or_else(|| self.err(n, format!("dtype {d} is not supported by codegen yet")))
    }

    /// Constant content of a value, for emitters that need it at compile time.
    pub fn konst(&self, v: ValueId) -> Option<crate::tensor::Tensor> {
        self.g.const_value(v)
    }

    /// An expression of type `&[T]` reading value `v`.
    pub fn read(&self, n: &Node, v: ValueId) -> Result<String, CodegenError> {
        let (t, len) = self.elem_len(n, v)?;
        match &self.g.value(v).kind {
            ValueKind::Param(_) | ValueKind::Const(_) if t == "rt::strings::Str" => match self.konst(v).map(|t| t.data) {
                Some(crate::tensor::Data::Str(s)) => Ok(str_array(&s)),
                _ => Err(self.err(n, "a string constant could not be read")),
            },
            ValueKind::Param(_) | ValueKind::Const(_) => {
                let off = *self.weights.borrow().offsets.get(&v).ok_or_else(|| self.err(n, "weight missing from the layout"))?;
                Ok(format!("unsafe {{ rt::arena::weights::<{t}>(w, {off}, {len}) }}"))
            }
            // Graph inputs, and in a subgraph its inputs and the enclosing graph's values, are
            // bound to names before the node's code.
            ValueKind::Input if self.state.contains_key(&v) => Ok(format!("unsafe {{ rt::arena::view::<{t}>(s, {}, {len}) }}", self.state[&v])),
            ValueKind::Input | ValueKind::Outer => {
                self.inputs.get(&v).cloned().ok_or_else(|| self.err(n, format!("value `{}` is not bound", self.g.value(v).name)))
            }
            ValueKind::Node(_) => Ok(format!("unsafe {{ rt::arena::view::<{t}>(a, {}, {len}) }}", self.slot(n, v)?)),
        }
    }

    /// An expression of type `&mut [T]` writing value `v` (a node output in the arena).
    pub fn write(&self, n: &Node, v: ValueId) -> Result<String, CodegenError> {
        let (t, len) = self.elem_len(n, v)?;
        Ok(format!("unsafe {{ rt::arena::view_mut::<{t}>(a, {}, {len}) }}", self.slot(n, v)?))
    }

    /// The Rust element type of `v` and its element count.
    fn elem_len(&self, n: &Node, v: ValueId) -> Result<(&'static str, usize), CodegenError> {
        let (_, shape) = self.ty(n, v)?;
        Ok((self.elem(n, v)?, shape.iter().product()))
    }

    /// The arena offset of node output `v`.
    fn slot(&self, n: &Node, v: ValueId) -> Result<usize, CodegenError> {
        let slot = self.plan.slots.get(&v).ok_or_else(|| self.err(n, format!("value `{}` has no arena slot", self.g.value(v).name)))?;
        Ok(slot.offset)
    }

    /// An expression of type `&mut [T]` over state-buffer value `v`, for ops that update it in
    /// place.
    pub fn write_state(&self, n: &Node, v: ValueId) -> Result<String, CodegenError> {
        let (t, len) = self.elem_len(n, v)?;
        let off = self.state.get(&v).ok_or_else(|| self.err(n, format!("`{}` is not in the state buffer", self.g.value(v).name)))?;
        Ok(format!("unsafe {{ rt::arena::view_mut::<{t}>(s, {off}, {len}) }}"))
    }

    /// The node's scratch buffer as `&mut [T]` of `len` elements.
    pub fn scratch(&self, n: &Node, id: NodeId, t: &str, len: usize) -> Result<String, CodegenError> {
        if len == 0 {
            return Ok("&mut []".into());
        }
        let slot = self.plan.scratch.get(&id).ok_or_else(|| self.err(n, "no scratch slot"))?;
        Ok(format!("unsafe {{ rt::arena::view_mut::<{t}>(a, {}, {len}) }}", slot.offset))
    }

    /// Store a table in the weights blob; returns an expression of type `&[T]`.
    pub fn table<T: crate::tensor::LeBytes>(&self, v: &[T]) -> String {
        let bytes = crate::tensor::to_le(v);
        let off = self.weights.borrow_mut().push_table(&bytes);
        format!("unsafe {{ rt::arena::weights::<{}>(w, {off}, {}) }}", T::RUST, v.len())
    }

    pub fn input(&self, n: &Node, i: usize) -> Result<ValueId, CodegenError> {
        n.inputs.get(i).copied().flatten().ok_or_else(|| self.err(n, format!("missing input #{i}")))
    }
}

/// Scratch bytes a node needs (asked by the memory planner).
pub fn scratch_bytes(g: &Graph, id: NodeId, lw: super::Lowering) -> usize {
    if let Op::Def(d) = &g.node(id).op {
        return d.scratch_bytes(&fixed_inputs(g, id));
    }
    // Each op has one emitter family, so at most one of these is non-zero.
    nn::scratch_bytes(g, id, lw) + control::scratch_bytes(g, id, lw)
}

/// Whether node `id`'s output may overwrite its input `i` in place.
pub fn can_inplace(g: &Graph, id: NodeId, i: usize) -> bool {
    let n = g.node(id);
    if let Op::Def(d) = &n.op {
        // The op says whether its loop allows it; the buffers must match in any case.
        let ty = |v: Option<ValueId>| g.tensor_type(v?).map(|t| (t.dtype, t.shape.as_ref().and_then(|s| s.as_fixed())));
        let (out, this) = (ty(n.outputs.first().copied()), ty(n.inputs.get(i).copied().flatten()));
        return out.is_some() && out == this && out.is_some_and(|(_, s)| s.is_some()) && d.in_place(i);
    }
    elementwise::can_inplace(g, id, i)
}

/// The static dtype and shape of each input of node `id` (for the rules of `crate::ops`).
fn fixed_inputs(g: &Graph, id: NodeId) -> Vec<Option<(DType, Vec<usize>)>> {
    let n = g.node(id);
    n.inputs.iter().map(|v| g.tensor_type((*v)?).and_then(|t| Some((t.dtype, t.shape.as_ref()?.as_fixed()?)))).collect()
}

/// Statements for one node (`None`: nothing to do, e.g. a reshape that aliases its input).
/// With `sym` (the bounded-dims analysis and size table of a bounded module), a node whose dims
/// depend on a named dim is emitted with run-time sizes by the same emitters; an op without a
/// bounded form is refused there.
pub(crate) fn emit_node(cx: &Ctx, sym: Option<Sym>, id: NodeId) -> Result<Option<String>, CodegenError> {
    let e = EmitCx::new(cx, sym, id);
    let n = e.node();
    if e.is_bounded() {
        let out = e.output(0)?;
        cx.g.tensor_type(out).ok_or_else(|| e.err("output has no type"))?;
    }
    match &n.op {
        // An op with nothing to write (a view the memory plan made an alias) has no block.
        Op::Def(d) => d.emit(&e).map(|s| (!s.is_empty()).then_some(s)),
        Op::Unary(_) | Op::Binary(_) => elementwise::emit(&e),
        Op::Elementwise(p) => elementwise::emit_program(&e, p).map(Some),
        Op::Conv { .. } | Op::FusedConv { .. } => nn::emit(&e),
        Op::Reshape { .. } => crate::ops::view::copy_unless_alias(&e).map(|s| (!s.is_empty()).then_some(s)),
        Op::Concat { .. } | Op::Gather { .. } | Op::Expand | Op::ConstantOfShape { .. } => data::emit_movement(&e),
        Op::Scan { .. } => control::emit_scan(&e),
        // The ops below have fixed-shape emitters only.
        _ if e.is_bounded() => Err(e.unsupported()),
        Op::Loop { .. } | Op::If { .. } => control::emit(cx, id, n),
        _ => Err(cx.err(n, "not supported by codegen yet")),
    }
}
