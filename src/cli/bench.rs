//! `burnc bench MODEL [--input NAME=DIMS|NAME=FILE]... [--threads N] [--iters K]`: latency of
//! the generated code, built in release for this CPU, on deterministic inputs. The last line
//! printed is `median_ms=<value>`. Also `burnc bench --sgemm N`: the runtime's SGEMM alone.
use super::codegen_flags::{DTypeArg, GpuArchArg, TargetArg};
use super::inputs::read_value;
use super::CliError;
use burnc::build::{parse_dims, pin_input};
use burnc::harness::{self, Profile};
use burnc_compiler::codegen::CodegenOptions;
use burnc_compiler::interp::RtValue;
use burnc_compiler::ir::{DType, Dim, ValueType};
use burnc_compiler::{Data, Tensor};
use burnc_runtime::half::{bf16, f16};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
#[command(after_help = "Inputs not given as files get deterministic values: floats uniform in [-1, 1) from a \
fixed seed, integers 0, bools false. The harness is built with opt-level 3, one codegen unit, fat LTO \
and -C target-cpu=native in $BURNC_CACHE_DIR (default ~/.cache/burnc), target dir target-bench. \
Runs WARMUP untimed iterations, then timed ones until there are ITERS of them and they took at least \
--min-ms in all; prints runs/min/mean/p90/max and, as the last line, median_ms=<value>.")]
pub struct BenchArgs {
    /// The ONNX model (not needed with --sgemm).
    #[arg(required_unless_present = "sgemm")]
    pub model: Option<PathBuf>,
    /// Pin an input's dims (NAME=1x3x224x224) or give its values (NAME=FILE, `.pb` or `.npy`).
    #[arg(long = "input", short = 'i', value_name = "NAME=DIMS|NAME=FILE")]
    pub inputs: Vec<String>,
    /// Threads: with N > 1 the harness links the runtime's `threads` feature and runs with
    /// BURNC_THREADS=N (convolutions, GEMMs, pooling, BatchNormalization and LRN split over the runtime's persistent pool; other ops on one thread).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub threads: usize,
    /// Timed iterations (at least; more if they take less than --min-ms).
    #[arg(long, default_value_t = 20, value_name = "K")]
    pub iters: usize,
    /// Untimed iterations first.
    #[arg(long, default_value_t = 3, value_name = "W")]
    pub warmup: usize,
    /// Keep timing until the timed iterations took this long in all.
    #[arg(long = "min-ms", default_value_t = 1000.0, value_name = "MS")]
    pub min_ms: f64,
    /// Keep the harness's input files (`in_<i>.bin`, raw little-endian) and outputs
    /// (`out_<i>.bin`) in DIR, and print the harness binary's path (`harness: PATH`), so a
    /// script can run it directly: `PATH DIR ITERS WARMUP MIN_MS`.
    #[arg(long = "work-dir", value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Time every node too: print, before the stats, each node's milliseconds per run and
    /// share (slowest first), then the totals per op type. The timers cost a little.
    #[arg(long)]
    pub profile: bool,
    /// With --work-dir and a GPU target: build the harness and write DIR, print
    /// `harness: PATH`, and stop (for a GPU machine that has no Rust: run `PATH DIR ITERS
    /// WARMUP` there).
    #[arg(long, requires = "work_dir")]
    pub build_only: bool,
    /// Where the model runs: `cpu`, `cuda` (the harness times CUDA-graph replays with CUDA
    /// events on GPU 0) or `wgpu` (forward passes on the first wgpu adapter, host clock from
    /// submit to finish); with --work-dir the GPU harnesses read DIR/model.bin at run time.
    #[arg(long, value_name = "TARGET", default_value = "cpu")]
    pub target: TargetArg,
    /// With `--target cuda`: the dtype f32 weights and activations run in (`f32`, `bf16`, `f16`).
    #[arg(long, value_name = "DTYPE", default_value = "f32")]
    pub dtype: DTypeArg,
    /// With `--target cuda`: the NVIDIA architecture of the kernels (`sm90a` or `sm90`).
    #[arg(long, value_name = "ARCH", default_value = "sm90a")]
    pub gpu_arch: GpuArchArg,
    /// With `--target cuda --dtype f32`: products on tensor cores with TF32 inputs.
    #[arg(long)]
    pub tf32: bool,
    /// Instead of a model, time the runtime's SGEMM on N×N×N f32 matrices.
    #[arg(long, value_name = "N")]
    pub sgemm: Option<usize>,
}

