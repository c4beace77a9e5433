//! burnc's generated code on aarch64: the bundled MNIST CNN, two light models with random
//! weights and a sample of node cases over the op families are generated here, built into one
//! harness binary for `aarch64-unknown-linux-gnu` (the runtime's NEON kernels) and run under
//! `qemu-aarch64` user mode; their outputs must match the interpreter (MNIST) or the suites'
//! reference outputs at the ONNX tolerances (rtol 1e-3, atol 1e-5). Correctness only: speed
//! under emulation says nothing about Arm hardware.
//!
//! Needs Debian's cross GCC (`aarch64-linux-gnu-gcc`, the linker), `qemu-aarch64` and the
//! Rust target (scripts/setup_aarch64.sh installs them); skips without them, unless
//! `BURNC_REQUIRE_AARCH64=1` (CI) makes that an error.
mod common;
use burnc::harness::{Prepared, Profile};
use burnc_compiler::interp::RtValue;
use burnc_compiler::{Data, Tensor};
use common::{close, data_dir, root};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Node cases, a few per op family (convolution, GEMM, pooling, normalisation, reductions,
/// recurrent, attention, quantisation, elementwise, data movement); all on the codegen
/// pass-list and none with machine-dependent references.
const NODE_CASES: &[&str] = &[
    "test_conv_with_strides_padding",
    "test_conv_with_autopad_same",
    "test_basic_conv_with_padding",
    "test_convtranspose_pads",
    "test_gemm_all_attributes",
    "test_gemm_default_matrix_bias",
    "test_matmul_2d",
    "test_matmul_4d",
    "test_einsum_batch_matmul",
    "test_maxpool_2d_strides",
    "test_averagepool_2d_pads",
    "test_globalaveragepool",
    "test_batchnorm_example",
    "test_instancenorm_example",
    "test_layer_normalization_4d_axis1",
    "test_group_normalization_example",
    "test_rms_normalization_2d_axis0",
    "test_lrn",
    "test_softmax_axis_1",
    "test_logsoftmax_axis_1",
    "test_reduce_mean_keepdims_random",
    "test_reduce_sum_keepdims_random",
    "test_reduce_max_keepdims_random",
    "test_argmax_default_axis_example",
    "test_top_k",
    "test_cumsum_1d",
    "test_lstm_defaults",
    "test_gru_defaults",
    "test_attention_3d",
    "test_quantizelinear",
    "test_dequantizelinear",
    "test_qlinearmatmul_2D_uint8_float32",
    "test_relu",
    "test_sigmoid",
    "test_tanh",
    "test_exp",
    "test_log",
    "test_erf",
    "test_gelu_tanh_2",
    "test_mish",
    "test_hardswish",
    "test_pow",
    "test_add_bcast",
    "test_div_bcast",
    "test_prelu_broadcast",
    "test_where_example",
    "test_clip",
    "test_resize_upsample_scales_linear",
    "test_gridsample",
    "test_gather_0",
    "test_scatter_elements_with_axis",
    "test_concat_2d_axis_0",
    "test_transpose_all_permutations_2",
    "test_depthtospace_crd_mode_example",
    "test_constant_pad",
    "test_tile",
    "test_dft",
];

/// Light models with random weights (scripts/gen_light_random.py, generated with the
/// conformance data), compared with onnxruntime's outputs.
const LIGHT_MODELS: &[&str] = &["light_squeezenet_random", "light_shufflenet_random"];

struct Case {
    name: String,
    p: Prepared,
    expected: Vec<RtValue>,
}

/// Whether the cross linker, qemu-aarch64 and Rust's aarch64 standard library are there;
/// Err says what is missing.
fn tools() -> Result<(), String> {
    let runs = |cmd: &str, arg: &str| Command::new(cmd).arg(arg).output().is_ok_and(|o| o.status.success());
    if !runs("aarch64-linux-gnu-gcc", "--version") {
        return Err("aarch64-linux-gnu-gcc not found".into());
    }
    if !runs("qemu-aarch64", "--version") {
        return Err("qemu-aarch64 not found".into());
    }
    let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output().map_err(|e| e.to_string())?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if !sysroot.join("lib/rustlib").join(burnc::harness::AARCH64_TARGET).exists() {
        return Err(format!("the Rust target {} is not installed", burnc::harness::AARCH64_TARGET));
    }
    Ok(())
}

/// Run case `i` of the aarch64 binary under qemu and compare its outputs.
fn run_case(bin: &Path, i: usize, c: &Case, work: &Path) -> Result<(), String> {
    let dir = work.join(format!("case{i}"));
    let _ = std::fs::remove_dir_all(&dir);
    burnc::harness::write_inputs(&c.p, &dir).map_err(|e| e.to_string())?;
    let out = Command::new("qemu-aarch64")
        .args(["-L", "/usr/aarch64-linux-gnu"])
        .arg(bin)
        .arg(i.to_string())
        .arg(&dir)
        .output()
        .map_err(|e| format!("cannot run qemu-aarch64: {e}"))?;
    if !out.status.success() {
        return Err(format!("crashed under qemu: {}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")));
    }
    let got = burnc::harness::read_outputs(&c.p, &dir).map_err(|e| e.to_string())?;
    if got.len() != c.expected.len() {
        return Err(format!("{} outputs, expected {}", got.len(), c.expected.len()));
    }
    for (k, (g, want)) in got.iter().zip(&c.expected).enumerate() {
        close(g, want, 1e-3, 1e-5).map_err(|e| format!("output {k}: {e}"))?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn generated_code_runs_on_aarch64_under_qemu() {
    if let Err(why) = tools() {
        assert!(std::env::var("BURNC_REQUIRE_AARCH64").as_deref() != Ok("1"), "BURNC_REQUIRE_AARCH64=1 but {why} (scripts/setup_aarch64.sh installs the tools)");
        println!("skipped: {why} (scripts/setup_aarch64.sh installs the tools)");
        return;
    }
    let mut cases = Vec::new();
    // The bundled MNIST CNN, against the interpreter on this machine.
    let mnist = burnc_frontends::onnx::load(&root().join("examples/mnist/mnist_cnn.onnx")).expect("load mnist_cnn.onnx");
    let x = Tensor::new(vec![1, 1, 28, 28], Data::F32((0..784).map(|i| ((i * 37) % 255) as f32 / 255.0).collect()));
    let feeds = vec![RtValue::Tensor(x)];
    let expected = burnc_compiler::interp::run(&mnist.graph, feeds.clone()).expect("interpreter runs mnist");
    let p = burnc::harness::generate_for(&mnist.graph, &feeds, "aarch64 mnist_cnn", true).expect("generate mnist_cnn");
    cases.push(Case { name: "mnist_cnn".into(), p, expected });
    // Light models and node cases, against their reference outputs.
    let data = data_dir();
    let dirs = LIGHT_MODELS.iter().map(|m| data.join("light_random").join(m)).chain(NODE_CASES.iter().map(|c| data.join("node").join(c)));
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let common::NodeCase { model, inputs, expected } = common::node_case(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let p = burnc::harness::generate_for(&model.graph, &inputs, &format!("aarch64 {name}"), true).unwrap_or_else(|e| panic!("{name}: codegen: {e}"));
        cases.push(Case { name, p, expected });
    }
    // One crate, one build: module m<i> per case, `BIN i DIR` runs case i.
    let mut main = String::from("#![allow(clippy::all, dead_code, unused_labels)]\nuse burnc_runtime as rt;\nuse std::path::Path;\n");
    main += burnc::harness::READ_FN;
    main += burnc::harness::WRITE_FN;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let src = c.p.gen.source.replace("include_bytes!(\"model.bin\")", &format!("include_bytes!(\"m{i}.bin\")"));
        files.push((format!("src/m{i}.rs"), src.into_bytes()));
        files.push((format!("src/m{i}.bin"), c.p.gen.weights.clone()));
        main += &format!("mod m{i} {{ include!(\"m{i}.rs\"); }}\n");
        main += &common::batch::module_runner(i, &c.p.gen, "dir: &Path");
    }
    main += "fn main() {\n    let mut a = std::env::args().skip(1);\n    let i: usize = a.next().and_then(|s| s.parse().ok()).expect(\"index\");\n    let dir = std::path::PathBuf::from(a.next().expect(\"dir\"));\n    match i {\n";
    for i in 0..cases.len() {
        main += &format!("        {i} => run_{i}(&dir),\n");
    }
    main += "        _ => panic!(\"no such case\"),\n    }\n}\n";
    files.push(("src/main.rs".into(), main.into_bytes()));
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
    let t = std::time::Instant::now();
    let bin = burnc::harness::build_crate("aarch64 sample", &refs, Profile::RunAarch64).unwrap_or_else(|e| panic!("aarch64 build: {e}"));
    println!("built {} modules for {} in {:.0} s", cases.len(), burnc::harness::AARCH64_TARGET, t.elapsed().as_secs_f64());
    let work = root().join("target/aarch64-work");
    let t = std::time::Instant::now();
    let failures: Vec<String> = cases.iter().enumerate().filter_map(|(i, c)| run_case(&bin, i, c, &work).err().map(|e| format!("{}: {e}", c.name))).collect();
    println!("ran {} cases under qemu-aarch64 in {:.0} s", cases.len(), t.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{} of {} cases failed on aarch64:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
