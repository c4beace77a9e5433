//! Split, Expand, Tile, Pad, GatherElements, DepthToSpace / SpaceToDepth, the remaining
//! reductions and the global pools.
use super::*;

#[test]
fn split() {
    // Parts used with different weights, one part unused (it gets zeros).
    check(&[&[4, 6]], |g, x| {
        let s = ints(g, &[1, 3, 2]);
        let p = node_n(g, crate::ops::split::Split { axis: 1, sizes: None, outputs: 3 }.op(), vec![Some(x[0]), Some(s)], 3);
        let t = node(g, Op::Unary(UnaryOp::Tanh), &[p[2]]);
use crate::ops::IntoOp;
        node(g, Op::Concat { axis: 1 }, &[t, p[0]])
    });
    check(&[&[6, 2]], |g, x| {
        let p = node_n(g, crate::ops::split::Split { axis: 0, sizes: None, outputs: 3 }.op(), vec![Some(x[0])], 3);
        let a = node(g, Op::Binary(BinaryOp::Mul), &[p[0], p[1]]);
        node(g, Op::Binary(BinaryOp::Add), &[a, p[2]])
    });
}

#[test]
fn expand_tile_pad() {
    check(&[&[3, 1]], |g, x| {
        let s = ints(g, &[2, 3, 4]);
        node(g, Op::Expand, &[x[0], s])
    });
    check(&[&[2, 3]], |g, x| {
        let r = ints(g, &[2, 3]);
        node(g, crate::ops::tile::Tile.op(), &[x[0], r])
    });
    // Constant pad, the pad value an input too; negative pads crop.
    check(&[&[3, 4], &[]], |g, x| {
        let p = ints(g, &[1, -1, 2, 2]);
        node(g, crate::ops::pad::Pad { mode: PadMode::Constant }.op(), &[x[0], p, x[1]])
    });
    for mode in [PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
        check(&[&[3, 4]], |g, x| {
            let p = ints(g, &[1, 2, 2, 1]);
            node(g, crate::ops::pad::Pad { mode }.op(), &[x[0], p])
        });
    }
}

#[test]
fn gather_elements_depth_space() {
    check(&[&[3, 4]], |g, x| {
        let i = g.add_const("idx", Tensor::from_i64s(vec![2, 4], vec![0, 2, 1, 0, 2, 2, 0, -1]));
        node(g, crate::ops::gather::GatherElements { axis: 0 }.op(), &[x[0], i])
    });
    for crd in [false, true] {
        check(&[&[1, 8, 2, 3]], |g, x| node(g, crate::ops::depth_space::DepthToSpace { blocksize: 2, crd }.op(), &[x[0]]));
        check(&[&[1, 2, 4, 6]], |g, x| node(g, crate::ops::depth_space::SpaceToDepth { blocksize: 2, crd }.op(), &[x[0]]));
    }
}

#[test]
fn other_reductions() {
    let red = |op: ReduceOp, keepdims: bool| {
        move |g: &mut Graph, x: &[ValueId]| node(g, crate::ops::reduce::Reduce { op, axes: Some(vec![0, 2]), keepdims, noop_with_empty_axes: false }.op(), &[x[0]])
    };
    for keepdims in [false, true] {
        for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::SumSquare, ReduceOp::L1, ReduceOp::L2, ReduceOp::LogSumExp] {
            check(&[&[2, 3, 4]], red(op, keepdims));
        }
        for op in [ReduceOp::LogSum, ReduceOp::Prod] {
            check_pos(&[&[2, 3, 4]], red(op, keepdims));
        }
    }
}

