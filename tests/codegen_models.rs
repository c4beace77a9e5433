//! The nine light models (stock and with random weights) through generated code agree with
//! the interpreter to 1e-5 relative: `burnc run --codegen` vs `burnc run`, same inputs. With
//! `--fuse` (what `burnc MODEL -o` generates: BatchNorm folded into weights, which changes
//! rounding) they match the suites' reference outputs (onnx's runner for the stock models,
//! onnxruntime for the random-weight ones) as the conformance test compares them.
mod common;
use burnc_compiler::interp::RtValue;
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};
use common::{data_dir, numbered};
use std::path::Path;
use std::process::Command;

fn outputs(dir: &Path) -> Vec<RtValue> {
    numbered(dir, "output_")
        .iter()
        .map(|p| decode_value(&std::fs::read(p).expect("read output"), ValueKindHint::Tensor).expect("decode output"))
        .collect()
}

fn run(case: &Path, codegen: bool, fuse: bool, out: &Path) -> Result<(), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_burnc"));
    cmd.arg("run");
    if codegen {
        cmd.arg("--codegen");
    }
    if fuse {
        cmd.arg("--fuse");
    }
    cmd.arg(case.join("model.onnx"));
    for i in numbered(&case.join("test_data_set_0"), "input_") {
        cmd.arg("--input").arg(i);
    }
    let o = cmd.arg("-o").arg(out).output().map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).trim().to_string())
    }
}

#[test]
fn light_models_codegen_matches_interpreter() {
    let data = data_dir();
    let scratch = common::root().join("target/codegen-models");
    let mut failures = Vec::new();
    let mut checked = 0;
    // BURNC_CONFORMANCE_FILTER=NAME: only the models whose folder name contains NAME.
    let filter = std::env::var("BURNC_CONFORMANCE_FILTER").ok();
    for suite in ["light", "light_random"] {
        let Ok(rd) = std::fs::read_dir(data.join(suite)) else { continue };
        let mut cases: Vec<_> = rd.flatten().map(|e| e.path()).filter(|p| p.join("model.onnx").exists()).collect();
        cases.sort();
        for case in cases {
            let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
                continue;
            }
            let (a, b, c) = (scratch.join(format!("{name}-interp")), scratch.join(format!("{name}-codegen")), scratch.join(format!("{name}-fused")));
            if let Err(e) = run(&case, false, false, &a).and_then(|_| run(&case, true, false, &b)).and_then(|_| run(&case, true, true, &c)) {
                failures.push(format!("{name}: {e}"));
                continue;
            }
            let (want, got) = (outputs(&a), outputs(&b));
            if want.len() != got.len() {
                failures.push(format!("{name}: {} outputs vs {}", got.len(), want.len()));
                continue;
            }
            let mut worst = 0.0f64;
            for (g, w) in got.iter().zip(&want) {
                if let Err(e) = common::close(g, w, 1e-5, 1e-6) {
                    failures.push(format!("{name}: {e}"));
                }
                if let (RtValue::Tensor(g), RtValue::Tensor(w)) = (g, w) {
                    for (x, y) in g.to_f64_vec().iter().zip(w.to_f64_vec()) {
                        worst = worst.max((x - y).abs() / y.abs().max(1e-30));
                    }
                }
            }
            println!("{suite}/{name}: codegen vs interpreter, max relative difference {worst:.2e}");
            let reference = outputs(&case.join("test_data_set_0"));
            let fused = outputs(&c);
            if fused.len() != reference.len() {
                failures.push(format!("{name} (fused): {} outputs vs {}", fused.len(), reference.len()));
            }
            for (g, w) in fused.iter().zip(&reference) {
                if let Err(e) = common::close(g, w, 1e-3, 1e-5) {
                    failures.push(format!("{name} (fused) vs reference: {e}"));
                }
            }
            let _ = std::fs::remove_dir_all(&c);
            checked += 1;
            let _ = std::fs::remove_dir_all(&a);
            let _ = std::fs::remove_dir_all(&b);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if filter.is_none() {
        assert_eq!(checked, 18, "expected the 9 light models and their 9 random-weight variants");
    }
}
