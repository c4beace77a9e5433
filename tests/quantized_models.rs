//! QDQ models (scripts/make_qdq_models.py: onnxruntime's static quantizer, per channel, u8 and
//! i8 activations; a CNN and an MLP of MatMul and Gemms) against onnxruntime's outputs:
//! generated code with fusion (`burnc run --codegen --fuse`, where the QDQ convolutions become
//! integer QLinearConvs on `runtime::kernels::qconv` and the products QLinearMatMuls on
//! `runtime::kernels::qgemm`) and the interpreter (the float graph as written). Both may land
//! one quantization step away from onnxruntime where a value sits on a rounding boundary, so
//! the bar is: every output within one step, and nearly all equal.
mod common;
use burnc_compiler::interp::RtValue;
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};
use std::path::Path;
use std::process::Command;

fn output(path: &Path) -> Vec<f64> {
    match decode_value(&std::fs::read(path).expect("read output"), ValueKindHint::Tensor).expect("decode output") {
        RtValue::Tensor(t) => t.to_f64_vec(),
        other => panic!("{}: {other:?}", path.display()),
    }
}

fn run(case: &Path, codegen: bool, out: &Path) -> Vec<f64> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_burnc"));
    cmd.arg("run");
    if codegen {
        cmd.args(["--codegen", "--fuse"]);
    }
    cmd.arg(case.join("model.onnx")).arg("--input").arg(case.join("test_data_set_0/input_0.pb")).arg("-o").arg(out);
    let o = cmd.output().expect("run burnc");
    assert!(o.status.success(), "{}: {}", case.display(), String::from_utf8_lossy(&o.stderr));
    output(&out.join("output_0.pb"))
}

#[test]
fn qdq_models_match_onnxruntime_within_one_step() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("qdq-models");
    let script = common::root().join("scripts/make_qdq_models.py");
    let o = Command::new("python3").arg(&script).arg(&dir).output().expect("python3");
    assert!(o.status.success(), "{} failed (scripts/setup_python.sh installs numpy, onnx, onnxruntime):\n{}", script.display(), String::from_utf8_lossy(&o.stderr));
    // Each case, the integer kernel its products run on, and how many.
    let cases = [("qdq_cnn_u8", "qconv::qlinear_conv_prepacked(", 5), ("qdq_cnn_s8", "qconv::qlinear_conv_prepacked(", 5), ("qdq_mlp_u8", "qgemm::qlinear_matmul_prepacked(", 3), ("qdq_mlp_s8", "qgemm::qlinear_matmul_prepacked(", 3)];
    for (name, kernel, count) in cases {
        let case = dir.join(name);
        // The fused module runs the integer kernel: its source calls it for every product.
        let src = dir.join(format!("{name}.rs"));
        let gen = Command::new(env!("CARGO_BIN_EXE_burnc")).arg(case.join("model.onnx")).arg("-o").arg(&src).output().expect("burnc");
        assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
        let text = std::fs::read_to_string(&src).expect("generated source");
        assert_eq!(text.matches(kernel).count(), count, "{name}: the QDQ products do not all run on {kernel}");
        let step: f64 = std::fs::read_to_string(case.join("step.txt")).expect("step.txt").trim().parse().expect("step");
        let want = output(&case.join("test_data_set_0/output_0.pb"));
        for (how, got) in [("generated code", run(&case, true, &dir.join(format!("{name}-codegen")))), ("interpreter", run(&case, false, &dir.join(format!("{name}-interp"))))] {
            assert_eq!(got.len(), want.len());
            let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
            let equal = got.iter().zip(&want).filter(|(g, w)| (*g - *w).abs() < step * 1e-3).count();
            println!("{name} ({how}): {equal} of {} equal to onnxruntime's, worst {:.2} steps", want.len(), worst / step);
            assert!(worst <= step * 1.001, "{name} ({how}): {worst} is more than one step ({step}) from onnxruntime");
            assert!(equal * 100 >= want.len() * 98, "{name} ({how}): only {equal} of {} equal to onnxruntime's", want.len());
        }
    }
}
