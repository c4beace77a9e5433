//! CausalConvWithState `(input, weight, bias?, past_state?) → (output, present_state)`: a
//! depthwise causal 1-D convolution over `[batch, channels, len]` whose left context is the
//! previous call's last `k - 1` inputs (zeros without a state), then x·sigmoid(x) when `silu`.
//! One call of the runtime kernel `kernels::causal_conv`, which takes its sizes at run time, so
//! batch, channels, length and kernel size may all be bounded dims.
use super::{input, numel, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::causal_conv as cc;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CausalConv {
    pub silu: bool,
}

/// The kernel's sizes as dim expressions.
struct Sizes {
    batch: DimExpr,
    channels: DimExpr,
    len: DimExpr,
    k: DimExpr,
}

kernel_dims!(Sizes => cc::Dims, "rt::kernels::causal_conv::Dims" () { batch: dim batch, channels: dim channels, len: dim len, k: dim k });

impl Sizes {
    /// present_state's dims: the last `k - 1` steps.
    fn state(&self) -> Vec<DimExpr> {
        vec![self.batch.clone(), self.channels.clone(), self.k.sub(&DimExpr::constant(1))]
    }
}

/// The sizes from input `[b, c, len]` and weight `[c, 1, k]`, declaring what bias (`c` or 1
/// elements) and past_state (`[b, c, k - 1]`) must be.
fn sizes(cx: &mut ShapeCx) -> R<Sizes> {
    let x = cx.arg(0)?.dims()?.to_vec();
    let w = cx.arg(1)?.dims()?.to_vec();
    let [batch, channels, len] = &x[..] else { return Err(format!("input must be [batch, channels, length], got rank {}", x.len())) };
    let [wc, one, k] = &w[..] else { return Err(format!("weight must be [channels, 1, k], got rank {}", w.len())) };
    cx.equal("the weight's and the input's channels", wc, channels)?;
    cx.equal("the weight's dim 1", one, &DimExpr::constant(1))?;
    if k.as_const().is_some_and(|k| k < 1) {
        return Err("the kernel size is 0".into());
    }
    let s = Sizes { batch: batch.clone(), channels: channels.clone(), len: len.clone(), k: k.clone() };
    if let Some(b) = cx.opt(2) {
        let bd = b.dims()?.to_vec();
        if bd.len() > 1 {
            return Err(format!("bias must have rank 0 or 1, got {}", bd.len()));
        }
        // One value for all channels (the kernel tells by the length), or one per channel.
        let n = super::product(&bd);
        if n.as_const() != Some(1) {
            cx.equal("the bias's length and the channels", &n, channels)?;
        }
    }
    if let Some(p) = cx.opt(3) {
        let pd = p.dims()?.to_vec();
        let want = s.state();
        if pd.len() != 3 {
            return Err(format!("past_state must be [batch, channels, k - 1], got rank {}", pd.len()));
        }
        for (i, (got, want)) in pd.iter().zip(&want).enumerate() {
            cx.equal(&format!("past_state dim {i}"), got, want)?;
        }
    }
    Ok(s)
}

impl OpDef for CausalConv {
    name!("CausalConvWithState");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        if !dtype.is_float() {
            return Err(format!("input must be a float tensor, got {dtype}"));
        }
        for (i, what) in [(1, "weight"), (2, "bias"), (3, "past_state")] {
            if let Some(a) = cx.opt(i).filter(|a| a.dtype != dtype) {
                return Err(format!("{what} is {} but input is {dtype}", a.dtype));
            }
        }
        let unknown = (0..4).any(|i| cx.opt(i).is_some_and(|a| a.dims.is_none()));
        if unknown {
            return Ok(vec![OutType { dtype, dims: None }, OutType { dtype, dims: None }]);
        }
        let s = sizes(cx)?;
        Ok(vec![OutType { dtype, dims: cx.arg(0)?.dims.clone() }, OutType { dtype, dims: Some(s.state()) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, w) = (input(ins, 0)?, input(ins, 1)?);
        let mut cx = ShapeCx::of_tensors(ins);
        let outs = self.shapes(&mut cx)?;
        let s = sizes(&mut cx)?;
        let d = s.fixed_dims()?;
        let state_shape = outs[1].dims.iter().flatten().map(super::fixed_size).collect::<R<Vec<usize>>>()?;
        let (bias, past) = (ins.get(2).copied().flatten(), ins.get(3).copied().flatten());
        // The kernel rounds to the storage type where the reference does, so it runs on it.
        macro_rules! go {
            ($($v:ident),*) => {
                match (&x.data, &w.data) {
                    $((Data::$v(xv), Data::$v(wv)) => {
                        let inp = cc::Inputs {
                            x: xv,
                            w: wv,
                            bias: if let Some(Data::$v(b)) = bias.map(|t| &t.data) { Some(&b[..]) } else { None },
                            past: if let Some(Data::$v(p)) = past.map(|t| &t.data) { Some(&p[..]) } else { None },
                        };
                        let mut y = vec![Default::default(); xv.len()];
                        let mut present = vec![Default::default(); state_shape.iter().product()];
                        cc::causal_conv(&d, &inp, self.silu, &mut y, Some(&mut present));
                        (Data::$v(y), Data::$v(present))
                    })*
                    _ => return Err(format!("CausalConvWithState on {} is not supported", x.dtype())),
                }
            };
        }
        let (y, present) = go!(F32, F64, F16, BF16);
        Ok(vec![Tensor::new(x.shape.clone(), y), Tensor::new(state_shape, present)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let s = sizes(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        let x = cx.input(0)?;
        let xd = cx.dtype_among(x, &[DType::F32, DType::F64, DType::F16, DType::BF16])?;
        for i in 1..4 {
            if let Some(v) = cx.opt_input(i).filter(|&v| cx.dtype(v).is_ok_and(|d| d != xd)) {
                return Err(cx.err(format!("input #{i} is {} but input is {xd}", cx.dtype(v)?)));
            }
        }
        // present_state when something reads it.
        let present = cx.write_used(1)?;
        Ok(format!(
            "let d = {};\n\
             let inp = rt::kernels::causal_conv::Inputs {{ x: {}, w: {}, bias: {}, past: {} }};\n\
             rt::kernels::causal_conv::causal_conv(&d, &inp, {}, {}, {present});",
            s.dims_lit(cx)?,
            cx.read(x)?,
            cx.read_input(1)?,
            cx.read_opt(2)?,
            cx.read_opt(3)?,
            self.silu,
            cx.write(cx.output(0)?)?,
        ))
    }

    /// A multiply-add per output element and kernel tap.
    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        let k = *ins.get(1)?.as_ref()?.last()? as u64;
        numel(outs.first()?)?.checked_mul(2)?.checked_mul(k)
    }
}

pub fn examples() -> Vec<super::Example> {
    let f = |shape: Vec<usize>, k: usize| Tensor::from_f32s(shape.clone(), (0..shape.iter().product::<usize>()).map(|i| (((i * k) % 11) as f32 - 5.0) / 4.0).collect());
    vec![
        // Bias and a past state, then SiLU.
        super::Example {
            consts: vec![],
            op: OpRef::new(CausalConv { silu: true }),
            inputs: vec![f(vec![2, 3, 5], 3), f(vec![3, 1, 3], 5), f(vec![3], 7), f(vec![2, 3, 2], 2)],
        },
        // No state (zeros before the first step), one shared bias.
        super::Example { consts: vec![], op: OpRef::new(CausalConv { silu: false }), inputs: vec![f(vec![3, 2, 4], 5), f(vec![2, 1, 4], 3), f(vec![1], 1)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_hostile_inputs() {
        let t = |shape: Vec<usize>| Tensor::from_f32s(shape.clone(), vec![0.5; shape.iter().product()]);
        let op = CausalConv { silu: false };
        let (x, w) = (t(vec![1, 2, 4]), t(vec![2, 1, 3]));
        let out = op.eval(&[Some(&x), Some(&w)]).expect("eval");
        assert_eq!((out[0].shape.clone(), out[1].shape.clone()), (vec![1, 2, 4], vec![1, 2, 2]));
        for bad in [
            vec![Some(t(vec![1, 2, 4])), Some(t(vec![3, 1, 3]))],
            vec![Some(t(vec![1, 2, 4])), Some(t(vec![2, 1, 0]))],
            vec![Some(t(vec![1, 2, 4])), Some(t(vec![2, 1, 3])), Some(t(vec![3]))],
            vec![Some(t(vec![1, 2, 4])), Some(t(vec![2, 1, 3])), None, Some(t(vec![1, 2, 3]))],
            vec![Some(t(vec![2, 4])), Some(t(vec![2, 1, 3]))],
        ] {
            assert!(op.eval(&bad.iter().map(Option::as_ref).collect::<Vec<_>>()).is_err(), "{bad:?}");
        }
    }
}
