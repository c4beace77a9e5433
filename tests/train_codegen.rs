//! The train step through generated code agrees with the interpreter bit for bit: `burnc train`
//! with and without `--codegen` prints the same losses and saves byte-identical parameters, on
//! models that exercise the rules training needs (Gemm, LayerNorm, training-mode Dropout keyed
//! per step; Conv, inference BatchNorm, GlobalAveragePool; MaxPool, Flatten), with SGD+momentum,
//! Adam and AdamW. The saved file loads back with `--weights`.
use std::path::{Path, PathBuf};
use std::process::Command;

fn npy(path: &Path, t: &burnc_compiler::Tensor) {
    std::fs::write(path, burnc_frontends::npy::write(t).expect("npy-encodable")).unwrap();
}

/// Seeded values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn burnc(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_burnc")).args(args).output().expect("burnc runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "burnc {args:?} failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    text
}

fn losses(stdout: &str) -> Vec<f64> {
    stdout.lines().filter_map(|l| l.split_once(" loss=")).map(|(_, v)| v.trim().parse().expect("a loss")).collect()
}

fn check(model: &str, x_shape: &[usize], classes: usize, optimizer: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let model_path = root.join(model);
    let tag = (model_path.file_stem().unwrap().to_string_lossy().into_owned() + "_" + &optimizer.join("_").replace("--", "")).replace(['*', '.'], "x");
    let work: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("train_codegen").join(&tag);
    std::fs::create_dir_all(&work).unwrap();
    let n: usize = x_shape.iter().product();
    npy(&work.join("x.npy"), &burnc_compiler::Tensor::from_f32s(x_shape.to_vec(), values(n, 7)));
    let y: Vec<i64> = (0..x_shape[0]).map(|i| ((i * 7 + 3) % classes) as i64).collect();
    npy(&work.join("y.npy"), &burnc_compiler::Tensor::from_i64s(vec![x_shape[0]], y));
    let (xa, ya) = (format!("x={}", work.join("x.npy").display()), work.join("y.npy").display().to_string());
    let (sa, sb) = (work.join("interp.safetensors"), work.join("codegen.safetensors"));
    let mut base = vec!["train", model_path.to_str().unwrap(), "--input", &xa, "--target", &ya, "--steps", "4"];
    base.extend_from_slice(optimizer);
    let mut a = base.clone();
    a.extend(["--save", sa.to_str().unwrap()]);
    let mut b = base.clone();
    b.extend(["--codegen", "--save", sb.to_str().unwrap()]);
    let (la, lb) = (burnc(&a), burnc(&b));
    let (va, vb) = (losses(&la), losses(&lb));
    assert_eq!(va.len(), 4, "{la}");
    assert_eq!(va, vb, "{tag}: losses differ\ninterpreter:\n{la}\ngenerated:\n{lb}");
    assert!(va[3] < va[0], "{tag}: the loss did not go down: {va:?}");
    let (fa, fb) = (std::fs::read(&sa).unwrap(), std::fs::read(&sb).unwrap());
    assert!(fa == fb, "{tag}: the saved parameters differ between interpreter and generated code");
    // The checkpoint is a complete weights file for the model.
    let w = sa.to_str().unwrap();
    let run = burnc(&["run", model_path.to_str().unwrap(), "--weights", w, "--input", &xa]);
    assert!(run.contains("logits"), "{run}");
    println!("{tag}: losses {va:?}");
}

#[test]
fn mlp_layernorm_dropout_adamw() {
    check("tests/models/mlp_dropout_ln.onnx", &[8, 16], 4, &["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.1"]);
}

#[test]
fn cnn_batchnorm_sgd_momentum() {
    check("tests/models/cnn_bn.onnx", &[4, 2, 6, 6], 3, &["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--nesterov"]);
}

#[test]
fn cnn_maxpool_adam_head_only() {
    check("examples/firmware/model.onnx", &[1, 1, 28, 28], 10, &["--optimizer", "adam", "--lr", "0.001", "--trainable", "fc.*"]);
}
