//! Dropout. Inference mode is the identity: a free alias of its input where the memory plan
//! made it one (`schedule::alias_source`), else a copy; a requested mask is all ones. Training
//! mode calls the runtime's counter-based kernel with the key read at run time.
use super::CodegenError;
use crate::ir::Op;
use crate::ops::EmitCx;

/// One emitter for fixed shapes and bounded dims (sizes only reach it through the views).
pub fn emit(cx: &EmitCx) -> Result<Option<String>, CodegenError> {
    let Op::Dropout { ratio, training } = &cx.node().op else { return Err(cx.err("not a Dropout")) };
    let out = cx.output(0)?;
    let x = cx.input(0)?;
    let mask = match cx.used_output(1) {
        Some(m) => Some(cx.write(m)?),
        None => None,
    };
    let mut code = String::new();
    if *training {
        let key = cx.opt_input(1).ok_or_else(|| cx.err("training-mode Dropout needs its key input"))?;
        let m = mask.unwrap_or_else(|| "&mut []".into());
        code.push_str(&format!(
            "rt::kernels::dropout::dropout({}, {}, ({})[0] as u64, {}, {m});",
            cx.read(x)?,
            cx.write(out)?,
            cx.read(key)?,
            super::elementwise::f32_lit(*ratio)
        ));
    } else {
        if !cx.is_alias(out) {
            code.push_str(&format!("{}.copy_from_slice({});", cx.write(out)?, cx.read(x)?));
        }
        if let Some(m) = mask {
            code.push_str(&format!("{m}.fill(1);"));
        }
    }
    Ok((!code.is_empty()).then_some(code))
}

#[cfg(test)]
mod tests {
    use crate::codegen::{generate, CodegenOptions};
    use crate::ir::{DType, Graph, Op, Shape, TensorType, UnaryOp, ValueKind, ValueType};
    use crate::tensor::Tensor;

    /// x → Tanh → Dropout → Tanh, the Dropout in `training` mode (keyed by an i64 input).
    fn graph(training: bool) -> Graph {
        let mut g = Graph::default();
        let ty = |d: DType, s: &[usize]| ValueType::Tensor(TensorType { dtype: d, shape: Some(Shape::fixed(s)) });
        let x = g.add_value("x", ty(DType::F32, &[2, 8]), ValueKind::Input);
        g.inputs = vec![x];
        let a = g.add_node("a", Op::Unary(UnaryOp::Tanh), vec![Some(x)], &["a".into()]).1[0];
        let d = g.add_node("d", Op::Dropout { ratio: 0.25, training: false }, vec![Some(a)], &["d".into()]).1[0];
        let y = g.add_node("y", Op::Unary(UnaryOp::Tanh), vec![Some(d)], &["y".into()]).1[0];
        g.outputs = vec![y];
        if training {
            let k = g.add_value("key", ty(DType::I64, &[]), ValueKind::Input);
            g.inputs.push(k);
            assert_eq!(crate::autodiff::enable_dropout(&mut g, k).expect("switches"), 1);
        }
        crate::passes::prepare(&mut g).expect("prepares");
        g
    }

    #[test]
    fn inference_is_a_free_alias_and_training_calls_the_kernel() {
        let opts = CodegenOptions::default();
        let inf = generate(&graph(false), &opts).expect("generates").source;
        assert!(!inf.contains("dropout"), "{inf}");
        let tr = generate(&graph(true), &opts).expect("generates").source;
        assert!(tr.contains("rt::kernels::dropout::dropout("), "{tr}");
        assert!(tr.contains("[0] as u64"), "{tr}");
        // The interpreter runs the same graph.
        let out = crate::interp::run(
            &graph(true),
            vec![
                crate::interp::RtValue::Tensor(Tensor::from_f32s(vec![2, 8], vec![0.5; 16])),
                crate::interp::RtValue::Tensor(Tensor::scalar_i64(3)),
            ],
        )
        .expect("runs");
        assert_eq!(out.len(), 1);
    }
}
