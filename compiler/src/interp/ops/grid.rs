//! GridSample and AffineGrid: geometry resolved here (shared with inference and codegen),
//! math in `burnc_runtime::kernels::grid`.
use super::signal::floats;
use super::util::{arg, ints_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::grid::{self, GridDims};

/// GridSample geometry and output shape [N, C, grid spatial…] from X's and the grid's shapes.
pub fn grid_dims(xs: &[usize], gs: &[usize]) -> Result<(GridDims, Vec<usize>), String> {
    let nsp = xs.len().saturating_sub(2);
    if !(1..=3).contains(&nsp) || gs.len() != xs.len() || gs[gs.len() - 1] != nsp || gs[0] != xs[0] {
        return Err(format!("GridSample needs X [N, C, 1 to 3 spatial dims] and grid [N, spatial…, {nsp}], got {xs:?} and {gs:?}"));
    }
    let mut d = GridDims { n: xs[0], c: xs[1], nsp, input: [1; 3], output: [1; 3] };
    d.input[..nsp].copy_from_slice(&xs[2..]);
    d.output[..nsp].copy_from_slice(&gs[1..gs.len() - 1]);
    let mut out = vec![xs[0], xs[1]];
    out.extend_from_slice(&gs[1..gs.len() - 1]);
    Ok((d, out))
}

/// AffineGrid: batch and spatial sizes from theta's shape and `size` ([N, C, (D,) H, W]).
pub fn affine_dims(ts: &[usize], size: &[i64]) -> Result<(usize, Vec<usize>, Vec<usize>), String> {
    let nsp = size.len().saturating_sub(2);
    let dims: Vec<usize> = size.iter().map(|&v| usize::try_from(v).map_err(|_| format!("negative size {v}"))).collect::<Result<_, _>>()?;
    if !(2..=3).contains(&nsp) || ts != [dims[0], nsp, nsp + 1] {
        return Err(format!("AffineGrid needs size [N, C, (D,) H, W] and theta [N, {nsp}, {}], got {size:?} and {ts:?}", nsp + 1));
    }
    let sp = dims[2..].to_vec();
    let mut out = vec![dims[0]];
    out.extend_from_slice(&sp);
    out.push(nsp);
    Ok((dims[0], sp, out))
}

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    let t = match op {
        Op::AffineGrid { align_corners } => {
            let theta = arg(args, 0)?;
            let (n, sp, shape) = affine_dims(&theta.shape, &ints_arg(args, 1)?)?;
            let len: usize = shape.iter().product();
            let data = floats!(&theta.data, v => {
                let mut y = vec![Default::default(); len];
                grid::affine_grid(v, n, &sp, *align_corners, &mut y);
                y
            }, "AffineGrid");
            Tensor::new(shape, data)
        }
        _ => return Err(format!("{} is not a grid op", op.name())),
    };
    Ok(vec![RtValue::Tensor(t)])
}

