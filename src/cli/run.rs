//! `burnc run MODEL [--input FILE]... [--input NAME=FILE]... [-o DIR]`: the reference interpreter.
use super::inputs::read_value;
use super::CliError;
use burnc_compiler::interp::{self, RtValue};
use burnc_compiler::tensor::Tensor;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct RunArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// An input: FILE (taken in graph input order) or NAME=FILE; `.pb` or `.npy`.
    #[arg(long = "input", short = 'i', value_name = "[NAME=]FILE")]
    pub inputs: Vec<String>,
    /// Write each output to DIR/output_<i>.pb.
    #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Run through generated code (built in a cache folder) instead of the interpreter.
    #[arg(long)]
    pub codegen: bool,
    /// With --codegen: apply the fusions `burnc MODEL -o` applies (BatchNorm folded into conv
    /// weights, …), which change rounding. Without it, generated code rounds exactly as the
    /// interpreter does, so the two can be compared bit for bit.
    #[arg(long, requires = "codegen")]
    pub fuse: bool,
    /// With --codegen: declare every dim of every input a named dim bounded by F × its size,
    /// compile once at the bounds and run at the inputs' sizes (the bounded-dims path).
    #[arg(long, value_name = "F", requires = "codegen")]
    pub bound: Option<usize>,
    /// With --codegen: where the generated module runs, `cpu` or `wgpu` (the WGSL kernels on
    /// the first Vulkan, Metal or DX12 adapter; static shapes only).
    #[arg(long, value_name = "TARGET", default_value = "cpu", requires = "codegen")]
    pub target: super::codegen_flags::TargetArg,
    #[command(flatten)]
    pub weights: super::weights::WeightsArgs,
}

pub fn run(a: RunArgs) -> Result<(), CliError> {
    let mut model = burnc_frontends::onnx::load(&a.model)?;
    a.weights.apply(&mut model.graph)?;
    let g = &model.graph;
    let mut slots: Vec<Option<RtValue>> = vec![None; g.inputs.len()];
    let mut next_positional = 0;
    for spec in &a.inputs {
        // NAME=FILE when NAME is one of the inputs; otherwise the whole thing is a path.
        let named = spec.split_once('=').and_then(|(n, f)| g.inputs.iter().position(|&i| g.value(i).name == n).map(|p| (p, f)));
        let (pos, file) = match named {
            Some((p, f)) => (p, f.to_string()),
            None => {
                while next_positional < slots.len() && slots[next_positional].is_some() {
                    next_positional += 1;
                }
                if next_positional >= slots.len() {
                    return Err(CliError::Usage(format!("too many inputs: the model takes {}", slots.len())));
                }
                (next_positional, spec.clone())
            }
        };
        let id = g.inputs[pos];
        let v = read_value(Path::new(&file), &g.value(id).ty)?;
        check_input(&g.value(id).name, &g.value(id).ty, &v)?;
        slots[pos] = Some(v);
    }
    let mut values = Vec::with_capacity(slots.len());
    for (i, s) in slots.into_iter().enumerate() {
        values.push(s.ok_or_else(|| CliError::Usage(format!("missing input `{}`", g.value(g.inputs[i]).name)))?);
    }
    use super::codegen_flags::TargetArg;
    if a.target == TargetArg::Cuda {
        return Err(CliError::Usage("`burnc run --target cuda` is not there: the CUDA modules run through `burnc bench --target cuda` and scripts/gpu_check.sh".into()));
    }
    if a.target == TargetArg::Wgpu && (a.bound.is_some() || a.fuse) {
        return Err(CliError::Usage("--target wgpu takes static shapes and its own fusions: no --bound, no --fuse".into()));
    }
    let outputs = if a.codegen && a.target == TargetArg::Wgpu {
        let weights = a.weights.weights.as_ref().map(|w| format!(" weights={}", w.canonicalize().unwrap_or(w.clone()).display())).unwrap_or_default();
        let key = format!("{} wgpu{weights}", a.model.canonicalize().unwrap_or(a.model.clone()).display());
        let opts = burnc_compiler::codegen::CodegenOptions { weights_file: "model.bin".into(), source_name: a.model.display().to_string(), ..Default::default() };
        let work = burnc::harness::cache_dir().join("runs").join(format!("{}", std::process::id()));
        let outs = burnc::harness::run_wgpu(g, &values, &opts, &key, &work);
        let _ = std::fs::remove_dir_all(&work);
        outs?
    } else if let (true, Some(factor)) = (a.codegen, a.bound) {
        use burnc::harness::bounded::{build_bounded, generate_bounded_for, run_bounded};
        let opts = burnc_compiler::codegen::CodegenOptions {
            weights_file: "model.bin".into(),
            source_name: a.model.display().to_string(),
            fuse: a.fuse,
            ..Default::default()
        };
        let weights = a.weights.weights.as_ref().map(|w| format!(" weights={}", w.canonicalize().unwrap_or(w.clone()).display())).unwrap_or_default();
        let key = format!("{} bound={factor}{}{weights}", a.model.canonicalize().unwrap_or(a.model.clone()).display(), if a.fuse { " (fused)" } else { "" });
        let prepared = generate_bounded_for(g, &values, factor, &opts)?;
        let bin = build_bounded(&prepared, &key)?;
        let work = burnc::harness::cache_dir().join("runs").join(format!("{}", std::process::id()));
        let outs = run_bounded(&bin, &prepared, &work);
        let _ = std::fs::remove_dir_all(&work);
        outs?
    } else if a.codegen {
        // Other weights make another program: key the build cache on them too.
        let weights = a.weights.weights.as_ref().map(|w| format!(" weights={}", w.canonicalize().unwrap_or(w.clone()).display())).unwrap_or_default();
        let key = format!("{}{}{weights}", a.model.canonicalize().unwrap_or(a.model.clone()).display(), if a.fuse { " (fused)" } else { "" });
        let prepared = burnc::harness::generate_for(g, &values, &a.model.display().to_string(), a.fuse)?;
        let bin = burnc::harness::build(&prepared.gen, &key)?;
        let work = burnc::harness::cache_dir().join("runs").join(format!("{}", std::process::id()));
        let outs = burnc::harness::run(&bin, &prepared, &work);
        let _ = std::fs::remove_dir_all(&work);
        outs?
    } else {
        interp::run(g, values)?
    };
    if let Some(dir) = &a.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| CliError::File { path: dir.display().to_string(), reason: e.to_string() })?;
    }
    for (i, (out, &id)) in outputs.iter().zip(&g.outputs).enumerate() {
        let name = &g.value(id).name;
        if let Some(dir) = &a.output_dir {
            let path = dir.join(format!("output_{i}.pb"));
            let bytes = burnc_frontends::onnx::values::encode_value(name, out);
            std::fs::write(&path, bytes).map_err(|e| CliError::File { path: path.display().to_string(), reason: e.to_string() })?;
        }
        // Names come from the model: escaped, so one output is one line and a name cannot
        // send control sequences to the terminal.
        println!("{}", summary(&burnc_compiler::codegen::names::text(name), out));
    }
    Ok(())
}

