//! The wgpu target on models (CI: Mesa's lavapipe, a software Vulkan): the light models with
//! random weights, MNIST, and the models exported by PyTorch, TensorFlow and PaddlePaddle at
//! the sizes their reference script picks, each compiled for wgpu, built in batches and run on
//! the first adapter, outputs compared with the interpreter's (the CPU path): ‖got − want‖ /
//! ‖want‖ at most 1e-4 (the deep random-weight models sum in another order on the device; a
//! single element of ResNet-50's logits may differ by 7e-4 of itself).
//! Also the CLI contracts: `burnc run --codegen --target wgpu` prints what `burnc run` prints,
//! and `burnc MODEL -o x.rs --target wgpu` writes the module, its weights and its WGSL.
//!
//! Writes target/conformance/wgpu_models.tsv. Every model must compile for the target except
//! those listed in `REFUSED` (ops the target has no kernels for yet), and every compiled one
//! must pass.
mod common;
use burnc_compiler::interp::RtValue;
use burnc_frontends::onnx::values::decode_value;
use common::{data_dir, hint, numbered, root, wgpu};
use std::path::Path;
use std::process::Command;

/// Models the target refuses today, with the op it lacks: a model that starts compiling
/// fails the test until it is taken off this list.
const REFUSED: &[(&str, &str)] = &[
    ("exported/gru_op9.onnx", "GRU"),
    ("exported/gru_op14.onnx", "GRU"),
    ("exported/gru_op17.onnx", "GRU"),
    ("exported/gru_dynamo.onnx", "GRU"),
    ("exported_tf/tf_lstm_op9.onnx", "LSTM"),
    ("exported_tf/tf_lstm_op13.onnx", "LSTM"),
    ("exported_tf/tf_lstm_op18.onnx", "LSTM"),
    ("exported_paddle/pd_lstm_op9.onnx", "LSTM"),
    ("exported_paddle/pd_lstm_op13.onnx", "LSTM"),
    ("exported_paddle/pd_lstm_op17.onnx", "LSTM"),
    ("exported_paddle/pd_lstm_op21.onnx", "LSTM"),
];

fn inputs_of(dir: &Path, g: &burnc_compiler::ir::Graph) -> Vec<RtValue> {
    numbered(dir, "input_").iter().zip(&g.inputs).map(|(p, &id)| decode_value(&std::fs::read(p).expect("read input"), hint(&g.value(id).ty)).expect("decode input")).collect()
}

/// The exported models' (file, input) cases from the reference script's cases.txt.
fn exported_cases(set: &str) -> Vec<(String, RtValue)> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wgpu-{set}"));
    let out = Command::new("python3")
        .arg(root().join("scripts/exported_refs.py"))
        .arg(&dir)
        .arg(root().join("tests/models").join(set))
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "exported_refs.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let cases = std::fs::read_to_string(dir.join("cases.txt")).expect("cases.txt");
    cases
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split_whitespace();
            let (file, case) = (f.next().expect("file"), f.next().expect("case"));
            let x = burnc_frontends::npy::parse(&std::fs::read(dir.join(case).join("x.npy")).expect("x.npy")).expect("npy");
            (format!("{set}/{file}"), RtValue::Tensor(x))
        })
        .collect()
}

