//! Compiling a model to a Rust module plus its weights blob: shared by the CLI
//! (`burnc MODEL -o model.rs`) and the [`Build`] API for build scripts.
use burnc_compiler::codegen::{self, CodegenOptions, Generated, IoDesc, TrainGenerated};
pub use burnc_compiler::codegen::cuda::GpuArch;
pub use burnc_compiler::codegen::LinkedWeights;
use burnc_compiler::train::{TrainGraph, TrainSpec};
use burnc_compiler::interp::RtValue;
use burnc_compiler::ir::{DType, Dim, Graph, Shape, TensorType, ValueKind, ValueType};
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};
use burnc_frontends::safetensors::{Applied, Rename, WeightsOptions};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a model could not be compiled.
#[derive(Debug, Error)]
pub enum BuildError {
    /// A pin or constant that does not fit the model (unknown input, wrong rank, bad syntax).
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error(transparent)]
    Onnx(#[from] burnc_frontends::onnx::OnnxError),
    #[error(transparent)]
    Pass(#[from] burnc_compiler::passes::PassError),
    #[error(transparent)]
    Codegen(#[from] burnc_compiler::codegen::CodegenError),
    #[error("{path}: {source}")]
    Weights { path: String, source: burnc_frontends::weights::WeightsError },
    #[error(transparent)]
    Train(#[from] burnc_compiler::train::TrainError),
    #[error("OUT_DIR is not set: Build::compile runs in a build script, or give Build::out_dir")]
    NoOutDir,
}

pub(crate) fn file_err(p: &Path, e: impl ToString) -> BuildError {
    BuildError::File { path: p.display().to_string(), reason: e.to_string() }
}

/// Read a value from `.npy`, or from `.pb` (a TensorProto; SequenceProto/OptionalProto when
/// `declared` is a sequence/optional).
pub fn read_value(path: &Path, declared: &ValueType) -> Result<RtValue, BuildError> {
    let bytes = read_at_most(path, input_file_limit(declared))?;
    if path.extension().is_some_and(|e| e == "npy") {
        let t = burnc_frontends::npy::parse(&bytes).map_err(|e| file_err(path, e))?;
        return Ok(RtValue::Tensor(t));
    }
    let hint = match declared {
        ValueType::Sequence(_) => ValueKindHint::Sequence,
        ValueType::Optional(_) => ValueKindHint::Optional,
        _ => ValueKindHint::Tensor,
    };
    decode_value(&bytes, hint).map_err(|e| file_err(path, e))
}

/// The most bytes an input file for a value of type `declared` can take: its elements at the
/// widest encoding (a varint: 10 bytes) plus room for headers, or 2 GiB when the shape is not
/// fixed. `--input /dev/zero` ends there instead of filling memory.
fn input_file_limit(declared: &ValueType) -> u64 {
    const UNKNOWN: u64 = 1 << 31;
    match declared {
        ValueType::Tensor(t) => t
            .shape
            .as_ref()
            .and_then(|s| s.numel())
            .and_then(|n| (n as u64).checked_mul(10)?.checked_add(1 << 20))
            .unwrap_or(UNKNOWN),
        _ => UNKNOWN,
    }
}

/// The bytes of `path`, refusing files longer than `limit`.
fn read_at_most(path: &Path, limit: u64) -> Result<Vec<u8>, BuildError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| file_err(path, e))?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| file_err(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(file_err(path, format!("longer than the {limit} bytes the input can take")));
    }
    Ok(bytes)
}

/// Parse `1x3x224x224` (also `1,3,224,224`; empty for a scalar).
pub fn parse_dims(s: &str) -> Result<Vec<usize>, BuildError> {
    if s.is_empty() {
        return Ok(vec![]);
    }
    s.split(['x', 'X', ','])
        .map(|d| d.trim().parse::<usize>().map_err(|_| BuildError::Invalid(format!("bad dimension `{d}` in `{s}`"))))
        .collect()
}

/// Pin graph input `name` to `dims`; fixed dims it already has must agree.
pub fn pin_input(graph: &mut Graph, name: &str, dims: &[usize]) -> Result<(), BuildError> {
    let id = graph
        .inputs
        .iter()
        .copied()
        .find(|&i| graph.value(i).name == name)
        .ok_or_else(|| BuildError::Invalid(format!("the model has no input named `{name}`")))?;
    let v = graph.value_mut(id);
    let dtype = match &v.ty {
        ValueType::Tensor(t) => t.dtype,
        _ => return Err(BuildError::Invalid(format!("input `{name}` is not a tensor"))),
    };
    if let ValueType::Tensor(TensorType { shape: Some(old), .. }) = &v.ty {
        if old.rank() != dims.len() {
            return Err(BuildError::Invalid(format!("input `{name}` has rank {}, the pin gives {}", old.rank(), dims.len())));
        }
        for (o, &d) in old.0.iter().zip(dims) {
            if let Dim::Fixed(f) = o {
                if *f != d {
                    return Err(BuildError::Invalid(format!("input `{name}` has fixed shape {old}, the pin gives {dims:?}")));
                }
            }
        }
    }
    v.ty = ValueType::Tensor(TensorType { dtype, shape: Some(Shape::fixed(dims)) });
    Ok(())
}

/// One dim of an `--input` pin: a number, or a named dim with an upper bound (`{h<=640}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinDim {
    Fixed(usize),
    Bounded { name: String, bound: usize },
}

