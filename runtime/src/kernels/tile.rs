//! Tile: the input repeated along every dim (output dim `d` is `dims[d] · reps[d]`), for dims
//! given at run time.

/// `out[i…] = x[(i_d mod dims[d])…]`.
pub fn tile<T: Copy>(x: &[T], dims: &[usize], reps: &[usize], out: &mut [T]) {
    assert!(dims.len() == reps.len(), "tile: ranks");
    let n: usize = dims.iter().zip(reps).map(|(d, r)| d * r).product();
    assert!(x.len() >= dims.iter().product::<usize>() && out.len() >= n, "tile: slices too short");
    if n == 0 {
        return;
    }
    if dims.is_empty() {
        out[0] = x[0];
        return;
    }
    fill(x, dims, reps, out, 0, 0, 0);
}

/// The block of dims `d..` at input offset `xo` and output offset `o`: its first copy row by
/// row, then that copy repeated `reps[d] - 1` more times.
fn fill<T: Copy>(x: &[T], dims: &[usize], reps: &[usize], out: &mut [T], d: usize, xo: usize, o: usize) {
    let xs: usize = dims[d + 1..].iter().product();
    let os: usize = dims[d + 1..].iter().zip(&reps[d + 1..]).map(|(a, b)| a * b).product();
    if d + 1 == dims.len() {
        out[o..o + dims[d]].copy_from_slice(&x[xo..xo + dims[d]]);
    } else {
        for j in 0..dims[d] {
            fill(x, dims, reps, out, d + 1, xo + j * xs, o + j * os);
        }
    }
    let block = dims[d] * os;
    for r in 1..reps[d] {
        out.copy_within(o..o + block, o + r * block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_each_dim() {
        let x = [1, 2, 3, 4, 5, 6]; // [[1, 2, 3], [4, 5, 6]]
        let mut y = [0; 12];
        tile(&x, &[2, 3], &[2, 1], &mut y);
        assert_eq!(y, [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6]);
        tile(&x, &[2, 3], &[1, 2], &mut y);
        assert_eq!(y, [1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]);
        let mut z = [0; 3];
        tile(&[7], &[], &[], &mut z[..1]);
        tile(&[8], &[1], &[3], &mut z);
        assert_eq!(z, [8, 8, 8]);
        tile::<i32>(&[], &[0, 2], &[3, 1], &mut []);
    }
}
