//! `burnc run --codegen`: generate the module, build it into a small harness binary in a
//! cache folder (one shared target dir, so only the model's own crate recompiles), run it on
//! raw little-endian input files and read its raw outputs back.
use crate::build::{bake_tensor, BuildError};
use thiserror::Error;
use burnc_compiler::codegen::{self, emit::rust_ty, CodegenOptions, Generated};
use burnc_compiler::interp::RtValue;
use burnc_compiler::ir::{DType, Graph, Shape, TensorType};
use burnc_compiler::passes::unseq::{InputForm, OutputForm};
use burnc_compiler::{Data, Tensor};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

pub mod bounded;
pub mod gpu;
pub mod cache_limit;

#[derive(Debug, Error)]
pub enum HarnessError {
    #[error("{0}")]
    Msg(String),
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Pass(#[from] burnc_compiler::passes::PassError),
    #[error(transparent)]
    Codegen(#[from] burnc_compiler::codegen::CodegenError),
}

/// Where harness crates and their shared target dir live.
pub fn cache_dir() -> PathBuf {
    if let Ok(d) = std::env::var("BURNC_CACHE_DIR") {
        return PathBuf::from(d);
    }
    match std::env::var("HOME") {
        Ok(h) => PathBuf::from(h).join(".cache/burnc"),
        Err(_) => std::env::temp_dir().join("burnc-cache"),
    }
}

/// The burnc-runtime crate the harness links (the source tree burnc was built from, unless
/// BURNC_RUNTIME_PATH says otherwise).
pub fn runtime_path() -> PathBuf {
    std::env::var("BURNC_RUNTIME_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("runtime"))
}

fn io_err(p: &Path, e: impl std::fmt::Display) -> HarnessError {
    HarnessError::File { path: p.display().to_string(), reason: e.to_string() }
}

/// A model generated for given input values: the module, the tensors `forward` takes (inputs
/// baked in as constants are left out, sequences and optionals are flattened to their
/// tensors), and how the module's outputs regroup into the graph's outputs.
pub struct Prepared {
    pub gen: Generated,
    pub feeds: Vec<Tensor>,
    pub outputs: Vec<OutputForm>,
}

/// Generate with every input pinned to its run-time shape. If that leaves shapes that depend
/// on input values (a Reshape target fed by an input, say), bake the integer inputs in as
/// constants and try again. Sequence and optional inputs are pinned to their lengths and
/// element shapes and unrolled (`passes::unseq`). `fuse`: the rounding-changing fusions
/// `burnc MODEL -o` applies; off, the generated code rounds exactly as the interpreter.
pub fn generate_for(g: &Graph, values: &[RtValue], name: &str, fuse: bool) -> Result<Prepared, HarnessError> {
    let opts = CodegenOptions { weights_file: "model.bin".into(), source_name: name.to_string(), fuse, ..Default::default() };
    generate_for_with(g, values, &opts)
}

/// [`generate_for`] with every codegen option chosen by the caller.
pub fn generate_for_with(g: &Graph, values: &[RtValue], opts: &CodegenOptions) -> Result<Prepared, HarnessError> {
    with_baking(g, values, |p| Ok(Prepared { gen: codegen::generate(&p.graph, opts)?, feeds: p.feeds, outputs: p.outputs }))
}

/// A graph ready for code generation at the run-time shapes of `values`, the tensors its
/// remaining inputs are fed, and how its outputs regroup.
pub struct PreparedGraph {
    pub graph: Graph,
    pub feeds: Vec<Tensor>,
    pub outputs: Vec<OutputForm>,
}

/// Run `compile` on `g` with every input pinned to its run-time shape; if that fails (shapes
/// that depend on input values, a Reshape target fed by an input, say), again with the integer
/// inputs baked in as constants. The first failure is the one reported.
pub fn with_baking<T>(g: &Graph, values: &[RtValue], compile: impl Fn(PreparedGraph) -> Result<T, HarnessError>) -> Result<T, HarnessError> {
    match prepare_graph(g, values, false).and_then(&compile) {
        Ok(r) => Ok(r),
        Err(first) => prepare_graph(g, values, true).and_then(&compile).map_err(|_| first),
    }
}

/// `g` prepared for the run-time values `values` (see [`with_baking`]).
pub fn prepare_graph(g: &Graph, values: &[RtValue], bake_ints: bool) -> Result<PreparedGraph, HarnessError> {
    let tt = |t: &Tensor| TensorType { dtype: t.dtype(), shape: Some(Shape::fixed(&t.shape)) };
    let mut g = g.clone();
    // Per remaining graph input, in order: its form and the tensors it is fed.
    let mut kept: Vec<(InputForm, Vec<Tensor>)> = Vec::new();
    for (pos, v) in values.iter().enumerate().rev() {
        let id = g.inputs[pos];
        match v {
            RtValue::Tensor(t) if bake_ints && (t.dtype().is_int() || t.dtype() == DType::Bool || compile_time_only(&g, id)) => {
                bake_tensor(&mut g, pos, t.clone());
            }
            RtValue::Tensor(t) => {
                // By name and dims, not a `NAME=DIMS` string: a model's names may hold `=`.
                let name = g.value(id).name.clone();
                crate::build::pin_input(&mut g, &name, &t.shape)?;
                kept.push((InputForm::Tensor, vec![t.clone()]));
            }
            RtValue::Sequence(items, _) => kept.push((InputForm::Sequence(items.iter().map(tt).collect()), items.clone())),
            RtValue::Optional(None) => kept.push((InputForm::Optional(None), vec![])),
            RtValue::Optional(Some(b)) => match b.as_ref() {
                RtValue::Tensor(t) => kept.push((InputForm::Optional(Some(tt(t))), vec![t.clone()])),
                RtValue::Sequence(items, _) => kept.push((InputForm::OptionalSequence(items.iter().map(tt).collect()), items.clone())),
                RtValue::Optional(_) => return Err(HarnessError::Msg("codegen does not support nested optionals".into())),
            },
        }
    }
    kept.reverse();
    burnc_compiler::passes::prepare(&mut g)?;
    let forms: Vec<InputForm> = kept.iter().map(|(f, _)| f.clone()).collect();
    let outputs = burnc_compiler::passes::unseq::unroll_sequences(&mut g, &forms)?;
    burnc_compiler::passes::prepare(&mut g)?;
    let feeds = kept.into_iter().flat_map(|(_, t)| t).collect();
    Ok(PreparedGraph { graph: g, feeds, outputs })
}

/// Whether graph input `v`'s value reaches, through any chain of nodes, an operand the
/// compiler must know at compile time because it decides shapes (Resize's roi / scales,
/// Range's bounds, Loop's trip count, Unique's input, NonMaxSuppression's inputs), so a float
/// input there is baked like an integer one.
pub(crate) fn compile_time_only(g: &Graph, v: burnc_compiler::ir::ValueId) -> bool {
    use burnc_compiler::ir::{Op, ValueKind};
    let mut stack: Vec<burnc_compiler::ir::ValueId> = Vec::new();
    for n in &g.nodes {
        for (i, inp) in n.inputs.iter().enumerate() {
            let decides_shape = match &n.op {
                Op::Loop { .. } => i == 0,
                Op::Def(d) => d.decides_shapes(i),
                _ => false,
            };
            if decides_shape {
                stack.extend(inp);
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    while let Some(u) = stack.pop() {
        if u == v {
            return true;
        }
        if !seen.insert(u) {
            continue;
        }
        if let ValueKind::Node(p) = g.value(u).kind {
            stack.extend(g.node(p).inputs.iter().flatten());
        }
    }
    false
}

/// The module's tensor outputs regrouped into the graph's outputs (sequences, optionals).
pub fn regroup(tensors: Vec<Tensor>, forms: &[OutputForm]) -> Result<Vec<RtValue>, HarnessError> {
    let mut it = tensors.into_iter();
    let mut take = |n: usize| -> Result<Vec<Tensor>, HarnessError> {
        let v: Vec<Tensor> = it.by_ref().take(n).collect();
        if v.len() != n {
            return Err(HarnessError::Msg("generated code returned fewer outputs than expected".into()));
        }
        Ok(v)
    };
    let mut out = Vec::with_capacity(forms.len());
    for f in forms {
        out.push(match f {
            OutputForm::Tensor => RtValue::Tensor(take(1)?.remove(0)),
            OutputForm::Sequence { len, dtype } => RtValue::Sequence(take(*len)?, *dtype),
            OutputForm::Optional { present: false } => RtValue::Optional(None),
            OutputForm::Optional { present: true } => RtValue::Optional(Some(Box::new(RtValue::Tensor(take(1)?.remove(0))))),
            OutputForm::OptionalSequence { len, dtype } => RtValue::Optional(Some(Box::new(RtValue::Sequence(take(*len)?, *dtype)))),
        });
    }
    Ok(out)
}

/// How a harness crate is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// `burnc run --codegen`: release with 16 codegen units (quick to build), portable code.
    Run,
    /// `burnc bench`: opt-level 3, one codegen unit, fat LTO and `-C target-cpu=native`, in a
    /// target dir of its own (other RUSTFLAGS would rebuild the shared one each time).
    Bench,
    /// [`Profile::Bench`] with the runtime's `threads` feature: GEMMs run on
    /// `BURNC_THREADS` threads of the runtime's persistent pool.
    BenchThreads,
    /// `burnc bench --target cuda`: as [`Profile::Bench`] with the runtime's `cuda` feature,
    /// but portable code (the binary may run on the machine with the GPU, not this one).
    BenchCuda,
    /// `burnc run --codegen --target wgpu`: as [`Profile::BenchCuda`] with the runtime's
    /// `wgpu` feature.
    RunWgpu,
    /// As [`Profile::Run`], cross-compiled for `aarch64-unknown-linux-gnu` (linked with
    /// Debian's `aarch64-linux-gnu-gcc` unless `CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER`
    /// says otherwise); the binary runs on Arm or under `qemu-aarch64`.
    RunAarch64,
}

/// The Rust target [`Profile::RunAarch64`] builds for.
pub const AARCH64_TARGET: &str = "aarch64-unknown-linux-gnu";

/// Write the harness crate for `gen` and build it; returns the binary's path.
pub fn build(gen: &Generated, key: &str) -> Result<PathBuf, HarnessError> {
    build_with(gen, key, Profile::Run)
}

/// [`build`] with a choice of [`Profile`].
pub fn build_with(gen: &Generated, key: &str, profile: Profile) -> Result<PathBuf, HarnessError> {
    let main = main_rs(gen, !matches!(profile, Profile::Run | Profile::RunAarch64));
    let files: [(&str, &[u8]); 3] =
        [("src/model.rs", gen.source.as_bytes()), ("src/model.bin", &gen.weights), ("src/main.rs", main.as_bytes())];
    build_crate(key, &files, profile)
}

/// Write a crate depending on burnc-runtime (`files`: paths relative to the crate root) into
/// the cache folder under a name derived from `key` and `profile`, build it, return the binary.
pub fn build_crate(key: &str, files: &[(&str, &[u8])], profile: Profile) -> Result<PathBuf, HarnessError> {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    let (name, target_name, profile_toml) = match profile {
        Profile::Run => (format!("burnc-harness-{:016x}", h.finish()), "target", "debug = false\ncodegen-units = 16\n"),
        Profile::BenchCuda => (format!("burnc-bench-cuda-{:016x}", h.finish()), "target-bench-cuda", "debug = false\nopt-level = 3\ncodegen-units = 16\npanic = \"abort\"\n"),
        Profile::RunWgpu => (format!("burnc-wgpu-{:016x}", h.finish()), "target-wgpu", "debug = false\nopt-level = 3\ncodegen-units = 16\npanic = \"abort\"\nstrip = true\n"),
        Profile::RunAarch64 => (format!("burnc-aarch64-{:016x}", h.finish()), "target-aarch64", "debug = false\ncodegen-units = 16\n"),
        Profile::Bench | Profile::BenchThreads => (
            format!("burnc-bench-{}{:016x}", if profile == Profile::BenchThreads { "mt-" } else { "" }, h.finish()),
            "target-bench",
            "debug = false\nopt-level = 3\ncodegen-units = 1\nlto = \"fat\"\npanic = \"abort\"\n",
        ),
    };
    let root = cache_dir();
    let dir = root.join(&name);
    std::fs::create_dir_all(dir.join("src")).map_err(|e| io_err(&dir, e))?;
    // Modules with string tensors need the runtime's `strings` feature.
    let strings = files.iter().any(|(p, b)| p.ends_with(".rs") && b.windows(12).any(|w| w == b"rt::strings:"));
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nburnc-runtime = {{ path = {:?}, features = [\"{}\"{}] }}\n\n\
         [profile.release]\n{profile_toml}\n[workspace]\n",
        runtime_path().display().to_string(),
        match profile {
            Profile::BenchThreads => "threads",
            Profile::BenchCuda => "cuda",
            Profile::RunWgpu => "wgpu",
            _ => "std",
        },
        if strings { ", \"strings\"" } else { "" }
    );
    let write = |p: PathBuf, b: &[u8]| -> Result<(), HarnessError> {
        // Leave unchanged files alone so cargo's fingerprints stay valid.
        if std::fs::read(&p).ok().as_deref() == Some(b) {
            return Ok(());
        }
        std::fs::write(&p, b).map_err(|e| io_err(&p, e))
    };
    // In use from now on: no other process's cache limit deletes it while it builds or runs.
    cache_limit::touch(&dir);
    write(dir.join("Cargo.toml"), manifest.as_bytes())?;
    for (path, bytes) in files {
        write(dir.join(path), bytes)?;
    }
    let target = root.join(target_name);
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "--release", "--quiet", "--manifest-path"]).arg(dir.join("Cargo.toml")).arg("--target-dir").arg(&target);
    if matches!(profile, Profile::Bench | Profile::BenchThreads) {
        // The binary runs on this machine only: let LLVM use every instruction it has.
        cmd.env("RUSTFLAGS", "-C target-cpu=native").env_remove("CARGO_ENCODED_RUSTFLAGS");
    }
    if profile == Profile::RunAarch64 {
        cmd.args(["--target", AARCH64_TARGET]);
        if std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER").is_none() {
            cmd.env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", "aarch64-linux-gnu-gcc");
        }
    }
    let out = cmd.output().map_err(|e| HarnessError::Msg(format!("cannot run cargo to build the generated code: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| l.starts_with("error")).unwrap_or("cargo build failed");
        return Err(HarnessError::Msg(format!("building the generated code failed ({}): {first}", dir.display())));
    }
    cache_limit::touch(&dir);
    cache_limit::enforce(&root, cache_limit::max_bytes(), &name);
    let out_dir = if profile == Profile::RunAarch64 { target.join(AARCH64_TARGET) } else { target };
    Ok(out_dir.join("release").join(&name))
}

/// The harness: reads `in_<i>.bin` from DIR, runs `forward`, writes `out_<i>.bin`.
/// Arguments: `DIR [ITERS [WARMUP [MIN_MS]]]` (defaults 1, 0, 0): WARMUP untimed runs, then
/// timed runs until there are ITERS of them and they took MIN_MS in all. With more than one
/// timed run it prints `runs=… min_ms=… mean_ms=… p90_ms=… max_ms=…` and, last,
/// `median_ms=…`.
///
/// `embedded`: the model's own `Model::new()` (weights inside the binary, as users build it).
/// Otherwise the weights are read at run time from the crate's `src/model.bin` through
/// `Model::with_weights`: the linker then drops the embedded copy, so a cached harness keeps
/// its weights on disk once, not twice (VGG-19: 550 MB less per harness).
pub fn main_rs(gen: &Generated, embedded: bool) -> String {
    let (load_fn, new_model) = if embedded {
        ("", "let m = model::Model::new();")
    } else {
        (LOAD_WEIGHTS_FN, "let weights = load_weights();\n    let m = model::Model::with_weights(weights.as_bytes()).expect(\"weights blob\");")
    };
    let mut reads = String::new();
    let mut args = Vec::new();
    if gen.heap {
        reads += "    let mut heap = rt::strings::Heap::new();\n";
        args.push("&mut heap".into());
    }
    for (i, d) in gen.inputs.iter().enumerate() {
        reads += &read_input(i, d);
        args.push(format!("&in_{i}"));
    }
    let mut writes = String::new();
    for (i, d) in gen.outputs.iter().enumerate() {
        writes += &write_output(i, d);
    }
    format!(
        r#"//! Harness generated by `burnc run --codegen`.
#![allow(clippy::all)]
mod model;
use burnc_runtime as rt;
use std::path::Path;

{read_fn}
{write_fn}
{load_fn}
fn main() {{
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("dir"));
    let mut num = |default: f64| args.next().and_then(|s| s.parse::<f64>().ok()).unwrap_or(default);
    let iters = num(1.0).max(1.0) as usize;
    let warmup = num(0.0) as usize;
    let min_ms = num(0.0);
{reads}    // The arena may be large: zeroed on the heap, not on the stack.
    let mut arena: Box<model::Arena> = unsafe {{ Box::new_zeroed().assume_init() }};
    {new_model}
    for _ in 0..warmup {{
        std::hint::black_box(m.forward(&mut arena, {args}));
    }}
{profile_reset}    let mut times = Vec::with_capacity(iters);
    let start = std::time::Instant::now();
    while times.len() < iters || start.elapsed().as_secs_f64() * 1e3 < min_ms {{
        let t = std::time::Instant::now();
        let out = m.forward(&mut arena, {args});
        std::hint::black_box(&out);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }}
{profile_print}    let out = m.forward(&mut arena, {args});
{writes}    if times.len() > 1 {{
        let n = times.len();
        let mean = times.iter().sum::<f64>() / n as f64;
        times.sort_by(|a, b| a.total_cmp(b));
        println!(
            "runs={{n}} min_ms={{:.4}} mean_ms={{:.4}} p90_ms={{:.4}} max_ms={{:.4}}",
            times[0], mean, times[(n * 9 / 10).min(n - 1)], times[n - 1]
        );
        println!("median_ms={{:.4}}", median(&times));
    }}
}}

/// Median of sorted values (the mean of the middle two for an even count).
fn median(sorted: &[f64]) -> f64 {{
    let n = sorted.len();
    if n % 2 == 1 {{ sorted[n / 2] }} else {{ (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }}
}}
"#,
        args = args.join(", "),
        profile_reset = if gen.profiled_nodes > 0 { PROFILE_RESET } else { "" },
        profile_print = if gen.profiled_nodes > 0 { PROFILE_PRINT } else { "" },
        read_fn = READ_FN,
        write_fn = WRITE_FN,
    )
}

/// Statements of a harness binding `in_<i>` to input `d`, read from `in_<i>.bin` under `dir`
/// (the tensor's little-endian bytes; strings as `rt::strings::encode` writes them).
pub fn read_input(i: usize, d: &burnc_compiler::codegen::IoDesc) -> String {
    let n: usize = d.shape.iter().product();
    match d.dtype {
        DType::Str => format!(
            "    let bytes_{i} = std::fs::read(dir.join(\"in_{i}.bin\")).expect(\"read input\");\n    \
             let in_{i}: Box<[rt::strings::Str; {n}]> = rt::strings::decode(&bytes_{i}).expect(\"strings\").into_boxed_slice().try_into().expect(\"input size\");\n"
        ),
        t => format!("    let in_{i}: Box<[{}; {n}]> = read(&dir.join(\"in_{i}.bin\"));\n", rust_ty(t).unwrap_or("f32")),
    }
}

/// The statement of a harness writing output `d` (field `out.<ident>`) to `out_<i>.bin`.
pub fn write_output(i: usize, d: &burnc_compiler::codegen::IoDesc) -> String {
    write_slice(i, d, &format!("&out.{}[..]", d.ident))
}

/// The statement of a harness writing `slice` (an expression of type `&[T]`, output `d`'s
/// elements) to `out_<i>.bin` under `dir`.
pub fn write_slice(i: usize, d: &burnc_compiler::codegen::IoDesc, slice: &str) -> String {
    match d.dtype {
        DType::Str => format!("    std::fs::write(dir.join(\"out_{i}.bin\"), rt::strings::encode({slice})).expect(\"write output\");\n"),
        _ => format!("    write(&dir.join(\"out_{i}.bin\"), {slice});\n"),
    }
}

/// [`read_input`] for bounded modules: `in_<i>` a `Vec` as long as the file says (the helper
/// `read_vec` reads numbers).
pub fn read_input_vec(i: usize, d: &burnc_compiler::codegen::IoDesc) -> String {
    match d.dtype {
        DType::Str => format!(
            "    let bytes_{i} = std::fs::read(dir.join(\"in_{i}.bin\")).expect(\"read input\");\n    let in_{i} = rt::strings::decode(&bytes_{i}).expect(\"strings\");\n"
        ),
        t => format!("    let in_{i}: Vec<{}> = read_vec(&dir.join(\"in_{i}.bin\"));\n", rust_ty(t).unwrap_or("f32")),
    }
}

/// Profiled modules: forget the warm-up's node times.
const PROFILE_RESET: &str = "    for c in &model::PROFILE_NS { c.store(0, std::sync::atomic::Ordering::Relaxed); }\n";

/// Profiled modules: per node, milliseconds per timed run and share of the total, slowest first;
/// then the same per op type. Printed before the stats, so `median_ms=` stays the last line.
const PROFILE_PRINT: &str = r#"    {
        let runs = times.len().max(1) as f64;
        let ms: Vec<f64> = model::PROFILE_NS.iter().map(|c| c.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e6 / runs).collect();
        let total: f64 = ms.iter().sum::<f64>().max(1e-12);
        let mut order: Vec<usize> = (0..ms.len()).collect();
        order.sort_by(|&a, &b| ms[b].total_cmp(&ms[a]));
        println!("profile: {:>9} {:>6}  {:<20} {}", "ms/run", "%", "op", "node");
        for &i in &order {
            let (op, name) = model::PROFILE_NODES[i];
            println!("profile: {:>9.4} {:>6.2}  {:<20} {}", ms[i], 100.0 * ms[i] / total, op, name);
        }
        let mut by_op: Vec<(&str, f64, usize)> = Vec::new();
        for (i, &(op, _)) in model::PROFILE_NODES.iter().enumerate() {
            match by_op.iter_mut().find(|e| e.0 == op) {
                Some(e) => { e.1 += ms[i]; e.2 += 1; }
                None => by_op.push((op, ms[i], 1)),
            }
        }
        by_op.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (op, t, n) in by_op {
            println!("profile-op: {:>9.4} {:>6.2}  {:<20} {} nodes", t, 100.0 * t / total, op, n);
        }
        println!("profile-total: {:.4} ms/run in nodes", total);
    }
"#;

/// The run-time weights loader of [`main_rs`]: `src/model.bin` of the harness crate into a
/// 64-byte aligned buffer (what `Model::with_weights` checks).
const LOAD_WEIGHTS_FN: &str = r#"#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; 64]);
struct Weights(Vec<Block>, usize);
impl Weights {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the blocks are plain bytes; self.1 <= 64 * self.0.len().
        unsafe { std::slice::from_raw_parts(self.0.as_ptr() as *const u8, self.1) }
    }
}
fn load_weights() -> Weights {
    use std::io::Read;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/model.bin");
    let mut f = std::fs::File::open(path).expect("open model.bin");
    let n = f.metadata().expect("model.bin").len() as usize;
    let mut v = vec![Block([0; 64]); n.div_ceil(64)];
    // SAFETY: as above; the buffer holds at least n bytes.
    let buf = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, n) };
    f.read_exact(buf).expect("read model.bin");
    Weights(v, n)
}
"#;

/// The harness of a bounded-dims module (`codegen::generate_bounded`): arguments `DIR DIM…`
/// (the named dims in `info.dims` order). Reads `in_<i>.bin` (any length: `forward` checks
/// it), writes `out_<i>.bin` and `out_<i>.shape` (dims separated by spaces); a [`DimError`]
/// from `forward` is printed as `error: …` on stderr with exit status 2. With `BURNC_ITERS=N`
/// it first times N runs and prints `median_ms=…`.
///
/// [`DimError`]: burnc_runtime::dims::DimError
pub fn bounded_main_rs(gen: &Generated, info: &burnc_compiler::codegen::BoundedInfo) -> String {
    let mut reads = String::new();
    let mut args = vec!["&mut arena".to_string()];
    if gen.heap {
        reads += "    let mut heap = rt::strings::Heap::new();\n";
        args.push("&mut heap".into());
    }
    for (i, d) in gen.inputs.iter().enumerate() {
        reads += &read_input_vec(i, d);
        args.push(format!("&in_{i}"));
    }
    args.push("dims".into());
    let dims: Vec<String> = info.dims.iter().map(|(n, _)| format!("{}: num()", burnc_compiler::codegen::bounded::dim_field(n))).collect();
    let mut writes = String::new();
    for (i, d) in gen.outputs.iter().enumerate() {
        writes += &write_slice(i, d, &format!("out.{}", d.ident));
        writes += &format!(
            "    std::fs::write(dir.join(\"out_{i}.shape\"), out.{id}_shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(\" \")).expect(\"write shape\");\n",
            id = d.ident
        );
    }
    format!(
        r#"//! Harness generated for a bounded-dims module.
#![allow(clippy::all)]
mod model;
use burnc_runtime as rt;
use std::path::Path;

fn read_vec<T: Copy + Default>(p: &Path) -> Vec<T> {{
    let bytes = std::fs::read(p).expect("read input");
    let n = bytes.len() / std::mem::size_of::<T>();
    let mut v = vec![T::default(); n];
    // SAFETY: plain numbers; at most the file's bytes are copied; little-endian like the files.
    unsafe {{ std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>()) }};
    v
}}
{write_fn}
fn main() {{
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("dir"));
    let mut num = || args.next().and_then(|s| s.parse::<usize>().ok()).expect("a dim");
    let dims = model::Dims {{ {dims} }};
{reads}    let mut arena: Box<model::Arena> = unsafe {{ Box::new_zeroed().assume_init() }};
    let m = model::Model::new();
    // BURNC_ITERS=N: time N more runs and print `median_ms=…` (comparing with pinned code).
    if let Some(n) = std::env::var("BURNC_ITERS").ok().and_then(|s| s.parse::<usize>().ok()) {{
        let mut times: Vec<f64> = (0..n.max(1))
            .map(|_| {{
                let t = std::time::Instant::now();
                let _ = std::hint::black_box(m.forward({args}).is_ok());
                t.elapsed().as_secs_f64() * 1e3
            }})
            .collect();
        times.sort_by(|a, b| a.total_cmp(b));
        println!("median_ms={{:.4}}", times[times.len() / 2]);
    }}
    let out = match m.forward({args}) {{
        Ok(o) => o,
        Err(e) => {{
            eprintln!("error: {{e}}");
            std::process::exit(2);
        }}
    }};
{writes}}}
"#,
        dims = dims.join(", "),
        args = args.join(", "),
        write_fn = WRITE_FN
    )
}

