//! Every op of `burnc_compiler::ops` on its examples (`ops::examples`): the interpreter, generated
//! code with the shapes pinned, and bounded-dims code (each input dim bounded by twice its size)
//! must give the same outputs. They call the same kernels, so the comparison is to 1e-6
//! relative. The bounded module runs at the example's size and, along the first input's first
//! dim, at every size from 1 to its bound (inputs sharing that dim resized with it): equal to
//! the interpreter, or refused by both (or, where the interpreter gives an empty output, refused
//! by bounded code as a size below 1). Inputs an example lists in `consts` are constants; an
//! example whose other inputs are scalars (a Range, a window of a constant size) has no dim to
//! bound, so only the interpreter and fixed code are compared.
use burnc::harness::bounded::{build_bounded, generate_bounded_for, run_bounded, run_bounded_on};
use burnc_compiler::Tensor;
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
            if ex.consts.contains(&i) {
                return Some(g.add_const(format!("c{i}"), t.clone()));
            }
            let ty = ValueType::Tensor(TensorType { dtype: t.dtype(), shape: Some(Shape::fixed(&t.shape)) });
            let v = g.add_value(format!("x{i}"), ty, ValueKind::Input);
            g.inputs.push(v);
            Some(v)
        })
        .collect();
    // As many outputs as the op gives for these inputs.
    let given: Vec<Option<&Tensor>> = ex.inputs.iter().map(Some).collect();
    let n = ex.op.shapes(&mut burnc_compiler::ops::ShapeCx::of_tensors(&given)).map_or(1, |o| o.len());
    let names: Vec<String> = (0..n).map(|k| format!("y{k}")).collect();
    let (_, outs) = g.add_node(ex.op.name(), Op::Def(ex.op.clone()), ins, &names);
    g.outputs = outs;
    g
}

/// `t` with its first dim made `size`: rows repeated cyclically (or cut).
fn resized(t: &Tensor, size: usize) -> Tensor {
    let rows = t.shape[0];
    let row: usize = t.shape[1..].iter().product();
    let idx: Vec<usize> = (0..size * row).map(|i| (i / row) % rows * row + i % row).collect();
    let mut shape = t.shape.clone();
    shape[0] = size;
    if let burnc_compiler::tensor::Data::Str(v) = &t.data {
        return Tensor::new(shape, burnc_compiler::tensor::Data::Str(idx.iter().map(|&i| v[i].clone()).collect()));
    }
    let data = burnc_compiler::tensor::Data::from_le_bytes(t.dtype(), &gather_bytes(t, &idx)).expect("same dtype");
    Tensor::new(shape, data)
}

/// The little-endian bytes of `t`'s elements at `idx`.
fn gather_bytes(t: &Tensor, idx: &[usize]) -> Vec<u8> {
    let bytes = t.data.to_le_bytes();
    let w = bytes.len() / t.numel().max(1);
    idx.iter().flat_map(|&i| bytes[i * w..(i + 1) * w].to_vec()).collect()
}

#[test]
fn every_op_definition_agrees_in_all_three_paths() {
    let examples = burnc_compiler::ops::examples();
    assert!(!examples.is_empty());
    let work = std::env::temp_dir().join(format!("burnc-op-defs-{}", std::process::id()));
    for ex in &examples {
        let name = ex.op.name();
        let g = graph(ex);
        let fed = |i: &usize| !ex.consts.contains(i);
        let values: Vec<RtValue> = ex.inputs.iter().enumerate().filter(|(i, _)| fed(i)).map(|(_, t)| RtValue::Tensor(t.clone())).collect();
        let want = interp::run(&g, values.clone()).unwrap_or_else(|e| panic!("{name}: interpreter: {e}"));

        let fixed = burnc::harness::generate_for(&g, &values, name, false).unwrap_or_else(|e| panic!("{name}: codegen: {e}"));
        let bin = burnc::harness::build(&fixed.gen, &format!("op-defs {name} {:?}", ex.op)).unwrap_or_else(|e| panic!("{name}: build: {e}"));
        let got = burnc::harness::run(&bin, &fixed, &work.join("fixed")).unwrap_or_else(|e| panic!("{name}: run: {e}"));
        for (g, w) in got.iter().zip(&want) {
            common::close(g, w, 1e-6, 0.0).unwrap_or_else(|e| panic!("{name}, fixed shapes: {e}"));
        }

        if ex.inputs.iter().enumerate().filter(|(i, _)| fed(i)).all(|(_, t)| t.shape.iter().all(|&d| d <= 1)) {
            println!("{name}: interpreter and fixed code agree on {:?}; nothing to bound", ex.inputs.iter().map(|t| t.shape.clone()).collect::<Vec<_>>());
            continue;
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
        // Every size of the first input's first dim up to its bound.
        let Some(&n0) = ex.inputs[0].shape.first().filter(|&&n| n > 1) else { continue };
        let (mut agreed, mut refused) = (0, 0);
        for size in 1..=2 * n0 {
            let values: Vec<RtValue> = ex
                .inputs
                .iter()
                .enumerate()
                .filter(|(i, _)| fed(i))
                .map(|(_, t)| RtValue::Tensor(if t.shape.first() == Some(&n0) { resized(t, size) } else { t.clone() }))
                .collect();
            let want = interp::run(&g, values.clone());
            let (feeds, dims) = bounded.refeed(&values).unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = run_bounded_on(&bin, &bounded, &feeds, &dims, &work.join(format!("size{size}")));
            match (want, got) {
                (Ok(w), Ok(g)) => {
                    for (g, w) in g.iter().zip(&w) {
                        common::close(g, w, 1e-6, 0.0).unwrap_or_else(|e| panic!("{name}, bounded at first dim {size}: {e}"));
                    }
                    agreed += 1;
                }
                (Err(_), Err(_)) => refused += 1,
                // Bounded modules refuse a size below 1 (`DimError::TooSmall`), the interpreter
                // gives an empty tensor: the documented difference.
                (Ok(w), Err(e)) if e.to_string().contains("derived size") && w.iter().any(|t| t.as_tensor().is_ok_and(|t| t.numel() == 0)) => refused += 1,
                (Ok(_), Err(e)) => panic!("{name}, first dim {size}: the interpreter runs, bounded code fails: {e}"),
                (Err(e), Ok(_)) => panic!("{name}, first dim {size}: bounded code runs, the interpreter refuses: {e}"),
            }
        }
        println!(
            "{name}: interpreter, fixed and bounded code agree on {:?}; bounded at first dim 1..={}: {agreed} equal, {refused} refused by both",
            ex.inputs.iter().map(|t| t.shape.clone()).collect::<Vec<_>>(),
            2 * n0
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}
