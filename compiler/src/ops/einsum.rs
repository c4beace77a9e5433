//! Einsum: a sum of products over labelled axes (explicit or implicit output, `...` dims
//! broadcast across operands, repeated labels for diagonals). The equation is parsed once, when
//! the op is built; the labels' sizes and each operand's stride per label are resolved from the
//! dims, so one run-time kernel (`kernels::einsum`, a loop over every label) serves the
//! interpreter and generated code with fixed or bounded dims.
use super::{input, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, Op};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::einsum::{einsum, MAX_INPUTS, MAX_LABELS};
use std::collections::BTreeMap;

/// One operand's (or the output's) labels: ASCII letters, with `...` before `labels[ellipsis]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub labels: Vec<u8>,
    pub ellipsis: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Einsum {
    pub operands: Vec<Term>,
    /// The output's labels; an implicit output is resolved when parsing (numpy's rule: the
    /// broadcast `...` dims, then the letters used once, in ASCII order).
    pub output: Term,
}

/// Label ids: letters by their code, `...` dims as `ELL + k` (k counted right-aligned over the
/// widest ellipsis).
const ELL: u32 = 1 << 16;

/// The labels' sizes and strides for one set of operand dims.
struct Plan {
    /// Every label's size, the output's first.
    dims: Vec<DimExpr>,
    n_out: usize,
    /// Per operand, its stride along each label (summed over repeats; 0 where it lacks the
    /// label or broadcasts it).
    strides: Vec<Vec<DimExpr>>,
}

fn term(s: &str) -> R<Term> {
    let mut labels = Vec::new();
    let mut ellipsis = None;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("...") {
            if ellipsis.is_some() {
                return Err(format!("einsum term `{s}` has more than one ellipsis"));
            }
            ellipsis = Some(labels.len());
            rest = r;
        } else if c.is_ascii_alphabetic() {
            labels.push(c as u8);
            rest = &rest[1..];
        } else {
            return Err(format!("bad character `{c}` in einsum term `{s}`"));
        }
    }
    Ok(Term { labels, ellipsis })
}

impl Einsum {
    /// The op of an equation such as `"bij,bjk->bik"` (whitespace ignored).
    pub fn parse(equation: &str) -> R<Einsum> {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        let operands: Vec<Term> = lhs.split(',').map(term).collect::<R<_>>()?;
        let mut uses: BTreeMap<u8, usize> = BTreeMap::new();
        for l in operands.iter().flat_map(|t| &t.labels) {
            *uses.entry(*l).or_default() += 1;
        }
        let output = match rhs {
            Some(r) => {
                let out = term(r)?;
                for (i, l) in out.labels.iter().enumerate() {
                    let c = *l as char;
                    if !uses.contains_key(l) {
                        return Err(format!("output label `{c}` of `{equation}` is in no input"));
                    }
                    if out.labels[..i].contains(l) {
                        return Err(format!("output label `{c}` of `{equation}` is repeated"));
                    }
                }
                out
            }
            None => Term { labels: uses.iter().filter(|(_, &n)| n == 1).map(|(&l, _)| l).collect(), ellipsis: Some(0) },
        };
        Ok(Einsum { operands, output })
    }

    pub fn op(equation: &str) -> R<Op> {
        Ok(Op::Def(OpRef::new(Einsum::parse(equation)?)))
    }

    /// Each operand dim's label id, and the widest ellipsis.
    fn dim_labels(&self, shapes: &[Vec<DimExpr>]) -> R<(Vec<Vec<u32>>, usize)> {
        if shapes.len() != self.operands.len() {
            return Err(format!("the equation has {} operands, the node {} inputs", self.operands.len(), shapes.len()));
        }
        let mut ells = Vec::new();
        for (k, (t, x)) in self.operands.iter().zip(shapes).enumerate() {
            ells.push(match t.ellipsis {
                Some(_) if x.len() >= t.labels.len() => x.len() - t.labels.len(),
                None if x.len() == t.labels.len() => 0,
                _ => return Err(format!("input #{k} has rank {} for {} labels", x.len(), t.labels.len())),
            });
        }
        let n_ell = ells.iter().copied().max().unwrap_or(0);
        let labels = self
            .operands
            .iter()
            .zip(ells)
            .map(|(t, e)| {
                let at = t.ellipsis.unwrap_or(t.labels.len());
                let ell = (n_ell - e..n_ell).map(|k| ELL + k as u32);
                t.labels[..at].iter().map(|&l| l as u32).chain(ell).chain(t.labels[at..].iter().map(|&l| l as u32)).collect()
            })
            .collect();
        Ok((labels, n_ell))
    }

