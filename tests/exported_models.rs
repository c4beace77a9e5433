//! Models exported by other frameworks' exporters against onnxruntime at several input sizes:
//! through the interpreter, and through generated code compiled with the dims pinned to each
//! size. PyTorch (tests/models/exported: the TorchScript exporter at opsets 7–20 and the dynamo
//! exporter at 18; shape subgraphs such as `view(x.size(0), -1)`, GRU, attention, Resize),
//! TensorFlow/Keras through tf2onnx (tests/models/exported_tf: NHWC convs wrapped in
//! Transposes, depthwise conv, LSTM, Keras MultiHeadAttention as Einsum, `tf.image.resize` with
//! `tf_half_pixel_for_nn`, `tf.reshape` on `tf.shape`) and PaddlePaddle through paddle2onnx
//! (tests/models/exported_paddle: CNN, bidirectional LSTM, TransformerEncoderLayer, Resize with
//! sizes from a shape subgraph, MLP), all with symbolic batch / sequence / height / width dims.
//! Sizes onnxruntime refuses (exporters that baked the example size into a Reshape) are skipped
//! by the reference script and listed in its skipped.txt.
use burnc_compiler::Tensor;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn npy(path: &Path) -> Tensor {
    burnc_frontends::npy::parse(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).expect("npy")
}

fn pb(path: &Path) -> Tensor {
    let v = burnc_frontends::onnx::values::decode_value(&std::fs::read(path).expect("output"), burnc_frontends::onnx::values::ValueKindHint::Tensor)
        .expect("decode output");
    match v {
        burnc_compiler::interp::RtValue::Tensor(t) => t,
        other => panic!("output is {other:?}"),
    }
}

/// onnxruntime's outputs for the models of tests/models/`set`, written by the reference script.
fn references(set: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(set);
    let script = common::root().join("scripts/exported_refs.py");
    let models = common::root().join("tests/models").join(set);
    let out = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .arg(&models)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 for {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed (it needs numpy and onnxruntime; scripts/setup_python.sh installs them):\n{}{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{}", String::from_utf8_lossy(&out.stdout));
    dir
}

/// Every case of tests/models/`set` through the interpreter and generated code; returns (model
/// files, runs).
fn check(set: &str) -> (usize, usize) {
    let refs = references(set);
    let cases = std::fs::read_to_string(refs.join("cases.txt")).expect("cases.txt");
    let models = common::root().join("tests/models").join(set);
    let mut failures = Vec::new();
    let mut n = 0;
    let mut files = std::collections::BTreeSet::new();
    for line in cases.lines().filter(|l| !l.trim().is_empty()) {
        let mut f = line.split_whitespace();
        let (file, case) = (f.next().unwrap(), f.next().unwrap());
        files.insert(file.to_string());
        let dir = refs.join(case);
        let want = npy(&dir.join("y.npy"));
        let x = format!("x={}", dir.join("x.npy").display());
        for codegen in [false, true] {
            let out = dir.join(if codegen { "codegen" } else { "interp" });
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_burnc"));
            cmd.arg("run");
            if codegen {
                cmd.arg("--codegen");
            }
            let o = cmd.arg(models.join(file)).arg("--input").arg(&x).arg("-o").arg(&out).output().expect("burnc runs");
            let how = if codegen { "generated code" } else { "interpreter" };
            if !o.status.success() {
                failures.push(format!("{case} ({how}): {}", String::from_utf8_lossy(&o.stderr).trim()));
                continue;
            }
            let got = pb(&out.join("output_0.pb"));
            if let Err(e) = common::close_tensor(&got, &want, 1e-3, 1e-5) {
                failures.push(format!("{case} ({how}): {e}"));
            }
            n += 1;
        }
    }
    println!("{n} runs over {} exported models", files.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    (files.len(), n)
}

#[test]
fn pytorch_exported_models_match_onnxruntime_at_several_sizes() {
    let (files, n) = check("exported");
    assert!(files >= 15 && n >= 80, "expected the 17 exported models at several sizes, got {files} files and {n} runs");
}

#[test]
fn tensorflow_exported_models_match_onnxruntime_at_several_sizes() {
    let (files, n) = check("exported_tf");
    assert!(files >= 13 && n >= 78, "expected the 13 tf2onnx exports at 3 sizes, got {files} files and {n} runs");
}

#[test]
fn paddle_exported_models_match_onnxruntime_at_several_sizes() {
    let (files, n) = check("exported_paddle");
    assert!(files >= 20 && n >= 120, "expected the 20 paddle2onnx exports at 3 sizes, got {files} files and {n} runs");
}

/// The encoders' attention (scores, scale, softmax, weighted sum and the transposes around
/// them) compiles to the one fused kernel where its scratch is smaller than the scores — at 64
/// positions, matching onnxruntime there — and stays unfused below (3 positions).
#[test]
fn exported_encoders_run_the_fused_attention() {
    let dir = common::root().join("target/exported-fused");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["exported/encoder_dynamo.onnx", "exported_paddle/pd_encoder_op17.onnx"] {
        let model = common::root().join("tests/models").join(file);
        let stem = file.replace('/', "_").replace(".onnx", "");
        for (pin, fused) in [("x=2x64x6", true), ("x=1x3x6", false)] {
            let out = dir.join(format!("{stem}.rs"));
            let o = Command::new(env!("CARGO_BIN_EXE_burnc")).arg(&model).args(["--input", pin, "-o"]).arg(&out).output().expect("burnc runs");
            assert!(o.status.success(), "{file}: {}", String::from_utf8_lossy(&o.stderr));
            let src = std::fs::read_to_string(&out).unwrap();
            assert_eq!(src.matches("rt::kernels::sdpa::attention(").count(), fused as usize, "{file} at {pin}");
            assert_eq!(src.contains("softmax::softmax("), !fused, "{file} at {pin}");
        }
        // The fused module (`--fuse`: the fusions of `burnc MODEL -o`) against onnxruntime on a
        // seeded input.
        let (x, y) = (dir.join(format!("{stem}_x.npy")), dir.join(format!("{stem}_y.npy")));
        let script = "import sys, numpy as np, onnxruntime as ort\n\
                      x = np.random.default_rng(7).uniform(-1, 1, (2, 64, 6)).astype(np.float32)\n\
                      s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n\
                      np.save(sys.argv[2], x); np.save(sys.argv[3], s.run(None, {s.get_inputs()[0].name: x})[0])";
        let st = Command::new("python3").args(["-c", script]).arg(&model).arg(&x).arg(&y).status().expect("python3 runs");
        assert!(st.success(), "{file}: onnxruntime reference failed");
        let out = dir.join(format!("{stem}_out"));
        let o = Command::new(env!("CARGO_BIN_EXE_burnc")).args(["run", "--codegen", "--fuse"]).arg(&model).arg("--input").arg(format!("x={}", x.display())).arg("-o").arg(&out).output().expect("burnc runs");
        assert!(o.status.success(), "{file}: {}", String::from_utf8_lossy(&o.stderr));
        common::close_tensor(&pb(&out.join("output_0.pb")), &npy(&y), 1e-3, 1e-5).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}
