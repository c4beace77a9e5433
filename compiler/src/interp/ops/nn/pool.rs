//! MaxPool (with Indices), AveragePool and LpPool.
use super::geom::resolve;
use crate::interp::ops::util::numel;
use crate::ir::{PoolKind, Window};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::pool as k;

/// Y and, when `want_indices` (max pooling only), the flat argmax indices as i64.
pub fn pool(x: &Tensor, kind: PoolKind, window: &Window, col_major: bool, want_indices: bool) -> Result<(Tensor, Option<Tensor>), String> {
    if x.rank() < 3 {
        return Err(format!("pooling needs an input of rank >= 3, got {:?}", x.shape));
    }
    if window.kernel_shape.len() != x.rank() - 2 {
        return Err(format!("kernel_shape {:?} does not fit input {:?}", window.kernel_shape, x.shape));
    }
    let win = resolve(window, &window.kernel_shape, &x.shape[2..])?;
    let planes = x.shape[0] * x.shape[1];
    let mut shape = x.shape[..2].to_vec();
    shape.extend_from_slice(&win.output[3 - (x.rank() - 2)..]);
    let n = numel(&shape)?;
    let want_indices = want_indices && kind == PoolKind::Max;
    let mut ind = if want_indices { vec![0i64; n] } else { Vec::new() };
    macro_rules! go {
        ($($v:ident),*) => {
            match (&x.data, kind) {
                $((Data::$v(xs), PoolKind::Max) => {
                    let mut y = vec![burnc_runtime::Elem::zero(); n];
                    k::max_pool(xs, planes, &win, &mut y, want_indices.then_some(&mut ind[..]), col_major);
                    Data::$v(y)
                })*
                (Data::F32(xs), _) => Data::F32(float(xs, planes, &win, kind, n)),
                (Data::F64(xs), _) => Data::F64(float(xs, planes, &win, kind, n)),
                (Data::F16(xs), _) => Data::F16(float(xs, planes, &win, kind, n)),
                (Data::BF16(xs), _) => Data::BF16(float(xs, planes, &win, kind, n)),
                _ => return Err(format!("{kind:?} pooling does not support {}", x.dtype())),
            }
        };
    }
    let data = go!(F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64);
    let indices = want_indices.then(|| Tensor::new(shape.clone(), Data::I64(ind)));
    Ok((Tensor::new(shape, data), indices))
}

fn float<T: burnc_runtime::Elem>(xs: &[T], planes: usize, win: &burnc_runtime::kernels::window::Window3, kind: PoolKind, n: usize) -> Vec<T> {
    let mut y = vec![T::zero(); n];
    match kind {
        PoolKind::Avg { count_include_pad } => k::avg_pool(xs, planes, win, &mut y, count_include_pad),
        PoolKind::Lp { p } => k::lp_pool(xs, planes, win, &mut y, p as f64),
        PoolKind::Max => k::max_pool(xs, planes, win, &mut y, None, false),
    }
    y
}