    fn plan(&self, cx: &mut ShapeCx, shapes: &[Vec<DimExpr>]) -> R<Plan> {
        let (dim_labels, n_ell) = self.dim_labels(shapes)?;
        let one = DimExpr::constant(1);
        let mut sizes: BTreeMap<u32, DimExpr> = BTreeMap::new();
        for (dl, x) in dim_labels.iter().zip(shapes) {
            for (&l, d) in dl.iter().zip(x) {
                let prev = match sizes.get(&l) {
                    None => d.clone(),
                    Some(s) if s == d => continue,
                    // `...` dims broadcast; letters must agree.
                    Some(s) if l >= ELL && *d == one => s.clone(),
                    Some(s) if l >= ELL && *s == one => d.clone(),
                    Some(s) => {
                        let s = s.clone();
                        let what = if l >= ELL { "broadcast `...` dims".to_string() } else { format!("the sizes of label `{}`", l as u8 as char) };
                        cx.equal(&what, &s, d)?;
                        if s.as_const().is_some() { s } else { d.clone() }
                    }
                };
                sizes.insert(l, prev);
            }
        }
        let mut out: Vec<u32> = Vec::new();
        let o = &self.output;
        for (i, &l) in o.labels.iter().enumerate() {
            if o.ellipsis == Some(i) {
                out.extend((0..n_ell as u32).map(|k| ELL + k));
            }
            out.push(l as u32);
        }
        if o.ellipsis == Some(o.labels.len()) {
            out.extend((0..n_ell as u32).map(|k| ELL + k));
        }
        // `...` dims the output omits are summed (as numpy does).
        let all: Vec<u32> = out.iter().copied().chain(sizes.keys().copied().filter(|l| !out.contains(l))).collect();
        let dims = all.iter().map(|l| sizes.get(l).cloned().ok_or_else(|| format!("output label `{}` is in no input", *l as u8 as char))).collect::<R<Vec<_>>>()?;
        let strides = dim_labels
            .iter()
            .zip(shapes)
            .map(|(dl, x)| {
                let st: Vec<DimExpr> = (0..x.len()).map(|i| super::product(&x[i + 1..])).collect();
                all.iter()
                    .map(|l| dl.iter().enumerate().filter(|&(i, d)| d == l && x[i] != one).fold(DimExpr::constant(0), |a, (i, _)| a.add(&st[i])))
                    .collect()
            })
            .collect();
        Ok(Plan { dims, n_out: out.len(), strides })
    }

    /// The operands' dtype, which they share.
    fn dtype(cx: &ShapeCx, n: usize) -> R<DType> {
        let d = cx.arg(0)?.dtype;
        for i in 1..n {
            let di = cx.arg(i)?.dtype;
            if di != d {
                return Err(format!("Einsum inputs must share a type, got {d} and {di}"));
            }
        }
        if matches!(d, DType::Bool | DType::Str) || d.is_small() {
            return Err(format!("Einsum is not defined on {d}"));
        }
        Ok(d)
    }
}

