//! What the two GPU targets (`cuda`, `wgsl`) share, written once: the graph passes and the
//! plan (memory, weights layout, input offsets, the kernels named per node), the kernels'
//! source file around them, the Rust module that replays them ([`host`]), and the kernel text
//! both languages write alike — window loops ([`window`]) and fused scalar programs
//! ([`scalar`]) — printed through a [`Dialect`] that knows how each language spells a loop, a
//! local, a `continue` or a literal. What really differs (buffers and loads, the products'
//! tiling, CUDA's tensor cores) stays in the target's folder.
pub(crate) mod host;
pub mod scalar;
pub mod window;

use super::index::strides;
use super::{names, CodegenError, CodegenOptions};
use crate::ir::{BinaryOp, DType, Graph, UnaryOp, ValueId};
use crate::memory::MemoryPlan;
use std::collections::HashMap;
use std::fmt::Write;

/// One node as an op definition sees it when writing a target's kernels
/// ([`crate::ops::OpDef::cuda`], [`crate::ops::OpDef::wgsl`]), over the target's context `C`
/// (`cuda::kernels::NodeCx`, `wgsl::kernels::NodeCx`). What both answer alike is here: the
/// node, its first kernel's name, the memory plan, errors naming the node; how operands are
/// read is the target's own `impl` of its `NodeCx`.
pub struct NodeCx<'a, C> {
    pub(crate) cx: &'a C,
    pub(crate) n: &'a crate::ir::Node,
    pub(crate) name: &'a str,
    plan: &'a MemoryPlan,
    /// The target as messages name it.
    target: &'static str,
}

impl<'a, C> NodeCx<'a, C> {
    pub(crate) fn new(cx: &'a C, plan: &'a MemoryPlan, target: &'static str, n: &'a crate::ir::Node, name: &'a str) -> Self {
        NodeCx { cx, n, name, plan, target }
    }


    /// The name of the node's first kernel (later ones add a suffix).
    pub fn name(&self) -> &str {
        self.name
    }

    pub fn err(&self, reason: impl Into<String>) -> CodegenError {
        CodegenError::Unsupported { node: self.n.name.clone(), op: self.n.op.name(), reason: reason.into() }
    }

    /// The error of an op the target does not run yet.
    pub fn unsupported(&self) -> CodegenError {
        self.err(format!("not supported by the {} target yet", self.target))
    }

    /// Whether input `i` is given.
    pub fn has_input(&self, i: usize) -> bool {
        self.n.inputs.get(i).copied().flatten().is_some()
    }

    /// Whether the node has output `k` (read or not).
    pub fn has_output(&self, k: usize) -> bool {
        k < self.n.outputs.len()
    }

    /// Output `k` when something reads it (it has an arena slot).
    pub(crate) fn used(&self, k: usize) -> Option<ValueId> {
        let v = *self.n.outputs.get(k)?;
        self.plan.slots.contains_key(&v).then_some(v)
    }

    /// Whether the memory plan made output 0 share input 0's slot (a view: no kernel).
    pub(crate) fn output_is_alias(&self) -> bool {
        self.n.outputs.first().is_some_and(|v| self.plan.aliases.contains_key(v))
    }
}

/// The language a kernel is printed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Cuda,
    Wgsl,
}

impl Dialect {
    /// The head of a loop of an i32 counter `v` over `0..n`.
    pub fn int_loop(self, v: &str, n: usize) -> String {
        match self {
            Dialect::Cuda => format!("for (int {v} = 0; {v} < {n}; ++{v})"),
            Dialect::Wgsl => format!("for (var {v} = 0; {v} < {n}; {v}++)"),
        }
    }

    /// An i32 local `name` set once to `e`.
    pub fn int_let(self, name: &str, e: &str) -> String {
        match self {
            Dialect::Cuda => format!("int {name} = {e};"),
            Dialect::Wgsl => format!("let {name} = {e};"),
        }
    }

    /// An i32 local `name` starting at `e`, assigned again later.
    pub fn int_var(self, name: &str, e: &str) -> String {
        match self {
            Dialect::Cuda => format!("int {name} = {e};"),
            Dialect::Wgsl => format!("var {name} = {e};"),
        }
    }

    /// Go on with the loop's next iteration when `cond` holds.
    pub fn continue_if(self, cond: &str) -> String {
        match self {
            Dialect::Cuda => format!("if ({cond}) continue;"),
            Dialect::Wgsl => format!("if ({cond}) {{ continue; }}"),
        }
    }

    /// A literal of the type flat indices have (CUDA: the kernel's int; WGSL: u32).
    pub fn index(self, n: usize) -> String {
        match self {
            Dialect::Cuda => n.to_string(),
            Dialect::Wgsl => format!("{n}u"),
        }
    }

