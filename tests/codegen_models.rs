//! The nine light models (stock and with random weights) through generated code agree with
//! the interpreter to 1e-5 relative: `burnc run --codegen` vs `burnc run`, same inputs. With
//! `--fuse` (what `burnc MODEL -o` generates: BatchNorm folded into weights, which changes
//! rounding) they match the suites' reference outputs (onnx's runner for the stock models,
//! onnxruntime for the random-weight ones) as the conformance test compares them.
mod common;
use burnc_compiler::interp::RtValue;
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};
use common::{data_dir, numbered};
use std::path::Path;
use std::process::Command;

fn outputs(dir: &Path) -> Vec<RtValue> {
    numbered(dir, "output_")
        .iter()
        .map(|p| decode_value(&std::fs::read(p).expect("read output"), ValueKindHint::Tensor).expect("decode output"))
        .collect()
}

fn run(case: &Path, codegen: bool, fuse: bool, out: &Path) -> Result<(), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_burnc"));
    cmd.arg("run");
    if codegen {
        cmd.arg("--codegen");
    }
    if fuse {
        cmd.arg("--fuse");
    }
    cmd.arg(case.join("model.onnx"));
    for i in numbered(&case.join("test_data_set_0"), "input_") {
        cmd.arg("--input").arg(i);
    }
    let o = cmd.arg("-o").arg(out).output().map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).trim().to_string())
    }
}

