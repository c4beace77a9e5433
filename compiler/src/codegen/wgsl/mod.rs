//! The wgpu target (`--target wgpu`): a graph with static shapes becomes one WGSL module, an
//! entry point per kernel (one or more per node; each fused elementwise group is one),
//! validated with naga when burnc runs, and a Rust module that embeds it and replays the
//! dispatches through `burnc_runtime::wgpu` (Vulkan, Metal, DX12).
//!
//! Memory is planned as for the CPU and CUDA targets: one arena buffer holds every activation
//! at the offset the planner chose, the graph inputs after them; the weights are one buffer
//! laid out as the CPU's `model.bin` in its plain layout. Shared with the CUDA target
//! (`codegen::gpu`): the graph passes, the plan, the Rust module, the window loops and fused
//! programs printed through a `Dialect`, the index arithmetic (`codegen::index`) and the
//! meaning of every scalar function (`ir::scalar`, `ir::UnaryOp`); what the language decides
//! (word loads and stores, the tiled product, each scalar function's text) is here (`scalar`,
//! `kernels`, `gemm`).
pub mod gemm;
pub mod kernels;
pub mod scalar;

use super::{gpu, names, CodegenError, CodegenOptions, IoDesc, Lowering};
use crate::ir::{DType, Graph};
use crate::memory::{self, PlanOptions};
use std::collections::HashMap;
use std::fmt::Write;

/// A wgpu module: the Rust source, its WGSL (every kernel, `model.wgsl`, embedded by the
/// module) and the weights blob.
pub type WgslGenerated = gpu::GpuGenerated<String>;

/// The kernels and their dispatches for `g` (static shapes).
pub type WgslPlan = gpu::GpuPlan<kernels::Kernel>;

impl WgslPlan {
    /// Weight bindings (`W0`, `W1`, …), [`kernels::CHUNK`] bytes each but the last.
    pub fn chunks(&self) -> usize {
        self.weights.blob.len().div_ceil(kernels::CHUNK).max(1)
    }
}

impl gpu::GpuKernel for kernels::Kernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn source(&self) -> &str {
        &self.source
    }

    fn renamed(self, new: &str) -> Self {
        kernels::Kernel::renamed(self, new)
    }
}

/// Plan memory and write every node's kernels ([`gpu::prepare`]'s graph: elementwise chains
/// fused as on the CPU, same meaning).
pub fn plan(g: &Graph, opts: &CodegenOptions) -> Result<WgslPlan, CodegenError> {
    let graph = gpu::prepare(g, opts)?;
    let memory = memory::plan(&graph, &PlanOptions { max_arena: opts.max_arena, ..Default::default() })?;
    let mut weights = chunked(super::weights::layout(&graph, &memory.order, Lowering::PLAIN))?;
    let (input_offsets, arena_bytes) = gpu::host::inputs_after(&graph, &memory)?;
    let mut ks = gpu::KernelList::default();
    let tables_at = weights.blob.len().div_ceil(64) * 64;
    let cx = kernels::Cx { g: &graph, plan: &memory, weights: &weights.offsets, inputs: &input_offsets, tables: Default::default(), tables_at };
    for &id in &memory.order {
        let base = ks.next_name();
        ks.push_node(&graph.node(id).name, &base, kernels::node(&cx, id, &base)?);
    }
    let tables = cx.tables.into_inner();
    if !tables.is_empty() {
        weights.blob.resize(tables_at, 0);
        weights.blob.extend(tables);
        let end = weights.blob.len().div_ceil(64) * 64;
        weights.blob.resize(end, 0);
    }
    Ok(WgslPlan { graph, memory, weights, input_offsets, arena_bytes, kernels: ks.kernels, kernel_nodes: ks.nodes })
}

/// Append `bytes` to `blob` (which starts at global offset `base`) at the first 64-byte
/// aligned place from which they do not straddle two weight chunks (unless they are larger
/// than one); returns the global offset.
pub(crate) fn place(base: usize, blob: &mut Vec<u8>, bytes: &[u8]) -> Option<usize> {
    if bytes.len() > kernels::CHUNK {
        // Larger than a chunk: it spans chunks wherever it starts (read through `W(i)`).
        let at = (base + blob.len()).div_ceil(64) * 64;
        blob.resize(at - base, 0);
        blob.extend_from_slice(bytes);
        return Some(at);
    }
    let mut at = (base + blob.len()).div_ceil(64) * 64;
    if at / kernels::CHUNK != (at + bytes.len().max(1) - 1) / kernels::CHUNK {
        at = (at / kernels::CHUNK + 1) * kernels::CHUNK;
    }
    blob.resize(at - base, 0);
    blob.extend_from_slice(bytes);
    Some(at)
}

