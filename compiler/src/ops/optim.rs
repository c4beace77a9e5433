//! ParamUpdate `(param, grad, lr, step, moment1?, moment2?) → (param', moment1'?, moment2'?)`:
//! one optimizer step (`rule.moments()` moment buffers, each the parameter's shape; `lr` an
//! f32 and `step` an integer scalar, 1 first) by the runtime's `train::optim::step`, the same
//! kernel in the interpreter (on copies: its values are immutable) and generated code. In a
//! train module the node has no outputs and updates the parameter and moments in place in the
//! caller's state buffer ([`OpDef::mutated_inputs`]: the scheduler runs every other reader of
//! them first); with outputs (a train graph compiled as a plain function) it copies them
//! first and updates the copies.
use super::{input, numel, EmitCx, GradCx, OpDef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DType, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::train::optim::{self, Rule};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamUpdate {
    pub rule: Rule,
}

/// The input index of moment buffer `k`.
const fn moment(k: usize) -> usize {
    4 + k
}

fn f32s(t: &Tensor, what: &str) -> R<Vec<f32>> {
    match &t.data {
        Data::F32(v) => Ok(v.clone()),
        _ => Err(format!("{what} must be f32, got {}", t.dtype())),
    }
}

impl OpDef for ParamUpdate {
    name!("ParamUpdate");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let p = cx.arg(0)?.clone();
        cx.same_type(0, 1)?;
        let mut outs = vec![OutType { dtype: p.dtype, dims: p.dims.clone() }];
        for k in 0..self.rule.moments() {
            cx.arg(moment(k))?;
            cx.same_type(0, moment(k))?;
            outs.push(OutType { dtype: p.dtype, dims: p.dims.clone() });
        }
        Ok(outs)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (p, g) = (input(ins, 0)?, input(ins, 1)?);
        if g.shape != p.shape {
            return Err(format!("gradient shape {:?} differs from the parameter's {:?}", g.shape, p.shape));
        }
        let lr = f32s(input(ins, 2)?, "lr")?.first().copied().ok_or("lr is empty")?;
        let t = input(ins, 3)?.to_i64_vec().and_then(|v| v.first().copied()).ok_or("step must be an integer scalar")?;
        let t = u64::try_from(t).map_err(|_| format!("step {t} is negative"))?;
        let mut pv = f32s(p, "the parameter")?;
        let gv = f32s(g, "the gradient")?;
        let mut ms = [Vec::new(), Vec::new()];
        for (k, m) in ms.iter_mut().enumerate().take(self.rule.moments()) {
            let t = ins.get(moment(k)).copied().flatten().ok_or_else(|| format!("moment {} (input {}) is missing", k + 1, moment(k)))?;
            if t.shape != p.shape {
                return Err(format!("moment {} has shape {:?}, the parameter {:?}", k + 1, t.shape, p.shape));
            }
            *m = f32s(t, "a moment")?;
        }
        let [mut m1, mut m2] = ms;
        optim::step(&self.rule, &mut pv, &gv, &mut m1, &mut m2, lr, t);
        let out = |v: Vec<f32>| Tensor::new(p.shape.clone(), Data::F32(v));
        Ok(std::iter::once(pv).chain([m1, m2]).take(1 + self.rule.moments()).map(out).collect())
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (p, g) = (cx.input(0)?, cx.input(1)?);
        for (v, what) in [(p, "parameter"), (g, "gradient")] {
            if cx.dtype(v)? != DType::F32 {
                return Err(cx.err(format!("the {what} must be f32 for codegen")));
            }
        }
        let (lr, step) = (cx.read_input(2)?, cx.read_input(3)?);
        let k = self.rule.moments();
        let mut s = String::new();
        let n = cx.node();
        let (pw, mut ms) = if n.outputs.is_empty() {
            // In place over the caller's state buffer (train modules only).
            let state = |v: ValueId| cx.ctx().write_state(n, v);
            let ms = (0..k).map(|i| state(cx.input(moment(i))?)).collect::<Result<Vec<_>, _>>()?;
            (state(p)?, ms)
        } else {
            if n.outputs.len() != 1 + k {
                return Err(cx.err(format!("{} outputs for {k} moments", n.outputs.len())));
            }
            let mut copy = |i: usize, o: usize| -> Result<String, CodegenError> {
                s.push_str(&format!("let out_{o} = {};\nout_{o}.copy_from_slice({});\n", cx.write(n.outputs[o])?, cx.read_input(i)?));
                Ok(format!("out_{o}"))
            };
            let pw = copy(0, 0)?;
            let ms = (0..k).map(|i| copy(moment(i), 1 + i)).collect::<Result<Vec<_>, _>>()?;
            (pw, ms)
        };
        ms.resize(2, "&mut []".into());
        s.push_str(&format!(
            "rt::train::optim::step(&rt::train::optim::Rule::{:?}, {pw}, {}, {}, {}, ({lr})[0], ({step})[0].max(0) as u64);",
            self.rule,
            cx.read(g)?,
            ms[0],
            ms[1]
        ));
        Ok(s)
    }

    /// About ten FLOPs per element (Adam's moments, bias corrections and update).
    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        Some(10u64.saturating_mul(numel(ins.first()?)?))
    }

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err("an optimizer step has no gradient".into())
    }

    /// The parameter and both moments (`moment(0)`, `moment(1)`), where present.
    fn mutated_inputs(&self) -> &'static [usize] {
        &[0, 4, 5]
    }
}

pub fn examples() -> Vec<super::Example> {
    let t = |seed: usize| Tensor::from_f32s(vec![4, 3], (0..12).map(|i| (((i + seed) * 5 % 11) as f32 - 5.0) / 8.0).collect());
    let square = |seed: usize| Tensor::from_f32s(vec![4, 3], (0..12).map(|i| ((i + seed) * 5 % 11) as f32 / 64.0).collect());
    let (lr, step) = (Tensor::from_f32s(vec![], vec![0.1]), Tensor::from_i64s(vec![], vec![3]));
    let ex = |rule: Rule, moments: usize| super::Example {
        consts: vec![2, 3],
        op: super::OpRef::new(ParamUpdate { rule }),
        // Moments as a run left them: the second (squared gradients) is never negative.
        inputs: [t(0), t(1), lr.clone(), step.clone()].into_iter().chain((0..moments).map(|k| if k == 0 { t(2) } else { square(3) })).collect(),
    };
    vec![
        ex(Rule::Sgd { momentum: 0.9, dampening: 0.0, nesterov: true, weight_decay: 0.01 }, 1),
        ex(Rule::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, decoupled: true }, 2),
    ]
}