/// The harnesses' input reader: `in_<i>.bin` (raw little-endian) into a boxed array.
pub const READ_FN: &str = r#"fn read<T: Copy + Default, const N: usize>(p: &Path) -> Box<[T; N]> {
    let bytes = std::fs::read(p).expect("read input");
    assert_eq!(bytes.len(), N * std::mem::size_of::<T>(), "input size");
    let mut v = vec![T::default(); N];
    // SAFETY: plain numbers, exact length checked above; little-endian like the files.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, bytes.len()) };
    v.into_boxed_slice().try_into().ok().expect("length")
}
"#;

/// The harnesses' output writer: a slice as raw little-endian bytes.
pub const WRITE_FN: &str = r#"fn write<T: Copy>(p: &Path, v: &[T]) {
    // SAFETY: plain numbers viewed as bytes.
    let b = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    std::fs::write(p, b).expect("write output");
}
"#;

/// Write the prepared feeds as the harness's `in_<i>.bin`.
pub fn write_inputs(p: &Prepared, work: &Path) -> Result<(), HarnessError> {
    std::fs::create_dir_all(work).map_err(|e| io_err(work, e))?;
    for (k, t) in p.feeds.iter().enumerate() {
        let path = work.join(format!("in_{k}.bin"));
        std::fs::write(&path, t.data.to_le_bytes()).map_err(|e| io_err(&path, e))?;
    }
    Ok(())
}

