//! Bounded symbolic dims (`--input x={n<=3}x3x{h<=16}x{w<=16}`): the PyTorch-exported models of
//! tests/models/exported compiled ONCE with bounded dims, the generated module built once and
//! run at every reference size within the bounds (the bound itself and smaller ones), against
//! onnxruntime (scripts/exported_refs.py). Also: a dim above its bound and a wrong input
//! length are `DimError`s (exit status 2 from the harness, not a panic), the arena constant is
//! the plan at the bounds, and unsupported ops fail at compile time naming the node.
use burnc_compiler::ops::matmul::{Gemm, MatMul};
use burnc_compiler::ops::view::Flatten;
use burnc::build::{generate, generate_bounded, parse_pin_dims, PinDim};
use burnc::harness::{bounded_main_rs, build_crate, Profile};
use burnc_compiler::ops::IntoOp;
use burnc_compiler::Tensor;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn npy(path: &Path) -> Tensor {
    burnc_frontends::npy::parse(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).expect("npy")
}

/// The onnxruntime references for the models of tests/models/`set` (shared script with
/// tests/exported_models.rs).
fn references_of(set: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bounded_dims").join(set);
    let script = common::root().join("scripts/exported_refs.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .arg(common::root().join("tests/models").join(set))
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3: {e}"));
    assert!(out.status.success(), "{} failed:\n{}", script.display(), String::from_utf8_lossy(&out.stderr));
    dir
}

/// The PyTorch exports' references.
fn references() -> PathBuf {
    references_of("exported")
}

fn models() -> PathBuf {
    common::root().join("tests/models/exported")
}

/// A model compiled with bounded dims and its harness built.
struct Built {
    bin: PathBuf,
    gen: burnc_compiler::codegen::Generated,
    info: burnc_compiler::codegen::BoundedInfo,
}

fn build_bounded(file: &str, pin: &str) -> Built {
    build_bounded_in(&models(), file, pin)
}

fn build_bounded_in(dir: &Path, file: &str, pin: &str) -> Built {
    let pins = vec![("x".to_string(), parse_pin_dims(pin).expect("pin"))];
    let (gen, info) = generate_bounded(&dir.join(file), &pins, &[], None, "model.bin").unwrap_or_else(|e| panic!("{file}: {e}"));
    let main = bounded_main_rs(&gen, &info);
    let files: [(&str, &[u8]); 3] = [("src/model.rs", gen.source.as_bytes()), ("src/model.bin", &gen.weights), ("src/main.rs", main.as_bytes())];
    let bin = build_crate(&format!("bounded-{file}-{pin}"), &files, Profile::Run).unwrap_or_else(|e| panic!("{file}: {e}"));
    Built { bin, gen, info }
}

/// Run the built harness on `x` with `dims`; the output, or the harness's stderr and status.
fn run(b: &Built, work: &Path, x: &[f32], dims: &[usize]) -> Result<Tensor, (i32, String)> {
    std::fs::create_dir_all(work).expect("work dir");
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(work.join("in_0.bin"), bytes).expect("write input");
    let o = Command::new(&b.bin).arg(work).args(dims.iter().map(|d| d.to_string())).output().expect("harness runs");
    if !o.status.success() {
        return Err((o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned()));
    }
    let shape: Vec<usize> = std::fs::read_to_string(work.join("out_0.shape")).expect("shape").split_whitespace().map(|s| s.parse().expect("dim")).collect();
    let data = std::fs::read(work.join("out_0.bin")).expect("output");
    let vals: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok(Tensor::new(shape, burnc_compiler::Data::F32(vals)))
}

/// The values of the named dims for an input of shape `shape` under pin `pin`.
fn dims_for(pin: &[PinDim], info: &burnc_compiler::codegen::BoundedInfo, shape: &[usize]) -> Vec<usize> {
    info.dims
        .iter()
        .map(|(name, _)| {
            let i = pin.iter().position(|d| matches!(d, PinDim::Bounded { name: n, .. } if n == name)).expect("dim in pin");
            shape[i]
        })
        .collect()
}

/// Compile `file` once with `pin`, run it at every reference size of `stem` and compare with
/// onnxruntime; returns the number of sizes run and the built model.
fn check_model(refs: &Path, file: &str, pin: &str) -> (usize, Built) {
    check_model_in(&models(), refs, file, pin)
}

fn check_model_in(models: &Path, refs: &Path, file: &str, pin: &str) -> (usize, Built) {
    let stem = file.trim_end_matches(".onnx");
    let b = build_bounded_in(models, file, pin);
    let spec = parse_pin_dims(pin).expect("pin");
    let mut sizes = 0;
    let mut failures = Vec::new();
    // Every reference size of this model (cases.txt lists those onnxruntime ran).
    let cases = std::fs::read_to_string(refs.join("cases.txt")).expect("cases.txt");
    for case in cases.lines().filter_map(|l| l.split_whitespace().nth(1)).filter(|c| c.split('/').next() == Some(stem)) {
        let dir = refs.join(case);
        let (x, want) = (npy(&dir.join("x.npy")), npy(&dir.join("y.npy")));
        let dims = dims_for(&spec, &b.info, &x.shape);
        let xs = x.to_f64_vec().iter().map(|&v| v as f32).collect::<Vec<_>>();
        match run(&b, &dir.join("bounded"), &xs, &dims) {
            Ok(got) => {
                if let Err(e) = common::close_tensor(&got, &want, 1e-3, 1e-5) {
                    failures.push(format!("{file} at {:?}: {e}", x.shape));
                }
            }
            Err((code, err)) => failures.push(format!("{file} at {:?}: exit {code}: {err}", x.shape)),
        }
        sizes += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    (sizes, b)
}

#[test]
fn exported_models_compiled_once_with_bounded_dims_match_onnxruntime_at_every_size() {
    let refs = references();
    // CNN: `view(x.size(0), -1)` is a Shape → Concat → Reshape subgraph on the batch dim. The
    // dynamo export's pooling fits H, W in 14..=16 only (see exported_refs.py).
    let (n_cnn, cnn) = check_model(&refs, "cnn_dynamo.onnx", "{n<=3}x3x{h<=16}x{w<=16}");
    // MLP: symbolic batch through Gemm, Tanh, Softmax; sizes 1, 3 and the bound 8.
    let mut n_mlp = 0;
    for f in ["mlp_op7.onnx", "mlp_op9.onnx", "mlp_op13.onnx", "mlp_dynamo.onnx"] {
        n_mlp += check_model(&refs, f, "{batch<=8}x10").0;
    }
    // Upsample: nearest and bilinear Resize (scale 2, tap tables for every length) + Add + Conv.
    let mut n_up = 0;
    for f in ["upsample_op11.onnx", "upsample_op13.onnx", "upsample_op19.onnx", "upsample_dynamo.onnx"] {
        n_up += check_model(&refs, f, "{n<=2}x2x{h<=11}x{w<=13}").0;
    }
    // Encoder (dynamo export; the TorchScript ones baked the example's sequence length into a
    // Reshape): attention reshapes whose targets a shape subgraph computes (`[seq, 2*batch, 8]`),
    // batched MatMul, Softmax, LayerNorm, ReduceMean.
    let (n_enc, _) = check_model(&refs, "encoder_dynamo.onnx", "{n<=4}x{s<=9}x6");
    // GRU: the initial state is ConstantOfShape of [1, batch, 8] (a shape subgraph), the GRU
    // runs over a bounded sequence, and `out[:, -1]` takes the last step at run time (a Gather
    // at opsets 14 and 17, a Slice at opset 9).
    let mut n_gru = 0;
    for f in ["gru_op9.onnx", "gru_op14.onnx", "gru_op17.onnx"] {
        n_gru += check_model(&refs, f, "{n<=3}x{s<=12}x4").0;
    }
    // The dynamo GRU baked the example's sequence length (7) in; its batch is bounded, and its
    // initial state is Expand of zeros to a computed [1, batch, 8].
    n_gru += check_model(&refs, "gru_dynamo.onnx", "{n<=3}x7x4").0;
    println!("sizes run: cnn {n_cnn}, mlp {n_mlp}, upsample {n_up}, encoder {n_enc}, gru {n_gru}");
    assert!(
        n_cnn >= 3 && n_mlp >= 12 && n_up >= 12 && n_enc >= 4 && n_gru >= 17,
        "expected every reference size: cnn {n_cnn}, mlp {n_mlp}, upsample {n_up}, encoder {n_enc}, gru {n_gru}"
    );
    assert_eq!(cnn.info.dims, vec![("n".to_string(), 3), ("h".to_string(), 16), ("w".to_string(), 16)]);
}

/// Exports of the other frameworks, each compiled once with bounded dims and run at its three
/// reference sizes: tf2onnx's NHWC CNN (Transposes around the convs, depthwise conv, Clip,
/// swish as Sigmoid·x, global pooling) and its `tf.reshape(x, [tf.shape(x)[0], -1])`;
/// paddle2onnx's CNN (a BatchNormalization left after a separate bias Add, so not folded;
/// grouped conv, HardSwish), MLP and TransformerEncoderLayer (attention reshapes from shape
/// subgraphs, LayerNormalization, erf GELU).
#[test]
fn tensorflow_and_paddle_exports_with_bounded_dims_match_onnxruntime() {
    let mut runs = 0;
    for (set, file, pin) in [
        ("exported_tf", "tf_cnn_op13.onnx", "{n<=3}x{h<=20}x{w<=20}x3"),
        ("exported_tf", "tf_flatten_op13.onnx", "{n<=7}x3x5"),
        ("exported_paddle", "pd_cnn_op13.onnx", "{n<=3}x3x{h<=20}x{w<=20}"),
        ("exported_paddle", "pd_mlp_op13.onnx", "{n<=8}x10"),
        ("exported_paddle", "pd_encoder_op17.onnx", "{n<=4}x{s<=9}x6"),
    ] {
        let refs = references_of(set);
        let (n, _) = check_model_in(&common::root().join("tests/models").join(set), &refs, file, pin);
        assert_eq!(n, 3, "{file}: expected its 3 reference sizes");
        runs += n;
    }
    println!("{runs} bounded runs over 5 tf2onnx / paddle2onnx exports");
}

#[test]
fn dims_above_the_bound_and_wrong_lengths_are_errors_not_panics() {
    let b = build_bounded("mlp_op13.onnx", "{batch<=8}x10");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bounded_dims_errors");
    let ok = run(&b, &work, &[0.5; 80], &[8]).expect("the bound itself runs");
    assert_eq!(ok.shape, vec![8, 4]);
    let (code, err) = run(&b, &work, &[0.5; 90], &[9]).expect_err("batch 9 is above the bound");
    assert_eq!(code, 2, "a DimError, not a panic: {err}");
    assert!(err.contains("dim `batch` is 9; it must be in 1..=8"), "{err}");
    let (code, err) = run(&b, &work, &[0.5; 30], &[2]).expect_err("30 elements are not 2x10");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("input `x` has 30 elements, its dims give 20"), "{err}");
    let (code, err) = run(&b, &work, &[], &[0]).expect_err("batch 0");
    assert_eq!(code, 2, "{err}");
}

#[test]
fn arena_is_the_plan_at_the_bounds() {
    // The MLP has no convolution, so the bounded plan is the pinned plan at the bound exactly;
    // the CNN's convolutions reserve their whole im2col buffer at the bound, so its arena is at
    // least the pinned one.
    for (file, pin, pinned, exact) in
        [("mlp_op13.onnx", "{batch<=8}x10", vec![8, 10], true), ("cnn_dynamo.onnx", "{n<=3}x3x{h<=16}x{w<=16}", vec![3, 3, 16, 16], false)]
    {
        let pins = vec![("x".to_string(), parse_pin_dims(pin).expect("pin"))];
        let (gen, _) = generate_bounded(&models().join(file), &pins, &[], None, "model.bin").expect("bounded");
        let at_bound = generate(&models().join(file), &[("x".to_string(), pinned)], &[], "model.bin").expect("pinned");
        assert!(gen.source.contains(&format!("pub const ARENA_BYTES: usize = {};", gen.arena_bytes)), "{file}: ARENA_BYTES constant");
        if exact {
            assert_eq!(gen.arena_bytes, at_bound.arena_bytes, "{file}");
        } else {
            assert!(gen.arena_bytes >= at_bound.arena_bytes, "{file}: {} < {}", gen.arena_bytes, at_bound.arena_bytes);
        }
        assert!(gen.source.contains("pub const") && gen.source.contains("_MAX: usize ="), "{file}: bounds as constants");
    }
}

#[test]
fn unsupported_ops_and_bad_pins_fail_with_clear_errors() {
    // An op without a bounded-dims emitter: a compile-time error naming the node and op.
    {
        use burnc_compiler::ir::{DType, Dim, Graph, Shape, TensorType, ValueKind, ValueType};
        let mut g = Graph::default();
        let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(vec![Dim::Sym { name: "n".into(), bound: Some(4) }, Dim::Fixed(4)])) });
        let x = g.add_value("x", ty, ValueKind::Input);
        g.inputs.push(x);
        let (_, outs) = g.add_node("nonzero", burnc_compiler::ops::compress::NonZero.op(), vec![Some(x)], &["y".to_string()]);
        g.outputs = outs;
        let err = burnc_compiler::codegen::generate_bounded(&g, &Default::default()).err().expect("NonZero is refused").to_string();
        assert!(err.contains("nonzero") && err.contains("`NonZero` does not support bounded dims yet; pin them with --input"), "{err}");
    }
    // A TorchScript encoder baked its example's sequence length (5) into a Reshape: the module
    // is compiled at that length, and `forward` refuses any other with a DimError naming that
    // Reshape.
    let pins = vec![("x".to_string(), parse_pin_dims("{n<=4}x{s<=9}x6").expect("pin"))];
    let (gen, _) = generate_bounded(&models().join("encoder_op17.onnx"), &pins, &[], None, "model.bin").expect("compiles");
    assert!(gen.source.contains("Reshape_4` (Reshape): the input's size and the target's"), "{}", gen.source);
    // A dim without a bound: say so.
    let mut g = burnc_frontends::onnx::load(&models().join("mlp_op13.onnx")).expect("load").graph;
    let err = burnc_compiler::codegen::generate_bounded(&g, &Default::default()).err().expect("unbounded").to_string();
    assert!(err.contains("has no bound"), "{err}");
    burnc::build::pin_input_dims(&mut g, "x", &parse_pin_dims("{b<=4}x10").expect("pin")).expect("pin");
    assert!(burnc_compiler::codegen::generate_bounded(&g, &Default::default()).is_ok());
    for bad in ["{h<=0}x3", "{h<=}x3", "{1h<=4}x3", "{h<=4x3", "h<=4}x3"] {
        assert!(parse_pin_dims(bad).is_err(), "`{bad}` should be refused");
    }
    assert_eq!(parse_pin_dims("1x{h<=4}").expect("pin"), vec![PinDim::Fixed(1), PinDim::Bounded { name: "h".into(), bound: 4 }]);
}

