//! Convolution, in terms of Conv / ConvTranspose so no backward kernel is needed:
//! - Conv's dX is ConvTranspose of dY with the same weights and window; `output_padding`
//!   restores the input rows the forward stride skipped.
//! - Conv's dW correlates X with dY: a Conv with batch and channels swapped (N becomes the
//!   channel axis, so the sum over the batch is the conv's channel sum), stride and dilation
//!   exchanged, per group; the result is cut to the kernel size.
//!
//! The window geometry is resolved (auto_pad, defaults) with the interpreter's own
//! `window::resolve`, so these rules need static shapes. Pooling's rules (`ops::pool`) use the
//! same geometry ([`geo`]).
use super::builder::{B, R};
use super::{dy0, input};
use crate::ops::window::{attrs, resolve};
use crate::ir::{AutoPad, Node, Op, ValueId, Window};
use crate::ops::conv_transpose::ConvTranspose;
use crate::ops::IntoOp;

/// A window with everything explicit.
pub(crate) struct Geo {
    pub(crate) kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads: Vec<usize>,
    /// Output padding for a ConvTranspose that maps the output back onto the input size.
    pub(crate) out_pad: Vec<usize>,
}

impl Geo {
    pub(crate) fn window(&self) -> Window {
        Window {
            kernel_shape: self.kernel.clone(),
            strides: self.strides.clone(),
            pads: self.pads.clone(),
            dilations: self.dilations.clone(),
            auto_pad: AutoPad::NotSet,
            ceil_mode: false,
        }
    }
}

pub(crate) fn geo(win: &Window, kernel: &[usize], spatial: &[usize]) -> R<Geo> {
    let a = attrs(win, kernel)?;
    let w3 = resolve(win, kernel, spatial)?;
    let n = kernel.len();
    let off = 3 - n;
    let pb: Vec<usize> = w3.pads_begin[off..].iter().map(|&p| p.max(0) as usize).collect();
    let pe: Vec<usize> = w3.pads_end[off..].iter().map(|&p| p.max(0) as usize).collect();
    let mut out_pad = Vec::with_capacity(n);
    for i in 0..n {
        let o = w3.output[off + i];
        let dk = (kernel[i] - 1) * a.dilations[i] + 1;
        // ConvTranspose's output size is (o-1)s + dk - pb - pe + output_padding.
        let covered = ((o.max(1) - 1) * a.strides[i] + dk) as isize - (pb[i] + pe[i]) as isize;
        let extra = spatial[i] as isize - covered;
        if extra < 0 {
            return Err(format!("windows reach past the padded input along spatial dim {i} (ceil_mode), not supported"));
        }
        out_pad.push(extra as usize);
    }
    let mut pads = pb;
    pads.extend(pe);
    Ok(Geo { kernel: kernel.to_vec(), strides: a.strides, dilations: a.dilations, pads, out_pad })
}

pub fn rule(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], need: &[bool]) -> R<Vec<Option<ValueId>>> {
    let dy = dy0(dys)?;
    let x = input(n, 0)?;
    let xd = b.fixed_dims(x)?;
    if xd.len() < 3 {
        return Err(format!("input of rank {} (need batch, channels and spatial dims)", xd.len()));
    }
    let want = |i: usize| need.get(i).copied().unwrap_or(false);
    match &n.op {
        Op::Conv { window, group } => {
            let w = input(n, 1)?;
            let wd = b.fixed_dims(w)?;
            let g = geo(window, &wd[2..], &xd[2..])?;
            let dx = if want(0) {
                let op = ConvTranspose { window: g.window(), group: *group, output_padding: g.out_pad.clone(), output_shape: vec![] }.op();
                Some(b.node(op, &[dy, w])?)
            } else {
                None
            };
            let dw = if want(1) { Some(conv_weight_grad(b, x, &xd, dy, &wd, &g, *group)?) } else { None };
            let db = match n.inputs.get(2).copied().flatten() {
                Some(_) if want(2) => {
                    let axes: Vec<i64> = std::iter::once(0).chain(2..xd.len() as i64).collect();
                    Some(b.reduce_sum(dy, axes, false)?)
                }
                _ => None,
            };
            Ok(vec![dx, dw, db])
        }
        other => Err(format!("no gradient rule for {}", other.name())),
    }
}

/// dW[m, c, p] = Σ_n,j dY[n, m, j] · X[n, group(m)·Cg + c, j·s + p·d - pad]: a grouped Conv
/// of X laid out [Cg, g·N, …] with dY laid out [M, N, …] as weights.
fn conv_weight_grad(b: &mut B<'_>, x: ValueId, xd: &[usize], dy: ValueId, wd: &[usize], g: &Geo, group: usize) -> R<ValueId> {
    let (nb, c) = (xd[0], xd[1]);
    let nsp = xd.len() - 2;
    if group == 0 || c % group != 0 {
        return Err(format!("{c} channels do not split into {group} groups"));
    }
    let cg = c / group;
    let sp: Vec<i64> = xd[2..].iter().map(|&d| d as i64).collect();
    let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let s5 = b.ints(&[&[nb as i64, group as i64, cg as i64][..], &sp].concat());
    let x5 = b.node(Op::Reshape { allowzero: false }, &[x, s5])?;
    let perm: Vec<usize> = [vec![2, 1, 0], (3..3 + nsp).collect()].concat();
    let xt = b.transpose(x5, perm)?;
    let s4 = b.ints(&[&[cg as i64, (group * nb) as i64][..], &sp].concat());
    let xr = b.node(Op::Reshape { allowzero: false }, &[xt, s4])?;
    let swap: Vec<usize> = [vec![1, 0], (2..2 + nsp).collect()].concat();
    let dyt = b.transpose(dy, swap.clone())?;
    let win = Window {
        kernel_shape: vec![],
        strides: g.dilations.clone(),
        pads: g.pads.clone(),
        dilations: g.strides.clone(),
        auto_pad: AutoPad::NotSet,
        ceil_mode: false,
    };
    let full = b.node_n(Op::Conv { window: win, group }, vec![Some(xr), Some(dyt), None], 1)?[0];
    // The correlation may run past the kernel (trailing rows the forward stride skipped).
    let fd = b.fixed_dims(full)?;
    let cut = if fd[2..] == wd[2..] {
        full
    } else {
        let starts = b.ints(&vec![0; nsp]);
        let ends = b.ints(&i64s(&wd[2..]));
        let axes = b.ints(&(2..2 + nsp as i64).collect::<Vec<_>>());
        b.node(crate::ops::slice::Slice.op(), &[full, starts, ends, axes])?
    };
    b.transpose(cut, swap)
}
