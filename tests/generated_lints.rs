//! Generated code is read and built by users, often with `cargo clippy -- -D warnings`: the
//! modules of the bundled and test models (fixed dims, control flow, bounded dims, training)
//! are checked with clippy at its default lints, warnings denied. Generated code allows only
//! what it does on purpose (labels naming each node's block; `unused_parens` of bounded size
//! products; a model's constants that look like π), never `clippy::all` or unused variables.
//!
//! Needs clippy (`rustup component add clippy`; `.ci/run` installs it).
use burnc::build::{generate, generate_bounded, generate_train, parse_pin_dims};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One generated module: its Rust source and its weights blob, under `name`.
struct Module {
    name: String,
    source: String,
    weights: Vec<u8>,
}

fn fixed(name: &str, model: &str, pins: &[(&str, &[usize])]) -> Module {
    let pins: Vec<(String, Vec<usize>)> = pins.iter().map(|(n, d)| (n.to_string(), d.to_vec())).collect();
    let gen = generate(&root().join(model), &pins, &[], &format!("{name}.bin")).unwrap_or_else(|e| panic!("{model}: {e}"));
    Module { name: name.into(), source: gen.source, weights: gen.weights }
}

fn bounded(name: &str, model: &str, pin: &str) -> Module {
    let pins = vec![("x".to_string(), parse_pin_dims(pin).expect("pin"))];
    let (gen, _) = generate_bounded(&root().join(model), &pins, &[], None, &format!("{name}.bin")).unwrap_or_else(|e| panic!("{model}: {e}"));
    Module { name: name.into(), source: gen.source, weights: gen.weights }
}

fn train(name: &str, model: &str, rule: burnc::Optimizer) -> Module {
    let spec = burnc::TrainSpec { loss: burnc::Loss::CrossEntropy, rule, lr: 0.01, trainable: vec![], output: None };
    let gen = generate_train(&root().join(model), &[], &[], None, &format!("{name}.bin"), &spec, None).unwrap_or_else(|e| panic!("{model}: {e}"));
    Module { name: name.into(), source: gen.source, weights: gen.weights }
}

/// Write the modules as one library crate and run clippy on it; its warnings, if any.
fn clippy(dir: &Path, modules: &[Module]) -> Result<(), String> {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).expect("crate dir");
    let manifest = format!(
        "[package]\nname = \"generated-lints\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nburnc-runtime = {{ path = {:?}, features = [\"std\"] }}\n\n[workspace]\n",
        root().join("runtime").display().to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("manifest");
    let mut lib = String::new();
    for m in modules {
        std::fs::write(src.join(format!("{}.rs", m.name)), &m.source).expect("module");
        std::fs::write(src.join(format!("{}.bin", m.name)), &m.weights).expect("weights");
        lib += &format!("pub mod {};\n", m.name);
    }
    std::fs::write(src.join("lib.rs"), lib).expect("lib.rs");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["clippy", "--quiet", "--message-format=short", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(dir.join("target"))
        .args(["--", "-D", "warnings"])
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if stderr.contains("no such command") || stderr.contains("is not installed") {
        panic!("clippy is missing: `rustup component add clippy`\n{stderr}");
    }
    if out.status.success() {
        Ok(())
    } else {
        Err(stderr)
    }
}

#[test]
fn generated_modules_pass_clippy_with_warnings_denied() {
    use burnc::Optimizer;
    let mut modules = Vec::new();
    for name in ["mlp", "small_cnn", "residual_block", "attention", "depthwise_conv", "pools", "concat_branches", "gemm_transb", "lrn_maxpool", "broadcast_elementwise"] {
        modules.push(fixed(name, &format!("tests/models/snapshots/{name}.onnx"), &[]));
    }
    modules.push(fixed("shape_fold", "tests/models/snapshots/shape_fold.onnx", &[("x", &[2, 3, 4, 4])]));
    // Control flow: subgraph blocks, loop counters a body need not read.
    for name in ["cnn_bn", "if_runtime", "loop_runtime", "mlp_dropout_ln", "scan_axes"] {
        modules.push(fixed(name, &format!("tests/models/{name}.onnx"), &[]));
    }
    modules.push(fixed("if_const_cond", "tests/models/if_const_cond.onnx", &[("x", &[2, 4])]));
    modules.push(fixed("dyn_shape_subgraph", "tests/models/dyn_shape_subgraph.onnx", &[("x", &[1, 3, 8, 8])]));
    modules.push(fixed("mnist", "examples/mnist/mnist_cnn.onnx", &[]));
    // Bounded dims: run-time sizes, derived dims, the checks of `forward`.
    modules.push(bounded("cnn_bounded", "tests/models/exported/cnn_dynamo.onnx", "{n<=3}x3x{h<=16}x{w<=16}"));
    modules.push(bounded("encoder_bounded", "tests/models/exported/encoder_dynamo.onnx", "{n<=4}x{s<=9}x6"));
    modules.push(bounded("gru_bounded", "tests/models/exported/gru_op14.onnx", "{n<=3}x{s<=12}x4"));
    modules.push(bounded("upsample_bounded", "tests/models/exported/upsample_op19.onnx", "{n<=2}x2x{h<=11}x{w<=13}"));
    // Training: forward and train_step, the optimizer's state.
    modules.push(train("mnist_train", "examples/mnist/mnist_cnn.onnx", Optimizer::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, decoupled: false }));
    modules.push(train("mlp_train", "tests/models/snapshots/mlp.onnx", Optimizer::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 0.0 }));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("generated_lints");
    if let Err(warnings) = clippy(&dir, &modules) {
        panic!("clippy finds fault with generated code ({}):\n{warnings}", dir.display());
    }
}
