//! Rust code generation: a graph (after `passes::prepare`, every shape static) becomes one
//! module of plain Rust that calls burnc-runtime's kernels, plus a weights blob. Shapes,
//! strides and arena offsets are literals; the module needs only `core` and burnc-runtime.
pub mod bounded;
pub(crate) mod builder;
pub mod cuda;
pub mod emit;
pub mod gpu;
pub mod index;
mod lowering;
pub(crate) mod module;
mod pin_dims;
pub mod names;
pub mod train;
pub mod weights;
pub mod wgsl;

use crate::ir::{DType, Graph};
use crate::memory::{self, PlanOptions};
use thiserror::Error;

pub use bounded::{generate_bounded, BoundedInfo};
pub use lowering::Lowering;
pub use builder::Generated;
pub use train::{generate_train, TrainGenerated};

#[derive(Debug, Error)]
pub enum CodegenError {
    #[error("node `{node}` ({op}): {reason}")]
    Unsupported { node: String, op: String, reason: String },
    #[error("graph {what}: {reason}")]
    Graph { what: String, reason: String },
    #[error("memory plan: {0}")]
    Plan(#[from] memory::PlanError),
    #[error(transparent)]
    Pass(#[from] crate::passes::PassError),
    #[error("internal: generated code does not parse: {0}")]
    Format(String),
}

#[derive(Debug, Clone)]
pub struct CodegenOptions {
    /// File name of the weights blob, next to the module (`include_bytes!` path).
    pub weights_file: String,
    /// Where the model came from, for the header comment.
    pub source_name: String,
    /// Nodes per generated function, so rustc never sees one huge function.
    pub nodes_per_fn: usize,
    /// Run the fusion passes that change rounding (BatchNorm folded into conv weights …) or
    /// the kernels ops run on (conv epilogues). Off, generated code rounds exactly as the
    /// interpreter does; elementwise chains are fused either way (same bits).
    pub fuse: bool,
    /// With `fuse`: run 3×3 stride-1 convolutions that pay for it by Winograd F(4×4, 3×3)
    /// (`runtime::kernels::winograd`). About 2× faster on such layers, but their weights are
    /// stored transformed, 36 numbers per 3×3 filter instead of 9: off where flash is tight.
    pub winograd: bool,
    /// Time every node (std only): the module gets `PROFILE_NODES` and `PROFILE_NS`, one
    /// counter per node that `forward` adds its nanoseconds to. For `burnc bench --profile`.
    pub profile: bool,
    /// The most bytes the arena may take; a model above it is refused with the node that
    /// needs the largest buffer ([`crate::size::DEFAULT_MAX_ARENA_BYTES`] by default).
    pub max_arena: usize,
    /// The dtype the model's f32 tensors are computed and stored in: F32, or BF16/F16 with
    /// f32 arithmetic (`passes::precision`; the CUDA target only).
    pub floats: DType,
    /// The NVIDIA architecture CUDA kernels are written for (the CUDA target only).
    pub gpu_arch: cuda::GpuArch,
    /// f32 matrix products and convolutions on tensor cores with TF32 inputs (10-bit
    /// mantissas) and f32 sums, as PyTorch's `allow_tf32` (the CUDA target only).
    pub tf32: bool,
    /// The weights as an extern static linked from a static library burnc wrote
    /// (`weights_object`), instead of `include_bytes!(weights_file)`: rustc never reads them.
    pub linked_weights: Option<LinkedWeights>,
}

/// Where a module with [`CodegenOptions::linked_weights`] finds its blob: the object symbol
/// `symbol`, defined as the blob's bytes, 64-byte aligned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedWeights {
    pub symbol: String,
    pub from: LinkFrom,
}

/// Who defines a [`LinkedWeights`] symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkFrom {
    /// `lib<name>.a`, which burnc wrote beside the module (a build script prints its search
    /// path).
    Library(String),
    /// The module itself: `global_asm!` assembles the blob file at this path into the module's
    /// object with `.incbin`, so rustc never reads the bytes and no search path is needed (the
    /// macros, which cannot add one). ELF targets; elsewhere the module includes the file.
    Assembler(String),
}

impl LinkedWeights {
    /// The weights from `lib<lib>.a`, whose one object defines `symbol`.
    pub fn library(lib: impl Into<String>, symbol: impl Into<String>) -> Self {
        LinkedWeights { symbol: symbol.into(), from: LinkFrom::Library(lib.into()) }
    }