    /// A flat-index expression as an i32 (a window's positions may go negative).
    pub fn to_int(self, e: &str) -> String {
        match self {
            Dialect::Cuda => e.to_string(),
            Dialect::Wgsl => format!("i32({e})"),
        }
    }

    /// Short statements one after another: the CUDA kernels keep them on one line.
    pub fn join(self, stmts: &[String]) -> String {
        stmts.join(match self {
            Dialect::Cuda => " ",
            Dialect::Wgsl => "\n",
        })
    }

    /// An f32 constant with exactly its bits.
    pub fn f32_lit(self, x: f32) -> String {
        match self {
            Dialect::Cuda => super::cuda::scalar::f32_lit(x),
            Dialect::Wgsl => super::wgsl::scalar::f32_lit(x),
        }
    }

    /// An f32 local `name` set once to `e`, on its own line.
    pub fn float_let(self, name: &str, e: &str) -> String {
        match self {
            Dialect::Cuda => format!("float {name} = {e};\n"),
            Dialect::Wgsl => format!("let {name} = {e};\n"),
        }
    }

    /// `u(x)` on an element of `d` (see the targets' `scalar::unary`).
    pub fn unary(self, u: UnaryOp, x: &str, d: DType) -> Option<String> {
        match self {
            Dialect::Cuda => super::cuda::scalar::unary(u, x, d),
            Dialect::Wgsl => super::wgsl::scalar::unary(u, x, d),
        }
    }

    /// `a op b` on elements of `d` (see the targets' `scalar::binary`).
    pub fn binary(self, op: BinaryOp, a: &str, b: &str, d: DType) -> Option<String> {
        match self {
            Dialect::Cuda => super::cuda::scalar::binary(op, a, b, d),
            Dialect::Wgsl => super::wgsl::scalar::binary(op, a, b, d),
        }
    }
}

/// Flat index `i` of an `n`-element output read from an operand of `len` elements that
/// repeats along it (a scalar, or the output's last dims).
pub fn repeated_index(d: Dialect, i: &str, len: usize, n: usize) -> String {
    if len == n {
        i.to_string()
    } else if len == 1 {
        d.index(0)
    } else {
        format!("{i} % {}", d.index(len))
    }
}

/// The flat index in `x` (of shape `xs`) of element `i` of its transpose `perm` (of shape
/// `ys`).
pub fn transposed_index(d: Dialect, i: &str, ys: &[usize], xs: &[usize], perm: &[usize]) -> String {
    let (os, is) = (strides(ys), strides(xs));
    let terms: Vec<String> = (0..ys.len()).filter(|&k| ys[k] != 1).map(|k| format!("(({i} / {}) % {}) * {}", d.index(os[k]), d.index(ys[k]), d.index(is[perm[k]]))).collect();
    if terms.is_empty() {
        d.index(0)
    } else {
        terms.join(" + ")
    }
}

/// Gemm's product `m × k` by `k × n` of 2-D operands of shapes `a` and `b`, each transposed
/// or not, and the (row, column) strides A and B are read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmDims {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub sa: (usize, usize),
    pub sb: (usize, usize),
}

pub fn gemm_dims(a: &[usize], b: &[usize], trans_a: bool, trans_b: bool) -> GemmDims {
    let (m, k) = if trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
    let n = if trans_b { b[0] } else { b[1] };
    let sa = if trans_a { (1, a[1]) } else { (a[1], 1) };
    let sb = if trans_b { (1, b[1]) } else { (b[1], 1) };
    GemmDims { m, k, n, sa, sb }
}

/// `g` as both GPU targets compile it: fused as the CPU module's exact path fuses it
/// (elementwise chains into one kernel each), floats lowered to `opts.floats` after fusion (so
/// fused chains run in f32 between their 16-bit loads and stores), and every graph output
/// computed by a node of its own.
pub fn prepare(g: &Graph, opts: &CodegenOptions) -> Result<Graph, CodegenError> {
    let mut graph = g.clone();
    crate::passes::fuse::fuse_exact(&mut graph)?;
    if opts.floats != DType::F32 {
        crate::passes::precision::lower_floats(&mut graph, opts.floats)?;
    }
    if let Some(c) = super::with_output_copies(&graph) {
        graph = c;
    }
    Ok(graph)
}

/// A kernel of either target, as the plan names it.
pub trait GpuKernel: Sized {
    fn name(&self) -> &str;
    /// The kernel's source.
    fn source(&self) -> &str;
    /// The same kernel under the name `new` (its entry point and everything named after it).
    fn renamed(self, new: &str) -> Self;
}

/// A GPU module (`--target cuda` or `wgpu`): the Rust source that replays the kernels, the
/// kernels' text `T` (CUDA C and its PTX, or WGSL), and the weights blob.
pub struct GpuGenerated<T> {
    pub source: String,
    pub kernels: T,
    pub weights: Vec<u8>,
    pub arena_bytes: usize,
    pub weights_bytes: usize,
    pub inputs: Vec<super::IoDesc>,
    pub outputs: Vec<super::IoDesc>,
    /// Kernel launches (WGSL: dispatches) of one forward pass.
    pub launches: usize,
}

