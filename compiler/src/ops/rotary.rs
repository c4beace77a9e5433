//! RotaryEmbedding `(X, cos_cache, sin_cache, position_ids?)`: the first `rotary_embedding_dim`
//! entries of each head of X rotated by the cache rows of their positions (pairs of halves, or
//! of neighbours when `interleaved`). X is `[batch, heads, seq, head]` or `[batch, seq,
//! heads · head]`; the caches are `[max_pos, rotary_dim / 2]` read at `position_ids`, or
//! `[batch, seq, rotary_dim / 2]` without them. One call of the runtime kernel
//! `kernels::extra::rotary`, which takes the geometry at run time.
use super::{input, product, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::cast::cast;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::extra::{rotary, Rotary};

/// `rotary_embedding_dim` 0 rotates whole heads; `num_heads` is needed for a 3-D X only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RotaryEmbedding {
    pub interleaved: bool,
    pub rotary_embedding_dim: usize,
    pub num_heads: usize,
}

/// The kernel's geometry as dim expressions, and the caches' row count.
struct Geometry {
    batch: DimExpr,
    seq: DimExpr,
    heads: DimExpr,
    head: DimExpr,
    half: DimExpr,
    four: bool,
    max_pos: DimExpr,
}

kernel_dims!(Geometry => Rotary, "rt::kernels::extra::Rotary" (interleaved: bool) {
    batch: dim batch, seq: dim seq, heads: dim heads, head: dim head, half: dim half, four: same four, interleaved: arg interleaved,
});

impl RotaryEmbedding {
    fn geometry(&self, cx: &mut ShapeCx) -> R<Geometry> {
        let x = cx.arg(0)?.dims()?.to_vec();
        let (batch, seq, heads, head, four) = match &x[..] {
            [b, h, s, d] => (b.clone(), s.clone(), h.clone(), d.clone(), true),
            [b, s, hidden] => {
                let nh = self.num_heads;
                if nh == 0 {
                    return Err("a 3-D input needs num_heads".into());
                }
                let d = cx.divide(&format!("the hidden size into {nh} heads"), hidden, nh as i64)?;
                (b.clone(), s.clone(), DimExpr::constant(nh as i64), d, false)
            }
            other => return Err(format!("input must have rank 3 or 4, got rank {}", other.len())),
        };
        let half = match self.rotary_embedding_dim {
            0 => cx.divide("the head size into two halves", &head, 2)?,
            rd if rd % 2 != 0 => return Err(format!("rotary_embedding_dim {rd} must be even")),
            rd => {
                cx.at_most("rotary_embedding_dim and the head size", &DimExpr::constant(rd as i64), &head)?;
                DimExpr::constant(rd as i64 / 2)
            }
        };
        let (cos, sin) = (cx.arg(1)?.dims()?.to_vec(), cx.arg(2)?.dims()?.to_vec());
        if cos.len() != sin.len() {
            return Err(format!("cos_cache and sin_cache have ranks {} and {}", cos.len(), sin.len()));
        }
        for (i, (c, s)) in cos.iter().zip(&sin).enumerate() {
            cx.equal(&format!("dims {i} of cos_cache and sin_cache"), c, s)?;
        }
        let max_pos = match cx.opt(3).map(|p| p.dims().map(product)).transpose()? {
            Some(n) => {
                let [rows, width] = &cos[..] else { return Err(format!("with position_ids the caches must be 2-D, got rank {}", cos.len())) };
                cx.equal("the caches' width and half the rotated dims", width, &half)?;
                cx.equal("position_ids' size and batch × sequence", &n, &batch.mul(&seq))?;
                rows.clone()
            }
            None => {
                let [cb, cs, width] = &cos[..] else { return Err(format!("without position_ids the caches must be 3-D, got rank {}", cos.len())) };
                cx.equal("the caches' width and half the rotated dims", width, &half)?;
                cx.equal("the caches' batch and the input's", cb, &batch)?;
                cx.equal("the caches' length and the input's", cs, &seq)?;
                batch.mul(&seq)
            }
        };
        Ok(Geometry { batch, seq, heads, head, half, four, max_pos })
    }
}