/// Parse `1x3x{h<=640}x{w<=640}` (`x` or `,` between dims; a bounded dim is `{NAME<=BOUND}`,
/// NAME an identifier, BOUND at least 1; the same NAME in two inputs is the same dim).
pub fn parse_pin_dims(s: &str) -> Result<Vec<PinDim>, BuildError> {
    let bad = |d: &str, why: &str| BuildError::Invalid(format!("bad dimension `{d}` in `{s}`: {why}"));
    let mut parts = Vec::new();
    let (mut cur, mut depth) = (String::new(), 0usize);
    for ch in s.chars() {
        match ch {
            '{' => {
                depth += 1;
                cur.push(ch);
            }
            '}' => {
                depth = depth.checked_sub(1).ok_or_else(|| bad(&cur, "unbalanced `}`"))?;
                cur.push(ch);
            }
            'x' | 'X' | ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    if depth != 0 {
        return Err(bad(&cur, "unclosed `{`"));
    }
    if !s.is_empty() {
        parts.push(cur);
    }
    parts
        .iter()
        .map(|p| {
            let p = p.trim();
            if let Some(inner) = p.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
                let (name, bound) = inner.split_once("<=").ok_or_else(|| bad(p, "expected `{NAME<=BOUND}`"))?;
                let name = name.trim();
                let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ok {
                    return Err(bad(p, "the name must be an identifier"));
                }
                let bound: usize = bound.trim().parse().map_err(|_| bad(p, "the bound must be a number"))?;
                if bound == 0 {
                    return Err(bad(p, "the bound must be at least 1"));
                }
                Ok(PinDim::Bounded { name: name.to_string(), bound })
            } else {
                p.parse::<usize>().map(PinDim::Fixed).map_err(|_| bad(p, "expected a number or `{NAME<=BOUND}`"))
            }
        })
        .collect()
}

/// Whether any pin has a bounded dim (such models compile through [`generate_bounded`]).
pub fn has_bounded(pins: &[(String, Vec<PinDim>)]) -> bool {
    pins.iter().any(|(_, d)| d.iter().any(|x| matches!(x, PinDim::Bounded { .. })))
}

/// Set graph input `name`'s dims: fixed ones as [`pin_input`], bounded ones as symbolic dims
/// with their bound.
pub fn pin_input_dims(graph: &mut Graph, name: &str, dims: &[PinDim]) -> Result<(), BuildError> {
    let fixed: Vec<usize> = dims.iter().map(|d| if let PinDim::Fixed(n) = d { *n } else { 1 }).collect();
    pin_input(graph, name, &fixed)?;
    for (i, d) in dims.iter().enumerate() {
        if let PinDim::Bounded { name: dn, bound } = d {
            if let Some(id) = graph.inputs.iter().copied().find(|&v| graph.value(v).name == name) {
                if let ValueType::Tensor(TensorType { shape: Some(sh), .. }) = &mut graph.value_mut(id).ty {
                    sh.0[i] = Dim::Sym { name: dn.clone(), bound: Some(*bound) };
                }
            }
        }
    }
    Ok(())
}

/// Load, pin (bounded dims kept symbolic), bake and generate a module whose arena is sized for
/// the bounds and whose `forward` takes the actual dims (`burnc::codegen::generate_bounded`).
pub fn generate_bounded(
    model: &Path,
    pins: &[(String, Vec<PinDim>)],
    consts: &[(String, PathBuf)],
    weights: Option<&Weights>,
    weights_file: &str,
) -> Result<(Generated, codegen::BoundedInfo), BuildError> {
    let mut g = load_graph(model, &[], consts, weights)?;
    for (name, dims) in pins {
        pin_input_dims(&mut g, name, dims)?;
    }
    let opts = CodegenOptions {
        weights_file: weights_file.to_string(),
        source_name: model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        ..Default::default()
    };
    Ok(codegen::generate_bounded(&g, &opts)?)
}

/// [`compile_to`] with bounded dims: the module `out` and its weights beside it.
pub fn compile_bounded_to(
    model: &Path,
    out: &Path,
    pins: &[(String, Vec<PinDim>)],
    consts: &[(String, PathBuf)],
    weights: Option<&Weights>,
) -> Result<Report, BuildError> {
    let bin = out.with_extension("bin");
    let bin_name = bin.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| "model.bin".into());
    let (gen, _) = generate_bounded(model, pins, consts, weights, &bin_name)?;
    write_generated(out, &bin, gen)
}