#[test]
fn cli_and_build_api_take_bounded_dims() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bounded_dims_cli");
    std::fs::create_dir_all(&dir).expect("dir");
    let model = models().join("mlp_op13.onnx");
    let out = dir.join("mlp.rs");
    let o = Command::new(env!("CARGO_BIN_EXE_burnc")).arg(&model).arg("--input").arg("x={batch<=8}x10").arg("-o").arg(&out).output().expect("burnc runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let src = std::fs::read_to_string(&out).expect("module");
    assert!(src.contains("pub const BATCH_MAX: usize = 8;") && src.contains("pub struct Dims") && src.contains("Result<Outputs<'a>, DimError>"), "{src}");
    let arena: usize = String::from_utf8_lossy(&o.stdout).split("arena_bytes=").nth(1).and_then(|r| r.split_whitespace().next()?.parse().ok()).expect("arena line");

    // `burnc inspect` prints the plan at the bounds and the outputs' dims.
    let o = Command::new(env!("CARGO_BIN_EXE_burnc")).arg("inspect").arg(&model).args(["--input", "x={batch<=8}x10"]).output().expect("burnc runs");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains(&format!("memory at the bounds: arena_bytes={arena} ")) && text.contains("output y: [batch, 4]"), "{text}");

    let report = burnc::Build::new(&model).input_dims("x", "{batch<=8}x10").out_dir(&dir).name("mlp_build").cargo_metadata(false).compile().expect("Build");
    assert_eq!(report.arena_bytes, arena);
    assert!(std::fs::read_to_string(dir.join("mlp_build.rs")).expect("module").contains("pub struct Dims"));

    // A Reshape whose baked target fixes a bounded dim: compiled at that value, with the
    // check in `forward` naming the node.
    let o = Command::new(env!("CARGO_BIN_EXE_burnc"))
        .arg(models().join("encoder_op14.onnx"))
        .args(["--input", "x={n<=4}x{s<=9}x6", "-o"])
        .arg(dir.join("enc.rs"))
        .output()
        .expect("burnc runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let src = std::fs::read_to_string(dir.join("enc.rs")).expect("module");
    assert!(src.contains("Reshape_4` (Reshape): the input's size and the target's"), "{src}");
    // A bad bounded dim is a usage error.
    let o = Command::new(env!("CARGO_BIN_EXE_burnc")).arg(&model).args(["--input", "x={batch<=0}x10", "-o"]).arg(dir.join("bad.rs")).output().expect("burnc runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("the bound must be at least 1"), "{err}");
}

#[test]
fn keyword_dim_names_compile_and_run() {
    // `{type<=8}` is a Rust keyword: the Dims field is `type_`, and the module still builds.
    let b = build_bounded("mlp_op13.onnx", "{type<=8}x10");
    assert!(b.gen.source.contains("pub type_: usize"), "{}", b.gen.source);
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bounded_dims_keyword");
    let y = run(&b, &work, &[0.25; 30], &[3]).expect("runs");
    assert_eq!(y.shape, vec![3, 4]);
    // Softmax rows sum to one.
    for r in 0..3 {
        let s: f64 = y.to_f64_vec()[r * 4..(r + 1) * 4].iter().sum();
        assert!((s - 1.0).abs() < 1e-5, "row {r} sums to {s}");
    }
}

#[test]
fn bounded_cnn_module_snapshot() {
    // The generated code as a reviewable diff (tests/snapshots/): size table, checks, kernels
    // called with `sz[i]`. After an intended change: `INSTA_UPDATE=always cargo test --test
    // bounded_dims`.
    let pins = vec![("x".to_string(), parse_pin_dims("{n<=3}x3x{h<=16}x{w<=16}").expect("pin"))];
    let (gen, _) = generate_bounded(&models().join("cnn_dynamo.onnx"), &pins, &[], None, "cnn.bin").expect("bounded");
    let source = gen.source.replacen(&format!("burnc {} from", env!("CARGO_PKG_VERSION")), "burnc [version] from", 1);
    insta::assert_snapshot!("bounded_cnn", format!("{}\n\n{source}", burnc::build::memory_line(&gen)));
}

/// A hand-built graph over bounded dims (Concat along channels, Transpose, a Reshape whose
/// target a shape subgraph computes, Softmax, ReduceMean), run through one bounded module at
/// several sizes and compared with the interpreter at each size.
#[test]
fn hand_built_graph_matches_the_interpreter_at_several_sizes() {
    use burnc_compiler::ir::{DType, Dim, Graph, Op, ReduceOp, Shape, TensorType, UnaryOp, ValueKind, ValueType};
    let bounded = |name: &str, b: usize| Dim::Sym { name: name.into(), bound: Some(b) };
    let mut g = Graph::default();
    let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(vec![bounded("n", 2), Dim::Fixed(2), bounded("h", 4), bounded("w", 5)])) });
    let x = g.add_value("x", ty, ValueKind::Input);
    g.inputs.push(x);
    let node = |g: &mut Graph, name: &str, op: Op, ins: Vec<burnc_compiler::ir::ValueId>| g.add_node(name, op, ins.into_iter().map(Some).collect(), &[format!("{name}_out")]).1[0];
    let r = node(&mut g, "relu", Op::Unary(UnaryOp::Relu), vec![x]);
    let cat = node(&mut g, "cat", Op::Concat { axis: 1 }, vec![x, r]); // [n, 4, h, w]
    let t = node(&mut g, "tr", burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 2, 3, 1]) }.op(), vec![cat]); // [n, h, w, 4]
    // view(n, h*w, 4) through Shape / Gather / Mul / Concat.
    let sh = node(&mut g, "shape", burnc_compiler::ops::dim_values::Shape { start: 0, end: None }.op(), vec![t]);
    let i0 = g.add_const("i0", Tensor::from_i64s(vec![1], vec![0]));
    let i1 = g.add_const("i1", Tensor::from_i64s(vec![1], vec![1]));
    let i2 = g.add_const("i2", Tensor::from_i64s(vec![1], vec![2]));
    let four = g.add_const("four", Tensor::from_i64s(vec![1], vec![4]));
    let n0 = node(&mut g, "g0", Op::Gather { axis: 0 }, vec![sh, i0]);
    let h0 = node(&mut g, "g1", Op::Gather { axis: 0 }, vec![sh, i1]);
    let w0 = node(&mut g, "g2", Op::Gather { axis: 0 }, vec![sh, i2]);
    let hw = node(&mut g, "hw", Op::Binary(burnc_compiler::ir::BinaryOp::Mul), vec![h0, w0]);
    let target = node(&mut g, "target", Op::Concat { axis: 0 }, vec![n0, hw, four]);
    let v = node(&mut g, "view", Op::Reshape { allowzero: false }, vec![t, target]); // [n, h*w, 4]
    let sm = node(&mut g, "softmax", burnc_compiler::ops::softmax::Softmax { axis: 1, log: false, coerce_2d: false }.op(), vec![v]);
    let axes = g.add_const("axes", Tensor::from_i64s(vec![1], vec![2]));
    let y = node(&mut g, "mean", burnc_compiler::ops::reduce::Reduce { op: ReduceOp::Mean, axes: None, keepdims: false, noop_with_empty_axes: false }.op(), vec![sm, axes]); // [n, h*w]
    g.outputs = vec![y];

    let sizes = [[2usize, 2, 4, 5], [1, 2, 1, 1], [2, 2, 3, 2], [1, 2, 4, 3]];
    assert_eq!(check_against_interpreter(&g, "bounded-hand-built", &sizes.map(|s| (s.to_vec(), vec![s[0], s[2], s[3]]))), (4, 0));
}

