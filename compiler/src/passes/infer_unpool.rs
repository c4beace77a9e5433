//! Output shapes of Col2Im, from the interpreter's own geometry.
use crate::interp::ops::unpool;
use crate::ir::Op;

/// One entry per output (`None`: shape unknown). `fixed(i)` is input i's static shape,
/// `ints(i)` its constant content (`Some(None)`: input absent; `None`: not constant).
pub fn infer(
    op: &Op,
    fixed: &dyn Fn(usize) -> Option<Vec<usize>>,
    ints: &dyn Fn(usize) -> Option<Option<Vec<i64>>>,
) -> Result<Vec<Option<Vec<usize>>>, String> {
    Ok(match op {
        Op::Col2Im { .. } => {
            let (Some(x), Some(Some(image)), Some(Some(block))) = (fixed(0), ints(1), ints(2)) else { return Ok(vec![None]) };
            vec![Some(unpool::col2im_geom(op, &x, &image, &block)?.3)]
        }
        _ => vec![],
    })
}
