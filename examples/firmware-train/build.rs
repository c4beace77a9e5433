//! Generates the training module and the batch for the firmware, into OUT_DIR:
//! - `model.rs` + `model.bin`: `$BURNC model.onnx -o $OUT_DIR/model.rs --train <train.flags>`
//!   (BURNC is the path of a burnc binary; tests/firmware_train.rs passes the one it was built
//!   with, and gives `burnc train` the same flags);
//! - `x.f32` / `target.i64`: the data of `x.npy` (float32) and `target.npy` (int64), C order,
//!   as raw little-endian bytes;
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
    println!("cargo:rerun-if-changed=train.flags");
    let burnc = match env::var_os("BURNC") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => fail(
            "set BURNC to the path of a burnc binary, e.g. from the repository root:\n  \
             cargo build --release && cd examples/firmware-train && \
             BURNC=$PWD/../../target/release/burnc cargo run --release",
        ),
    };
    // Regenerate when burnc itself is rebuilt.
    println!("cargo:rerun-if-changed={}", burnc.display());
    let flags = fs::read_to_string(here.join("train.flags")).unwrap_or_else(|e| fail(&format!("train.flags: {e}")));
    let model_rs = out.join("model.rs");
    let output = Command::new(&burnc)
        .arg(here.join("model.onnx"))
        .arg("-o")
        .arg(&model_rs)
        .arg("--train")
        .args(flags.split_whitespace())
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run BURNC={}: {e}", burnc.display())));
    if !output.status.success() {
        fail(&format!(
            "`{} model.onnx -o {} --train {}` failed ({}):\n{}{}",
            burnc.display(),
            model_rs.display(),
            flags.trim(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }

    for (npy, descr, raw) in [("x.npy", "<f4", "x.f32"), ("target.npy", "<i8", "target.i64")] {
        println!("cargo:rerun-if-changed={npy}");
        let data = npy_data(&here.join(npy), descr).unwrap_or_else(|e| fail(&format!("{npy}: {e}")));
        fs::write(out.join(raw), data).expect("write raw data");
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

/// The data bytes of a C-order `.npy` file (any shape) whose dtype is `descr` (`<f4`, `<i8`).
fn npy_data(path: &Path, descr: &str) -> Result<Vec<u8>, String> {
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
    if !header.contains(&format!("'descr': '{descr}'")) || !header.contains("'fortran_order': False") {
        return Err(format!("want {descr} in C order, header is {header}"));
    }
    let data = &b[start + hlen..];
    if data.len() % 4 != 0 {
        return Err("data is not a whole number of elements".into());
    }
    Ok(data.to_vec())
}