/// A Scan over a bounded axis whose slices have a bounded dim: its body is compiled once for
/// the bounded dims (a state, a reversed scan input, a scan output along axis 1, a value of
/// the enclosing graph read in the body) and matches the interpreter at every size.
#[test]
fn scan_over_bounded_dims_matches_the_interpreter() {
    use burnc_compiler::ir::{BinaryOp, DType, Dim, Graph, Op, ReduceOp, Shape, TensorType, ValueKind, ValueType};
    let bounded = |name: &str, b: usize| Dim::Sym { name: name.into(), bound: Some(b) };
    let mut g = Graph::default();
    let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(vec![bounded("n", 4), bounded("k", 3)])) });
    let x = g.add_value("x", ty, ValueKind::Input);
    g.inputs.push(x);
    let axes = g.add_const("axes", Tensor::from_i64s(vec![1], vec![0]));
    let reduce = |op| burnc_compiler::ops::reduce::Reduce { op, axes: None, keepdims: false, noop_with_empty_axes: false }.op();
    let init = g.add_node("init", reduce(ReduceOp::Sum), vec![Some(x), Some(axes)], &["init_out".to_string()]).1[0]; // [k]
    // [k], read by the body by name.
    g.add_node("mx", reduce(ReduceOp::Max), vec![Some(x), Some(axes)], &["mx_out".to_string()]);
    // body(state, slice) = (state + slice, (state + slice) * mx)
    let mut body = Graph::default();
    let unknown = || ValueType::Tensor(TensorType { dtype: DType::F32, shape: None });
    let st = body.add_value("st", unknown(), ValueKind::Input);
    let sl = body.add_value("sl", unknown(), ValueKind::Input);
    let outer = body.add_value("mx_out", unknown(), ValueKind::Outer);
    body.inputs = vec![st, sl];
    let sum = body.add_node("add", Op::Binary(BinaryOp::Add), vec![Some(st), Some(sl)], &["sum".to_string()]).1[0];
    let y = body.add_node("mul", Op::Binary(BinaryOp::Mul), vec![Some(sum), Some(outer)], &["y".to_string()]).1[0];
    body.outputs = vec![sum, y];
    let scan = Op::Scan { body: Box::new(body), num_scan_inputs: 1, input_axes: vec![0], output_axes: vec![1], input_directions: vec![1], output_directions: vec![0] };
    let outs = g.add_node("scan", scan, vec![Some(init), Some(x)], &["last".to_string(), "ys".to_string()]).1; // [k], [k, n]
    g.outputs = vec![outs[1]];
    let sizes: Vec<(Vec<usize>, Vec<usize>)> = (1..=4).flat_map(|n| (1..=3).map(move |k| (vec![n, k], vec![n, k]))).collect();
    assert_eq!(check_against_interpreter(&g, "bounded-scan", &sizes), (12, 0));
}

