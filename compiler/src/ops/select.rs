//! Selection by condition or position. Where: `(cond, x, y)` → `x` where `cond` is true,
//! else `y`, the three broadcast together (numpy rules), by one strided kernel
//! (`runtime::kernels::broadcast::ternary`) for the interpreter and generated code, every
//! dtype. Trilu: the upper or lower triangle of the last two dims, zero elsewhere.
use super::{input, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::util::{broadcast_shapes, broadcast_strides};
use crate::ir::{DType, DimExpr, Op, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::broadcast;

/// The IR node of a Where.
pub fn op() -> Op {
    Op::Def(OpRef::new(Where))
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Where;

impl OpDef for Where {
    name!("Where");
    none_of!(cuda, scratch_bytes, in_place, decides_shapes);

    // A condition known to be all true or all false picks one side (a shape computation that
    // branches on a decided comparison of dims).
    fn forwards_values(&self, known: &[Option<Vec<i64>>]) -> Option<usize> {
        let cond = known.first()?.as_ref()?;
        match (cond.iter().all(|&c| c != 0), cond.iter().all(|&c| c == 0)) {
            _ if cond.is_empty() => None,
            (true, _) => Some(1),
            (_, true) => Some(2),
            _ => None,
        }
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        use crate::codegen::index::broadcast_index;
        let (c, a, b, y) = (cx.input(0)?, cx.input(1)?, cx.input(2)?, cx.output(0)?);
        Ok(vec![cx.pointwise(&y, |i| {
            let at = |t: &crate::codegen::wgsl::kernels::Tensor| t.load(&broadcast_index(&t.shape, &y.shape, i));
            Ok((String::new(), format!("select({}, {}, {} != 0u)", at(&b), at(&a), at(&c))))
        })?])
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (c, x, y) = (cx.arg(0)?.clone(), cx.arg(1)?.clone(), cx.arg(2)?.clone());
        if c.dtype != DType::Bool {
            return Err(format!("condition must be bool, got {}", c.dtype));
        }
        if x.dtype != y.dtype {
            return Err(format!("X and Y must have one type, got {} and {}", x.dtype, y.dtype));
        }
        let dims = match (&c.dims, &x.dims, &y.dims) {
            (Some(a), Some(b), Some(d)) => {
                let ab = cx.broadcast(a, b)?;
                Some(cx.broadcast(&ab, d)?)
            }
            _ => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (c, x, y) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        let Data::Bool(cv) = &c.data else { return Err(format!("condition must be bool, got {}", c.dtype())) };
        if x.dtype() != y.dtype() {
            return Err(format!("X and Y must have one type, got {} and {}", x.dtype(), y.dtype()));
        }
        let shape = broadcast_shapes(&broadcast_shapes(&c.shape, &x.shape)?, &y.shape)?;
        let n = crate::interp::ops::util::numel(&shape)?;
        let (sc, sx, sy) = (broadcast_strides(&c.shape, &shape), broadcast_strides(&x.shape, &shape), broadcast_strides(&y.shape, &shape));
        macro_rules! go {
            ($($variant:ident),*) => {
                match (&x.data, &y.data) {
                    $((Data::$variant(a), Data::$variant(b)) => {
                        let mut out = vec![Default::default(); n];
                        if n > 0 {
                            broadcast::ternary(cv, &sc, a, &sx, b, &sy, &mut out, &shape, |c, p, q| if c { p } else { q });
                        }
                        Data::$variant(out)
                    })*
                    _ => return Err(format!("Where is not defined on {}", x.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool);
        Ok(vec![Tensor::new(shape, data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (c, x, y, out) = (cx.input(0)?, cx.input(1)?, cx.input(2)?, cx.output(0)?);
        let os = cx.dims(out)?;
        let (rc, rx, ry, w) = (cx.read(c)?, cx.read(x)?, cx.read(y)?, cx.write(out)?);
        if os.is_empty() {
            // The write target is an `unsafe { … }` block: parenthesised, so it is indexed
            // rather than parsed as a statement of its own.
            return Ok(format!("let (c, x, z) = ({rc}, {rx}, {ry}); ({w})[0] = if c[0] != 0 {{ x[0] }} else {{ z[0] }};"));
        }
        let st = |v: ValueId| -> Result<String, CodegenError> { Ok(format!("[{}]", cx.broadcast_strides(&cx.dims(v)?, &os)?.join(", "))) };
        Ok(format!(
            "rt::kernels::broadcast::ternary({rc}, &{}, {rx}, &{}, {ry}, &{}, {w}, &{}, |c: u8, p, q| if c != 0 {{ p }} else {{ q }});",
            st(c)?,
            st(x)?,
            st(y)?,
            cx.sizes(&os)?
        ))
    }

    flops!(per_output 1);

    // The gradient goes to the side each element took, summed back to that side's shape.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (c, dy) = (cx.input(0)?, cx.dy()?);
        let zero = cx.b.scalar(0.0, cx.b.dtype(dy)?)?;
        let dx = side(cx, 1, [c, dy, zero])?;
        let dz = side(cx, 2, [c, zero, dy])?;
        Ok(vec![None, dx, dz])
    }
}

/// Input `i`'s gradient: `Where(picks)` summed back to its shape, when needed.
fn side(cx: &mut GradCx, i: usize, picks: [ValueId; 3]) -> R<Option<ValueId>> {
    if !cx.wants(i) {
        return Ok(None);
    }
    let t = cx.b.node(op(), &picks)?;
    let like = cx.input(i)?;
    Ok(Some(cx.b.sum_to(t, like)?))
}

/// Trilu `(x, k?)`: keeps `x[…, i, j]` where `j - i >= k` (`upper`) or `j - i <= k`, the
/// diagonal offset `k` a constant input (0 when absent).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trilu {
    pub upper: bool,
}

impl Trilu {
    fn k(v: Option<Vec<i64>>, given: bool) -> R<i64> {
        match (v.as_deref(), given) {
            (_, false) => Ok(0),
            (Some([k]), true) => Ok(*k),
            (Some(v), true) => Err(format!("k must hold one element, got {}", v.len())),
            (None, true) => Err("k must be a constant".into()),
        }
    }

    /// `[batch, rows, cols]` of an input of rank ≥ 2.
    fn view(xs: &[DimExpr]) -> R<[DimExpr; 3]> {
        let r = xs.len();
        if r < 2 {
            return Err(format!("Trilu needs an input of rank >= 2, got rank {r}"));
        }
        Ok([super::product(&xs[..r - 2]), xs[r - 2].clone(), xs[r - 1].clone()])
    }
}

impl OpDef for Trilu {
    name!("Trilu");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        if let Some(xs) = &x.dims {
            Self::view(xs)?;
        }
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let k = ins.get(1).copied().flatten();
        let k = Self::k(k.and_then(|t| t.to_i64_vec()), k.is_some())?;
        Ok(vec![crate::interp::ops::index::trilu(input(ins, 0)?, k, self.upper)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let k = Self::k(cx.const_ints(1), cx.opt_input(1).is_some()).map_err(|e| cx.err(e))?;
        let [b, r, c] = Self::view(&cx.dims(x)?).map_err(|e| cx.err(e))?;
        let (b, r, c) = (cx.size(&b)?, cx.size(&r)?, cx.size(&c)?);
        let keep = if self.upper { format!("d >= {k}") } else { format!("d <= {k}") };
        // The element's index, `(b * r + i) * c + j`, without multiplying by a literal 1.
        let row = if r == "1" { "b + i".to_string() } else { format!("b * {r} + i") };
        let at = if c == "1" { format!("{row} + j") } else { format!("({row}) * {c} + j") };
        Ok(format!(
            "let (x, y) = ({}, {});\n\
             for b in 0..{b} {{ for i in 0..{r} {{ for j in 0..{c} {{\n\
             let at = {at};\n\
             let d = j as i64 - i as i64;\n\
             y[at] = if {keep} {{ x[at] }} else {{ Default::default() }};\n\
             }} }} }}",
            cx.read(x)?,
            cx.write(cx.output(0)?)?
        ))
    }
}

/// EyeLike `(x)`: a 2-D tensor of `x`'s dims (in `dtype`, else `x`'s type) holding 1 where
/// `j - i == k` and 0 elsewhere; `x`'s values are not read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EyeLike {
    pub dtype: Option<DType>,
    pub k: i64,
}

impl EyeLike {
    fn out_dtype(&self, x: DType) -> R<DType> {
        let d = self.dtype.unwrap_or(x);
        if d == DType::Str || d.is_small() {
            return Err(format!("EyeLike is not defined on {d}"));
        }
        Ok(d)
    }
}

impl OpDef for EyeLike {
    name!("EyeLike");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        if let Some(xs) = &x.dims {
            if xs.len() != 2 {
                return Err(format!("EyeLike needs a 2-D input, got rank {}", xs.len()));
            }
        }
        Ok(vec![OutType { dtype: self.out_dtype(x.dtype)?, dims: x.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let &[r, c] = x.shape.as_slice() else { return Err(format!("EyeLike needs a 2-D input, got {:?}", x.shape)) };
        let v = (0..r * c).map(|at| i64::from((at % c) as i64 - (at / c) as i64 == self.k)).collect();
        Ok(vec![crate::interp::ops::cast::cast(&Tensor::from_i64s(x.shape.clone(), v), self.out_dtype(x.dtype())?, true)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let [r, c] = <[DimExpr; 2]>::try_from(cx.dims(x)?).map_err(|_| cx.err("EyeLike needs a 2-D input"))?;
        let (r, c, k) = (cx.size(&r)?, cx.size(&c)?, self.k);
        let ty = cx.elem(y)?;
        let d = cx.dtype(y)?;
        let lit = |v: i64| {
            let t = crate::interp::ops::cast::cast(&Tensor::from_i64s(vec![], vec![v]), d, true).ok()?;
            crate::codegen::emit::data::scalar_lit(&t, ty)
        };
        let (Some(one), Some(zero)) = (lit(1), lit(0)) else { return Err(cx.err(format!("EyeLike to {d} is not supported by codegen"))) };
        Ok(format!(
            "let y = {};
             for i in 0..{r} {{ for j in 0..{c} {{
             y[i * {c} + j] = if j as i64 - i as i64 == {k} {{ {one} }} else {{ {zero} }};
             }} }}",
            cx.write(y)?
        ))
    }
}

pub fn examples() -> Vec<super::Example> {
    let c = Tensor::new(vec![3, 1], Data::Bool(vec![true, false, true]));
    let x = Tensor::from_f32s(vec![3, 4], (0..12).map(|i| i as f32 - 5.5).collect());
    let y = Tensor::from_f32s(vec![4], vec![10.0, 20.0, 30.0, 40.0]);
    let yi = Tensor::from_i64s(vec![1, 4], vec![7, -8, 9, -10]);
    let xi = Tensor::from_i64s(vec![3, 4], (0..12).collect());
    vec![
        super::Example { consts: vec![], op: OpRef::new(Where), inputs: vec![c.clone(), x.clone(), y] },
        super::Example { consts: vec![], op: OpRef::new(Where), inputs: vec![c, xi.clone(), yi] },
        super::Example { consts: vec![1], op: OpRef::new(Trilu { upper: true }), inputs: vec![x.clone(), Tensor::from_i64s(vec![], vec![-1])] },
        super::Example { consts: vec![], op: OpRef::new(Trilu { upper: false }), inputs: vec![Tensor::from_i64s(vec![2, 2, 3], (0..12).collect())] },
        super::Example { consts: vec![], op: OpRef::new(EyeLike { dtype: None, k: 1 }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(EyeLike { dtype: Some(DType::I32), k: -2 }), inputs: vec![Tensor::from_i64s(vec![4, 3], (0..12).collect())] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Arg;

    #[test]
    fn where_broadcasts_its_three_inputs() {
        let ex = &examples()[0];
        let ins: Vec<Option<&Tensor>> = ex.inputs.iter().map(Some).collect();
        let y = Where.eval(&ins).expect("eval");
        assert_eq!(y[0].shape, vec![3, 4]);
        assert_eq!(y[0].to_f64_vec()[..8], [-5.5, -4.5, -3.5, -2.5, 10.0, 20.0, 30.0, 40.0]);
        let arg = |d: DType, s: &[i64]| Some(Arg { dtype: d, dims: Some(s.iter().map(|&v| crate::ir::DimExpr::constant(v)).collect()), value: None });
        let out = Where.shapes(&mut ShapeCx::new(vec![arg(DType::Bool, &[3, 1]), arg(DType::F32, &[3, 4]), arg(DType::F32, &[4])])).expect("shapes");
        assert_eq!(out[0].dims.as_ref().map(|d| d.len()), Some(2));
        assert!(Where.shapes(&mut ShapeCx::new(vec![arg(DType::Bool, &[3]), arg(DType::F32, &[4]), arg(DType::F32, &[4])])).is_err());
        assert!(Where.shapes(&mut ShapeCx::new(vec![arg(DType::F32, &[4]), arg(DType::F32, &[4]), arg(DType::F32, &[4])])).is_err());
    }
}
