//! Unique (numpy's `unique` with indices, inverse and counts). Its output shapes depend on the
//! values, so it lives in the interpreter only: generated code sees it folded when the input
//! is a constant.
use super::util::{arg, norm_axis_or_scalar};
use super::OpResult;
use crate::interp::RtValue;
use crate::tensor::{Data, Tensor};
use std::cmp::Ordering;

/// Total order for comparison keys: NaNs after everything and equal to each other (numpy's
/// `equal_nan`), -0 equal to 0.
fn key_cmp<K: PartialOrd>(a: &K, b: &K) -> Ordering {
    a.partial_cmp(b).unwrap_or_else(|| {
        let nan = |v: &K| v.partial_cmp(v).is_none();
        nan(a).cmp(&nan(b))
    })
}

/// Slices `j` of `len` along the axis, viewed as [outer, len, inner]: groups of equal slices.
struct Groups {
    /// Index of the first occurrence of each group, in output order.
    first: Vec<usize>,
    /// Group (output position) of each slice.
    inverse: Vec<usize>,
    counts: Vec<usize>,
}

fn group<K: PartialOrd>(keys: &[K], outer: usize, len: usize, inner: usize, sorted: bool) -> Groups {
    let slice_cmp = |a: usize, b: usize| {
        for o in 0..outer {
            for i in 0..inner {
                let c = key_cmp(&keys[(o * len + a) * inner + i], &keys[(o * len + b) * inner + i]);
                if c != Ordering::Equal {
                    return c;
                }
            }
        }
        Ordering::Equal
    };
    // Stable: the first slice of a run of equal ones is its first occurrence.
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&a, &b| slice_cmp(a, b));
    let mut first = Vec::new();
    let mut counts = Vec::new();
    let mut inverse = vec![0; len];
    for (pos, &j) in order.iter().enumerate() {
        if pos == 0 || slice_cmp(order[pos - 1], j) != Ordering::Equal {
            first.push(j);
            counts.push(0);
        }
        inverse[j] = first.len() - 1;
        if let Some(c) = counts.last_mut() {
            *c += 1;
        }
    }
    if !sorted {
        // Groups by first occurrence instead of by value.
        let mut by_first: Vec<usize> = (0..first.len()).collect();
        by_first.sort_by_key(|&g| first[g]);
        let mut rank = vec![0; first.len()];
        for (r, &g) in by_first.iter().enumerate() {
            rank[g] = r;
        }
        first = by_first.iter().map(|&g| first[g]).collect();
        counts = by_first.iter().map(|&g| counts[g]).collect();
        for v in inverse.iter_mut() {
            *v = rank[*v];
        }
    }
    Groups { first, inverse, counts }
}

pub fn eval(axis: Option<i64>, sorted: bool, args: &[Option<RtValue>]) -> OpResult {
    let x = arg(args, 0)?;
    let (outer, len, inner, ax) = match axis {
        Some(a) => {
            let ax = norm_axis_or_scalar(a, x.rank())?;
            if x.rank() == 0 {
                return Err("Unique with an axis needs an input of rank >= 1".into());
            }
            (x.shape[..ax].iter().product(), x.shape[ax], x.shape[ax + 1..].iter().product(), Some(ax))
        }
        None => (1, x.numel(), 1, None),
    };
    let g = match &x.data {
        Data::F32(_) | Data::F64(_) | Data::F16(_) | Data::BF16(_) | Data::F8(..) => {
            group(&x.to_f64_vec(), outer, len, inner, sorted)
        }
        Data::U64(v) => group(v, outer, len, inner, sorted),
        _ => group(&x.to_i64_vec().ok_or("Unique: unsupported type")?, outer, len, inner, sorted),
    };
    // Y: the first occurrence of each group, gathered along the axis.
    let k = g.first.len();
    let src: Vec<usize> = (0..outer).flat_map(|o| g.first.iter().flat_map(move |&j| (0..inner).map(move |i| (o * len + j) * inner + i))).collect();
    let data = crate::map_data!(&x.data, v => src.iter().map(|&s| v[s]).collect(), f8 => match &x.data {
        Data::F8(d, v) => return Ok(finish(Tensor::new(y_shape(x, ax, k), Data::F8(*d, src.iter().map(|&s| v[s]).collect())), &g)),
        _ => return Err("Unique: unsupported type".into()),
    });
    Ok(finish(Tensor::new(y_shape(x, ax, k), data), &g))
}

fn y_shape(x: &Tensor, ax: Option<usize>, k: usize) -> Vec<usize> {
    match ax {
        Some(a) => {
            let mut s = x.shape.clone();
            s[a] = k;
            s
        }
        None => vec![k],
    }
}

fn finish(y: Tensor, g: &Groups) -> Vec<RtValue> {
    let ints = |v: &[usize]| RtValue::Tensor(Tensor::from_i64s(vec![v.len()], v.iter().map(|&i| i as i64).collect()));
    vec![RtValue::Tensor(y), ints(&g.first), ints(&g.inverse), ints(&g.counts)]
}