pub fn bench(a: BenchArgs) -> Result<(), CliError> {
    if a.iters == 0 {
        return Err(CliError::Usage("--iters must be at least 1".into()));
    }
    if !(a.min_ms >= 0.0 && a.min_ms.is_finite()) {
        return Err(CliError::Usage("--min-ms must be a non-negative number".into()));
    }
    if a.threads == 0 {
        return Err(CliError::Usage("--threads must be at least 1".into()));
    }
    if a.threads > 1 {
        println!("threads: {} (convolutions, GEMMs, pooling, BatchNormalization and LRN split over burnc-runtime's persistent pool; other ops on one thread)", a.threads);
    } else {
        println!("threads: 1");
    }
    let profile = if a.threads > 1 { Profile::BenchThreads } else { Profile::Bench };
    let env = [("BURNC_THREADS", a.threads.to_string())];
    let timing = [a.iters.to_string(), a.warmup.to_string(), a.min_ms.to_string()];
    if let Some(n) = a.sgemm {
        return bench_sgemm(n, &timing);
    }
    let model_path = a.model.as_ref().ok_or_else(|| CliError::Usage("give a model, or --sgemm N".into()))?;
    let model = burnc_frontends::onnx::load(model_path)?;
    let mut g = model.graph;
    let mut files: Vec<Option<PathBuf>> = vec![None; g.inputs.len()];
    for spec in &a.inputs {
        let (name, rhs) =
            spec.split_once('=').ok_or_else(|| CliError::Usage(format!("expected NAME=DIMS or NAME=FILE, got `{spec}`")))?;
        let pos = g
            .inputs
            .iter()
            .position(|&i| g.value(i).name == name)
            .ok_or_else(|| CliError::Usage(format!("the model has no input named `{name}`")))?;
        match parse_dims(rhs) {
            Ok(dims) if !Path::new(rhs).exists() => pin_input(&mut g, name, &dims)?,
            _ => files[pos] = Some(PathBuf::from(rhs)),
        }
    }
    let mut values = Vec::with_capacity(g.inputs.len());
    for (pos, file) in files.iter().enumerate() {
        let v = g.value(g.inputs[pos]);
        let value = match file {
            Some(f) => {
                let value = read_value(f, &v.ty)?;
                super::run::check_input(&v.name, &v.ty, &value)?;
                value
            }
            None => RtValue::Tensor(synthetic(&v.name, &v.ty, pos as u64)?),
        };
        let from = if file.is_some() { "from file" } else { "generated" };
        match &value {
            RtValue::Tensor(t) => println!("input {}: {} {:?} ({from})", v.name, t.dtype(), t.shape),
            RtValue::Sequence(items, _) => println!("input {}: sequence of {} tensors ({from})", v.name, items.len()),
            RtValue::Optional(o) => println!("input {}: optional, {} ({from})", v.name, if o.is_some() { "present" } else { "empty" }),
        }
        values.push(value);
    }

    if a.target == TargetArg::Cuda {
        return bench_gpu(&a, g, &values, model_path, harness::gpu::Gpu::Cuda);
    }
    if a.target == TargetArg::Wgpu {
        return bench_gpu(&a, g, &values, model_path, harness::gpu::Gpu::Wgpu);
    }
    if a.dtype != DTypeArg::F32 || a.build_only || a.tf32 {
        return Err(CliError::Usage("--dtype, --tf32 and --build-only need a GPU target (--target cuda or wgpu)".into()));
    }
    let t0 = Instant::now();
    let opts = CodegenOptions { source_name: model_path.display().to_string(), profile: a.profile, ..Default::default() };
    let prepared = harness::generate_for_with(&g, &values, &opts)?;
    let key = format!(
        "{}|{}{}",
        model_path.canonicalize().unwrap_or(model_path.clone()).display(),
        a.inputs.join(";"),
        if a.profile { "|profile" } else { "" }
    );
    let bin = harness::build_with(&prepared.gen, &key, profile)?;
    println!("build: {:.1} s (release, opt-level 3, codegen-units 1, fat LTO, target-cpu=native)", t0.elapsed().as_secs_f64());
    let (work, keep) = match &a.work_dir {
        Some(d) => (d.clone(), true),
        None => (harness::cache_dir().join("runs").join(format!("bench-{}", std::process::id())), false),
    };
    if keep {
        println!("harness: {}", bin.display());
    }
    let result = harness::write_inputs(&prepared, &work).and_then(|()| {
        let mut args = vec![work.display().to_string()];
        args.extend(timing.iter().cloned());
        harness::exec_env(&bin, &args, &env)
    });
    if !keep {
        let _ = std::fs::remove_dir_all(&work);
    }
    print_stats(&result?, a.iters)
}

