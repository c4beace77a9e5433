//! onnxruntime's contrib ops that burnc lowers to standard ops (frontends/src/onnx/contrib.rs):
//! Gelu, BiasGelu, FastGelu (with and without bias), QuickGelu, SkipLayerNormalization (with
//! its sum output), SkipSimplifiedLayerNormalization, BiasAdd, FusedConv, FusedGemm,
//! FusedMatMul, TransposeMatMul, the QLinear elementwise ops, QLinear(Global)AveragePool,
//! QLinearConcat, the com.microsoft (De)QuantizeLinear, BiasSplitGelu, MatMulIntegerToFloat,
//! DynamicQuantizeMatMul, QGemm, Attention and MultiHeadAttention (with a padding mask),
//! QAttention (per-tensor and per-column weight scales),
//! EmbedLayerNormalization, RotaryEmbedding, SimplifiedLayerNormalization and
//! DynamicQuantizeLSTM, MatMulNBits (int4 and int8 blocks, kept packed) and
//! GatherBlockQuantized, NhwcConv (against Conv between Transposes: onnxruntime has no CPU
//! kernel for it), GroupQueryAttention (prompt, decode, shared buffer, packed QKV), and
//! string tensors (StringNormalizer, StringConcat, RegexFullMatch,
//! LabelEncoder, StringSplit, Equal, Cast to and from string), through the interpreter and
//! through generated code, against onnxruntime's outputs (scripts/make_contrib_models.py;
//! BiasAdd and BiasSplitGelu, which onnxruntime only has for CUDA, against numpy).
use burnc_compiler::Tensor;
use std::path::Path;
use std::process::Command;

mod common;

fn pb(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match burnc_frontends::onnx::values::decode_value(&bytes, burnc_frontends::onnx::values::ValueKindHint::Tensor).expect("decode") {
        burnc_compiler::interp::RtValue::Tensor(t) => t,
        other => panic!("{}: {other:?}", path.display()),
    }
}

/// Runs `dir/model.onnx` on its inputs (interpreter, or generated code) and compares every
/// output with the reference at tolerance `(rtol, atol)`.
fn check(dir: &Path, codegen: bool, (rtol, atol): (f64, f64)) {
    let out = dir.join(if codegen { "got_codegen" } else { "got_interp" });
    let _ = std::fs::remove_dir_all(&out);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_burnc"));
    cmd.arg("run").arg(dir.join("model.onnx"));
    for input in common::numbered(dir, "input_") {
        cmd.arg("--input").arg(input);
    }
    cmd.arg("-o").arg(&out);
    if codegen {
        cmd.arg("--codegen");
    }
    let r = cmd.output().expect("spawn burnc");
    assert!(r.status.success(), "burnc run{}: {}", if codegen { " --codegen" } else { "" }, String::from_utf8_lossy(&r.stderr));
    let want = common::numbered(dir, "output_");
    assert!(!want.is_empty());
    for (i, w) in want.iter().enumerate() {
        let got = pb(&out.join(format!("output_{i}.pb")));
        let want = pb(w);
        let what = if codegen { "generated code" } else { "interpreter" };
        if want.dtype().is_float() || want.dtype() == burnc_compiler::ir::DType::Str {
            common::close_tensor(&got, &want, rtol, atol).unwrap_or_else(|e| panic!("{} output {i} ({what}): {e}", dir.display()));
        } else {
            // Quantized outputs: onnxruntime folds the scales its own way; like its tests, allow
            // one quantization step.
            assert_eq!((got.dtype(), &got.shape), (want.dtype(), &want.shape), "{} output {i} ({what})", dir.display());
            let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
            let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(worst <= 1.0, "{} output {i} ({what}): off by {worst}", dir.display());
        }
    }
}