/// Run a built harness binary with `args` (a model harness: the work dir first); returns its
/// stdout.
pub fn exec<S: AsRef<std::ffi::OsStr>>(bin: &Path, args: &[S]) -> Result<String, HarnessError> {
    exec_env(bin, args, &[])
}

/// [`exec`] with extra environment variables.
pub fn exec_env<S: AsRef<std::ffi::OsStr>>(bin: &Path, args: &[S], env: &[(&str, String)]) -> Result<String, HarnessError> {
    let out = Command::new(bin)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .map_err(|e| HarnessError::Msg(format!("cannot run {}: {e}", bin.display())))?;
    if !out.status.success() {
        return Err(HarnessError::Msg(format!("generated code failed: {}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or(""))));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Read the harness's `out_<i>.bin` back, regrouped into the graph's outputs.
pub fn read_outputs(p: &Prepared, work: &Path) -> Result<Vec<RtValue>, HarnessError> {
    read_outputs_of(&p.gen.outputs, &p.outputs, work)
}

/// [`read_outputs`] for a module with outputs `descs`, regrouped by `forms`.
pub fn read_outputs_of(descs: &[burnc_compiler::codegen::IoDesc], forms: &[OutputForm], work: &Path) -> Result<Vec<RtValue>, HarnessError> {
    let mut res = Vec::new();
    for (i, d) in descs.iter().enumerate() {
        let path = work.join(format!("out_{i}.bin"));
        let bytes = std::fs::read(&path).map_err(|e| io_err(&path, e))?;
        let data = Data::from_le_bytes(d.dtype, &bytes).ok_or_else(|| HarnessError::Msg(format!("output {i} has a bad size")))?;
        res.push(Tensor::new(d.shape.clone(), data));
    }
    regroup(res, forms)
}

/// `burnc run --codegen --target wgpu`: compile `g` for the wgpu target at the shapes of
/// `values`, build the harness (cached under `key`), run it once on `work` and read back the
/// graph's outputs.
pub fn run_wgpu(g: &Graph, values: &[RtValue], opts: &CodegenOptions, key: &str, work: &Path) -> Result<Vec<RtValue>, HarnessError> {
    let (gen, feeds, forms) = with_baking(g, values, |p| Ok((codegen::wgsl::generate(&p.graph, opts, "model.wgsl")?, p.feeds, p.outputs)))?;
    let bin = gpu::build_wgpu(&gen, key)?;
    gpu::write_work(&gen.weights, &feeds, work)?;
    exec(&bin, &[work.as_os_str(), std::ffi::OsStr::new("0")])?;
    read_outputs_of(&gen.outputs, &forms, work)
}

/// Run the built harness on the prepared feeds; returns the graph's outputs.
pub fn run(bin: &Path, p: &Prepared, work: &Path) -> Result<Vec<RtValue>, HarnessError> {
    write_inputs(p, work)?;
    exec(bin, &[work])?;
    read_outputs(p, work)
}

/// A harness timing the runtime's `sgemm` on N×N×N row-major f32 matrices (for `burnc bench
/// --sgemm N`). Arguments: `N ITERS WARMUP MIN_MS`; prints the stats lines of the model harness
/// plus `gflops=…` before `median_ms=…`.
pub fn sgemm_main_rs() -> String {
    r#"//! SGEMM micro-benchmark generated by `burnc bench --sgemm`.
use burnc_runtime::kernels::gemm::{sgemm, Layout};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut num = |default: f64| args.next().and_then(|s| s.parse::<f64>().ok()).unwrap_or(default);
    let n = num(1024.0).max(1.0) as usize;
    let iters = num(10.0).max(1.0) as usize;
    let warmup = num(2.0) as usize;
    let min_ms = num(0.0);
    // Deterministic values in [-1, 1).
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let a: Vec<f32> = (0..n * n).map(|_| rnd()).collect();
    let b: Vec<f32> = (0..n * n).map(|_| rnd()).collect();
    let mut c = vec![0f32; n * n];
    let l = Layout::row_major(n);
    let mut run = |c: &mut [f32]| sgemm(n, n, n, 1.0, &a, l, &b, l, 0.0, c, l);
    for _ in 0..warmup {
        run(&mut c);
    }
    let mut times = Vec::with_capacity(iters);
    let start = std::time::Instant::now();
    while times.len() < iters || start.elapsed().as_secs_f64() * 1e3 < min_ms {
        let t = std::time::Instant::now();
        run(&mut c);
        std::hint::black_box(&c);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let k = times.len();
    let mean = times.iter().sum::<f64>() / k as f64;
    times.sort_by(|a, b| a.total_cmp(b));
    let median = if k % 2 == 1 { times[k / 2] } else { (times[k / 2 - 1] + times[k / 2]) / 2.0 };
    println!(
        "runs={k} min_ms={:.4} mean_ms={:.4} p90_ms={:.4} max_ms={:.4}",
        times[0], mean, times[(k * 9 / 10).min(k - 1)], times[k - 1]
    );
    println!("gflops={:.2}", 2.0 * (n as f64).powi(3) / (median * 1e-3) / 1e9);
    println!("median_ms={median:.4}");
}
"#
    .to_string()
}
