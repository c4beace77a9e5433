//! The nine light models (stock and with random weights) through generated code agree with
//! the interpreter: `burnc run --codegen` vs `burnc run`, same inputs. Generated code folds
//! BatchNormalization into convolution weights (`passes::fuse`), which changes rounding; the
//! random-weight models have outputs up to ~10^7 with heavy cancellation, so an element near
//! zero can differ by far more than 1e-5 of itself. The tolerance is therefore 1e-5 of the
//! output's largest magnitude (plus 1e-6), per element.
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

fn run(case: &Path, codegen: bool, out: &Path) -> Result<(), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_burnc"));
    cmd.arg("run");
    if codegen {
        cmd.arg("--codegen");
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
    for suite in ["light", "light_random"] {
        let Ok(rd) = std::fs::read_dir(data.join(suite)) else { continue };
        let mut cases: Vec<_> = rd.flatten().map(|e| e.path()).filter(|p| p.join("model.onnx").exists()).collect();
        cases.sort();
        for case in cases {
            let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let (a, b) = (scratch.join(format!("{name}-interp")), scratch.join(format!("{name}-codegen")));
            if let Err(e) = run(&case, false, &a).and_then(|_| run(&case, true, &b)) {
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
                let (RtValue::Tensor(g), RtValue::Tensor(w)) = (g, w) else {
                    failures.push(format!("{name}: outputs are not tensors"));
                    continue;
                };
                if g.shape != w.shape || g.dtype() != w.dtype() {
                    failures.push(format!("{name}: {:?} {:?} vs expected {:?} {:?}", g.dtype(), g.shape, w.dtype(), w.shape));
                    continue;
                }
                let (gv, wv) = (g.to_f64_vec(), w.to_f64_vec());
                let scale = wv.iter().fold(0f64, |m, v| m.max(v.abs()));
                for (i, (x, y)) in gv.iter().zip(&wv).enumerate() {
                    let d = (x - y).abs();
                    if !(d <= 1e-6 + 1e-5 * scale) {
                        failures.push(format!("{name}: element {i}: {x} vs interpreter {y} (largest |output| {scale})"));
                        break;
                    }
                    worst = worst.max(d / scale.max(1e-30));
                }
            }
            println!("{suite}/{name}: codegen vs interpreter, max difference {worst:.2e} of the largest |output|");
            checked += 1;
            let _ = std::fs::remove_dir_all(&a);
            let _ = std::fs::remove_dir_all(&b);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(checked, 18, "expected the 9 light models and their 9 random-weight variants");
}
