//! `--weights`: the MNIST example's initializers exported to safetensors (written here), one
//! perturbed, must give exactly what an ONNX file with the same modified initializer gives;
//! f16 weights convert; renames apply; mismatches fail in one line.
use burnc_compiler::ir::DType;
use burnc_frontends::onnx::proto::ModelProto;
use burnc_frontends::safetensors::serialize;
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn burnc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_burnc"))
}

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/mnist")
}

/// (name, shape, f32 values) of every initializer, in file order.
fn initializers() -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let m = burnc_frontends::onnx::load(&example().join("mnist_cnn.onnx")).expect("load");
    m.graph
        .values
        .iter()
        .filter_map(|v| match &v.kind {
            burnc_compiler::ir::ValueKind::Param(p) => {
                assert_eq!(p.dtype, DType::F32, "the example is all f32");
                let vals = p.to_tensor().expect("decode").to_f64_vec().into_iter().map(|x| x as f32).collect();
                Some((v.name.clone(), p.shape.clone(), vals))
            }
            _ => None,
        })
        .collect()
}

/// The example model with its initializers replaced by `inits` (as raw f32 data).
fn write_onnx(path: &Path, inits: &[(String, Vec<usize>, Vec<f32>)]) {
    let bytes = std::fs::read(example().join("mnist_cnn.onnx")).expect("read model");
    let mut model = ModelProto::decode(bytes.as_slice()).expect("decode");
    let graph = model.graph.as_mut().expect("graph");
    for t in &mut graph.initializer {
        let (_, _, vals) = inits.iter().find(|(n, _, _)| n == t.name()).expect("initializer");
        t.float_data.clear();
        t.raw_data = Some(vals.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>().into());
    }
    std::fs::write(path, model.encode_to_vec()).expect("write model");
}

/// A safetensors file of `inits` in `dtype` (F32 or F16), keys prefixed by `prefix`.
fn write_weights(path: &Path, inits: &[(String, Vec<usize>, Vec<f32>)], dtype: DType, prefix: &str) {
    let data: Vec<(String, Vec<u8>)> = inits
        .iter()
        .map(|(n, _, v)| {
            let b = match dtype {
                DType::F16 => v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect(),
                _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            };
            (format!("{prefix}{n}"), b)
        })
        .collect();
    let entries: Vec<(&str, DType, &[usize], &[u8])> =
        data.iter().zip(inits).map(|((k, b), (_, s, _))| (k.as_str(), dtype, s.as_slice(), b.as_slice())).collect();
    std::fs::write(path, serialize(&entries)).expect("write weights");
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `burnc run MODEL --input input_0.pb -o DIR [extra]`; returns the output tensor's bytes.
fn run(model: &Path, dir: &Path, extra: &[&str]) -> Vec<u8> {
    ok(burnc().arg("run").arg(model).arg("--input").arg(example().join("input_0.pb")).arg("-o").arg(dir).args(extra).output().expect("spawn"));
    std::fs::read(dir.join("output_0.pb")).expect("output")
}

#[test]
fn perturbed_weights_match_a_modified_onnx_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = |p: &str| tmp.path().join(p);
    let mut inits = initializers();
    // Perturb one element of the final Gemm's bias (shape [10]) by a visible, exact amount.
    let bias = inits.iter_mut().find(|(_, s, _)| s == &[10]).expect("a [10] bias");
    bias.2[3] += 1.0;
    let st = t("w.safetensors");
    write_weights(&st, &inits, DType::F32, "");
    std::fs::create_dir_all(t("mod")).expect("mkdir");
    let modified = t("mod/mnist_cnn.onnx");
    write_onnx(&modified, &inits);

    let original = example().join("mnist_cnn.onnx");
    let base = run(&original, &t("o0"), &[]);
    let via_weights = run(&original, &t("o1"), &["--weights", st.to_str().expect("utf8")]);
    let via_onnx = run(&modified, &t("o2"), &[]);
    assert_eq!(via_weights, via_onnx, "--weights must equal the modified ONNX file bit for bit");
    assert_ne!(via_weights, base, "the perturbation must change the output");

    // Compiling: the same module and weights blob as compiling the modified file.
    let (a, b) = (t("a/m.rs"), t("b/m.rs"));
    for d in ["a", "b"] {
        std::fs::create_dir_all(t(d)).expect("mkdir");
    }
    ok(burnc().arg(&original).arg("-o").arg(&a).arg("--weights").arg(&st).output().expect("spawn"));
    ok(burnc().arg(&modified).arg("-o").arg(&b).output().expect("spawn"));
    let read = |p: PathBuf| std::fs::read(p).expect("read");
    assert_eq!(read(a.with_extension("bin")), read(b.with_extension("bin")));
    assert_eq!(read(a), read(b));

    // inspect accepts the file too.
    let out = ok(burnc().arg("inspect").arg(&original).arg("--weights").arg(&st).output().expect("spawn"));
    assert!(out.contains("parameters:"), "{out}");
}

