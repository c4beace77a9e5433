//! `burnc MODEL --emit c-lib -o DIR`: the model as a C library. The CPU module (the same one
//! `burnc MODEL -o` writes) is wrapped in a small `no_std` Rust crate whose `extern "C"`
//! functions take raw pointers, built as a `staticlib` for the requested target with cargo,
//! and described by a C header:
//!
//! - `DIR/lib<name>.a`: the module, its kernels and its weights (a linked object where burnc
//!   writes one for the target, as `Build` does; else embedded);
//! - `DIR/<name>.h`: sizes, input and output names, dtypes and shapes as constants, the
//!   functions `<name>_arena_bytes`, `<name>_weights_bytes`, `<name>_forward` and
//!   `<name>_forward_with_weights`, and their error codes.
//!
//! The crate lives in `DIR/.build/` (kept, so a second run rebuilds only what changed).
mod header;
mod wrapper;

use crate::build::{compile_to, CompileOptions, Report, Weights};
use crate::build::file_err;
use crate::BuildError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What [`emit`] wrote.
#[derive(Debug)]
pub struct CLib {
    pub library: PathBuf,
    pub header: PathBuf,
    pub report: Report,
}

/// The C prefix of a library: `name` as given, which must be a C identifier.
pub fn check_name(name: &str) -> Result<(), BuildError> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok || name.len() > 64 {
        return Err(BuildError::Invalid(format!("bad library name `{}`: give a C identifier (letters, digits, `_`; at most 64)", burnc_compiler::codegen::names::text(name))));
    }
    Ok(())
}

/// A C identifier from a file stem (`mnist-cnn` → `mnist_cnn`).
pub fn name_from_stem(stem: &str) -> String {
    let s: String = stem.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    let s = s.trim_matches('_').to_string();
    match s.chars().next() {
        None => "model".into(),
        Some(c) if c.is_ascii_digit() => format!("m_{s}"),
        Some(_) => s.chars().take(64).collect(),
    }
}

/// Compile `model` and build `DIR/lib<name>.a` and `DIR/<name>.h` for `triple` (the host's when
/// `None`), with the `cargo` at `$CARGO` (or on the `PATH`).
#[allow(clippy::too_many_arguments)]
pub fn emit(
    model: &Path,
    dir: &Path,
    name: &str,
    triple: Option<&str>,
    pins: &[(String, Vec<usize>)],
    consts: &[(String, PathBuf)],
    weights: Option<&Weights>,
    options: &CompileOptions,
) -> Result<CLib, BuildError> {
    check_name(name)?;
    if options.target != crate::build::Target::Cpu {
        return Err(BuildError::Invalid("--emit c-lib builds the CPU module; leave out --target".into()));
    }
    let work = dir.join(".build");
    let src = work.join("src");
    std::fs::create_dir_all(&src).map_err(|e| file_err(&src, e))?;
    // The weights as a linked object where burnc writes one for the target (rustc then never
    // embeds them; the archive goes into the library as a bundled native library).
    let object_triple = match triple {
        Some(t) => Some(t.to_string()),
        None => host_triple(),
    }
    .filter(|t| crate::weights_object::format_for(t).is_some());
    let link = object_triple.as_ref().map(|_| crate::build::LinkedWeights::library(format!("{name}_weights"), crate::weights_object::symbol("clib", name)));
    let options = CompileOptions { link: link.clone(), ..options.clone() };
    let report = compile_to(model, &src.join("model.rs"), pins, consts, weights, &options)?;
    if let (Some(l), Some(t)) = (&link, &object_triple) {
        crate::weights_object::archive_of_blob(&src, l, &report.weights, t)?;
    }
    let (inputs, outputs) = (&report.inputs, &report.outputs);
    let crate_name = format!("burnc_clib_{name}");
    write(&work.join("Cargo.toml"), &wrapper::manifest(&crate_name))?;
    write(&work.join("build.rs"), wrapper::BUILD_RS)?;
    write(&src.join("lib.rs"), &wrapper::source(name, inputs, outputs)?)?;
    let header = dir.join(format!("{name}.h"));
    let source_name = model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    write(&header, &header::header(name, &source_name, &report)?)?;

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = std::env::var_os("BURNC_CLIB_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| work.join("target"));
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "--release", "--quiet", "--manifest-path"]).arg(work.join("Cargo.toml")).arg("--target-dir").arg(&target_dir);
    if let Some(t) = triple {
        cmd.args(["--target", t]);
    }
    // The library is built for the target alone, with no flags meant for the caller's build.
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET"] {
        cmd.env_remove(var);
    }
    let out = cmd.output().map_err(|e| BuildError::Invalid(format!("cannot run {}: {e}", Path::new(&cargo).display())))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let hint = match triple {
            Some(t) if stderr.contains("may not be installed") || stderr.contains("can't find crate for `core`") => format!("\n(install the target: rustup target add {t})"),
            _ => String::new(),
        };
        return Err(BuildError::Invalid(format!("building the C library failed ({}):\n{stderr}{hint}", out.status)));
    }
    let built = target_dir.join(triple.unwrap_or("")).join("release").join(format!("lib{crate_name}.a"));
    let library = dir.join(format!("lib{name}.a"));
    std::fs::copy(&built, &library).map_err(|e| file_err(&built, e))?;
    Ok(CLib { library, header, report })
}

/// The host's target triple, as rustc names it.
fn host_triple() -> Option<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| l.strip_prefix("host: ")).map(|t| t.trim().to_string())
}

fn write(path: &Path, text: &str) -> Result<(), BuildError> {
    crate::build::write_if_changed(path, text.as_bytes())
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_c_identifiers() {
        assert!(check_name("mnist_cnn").is_ok());
        for bad in ["", "1x", "a-b", "a b", "é", "x;y", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(name_from_stem("MNIST-cnn.v2"), "mnist_cnn_v2");
        assert_eq!(name_from_stem("3d"), "m_3d");
        assert_eq!(name_from_stem("---"), "model");
        assert!(check_name(&name_from_stem("../../\u{202e}evil\"*/")).is_ok());
    }
}
