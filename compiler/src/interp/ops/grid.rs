//! GridSample, AffineGrid and TensorScatter: geometry resolved here (shared with inference
//! and codegen), math in `burnc_runtime::kernels::{grid, cache}`.
use super::signal::floats;
use super::util::{arg, ints_arg, norm_axis_or_scalar, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::cache::{self, CacheDims};
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

/// TensorScatter geometry: cache and update agree but on `axis` (not the batch axis), where the
/// update is no longer than the cache.
pub fn cache_dims(cs: &[usize], us: &[usize], axis: i64) -> Result<CacheDims, String> {
    let ax = norm_axis_or_scalar(axis, cs.len())?;
    if ax == 0 || us.len() != cs.len() || (0..cs.len()).any(|i| if i == ax { us[i] > cs[i] } else { us[i] != cs[i] }) {
        return Err(format!("TensorScatter update {us:?} does not fit cache {cs:?} on axis {axis}"));
    }
    Ok(CacheDims { batch: cs[0], mid: cs[1..ax].iter().product(), max_seq: cs[ax], seq: us[ax], inner: cs[ax + 1..].iter().product() })
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
        Op::TensorScatter { axis, circular } => {
            let (past, upd) = (arg(args, 0)?, arg(args, 1)?);
            if past.dtype() != upd.dtype() {
                return Err(format!("update of type {} for a cache of {}", upd.dtype(), past.dtype()));
            }
            let d = cache_dims(&past.shape, &upd.shape, *axis)?;
            let wi = opt_arg(args, 2)?.map(|t| t.to_i64_vec().ok_or("write_indices must be integers")).transpose()?;
            if wi.as_ref().is_some_and(|w| w.len() != d.batch) {
                return Err(format!("write_indices must hold {} entries", d.batch));
            }
            let ok;
            macro_rules! go {
                ($($variant:ident),*) => {
                    match (&past.data, &upd.data) {
                        $((Data::$variant(v), Data::$variant(u)) => {
                            let mut y = v.clone();
                            ok = cache::tensor_scatter(v, u, wi.as_deref(), &d, *circular, &mut y);
                            Data::$variant(y)
                        })*
                        (Data::F8(dt, v), Data::F8(_, u)) => {
                            let mut y = v.clone();
                            ok = cache::tensor_scatter(v, u, wi.as_deref(), &d, *circular, &mut y);
                            Data::F8(*dt, y)
                        }
                        _ => return Err(format!("update of type {} for a cache of {}", upd.dtype(), past.dtype())),
                    }
                };
            }
            let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool);
            if !ok {
                return Err("a write index puts the update outside the cache".into());
            }
            Tensor::new(past.shape.clone(), data)
        }
        _ => return Err(format!("{} is not a grid op", op.name())),
    };
    Ok(vec![RtValue::Tensor(t)])
}