#[test]
fn f16_weights_convert_and_renames_apply() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = |p: &str| tmp.path().join(p);
    let inits = initializers();
    let st = t("w16.safetensors");
    write_weights(&st, &inits, DType::F16, "model.");
    // The reference: an f32 ONNX file holding the f16-rounded values.
    let rounded: Vec<_> = inits.iter().map(|(n, s, v)| (n.clone(), s.clone(), v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect())).collect();
    let reference = t("rounded.onnx");
    write_onnx(&reference, &rounded);

    let original = example().join("mnist_cnn.onnx");
    let got = run(&original, &t("o1"), &["--weights", st.to_str().expect("utf8"), "--rename", "model.*=*"]);
    assert_eq!(got, run(&reference, &t("o2"), &[]));
    assert_ne!(got, run(&original, &t("o0"), &[]), "f16 rounding should show in the logits");

    // Without the rename every key is unused and every parameter missing: one line, exit 1.
    let out = burnc().arg("run").arg(&original).arg("--input").arg(example().join("input_0.pb")).arg("--weights").arg(&st).output().expect("spawn");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("have no tensor in the file") && err.contains("match no parameter"), "{err}");
    for (n, _, _) in &inits {
        assert!(err.contains(&format!("model.{n}")), "{err}");
    }
}

#[test]
fn unused_tensors_need_the_flag() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut inits = initializers();
    inits.push(("extra.tensor".into(), vec![1], vec![0.0]));
    let st = tmp.path().join("w.safetensors");
    write_weights(&st, &inits, DType::F32, "");
    let original = example().join("mnist_cnn.onnx");
    let out = burnc().arg("inspect").arg(&original).arg("--weights").arg(&st).output().expect("spawn");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("extra.tensor"));
    let out = burnc().arg("inspect").arg(&original).arg("--weights").arg(&st).arg("--allow-unused-weights").output().expect("spawn");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("note: 1 unused tensors"));

    // The build-script API takes the same file.
    let report = burnc::Build::new(&original)
        .weights(&st)
        .allow_unused_weights(true)
        .out_dir(tmp.path().join("build"))
        .cargo_metadata(false)
        .compile()
        .expect("compile");
    assert!(report.weights.exists());
    let err = burnc::Build::new(&original).weights(&st).rename_weights("bad").out_dir(tmp.path()).cargo_metadata(false).compile();
    assert!(matches!(err, Err(burnc::BuildError::Weights { .. })), "{err:?}");
}