/// Apply `NAME=DIMS` pins (the CLI's `--input`).
pub fn pin_inputs(graph: &mut Graph, pins: &[String]) -> Result<(), BuildError> {
    for pin in pins {
        // The last `=`: dims never hold one, a model's input names may.
        let (name, dims) = pin.rsplit_once('=').ok_or_else(|| BuildError::Invalid(format!("expected NAME=DIMS, got `{pin}`")))?;
        pin_input(graph, name, &parse_dims(dims)?)?;
    }
    Ok(())
}

/// Bake graph input `name` into the graph as a constant read from `file` (`.pb` or `.npy`).
pub fn bake_const(g: &mut Graph, name: &str, file: &Path) -> Result<(), BuildError> {
    let pos = g
        .inputs
        .iter()
        .position(|&i| g.value(i).name == name)
        .ok_or_else(|| BuildError::Invalid(format!("the model has no input named `{name}`")))?;
    let v = read_value(file, &g.value(g.inputs[pos]).ty)?;
    let RtValue::Tensor(t) = v else {
        return Err(BuildError::Invalid(format!("--const `{name}`: only tensors can be constants")));
    };
    bake_tensor(g, pos, t);
    Ok(())
}

/// Turn graph input number `pos` into a constant.
pub fn bake_tensor(g: &mut Graph, pos: usize, t: burnc_compiler::Tensor) {
    let id = g.inputs.remove(pos);
    let ty = ValueType::Tensor(TensorType { dtype: t.dtype(), shape: Some(Shape::fixed(&t.shape)) });
    let v = g.value_mut(id);
    v.ty = ty;
    v.kind = ValueKind::Const(t);
}

/// A weights file (safetensors or a PyTorch checkpoint) whose tensors replace the model's
/// initializers (`--weights`).
#[derive(Debug, Clone)]
pub struct Weights {
    pub path: PathBuf,
    /// Renames (`--rename`) and whether unused tensors are allowed.
    pub options: WeightsOptions,
}

impl Weights {
    /// `path` with the `PATTERN=REPLACEMENT` rules of `--rename`.
    pub fn new(path: impl AsRef<Path>, renames: &[String], allow_unused: bool) -> Result<Weights, BuildError> {
        let path = path.as_ref().to_path_buf();
        let renames = renames
            .iter()
            .map(|r| Rename::parse(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| BuildError::Weights { path: path.display().to_string(), source: source.into() })?;
        Ok(Weights { path, options: WeightsOptions { renames, allow_unused } })
    }
}

/// Put the tensors of `w` in place of `g`'s parameters (before any pass, so folding and fusion
/// see the new values).
pub fn apply_weights(g: &mut Graph, w: &Weights) -> Result<Applied, BuildError> {
    let err = |source| BuildError::Weights { path: w.path.display().to_string(), source };
    // The format is picked by content: safetensors, or a PyTorch .pt/.pth checkpoint.
    let file = burnc_frontends::weights::load(&w.path).map_err(|e| match e {
        // The Io error names the path itself; keep it to one mention.
        burnc_frontends::weights::WeightsError::Io { source, .. } => file_err(&w.path, source),
        other => err(other),
    })?;
    burnc_frontends::safetensors::apply(g, &file, &w.options).map_err(|e| err(e.into()))
}

/// Load, pin, bake, prepare and generate. `weights_file` is the blob's file name as the module's
/// `include_bytes!` names it (relative to the module).
pub fn generate(
    model: &Path,
    pins: &[(String, Vec<usize>)],
    consts: &[(String, PathBuf)],
    weights_file: &str,
) -> Result<Generated, BuildError> {
    generate_with(model, pins, consts, None, weights_file, &CompileOptions::default())
}

/// Where the generated module runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Target {
    /// Plain Rust over burnc-runtime's kernels (no_std).
    #[default]
    Cpu,
    /// CUDA kernels compiled to PTX now, run through `burnc_runtime::cuda` (feature `cuda`).
    Cuda,
    /// WGSL kernels validated now, run through `burnc_runtime::wgpu` (feature `wgpu`) on
    /// Vulkan, Metal or DX12.
    Wgpu,
}

/// What a compile may choose besides the model: the target, Winograd convolutions and the
/// arena limit.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// [`CodegenOptions::winograd`].
    pub winograd: bool,
    /// [`CodegenOptions::max_arena`].
    pub max_arena: usize,
    pub target: Target,
    /// [`CodegenOptions::floats`]: F32, or BF16/F16 for the CUDA target.
    pub floats: DType,
    /// [`CodegenOptions::gpu_arch`].
    pub gpu_arch: GpuArch,
    /// [`CodegenOptions::tf32`].
    pub tf32: bool,
    /// [`CodegenOptions::linked_weights`]: the caller writes the library
    /// ([`crate::weights_object::write_archive`]).
    pub link: Option<LinkedWeights>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions { winograd: true, max_arena: burnc_compiler::size::DEFAULT_MAX_ARENA_BYTES, target: Target::Cpu, floats: DType::F32, gpu_arch: GpuArch::default(), tf32: false, link: None }
    }
}