/// A CNN with a dense head (examples/mnist: two conv + 2×2 pool stages, Flatten, Gemm over 784
/// features): the Gemm's weights fix `16·⌊⌊h/2⌋/2⌋·⌊⌊w/2⌋/2⌋`, which holds for h, w in 28..=31 only.
/// Compiled with h, w bounded by 40, the dims are planned at 31 and the module matches the
/// interpreter at every size from 1 to the bound, or refuses what the interpreter refuses.
#[test]
fn dense_head_cnn_matches_the_interpreter_at_every_size() {
    use burnc_compiler::ir::{Dim, Shape, TensorType, ValueType};
    let mut g = burnc_frontends::onnx::load(&common::root().join("examples/mnist/mnist_cnn.onnx")).expect("loads").graph;
    let x = g.inputs[0];
    g.value_mut(x).ty = ValueType::Tensor(TensorType {
        dtype: burnc_compiler::ir::DType::F32,
        shape: Some(Shape(vec![Dim::Fixed(1), Dim::Fixed(1), Dim::Sym { name: "h".into(), bound: Some(40) }, Dim::Sym { name: "w".into(), bound: Some(40) }])),
    });
    let sizes: Vec<(Vec<usize>, Vec<usize>)> = (1..=40).flat_map(|h| [h, 41 - h, 30].map(move |w| (vec![1, 1, h, w], vec![h, w]))).collect();
    let (matched, refused) = check_against_interpreter(&g, "bounded-dense-head", &sizes);
    // h, w in 28..=31: (28, 30), (29, 30), (30, 30), (31, 30), (30, 11)…: the sizes the model takes.
    let valid = sizes.iter().filter(|(_, d)| d.iter().all(|v| (28..=31).contains(v))).count();
    assert_eq!((matched, refused), (valid, 0));
}