impl OpDef for Einsum {
    name!("Einsum");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let n = self.operands.len();
        let dtype = Einsum::dtype(cx, n)?;
        let mut shapes = Vec::with_capacity(n);
        for i in 0..n {
            match &cx.arg(i)?.dims {
                Some(d) => shapes.push(d.clone()),
                None => return Ok(vec![OutType { dtype, dims: None }]),
            }
        }
        let p = self.plan(cx, &shapes)?;
        Ok(vec![OutType { dtype, dims: Some(p.dims[..p.n_out].to_vec()) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let xs: Vec<&Tensor> = (0..ins.len()).map(|i| input(ins, i)).collect::<R<_>>()?;
        let mut cx = ShapeCx::of_tensors(ins);
        let dtype = Einsum::dtype(&cx, xs.len())?;
        let shapes: Vec<Vec<DimExpr>> = xs.iter().map(|x| x.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()).collect();
        let p = self.plan(&mut cx, &shapes)?;
        let fixed = |v: &[DimExpr]| v.iter().map(|d| d.as_const().map(|c| c.max(0) as usize).ok_or_else(|| "Einsum: a dim is not fixed".to_string())).collect::<R<Vec<usize>>>();
        let dims = fixed(&p.dims)?;
        let strides: Vec<usize> = p.strides.iter().map(|s| fixed(s)).collect::<R<Vec<_>>>()?.concat();
        let count = |v: &[usize]| v.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("Einsum: too many elements");
        let out_n = count(&dims[..p.n_out])?;
        count(&[out_n, count(&dims[p.n_out..])?])?;
        let out_shape = dims[..p.n_out].to_vec();
        // f64 (floats) or i64 (integers) in, rounded once to the element type, as the kernel
        // does in generated code.
        let t = if dtype.is_float() {
            let vals: Vec<Vec<f64>> = xs.iter().map(|x| x.to_f64_vec()).collect();
            let refs: Vec<&[f64]> = vals.iter().map(|v| &v[..]).collect();
            let mut out = vec![0f64; out_n];
            einsum(&refs, &strides, &dims, p.n_out, &mut out)?;
            Tensor::new(out_shape, Data::F64(out))
        } else {
            let vals: Vec<Vec<i64>> = xs.iter().map(|x| x.to_i64_vec().ok_or_else(|| "Einsum: unsupported input type".to_string())).collect::<R<_>>()?;
            let refs: Vec<&[i64]> = vals.iter().map(|v| &v[..]).collect();
            let mut out = vec![0i64; out_n];
            einsum(&refs, &strides, &dims, p.n_out, &mut out)?;
            Tensor::new(out_shape, Data::I64(out))
        };
        Ok(vec![crate::interp::ops::cast::cast(&t, dtype, false)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let n = self.operands.len();
        let mut scx = cx.shape_cx()?;
        Einsum::dtype(&scx, n).map_err(|e| cx.err(e))?;
        let shapes = (0..n).map(|i| cx.dims(cx.input(i)?)).collect::<Result<Vec<_>, _>>()?;
        let p = self.plan(&mut scx, &shapes).map_err(|e| cx.err(e))?;
        if p.dims.len() > MAX_LABELS || n > MAX_INPUTS {
            return Err(cx.err("Einsum with more labels or inputs than the kernel handles"));
        }
        let reads = (0..n).map(|i| cx.read(cx.input(i)?)).collect::<Result<Vec<_>, _>>()?;
        let strides = p.strides.iter().flatten().map(|d| cx.size(d)).collect::<Result<Vec<_>, _>>()?;
        // The kernel's only error is those limits, checked above.
        Ok(format!(
            "let _ = rt::kernels::einsum::einsum(&[{}], &[{}], &{}, {}, {});",
            reads.join(", "),
            strides.join(", "),
            cx.sizes(&p.dims)?,
            p.n_out,
            cx.write(cx.output(0)?)?
        ))
    }

    // A multiply per operand and an add at every point of the label space.
    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        let shapes: Vec<Vec<DimExpr>> = ins.iter().map(|s| Some(s.as_ref()?.iter().map(|&d| DimExpr::constant(d as i64)).collect())).collect::<Option<_>>()?;
        let p = self.plan(&mut ShapeCx::new(Vec::new()), &shapes).ok()?;
        let points = p.dims.iter().try_fold(1u64, |a, d| a.checked_mul(d.as_const()? as u64))?;
        Some(points.saturating_mul(self.operands.len() as u64))
    }
}

pub fn examples() -> Vec<super::Example> {
    let f = |shape: Vec<usize>, k: f32| {
        let n = shape.iter().product::<usize>();
        Tensor::from_f32s(shape, (0..n).map(|i| ((i * 7) % 5) as f32 * k - 1.0).collect())
    };
    let op = |eq: &str| OpRef::new(Einsum::parse(eq).expect("a valid equation"));
    let ints = Tensor::from_i64s(vec![3, 3], vec![1, 2, 3, 4, 5, 6, 7, 8, 9]);
    vec![
        super::Example { consts: vec![], op: op("bij,bjk->bik"), inputs: vec![f(vec![2, 3, 4], 0.5), f(vec![2, 4, 2], 0.25)] },
        super::Example { consts: vec![], op: op("...ii->...i"), inputs: vec![f(vec![2, 3, 3], 1.0)] },
        super::Example { consts: vec![], op: op("ij->ji"), inputs: vec![f(vec![3, 2], 1.0)] },
        super::Example { consts: vec![], op: op("i,i"), inputs: vec![f(vec![5], 1.0), f(vec![5], 0.5)] },
        super::Example { consts: vec![], op: op("ij,kj"), inputs: vec![ints.clone(), ints] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(eq: &str, xs: &[Tensor]) -> Tensor {
        let ins: Vec<Option<&Tensor>> = xs.iter().map(Some).collect();
        Einsum::parse(eq).unwrap().eval(&ins).unwrap().remove(0)
    }

    #[test]
    fn forms_and_refusals() {
        let a = Tensor::from_f32s(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let b = Tensor::from_f32s(vec![2, 2], vec![5.0, 6.0, 7.0, 8.0]);
        let mm = Tensor::from_f32s(vec![2, 2], vec![19.0, 22.0, 43.0, 50.0]);
        assert_eq!(run("ij,jk->ik", &[a.clone(), b.clone()]), mm);
        assert_eq!(run("i j , j k", &[a.clone(), b.clone()]), mm);
        assert_eq!(run("ii->i", &[a.clone()]), Tensor::from_f32s(vec![2], vec![1.0, 4.0]));
        assert_eq!(run("ii", &[a.clone()]), Tensor::from_f32s(vec![], vec![5.0]));
        assert_eq!(run("...ij->...ji", &[a.clone()]), Tensor::from_f32s(vec![2, 2], vec![1.0, 3.0, 2.0, 4.0]));
        assert_eq!(run("ij->", &[a.clone()]), Tensor::from_f32s(vec![], vec![10.0]));
        let ints = Tensor::new(vec![3], Data::I32(vec![1, 2, 3]));
        assert_eq!(run("i,i", &[ints.clone(), ints]), Tensor::new(vec![], Data::I32(vec![14])));
        for bad in ["ij->ik", "i..j...", "ij->ii", "i2"] {
            assert!(Einsum::parse(bad).is_err(), "{bad}");
        }
        let op = Einsum::parse("ij,jk").unwrap();
        assert!(op.eval(&[Some(&a), Some(&Tensor::from_f32s(vec![3, 2], vec![0.0; 6]))]).is_err());
        assert!(Einsum::parse("ijk").unwrap().eval(&[Some(&a)]).is_err());
    }
}