impl CompileOptions {
    /// The code generator's options for these choices, the weights blob named `weights_file`
    /// and the model `source_name` (for the header comment).
    pub fn codegen(&self, weights_file: &str, source_name: &str) -> CodegenOptions {
        CodegenOptions {
            weights_file: weights_file.into(),
            source_name: source_name.into(),
            winograd: self.winograd,
            max_arena: self.max_arena,
            floats: self.floats,
            gpu_arch: self.gpu_arch,
            tf32: self.tf32,
            linked_weights: self.link.clone(),
            ..Default::default()
        }
    }
}

/// [`generate`], with the initializers replaced from a weights file first.
pub fn generate_with(
    model: &Path,
    pins: &[(String, Vec<usize>)],
    consts: &[(String, PathBuf)],
    weights: Option<&Weights>,
    weights_file: &str,
    options: &CompileOptions,
) -> Result<Generated, BuildError> {
    let mut g = load_graph(model, pins, consts, weights)?;
    burnc_compiler::passes::prepare(&mut g)?;
    let opts = options.codegen(weights_file, &model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
    Ok(codegen::generate(&g, &opts)?)
}

/// Load a model with its weights, pins and constants applied (the passes not yet run).
fn load_graph(model: &Path, pins: &[(String, Vec<usize>)], consts: &[(String, PathBuf)], weights: Option<&Weights>) -> Result<Graph, BuildError> {
    let mut g = burnc_frontends::onnx::load(model)?.graph;
    if let Some(w) = weights {
        apply_weights(&mut g, w)?;
    }
    for (name, dims) in pins {
        pin_input(&mut g, name, dims)?;
    }
    for (name, file) in consts {
        bake_const(&mut g, name, file)?;
    }
    Ok(g)
}

/// The train step of a loaded model (see [`load_graph`]): returns the prepared forward graph
/// (trainable parameters as inputs), the train graph and the frozen parameters.
pub fn train_graphs(mut g: Graph, spec: &TrainSpec) -> Result<(Graph, TrainGraph, Vec<(String, burnc_compiler::Tensor)>), BuildError> {
    let params = burnc_compiler::train::mark_trainable(&mut g, &spec.trainable)?;
    let frozen = burnc_compiler::train::frozen_params(&g);
    burnc_compiler::passes::prepare(&mut g)?;
    let tg = burnc_compiler::train::build_step(g.clone(), params, spec)?;
    Ok((g, tg, frozen))
}

/// Load `model` (weights, pins, constants applied) and build its train step; see [`train_graphs`].
pub fn load_train_graphs(
    model: &Path,
    pins: &[(String, Vec<usize>)],
    consts: &[(String, PathBuf)],
    weights: Option<&Weights>,
    spec: &TrainSpec,
) -> Result<(Graph, TrainGraph, Vec<(String, burnc_compiler::Tensor)>), BuildError> {
    train_graphs(load_graph(model, pins, consts, weights)?, spec)
}

/// Write named tensors as a safetensors file.
pub fn write_train_state_safetensors(path: &Path, tensors: &[(String, burnc_compiler::Tensor)]) -> Result<(), BuildError> {
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, t)| t.data.to_le_bytes()).collect();
    let entries: Vec<(&str, burnc_compiler::ir::DType, &[usize], &[u8])> =
        tensors.iter().zip(&bytes).map(|((n, t), b)| (n.as_str(), t.dtype(), t.shape.as_slice(), b.as_slice())).collect();
    std::fs::write(path, burnc_frontends::safetensors::serialize(&entries)).map_err(|e| file_err(path, e))
}

/// [`generate_with`] for training: the module has `forward` and `train_step` (see
/// `burnc_compiler::codegen::train`).
pub fn generate_train(
    model: &Path,
    pins: &[(String, Vec<usize>)],
    consts: &[(String, PathBuf)],
    weights: Option<&Weights>,
    weights_file: &str,
    spec: &TrainSpec,
    link: Option<&LinkedWeights>,
) -> Result<TrainGenerated, BuildError> {
    let g = load_graph(model, pins, consts, weights)?;
    let (forward, tg, frozen) = train_graphs(g, spec)?;
    let opts = CodegenOptions {
        weights_file: weights_file.to_string(),
        source_name: model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        linked_weights: link.cloned(),
        ..Default::default()
    };
    Ok(codegen::generate_train(&forward, &tg, &frozen, &opts)?)
}

/// Compile `model` with training to the module `out` and its weights beside it.
pub fn compile_train_to(
    model: &Path,
    out: &Path,
    pins: &[(String, Vec<usize>)],
    consts: &[(String, PathBuf)],
    weights: Option<&Weights>,
    spec: &TrainSpec,
    link: Option<&LinkedWeights>,
) -> Result<TrainGenerated, BuildError> {
    let bin = out.with_extension("bin");
    let bin_name = bin.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| "model.bin".into());
    let gen = generate_train(model, pins, consts, weights, &bin_name, spec, link)?;
    write_if_changed(out, gen.source.as_bytes())?;
    write_if_changed(&bin, &gen.weights)?;
    Ok(gen)
}