/// Compile `g` (bounded dims) once, run it at each `(input shape, dims)` and compare with the
/// interpreter on the same input.
/// Returns how many sizes matched and how many broadcasts of a bounded 1 were refused.
fn check_against_interpreter(g: &burnc_compiler::ir::Graph, key: &str, sizes: &[(Vec<usize>, Vec<usize>)]) -> (usize, usize) {
    let (mut matched, mut refused) = (0, 0);
    use burnc_compiler::interp::RtValue;
    let (gen, info) = burnc_compiler::codegen::generate_bounded(g, &Default::default()).unwrap_or_else(|e| panic!("{key}: {e}"));
    let main = bounded_main_rs(&gen, &info);
    let files: [(&str, &[u8]); 3] = [("src/model.rs", gen.source.as_bytes()), ("src/model.bin", &gen.weights), ("src/main.rs", main.as_bytes())];
    let b = Built { bin: build_crate(key, &files, Profile::Run).expect("builds"), gen, info };
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join(key);
    for (k, (shape, dims)) in sizes.iter().enumerate() {
        let numel: usize = shape.iter().product();
        let xs: Vec<f32> = (0..numel).map(|i| ((i * 37 + k * 11) % 17) as f32 / 4.0 - 2.0).collect();
        let xt = Tensor::new(shape.to_vec(), burnc_compiler::Data::F32(xs.clone()));
        let want = match burnc_compiler::interp::run(g, vec![RtValue::Tensor(xt)]) {
            Ok(mut v) => match v.remove(0) {
                RtValue::Tensor(t) => t,
                other => panic!("{other:?}"),
            },
            // A size the model cannot take (a window larger than its input): the module says so.
            Err(e) => {
                let (code, err) = run(&b, &work, &xs, dims).expect_err(&format!("{key} at {shape:?}: the interpreter refuses ({e}), so must the module"));
                assert!(code == 2 && (err.contains("too small") || err.contains("must be equal")), "{key} at {shape:?}: {err}");
                continue;
            }
        };
        let got = match run(&b, &work, &xs, dims) {
            Ok(got) => got,
            // Bounded code lays broadcasts out for equal dims: a bounded dim of 1 meeting a
            // larger one is refused (docs/BOUNDED_DIMS.md), never computed with wrong strides.
            Err((2, err)) if err.contains("broadcast dims") && err.contains("must be equal") => {
                refused += 1;
                continue;
            }
            Err(e) => panic!("{key} at {shape:?}: {e:?}"),
        };
        common::close_tensor(&got, &want, 1e-4, 1e-5).unwrap_or_else(|e| panic!("{key} at {shape:?}: {e}"));
        matched += 1;
    }
    (matched, refused)
}

