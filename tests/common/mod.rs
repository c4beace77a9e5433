//! Helpers shared by the conformance tests (interpreter and generated code).
#![allow(dead_code)]
use burnc_compiler::interp::RtValue;
use burnc_compiler::ir::ValueType;
use burnc_compiler::tensor::Tensor;
use burnc_frontends::onnx::values::ValueKindHint;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn data_dir() -> PathBuf {
    if let Ok(d) = std::env::var("BURNC_CONFORMANCE_DATA") {
        return PathBuf::from(d);
    }
    let dir = root().join("conformance-data");
    for script in ["scripts/gen_conformance.py", "scripts/gen_light_random.py"] {
        let status = Command::new("python3")
            .arg(root().join(script))
            .arg(&dir)
            .status()
            .unwrap_or_else(|e| panic!("cannot run python3 {script}: {e}"));
        assert!(status.success(), "{script} failed: {status}");
    }
    dir
}

/// `"key": value` from a small JSON file (meta.json), without a JSON dependency.
pub fn meta_field(meta: &str, key: &str) -> Option<String> {
    let k = format!("\"{key}\"");
    let rest = &meta[meta.find(&k)? + k.len()..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let end = rest.find([',', '}', '\n']).unwrap_or(rest.len());
    Some(rest[..end].trim().trim_matches('"').to_string())
}

pub fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let i = n.strip_prefix(prefix)?.strip_suffix(".pb")?.parse().ok()?;
                    Some((i, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

pub fn hint(t: &ValueType) -> ValueKindHint {
    match t {
        ValueType::Sequence(_) => ValueKindHint::Sequence,
        ValueType::Optional(_) => ValueKindHint::Optional,
        _ => ValueKindHint::Tensor,
    }
}

pub fn close_tensor(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {} != expected {}", got.dtype(), want.dtype()));
    }
    if got.shape != want.shape {
        return Err(format!("shape {:?} != expected {:?}", got.shape, want.shape));
    }
    if want.dtype().is_float() {
        let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
            if !ok {
                return Err(format!("element {i}: {a} != expected {b}"));
            }
        }
    } else if got.data != want.data {
        return Err("values differ".into());
    }
    Ok(())
}

pub fn close(got: &RtValue, want: &RtValue, rtol: f64, atol: f64) -> Result<(), String> {
    match (got, want) {
        (RtValue::Tensor(g), RtValue::Tensor(w)) => close_tensor(g, w, rtol, atol),
        (RtValue::Sequence(g, _), RtValue::Sequence(w, _)) => {
            if g.len() != w.len() {
                return Err(format!("sequence length {} != expected {}", g.len(), w.len()));
            }
            g.iter().zip(w).try_for_each(|(a, b)| close_tensor(a, b, rtol, atol))
        }
        (RtValue::Optional(g), RtValue::Optional(w)) => match (g, w) {
            (None, None) => Ok(()),
            (Some(a), Some(b)) => close(a, b, rtol, atol),
            _ => Err("optional presence differs".into()),
        },
        _ => Err("value kind differs (tensor/sequence/optional)".into()),
    }
}