/// `memory: arena_bytes=.. lower_bound_bytes=.. weights_bytes=..`, as the CLI prints it.
pub fn memory_line(gen: &Generated) -> String {
    format!("memory: arena_bytes={} lower_bound_bytes={} weights_bytes={}", gen.arena_bytes, gen.lower_bound_bytes, gen.weights_bytes)
}

/// What [`compile_to`] and [`Build::compile`] wrote and what the compiler knows about it.
#[derive(Debug, Clone)]
pub struct Report {
    /// The Rust module.
    pub source: PathBuf,
    /// The weights blob next to it.
    pub weights: PathBuf,
    /// Size of the generated `Arena` (= `ARENA_BYTES`).
    pub arena_bytes: usize,
    /// The largest set of tensors live at once: no plan can use less.
    pub lower_bound_bytes: usize,
    pub weights_bytes: usize,
    pub inputs: Vec<IoDesc>,
    pub outputs: Vec<IoDesc>,
    /// With [`Build::train`]: `TRAIN_ARENA_BYTES`, `STATE_BYTES` and the train step's sum of
    /// all buffers (no reuse).
    pub train: Option<TrainReport>,
}

/// Memory of a generated train step.
#[derive(Debug, Clone, Copy)]
pub struct TrainReport {
    pub train_arena_bytes: usize,
    pub train_lower_bound_bytes: usize,
    pub train_total_buffer_bytes: usize,
    pub state_bytes: usize,
}

impl Report {
    /// `memory: arena_bytes=.. lower_bound_bytes=.. weights_bytes=..`
    pub fn memory_line(&self) -> String {
        format!("memory: arena_bytes={} lower_bound_bytes={} weights_bytes={}", self.arena_bytes, self.lower_bound_bytes, self.weights_bytes)
    }
}

/// Write `bytes` unless the file already holds exactly them (keeps mtimes stable).
pub(crate) fn write_if_changed(p: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    if std::fs::read(p).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(p, bytes).map_err(|e| file_err(p, e))
}

/// Compile `model` to the module `out` (`x.rs`) and its weights `x.bin` beside it.
pub fn compile_to(
    model: &Path,
    out: &Path,
    pins: &[(String, Vec<usize>)],
    consts: &[(String, PathBuf)],
    weights: Option<&Weights>,
    options: &CompileOptions,
) -> Result<Report, BuildError> {
    let bin = out.with_extension("bin");
    let bin_name = bin.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| "model.bin".into());
    if options.target == Target::Cuda {
        return compile_cuda_to(model, out, pins, consts, weights, options);
    }
    if options.target == Target::Wgpu {
        return compile_wgpu_to(model, out, pins, consts, weights, options);
    }
    if options.floats != DType::F32 {
        return Err(BuildError::Invalid(format!("--dtype {} runs on the CUDA target only for now", options.floats)));
    }
    if options.tf32 {
        return Err(BuildError::Invalid("--tf32 runs on the CUDA target only".into()));
    }
    let gen = generate_with(model, pins, consts, weights, &bin_name, options)?;
    write_generated(out, &bin, gen)
}

/// [`compile_to`] for the CUDA target: `x.rs`, its weights `x.bin`, the kernels' PTX `x.ptx`
/// (embedded by the module) and their CUDA C `x.cu` (for reading) beside it.
fn compile_cuda_to(model: &Path, out: &Path, pins: &[(String, Vec<usize>)], consts: &[(String, PathBuf)], weights: Option<&Weights>, options: &CompileOptions) -> Result<Report, BuildError> {
    let file = |ext: &str| out.with_extension(ext);
    let name = |p: &Path| p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let (bin, ptx, cu) = (file("bin"), file("ptx"), file("cu"));
    let mut g = load_graph(model, pins, consts, weights)?;
    burnc_compiler::passes::prepare(&mut g)?;
    let opts = options.codegen(&name(&bin), &name(model));
    let gen = codegen::cuda::generate(&g, &opts, &name(&ptx))?;
    write_if_changed(&cu, gen.kernels.cuda_source.as_bytes())?;
    write_if_changed(&ptx, gen.kernels.ptx.as_bytes())?;
    gpu_report(out, bin, &gen.source, &gen.weights, gen.arena_bytes, gen.inputs, gen.outputs)
}

/// Write a GPU module and its weights; its report (the arena is the device's, planned once).
fn gpu_report(out: &Path, bin: PathBuf, source: &str, weights: &[u8], arena_bytes: usize, inputs: Vec<IoDesc>, outputs: Vec<IoDesc>) -> Result<Report, BuildError> {
    write_if_changed(out, source.as_bytes())?;
    write_if_changed(&bin, weights)?;
    Ok(Report { source: out.to_path_buf(), weights: bin, arena_bytes, lower_bound_bytes: arena_bytes, weights_bytes: weights.len(), inputs, outputs, train: None })
}

