//! Control flow in generated code: a Loop whose trip count and exit condition are known only
//! at run time, an If on a run-time condition, a Scan over a non-leading axis in reverse.
//! Each runs through `burnc run --codegen` on several inputs and must agree with values
//! computed here by hand (and with the interpreter).
mod common;
use burnc_compiler::interp::RtValue;
use burnc_compiler::{Data, Tensor};
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};
use common::{close, numbered, root};
use std::path::{Path, PathBuf};
use std::process::Command;

enum In {
    F32(Vec<usize>, Vec<f32>),
    I64(i64),
    Bool(bool),
}

/// A minimal .npy writer (version 1.0, little-endian, C order).
fn write_npy(path: &Path, v: &In) {
    let (descr, shape, bytes): (&str, Vec<usize>, Vec<u8>) = match v {
        In::F32(s, d) => ("<f4", s.clone(), d.iter().flat_map(|x| x.to_le_bytes()).collect()),
        In::I64(x) => ("<i8", vec![], x.to_le_bytes().to_vec()),
        In::Bool(b) => ("|b1", vec![], vec![*b as u8]),
    };
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_s = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_s}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(bytes);
    std::fs::write(path, out).expect("write npy");
}

fn run(model: &str, inputs: &[(&str, In)], codegen: bool, tag: &str) -> Vec<RtValue> {
    let dir: PathBuf = root().join("target/codegen-control-flow").join(tag);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_burnc"));
    cmd.arg("run").arg(root().join("tests/models").join(model));
    if codegen {
        cmd.arg("--codegen");
    }
    for (name, v) in inputs {
        let p = dir.join(format!("{name}.npy"));
        write_npy(&p, v);
        cmd.arg("--input").arg(format!("{name}={}", p.display()));
    }
    let out = dir.join("out");
    let o = cmd.arg("-o").arg(&out).output().expect("run burnc");
    assert!(o.status.success(), "{model} ({tag}): {}", String::from_utf8_lossy(&o.stderr));
    numbered(&out, "output_")
        .iter()
        .map(|p| decode_value(&std::fs::read(p).expect("read"), ValueKindHint::Tensor).expect("decode"))
        .collect()
}

fn check(model: &str, inputs: &[(&str, In)], want: &[Tensor], tag: &str) {
    let cg = run(model, inputs, true, &format!("{tag}-cg"));
    let it = run(model, inputs, false, &format!("{tag}-interp"));
    assert_eq!(cg.len(), want.len(), "{tag}: output count");
    for (k, w) in want.iter().enumerate() {
        let w = RtValue::Tensor(w.clone());
        close(&cg[k], &w, 1e-6, 1e-6).unwrap_or_else(|e| panic!("{tag}: codegen output {k}: {e}"));
        close(&it[k], &w, 1e-6, 1e-6).unwrap_or_else(|e| panic!("{tag}: interpreter output {k}: {e}"));
    }
}

#[test]
fn loop_with_run_time_trip_count_and_condition() {
    let x = [0.5f32, -1.0, 2.0];
    // (M, limit): stops on the trip count, on the condition, or never runs.
    for (m, limit) in [(4i64, 1e9f32), (50, 30.0), (0, 1e9), (7, -1.0)] {
        let (mut y, mut n) = ([0f32; 3], 0i64);
        let mut cond = true;
        while cond && n < m {
            for (v, &xv) in y.iter_mut().zip(&x) {
                *v = *v * 1.5 + xv;
            }
            n += 1;
            cond = y.iter().sum::<f32>() < limit;
        }
        let want = [Tensor::new(vec![3], Data::F32(y.to_vec())), Tensor::new(vec![], Data::I64(vec![n]))];
        let inputs = [("M", In::I64(m)), ("limit", In::F32(vec![], vec![limit])), ("x", In::F32(vec![3], x.to_vec()))];
        check("loop_runtime.onnx", &inputs, &want, &format!("loop-{m}-{limit}"));
    }
}

#[test]
fn if_on_a_run_time_condition() {
    let x: Vec<f32> = vec![-1.0, 0.5, 2.0, -0.25, 0.0, 1.0];
    for flag in [true, false] {
        let y: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let b = if flag { v.max(0.0) + i as f32 / 4.0 } else { -v };
                b * v.exp()
            })
            .collect();
        let inputs = [("flag", In::Bool(flag)), ("x", In::F32(vec![2, 3], x.clone()))];
        check("if_runtime.onnx", &inputs, &[Tensor::new(vec![2, 3], Data::F32(y))], &format!("if-{flag}"));
    }
}

#[test]
fn scan_over_axis_one_in_reverse() {
    let x: Vec<f32> = (0..8).map(|i| i as f32 * 0.5 - 1.0).collect();
    let s0 = [0.25f32, -2.0];
    let mut s = s0;
    let mut y = vec![0f32; 8];
    // The input is read from the last column back; the output direction is forward, so the
    // t-th iteration's value goes to column t.
    for t in 0..4 {
        let col = 3 - t;
        for r in 0..2 {
            s[r] += x[r * 4 + col];
            y[r * 4 + t] = 2.0 * s[r];
        }
    }
    let want = [Tensor::new(vec![2], Data::F32(s.to_vec())), Tensor::new(vec![2, 4], Data::F32(y))];
    let inputs = [("s0", In::F32(vec![2], s0.to_vec())), ("x", In::F32(vec![2, 4], x))];
    check("scan_axes.onnx", &inputs, &want, "scan");
}