    /// The library's name, for weights linked from one.
    pub fn lib(&self) -> Option<&str> {
        match &self.from {
            LinkFrom::Library(l) => Some(l),
            LinkFrom::Assembler(_) => None,
        }
    }
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            weights_file: "model.bin".into(),
            source_name: "model".into(),
            nodes_per_fn: 32,
            fuse: true,
            winograd: true,
            profile: false,
            max_arena: crate::size::DEFAULT_MAX_ARENA_BYTES,
            floats: DType::F32,
            gpu_arch: cuda::GpuArch::default(),
            tf32: false,
            linked_weights: None,
        }
    }
}

/// A graph input or output as the generated API exposes it.
#[derive(Debug, Clone)]
pub struct IoDesc {
    pub name: String,
    pub ident: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// The memory plan generated code lowered by `lw` uses for `g` (the codegen's scratch and
/// in-place rules), refused above `max_arena` bytes.
pub fn plan_memory(g: &Graph, lw: Lowering, max_arena: usize) -> Result<memory::MemoryPlan, memory::PlanError> {
    memory::plan(g, &PlanOptions { scratch: &|g, id| emit::scratch_bytes(g, id, lw), can_inplace: &|g, id, i| emit::can_inplace(g, id, i), max_arena, holds: &emit::concat_runs, ..PlanOptions::default() })
}

/// What a module compiled from a graph with `opts` is made of before its source is written:
/// the graph after fusion, its memory plan and its weights layout. [`generate`] writes the
/// module from it; `burnc inspect` reports it.
pub struct Plan {
    pub graph: Graph,
    pub memory: memory::MemoryPlan,
    pub weights: weights::WeightsLayout,
    pub lowering: Lowering,
    /// What the fusion passes fused (empty without `opts.fuse`).
    pub fusion: crate::passes::fuse::FusionReport,
}

impl CodegenOptions {
    /// How this module computes its convolutions.
    pub fn lowering(&self) -> Lowering {
        Lowering { prepack: true, winograd: self.fuse && self.winograd }
    }
}

/// Fuse (when `opts.fuse`), plan memory and lay out the weights of `g` (static shapes).
pub fn plan(g: &Graph, opts: &CodegenOptions) -> Result<Plan, CodegenError> {
    let (mut graph, fusion) = if opts.fuse {
        optimize(g, crate::passes::fuse::Sizes::Static)?
    } else {
        let mut g = g.clone();
        let report = crate::passes::fuse::fuse_exact(&mut g)?;
        (g, report)
    };
    if let Some(c) = with_output_copies(&graph) {
        graph = c;
    }
    let lowering = opts.lowering();
    let memory = plan_memory(&graph, lowering, opts.max_arena)?;
    let weights = weights::layout(&graph, &memory.order, lowering);
    Ok(Plan { graph, memory, weights, lowering, fusion })
}

/// The graph generated code is built from: `g` after the fusion passes (which change
/// rounding, so the interpreter runs the unfused graph), and what they fused.
pub fn optimize(g: &Graph, sizes: crate::passes::fuse::Sizes) -> Result<(Graph, crate::passes::fuse::FusionReport), CodegenError> {
    let mut g = g.clone();
    let report = crate::passes::fuse::fuse(&mut g, sizes)?;
    Ok((g, report))
}

/// Plan memory and generate the module for `g` (which must have static shapes).
pub fn generate(g: &Graph, opts: &CodegenOptions) -> Result<Generated, CodegenError> {
    generate_planned(plan(g, opts)?, opts)
}

/// Write the module of a [`plan`] made with the same `opts`.
pub fn generate_planned(p: Plan, opts: &CodegenOptions) -> Result<Generated, CodegenError> {
    module::build(p, opts)
}

/// Graph outputs that no node computes (a graph input or a constant)
/// get an Identity node producing a fresh value, so every output has its own arena slot.
/// `None` when there is nothing to do.
pub(crate) fn with_output_copies(g: &Graph) -> Option<Graph> {
    use crate::ir::{Op, UnaryOp, ValueKind};
    let needs: Vec<usize> = g
        .outputs
        .iter()
        .enumerate()
        .filter(|(_, &o)| !matches!(g.value(o).kind, ValueKind::Node(_)))
        .map(|(i, _)| i)
        .collect();
    if needs.is_empty() {
        return None;
    }
    let mut g = g.clone();
    for i in needs {
        let src = g.outputs[i];
        let name = g.value(src).name.clone();
        let (_, outs) = g.add_node(format!("{name}_output_copy"), Op::Unary(UnaryOp::Identity), vec![Some(src)], std::slice::from_ref(&name));
        g.value_mut(outs[0]).ty = g.value(src).ty.clone();
        g.outputs[i] = outs[0];
    }
    Some(g)
}
