//! Training ops: one optimizer update, on copies (the interpreter's values are immutable), by
//! the same runtime kernel generated code runs in place.
use super::util::{arg, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::tensor::{Data, Tensor};
use burnc_runtime::train::optim::{self, Rule};

fn f32s(t: &Tensor, what: &str) -> Result<Vec<f32>, String> {
    match &t.data {
        Data::F32(v) => Ok(v.clone()),
        _ => Err(format!("{what} must be f32, got {}", t.dtype())),
    }
}

pub fn param_update(rule: &Rule, args: &[Option<RtValue>], n_outputs: usize) -> OpResult {
    let p = arg(args, 0)?;
    let g = arg(args, 1)?;
    if g.shape != p.shape {
        return Err(format!("gradient shape {:?} differs from the parameter's {:?}", g.shape, p.shape));
    }
    let lr = f32s(arg(args, 2)?, "lr")?.first().copied().ok_or("lr is empty")?;
    let t = arg(args, 3)?.to_i64_vec().and_then(|v| v.first().copied()).ok_or("step must be an integer scalar")?;
    let t = u64::try_from(t).map_err(|_| format!("step {t} is negative"))?;
    let mut pv = f32s(p, "the parameter")?;
    let gv = f32s(g, "the gradient")?;
    let mut moments = Vec::new();
    for k in 0..rule.moments() {
        let m = opt_arg(args, 4 + k)?.ok_or_else(|| format!("moment {} (input {}) is missing", k + 1, 4 + k))?;
        if m.shape != p.shape {
            return Err(format!("moment {} has shape {:?}, the parameter {:?}", k + 1, m.shape, p.shape));
        }
        moments.push(f32s(m, "a moment")?);
    }
    let (mut m1, mut m2) = (Vec::new(), Vec::new());
    let mut it = moments.into_iter();
    if let Some(m) = it.next() {
        m1 = m;
    }
    if let Some(m) = it.next() {
        m2 = m;
    }
    optim::step(rule, &mut pv, &gv, &mut m1, &mut m2, lr, t);
    let shape = p.shape.clone();
    let mut outs = vec![RtValue::Tensor(Tensor::new(shape.clone(), Data::F32(pv)))];
    for m in [m1, m2].into_iter().take(rule.moments()) {
        outs.push(RtValue::Tensor(Tensor::new(shape.clone(), Data::F32(m))));
    }
    outs.truncate(n_outputs.max(1));
    Ok(outs)
}
