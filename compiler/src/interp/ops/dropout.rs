//! Dropout: the identity in inference mode; in training mode the runtime's counter-based
//! kernel, keyed by the scalar `key` input.
use super::util::{arg, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::tensor::{Data, Tensor};

pub fn eval(ratio: f32, training: bool, args: &[Option<RtValue>], n_outputs: usize) -> OpResult {
    let x = arg(args, 0)?;
    let mut mask = vec![true; if n_outputs > 1 { x.numel() } else { 0 }];
    let y = if training {
        if !x.dtype().is_float() {
            return Err(format!("training-mode Dropout needs a float input, got {}", x.dtype()));
        }
        let key = opt_arg(args, 1)?.ok_or("training-mode Dropout needs its key input")?;
        let key = match key.to_i64_vec().as_deref() {
            Some([k]) => *k as u64,
            _ => return Err(format!("the key must be one integer, got {} {:?}", key.dtype(), key.shape)),
        };
        let mut m = vec![0u8; mask.len()];
        let data = crate::map_float_data!(&x.data, v => {
            let mut out = v.clone();
            burnc_runtime::kernels::dropout::dropout(v, &mut out, key, ratio, &mut m);
            out
        }, other => return Err("unreachable: not a float".into()));
        for (o, &k) in mask.iter_mut().zip(&m) {
            *o = k != 0;
        }
        Tensor::new(x.shape.clone(), data)
    } else {
        x.clone()
    };
    let mut outs = vec![RtValue::Tensor(y)];
    if n_outputs > 1 {
        outs.push(RtValue::Tensor(Tensor::new(x.shape.clone(), Data::Bool(mask))));
    }
    Ok(outs)
}
