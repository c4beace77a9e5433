//! ScatterElements and ScatterND over dims given at run time. `out` holds the data; each
//! update is combined with its destination by `f` (the update itself for a plain scatter,
//! `Elem::add`, `mul`, `max_of`, `min_of` for the reductions), in order, so with duplicate
//! destinations the last update wins or all are combined. An index outside its axis (after
//! adding the axis length to a negative one) skips its update: generated code does not fail.
use crate::Elem;

/// The plain scatter's combination: the update replaces the element.
#[inline]
pub fn replace<T>(_: T, u: T) -> T {
    u
}

/// ScatterElements: update `i…` (over `idx_dims`, the updates' dims too) goes to the data's
/// element at `i…` with the coordinate along `axis` taken from the index at `i…`. `idx_dims`
/// are at most `dims` off the axis.
pub fn scatter_elements<T: Copy, I: Elem>(out: &mut [T], dims: &[usize], idx: &[I], idx_dims: &[usize], upd: &[T], axis: usize, f: impl Fn(T, T) -> T) {
    let r = dims.len();
    assert!(idx_dims.len() == r && axis < r, "scatter_elements: ranks or axis");
    assert!((0..r).all(|d| d == axis || idx_dims[d] <= dims[d]), "scatter_elements: indices exceed the data off the axis");
    let n: usize = idx_dims.iter().product();
    assert!(out.len() >= dims.iter().product::<usize>() && idx.len() >= n && upd.len() >= n, "scatter_elements: slices too short");
    if n > 0 {
        walk(out, dims, idx, idx_dims, upd, axis, &f, 0, 0, 0);
    }
}

/// Dim `d` onwards: `xo` the data offset without the axis coordinate, `o` the indices' offset.
#[allow(clippy::too_many_arguments)]
fn walk<T: Copy, I: Elem>(out: &mut [T], xd: &[usize], idx: &[I], id: &[usize], upd: &[T], axis: usize, f: &impl Fn(T, T) -> T, d: usize, xo: usize, o: usize) {
    let xs: usize = xd[d + 1..].iter().product();
    if d + 1 < xd.len() {
        let os: usize = id[d + 1..].iter().product();
        for j in 0..id[d] {
            let xj = if d == axis { xo } else { xo + j * xs };
            walk(out, xd, idx, id, upd, axis, f, d + 1, xj, o + j * os);
        }
        return;
    }
    let len = xd[axis] as i64;
    let step: usize = xd[axis + 1..].iter().product();
    for j in 0..id[d] {
        let v = idx[o + j].to_i64();
        let v = if v < 0 { v + len } else { v };
        if (0..len).contains(&v) {
            let t = if d == axis { xo } else { xo + j } + v as usize * step;
            out[t] = f(out[t], upd[o + j]);
        }
    }
}

/// ScatterND: the indices (`idx_dims`, the last one `m` at most the data's rank) are tuples
/// of `m` coordinates into the data's first `m` dims; each names a slice of `dims[m..]`,
/// combined with the next slice of the updates. A tuple with a coordinate out of range skips
/// its slice.
pub fn scatter_nd<T: Copy, I: Elem>(out: &mut [T], dims: &[usize], idx: &[I], idx_dims: &[usize], upd: &[T], f: impl Fn(T, T) -> T) {
    let (&m, lead) = idx_dims.split_last().expect("scatter_nd: indices of rank 0");
    assert!(m <= dims.len(), "scatter_nd: tuples longer than the data's rank");
    let tuples: usize = lead.iter().product();
    let slice: usize = dims[m..].iter().product();
    assert!(
        out.len() >= dims.iter().product::<usize>() && idx.len() >= tuples * m && upd.len() >= tuples * slice,
        "scatter_nd: slices too short"
    );
    'tuples: for t in 0..tuples {
        let mut at = 0;
        for (j, &len) in dims[..m].iter().enumerate() {
            let v = idx[t * m + j].to_i64();
            let v = if v < 0 { v + len as i64 } else { v };
            if !(0..len as i64).contains(&v) {
                continue 'tuples;
            }
            at = at * len + v as usize;
        }
        let dst = &mut out[at * slice..(at + 1) * slice];
        for (y, &u) in dst.iter_mut().zip(&upd[t * slice..(t + 1) * slice]) {
            *y = f(*y, u);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_along_each_axis() {
        // [[1, 2, 3], [4, 5, 6]]
        let mut y = [1, 2, 3, 4, 5, 6];
        scatter_elements(&mut y, &[2, 3], &[2i64, -3, 9], &[1, 3], &[10, 20, 30], 1, replace);
        assert_eq!(y, [20, 2, 10, 4, 5, 6]);
        scatter_elements(&mut y, &[2, 3], &[1i32, 1, 1, 1], &[2, 2], &[1, 2, 3, 4], 0, Elem::add);
        assert_eq!(y, [20, 2, 10, 8, 11, 6]);
    }

    #[test]
    fn nd_slices_and_duplicates() {
        let mut y = [1f32, 2., 3., 4.];
        scatter_nd(&mut y, &[2, 2], &[1i64, 1, -7], &[3, 1], &[10., 20., 30., 40., 50., 60.], Elem::add);
        assert_eq!(y, [1., 2., 43., 64.]);
        scatter_nd(&mut y, &[2, 2], &[0i64, 1], &[1, 2], &[7.], replace);
        assert_eq!(y, [1., 7., 43., 64.]);
    }
}
