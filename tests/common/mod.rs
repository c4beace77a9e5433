//! Helpers shared by the conformance tests (interpreter and generated code).
#![allow(dead_code)]
use burnc_compiler::interp::RtValue;
use burnc_compiler::ir::ValueType;
use burnc_compiler::tensor::Tensor;
use burnc_frontends::onnx::values::ValueKindHint;
use std::path::{Path, PathBuf};
use std::process::Command;

pub mod batch;
pub mod lean;
pub mod wgpu;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn data_dir() -> PathBuf {
    if let Ok(d) = std::env::var("BURNC_CONFORMANCE_DATA") {
        return PathBuf::from(d);
    }
    let dir = root().join("conformance-data");
    // Tests run in parallel (threads and test binaries): one generates at a time, the others
    // wait and then find the data stamped up to date.
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let lock = std::fs::File::create(dir.join(".generate.lock")).unwrap_or_else(|e| panic!("cannot create the data lock: {e}"));
    lock.lock().unwrap_or_else(|e| panic!("cannot lock {}: {e}", dir.display()));
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


/// An entry of tests/conformance/machine_dependent.tsv: output `output` of a case is defined
/// only where input `input`, truncated toward zero, is finite and inside the output's
/// integer range (a float cast to an integer type out of range is undefined in ONNX, so the
/// expected file holds whatever the generating CPU gave).
#[derive(Debug, Clone)]
pub struct InRangeOnly {
    pub output: usize,
    pub input: usize,
    pub reason: String,
}

/// tests/conformance/machine_dependent.tsv, by case name. Panics on a malformed line: the
/// file is ours, and a rule silently dropped would fail the case on some machines only.
pub fn machine_dependent() -> std::collections::HashMap<String, InRangeOnly> {
    let path = root().join("tests/conformance/machine_dependent.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rules = std::collections::HashMap::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || panic!("{}:{}: expected `case<TAB>output<TAB>in-range INPUT<TAB>reason`, got `{line}`", path.display(), n + 1);
        if f.len() != 4 {
            bad();
        }
        let output = f[1].parse().unwrap_or_else(|_| bad());
        let input = f[2].strip_prefix("in-range ").and_then(|i| i.parse().ok()).unwrap_or_else(|| bad());
        rules.insert(f[0].to_string(), InRangeOnly { output, input, reason: f[3].to_string() });
    }
    rules
}

/// The integer range of an integer dtype (small ones included), as f64 bounds.
fn int_range(d: burnc_compiler::ir::DType) -> Option<(f64, f64)> {
    use burnc_compiler::ir::DType::*;
    Some(match d {
        I2 => (-2.0, 1.0),
        U2 => (0.0, 3.0),
        I4 => (-8.0, 7.0),
        U4 => (0.0, 15.0),
        I8 => (i8::MIN as f64, i8::MAX as f64),
        U8 => (0.0, u8::MAX as f64),
        I16 => (i16::MIN as f64, i16::MAX as f64),
        U16 => (0.0, u16::MAX as f64),
        I32 => (i32::MIN as f64, i32::MAX as f64),
        U32 => (0.0, u32::MAX as f64),
        I64 => (i64::MIN as f64, i64::MAX as f64),
        U64 => (0.0, u64::MAX as f64),
        _ => return None,
    })
}

/// Compare `got` with `want` only where `input` (same element count) holds a value whose cast
/// to `want`'s integer dtype is defined; Ok(number of elements skipped).
pub fn close_in_range(got: &RtValue, want: &RtValue, input: &RtValue) -> Result<usize, String> {
    let (RtValue::Tensor(g), RtValue::Tensor(w), RtValue::Tensor(x)) = (got, want, input) else {
        return Err("in-range rule: output and input must be tensors".into());
    };
    if g.dtype() != w.dtype() {
        return Err(format!("dtype {} != expected {}", g.dtype(), w.dtype()));
    }
    if g.shape != w.shape {
        return Err(format!("shape {:?} != expected {:?}", g.shape, w.shape));
    }
    let (lo, hi) = int_range(w.dtype()).ok_or_else(|| format!("in-range rule: output dtype {} is not an integer type", w.dtype()))?;
    let xs = x.to_f64_vec();
    if xs.len() != w.numel() {
        return Err(format!("in-range rule: input has {} elements, output {}", xs.len(), w.numel()));
    }
    let (gv, wv) = (g.to_i64_vec().ok_or("cannot read our output as integers")?, w.to_i64_vec().ok_or("cannot read expected output as integers")?);
    let mut skipped = 0;
    for (i, ((a, b), v)) in gv.iter().zip(&wv).zip(&xs).enumerate() {
        let t = v.trunc();
        if !v.is_finite() || t < lo || t > hi {
            skipped += 1;
        } else if a != b {
            return Err(format!("element {i}: {a} != expected {b} (input {v})"));
        }
    }
    Ok(skipped)
}

/// A node case of the conformance data: its model, first test set's inputs and expected
/// outputs, decoded by the model's declared types.
pub struct NodeCase {
    pub model: burnc_frontends::onnx::Model,
    pub inputs: Vec<RtValue>,
    pub expected: Vec<RtValue>,
}

pub fn node_case(dir: &Path) -> Result<NodeCase, String> {
    use burnc_frontends::onnx::values::decode_value;
    let model = burnc_frontends::onnx::load(&dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let g = &model.graph;
    let set = dir.join("test_data_set_0");
    let mut inputs = Vec::new();
    for (p, &id) in numbered(&set, "input_").iter().zip(&g.inputs) {
        let b = std::fs::read(p).map_err(|e| e.to_string())?;
        inputs.push(decode_value(&b, hint(&g.value(id).ty)).map_err(|e| e.to_string())?);
    }
    let mut expected = Vec::new();
    for (p, &id) in numbered(&set, "output_").iter().zip(&g.outputs) {
        let b = std::fs::read(p).map_err(|e| e.to_string())?;
        expected.push(decode_value(&b, hint(&g.value(id).ty)).map_err(|e| e.to_string())?);
    }
    Ok(NodeCase { model, inputs, expected })
}
