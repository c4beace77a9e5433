//! The Rust frontend end to end: examples/mnist-rs declares the MNIST CNN with
//! `#[derive(Model)]` / `#[model]` and embeds mnist_cnn.safetensors; its logits must equal
//! those of examples/mnist/mnist_cnn.onnx run through generated code (the `burnc run --codegen`
//! harness) and through the interpreter, on the same input.
#[path = "common/lean.rs"]
mod lean;
use burnc_compiler::interp::{self, RtValue};
use burnc_compiler::ir::ValueKind;
use burnc_compiler::Tensor;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The example's input (examples/mnist-rs/src/main.rs computes the same).
fn input() -> Vec<f32> {
    (0..28 * 28).map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.5).collect()
}

fn target_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    base.join("mnist-rs-example")
}

/// The ONNX model's initializers as safetensors. They already carry PyTorch's names
/// (`conv1.weight`, `fc.bias` …), which are the names `#[derive(Model)]` gives its fields'
/// parameters, so no renaming is needed.
fn onnx_initializers_as_safetensors() -> Vec<u8> {
    let model = burnc_frontends::onnx::load(&root().join("examples/mnist/mnist_cnn.onnx")).expect("model loads");
    let g = &model.graph;
    let params: Vec<_> = g
        .values
        .iter()
        .filter_map(|v| match &v.kind {
            ValueKind::Param(p) => Some((v.name.clone(), p.clone())),
            _ => None,
        })
        .collect();
    let entries: Vec<(&str, _, &[usize], &[u8])> = params.iter().map(|(n, p)| (n.as_str(), p.dtype, &p.shape[..], &p.bytes[..])).collect();
    burnc_frontends::safetensors::serialize(&entries)
}

/// The committed weights file is the ONNX model's initializers (BURNC_REGEN=1 rewrites it).
#[test]
fn mnist_rs_weights_are_the_onnx_initializers() {
    let path = root().join("examples/mnist-rs/mnist_cnn.safetensors");
    let want = onnx_initializers_as_safetensors();
    if std::env::var_os("BURNC_REGEN").is_some() || !path.exists() {
        std::fs::write(&path, &want).expect("write the safetensors file");
    }
    let got = std::fs::read(&path).expect("read the safetensors file");
    assert!(got == want, "{} is not the ONNX initializers; rerun with BURNC_REGEN=1", path.display());
}

fn run_example() -> Vec<f32> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["run", "--quiet", "--manifest-path"])
        .arg(root().join("examples/mnist-rs/Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir())
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the example failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find_map(|l| l.strip_prefix("logits ")).unwrap_or_else(|| panic!("no logits line in:\n{stdout}"));
    line.split_whitespace().map(|v| v.parse().unwrap_or_else(|_| panic!("bad number `{v}`"))).collect()
}

#[test]
fn macro_model_matches_the_onnx_model_through_generated_code() {
    let _done = lean::LeanCleanup(vec![target_dir()]);
    let got = run_example();
    assert_eq!(got.len(), 10, "{got:?}");

    let model = burnc_frontends::onnx::load(&root().join("examples/mnist/mnist_cnn.onnx")).expect("model loads");
    let x = RtValue::Tensor(Tensor::from_f32s(vec![1, 1, 28, 28], input()));
    // The ONNX model through generated code (what `burnc run --codegen` does)…
    let prepared = burnc::harness::generate_for(&model.graph, std::slice::from_ref(&x), "mnist_cnn.onnx", true).expect("codegen");
    let bin = burnc::harness::build(&prepared.gen, "macro-model-mnist-onnx").expect("harness builds");
    let work = burnc::harness::cache_dir().join("runs").join(format!("macro-model-{}", std::process::id()));
    let outs = burnc::harness::run(&bin, &prepared, &work).expect("generated code runs");
    let _ = std::fs::remove_dir_all(&work);
    let RtValue::Tensor(codegen) = &outs[0] else { panic!("output is not a tensor") };
    // …and through the interpreter.
    let outs = interp::run(&model.graph, vec![x]).expect("interpreter runs");
    let RtValue::Tensor(reference) = &outs[0] else { panic!("output is not a tensor") };
    for (what, want) in [("ONNX generated code", codegen.to_f64_vec()), ("ONNX interpreter", reference.to_f64_vec())] {
        assert_eq!(want.len(), 10);
        let max = got.iter().zip(&want).map(|(g, w)| (*g as f64 - w).abs()).fold(0.0, f64::max);
        eprintln!("#[model] vs {what}: max |difference| {max:e}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((*g as f64 - w).abs() <= 1e-5, "logit {i}: #[model] {g}, {what} {w}\n{got:?}\n{want:?}");
        }
    }
}

/// Embedding lowers to Gather with indices known only at run time; generated code (a row copy
/// per index) must agree with the interpreter, negative indices included.
#[test]
fn gather_with_runtime_indices_matches_the_interpreter() {
    use burnc_compiler::ir::{DType, Graph, Op, Param, Shape, TensorType, ValueType};
    let mut g = Graph { name: "embedding".into(), ..Default::default() };
    let table: Vec<f32> = (0..10 * 4).map(|i| i as f32 * 0.5 - 3.0).collect();
    let bytes: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
    let ty = |d, s: &[usize]| ValueType::Tensor(TensorType { dtype: d, shape: Some(Shape::fixed(s)) });
    let w = g.add_value("weight", ty(DType::F32, &[10, 4]), ValueKind::Param(Param { dtype: DType::F32, shape: vec![10, 4], bytes: bytes.into() }));
    let ids = g.add_value("ids", ty(DType::I64, &[2, 3]), ValueKind::Input);
    g.inputs.push(ids);
    let (_, outs) = g.add_node("embed", Op::Gather { axis: 0 }, vec![Some(w), Some(ids)], &["y".to_string()]);
    g.outputs.push(outs[0]);
    burnc_compiler::passes::prepare(&mut g).expect("prepare");

    let x = RtValue::Tensor(Tensor::from_i64s(vec![2, 3], vec![0, 9, 3, -1, 5, -10]));
    let prepared = burnc::harness::generate_for(&g, std::slice::from_ref(&x), "embedding", false).expect("codegen");
    assert_eq!(prepared.feeds.len(), 1, "the ids stay a run-time input");
    let bin = burnc::harness::build(&prepared.gen, "macro-model-gather").expect("harness builds");
    let work = burnc::harness::cache_dir().join("runs").join(format!("macro-gather-{}", std::process::id()));
    let outs = burnc::harness::run(&bin, &prepared, &work).expect("generated code runs");
    let _ = std::fs::remove_dir_all(&work);
    let RtValue::Tensor(got) = &outs[0] else { panic!("output is not a tensor") };
    let want = interp::run(&g, vec![x]).expect("interpreter runs");
    let RtValue::Tensor(want) = &want[0] else { panic!("output is not a tensor") };
    assert_eq!(got.shape, vec![2, 3, 4]);
    assert_eq!(got.to_f64_vec(), want.to_f64_vec());
}
