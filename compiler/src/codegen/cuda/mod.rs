//! The CUDA target (`--target cuda`): a graph with static shapes becomes CUDA C kernels, one
//! or more per node, compiled to PTX by NVRTC when burnc runs, and a Rust module that loads
//! that PTX and replays the launches through `burnc_runtime::cuda` (a CUDA graph, captured on
//! the first run).
//!
//! Memory is planned as for the CPU: one device arena holds every activation at the offset
//! the planner chose, the graph inputs after them; weights are one device buffer laid out as
//! the CPU's `model.bin` in its plain layout. Kernels read both through two base pointers.
//! What the wgpu target shares (the graph passes, the plan's parts, the Rust module, window
//! loops and fused programs) is in `codegen::gpu`.
pub mod attention;
pub mod gemm;
pub mod kernels;
pub mod layout;
pub mod nvrtc;
pub mod scalar;
pub mod wgmma;

use super::{gpu, names, CodegenError, CodegenOptions, IoDesc, Lowering};
use crate::ir::{DType, Graph};
use crate::memory::{self, PlanOptions};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// The NVIDIA architecture a CUDA module's kernels are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuArch {
    /// Hopper's own (H100, H200): deep products run on `wgmma` ([`wgmma`]), and a module
    /// with such kernels loads on sm_90 devices only.
    #[default]
    Sm90a,
    /// Hopper and later GPUs (the driver compiles the PTX for the device): `mma.sync` only.
    Sm90,
}

/// A CUDA module's kernels.
pub struct CudaKernels {
    /// Their CUDA C, for reading and for tools (`model.cu`).
    pub cuda_source: String,
    /// What NVRTC made of `cuda_source` (`model.ptx`, embedded by the module).
    pub ptx: String,
}

/// A CUDA module: the Rust source, its PTX and CUDA C, and the weights blob.
pub type CudaGenerated = gpu::GpuGenerated<CudaKernels>;

/// The kernels and their launches for `g` (static shapes), before NVRTC.
pub type CudaPlan = gpu::GpuPlan<kernels::Kernel>;

impl gpu::GpuKernel for kernels::Kernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn source(&self) -> &str {
        &self.source
    }

    fn renamed(mut self, new: &str) -> Self {
        // The declaration is the first ` name(` (after `void` or `__launch_bounds__(…)`).
        self.source = self.source.replacen(&format!(" {}(", self.name), &format!(" {new}("), 1);
        self.name = new.to_string();
        self
    }
}

/// Plan memory and write every node's kernels ([`gpu::prepare`]'s graph: elementwise chains
/// fused as on the CPU, same bits).
pub fn plan(g: &Graph, opts: &CodegenOptions) -> Result<CudaPlan, CodegenError> {
    let mut graph = gpu::prepare(g, opts)?;
    let wgmma = opts.gpu_arch == GpuArch::Sm90a;
    let nhwc = layout::channels_last(&graph);
    let thin = layout::thin_inputs(&graph, &nhwc);
    layout::reorder_conv_weights(&mut graph, &nhwc, &thin);
    // Attention (scores, softmax, weighted sum) as one kernel each, on tensor cores.
    let attentions: Vec<attention::Attention> = if opts.floats == DType::F32 { Vec::new() } else { attention::find(&graph) };
    let in_attention: HashSet<_> = attentions.iter().flat_map(|a| a.nodes.iter().copied()).collect();
    let attention_at: HashMap<_, _> = attentions.iter().map(|a| (a.emit, a)).collect();
    // Plan once to find the elementwise chains the products' epilogues do, then again with
    // what those chains read kept live until they would have run.
    let first = memory::plan(&graph, &PlanOptions { max_arena: opts.max_arena, ..Default::default() })?;
    let weights = super::weights::layout(&graph, &first.order, Lowering::PLAIN);
    let none = HashMap::new();
    let (offsets, _) = gpu::host::inputs_after(&graph, &first)?;
    let first_cx = kernels::Cx { g: &graph, plan: &first, weights: &weights.offsets, inputs: &offsets, fused: &none, nhwc: &nhwc, attention: &in_attention, thin: &thin, wgmma, tf32: opts.tf32 };
    let candidates = kernels::fusions(&first_cx, false)?;
    let split = kernels::split_scratch(&first_cx, &candidates)?;
    let mut keep = kernels::chain_reads(&graph, &candidates);
    for a in &attentions {
        keep.entry(a.emit).or_default().extend(a.reads(&graph));
    }
    let memory = memory::plan(
        &graph,
        &PlanOptions { max_arena: opts.max_arena, scratch: &|_, n| split.get(&n).copied().unwrap_or(0), also_reads: &|_, n| keep.get(&n).cloned().unwrap_or_default(), ..Default::default() },
    )?;
    let (input_offsets, arena_bytes) = gpu::host::inputs_after(&graph, &memory)?;
    let weights = super::weights::layout(&graph, &memory.order, Lowering::PLAIN);
    let mut ks = gpu::KernelList::default();
    {
        let fused = kernels::fusions(&kernels::Cx { g: &graph, plan: &memory, weights: &weights.offsets, inputs: &input_offsets, fused: &none, nhwc: &nhwc, attention: &in_attention, thin: &thin, wgmma, tf32: opts.tf32 }, true)?;
        let done_by_epilogue: HashSet<_> = fused.values().flatten().copied().collect();
        let cx = kernels::Cx { g: &graph, plan: &memory, weights: &weights.offsets, inputs: &input_offsets, fused: &fused, nhwc: &nhwc, attention: &in_attention, thin: &thin, wgmma, tf32: opts.tf32 };
        for &id in &memory.order {
            if done_by_epilogue.contains(&id) {
                continue;
            }
            let base = ks.next_name();
            let node = &graph.node(id).name;
            if let Some(a) = attention_at.get(&id) {
                ks.push_node(&format!("attention ending at {node}"), &base, vec![attention::kernel(&cx, a, &base)?]);
            } else if !in_attention.contains(&id) {
                ks.push_node(node, &base, kernels::node(&cx, id, &base)?);
            }
        }
    }
    Ok(CudaPlan { graph, memory, weights, input_offsets, arena_bytes, kernels: ks.kernels, kernel_nodes: ks.nodes })
}

