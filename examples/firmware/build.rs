//! Generates the model and the input for the firmware, into OUT_DIR:
//! - `model.rs` + `model.bin`: `$BURNC model.onnx -o $OUT_DIR/model.rs` (BURNC is the path of a
//!   burnc binary; tests/firmware.rs passes the one it was built with);
//! - `input.f32`: the data of `input.npy` (float32, C order) as raw little-endian f32;
//! - `memory.x` for cortex-m-rt's `link.x`.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let here = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));

    fs::copy(here.join("memory.x"), out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");

    println!("cargo:rerun-if-env-changed=BURNC");
    println!("cargo:rerun-if-changed=model.onnx");
    let burnc = match env::var_os("BURNC") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => fail(
            "set BURNC to the path of a burnc binary, e.g. from the repository root:\n  \
             cargo build --release && cd examples/firmware && \
             BURNC=$PWD/../../target/release/burnc cargo run --release",
        ),
    };
    // Regenerate when burnc itself is rebuilt.
    println!("cargo:rerun-if-changed={}", burnc.display());
    let model_rs = out.join("model.rs");
    let output = Command::new(&burnc)
        .arg(here.join("model.onnx"))
        .arg("-o")
        .arg(&model_rs)
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run BURNC={}: {e}", burnc.display())));
    if !output.status.success() {
        fail(&format!(
            "`{} model.onnx -o {}` failed ({}):\n{}{}",
            burnc.display(),
            model_rs.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }

    println!("cargo:rerun-if-changed=input.npy");
    let data = npy_f32_data(&here.join("input.npy")).unwrap_or_else(|e| fail(&format!("input.npy: {e}")));
    fs::write(out.join("input.f32"), data).expect("write input.f32");
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

/// The data bytes of a little-endian float32, C-order `.npy` file (any shape).
fn npy_f32_data(path: &Path) -> Result<Vec<u8>, String> {
    let b = fs::read(path).map_err(|e| e.to_string())?;
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err("not an .npy file".into());
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = b.get(start..start + hlen).ok_or("truncated header")?;
    let header = std::str::from_utf8(header).map_err(|e| e.to_string())?;
    if !header.contains("'descr': '<f4'") || !header.contains("'fortran_order': False") {
        return Err(format!("want little-endian float32 in C order, header is {header}"));
    }
    let data = &b[start + hlen..];
    if data.len() % 4 != 0 {
        return Err("data is not a whole number of f32".into());
    }
    Ok(data.to_vec())
}