/// The weights laid out again so that no tensor straddles two [`kernels::CHUNK`]s (each chunk
/// is one binding); a model under one chunk keeps its layout.
fn chunked(w: super::weights::WeightsLayout) -> Result<super::weights::WeightsLayout, CodegenError> {
    if w.blob.len() <= kernels::CHUNK {
        return Ok(w);
    }
    let mut order: Vec<(usize, crate::ir::ValueId)> = w.offsets.iter().map(|(&v, &o)| (o, v)).collect();
    order.sort();
    let mut blob = Vec::with_capacity(w.blob.len());
    let mut offsets = HashMap::new();
    for (k, &(off, v)) in order.iter().enumerate() {
        let end = order.get(k + 1).map_or(w.blob.len(), |n| n.0);
        let bytes = &w.blob[off..end];
        let at = place(0, &mut blob, bytes).ok_or_else(|| CodegenError::Graph { what: "weights".into(), reason: format!("a weight of {} bytes is larger than one wgpu storage binding ({} bytes)", bytes.len(), kernels::CHUNK) })?;
        offsets.insert(v, at);
    }
    let end = blob.len().div_ceil(64) * 64;
    blob.resize(end, 0);
    Ok(super::weights::WeightsLayout { offsets, packed: HashMap::new(), packed_q8: HashMap::new(), blob })
}

/// The module's WGSL: the two buffers, helpers, then each kernel after a comment naming its
/// node.
pub fn wgsl_source(p: &WgslPlan, source_name: &str) -> String {
    let chunks = p.chunks();
    let mut s = format!(
        "// The arena (activations, then inputs) and the weights, as 32-bit words; the weights\n\
         // in bindings of at most {} bytes, W0, W1, …\n\
         @group(0) @binding(0) var<storage, read_write> A: array<u32>;\n",
        kernels::CHUNK,
    );
    for c in 0..chunks {
        let _ = writeln!(s, "@group(0) @binding({}) var<storage, read> W{c}: array<u32>;", c + 1);
    }
    // Global word `i` of the weights, for a weight that spans chunks.
    let cases: String = (0..chunks).map(|c| format!("    case {c}u: {{ return W{c}[i & {:#x}u]; }}\n", kernels::CHUNK / 4 - 1)).collect();
    let _ = write!(s, "fn W(i: u32) -> u32 {{\n  switch (i >> {}u) {{\n{cases}    default: {{ return 0u; }}\n  }}\n}}\n", (kernels::CHUNK / 4).trailing_zeros());
    s.push_str("\n// Byte `i` and 16-bit half `i` of a buffer (bool, 8-bit and 16-bit tensors).\n");
    let _ = writeln!(s, "fn byte_W(i: u32) -> u32 {{ return (W(i >> 2u) >> ((i & 3u) * 8u)) & 0xffu; }}");
    let _ = writeln!(s, "fn half_W(i: u32) -> u32 {{ return (W(i >> 1u) >> ((i & 1u) * 16u)) & 0xffffu; }}");
    for b in std::iter::once("A".to_string()).chain((0..chunks).map(|c| format!("W{c}"))) {
        let _ = writeln!(s, "fn byte_{b}(i: u32) -> u32 {{ return ({b}[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu; }}");
        let _ = writeln!(s, "fn half_{b}(i: u32) -> u32 {{ return ({b}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu; }}");
    }
    let _ = write!(s, "\n{}\n{}", scalar::PRELUDE, scalar::POW);
    p.source(source_name, &s)
}

/// Parse and validate `wgsl` with naga, as wgpu will when it creates the pipelines: a kernel
/// the compiler wrote wrong is a compile-time error naming the line, not a device error.
pub fn validate(wgsl: &str) -> Result<(), CodegenError> {
    let fail = |reason: String| CodegenError::Graph { what: "WGSL kernels".into(), reason };
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| fail(e.emit_to_string(wgsl)))?;
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty()).validate(&module).map_err(|e| fail(e.emit_to_string(wgsl)))?;
    Ok(())
}

/// Compile `g` for the wgpu target: kernels (validated), and the Rust module.
pub fn generate(g: &Graph, opts: &CodegenOptions, wgsl_file: &str) -> Result<WgslGenerated, CodegenError> {
    let p = plan(g, opts)?;
    let wgsl = wgsl_source(&p, &opts.source_name);
    validate(&wgsl)?;
    let host = host_module(g, &p, opts, wgsl_file)?;
    Ok(WgslGenerated::of(p, host, wgsl))
}