/// [`compile_to`] for the wgpu target: `x.rs`, its weights `x.bin` and its kernels `x.wgsl`
/// (embedded by the module) beside it.
fn compile_wgpu_to(model: &Path, out: &Path, pins: &[(String, Vec<usize>)], consts: &[(String, PathBuf)], weights: Option<&Weights>, options: &CompileOptions) -> Result<Report, BuildError> {
    if options.tf32 {
        return Err(BuildError::Invalid("--tf32 runs on the CUDA target only".into()));
    }
    let file = |ext: &str| out.with_extension(ext);
    let name = |p: &Path| p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let (bin, wgsl) = (file("bin"), file("wgsl"));
    let mut g = load_graph(model, pins, consts, weights)?;
    burnc_compiler::passes::prepare(&mut g)?;
    let opts = options.codegen(&name(&bin), &name(model));
    let gen = codegen::wgsl::generate(&g, &opts, &name(&wgsl))?;
    write_if_changed(&wgsl, gen.kernels.as_bytes())?;
    gpu_report(out, bin, &gen.source, &gen.weights, gen.arena_bytes, gen.inputs, gen.outputs)
}

/// Compile a graph built in code (a build script that constructs the IR itself instead of
/// loading a file) to the module `out` (`x.rs`) and its weights `x.bin` beside it: runs
/// `passes::prepare`, then codegen. Every input must have a static shape. `source_name` goes
/// into the module's header comment.
pub fn compile_graph_to(mut g: Graph, out: &Path, source_name: &str) -> Result<Report, BuildError> {
    let bin = out.with_extension("bin");
    let bin_name = bin.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| "model.bin".into());
    burnc_compiler::passes::prepare(&mut g)?;
    let opts = CodegenOptions { weights_file: bin_name, source_name: source_name.to_string(), ..Default::default() };
    let gen = codegen::generate(&g, &opts)?;
    write_generated(out, &bin, gen)
}

fn write_generated(out: &Path, bin: &Path, gen: Generated) -> Result<Report, BuildError> {
    write_if_changed(out, gen.source.as_bytes())?;
    write_if_changed(bin, &gen.weights)?;
    Ok(Report {
        source: out.to_path_buf(),
        weights: bin.to_path_buf(),
        arena_bytes: gen.arena_bytes,
        lower_bound_bytes: gen.lower_bound_bytes,
        weights_bytes: gen.weights_bytes,
        inputs: gen.inputs,
        outputs: gen.outputs,
        train: None,
    })
}

/// Compile a model from a build script:
///
/// ```no_run
/// # fn main() -> Result<(), burnc::BuildError> {
/// let report = burnc::Build::new("model.onnx").input("x", [1, 3, 224, 224]).name("model").compile()?;
/// println!("cargo:warning={}", report.memory_line());
/// # Ok(()) }
/// ```
///
/// writes `$OUT_DIR/model.rs` and `$OUT_DIR/model.bin` and tells cargo to rerun when the model
/// (or a constant's file) changes. Include the module with `burnc::include_model!("model")`.
#[derive(Debug, Clone)]
pub struct Build {
    model: PathBuf,
    pins: Vec<(String, Vec<usize>)>,
    /// `input_dims` specs (`1x3x{h<=64}x{w<=64}`), parsed when compiling.
    dim_specs: Vec<(String, String)>,
    consts: Vec<(String, PathBuf)>,
    name: Option<String>,
    out_dir: Option<PathBuf>,
    cargo_metadata: bool,
    weights: Option<PathBuf>,
    renames: Vec<String>,
    allow_unused_weights: bool,
    train: Option<TrainSpec>,
    winograd: bool,
    max_arena: usize,
    target: Target,
    floats: DType,
    gpu_arch: GpuArch,
    tf32: bool,
    link_weights: Option<bool>,
}

impl Build {
    /// Compile the ONNX model at `model` (relative paths are relative to the package root in a
    /// build script).
    pub fn new(model: impl AsRef<Path>) -> Self {
        Build {
            model: model.as_ref().to_path_buf(),
            pins: Vec::new(),
            dim_specs: Vec::new(),
            consts: Vec::new(),
            name: None,
            out_dir: None,
            cargo_metadata: true,
            weights: None,
            renames: Vec::new(),
            allow_unused_weights: false,
            train: None,
            winograd: true,
            max_arena: burnc_compiler::size::DEFAULT_MAX_ARENA_BYTES,
            target: Target::Cpu,
            floats: DType::F32,
            gpu_arch: GpuArch::default(),
            tf32: false,
            link_weights: None,
        }
    }

    /// Pin input `name` to `dims` (needed for symbolic dims; checked against fixed ones).
    pub fn input(mut self, name: &str, dims: impl AsRef<[usize]>) -> Self {
        self.pins.push((name.to_string(), dims.as_ref().to_vec()));
        self
    }