impl OpDef for RotaryEmbedding {
    name!("RotaryEmbedding");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let (ct, st) = (cx.arg(1)?.dtype, cx.arg(2)?.dtype);
        if !x.dtype.is_float() {
            return Err(format!("RotaryEmbedding is not defined on {}", x.dtype));
        }
        if !ct.is_float() || ct != st {
            return Err(format!("the caches must be float tensors of one type, got {ct} and {st}"));
        }
        if let Some(p) = cx.opt(3).filter(|p| !p.dtype.is_int()) {
            return Err(format!("position_ids must be integers, got {}", p.dtype));
        }
        if (0..4).all(|i| cx.opt(i).is_none_or(|a| a.dims.is_some())) {
            self.geometry(cx)?;
        }
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, c, s) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        let mut cx = ShapeCx::of_tensors(ins);
        self.shapes(&mut cx)?;
        let g = self.geometry(&mut cx)?;
        let r = g.fixed_dims(self.interleaved)?;
        let max_pos = super::fixed_size(&g.max_pos)?;
        let pos = ins.get(3).copied().flatten().map(|p| p.to_i64_vec().ok_or("position_ids must be integers")).transpose()?;
        // In f64, rounded once to X's type.
        let (xv, cos, sin) = (x.to_f64_vec(), c.to_f64_vec(), s.to_f64_vec());
        let mut out = vec![0.0; xv.len()];
        rotary(&xv, &cos, &sin, pos.as_deref(), max_pos, r, &mut out).map_err(|v| format!("position id {v} is out of range for a cache of {max_pos} rows"))?;
        Ok(vec![cast(&Tensor::new(x.shape.clone(), Data::F64(out)), x.dtype(), true)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let g = self.geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        let (x, c, s) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
        let plain = |d: DType| matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
        let (xd, cd) = (cx.dtype(x)?, cx.dtype(c)?);
        if !plain(xd) || !plain(cd) {
            return Err(cx.err(format!("RotaryEmbedding on {xd} with caches of {cd} is not supported by codegen yet")));
        }
        let pos = match cx.opt_input(3) {
            Some(p) => {
                let pd = cx.dtype(p)?;
                if !pd.is_int() || pd.is_small() {
                    return Err(cx.err(format!("position_ids of {pd} are not supported by codegen yet")));
                }
                format!("Some({})", cx.read(p)?)
            }
            None => "None::<&[i64]>".into(),
        };
        // Position ids are data: one outside the cache leaves Y unwritten (the interpreter
        // reports it as an error; generated code has no error path).
        Ok(format!(
            "let r = {};\n\
             let _ = rt::kernels::extra::rotary({}, {}, {}, {pos}, {}, r, {});",
            g.dims_lit(cx, self.interleaved)?,
            cx.read(x)?,
            cx.read(c)?,
            cx.read(s)?,
            cx.size(&g.max_pos)?,
            cx.write(cx.output(0)?)?,
        ))
    }

    flops!(per_output 3);
}

pub fn examples() -> Vec<super::Example> {
    let f = |shape: Vec<usize>, k: usize| Tensor::from_f32s(shape.clone(), (0..shape.iter().product::<usize>()).map(|i| (((i * k) % 13) as f32 - 6.0) / 7.0).collect());
    let trig = |shape: Vec<usize>, sin: bool| {
        let v = (0..shape.iter().product::<usize>()).map(|i| if sin { (i as f32 * 0.3).sin() } else { (i as f32 * 0.3).cos() }).collect();
        Tensor::from_f32s(shape, v)
    };
    let four = RotaryEmbedding { interleaved: false, rotary_embedding_dim: 0, num_heads: 0 };
    let three = RotaryEmbedding { interleaved: true, rotary_embedding_dim: 4, num_heads: 2 };
    vec![
        // [batch, heads, seq, head], whole heads rotated at the given positions.
        super::Example {
            consts: vec![],
            op: OpRef::new(four),
            inputs: vec![f(vec![2, 2, 3, 4], 3), trig(vec![5, 2], false), trig(vec![5, 2], true), Tensor::from_i64s(vec![2, 3], vec![0, 1, 2, 4, 3, 2])],
        },
        // [batch, seq, heads · head], the first 4 of 8 rotated as neighbours, caches per position.
        super::Example { consts: vec![], op: OpRef::new(three), inputs: vec![f(vec![2, 3, 16], 5), trig(vec![2, 3, 2], false), trig(vec![2, 3, 2], true)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_caches_are_checked() {
        let op = RotaryEmbedding { interleaved: false, rotary_embedding_dim: 0, num_heads: 0 };
        let x = Tensor::from_f32s(vec![1, 1, 2, 4], vec![0.0; 8]);
        let c = Tensor::from_f32s(vec![3, 2], vec![1.0; 6]);
        let pos = |v: Vec<i64>| Tensor::from_i64s(vec![1, 2], v);
        assert!(op.eval(&[Some(&x), Some(&c), Some(&c), Some(&pos(vec![0, 7]))]).is_err(), "a position past the cache");
        assert!(op.eval(&[Some(&x), Some(&c), Some(&c), Some(&pos(vec![0, 2]))]).is_ok());
        assert!(op.eval(&[Some(&x), Some(&c), Some(&c), None]).is_err(), "2-D caches without positions");
        let odd = RotaryEmbedding { rotary_embedding_dim: 3, ..op };
        assert!(odd.eval(&[Some(&x), Some(&c), Some(&c), Some(&pos(vec![0, 1]))]).is_err(), "an odd rotary dim");
        let three = Tensor::from_f32s(vec![1, 2, 8], vec![0.0; 16]);
        assert!(op.eval(&[Some(&three), Some(&c), Some(&c), Some(&pos(vec![0, 1]))]).is_err(), "3-D without num_heads");
    }
}
