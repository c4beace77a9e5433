//! One position along an axis of a tensor viewed as `[outer, len, inner]`: the slices a Scan
//! feeds its body and the slices it stacks from the body's outputs.

/// `dst[o, :] = x[o, i, :]` (`dst` is `outer × inner`).
pub fn take<T: Copy>(x: &[T], outer: usize, len: usize, inner: usize, i: usize, dst: &mut [T]) {
    for o in 0..outer {
        let s = (o * len + i) * inner;
        dst[o * inner..(o + 1) * inner].copy_from_slice(&x[s..s + inner]);
    }
}

/// `y[o, i, :] = src[o, :]`.
pub fn put<T: Copy>(src: &[T], outer: usize, len: usize, inner: usize, i: usize, y: &mut [T]) {
    for o in 0..outer {
        let d = (o * len + i) * inner;
        y[d..d + inner].copy_from_slice(&src[o * inner..(o + 1) * inner]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_then_put_round_trips() {
        // [2, 3, 2]
        let x: [i32; 12] = core::array::from_fn(|k| k as i32);
        let mut y = [0; 12];
        let mut s = [0; 4];
        for i in 0..3 {
            take(&x, 2, 3, 2, i, &mut s);
            assert_eq!(s[0], (i * 2) as i32);
            assert_eq!(s[2], (6 + i * 2) as i32);
            put(&s, 2, 3, 2, i, &mut y);
        }
        assert_eq!(x, y);
    }
}