    /// Give input `name`'s dims as the CLI's `--input` does: numbers and bounded dims
    /// (`"1x3x{h<=640}x{w<=640}"`). With a bounded dim the module's arena is sized for the
    /// bounds and its `forward` takes a `Dims` argument and returns `Result<_, DimError>`.
    pub fn input_dims(mut self, name: &str, spec: &str) -> Self {
        self.dim_specs.push((name.to_string(), spec.to_string()));
        self
    }

    /// Bake input `name` into the model as a constant read from `file` (`.npy` or `.pb`).
    pub fn constant(mut self, name: &str, file: impl AsRef<Path>) -> Self {
        self.consts.push((name.to_string(), file.as_ref().to_path_buf()));
        self
    }

    /// Replace the model's initializers with the tensors of a `.safetensors` file or a PyTorch
    /// checkpoint (`.pt`/`.pth`, told apart by content; every parameter must be in it, with the
    /// same shape; f16/bf16/f64 convert to the model's dtype).
    pub fn weights(mut self, file: impl AsRef<Path>) -> Self {
        self.weights = Some(file.as_ref().to_path_buf());
        self
    }

    /// Rename weights-file keys before matching them to parameters: `PATTERN=REPLACEMENT`, where
    /// `*` in PATTERN matches anything and fills the `*`s of REPLACEMENT (`model.*=*`). Rules
    /// apply in order, first match wins.
    pub fn rename_weights(mut self, rule: &str) -> Self {
        self.renames.push(rule.to_string());
        self
    }

    /// Ignore tensors of the weights file that no parameter takes (default: an error).
    pub fn allow_unused_weights(mut self, on: bool) -> Self {
        self.allow_unused_weights = on;
        self
    }

    /// Output file stem: `<name>.rs` and `<name>.bin` (default: the model's file stem).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Write into `dir` instead of `$OUT_DIR`.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether to print `cargo:rerun-if-changed=` lines (default true; turn off outside build scripts).
    pub fn cargo_metadata(mut self, on: bool) -> Self {
        self.cargo_metadata = on;
        self
    }

    /// Also generate `train_step` (see `burnc --train`): the module then has `Model::new(&mut
    /// State)`, `forward`, `train_step`, `TRAIN_ARENA_BYTES` and `STATE_BYTES`.
    pub fn train(mut self, spec: TrainSpec) -> Self {
        self.train = Some(spec);
        self
    }

    /// The most bytes the model's arena may take (default 1 TiB): a model that needs more is
    /// refused with the node holding the largest buffer.
    pub fn max_arena(mut self, bytes: usize) -> Self {
        self.max_arena = bytes;
        self
    }

    /// Where the module runs ([`Target::Cpu`] by default). With [`Target::Cuda`] the module
    /// needs burnc-runtime's `cuda` feature, and `x.ptx` and `x.cu` are written beside it;
    /// with [`Target::Wgpu`] its `wgpu` feature, and `x.wgsl` is written beside it.
    pub fn target(mut self, target: Target) -> Self {
        self.target = target;
        self
    }

    /// The dtype the model's f32 tensors run in ([`DType::F32`] by default; `BF16` or `F16`
    /// on [`Target::Cuda`], with f32 arithmetic, as `model.to(torch.bfloat16)` runs).
    pub fn floats(mut self, dtype: DType) -> Self {
        self.floats = dtype;
        self
    }

    /// The NVIDIA architecture of [`Target::Cuda`] kernels: [`GpuArch::Sm90a`] by default
    /// (Hopper's `wgmma` for deep products; such a module loads on H100/H200 only), or
    /// [`GpuArch::Sm90`] for Hopper and later GPUs.
    pub fn gpu_arch(mut self, arch: GpuArch) -> Self {
        self.gpu_arch = arch;
        self
    }

    /// Run f32 matrix products and convolutions of [`Target::Cuda`] on tensor cores with TF32
    /// inputs (10-bit mantissas, f32 sums), as PyTorch's `allow_tf32` (default false).
    pub fn tf32(mut self, on: bool) -> Self {
        self.tf32 = on;
        self
    }

    /// Whether 3×3 convolutions may run by Winograd (default true): faster, but their weights
    /// take 4× the space in the blob ([`CodegenOptions::winograd`]).
    pub fn winograd(mut self, on: bool) -> Self {
        self.winograd = on;
        self
    }

    /// How the module gets its weights. `true`: as a static library burnc writes beside the
    /// module (`lib<name>_weights.a`, one object with the blob under one symbol) that the
    /// module links through an extern static, so rustc never reads, hashes or embeds the
    /// blob; the build script tells cargo where it is. `false`: `include_bytes!` of
    /// `<name>.bin`. Default: linked in a build script whose target burnc writes objects for
    /// (ELF, Mach-O, COFF on x86-64, AArch64, Arm, RISC-V), embedded otherwise (wasm32, bounded
    /// dims, `cargo_metadata(false)`).
    pub fn link_weights(mut self, on: bool) -> Self {
        self.link_weights = Some(on);
        self
    }

