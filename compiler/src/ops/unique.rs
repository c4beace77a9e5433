//! Unique `(X)` → `(Y, indices, inverse_indices, counts)`: numpy's `unique` with indices,
//! inverse and counts, over X flattened or along an axis. The number of distinct values
//! decides three of the output shapes, so only a constant X (folded before code generation)
//! gets through codegen.
use super::{input, product, EmitCx, OpDef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis_or_scalar;
use crate::ir::DType;
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

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unique {
    /// `None`: over X flattened.
    pub axis: Option<i64>,
    pub sorted: bool,
}

impl OpDef for Unique {
    name!("Unique");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, flops, gradient);

    // The distinct values' count is not known before the op runs; the inverse indices' length
    // is (one per element, or per slice along the axis).
    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let (y, inverse) = match (self.axis, &x.dims) {
            (None, xs) => (Some(vec![cx.unknown()]), xs.as_deref().map(product)),
            (Some(_), None) => (None, None),
            (Some(_), Some(xs)) if xs.is_empty() => return Err("Unique with an axis needs an input of rank >= 1".into()),
            (Some(a), Some(xs)) => {
                let a = norm_axis_or_scalar(a, xs.len())?;
                let mut d = xs.clone();
                d[a] = cx.unknown();
                (Some(d), Some(xs[a].clone()))
            }
        };
        let inverse = inverse.unwrap_or_else(|| cx.unknown());
        let k = cx.unknown();
        let ints = |d| OutType { dtype: DType::I64, dims: Some(vec![d]) };
        Ok(vec![OutType { dtype: x.dtype, dims: y }, ints(k.clone()), ints(inverse), ints(k)])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        eval(self.axis, self.sorted, input(ins, 0)?)
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        Err(cx.err("Unique's output shapes depend on its input's values: codegen needs the input to be a constant"))
    }

    shape_inputs!(0);
}

fn eval(axis: Option<i64>, sorted: bool, x: &Tensor) -> R<Vec<Tensor>> {
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

fn finish(y: Tensor, g: &Groups) -> Vec<Tensor> {
    let ints = |v: &[usize]| Tensor::from_i64s(vec![v.len()], v.iter().map(|&i| i as i64).collect());
    vec![y, ints(&g.first), ints(&g.inverse), ints(&g.counts)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DimExpr;

    #[test]
    fn sorted_and_by_first_occurrence() {
        let x = Tensor::from_f32s(vec![6], vec![2.0, 1.0, 1.0, 3.0, 4.0, 3.0]);
        let i = |v: &[i64]| Tensor::from_i64s(vec![v.len()], v.to_vec());
        let sorted = Unique { axis: None, sorted: true }.eval(&[Some(&x)]).unwrap();
        assert_eq!(sorted, vec![Tensor::from_f32s(vec![4], vec![1.0, 2.0, 3.0, 4.0]), i(&[1, 0, 3, 4]), i(&[1, 0, 0, 2, 3, 2]), i(&[2, 1, 2, 1])]);
        let first = Unique { axis: None, sorted: false }.eval(&[Some(&x)]).unwrap();
        assert_eq!(first, vec![Tensor::from_f32s(vec![4], vec![2.0, 1.0, 3.0, 4.0]), i(&[0, 1, 3, 4]), i(&[0, 1, 1, 2, 3, 2]), i(&[1, 2, 2, 1])]);
        // Rows of a matrix: the inverse indices' length is the row count, the rest unknown.
        let arg = crate::ops::Arg { dtype: DType::F32, dims: Some(vec![DimExpr::var("n"), DimExpr::constant(3)]), value: None };
        let outs = Unique { axis: Some(0), sorted: true }.shapes(&mut ShapeCx::new(vec![Some(arg)])).unwrap();
        let dims: Vec<Vec<DimExpr>> = outs.into_iter().map(|o| o.dims.unwrap()).collect();
        assert!(crate::ops::is_unknown(&dims[0][0]) && dims[0][1] == DimExpr::constant(3));
        assert_eq!(dims[2], vec![DimExpr::var("n")]);
        assert!(dims[1] == dims[3] && crate::ops::is_unknown(&dims[1][0]));
        let scalar = Tensor::from_f32s(vec![], vec![1.0]);
        assert!(Unique { axis: Some(0), sorted: true }.eval(&[Some(&scalar)]).is_err());
    }
}
