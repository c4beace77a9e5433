//! Every op of `burnc_compiler::ops` on its examples (`ops::examples`): the interpreter, generated
//! code with the shapes pinned, and bounded-dims code (each input dim bounded by twice its size,
//! run at the example's size) must give the same outputs. They call the same kernels, so the
//! comparison is to 1e-6 relative.
use burnc::harness::bounded::{build_bounded, generate_bounded_for, run_bounded};
use burnc_compiler::codegen::CodegenOptions;
use burnc_compiler::interp::{self, RtValue};
use burnc_compiler::ir::{Graph, Op, Shape, TensorType, ValueKind, ValueType};

mod common;

fn graph(ex: &burnc_compiler::ops::Example) -> Graph {
    let mut g = Graph::default();
    let ins: Vec<_> = ex
        .inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let ty = ValueType::Tensor(TensorType { dtype: t.dtype(), shape: Some(Shape::fixed(&t.shape)) });
            let v = g.add_value(format!("x{i}"), ty, ValueKind::Input);
            g.inputs.push(v);
            Some(v)
        })
        .collect();
    let (_, outs) = g.add_node(ex.op.name(), Op::Def(ex.op.clone()), ins, &["y".into()]);
    g.outputs = outs;
    g
}

#[test]
fn every_op_definition_agrees_in_all_three_paths() {
    let examples = burnc_compiler::ops::examples();
    assert!(!examples.is_empty());
    let work = std::env::temp_dir().join(format!("burnc-op-defs-{}", std::process::id()));
    for ex in &examples {
        let name = ex.op.name();
        let g = graph(ex);
        let values: Vec<RtValue> = ex.inputs.iter().cloned().map(RtValue::Tensor).collect();
        let want = interp::run(&g, values.clone()).unwrap_or_else(|e| panic!("{name}: interpreter: {e}"));

        let fixed = burnc::harness::generate_for(&g, &values, name, false).unwrap_or_else(|e| panic!("{name}: codegen: {e}"));
        let bin = burnc::harness::build(&fixed.gen, &format!("op-defs {name} {:?}", ex.op)).unwrap_or_else(|e| panic!("{name}: build: {e}"));
        let got = burnc::harness::run(&bin, &fixed, &work.join("fixed")).unwrap_or_else(|e| panic!("{name}: run: {e}"));
        for (g, w) in got.iter().zip(&want) {
            common::close(g, w, 1e-6, 0.0).unwrap_or_else(|e| panic!("{name}, fixed shapes: {e}"));
        }

        let opts = CodegenOptions { weights_file: "model.bin".into(), source_name: name.into(), ..Default::default() };
        let bounded = generate_bounded_for(&g, &values, 2, &opts).unwrap_or_else(|e| panic!("{name}: bounded codegen: {e}"));
        assert!(!bounded.info.dims.is_empty(), "{name}: the bounded module has no named dims");
        let bin = build_bounded(&bounded, &format!("op-defs {name} {:?}", ex.op)).unwrap_or_else(|e| panic!("{name}: bounded build: {e}"));
        let got = run_bounded(&bin, &bounded, &work.join("bounded")).unwrap_or_else(|e| panic!("{name}: bounded run: {e}"));
        assert_eq!(got.len(), want.len(), "{name}: outputs");
        for (g, w) in got.iter().zip(&want) {
            common::close(g, w, 1e-6, 0.0).unwrap_or_else(|e| panic!("{name}, bounded dims: {e}"));
        }
        println!("{name}: interpreter, fixed and bounded code agree on {:?}", ex.inputs.iter().map(|t| t.shape.clone()).collect::<Vec<_>>());
    }
    let _ = std::fs::remove_dir_all(&work);
}
