//! GridSample's geometry (shared with `ops::grid`), math in `burnc_runtime::kernels::grid`.
use burnc_runtime::kernels::grid::GridDims;

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
