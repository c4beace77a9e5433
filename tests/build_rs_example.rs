//! examples/build-rs builds (build.rs runs `burnc::Build`, main.rs uses `include_model!`) and
//! its generated MNIST CNN agrees with the reference interpreter on the example's fixed input.
#[path = "common/lean.rs"]
mod lean;
use burnc_compiler::interp::{self, RtValue};
use burnc_compiler::Tensor;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The example's input (examples/build-rs/src/main.rs computes the same).
fn input() -> Vec<f32> {
    (0..28 * 28).map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.5).collect()
}

fn target_dir(root: &Path) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    base.join("build-rs-example")
}

#[test]
fn build_rs_example_matches_the_interpreter() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let _done = lean::LeanCleanup(vec![target_dir(root)]);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["run", "--release", "--quiet", "--manifest-path"])
        .arg(root.join("examples/build-rs/Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir(root))
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the example failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find_map(|l| l.strip_prefix("logits ")).unwrap_or_else(|| panic!("no logits line in:\n{stdout}"));
    let got: Vec<f32> = line.split_whitespace().map(|v| v.parse().unwrap_or_else(|_| panic!("bad number `{v}`"))).collect();
    assert_eq!(got.len(), 10, "{line}");
    assert!(got.iter().all(|v| v.is_finite()), "{line}");

    let model = burnc_frontends::onnx::load(&root.join("examples/mnist/mnist_cnn.onnx")).expect("model loads");
    let x = RtValue::Tensor(Tensor::from_f32s(vec![1, 1, 28, 28], input()));
    let outs = interp::run(&model.graph, vec![x]).expect("interpreter runs");
    let RtValue::Tensor(want) = &outs[0] else { panic!("output is not a tensor") };
    let want = want.to_f64_vec();
    assert_eq!(want.len(), 10);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((*g as f64 - w).abs() <= 1e-4, "logit {i}: generated {g}, interpreter {w}\n{line}");
    }
}