#[test]
fn models_through_wgpu_match_the_interpreter() {
    let mut compiled = Vec::new();
    let mut refused = Vec::new();
    let mut unexpected = Vec::new();
    let mut add = |name: String, file: &str, g: &burnc_compiler::ir::Graph, inputs: Vec<RtValue>| match wgpu::compile(&name, g, inputs) {
        Ok(c) => {
            if REFUSED.iter().any(|(f, _)| *f == file) {
                unexpected.push(format!("{name} compiles now: take {file} off REFUSED"));
            }
            compiled.push(c);
        }
        Err(e) => match REFUSED.iter().find(|(f, _)| *f == file) {
            Some((_, op)) if e.contains(op) => refused.push(name),
            _ => unexpected.push(format!("{name}: {e}")),
        },
    };
    let light = data_dir().join("light_random");
    let mut dirs: Vec<_> = std::fs::read_dir(&light).map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.join("model.onnx").exists()).collect()).unwrap_or_default();
    dirs.sort();
    assert!(dirs.len() >= 9, "expected the nine random-weight light models in {}", light.display());
    for d in dirs {
        let name = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let model = burnc_frontends::onnx::load(&d.join("model.onnx")).expect("load");
        let inputs = inputs_of(&d.join("test_data_set_0"), &model.graph);
        add(name.clone(), &name, &model.graph, inputs);
    }
    let mnist = burnc_frontends::onnx::load(&root().join("examples/mnist/mnist_cnn.onnx")).expect("load mnist");
    let x = decode_value(&std::fs::read(root().join("examples/mnist/input_0.pb")).expect("mnist input"), hint(&mnist.graph.value(mnist.graph.inputs[0]).ty)).expect("decode");
    add("mnist".into(), "mnist", &mnist.graph, vec![x]);
    let mut exported = 0;
    for set in ["exported", "exported_tf", "exported_paddle"] {
        for (k, (file, x)) in exported_cases(set).into_iter().enumerate() {
            let model = burnc_frontends::onnx::load(&root().join("tests/models").join(&file)).expect("load");
            add(format!("{file}#{k}"), &file, &model.graph, vec![x]);
            exported += 1;
        }
    }
    let Some(report) = wgpu::run_all(&compiled, &root().join("target/wgpu-models"), wgpu::Tol::Norm(1e-4)) else { return };
    let passed = report.iter().filter(|r| r.1).count();
    let mut tsv = String::from("case\tstatus\treason\n");
    for (c, ok, why) in &report {
        tsv += &format!("{c}\t{}\t{}\n", if *ok { "pass" } else { "fail" }, why.replace(['\t', '\n'], " "));
    }
    for c in &refused {
        tsv += &format!("{c}\trefused\t\n");
    }
    std::fs::create_dir_all(root().join("target/conformance")).expect("mkdir");
    std::fs::write(root().join("target/conformance/wgpu_models.tsv"), tsv).expect("write report");
    println!("wgpu models: {passed}/{} compiled runs pass ({} refused as listed; {exported} exported-model runs)", report.len(), refused.len());
    let failed: Vec<String> = report.iter().filter(|r| !r.1).map(|r| format!("{}: {}", r.0, r.2)).collect();
    assert!(unexpected.is_empty() && failed.is_empty(), "{}", unexpected.iter().chain(&failed).cloned().collect::<Vec<_>>().join("\n"));
}

/// `burnc run --codegen --target wgpu` prints what `burnc run` prints (to the digits shown),
/// and `burnc MODEL -o` writes the module with its WGSL.
#[test]
fn cli_runs_and_compiles_for_wgpu() {
    let model = root().join("examples/mnist/mnist_cnn.onnx");
    let input = root().join("examples/mnist/input_0.pb");
    let run = |extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_burnc")).arg("run").arg(&model).arg("--input").arg(&input).args(extra).output().expect("burnc runs");
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (ok, interp, err) = run(&[]);
    assert!(ok, "{err}");
    let (ok, gpu, err) = run(&["--codegen", "--target", "wgpu"]);
    if !ok && err.contains("no wgpu adapter") && std::env::var_os("BURNC_REQUIRE_WGPU").is_none() {
        eprintln!("skipped: {err}");
        return;
    }
    assert!(ok, "{err}");
    // Same names, dtypes and shapes; values equal to the six digits printed, give or take one.
    let parse = |s: &str| -> Vec<(String, Vec<f64>)> {
        s.lines()
            .map(|l| {
                let (head, vals) = l.split_once(" [").and_then(|(h, r)| r.split_once("] [").map(|(_, v)| (h, v))).expect("a summary line");
                (head.to_string(), vals.trim_end_matches(']').split(", ").filter(|v| *v != "…").map(|v| v.parse().expect("a number")).collect())
            })
            .collect()
    };
    let (a, b) = (parse(&interp), parse(&gpu));
    assert_eq!(a.len(), b.len());
    for ((ha, va), (hb, vb)) in a.iter().zip(&b) {
        assert_eq!(ha, hb);
        for (x, y) in va.iter().zip(vb) {
            assert!((x - y).abs() <= 2e-6 + 1e-4 * x.abs(), "{ha}: {x} vs {y}");
        }
    }
    let out = tempfile::tempdir().expect("tempdir");
    let o = Command::new(env!("CARGO_BIN_EXE_burnc")).arg(&model).arg("-o").arg(out.path().join("model.rs")).args(["--target", "wgpu"]).output().expect("burnc runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let wgsl = std::fs::read_to_string(out.path().join("model.wgsl")).expect("model.wgsl");
    assert!(wgsl.contains("@compute"));
    let rs = std::fs::read_to_string(out.path().join("model.rs")).expect("model.rs");
    assert!(rs.contains("include_str!(\"model.wgsl\")") && rs.contains("rt::wgpu::Session"));
    assert!(out.path().join("model.bin").exists());
}