/// SAME padding (pads computed at run time from the size) and ceil_mode pooling.
#[test]
fn same_padding_and_ceil_mode_match_the_interpreter() {
    use burnc_compiler::ir::{AutoPad, DType, Dim, Graph, Op, PoolKind, Shape, TensorType, ValueKind, ValueType, Window};
    let mut g = Graph::default();
    let ty = ValueType::Tensor(TensorType {
        dtype: DType::F32,
        shape: Some(Shape(vec![Dim::Fixed(1), Dim::Fixed(2), Dim::Sym { name: "h".into(), bound: Some(11) }, Dim::Sym { name: "w".into(), bound: Some(9) }])),
    });
    let x = g.add_value("x", ty, ValueKind::Input);
    g.inputs.push(x);
    let wv: Vec<f32> = (0..3 * 2 * 3 * 3).map(|i| ((i * 7) % 11) as f32 / 10.0 - 0.5).collect();
    let wt = g.add_const("wt", Tensor::new(vec![3, 2, 3, 3], burnc_compiler::Data::F32(wv)));
    let same = Window { kernel_shape: vec![3, 3], strides: vec![2, 2], pads: vec![], dilations: vec![], auto_pad: AutoPad::SameUpper, ceil_mode: false };
    let c = g.add_node("conv", Op::Conv { window: same, group: 1 }, vec![Some(x), Some(wt), None], &["c".to_string()]).1[0];
    let pool = Window { kernel_shape: vec![3, 3], strides: vec![2, 2], pads: vec![0, 0, 0, 0], dilations: vec![], auto_pad: AutoPad::NotSet, ceil_mode: true };
    let p = g.add_node("pool", burnc_compiler::ops::pool::Pool { kind: PoolKind::Max, window: pool, column_major: false }.op(), vec![Some(c)], &["p".to_string()]).1[0];
    g.outputs = vec![p];
    let sizes: Vec<(Vec<usize>, Vec<usize>)> = [(11, 9), (10, 8), (7, 5), (4, 3), (9, 9)].iter().map(|&(h, w)| (vec![1, 2, h, w], vec![h, w])).collect();
    assert_eq!(check_against_interpreter(&g, "bounded-same-ceil", &sizes).1, 0);
}

/// Sizes an op needs equal that depend on bounded dims (a MatMul's or Gemm's inner dims, the
/// dims Concat does not join, broadcast dims) are checked at run time: at every size from 1 to
/// the bounds the module equals the interpreter, or returns a `DimError` where the interpreter
/// refuses the inputs, never numbers computed with mismatched sizes.
#[test]
fn unprovable_equal_dims_are_checked_at_every_size() {
    use burnc_compiler::ir::{BinaryOp, DType, Dim, Graph, Op, Shape, TensorType, ValueKind, ValueType};
    let bounded = |name: &str, b: usize| Dim::Sym { name: name.into(), bound: Some(b) };
    let input = |g: &mut Graph, dims: Vec<Dim>| {
        let x = g.add_value("x", ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(dims)) }), ValueKind::Input);
        g.inputs.push(x);
        x
    };
    let weights = |g: &mut Graph, name: &str, shape: Vec<usize>| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|i| ((i * 13) % 23) as f32 / 20.0 - 0.5).collect();
        g.add_const(name, Tensor::new(shape, burnc_compiler::Data::F32(v)))
    };
    let node = |g: &mut Graph, name: &str, op: Op, ins: Vec<burnc_compiler::ir::ValueId>| g.add_node(name, op, ins.into_iter().map(Some).collect(), &[format!("{name}_out")]).1[0];
    let grid = |a: usize, b: usize, shape: &dyn Fn(usize, usize) -> Vec<usize>| -> Vec<(Vec<usize>, Vec<usize>)> {
        (1..=a).flat_map(|i| (1..=b).map(move |j| (i, j))).map(|(i, j)| (shape(i, j), vec![i, j])).collect()
    };

    // A CNN whose classifier was sized at the bounds: Conv → Flatten → Gemm over 3·h·w = 60.
    let mut g = Graph::default();
    let x = input(&mut g, vec![Dim::Fixed(1), Dim::Fixed(2), bounded("h", 4), bounded("w", 5)]);
    let wc = weights(&mut g, "wc", vec![3, 2, 3, 3]);
    let pad = burnc_compiler::ir::Window { kernel_shape: vec![3, 3], strides: vec![], pads: vec![1, 1, 1, 1], dilations: vec![], auto_pad: burnc_compiler::ir::AutoPad::NotSet, ceil_mode: false };
    let c = node(&mut g, "conv", Op::Conv { window: pad, group: 1 }, vec![x, wc]);
    let f = node(&mut g, "flat", Flatten { axis: 1 }.op(), vec![c]);
    let (wg, bg) = (weights(&mut g, "wg", vec![60, 4]), weights(&mut g, "bg", vec![4]));
    let y = node(&mut g, "fc", Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false }.op(), vec![f, wg, bg]);
    g.outputs = vec![y];
    // Only h = 4, w = 5 fits the classifier.
    assert_eq!(check_against_interpreter(&g, "bounded-flatten-gemm", &grid(4, 5, &|h, w| vec![1, 2, h, w])), (1, 0));

    // Batched MatMul whose inner dim is bounded against constant weights of 6 rows.
    let mut g = Graph::default();
    let x = input(&mut g, vec![bounded("n", 3), bounded("k", 6)]);
    let wm = weights(&mut g, "wm", vec![6, 2]);
    let y = node(&mut g, "mm", MatMul.op(), vec![x, wm]);
    g.outputs = vec![y];
    assert_eq!(check_against_interpreter(&g, "bounded-matmul-inner", &grid(3, 6, &|n, k| vec![n, k])), (3, 0));

    // Concat of x [a, b] with its transpose [b, a] along 0 (needs a == b), then Add of the two
    // (broadcast dims a and b).
    let mut g = Graph::default();
    let x = input(&mut g, vec![bounded("a", 3), bounded("b", 3)]);
    let t = node(&mut g, "tr", burnc_compiler::ops::transpose::Transpose { perm: Some(vec![1, 0]) }.op(), vec![x]);
    let s = node(&mut g, "sum", Op::Binary(BinaryOp::Add), vec![x, t]);
    let y = node(&mut g, "cat", Op::Concat { axis: 0 }, vec![s, t]);
    g.outputs = vec![y];
    // a == b matches (3 sizes). The interpreter also takes b = 1 < a (numpy broadcasts the 1,
    // and Concat then needs a >= b), which bounded code refuses (2 sizes); it refuses the rest.
    assert_eq!(check_against_interpreter(&g, "bounded-concat-broadcast", &grid(3, 3, &|a, b| vec![a, b])), (3, 2));
}

