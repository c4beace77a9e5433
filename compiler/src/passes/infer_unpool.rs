//! Output shapes of MaxUnpool, from the interpreter's own geometry.
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
        Op::MaxUnpool { .. } => {
            let (Some(x), Some(os)) = (fixed(0), ints(2)) else { return Ok(vec![None]) };
            vec![Some(unpool::max_unpool_shapes(op, &x, os.as_deref())?.1)]
        }
        _ => vec![],
    })
}