/// A `torch.save(state_dict)`-style checkpoint of `inits` (f32), keys prefixed by `prefix`.
fn write_pt(path: &Path, inits: &[(String, Vec<usize>, Vec<f32>)], prefix: &str) {
    let data: Vec<(String, Vec<u8>)> = inits.iter().map(|(n, _, v)| (format!("{prefix}{n}"), v.iter().flat_map(|x| x.to_le_bytes()).collect())).collect();
    let entries: Vec<(&str, DType, &[usize], &[u8])> =
        data.iter().zip(inits).map(|((k, b), (_, s, _))| (k.as_str(), DType::F32, s.as_slice(), b.as_slice())).collect();
    std::fs::write(path, burnc_frontends::pytorch::serialize(&entries)).expect("write checkpoint");
}

#[test]
fn pytorch_checkpoints_give_what_safetensors_gives() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = |p: &str| tmp.path().join(p);
    let mut inits = initializers();
    let bias = inits.iter_mut().find(|(_, s, _)| s == &[10]).expect("a [10] bias");
    bias.2[3] += 1.0;
    let st = t("w.safetensors");
    write_weights(&st, &inits, DType::F32, "");
    // The reader is picked by content, not by name: this checkpoint has no .pt extension.
    let pt = t("checkpoint.weights");
    write_pt(&pt, &inits, "model.");

    let original = example().join("mnist_cnn.onnx");
    let via_st = run(&original, &t("o1"), &["--weights", st.to_str().expect("utf8")]);
    let via_pt = run(&original, &t("o2"), &["--weights", pt.to_str().expect("utf8"), "--rename", "model.*=*"]);
    assert_eq!(via_pt, via_st, "a .pt checkpoint must give what the same safetensors file gives");
    assert_ne!(via_pt, run(&original, &t("o0"), &[]), "the perturbation must change the output");

    // Compiled (Build API): the same weights blob and module.
    let compile = |w: &Path, dir: &str, rename: Option<&str>| {
        let mut b = burnc::Build::new(&original).weights(w).out_dir(t(dir)).cargo_metadata(false);
        if let Some(r) = rename {
            b = b.rename_weights(r);
        }
        let report = b.compile().expect("compile");
        (std::fs::read(&report.weights).expect("blob"), std::fs::read(&report.source).expect("module"))
    };
    assert_eq!(compile(&pt, "bp", Some("model.*=*")), compile(&st, "bs", None));
}

#[test]
fn pytorch_mismatches_and_corrupt_files_fail_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut inits = initializers();
    let missing = inits.remove(0).0;
    inits.push(("extra.tensor".into(), vec![1], vec![0.0]));
    // A wrong shape: the [10] bias read as [2, 5].
    let bias = inits.iter_mut().find(|(_, s, _)| s == &[10]).expect("a [10] bias");
    bias.1 = vec![2, 5];
    let bias_name = bias.0.clone();
    let pt = tmp.path().join("bad.pt");
    write_pt(&pt, &inits, "");
    let original = example().join("mnist_cnn.onnx");
    let fail = |w: &Path| {
        let out = burnc().arg("run").arg(&original).arg("--input").arg(example().join("input_0.pb")).arg("--weights").arg(w).output().expect("spawn");
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(&w.display().to_string()), "names the file: {err}");
        err
    };
    let err = fail(&pt);
    assert!(err.contains("1 parameters have no tensor in the file") && err.contains(&missing), "{err}");
    assert!(err.contains("1 tensors match no parameter") && err.contains("extra.tensor"), "{err}");
    assert!(err.contains(&format!("`{bias_name}`: the model's shape is [10], the file's [2, 5]")), "{err}");

    // Truncated: the zip's end record is gone.
    let bytes = std::fs::read(&pt).expect("read");
    let cut = tmp.path().join("cut.pt");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let err = fail(&cut);
    assert!(err.contains("corrupt PyTorch zip archive") && err.contains("no end-of-central-directory record"), "{err}");
    // Neither format.
    let junk = tmp.path().join("junk.pt");
    std::fs::write(&junk, b"this is neither safetensors nor a torch checkpoint").expect("write");
    let err = fail(&junk);
    assert!(err.contains("not a weights file burnc reads") && err.contains("PyTorch checkpoint"), "{err}");
}