/// A comparison of dims (`rows == cols`, as attention graphs compare head counts) is decided
/// at the bounds and folded; `forward` checks that the run-time dims decide it the same way.
/// Sizes that agree equal the interpreter; the others are `DimError`s, never the other branch
/// computed as this one.
#[test]
fn comparisons_of_dims_are_guarded_at_run_time() {
    use burnc_compiler::interp::RtValue;
    use burnc_compiler::ir::{BinaryOp, DType, Dim, Graph, Op, Shape, TensorType, ValueKind, ValueType};
    let bounded = |name: &str| Dim::Sym { name: name.into(), bound: Some(3) };
    let mut g = Graph::default();
    let x = g.add_value("x", ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(vec![bounded("r"), bounded("c")])) }), ValueKind::Input);
    g.inputs.push(x);
    let node = |g: &mut Graph, name: &str, op: Op, ins: Vec<burnc_compiler::ir::ValueId>| g.add_node(name, op, ins.into_iter().map(Some).collect(), &[format!("{name}_out")]).1[0];
    let rows = node(&mut g, "rows", burnc_compiler::ops::dim_values::Shape { start: 0, end: Some(1) }.op(), vec![x]);
    let cols = node(&mut g, "cols", burnc_compiler::ops::dim_values::Shape { start: 1, end: Some(2) }.op(), vec![x]);
    let square = node(&mut g, "square", Op::Binary(BinaryOp::Equal), vec![rows, cols]);
    let (two, three) = (g.add_const("two", Tensor::from_f32s(vec![1], vec![2.0])), g.add_const("three", Tensor::from_f32s(vec![1], vec![3.0])));
    let k = node(&mut g, "k", burnc_compiler::ops::select::op(), vec![square, two, three]);
    let y = node(&mut g, "y", Op::Binary(BinaryOp::Mul), vec![x, k]);
    g.outputs = vec![y];

    let (gen, info) = burnc_compiler::codegen::generate_bounded(&g, &Default::default()).expect("compiles");
    assert!(gen.source.contains("rt::dims::same(") && gen.source.contains("decided at the bounds"), "the guard is in forward");
    let main = bounded_main_rs(&gen, &info);
    let files: [(&str, &[u8]); 3] = [("src/model.rs", gen.source.as_bytes()), ("src/model.bin", &gen.weights), ("src/main.rs", main.as_bytes())];
    let b = Built { bin: build_crate("bounded-guarded-comparison", &files, Profile::Run).expect("builds"), gen, info };
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bounded-guarded-comparison");
    for (r, c) in [(1, 1), (2, 2), (3, 3), (2, 3), (3, 1)] {
        let xs: Vec<f32> = (0..r * c).map(|i| i as f32 - 1.5).collect();
        let want = burnc_compiler::interp::run(&g, vec![RtValue::Tensor(Tensor::new(vec![r, c], burnc_compiler::Data::F32(xs.clone())))]).expect("interpreter");
        let RtValue::Tensor(want) = &want[0] else { panic!("a tensor") };
        match run(&b, &work, &xs, &[r, c]) {
            Ok(got) if r == c => common::close_tensor(&got, want, 1e-6, 0.0).unwrap_or_else(|e| panic!("{r}x{c}: {e}")),
            Err((2, err)) if r != c => assert!(err.contains("decided at the bounds") && err.contains("must be equal"), "{r}x{c}: {err}"),
            other => panic!("{r}x{c}: {other:?}"),
        }
    }
}