#[test]
fn light_models_codegen_matches_interpreter() {
    let data = data_dir();
    let scratch = common::root().join("target/codegen-models");
    let mut failures = Vec::new();
    let mut checked = 0;
    // BURNC_CONFORMANCE_FILTER=NAME: only the models whose folder name contains NAME.
    let filter = std::env::var("BURNC_CONFORMANCE_FILTER").ok();
    for suite in ["light", "light_random"] {
        let Ok(rd) = std::fs::read_dir(data.join(suite)) else { continue };
        let mut cases: Vec<_> = rd.flatten().map(|e| e.path()).filter(|p| p.join("model.onnx").exists()).collect();
        cases.sort();
        for case in cases {
            let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
                continue;
            }
            let (a, b, c) = (scratch.join(format!("{name}-interp")), scratch.join(format!("{name}-codegen")), scratch.join(format!("{name}-fused")));
            if let Err(e) = run(&case, false, false, &a).and_then(|_| run(&case, true, false, &b)).and_then(|_| run(&case, true, true, &c)) {
                failures.push(format!("{name}: {e}"));
                continue;
            }
            let (want, got) = (outputs(&a), outputs(&b));
            if want.len() != got.len() {
                failures.push(format!("{name}: {} outputs vs {}", got.len(), want.len()));
                continue;
            }
            let mut worst = 0.0f64;
            for (g, w) in got.iter().zip(&want) {
                if let Err(e) = common::close(g, w, 1e-5, 1e-6) {
                    failures.push(format!("{name}: {e}"));
                }
                if let (RtValue::Tensor(g), RtValue::Tensor(w)) = (g, w) {
                    for (x, y) in g.to_f64_vec().iter().zip(w.to_f64_vec()) {
                        worst = worst.max((x - y).abs() / y.abs().max(1e-30));
                    }
                }
            }
            println!("{suite}/{name}: codegen vs interpreter, max relative difference {worst:.2e}");
            let reference = outputs(&case.join("test_data_set_0"));
            let fused = outputs(&c);
            if fused.len() != reference.len() {
                failures.push(format!("{name} (fused): {} outputs vs {}", fused.len(), reference.len()));
            }
            for (g, w) in fused.iter().zip(&reference) {
                if let Err(e) = common::close(g, w, 1e-3, 1e-5) {
                    failures.push(format!("{name} (fused) vs reference: {e}"));
                }
            }
            let _ = std::fs::remove_dir_all(&c);
            checked += 1;
            let _ = std::fs::remove_dir_all(&a);
            let _ = std::fs::remove_dir_all(&b);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if filter.is_none() {
        assert_eq!(checked, 18, "expected the 9 light models and their 9 random-weight variants");
    }
}

/// Elementwise chains in generated code (`Op::Elementwise`, one loop per chain) give the
/// interpreter's bits on the unfused graph: SiLU, a HardSwish written out with scalar
/// constants, a chain reading a second full-size input and a bias of the last dim (rows of 7),
/// and an output also read by a chain.
#[test]
fn elementwise_chains_in_one_loop_match_the_interpreter_bit_for_bit() {
    use burnc_compiler::ir::{BinaryOp, DType, Graph, Op, Shape, TensorType, UnaryOp, ValueId, ValueKind, ValueType};
    use burnc_compiler::{Data, Tensor};
    let mut g = Graph::default();
    let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(&[2, 3, 7])) });
    let x = g.add_value("x", ty.clone(), ValueKind::Input);
    let y = g.add_value("y", ty, ValueKind::Input);
    g.inputs = vec![x, y];
    let node = |g: &mut Graph, name: &str, op: Op, ins: Vec<ValueId>| g.add_node(name, op, ins.into_iter().map(Some).collect(), &[format!("{name}_out")]).1[0];
    let k = |g: &mut Graph, name: &str, v: f32| g.add_const(name, Tensor::new(vec![], Data::F32(vec![v])));
    let s = node(&mut g, "sig", Op::Unary(UnaryOp::Sigmoid), vec![x]);
    let m = node(&mut g, "silu", Op::Binary(BinaryOp::Mul), vec![x, s]);
    let (three, zero, six) = (k(&mut g, "three", 3.0), k(&mut g, "zero", 0.0), k(&mut g, "six", 6.0));
    let a = node(&mut g, "plus3", Op::Binary(BinaryOp::Add), vec![m, three]);
    let c = node(&mut g, "relu6_lo", Op::Binary(BinaryOp::Max), vec![a, zero]);
    let d = node(&mut g, "relu6_hi", Op::Binary(BinaryOp::Min), vec![c, six]);
    let e = node(&mut g, "times", Op::Binary(BinaryOp::Mul), vec![m, d]);
    let h = node(&mut g, "hardswish", Op::Binary(BinaryOp::Div), vec![e, six]);
    let t = node(&mut g, "tanh_y", Op::Unary(UnaryOp::Tanh), vec![y]);
    let ex = node(&mut g, "exp", Op::Unary(UnaryOp::Exp), vec![t]);
    let z = node(&mut g, "diff", Op::Binary(BinaryOp::Sub), vec![ex, h]);
    let l = node(&mut g, "leaky", Op::Unary(UnaryOp::LeakyRelu { alpha: 0.125 }), vec![z]);
    let gate = node(&mut g, "gate", Op::Binary(BinaryOp::Mul), vec![l, y]);
    let bias = g.add_const("bias", Tensor::new(vec![7], Data::F32((0..7).map(|i| i as f32 * 0.25 - 1.0).collect())));
    let biased = node(&mut g, "biased", Op::Binary(BinaryOp::Add), vec![gate, bias]);
    let w = node(&mut g, "relu", Op::Unary(UnaryOp::Relu), vec![biased]);
    g.outputs = vec![h, t, w];
    burnc_compiler::passes::prepare(&mut g).expect("prepare");
    let vals = |seed: usize| -> Vec<f32> { (0..42).map(|i| (((i * 29 + seed * 7) % 31) as f32 - 15.0) / 4.0).collect() };
    let inputs = vec![RtValue::Tensor(Tensor::new(vec![2, 3, 7], Data::F32(vals(1)))), RtValue::Tensor(Tensor::new(vec![2, 3, 7], Data::F32(vals(2))))];
    let want = burnc_compiler::interp::run(&g, inputs.clone()).expect("interpreter");
    // Exact code (no rounding-changing fusion): the chains are still one loop each.
    let p = burnc::harness::generate_for(&g, &inputs, "chains", false).expect("codegen");
    // One chain reads an input by index, one runs in place over its output alone.
    assert_eq!(p.gen.source.matches("for j in 0..42").count(), 1, "{}", p.gen.source);
    assert_eq!(p.gen.source.matches("for y_j in y.iter_mut()").count(), 1, "{}", p.gen.source);
    assert_eq!(p.gen.source.matches("for row in (0..42).step_by(7)").count(), 1, "{}", p.gen.source);
    assert!(p.gen.source.contains("eval_f32(Unary::Sigmoid, x0[j])"), "{}", p.gen.source);
    let bin = burnc::harness::build(&p.gen, "elementwise-chains").expect("harness builds");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("elementwise-chains");
    let got = burnc::harness::run(&bin, &p, &work).expect("generated code runs");
    assert_eq!(got.len(), want.len());
    for (gv, wv) in got.iter().zip(&want) {
        let (RtValue::Tensor(gt), RtValue::Tensor(wt)) = (gv, wv) else { panic!("tensors") };
        let bits = |t: &Tensor| t.to_f64_vec().iter().map(|v| (*v as f32).to_bits()).collect::<Vec<_>>();
        assert_eq!(gt.shape, wt.shape);
        assert_eq!(bits(gt), bits(wt));
    }
}
