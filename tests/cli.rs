//! The CLI contract: `burnc run` outputs and exit codes, `burnc inspect` with pinned dims.
use std::path::PathBuf;
use std::process::Command;

fn burnc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_burnc"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn run_writes_outputs_matching_onnxruntime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ex = root().join("examples/mnist");
    let out = burnc()
        .arg("run")
        .arg(ex.join("mnist_cnn.onnx"))
        .arg("--input")
        .arg(ex.join("input_0.pb"))
        .arg("-o")
        .arg(dir.path())
        .output()
        .expect("spawn burnc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("logits: f32 [1, 10]"), "{stdout}");
    let hint = burnc_frontends::onnx::values::ValueKindHint::Tensor;
    let read = |p: PathBuf| {
        let b = std::fs::read(&p).expect("read output");
        match burnc_frontends::onnx::values::decode_value(&b, hint).expect("decode") {
            burnc_compiler::interp::RtValue::Tensor(t) => t.to_f64_vec(),
            _ => panic!("not a tensor"),
        }
    };
    let got = read(dir.path().join("output_0.pb"));
    let want = read(ex.join("expected_output_0.pb"));
    assert_eq!(got.len(), 10);
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 + 1e-3 * w.abs(), "{got:?} vs {want:?}");
    }
}

#[test]
fn run_failure_is_one_line_and_exit_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.onnx");
    std::fs::write(&bad, b"\x08\x07\x12\xffnot a model").expect("write");
    let out = burnc().arg("run").arg(&bad).output().expect("spawn");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");

    // A model input of the wrong shape is refused with the input's name.
    let ex = root().join("examples/mnist");
    let npy = dir.path().join("x.npy");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 28, 27), }";
    let header = format!("{header:<117}\n");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(std::iter::repeat_n(0u8, 28 * 27 * 4));
    std::fs::write(&npy, bytes).expect("write npy");
    let out = burnc().arg("run").arg(ex.join("mnist_cnn.onnx")).arg("--input").arg(format!("x={}", npy.display())).output().expect("spawn");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("input `x`") && err.contains("[1, 1, 28, 28]"), "{err}");
}

#[test]
fn inspect_folds_shape_subgraph_once_dims_are_pinned() {
    let model = root().join("tests/models/dyn_shape_subgraph.onnx");
    let out = burnc().arg("inspect").arg(&model).arg("--input").arg("x=1x3x32x32").arg("--graph").output().expect("spawn");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("unknown cost"), "{text}");
    // Every value in the printed graph has a static shape: no symbolic or unknown dims.
    let graph = &text[text.find("graph ").expect("graph printed")..];
    assert!(!graph.contains('?') && !graph.contains("batch"), "{graph}");
    // Unpinned, the batch dim stays symbolic.
    let out = burnc().arg("inspect").arg(&model).output().expect("spawn");
    assert!(String::from_utf8_lossy(&out.stdout).contains("batch"));
}