/// The CUDA C of a plan's kernels, each after a comment naming its node.
pub fn cuda_source(p: &CudaPlan, source_name: &str) -> String {
    let hopper = wgmma::prelude(p.kernels.iter().map(|k| k.source.as_str()));
    p.source(source_name, &format!("{}{}{}{hopper}", scalar::PRELUDE, gemm::PRELUDE, attention::PRELUDE))
}

/// Compile `g` for the CUDA target: kernels, PTX (NVRTC) and the Rust module.
pub fn generate(g: &Graph, opts: &CodegenOptions, ptx_file: &str) -> Result<CudaGenerated, CodegenError> {
    let p = plan(g, opts)?;
    let cuda = cuda_source(&p, &opts.source_name);
    // A module without Hopper-only instructions stays loadable on later GPUs.
    let arch = if cuda.contains("wgmma.mma_async") { nvrtc::ARCH_SM90A } else { nvrtc::ARCH };
    let ptx = nvrtc::compile(&cuda, arch).map_err(|e| CodegenError::Graph { what: "CUDA kernels".into(), reason: e.to_string() })?;
    let host = host_module(&p, opts, ptx_file)?;
    Ok(CudaGenerated::of(p, host, CudaKernels { cuda_source: cuda, ptx }))
}

/// The Rust module of a CUDA plan.
fn host_module(p: &CudaPlan, opts: &CodegenOptions, ptx_file: &str) -> Result<(String, Vec<IoDesc>, Vec<IoDesc>), CodegenError> {
    let mut items = String::new();
    let launches: Vec<String> = p
        .kernels
        .iter()
        .enumerate()
        .map(|(i, k)| format!("rt::cuda::Launch {{ kernel: {i}, grid: {:?}, block: {:?}, shared: {} }}", k.grid, k.block, k.shared))
        .collect();
    let _ = writeln!(items, "/// One forward pass, in order (each kernel's node is named in `model.cu`).\nconst LAUNCHES: [rt::cuda::Launch; {}] = [{}];", launches.len(), launches.join(", "));
    let _ = writeln!(
        items,
        "/// What the compiler fixed about this module.\npub const SPEC: rt::cuda::ModuleSpec = rt::cuda::ModuleSpec {{ ptx: PTX, kernels: &KERNELS, launches: &LAUNCHES, arena_bytes: ARENA_BYTES, weights_bytes: WEIGHTS_BYTES }};"
    );
    let host = gpu::host::GpuHost {
        rt: "cuda",
        embed: format!("/// The kernels, compiled to PTX when burnc ran.\npub static PTX: &str = include_str!({});", names::str_lit(ptx_file)),
        error: "CudaError",
        what: " for CUDA",
        summary: format!("device arena {} bytes, weights {} bytes, {} kernel launches per forward pass", p.arena_bytes, p.weights.blob.len(), p.kernels.len()),
        items,
        constructors: "    /// Load the model on GPU 0 with the weights embedded at compile time.
    pub fn new() -> Result<Self, rt::cuda::CudaError> {
        Self::with_weights(0, &WEIGHTS.0)
    }
    /// Load the model on GPU `ordinal` with weights from elsewhere (`WEIGHTS_BYTES` bytes).
    pub fn with_weights(ordinal: usize, weights: &[u8]) -> Result<Self, rt::cuda::CudaError> {
        Ok(Model { session: rt::cuda::Session::new(SPEC, ordinal, weights)? })
    }".into(),
        async_forward: false,
    };
    gpu::host::write(&host, p, opts)
}