    /// The library the module links its weights from, when it does (see [`Build::link_weights`]).
    fn weights_link(&self, name: &str, bounded: bool) -> Result<Option<(LinkedWeights, String)>, BuildError> {
        let triple = std::env::var("TARGET").ok();
        let supported = triple.as_deref().and_then(crate::weights_object::format_for).is_some();
        let want = match self.link_weights {
            Some(on) => on,
            None => self.cargo_metadata && supported && !bounded,
        };
        if !want {
            return Ok(None);
        }
        let triple = match triple {
            Some(t) if supported => t,
            Some(t) => return Err(BuildError::Invalid(format!("link_weights(true): burnc writes no object files for `{t}`; use link_weights(false)"))),
            None => return Err(BuildError::Invalid("link_weights(true) runs in a build script (TARGET is not set)".into())),
        };
        if bounded {
            return Err(BuildError::Invalid("link_weights(true) is not supported with bounded dims yet".into()));
        }
        let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "model".into());
        let lib = format!("{}_weights", name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>());
        Ok(Some((LinkedWeights::library(lib, crate::weights_object::symbol(&package, name)), triple)))
    }

    /// Generate the module and its weights; see [`Build`].
    pub fn compile(&self) -> Result<Report, BuildError> {
        if self.cargo_metadata {
            println!("cargo:rerun-if-changed={}", self.model.display());
            for (_, f) in &self.consts {
                println!("cargo:rerun-if-changed={}", f.display());
            }
            if let Some(w) = &self.weights {
                println!("cargo:rerun-if-changed={}", w.display());
            }
        }
        let weights = match &self.weights {
            Some(w) => Some(Weights::new(w, &self.renames, self.allow_unused_weights)?),
            None => None,
        };
        let dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or(BuildError::NoOutDir)?),
        };
        let name = match &self.name {
            Some(n) => n.clone(),
            None => self.model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into()),
        };
        if name.is_empty() || name.contains(['/', '\\']) {
            return Err(BuildError::Invalid(format!("bad module name `{name}`: give a plain file stem")));
        }
        std::fs::create_dir_all(&dir).map_err(|e| file_err(&dir, e))?;
        let out = dir.join(format!("{name}.rs"));
        let mut specs: Vec<(String, Vec<PinDim>)> = self.pins.iter().map(|(n, d)| (n.clone(), d.iter().map(|&x| PinDim::Fixed(x)).collect())).collect();
        for (n, spec) in &self.dim_specs {
            specs.push((n.clone(), parse_pin_dims(spec)?));
        }
        let link = self.weights_link(&name, has_bounded(&specs))?;
        let report = self.compile_module(&out, &specs, weights.as_ref(), link.as_ref().map(|l| &l.0))?;
        if let Some((l, triple)) = &link {
            crate::weights_object::archive_of_blob(&dir, l, &report.weights, triple)?;
            if self.cargo_metadata {
                println!("cargo:rustc-link-search=native={}", dir.display());
            }
        }
        Ok(report)
    }

    fn compile_module(&self, out: &Path, specs: &[(String, Vec<PinDim>)], weights: Option<&Weights>, link: Option<&LinkedWeights>) -> Result<Report, BuildError> {
        if has_bounded(specs) {
            if self.train.is_some() {
                return Err(BuildError::Invalid("bounded dims are not supported with training yet; pin them with numbers".into()));
            }
            return compile_bounded_to(&self.model, out, specs, &self.consts, weights);
        }
        let pins: Vec<(String, Vec<usize>)> =
            specs.iter().map(|(n, d)| (n.clone(), d.iter().map(|x| if let PinDim::Fixed(v) = x { *v } else { 0 }).collect())).collect();
        match &self.train {
            None => compile_to(
                &self.model,
                out,
                &pins,
                &self.consts,
                weights,
                &CompileOptions { winograd: self.winograd, max_arena: self.max_arena, target: self.target, floats: self.floats, gpu_arch: self.gpu_arch, tf32: self.tf32, link: link.cloned() },
            ),
            Some(spec) => {
                let gen = compile_train_to(&self.model, out, &pins, &self.consts, weights, spec, link)?;
                Ok(Report {
                    source: out.to_path_buf(),
                    weights: out.with_extension("bin"),
                    arena_bytes: gen.arena_bytes,
                    lower_bound_bytes: gen.arena_bytes,
                    weights_bytes: gen.weights.len(),
                    inputs: gen.inputs,
                    outputs: gen.outputs,
                    train: Some(TrainReport {
                        train_arena_bytes: gen.train_arena_bytes,
                        train_lower_bound_bytes: gen.train_lower_bound_bytes,
                        train_total_buffer_bytes: gen.train_total_buffer_bytes,
                        state_bytes: gen.state_bytes,
                    }),
                })
            }
        }
    }
}
