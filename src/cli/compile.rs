//! `burnc MODEL.onnx -o model.rs [--input NAME=DIMS]... [--const NAME=FILE]...`: ahead-of-time
//! compilation to a Rust module plus its weights blob.
use super::inputs::{pin_inputs, read_value};
use super::CliError;
use burnc_compiler::codegen::{self, CodegenOptions, Generated};
use burnc_compiler::interp::RtValue;
use burnc_compiler::ir::{Graph, ValueKind};
use std::path::{Path, PathBuf};

/// Bake `--const NAME=FILE` inputs into the graph as constants.
pub fn bake_consts(g: &mut Graph, consts: &[String]) -> Result<(), CliError> {
    for spec in consts {
        let (name, file) = spec.split_once('=').ok_or_else(|| CliError::Usage(format!("expected NAME=FILE, got `{spec}`")))?;
        let pos = g
            .inputs
            .iter()
            .position(|&i| g.value(i).name == name)
            .ok_or_else(|| CliError::Usage(format!("the model has no input named `{name}`")))?;
        let id = g.inputs[pos];
        let v = read_value(Path::new(file), &g.value(id).ty)?;
        let RtValue::Tensor(t) = v else {
            return Err(CliError::Usage(format!("--const `{name}`: only tensors can be constants")));
        };
        bake_tensor(g, pos, t);
    }
    Ok(())
}

/// Turn graph input number `pos` into a constant.
pub fn bake_tensor(g: &mut Graph, pos: usize, t: burnc_compiler::Tensor) {
    let id = g.inputs.remove(pos);
    let ty = burnc_compiler::ir::ValueType::Tensor(burnc_compiler::ir::TensorType {
        dtype: t.dtype(),
        shape: Some(burnc_compiler::ir::Shape::fixed(&t.shape)),
    });
    let v = g.value_mut(id);
    v.ty = ty;
    v.kind = ValueKind::Const(t);
}

/// Load, pin, bake, prepare and generate.
pub fn generate(model: &Path, pins: &[String], consts: &[String], weights_file: &str) -> Result<Generated, CliError> {
    let m = burnc_frontends::onnx::load(model)?;
    let mut g = m.graph;
    pin_inputs(&mut g, pins)?;
    bake_consts(&mut g, consts)?;
    burnc_compiler::passes::prepare(&mut g)?;
    let opts = CodegenOptions {
        weights_file: weights_file.to_string(),
        source_name: model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        ..Default::default()
    };
    Ok(codegen::generate(&g, &opts)?)
}

pub fn memory_line(gen: &Generated) -> String {
    format!(
        "memory: arena_bytes={} lower_bound_bytes={} weights_bytes={}",
        gen.arena_bytes, gen.lower_bound_bytes, gen.weights_bytes
    )
}

pub fn compile(model: &Path, output: Option<&Path>, pins: &[String], consts: &[String]) -> Result<(), CliError> {
    let out: PathBuf = match output {
        Some(o) => o.to_path_buf(),
        None => PathBuf::from(format!("{}.rs", model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or("model".into()))),
    };
    let bin = out.with_extension("bin");
    let bin_name = bin.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| "model.bin".into());
    let gen = generate(model, pins, consts, &bin_name)?;
    let write = |p: &Path, bytes: &[u8]| std::fs::write(p, bytes).map_err(|e| CliError::File { path: p.display().to_string(), reason: e.to_string() });
    write(&out, gen.source.as_bytes())?;
    write(&bin, &gen.weights)?;
    println!("{}", memory_line(&gen));
    Ok(())
}
