//! [`enable_dropout`] turns a graph's inference Dropouts into training ones (the op and its
//! gradient are `ops::view::Dropout`).
use crate::ir::{BinaryOp, DType, Graph, Node, Op, ValueId, ValueKind};
use crate::ops::view::Dropout;
use crate::ops::IntoOp;
use crate::passes::PassError;
use crate::tensor::{Data, Tensor};
use std::collections::HashSet;

/// Switch every inference-mode Dropout of `g` (top level, ratio > 0) to training mode, keyed
/// by the scalar `key` (i64 or u64; a new value each train step). Returns how many were
/// switched.
///
/// Each Dropout gets its own stream: its key input is `key ^ salt`, a BitXor node inserted just
/// before it with a per-node 64-bit salt, so two Dropouts over same-shaped tensors do not drop
/// the same elements, and stream i at step s never meets stream j at a nearby step. `key` must
/// therefore be a graph input, a constant, or produced by a node before the first Dropout.
/// Run it before the gradients are built (the rule keys dX like the forward op) and before
/// folding, which does not remove Dropouts either way.
pub fn enable_dropout(g: &mut Graph, key: ValueId) -> Result<usize, PassError> {
    let err = |reason: String| PassError::Node { node: g.value(key).name.clone(), op: "Dropout".into(), reason };
    let kt = g.tensor_type(key).cloned().ok_or_else(|| err("the key has no known type".into()))?;
    if !matches!(kt.dtype, DType::I64 | DType::U64) || kt.shape.as_ref().is_some_and(|s| s.numel() != Some(1)) {
        return Err(err(format!("the key must be an i64 or u64 scalar, got {} {:?}", kt.dtype, kt.shape)));
    }
    let mut names: HashSet<String> = g.values.iter().map(|v| v.name.clone()).collect();
    let mut fresh = |base: String| crate::ir::unique_name(base, &mut names);
    let old = std::mem::take(&mut g.nodes);
    let mut count = 0usize;
    for mut n in old {
        let inference = match &n.op {
            Op::Def(d) => d.get::<Dropout>().filter(|d| !d.training && d.ratio > 0.0).map(|d| d.ratio),
            _ => None,
        };
        if let Some(ratio) = inference {
            count += 1;
            let salt = salt(count as u64);
            let t = match kt.dtype {
                DType::U64 => Tensor::new(vec![], Data::U64(vec![salt])),
                _ => Tensor::new(vec![], Data::I64(vec![salt as i64])),
            };
            let c = g.add_const(fresh(format!("{}/dropout_salt", n.name)), t);
            let k = g.add_value(fresh(format!("{}/dropout_key", n.name)), g.value(key).ty.clone(), ValueKind::Node(crate::ir::NodeId(0)));
            g.nodes.push(Node {
                name: format!("{}/key", n.name),
                op: Op::Binary(BinaryOp::BitXor),
                inputs: vec![Some(key), Some(c)],
                outputs: vec![k],
                source_op: None,
            });
            n.op = Dropout { ratio, training: true }.op();
            n.inputs.truncate(1);
            n.inputs.resize(1, None);
            n.inputs.push(Some(k));
        }
        g.nodes.push(n);
    }
    crate::passes::fold::renumber(g);
    Ok(count)
}

/// The salt of the i-th Dropout: splitmix64 of its index, so salts differ in every bit.
fn salt(i: u64) -> u64 {
    let mut z = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