#[test]
fn bench_prints_median_ms_last() {
    // A format test, not a timing test: the last line is `median_ms=<positive float>`.
    let model = root().join("examples/mnist/mnist_cnn.onnx");
    let out = burnc()
        .args(["bench", "--iters", "3", "--warmup", "1", "--min-ms", "0", "--threads", "2"])
        .arg(&model)
        .output()
        .expect("spawn burnc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("threads: 2 "), "--threads 2 must say how threads are used: {stdout}");
    let last = stdout.trim_end().lines().last().unwrap_or_default();
    let value = last.strip_prefix("median_ms=").and_then(|v| v.parse::<f64>().ok());
    assert!(value.is_some_and(|v| v > 0.0 && v.is_finite()), "last line `{last}` in:\n{stdout}");
    assert!(stdout.contains("runs=3 "), "{stdout}");
}

#[test]
fn bench_sgemm_prints_gflops_then_median_ms() {
    // A format test (scripts/bench.py --sgemm reads these lines): `gflops=` and `median_ms=`
    // last. The profiler's template hooks once leaked into this harness and broke its build.
    let out = burnc().args(["bench", "--sgemm", "64", "--iters", "2", "--warmup", "0", "--min-ms", "0"]).output().expect("spawn burnc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.trim_end().lines().collect();
    let value = |l: &str, key: &str| l.strip_prefix(key).and_then(|v| v.parse::<f64>().ok()).filter(|v| *v > 0.0 && v.is_finite());
    assert!(lines.len() >= 2 && value(lines[lines.len() - 2], "gflops=").is_some(), "{stdout}");
    assert!(value(lines[lines.len() - 1], "median_ms=").is_some(), "{stdout}");
}

#[test]
fn bench_profile_lists_every_node_and_keeps_median_last() {
    // A format test: one `profile:` line per node the module runs, per-op totals that add up
    // to the nodes' total, and `median_ms=` still last.
    let model = root().join("examples/mnist/mnist_cnn.onnx");
    let out = burnc()
        .args(["bench", "--iters", "3", "--warmup", "1", "--min-ms", "0", "--profile"])
        .arg(&model)
        .output()
        .expect("spawn burnc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let nodes: Vec<&str> = stdout.lines().filter(|l| l.starts_with("profile: ") && !l.contains("ms/run")).collect();
    let ops: Vec<&str> = stdout.lines().filter(|l| l.starts_with("profile-op: ")).collect();
    let ms = |l: &str| l.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    // MNIST's CNN after fusion: the convolutions, pools and the Gemm at least.
    assert!(nodes.len() >= 5, "{stdout}");
    assert!(nodes.iter().any(|l| l.contains(" Conv ")) && ops.iter().any(|l| l.contains(" Conv ")), "{stdout}");
    let node_sum: f64 = nodes.iter().map(|l| ms(l)).sum();
    let op_sum: f64 = ops.iter().map(|l| ms(l)).sum();
    assert!(node_sum > 0.0 && (node_sum - op_sum).abs() <= 1e-3 + 1e-3 * node_sum, "{node_sum} vs {op_sum}:\n{stdout}");
    // Slowest first.
    assert!(nodes.windows(2).all(|w| ms(w[0]) >= ms(w[1])), "{stdout}");
    let last = stdout.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("median_ms="), "last line `{last}` in:\n{stdout}");
}

/// A 3×3 convolution Winograd takes (64 → 64 channels, 28×28: 49 tiles, pads 1) as an ONNX file.
fn winograd_conv_model(path: &std::path::Path) {
    use burnc_frontends::onnx::proto::{
        attribute_proto::AttributeType, tensor_shape_proto::dimension::Value as DimValue, tensor_shape_proto::Dimension, type_proto, AttributeProto,
        GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
    };
    use prost::Message;
    let vi = |name: &str, dims: &[i64]| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto { dim: dims.iter().map(|&d| Dimension { value: Some(DimValue::DimValue(d)), ..Default::default() }).collect() }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let w: Vec<f32> = (0..64 * 64 * 9).map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.5).collect();
    let weight = TensorProto { name: Some("w".into()), dims: vec![64, 64, 3, 3], data_type: Some(1), float_data: w, ..Default::default() };
    let pads = AttributeProto { name: Some("pads".into()), r#type: Some(AttributeType::Ints as i32), ints: vec![1, 1, 1, 1], ..Default::default() };
    let conv = NodeProto { op_type: Some("Conv".into()), name: Some("conv".into()), input: vec!["x".into(), "w".into()], output: vec!["y".into()], attribute: vec![pads], ..Default::default() };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            name: Some("winograd".into()),
            node: vec![conv],
            initializer: vec![weight],
            input: vec![vi("x", &[1, 64, 28, 28])],
            output: vec![vi("y", &[1, 64, 28, 28])],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(path, model.encode_to_vec()).expect("write model");
}

/// The memory line `burnc inspect` prints is the one `burnc MODEL -o` prints, with and without
/// Winograd (whose transformed weights take 16/9 the bytes and change the scratch).
#[test]
fn inspect_reports_the_plan_that_compile_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("conv.onnx");
    winograd_conv_model(&model);
    let memory_line = |out: std::process::Output| -> String {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let s = String::from_utf8_lossy(&out.stdout).into_owned();
        s.lines().rev().find(|l| l.starts_with("memory: ")).unwrap_or_else(|| panic!("no memory line in:\n{s}")).to_string()
    };
    let mut lines = Vec::new();
    for flags in [&[][..], &["--no-winograd"][..]] {
        let inspected = memory_line(burnc().arg("inspect").arg(&model).args(flags).output().expect("spawn"));
        let compiled = memory_line(burnc().arg(&model).arg("-o").arg(dir.path().join("model.rs")).args(flags).output().expect("spawn"));
        assert_eq!(inspected, compiled, "flags {flags:?}");
        lines.push(compiled);
    }
    assert_ne!(lines[0], lines[1], "Winograd changes the weights blob");
}

/// `burnc inspect MODEL --svg FILE` draws the plan `-o` compiles: one box per buffer and
/// scratch area, the peak marked.
#[test]
fn inspect_draws_the_memory_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svg = dir.path().join("plan.svg");
    let out = burnc().arg("inspect").arg(root().join("examples/mnist/mnist_cnn.onnx")).arg("--svg").arg(&svg).output().expect("spawn");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"), "{text}");
    let boxes = text.matches(r#"class="buffer""#).count();
    assert!(boxes >= 5, "one box per buffer: {boxes}\n{text}");
    assert!(text.contains(r#"class="peak""#) && text.contains("peak "), "{text}");
    // The header names the arena the memory line prints.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let arena = stdout.lines().find_map(|l| l.strip_prefix("memory: arena_bytes=")).and_then(|r| r.split_whitespace().next()).expect("memory line");
    assert!(text.contains(&format!("({arena} bytes)")), "{arena}\n{text}");
}

/// `run --codegen --bound 2`: every input dim bounded by twice its size, compiled once and run
/// at the input's size, prints what the interpreter prints.
#[test]
fn run_with_bounded_dims_prints_what_the_interpreter_prints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = root().join("tests/models/snapshots/pools.onnx");
    let x: Vec<f32> = (0..3 * 8 * 8).map(|i| ((i * 37 % 101) as f32) / 50.0 - 1.0).collect();
    let input = dir.path().join("x.npy");
    let t = burnc_compiler::Tensor::new(vec![1, 3, 8, 8], burnc_compiler::Data::F32(x));
    std::fs::write(&input, burnc_frontends::npy::write(&t).expect("npy")).expect("write input");
    let run = |extra: &[&str]| {
        let out = burnc().arg("run").arg(&model).arg("--input").arg(&input).args(extra).output().expect("spawn burnc");
        assert!(out.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let interp = run(&[]);
    assert!(interp.starts_with("y: f32 [1, 3]"), "{interp}");
    assert_eq!(run(&["--codegen", "--bound", "2"]), interp);
}