/// A convolution whose weights are a graph input has a bounded kernel: its output
/// `(x + pads − k) / s + 1` shrinks as the kernel grows, so the module sizes its buffers and
/// im2col scratch for the least kernel, not at the bounds, and takes the kernel (and SAME
/// pads) at run time. At every input and kernel size within the bounds it equals the
/// interpreter, or returns a `DimError` where the interpreter refuses the sizes (a kernel
/// wider than the padded input).
#[test]
fn convolutions_with_bounded_kernels_match_the_interpreter_at_every_size() {
    use burnc_compiler::interp::RtValue;
    use burnc_compiler::ir::{AutoPad, DType, Dim, Graph, Op, Shape, TensorType, UnaryOp, ValueKind, ValueType, Window};
    let bounded = |name: &str, b: usize| Dim::Sym { name: name.into(), bound: Some(b) };
    let input = |g: &mut Graph, name: &str, dims: Vec<Dim>| {
        let x = g.add_value(name, ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(dims)) }), ValueKind::Input);
        g.inputs.push(x);
        x
    };
    let window = |strides: &[usize], pads: &[usize], dilations: &[usize], auto_pad| Window {
        kernel_shape: vec![],
        strides: strides.to_vec(),
        pads: pads.to_vec(),
        dilations: dilations.to_vec(),
        auto_pad,
        ceil_mode: false,
    };
    // (window, group, channels of X, W's output channels, spatial rank)
    let cases = [
        ("pads-strides", window(&[2, 1], &[1, 0, 1, 1], &[], AutoPad::NotSet), 1, 2, 3, 2),
        ("same-dilated", window(&[2], &[], &[2], AutoPad::SameLower), 1, 1, 2, 1),
        ("depthwise", window(&[1, 1], &[0, 0, 0, 0], &[], AutoPad::NotSet), 2, 2, 2, 2),
    ];
    for (key, win, group, c_in, c_out, rank) in cases {
        let mut g = Graph::default();
        let (sp, ks): (Vec<Dim>, Vec<Dim>) = if rank == 2 { (vec![bounded("h", 6), bounded("w", 5)], vec![bounded("kh", 4), bounded("kw", 3)]) } else { (vec![bounded("h", 7)], vec![bounded("kh", 4)]) };
        let x = input(&mut g, "x", [vec![Dim::Fixed(1), Dim::Fixed(c_in)], sp].concat());
        let w = input(&mut g, "w", [vec![Dim::Fixed(c_out), Dim::Fixed(c_in / group)], ks].concat());
        let bias = g.add_const("b", Tensor::from_f32s(vec![c_out], (0..c_out).map(|i| i as f32 * 0.5 - 0.25).collect()));
        let c = g.add_node("conv", Op::Conv { window: win, group }, vec![Some(x), Some(w), Some(bias)], &["c".to_string()]).1[0];
        let y = g.add_node("relu", Op::Unary(UnaryOp::Relu), vec![Some(c)], &["y".to_string()]).1[0];
        g.outputs = vec![y];

        let name = format!("bounded-conv-kernel-{key}");
        let (gen, info) = burnc_compiler::codegen::generate_bounded(&g, &Default::default()).unwrap_or_else(|e| panic!("{key}: {e}"));
        let main = bounded_main_rs(&gen, &info);
        let files: [(&str, &[u8]); 3] = [("src/model.rs", gen.source.as_bytes()), ("src/model.bin", &gen.weights), ("src/main.rs", main.as_bytes())];
        let b = Built { bin: build_crate(&name, &files, Profile::Run).expect("builds"), gen, info };
        let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join(&name);
        let bounds: Vec<usize> = b.info.dims.iter().map(|(_, n)| *n).collect();
        let (mut matched, mut refused) = (0, 0);
        // Every point of the box of dims, in the module's order (h, w, kh, kw or h, kh).
        let points: usize = bounds.iter().product();
        for p in 0..points {
            let mut rest = p;
            let dims: Vec<usize> = bounds.iter().map(|&n| (rest % n + 1, rest /= n).0).collect();
            let at = |d: &str| dims[b.info.dims.iter().position(|(n, _)| n == d).expect("dim")];
            let xs_shape = if rank == 2 { vec![1, c_in, at("h"), at("w")] } else { vec![1, c_in, at("h")] };
            let ws_shape = if rank == 2 { vec![c_out, c_in / group, at("kh"), at("kw")] } else { vec![c_out, c_in / group, at("kh")] };
            let fill = |shape: &[usize], k: usize| -> Vec<f32> { (0..shape.iter().product::<usize>()).map(|i| ((i * 37 + k * 11) % 17) as f32 / 4.0 - 2.0).collect() };
            let (xv, wv) = (fill(&xs_shape, p), fill(&ws_shape, p + 3));
            let feeds = vec![RtValue::Tensor(Tensor::from_f32s(xs_shape.clone(), xv.clone())), RtValue::Tensor(Tensor::from_f32s(ws_shape.clone(), wv.clone()))];
            let got = run_inputs(&b, &work, &[&xv, &wv], &dims);
            match (burnc_compiler::interp::run(&g, feeds), got) {
                (Ok(want), Ok(got)) => {
                    let RtValue::Tensor(want) = &want[0] else { panic!("a tensor") };
                    common::close_tensor(&got, want, 1e-4, 1e-5).unwrap_or_else(|e| panic!("{key} at {xs_shape:?} * {ws_shape:?}: {e}"));
                    matched += 1;
                }
                (Err(_), Err((2, err))) if err.contains("too small") => refused += 1,
                (want, got) => panic!("{key} at {xs_shape:?} * {ws_shape:?}: interpreter {:?}, module {:?}", want.map(|_| ()), got.map(|_| ())),
            }
        }
        // SAME pads fit any kernel; explicit ones refuse kernels wider than the padded input.
        assert!(matched > points / 3 && (refused > 0) == (key != "same-dilated"), "{key}: {matched} matched, {refused} refused of {points}");
    }
}

/// [`run`] with one input file per graph input.
fn run_inputs(b: &Built, work: &Path, inputs: &[&[f32]], dims: &[usize]) -> Result<Tensor, (i32, String)> {
    std::fs::create_dir_all(work).expect("work dir");
    for (i, x) in inputs.iter().enumerate().skip(1) {
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(work.join(format!("in_{i}.bin")), bytes).expect("write input");
    }
    run(b, work, inputs[0], dims)
}
