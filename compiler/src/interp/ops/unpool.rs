//! Col2Im through the runtime's unpool kernels; the geometry helpers are shared
//! with inference and codegen.
use super::util::{arg, ints_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::unpool;
use burnc_runtime::kernels::window::Window3;

fn dims(v: &[i64], what: &str) -> Result<Vec<usize>, String> {
    v.iter().map(|&d| usize::try_from(d).map_err(|_| format!("{what} has negative entry {d}"))).collect()
}

/// `attr` or, when empty, `n` copies of `d`.
fn or_fill(attr: &[usize], n: usize, d: usize, what: &str) -> Result<Vec<usize>, String> {
    match attr.len() {
        0 => Ok(vec![d; n]),
        l if l == n => Ok(attr.to_vec()),
        l => Err(format!("{what} has {l} entries, expected {n}")),
    }
}

/// Col2Im geometry: (batch, channels, window, output shape).
pub fn col2im_geom(
    op: &Op,
    x: &[usize],
    image: &[i64],
    block: &[i64],
) -> Result<(usize, usize, Window3, Vec<usize>), String> {
    let Op::Col2Im { dilations, pads, strides } = op else { return Err("not Col2Im".into()) };
    let (image, block) = (dims(image, "image_shape")?, dims(block, "block_shape")?);
    let n = image.len();
    if block.len() != n || n == 0 {
        return Err(format!("image_shape {image:?} and block_shape {block:?} must have one (non-zero) length"));
    }
    let &[batch, rows, len] = x else { return Err(format!("input must have rank 3, got {x:?}")) };
    let (dil, st, pads) = (or_fill(dilations, n, 1, "dilations")?, or_fill(strides, n, 1, "strides")?, or_fill(pads, 2 * n, 0, "pads")?);
    let k: usize = block.iter().product();
    if k == 0 || rows % k != 0 {
        return Err(format!("input dim 1 ({rows}) must be a multiple of the block size {k}"));
    }
    let mut blocks = Vec::with_capacity(n);
    for i in 0..n {
        let span = dil[i] * (block[i] - 1) + 1;
        let padded = image[i] + pads[i] + pads[i + n];
        if padded < span || st[i] == 0 {
            return Err(format!("block {} (dilated to {span}) does not fit the padded image dim {padded}", block[i]));
        }
        blocks.push((padded - span) / st[i] + 1);
    }
    if blocks.iter().product::<usize>() != len {
        return Err(format!("input dim 2 ({len}) must be the number of blocks {blocks:?}"));
    }
    let pb: Vec<isize> = pads[..n].iter().map(|&p| p as isize).collect();
    let pe: Vec<isize> = pads[n..].iter().map(|&p| p as isize).collect();
    let win = Window3::new(&image, &blocks, &block, &st, &dil, &pb, &pe).ok_or("Col2Im supports at most 3 spatial dims")?;
    let mut out = vec![batch, rows / k];
    out.extend(&image);
    Ok((batch, rows / k, win, out))
}

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    let x = arg(args, 0)?;
    macro_rules! each {
        ($data:expr, $out_len:expr, |$v:ident, $o:ident| $body:expr) => {
            match $data {
                Data::F32($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::F32($o) }
                Data::F64($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::F64($o) }
                Data::F16($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::F16($o) }
                Data::BF16($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::BF16($o) }
                Data::I8($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::I8($o) }
                Data::I16($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::I16($o) }
                Data::I32($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::I32($o) }
                Data::I64($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::I64($o) }
                Data::U8($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::U8($o) }
                Data::U16($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::U16($o) }
                Data::U32($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::U32($o) }
                Data::U64($v) => { let mut $o = vec![Default::default(); $out_len]; $body; Data::U64($o) }
                other => return Err(format!("{} on {} is not supported", op.name(), other.dtype())),
            }
        };
    }
    let (shape, data) = match op {
        Op::Col2Im { .. } => {
            let (image, block) = (ints_arg(args, 1)?, ints_arg(args, 2)?);
            let (batch, ch, win, out) = col2im_geom(op, &x.shape, &image, &block)?;
            let len = out.iter().product();
            (out, each!(&x.data, len, |v, o| unpool::col2im_batch(v, batch, ch, &win, &mut o)))
        }
        _ => return Err(format!("{} is not an unpool op", op.name())),
    };
    Ok(vec![RtValue::Tensor(Tensor::new(shape, data))])
}
