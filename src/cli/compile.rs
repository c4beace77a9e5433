//! `burnc MODEL.onnx -o model.rs [--input NAME=DIMS]... [--const NAME=FILE]... [--weights FILE]`: ahead-of-time
//! compilation to a Rust module plus its weights blob (the work is in `burnc::build`, shared
//! with the build-script API); with `--emit c-lib -o DIR`, a static library and its C header
//! (`burnc::clib`).
use super::weights::WeightsArgs;
use super::CliError;
use super::train::TrainArgs;
use burnc::build::{compile_bounded_to, compile_to, compile_train_to, has_bounded, parse_dims, parse_pin_dims, CompileOptions};
use std::path::{Path, PathBuf};


/// What `burnc MODEL -o` writes.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Emit {
    #[default]
    Rust,
    CLib,
}

/// `--emit c-lib`'s own options.
pub struct CLibArgs<'a> {
    pub name: Option<&'a str>,
    pub triple: Option<&'a str>,
}

fn split<'a>(spec: &'a str, what: &str) -> Result<(&'a str, &'a str), CliError> {
    spec.split_once('=').ok_or_else(|| CliError::Usage(format!("expected {what}, got `{spec}`")))
}

/// `--const NAME=FILE` pairs.
fn parse_consts(consts: &[String]) -> Result<Vec<(String, PathBuf)>, CliError> {
    consts
        .iter()
        .map(|c| {
            let (n, f) = split(c, "NAME=FILE")?;
            Ok((n.to_string(), PathBuf::from(f)))
        })
        .collect()
}

/// `burnc MODEL --emit c-lib -o DIR`: `DIR/lib<name>.a` and `DIR/<name>.h`.
#[allow(clippy::too_many_arguments)]
pub fn compile_c_lib(model: &Path, output: Option<&Path>, pins: &[String], consts: &[String], weights: &WeightsArgs, train: &TrainArgs, options: &CompileOptions, lib: &CLibArgs) -> Result<(), CliError> {
    if train.train {
        return Err(CliError::Usage("--emit c-lib exposes forward only; leave out --train".into()));
    }
    let dir = output.ok_or_else(|| CliError::Usage("--emit c-lib needs -o DIR (the folder for lib<name>.a and <name>.h)".into()))?;
    let name = match lib.name {
        Some(n) => n.to_string(),
        None => burnc::clib::name_from_stem(&model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()),
    };
    let pins = pins
        .iter()
        .map(|p| {
            let (n, d) = split(p, "NAME=DIMS")?;
            Ok((n.to_string(), parse_dims(d).map_err(|_| CliError::Usage(format!("--emit c-lib takes fixed dims only, got `{p}`")))?))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    let consts = parse_consts(consts)?;
    let out = burnc::clib::emit(model, dir, &name, lib.triple, &pins, &consts, weights.spec()?.as_ref(), options)?;
    println!("{}", out.report.memory_line());
    println!("c-lib: {} {}", out.library.display(), out.header.display());
    Ok(())
}

pub fn compile(model: &Path, output: Option<&Path>, pins: &[String], consts: &[String], weights: &WeightsArgs, train: &TrainArgs, options: &CompileOptions) -> Result<(), CliError> {
    let out: PathBuf = match output {
        Some(o) => o.to_path_buf(),
        None => PathBuf::from(format!("{}.rs", model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or("model".into()))),
    };
    let pin_specs = pins
        .iter()
        .map(|p| {
            let (n, d) = split(p, "NAME=DIMS")?;
            Ok((n.to_string(), parse_pin_dims(d)?))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    let bounded = has_bounded(&pin_specs);
    let pins = pins
        .iter()
        .filter(|_| !bounded)
        .map(|p| {
            let (n, d) = split(p, "NAME=DIMS")?;
            Ok((n.to_string(), parse_dims(d)?))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    let consts = parse_consts(consts)?;
    if options.target != burnc::build::Target::Cpu && (train.train || bounded) {
        return Err(CliError::Usage("the GPU targets take static shapes only for now: no bounded dims (`{NAME<=N}`), no --train".into()));
    }
    if train.train && bounded {
        return Err(CliError::Usage("bounded dims (`{NAME<=N}`) are not supported with --train yet; pin them with numbers".into()));
    }
    if train.train {
        let gen = compile_train_to(model, &out, &pins, &consts, weights.spec()?.as_ref(), &train.spec()?, None)?;
        println!("{}", gen.memory_line());
        return Ok(());
    }
    if bounded {
        // Bounded dims (`{h<=640}`): one module sized for the bounds, dims given at run time.
        let report = compile_bounded_to(model, &out, &pin_specs, &consts, weights.spec()?.as_ref())?;
        println!("{}", report.memory_line());
        return Ok(());
    }
    let report = compile_to(model, &out, &pins, &consts, weights.spec()?.as_ref(), options)?;
    println!("{}", report.memory_line());
    Ok(())
}