impl<T> GpuGenerated<T> {
    /// The module of plan `p`: `host`, its Rust source and signature, and the kernels' text.
    pub(crate) fn of<K>(p: GpuPlan<K>, host: (String, Vec<super::IoDesc>, Vec<super::IoDesc>), kernels: T) -> Self {
        let (source, inputs, outputs) = host;
        GpuGenerated { source, kernels, weights_bytes: p.weights.blob.len(), weights: p.weights.blob, arena_bytes: p.arena_bytes, inputs, outputs, launches: p.kernels.len() }
    }
}

/// A target's kernels and their launches for a graph with static shapes.
pub struct GpuPlan<K> {
    pub graph: Graph,
    pub memory: MemoryPlan,
    pub weights: super::weights::WeightsLayout,
    /// Arena offset of each graph input (after the planned activations).
    pub input_offsets: HashMap<ValueId, usize>,
    pub arena_bytes: usize,
    pub kernels: Vec<K>,
    /// Each kernel's node, for comments.
    pub kernel_nodes: Vec<String>,
}

impl<K: GpuKernel> GpuPlan<K> {
    /// The kernels' source file: a header naming the model, `prelude`, then each kernel after
    /// a comment naming its node.
    pub fn source(&self, source_name: &str, prelude: &str) -> String {
        let mut s = format!("// Kernels generated by burnc {} from `{}`.\n\n{prelude}", env!("CARGO_PKG_VERSION"), names::text(source_name));
        for (k, node) in self.kernels.iter().zip(&self.kernel_nodes) {
            let _ = write!(s, "\n// node `{}`\n{}", names::text(node), k.source());
        }
        s
    }
}

/// A plan's kernels as its nodes' kernels are written, in launch order, each node's first one
/// named after its place (`k<n>`).
pub struct KernelList<K> {
    pub kernels: Vec<K>,
    /// Each kernel's node, for comments.
    pub nodes: Vec<String>,
}

impl<K> Default for KernelList<K> {
    fn default() -> Self {
        KernelList { kernels: Vec::new(), nodes: Vec::new() }
    }
}

impl<K: GpuKernel> KernelList<K> {
    /// The name of the next node's first kernel.
    pub fn next_name(&self) -> String {
        format!("k{}", self.kernels.len())
    }

    /// Append the kernels `ks` of node `node`, written under the name `base` (from
    /// [`KernelList::next_name`]): the second and later ones that kept it get their own.
    pub fn push_node(&mut self, node: &str, base: &str, ks: Vec<K>) {
        for (j, mut k) in ks.into_iter().enumerate() {
            if j > 0 && k.name() == base {
                k = k.renamed(&format!("{base}_{j}"));
            }
            self.nodes.push(node.to_string());
            self.kernels.push(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_written_once_for_both_languages() {
        assert_eq!(repeated_index(Dialect::Cuda, "i", 6, 6), "i");
        assert_eq!(repeated_index(Dialect::Wgsl, "i", 1, 6), "0u");
        assert_eq!(repeated_index(Dialect::Cuda, "o", 3, 6), "o % 3");
        // [2, 3] transposed to [3, 2]: element i = (r, c) reads x[c][r].
        assert_eq!(transposed_index(Dialect::Cuda, "i", &[3, 2], &[2, 3], &[1, 0]), "((i / 2) % 3) * 1 + ((i / 1) % 2) * 3");
        assert_eq!(transposed_index(Dialect::Wgsl, "e", &[1, 1], &[1, 1], &[1, 0]), "0u");
        assert_eq!(gemm_dims(&[4, 3], &[5, 4], true, true), GemmDims { m: 3, k: 4, n: 5, sa: (1, 3), sb: (1, 4) });
    }

    struct K(String, String);
    impl GpuKernel for K {
        fn name(&self) -> &str {
            &self.0
        }
        fn source(&self) -> &str {
            &self.1
        }
        fn renamed(self, new: &str) -> Self {
            K(new.to_string(), self.1)
        }
    }

    #[test]
    fn a_nodes_later_kernels_get_their_own_names() {
        let mut ks = KernelList::default();
        ks.push_node("a", &ks.next_name(), vec![K("k0".into(), String::new())]);
        let base = ks.next_name();
        ks.push_node("b", &base, vec![K("k1".into(), String::new()), K("k1".into(), String::new()), K("k1_mask".into(), String::new())]);
        let names: Vec<&str> = ks.kernels.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["k0", "k1", "k1_1", "k1_mask"]);
        assert_eq!(ks.nodes, ["a", "b", "b", "b"]);
    }
}