/// The Rust module of a wgpu plan.
/// The f32 initializers of the model (`g`, as the user gave it) that the blob stores as they
/// are (not folded into others, not lowered to 16 bits): name, byte offset, elements, in blob
/// order. What `Model::set_weight` may replace on the device.
fn weights_table(g: &Graph, p: &WgslPlan) -> Vec<(String, usize, usize)> {
    let original: std::collections::HashSet<&str> = g.params().filter(|(_, q)| q.dtype == DType::F32).map(|(v, _)| g.value(v).name.as_str()).collect();
    let mut table: Vec<(String, usize, usize)> = p
        .graph
        .params()
        .filter(|(v, q)| q.dtype == DType::F32 && original.contains(p.graph.value(*v).name.as_str()))
        .filter_map(|(v, q)| Some((p.graph.value(v).name.clone(), *p.weights.offsets.get(&v)?, q.shape.iter().product())))
        .collect();
    table.sort_by_key(|t| t.1);
    table
}

fn host_module(g: &Graph, p: &WgslPlan, opts: &CodegenOptions, wgsl_file: &str) -> Result<(String, Vec<IoDesc>, Vec<IoDesc>), CodegenError> {
    let workgroup_bytes = p.kernels.iter().map(|k| k.workgroup_bytes).max().unwrap_or(0);
    let invocations = p.kernels.iter().map(|k| k.invocations).max().unwrap_or(1);
    let mut items = String::new();
    let dispatches: Vec<String> = p.kernels.iter().enumerate().map(|(i, k)| format!("rt::wgpu::Dispatch {{ kernel: {i}, workgroups: {:?} }}", k.workgroups)).collect();
    let _ = writeln!(items, "/// One forward pass, in order (each kernel's node is named in `model.wgsl`).\nconst DISPATCHES: [rt::wgpu::Dispatch; {}] = [{}];", dispatches.len(), dispatches.join(", "));
    let _ = writeln!(
        items,
        "/// What the compiler fixed about this module.\npub const SPEC: rt::wgpu::ModuleSpec = rt::wgpu::ModuleSpec {{ wgsl: WGSL, kernels: &KERNELS, dispatches: &DISPATCHES, arena_bytes: ARENA_BYTES, weights_bytes: WEIGHTS_BYTES, weight_chunk: {}, workgroup_bytes: {workgroup_bytes}, invocations: {invocations} }};",
        kernels::CHUNK
    );
    let table: Vec<String> = weights_table(g, p).iter().map(|(n, off, len)| format!("({}, {off}, {len})", names::str_lit(n))).collect();
    let _ = writeln!(
        items,
        "/// The model's f32 weights as the blob stores them: (name, byte offset, elements). What\n/// [`Model::set_weight`] replaces; weights folded into others are not listed.\npub const WEIGHTS_TABLE: [(&str, usize, usize); {}] = [{}];",
        table.len(),
        table.join(", ")
    );
    let host = gpu::host::GpuHost {
        rt: "wgpu",
        embed: format!("/// The kernels, validated when burnc ran.\npub static WGSL: &str = include_str!({});", names::str_lit(wgsl_file)),
        error: "WgpuError",
        what: " for wgpu",
        summary: format!("arena {} bytes, weights {} bytes, {} dispatches per forward pass", p.arena_bytes, p.weights.blob.len(), p.kernels.len()),
        items,
        constructors: "    /// Load the model on the first adapter wgpu offers, with the weights embedded at compile time.
    #[cfg(not(target_arch = \"wasm32\"))]
    pub fn new() -> Result<Self, rt::wgpu::WgpuError> {
        Self::with_weights(&WEIGHTS.0)
    }
    /// Load the model with weights from elsewhere (`WEIGHTS_BYTES` bytes).
    #[cfg(not(target_arch = \"wasm32\"))]
    pub fn with_weights(weights: &[u8]) -> Result<Self, rt::wgpu::WgpuError> {
        Ok(Model { session: rt::wgpu::Session::new(SPEC, weights)? })
    }
    /// [`Model::new`] as a future: the form to use on wasm32 (the browser's WebGPU).
    pub async fn new_async() -> Result<Self, rt::wgpu::WgpuError> {
        Self::with_weights_async(&WEIGHTS.0).await
    }
    /// [`Model::with_weights`] as a future.
    pub async fn with_weights_async(weights: &[u8]) -> Result<Self, rt::wgpu::WgpuError> {
        Ok(Model { session: rt::wgpu::Session::new_async(SPEC, weights).await? })
    }
    /// Replace weight `name` (listed in [`WEIGHTS_TABLE`]) on the device, e.g. with parameters
    /// trained since: later passes use `values`.
    pub fn set_weight(&mut self, name: &str, values: &[f32]) -> Result<(), rt::wgpu::WgpuError> {
        let &(_, offset, len) = WEIGHTS_TABLE.iter().find(|w| w.0 == name).ok_or_else(|| rt::wgpu::WgpuError::NoSuchWeight { name: name.into() })?;
        if values.len() != len {
            return Err(rt::wgpu::WgpuError::Size { what: \"weight values\", expected: 4 * len, got: 4 * values.len() });
        }
        self.session.write_weights(offset, rt::wgpu::bytes_of(values))
    }".into(),
        async_forward: true,
    };
    gpu::host::write(&host, p, opts)
}
