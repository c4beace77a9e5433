//! Normalizations (Instance-, MeanVariance-, GroupNormalization, BatchNormalization training): calls into the runtime kernels the
//! interpreter uses, with every size resolved at compile time.
use crate::codegen::emit::f64_lit;
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::util::norm_axes;
use crate::ir::{DType, Graph, Node, NodeId, Op, ValueId};

fn fixed(g: &Graph, v: Option<ValueId>) -> Option<(DType, Vec<usize>)> {
    let t = g.tensor_type(v?)?;
    Some((t.dtype, t.shape.as_ref()?.as_fixed()?))
}

/// MeanVarianceNormalization's permutation (kept axes, then reduced), when one is needed.
fn mvn_perm(shape: &[usize], axes: &[i64]) -> Option<(Vec<usize>, usize)> {
    let rank = shape.len();
    let red = norm_axes(axes, rank).ok()?;
    let mut perm: Vec<usize> = (0..rank).filter(|d| !red.contains(d)).collect();
    let kept = perm.len();
    perm.extend(red.iter().copied());
    Some((perm, kept))
}

fn is_identity(p: &[usize]) -> bool {
    p.iter().enumerate().all(|(i, &d)| i == d)
}

pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    let n = g.node(id);
    match &n.op {
        Op::MeanVarianceNorm { axes } => {
            let Some((d, xs)) = fixed(g, n.inputs.first().copied().flatten()) else { return 0 };
            match mvn_perm(&xs, axes) {
                Some((p, _)) if !is_identity(&p) => 2 * xs.iter().product::<usize>() * d.size(),
                _ => 0,
            }
        }
        _ => 0,
    }
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let x = cx.input(n, 0)?;
    let (xd, xs) = cx.ty(n, x)?;
    let t = cx.elem(n, x)?;
    let float = matches!(xd, DType::F32 | DType::F64);
    let name = n.op.name();
    if !float {
        return Err(cx.err(n, format!("{name} on {xd} is not supported by codegen yet")));
    }
    let numel = |v: ValueId| -> Result<usize, CodegenError> { Ok(cx.ty(n, v)?.1.iter().product()) };
    let rx = cx.read(n, x)?;
    let y = cx.write(n, out)?;
    match &n.op {
        Op::BatchNormTraining { epsilon, momentum } => {
            let c = *xs.get(1).ok_or_else(|| cx.err(n, "BatchNormalization needs rank >= 2"))?;
            let dims = [xs[0], c, xs[2..].iter().product::<usize>()];
            let mut args = Vec::new();
            for i in 1..5 {
                let v = cx.input(n, i)?;
                let (d, s) = cx.ty(n, v)?;
                if d != xd || s.iter().product::<usize>() != c {
                    return Err(cx.err(n, format!("input #{i} must be {c} values of {xd}")));
                }
                args.push(cx.read(n, v)?);
            }
            // Running statistics nobody reads have no slot: the kernel skips empty outputs.
            let stat = |i: usize| match n.outputs.get(i).filter(|o| cx.plan.slots.contains_key(o)) {
                Some(&o) => cx.write(n, o),
                None => Ok("&mut []".into()),
            };
            let (rm, rv) = (stat(1)?, stat(2)?);
            Ok(Some(format!(
                "rt::kernels::norm::batch_norm_train({rx}, {y}, {dims:?}, {}, {}, {}, {}, {}, {}, {rm}, {rv});",
                args[0],
                args[1],
                args[2],
                args[3],
                f64_lit(*epsilon as f64),
                f64_lit(*momentum as f64)
            )))
        }
        Op::InstanceNorm { epsilon } => {
            if xs.len() < 2 {
                return Err(cx.err(n, "InstanceNormalization needs rank >= 2"));
            }
            let plane: usize = xs[2..].iter().product();
            Ok(Some(format!(
                "rt::kernels::norm::instance_norm({rx}, {y}, {}, {}, {plane}, {}, {}, {});",
                xs[0],
                xs[1],
                cx.read(n, cx.input(n, 1)?)?,
                cx.read(n, cx.input(n, 2)?)?,
                f64_lit(*epsilon as f64)
            )))
        }
        Op::MeanVarianceNorm { axes } => {
            let (perm, kept) = mvn_perm(&xs, axes).ok_or_else(|| cx.err(n, "bad axes"))?;
            let pshape: Vec<usize> = perm.iter().map(|&d| xs[d]).collect();
            let outer: usize = pshape[..kept].iter().product();
            let inner: usize = pshape[kept..].iter().product();
            if is_identity(&perm) {
                return Ok(Some(format!("rt::kernels::norm::mean_var_norm({rx}, {y}, {outer}, {inner});")));
            }
            let len: usize = xs.iter().product();
            let mut inv = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inv[p] = i;
            }
            Ok(Some(format!(
                "let (xp, yp) = {}.split_at_mut({len});\n\
                 rt::kernels::permute::permute({rx}, &{xs:?}, &{perm:?}, xp);\n\
                 rt::kernels::norm::mean_var_norm(xp, yp, {outer}, {inner});\n\
                 rt::kernels::permute::permute(yp, &{pshape:?}, &{inv:?}, {y});",
                cx.scratch(n, id, t, 2 * len)?
            )))
        }
        Op::GroupNorm { num_groups, epsilon, per_channel } => {
            if xs.len() < 2 || *num_groups == 0 || xs[1] % num_groups != 0 {
                return Err(cx.err(n, "GroupNormalization geometry"));
            }
            let spatial: usize = xs[2..].iter().product();
            let want = if *per_channel { xs[1] } else { *num_groups };
            let (sc, b) = (cx.input(n, 1)?, cx.input(n, 2)?);
            if numel(sc)? != want || numel(b)? != want {
                return Err(cx.err(n, "scale/bias size"));
            }
            Ok(Some(format!(
                "rt::kernels::norm::group_norm({rx}, {y}, {}, {}, {spatial}, {num_groups}, {}, {}, {per_channel}, {});",
                xs[0],
                xs[1],
                cx.read(n, sc)?,
                cx.read(n, b)?,
                f64_lit(*epsilon as f64)
            )))
        }
        _ => Err(cx.err(n, "not a normalization op")),
    }
}
