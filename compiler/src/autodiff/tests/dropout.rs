//! Dropout: the rule replays the forward mask from the key; `enable_dropout` switches a
//! graph's inference Dropouts on with distinct streams.
use crate::ops::view::Dropout;
use crate::ops::IntoOp;
use super::*;
use crate::autodiff::enable_dropout;

fn key(g: &mut Graph, k: i64) -> ValueId {
    g.add_const("key", Tensor::scalar_i64(k))
}

#[test]
fn dropout_training_and_inference() {
    for ratio in [0.3, 0.0, 0.9] {
        check(&[&[4, 5]], move |g, x| {
            let k = key(g, 1234);
            let y = node_n(g, Dropout { ratio, training: true }.op(), vec![Some(x[0]), Some(k)], 2)[0];
            node(g, Op::Unary(UnaryOp::Tanh), &[y])
        });
    }
    check(&[&[4, 5]], |g, x| node(g, Dropout { ratio: 0.5, training: false }.op(), &[x[0]]));
}

#[test]
fn enable_dropout_switches_with_distinct_streams() {
    // Two Dropouts over same-shaped tensors; after switching, the gradient still checks.
    let build = |g: &mut Graph, x: &[ValueId]| {
        let a = node(g, Dropout { ratio: 0.5, training: false }.op(), &[x[0]]);
        let b = node(g, Dropout { ratio: 0.5, training: false }.op(), &[x[0]]);
        let z = node(g, Dropout { ratio: 0.0, training: false }.op(), &[x[0]]);
        let k = key(g, 7);
        assert_eq!(enable_dropout(g, k).expect("switches"), 2);
        let s = node(g, Op::Binary(BinaryOp::Mul), &[a, b]);
        node(g, Op::Binary(BinaryOp::Add), &[s, z])
    };
    check(&[&[8, 8]], build);

    let mut g = Graph::default();
    let ty = ValueType::Tensor(TensorType { dtype: DType::F64, shape: Some(Shape::fixed(&[64, 64])) });
    let x = g.add_value("x", ty, ValueKind::Input);
    g.inputs = vec![x];
    let a = node(&mut g, Dropout { ratio: 0.5, training: false }.op(), &[x]);
    let b = node(&mut g, Dropout { ratio: 0.5, training: false }.op(), &[x]);
    let k = key(&mut g, 7);
    assert_eq!(enable_dropout(&mut g, k).expect("switches"), 2);
    g.outputs = vec![a, b];
    let out = run(&g, &[Tensor::new(vec![64, 64], Data::F64(vec![1.0; 4096]))]);
    let (ya, yb) = (f64s(&out[0]), f64s(&out[1]));
    let kept = ya.iter().filter(|&&v| v != 0.0).count();
    assert!((1800..2300).contains(&kept), "{kept} of 4096 kept at ratio 0.5");
    assert!(ya.iter().all(|&v| v == 0.0 || v == 2.0));
    let same = ya.iter().zip(&yb).filter(|(p, q)| p == q).count();
    assert!((1800..2300).contains(&same), "the two masks agree on {same} of 4096: not independent");
    // A non-scalar or float key is refused.
    let bad = g.add_const("bad", Tensor::new(vec![], Data::F64(vec![1.0])));
    assert!(enable_dropout(&mut g, bad).is_err());
}