/// `burnc bench --target cuda|wgpu`: the GPU module, built into a harness here; run here when
/// there is a device. With --work-dir the harness and its folder can go to a GPU machine instead.
fn bench_gpu(a: &BenchArgs, mut g: burnc_compiler::ir::Graph, values: &[RtValue], model_path: &Path, gpu: harness::gpu::Gpu) -> Result<(), CliError> {
    use harness::gpu::Gpu;
    let target = if gpu == Gpu::Cuda { "cuda" } else { "wgpu" };
    if a.profile {
        return Err(CliError::Usage(format!("--profile is not supported with --target {target} yet")));
    }
    if gpu == Gpu::Wgpu && a.tf32 {
        return Err(CliError::Usage("--tf32 runs on the CUDA target only".into()));
    }
    let feeds: Vec<Tensor> = values
        .iter()
        .map(|v| match v {
            RtValue::Tensor(t) => Ok(t.clone()),
            _ => Err(CliError::Usage(format!("--target {target} takes tensor inputs only"))),
        })
        .collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    burnc_compiler::passes::prepare(&mut g)?;
    let opts = CodegenOptions { source_name: model_path.display().to_string(), floats: a.dtype.dtype(), gpu_arch: a.gpu_arch.arch(), tf32: a.tf32, ..Default::default() };
    let key = format!("{}|{}|{}|{:?}|{target}", model_path.canonicalize().unwrap_or(model_path.to_path_buf()).display(), a.inputs.join(";"), opts.floats, opts.gpu_arch);
    let key = if opts.tf32 { format!("{key}|tf32") } else { key };
    let (bin, weights) = match gpu {
        Gpu::Cuda => {
            let gen = burnc_compiler::codegen::cuda::generate(&g, &opts, "model.ptx")?;
            let products = if opts.tf32 { " (TF32 products)" } else { "" };
            println!("cuda: {} kernel launches per forward pass, floats in {}{products}, arena {} bytes, weights {} bytes", gen.launches, opts.floats, gen.arena_bytes, gen.weights_bytes);
            (harness::gpu::build(&gen, &key)?, gen.weights)
        }
        Gpu::Wgpu => {
            let gen = burnc_compiler::codegen::wgsl::generate(&g, &opts, "model.wgsl")?;
            println!("wgpu: {} dispatches per forward pass, arena {} bytes, weights {} bytes", gen.launches, gen.arena_bytes, gen.weights_bytes);
            (harness::gpu::build_wgpu(&gen, &key)?, gen.weights)
        }
    };
    println!("build: {:.1} s (release, opt-level 3, runtime feature {target}, portable code)", t0.elapsed().as_secs_f64());
    let (work, keep) = match &a.work_dir {
        Some(d) => (d.clone(), true),
        None => (harness::cache_dir().join("runs").join(format!("bench-{target}-{}", std::process::id())), false),
    };
    harness::gpu::write_work(&weights, &feeds, &work)?;
    if keep {
        println!("harness: {}", bin.display());
    }
    if a.build_only {
        return Ok(());
    }
    let result = harness::exec(&bin, &[work.display().to_string(), a.iters.max(2).to_string(), a.warmup.to_string()]);
    if !keep {
        let _ = std::fs::remove_dir_all(&work);
    }
    print_stats(&result?, a.iters.max(2))
}