/// Light models as onnxruntime's optimiser leaves them at the `all` level (com.microsoft.nchwc
/// ops, FusedConv, FusedGemm), a mobile-style net with depthwise convolutions through the same
/// optimiser, light models quantized by onnxruntime.quantization (QOperator, per channel), and
/// those through the optimiser (channels-last QLinearConv, QLinearGlobalAveragePool), and a
/// small BERT encoder through onnxruntime.transformers.optimizer, then quantize_dynamic:
/// scripts/make_optimized_models.py, against onnxruntime on the same files, at the ONNX tests'
/// tolerance (the quantized ones match exactly here).
#[test]
fn optimized_and_quantized_models_match_onnxruntime() {
    let status = Command::new("bash").arg(common::root().join("scripts/setup_python.sh")).status().expect("run setup_python.sh");
    assert!(status.success());
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("optimized_models");
    let _done = common::lean::LeanCleanup(vec![dir.clone()]);
    let status = Command::new("python3")
        .arg(common::root().join("scripts/make_optimized_models.py"))
        .arg(common::data_dir())
        .arg(&dir)
        .status()
        .expect("run make_optimized_models.py");
    assert!(status.success(), "make_optimized_models.py failed");
    let cases: Vec<_> = std::fs::read_dir(&dir).expect("cases").filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.join("model.onnx").exists()).collect();
    assert!(cases.len() >= 17, "{} cases", cases.len());
    for case in cases {
        check(&case, false, (1e-3, 1e-5));
        check(&case, true, (1e-3, 1e-5));
    }
}

#[test]
fn contrib_ops_match_onnxruntime() {
    let status = Command::new("bash").arg(common::root().join("scripts/setup_python.sh")).status().expect("run setup_python.sh");
    assert!(status.success());
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("contrib_ops");
    let status = Command::new("python3").arg(common::root().join("scripts/make_contrib_models.py")).arg(&dir).status().expect("run make_contrib_models.py");
    assert!(status.success(), "make_contrib_models.py failed");
    // A decoder step with a KV cache whose MatMuls onnxruntime's own MatMulNBitsQuantizer
    // turned into int4 and int8 blocks (scripts/make_decoder_model.py), small enough for a test.
    for bits in ["4", "8"] {
        let status = Command::new("python3")
            .arg(common::root().join("scripts/make_decoder_model.py"))
            .arg(dir.join(format!("decoder_q{bits}")))
            .args(["--layers", "2", "--hidden", "128", "--heads", "4", "--ffn", "256", "--vocab", "512", "--past", "16", "--bits", bits, "--reference"])
            .status()
            .expect("run make_decoder_model.py");
        assert!(status.success(), "make_decoder_model.py failed");
    }
    // The ONNX tests' tolerance, but against onnxruntime's own DynamicQuantizeLSTM kernel
    // (which also rounds X and the hidden state to 8 bits) its quantization tests' one.
    let onnx_tests = (1e-3, 1e-5);
    let cases = [
        ("bias_add", onnx_tests),
        ("fused", onnx_tests),
        ("qlinear", onnx_tests),
        ("bias_split_gelu", onnx_tests),
        ("quantized_products", onnx_tests),
        ("attention", onnx_tests),
        ("qattention", onnx_tests),
        ("embed_layer_norm", onnx_tests),
        ("rotary_embedding", onnx_tests),
        ("simplified_layer_norm", onnx_tests),
        ("dynamic_quantize_lstm", onnx_tests),
        ("dynamic_quantize_lstm_ort", (1e-2, 5e-2)),
        ("matmul_nbits", onnx_tests),
        ("gather_block_quantized", onnx_tests),
        ("gather_block_quantized_default_zero", onnx_tests),
        ("strings", onnx_tests),
        ("gqa_prompt", onnx_tests),
        ("gqa_decode", onnx_tests),
        ("gqa_shared_buffer", onnx_tests),
        ("gqa_packed", onnx_tests),
        ("nhwc_conv", onnx_tests),
        ("decoder_q4", onnx_tests),
        ("decoder_q8", onnx_tests),
    ];
    for (case, tol) in std::iter::once((dir.clone(), onnx_tests)).chain(cases.iter().map(|(c, tol)| (dir.join(c), *tol))) {
        check(&case, false, tol);
        check(&case, true, tol);
    }
}