/// Refuse inputs whose dtype or fixed dims contradict the model's declaration.
pub(super) fn check_input(name: &str, declared: &burnc_compiler::ir::ValueType, v: &RtValue) -> Result<(), CliError> {
    use burnc_compiler::ir::{Dim, ValueType};
    if let (ValueType::Tensor(tt), RtValue::Tensor(t)) = (declared, v) {
        if tt.dtype != t.dtype() {
            return Err(CliError::Usage(format!("input `{name}` must be {}, the file holds {}", tt.dtype, t.dtype())));
        }
        if let Some(s) = &tt.shape {
            let ok = s.rank() == t.rank() && s.0.iter().zip(&t.shape).all(|(d, &n)| !matches!(d, Dim::Fixed(f) if *f != n));
            if !ok {
                return Err(CliError::Usage(format!("input `{name}` must have shape {s}, the file holds {:?}", t.shape)));
            }
        }
    }
    Ok(())
}

fn few_values(t: &Tensor) -> String {
    let shown: Vec<String> = match &t.data {
        // Quoted and escaped: the text is the model's, not ours.
        burnc_compiler::Data::Str(v) => v.iter().take(6).map(|s| format!("{s:?}")).collect(),
        _ => t.to_f64_vec().iter().take(6).map(|x| format!("{x:.6}")).collect(),
    };
    let more = if t.numel() > 6 { ", …" } else { "" };
    format!("[{}{more}]", shown.join(", "))
}

fn summary(name: &str, v: &RtValue) -> String {
    match v {
        RtValue::Tensor(t) => format!("{name}: {} {:?} {}", t.dtype(), t.shape, few_values(t)),
        RtValue::Sequence(items, _) => format!("{name}: sequence of {} tensors", items.len()),
        RtValue::Optional(None) => format!("{name}: empty optional"),
        RtValue::Optional(Some(inner)) => format!("{name}: optional {}", summary("", inner).trim_start_matches(": ")),
    }
}