fn bench_sgemm(n: usize, timing: &[String; 3]) -> Result<(), CliError> {
    if n == 0 {
        return Err(CliError::Usage("--sgemm N needs N ≥ 1".into()));
    }
    let t0 = Instant::now();
    let main = harness::sgemm_main_rs();
    let bin = harness::build_crate("sgemm", &[("src/main.rs", main.as_bytes())], Profile::Bench)?;
    println!("build: {:.1} s", t0.elapsed().as_secs_f64());
    println!("sgemm: {n}x{n}x{n} f32, row-major");
    let mut args = vec![n.to_string()];
    args.extend(timing.iter().cloned());
    print_stats(&harness::exec(&bin, &args)?, 2)
}

/// Print the harness's stats lines; the last one must be `median_ms=…`.
fn print_stats(stdout: &str, iters: usize) -> Result<(), CliError> {
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    let median = lines.last().and_then(|l| l.strip_prefix("median_ms=")).and_then(|v| v.parse::<f64>().ok());
    let Some(median) = median else {
        let why = if iters < 2 { " (it prints stats only for 2 or more timed runs; raise --iters)" } else { "" };
        return Err(CliError::Usage(format!("the harness printed no median{why}: `{}`", stdout.trim())));
    };
    for l in &lines[..lines.len() - 1] {
        println!("{l}");
    }
    println!("median_ms={median:.4}");
    Ok(())
}

/// Deterministic values for an input the user gave no file for.
fn synthetic(name: &str, ty: &ValueType, seed: u64) -> Result<Tensor, CliError> {
    let ValueType::Tensor(tt) = ty else {
        return Err(CliError::Usage(format!("input `{name}` is not a tensor; give it as NAME=FILE")));
    };
    let shape = tt.shape.as_ref().ok_or_else(|| CliError::Usage(format!("input `{name}` has no shape; pin it with --input {name}=DIMS")))?;
    let mut dims = Vec::with_capacity(shape.rank());
    for d in &shape.0 {
        match d {
            Dim::Fixed(n) => dims.push(*n),
            Dim::Sym { name: sym, .. } => {
                return Err(CliError::Usage(format!("input `{name}` has symbolic dim `{sym}`; pin it with --input {name}=DIMS")))
            }
        }
    }
    let n: usize = dims.iter().product();
    let mut rng = SplitMix(0x5EED_0000_0000_0000 ^ seed);
    let mut floats = || (0..n).map(|_| rng.uniform()).collect::<Vec<f32>>();
    let data = match tt.dtype {
        DType::F32 => Data::F32(floats()),
        DType::F64 => Data::F64(floats().into_iter().map(f64::from).collect()),
        DType::F16 => Data::F16(floats().into_iter().map(f16::from_f32).collect()),
        DType::BF16 => Data::BF16(floats().into_iter().map(bf16::from_f32).collect()),
        d => Data::zeros(d, n),
    };
    Ok(Tensor::new(dims, data))
}

/// splitmix64: a tiny seeded generator, enough for benchmark inputs.
struct SplitMix(u64);

impl SplitMix {
    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}
