//! Symbolic shapes for bounded dims (`--input x=1x3x{h<=64}x{w<=64}`): every tensor's dims as
//! [`DimExpr`]s over the named input dims, and the values of small integer tensors that shape
//! subgraphs compute (`Shape → Gather → Unsqueeze → Concat`), for the ops bounded codegen
//! supports. Any other op whose shapes depend on a named dim is an error naming the node.
//!
//! [`relax_reshapes`] rewrites a Reshape whose target a shape subgraph computes into a constant
//! target with `0` (copy the input dim) and `-1` (the rest), so that pinning the dims at their
//! bounds and folding cannot bake the bound's sizes into it.
use super::infer::node_err;
use super::PassError;
use crate::ir::{AutoPad, BinaryOp, DimExpr, Graph, Node, Op, PoolKind, UnaryOp, ValueId, Window};
use std::collections::HashMap;

/// What the analysis knows: each tensor's dims, and the contents of 1-D / scalar integer
/// tensors computed from shapes.
#[derive(Debug, Default, Clone)]
pub struct SymInfo {
    pub shapes: HashMap<ValueId, Vec<DimExpr>>,
    pub ints: HashMap<ValueId, Vec<DimExpr>>,
}

impl SymInfo {
    /// Whether any dim of `v` depends on a named dim.
    pub fn is_symbolic(&self, v: ValueId) -> bool {
        self.shapes.get(&v).is_some_and(|s| s.iter().any(|d| d.as_const().is_none()))
    }
}

type R<T> = Result<T, String>;

fn unsupported(n: &Node) -> String {
    let op = n.source_op.as_ref().map(|(o, _)| o.clone()).unwrap_or_else(|| n.op.name());
    format!("`{op}` does not support bounded dims yet; pin them with --input")
}

fn c(v: i64) -> DimExpr {
    DimExpr::constant(v)
}

fn prod(d: &[DimExpr]) -> DimExpr {
    d.iter().fold(c(1), |a, b| a.mul(b))
}

fn norm_axis(a: i64, r: usize) -> R<usize> {
    let x = if a < 0 { a + r as i64 } else { a };
    if x < 0 || x >= r as i64 {
        return Err(format!("axis {a} is out of range for rank {r}"));
    }
    Ok(x as usize)
}

/// Analyse `g` with graph inputs' dims from `inputs` (other inputs keep their static types).
pub fn analyze(g: &Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>) -> Result<SymInfo, PassError> {
    let mut s = SymInfo { shapes: inputs.clone(), ints: HashMap::new() };
    for n in &g.nodes {
        node(g, n, &mut s).map_err(|reason| node_err(n, reason))?;
    }
    Ok(s)
}

/// The dims of `v`: from the analysis, or its static type.
fn shape_of(g: &Graph, s: &SymInfo, v: ValueId) -> R<Vec<DimExpr>> {
    if let Some(d) = s.shapes.get(&v) {
        return Ok(d.clone());
    }
    let fixed = g.tensor_type(v).and_then(|t| t.shape.as_ref()?.as_fixed());
    fixed.map(|d| d.iter().map(|&x| c(x as i64)).collect()).ok_or_else(|| format!("value `{}` has no known shape", g.value(v).name))
}

/// The contents of integer value `v`: computed from shapes, or a constant.
fn ints_of(g: &Graph, s: &SymInfo, v: ValueId) -> Option<Vec<DimExpr>> {
    if let Some(i) = s.ints.get(&v) {
        return Some(i.clone());
    }
    let t = g.const_value(v)?;
    if t.shape.len() > 1 {
        return None;
    }
    Some(t.to_i64_vec()?.into_iter().map(c).collect())
}

fn input(n: &Node, i: usize) -> R<ValueId> {
    n.inputs.get(i).copied().flatten().ok_or_else(|| format!("missing input #{i}"))
}

fn node(g: &Graph, n: &Node, s: &mut SymInfo) -> R<()> {
    let ins: Vec<Option<Vec<DimExpr>>> = n.inputs.iter().map(|i| i.and_then(|v| shape_of(g, s, v).ok())).collect();
    let sym_ints = n.inputs.iter().flatten().any(|v| s.ints.get(v).is_some_and(|i| i.iter().any(|d| d.as_const().is_none())));
    let sym_shapes = n.inputs.iter().flatten().any(|v| s.is_symbolic(*v));
    if !sym_ints && !sym_shapes && !matches!(n.op, Op::Shape { .. }) {
        // Nothing here depends on a named dim: the static types hold.
        for &o in &n.outputs {
            if let Some(d) = g.tensor_type(o).and_then(|t| t.shape.as_ref()?.as_fixed()) {
                s.shapes.insert(o, d.iter().map(|&x| c(x as i64)).collect());
            }
        }
        return Ok(());
    }
    let x = |i: usize| -> R<Vec<DimExpr>> { ins.get(i).cloned().flatten().ok_or_else(|| format!("input #{i} has no known shape")) };
    let out = *n.outputs.first().ok_or("no output")?;
    let shape: Vec<DimExpr> = match &n.op {
        Op::Shape { start, end } => {
            let xs = x(0)?;
            let r = xs.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let (a, b) = (clamp(*start), clamp(end.unwrap_or(r)));
            let v: Vec<DimExpr> = xs[a..b.max(a)].to_vec();
            let len = v.len();
            s.ints.insert(out, v);
            vec![c(len as i64)]
        }
        Op::Unary(UnaryOp::Identity) | Op::Cast { .. } | Op::Dropout { training: false, .. } => {
            if let Some(i) = s.ints.get(&input(n, 0)?).cloned() {
                s.ints.insert(out, i);
            }
            x(0)?
        }
        Op::Unary(_) | Op::Softmax { .. } | Op::LayerNorm { .. } => x(0)?,
        Op::Gather { axis } => {
            let data = input(n, 0)?;
            let idx = g.const_value(input(n, 1)?).and_then(|t| Some((t.shape.clone(), t.to_i64_vec()?)));
            match (s.ints.get(&data).cloned(), idx) {
                (Some(vals), Some((ishape, idx))) if *axis == 0 && ishape.len() <= 1 => {
                    let len = vals.len() as i64;
                    let picked = idx
                        .iter()
                        .map(|&i| vals.get((if i < 0 { i + len } else { i }) as usize).cloned().ok_or_else(|| format!("index {i} out of range")))
                        .collect::<R<Vec<_>>>()?;
                    s.ints.insert(out, picked);
                    ishape.iter().map(|&d| c(d as i64)).collect()
                }
                _ => return Err(unsupported(n)),
            }
        }
        Op::Unsqueeze { .. } | Op::Squeeze { .. } => {
            let xs = x(0)?;
            let axes = match &n.op {
                Op::Unsqueeze { axes: Some(a) } | Op::Squeeze { axes: Some(a) } => a.clone(),
                _ => match n.inputs.get(1).copied().flatten() {
                    Some(v) => g.const_value(v).and_then(|t| t.to_i64_vec()).ok_or("axes are not constant")?,
                    None => vec![],
                },
            };
            if let Some(i) = s.ints.get(&input(n, 0)?).cloned() {
                s.ints.insert(out, i);
            }
            if matches!(n.op, Op::Unsqueeze { .. }) {
                let r = xs.len() + axes.len();
                let mut ax: Vec<usize> = axes.iter().map(|&a| norm_axis(a, r)).collect::<R<_>>()?;
                ax.sort_unstable();
                let mut d = xs;
                for a in ax {
                    d.insert(a, c(1));
                }
                d
            } else {
                let ax: Vec<usize> = if axes.is_empty() {
                    (0..xs.len()).filter(|&i| xs[i].as_const() == Some(1)).collect()
                } else {
                    axes.iter().map(|&a| norm_axis(a, xs.len())).collect::<R<_>>()?
                };
                xs.into_iter().enumerate().filter(|(i, _)| !ax.contains(i)).map(|(_, d)| d).collect()
            }
        }
        Op::Concat { axis } => {
            let all: Vec<Vec<DimExpr>> = (0..n.inputs.len()).map(&x).collect::<R<_>>()?;
            let r = all.first().map_or(0, |a| a.len());
            let ax = norm_axis(*axis, r)?;
            if all.iter().all(|a| a.len() == 1) && ax == 0 {
                // A shape being assembled: concatenate the values too.
                let vals: Option<Vec<Vec<DimExpr>>> = n.inputs.iter().flatten().map(|&v| ints_of(g, s, v)).collect();
                if let Some(v) = vals {
                    s.ints.insert(out, v.concat());
                }
            }
            let mut d = all[0].clone();
            d[ax] = all.iter().fold(c(0), |acc, a| acc.add(&a[ax]));
            d
        }
        Op::Binary(b) => {
            let (a, bb) = (x(0)?, x(1)?);
            let av = ints_of(g, s, input(n, 0)?);
            let bv = ints_of(g, s, input(n, 1)?);
            if let (Some(p), Some(q)) = (av, bv) {
                if sym_ints {
                    let len = p.len().max(q.len());
                    let get = |v: &Vec<DimExpr>, i: usize| if v.len() == 1 { v[0].clone() } else { v[i].clone() };
                    let vals = (0..len)
                        .map(|i| {
                            let (l, r) = (get(&p, i), get(&q, i));
                            Ok(match b {
                                BinaryOp::Add => l.add(&r),
                                BinaryOp::Sub => l.sub(&r),
                                BinaryOp::Mul => l.mul(&r),
                                BinaryOp::Div => match r.as_const() {
                                    Some(k) if k > 0 => l.floor_div(k),
                                    _ => return Err(unsupported(n)),
                                },
                                _ => return Err(unsupported(n)),
                            })
                        })
                        .collect::<R<Vec<_>>>()?;
                    s.ints.insert(out, vals);
                }
            }
            broadcast(&a, &bb)?
        }
        Op::Reshape { allowzero } => {
            let xs = x(0)?;
            let target = ints_of(g, s, input(n, 1)?).ok_or_else(|| unsupported(n))?;
            reshape(&xs, &target, *allowzero)?
        }
        Op::Flatten { axis } => {
            let xs = x(0)?;
            let a = if *axis < 0 { *axis + xs.len() as i64 } else { *axis } as usize;
            if a > xs.len() {
                return Err(format!("axis {axis} is out of range"));
            }
            vec![prod(&xs[..a]), prod(&xs[a..])]
        }
        Op::Transpose { perm } => {
            let xs = x(0)?;
            let p: Vec<usize> = perm.clone().unwrap_or_else(|| (0..xs.len()).rev().collect());
            p.iter().map(|&i| xs.get(i).cloned().ok_or("bad perm".to_string())).collect::<R<_>>()?
        }
        Op::Conv { window, .. } | Op::FusedConv { window, .. } => {
            let (xs, ws) = (x(0)?, x(1)?);
            let kernel: Vec<i64> = ws[2..].iter().map(|d| d.as_const().ok_or_else(|| "the kernel size depends on a bounded dim".to_string())).collect::<R<_>>()?;
            let mut d = vec![xs[0].clone(), ws[0].clone()];
            d.extend(window_out(window, &kernel, &xs[2..])?);
            d
        }
        Op::Pool { window, kind, .. } => {
            if !matches!(kind, PoolKind::Max | PoolKind::Avg { .. }) {
                return Err(unsupported(n));
            }
            let xs = x(0)?;
            let k: Vec<i64> = window.kernel_shape.iter().map(|&v| v as i64).collect();
            let mut d = xs[..2].to_vec();
            d.extend(window_out(window, &k, &xs[2..])?);
            d
        }
        Op::GlobalPool { .. } => {
            let xs = x(0)?;
            let mut d = xs[..2].to_vec();
            d.extend(std::iter::repeat_n(c(1), xs.len() - 2));
            d
        }
        Op::Gemm { trans_a, trans_b, .. } => {
            let (a, b) = (x(0)?, x(1)?);
            if a.len() != 2 || b.len() != 2 {
                return Err("Gemm needs 2-D operands".into());
            }
            vec![a[if *trans_a { 1 } else { 0 }].clone(), b[if *trans_b { 0 } else { 1 }].clone()]
        }
        Op::MatMul => {
            let (a, b) = (x(0)?, x(1)?);
            if a.len() < 2 || b.len() < 2 {
                return Err(unsupported(n));
            }
            let mut d = broadcast(&a[..a.len() - 2], &b[..b.len() - 2])?;
            d.push(a[a.len() - 2].clone());
            d.push(b[b.len() - 1].clone());
            d
        }
        _ => return Err(unsupported(n)),
    };
    s.shapes.insert(out, shape);
    Ok(())
}

/// numpy broadcasting: equal dims, or one of them the constant 1.
fn broadcast(a: &[DimExpr], b: &[DimExpr]) -> R<Vec<DimExpr>> {
    let r = a.len().max(b.len());
    let one = c(1);
    (0..r)
        .map(|i| {
            let da = if i + a.len() >= r { &a[i + a.len() - r] } else { &one };
            let db = if i + b.len() >= r { &b[i + b.len() - r] } else { &one };
            if da == db || *db == one {
                Ok(da.clone())
            } else if *da == one {
                Ok(db.clone())
            } else {
                Err(format!("dims {da} and {db} may differ: broadcasting them needs pinned dims"))
            }
        })
        .collect()
}

fn reshape(xs: &[DimExpr], target: &[DimExpr], allowzero: bool) -> R<Vec<DimExpr>> {
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, t) in target.iter().enumerate() {
        match t.as_const() {
            Some(0) if !allowzero => out.push(xs.get(i).cloned().ok_or("Reshape's 0 past the input's rank")?),
            Some(-1) => {
                if infer_at.replace(i).is_some() {
                    return Err("Reshape target has two -1".into());
                }
                out.push(c(1));
            }
            Some(v) if v >= 0 => out.push(c(v)),
            Some(v) => return Err(format!("Reshape target has {v}")),
            None => out.push(t.clone()),
        }
    }
    if let Some(i) = infer_at {
        let known = prod(&out);
        out[i] = prod(xs).exact_div(&known).ok_or_else(|| format!("cannot divide {} by {known} for Reshape's -1", prod(xs)))?;
    }
    Ok(out)
}

/// Output spatial dims of a window with explicit pads (`auto_pad` NOTSET or VALID), as
/// `geom::resolve` computes them for fixed sizes.
fn window_out(w: &Window, kernel: &[i64], input: &[DimExpr]) -> R<Vec<DimExpr>> {
    let k = kernel.len();
    if input.len() != k {
        return Err(format!("input has {} spatial dims, kernel {k}", input.len()));
    }
    if !matches!(w.auto_pad, AutoPad::NotSet | AutoPad::Valid) {
        return Err("auto_pad SAME_* with bounded dims is not supported yet; pin them with --input".into());
    }
    let or = |v: &[usize], i: usize, d: usize| v.get(i).copied().unwrap_or(d) as i64;
    (0..k)
        .map(|i| {
            let (s, dil) = (or(&w.strides, i, 1), or(&w.dilations, i, 1));
            let (pb, pe) = if w.auto_pad == AutoPad::Valid { (0, 0) } else { (or(&w.pads, i, 0), or(&w.pads, k + i, 0)) };
            let span = input[i].add(&c(pb + pe - ((kernel[i] - 1) * dil + 1)));
            if w.ceil_mode {
                // ceil_mode's last-window correction depends on the size; refuse rather than guess.
                return Err("ceil_mode pooling with bounded dims is not supported yet; pin them with --input".into());
            }
            Ok(span.floor_div(s).add(&c(1)))
        })
        .collect()
}

/// Rewrite each Reshape whose target depends on a named dim into a constant target (`0` where
/// the entry is the input's dim at the same position, `-1` for at most one other), so folding
/// at the bound keeps it size-independent. Errors when no such rewrite exists.
pub fn relax_reshapes(g: &mut Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>) -> Result<(), PassError> {
    let info = analyze(g, inputs)?;
    for ni in 0..g.nodes.len() {
        let n = &g.nodes[ni];
        let Op::Reshape { allowzero } = n.op else { continue };
        let (Some(Some(xv)), Some(Some(tv))) = (n.inputs.first().copied(), n.inputs.get(1).copied()) else { continue };
        let Some(target) = info.ints.get(&tv) else { continue };
        if target.iter().all(|d| d.as_const().is_some()) {
            continue;
        }
        // With allowzero a literal 0 is a zero dim; without one (bounded dims are at least 1)
        // the plain Reshape means the same, and its `0` can copy an input dim.
        if allowzero && target.iter().any(|d| d.as_const() == Some(0)) {
            return Err(node_err(n, "Reshape with allowzero and a 0 in a computed target is not supported with bounded dims; pin them with --input".into()));
        }
        let xs = info.shapes.get(&xv).cloned().unwrap_or_default();
        let mut fixed = Vec::with_capacity(target.len());
        let mut minus_one = false;
        for (i, t) in target.iter().enumerate() {
            match t.as_const() {
                Some(v) => {
                    minus_one |= v == -1;
                    fixed.push(v);
                }
                None if xs.get(i) == Some(t) => fixed.push(0),
                None if !minus_one => {
                    minus_one = true;
                    fixed.push(-1);
                }
                None => return Err(node_err(n, format!("Reshape target {:?} has more than one computed dim; pin them with --input", target.iter().map(|d| d.to_string()).collect::<Vec<_>>()))),
            }
        }
        let name = format!("{}_bounded_target", n.name);
        let k = g.add_const(name, crate::tensor::Tensor::new(vec![fixed.len()], crate::tensor::Data::I64(fixed)));
        g.nodes[ni].inputs[1] = Some(k);
        g.nodes[ni].op = Op::Reshape { allowzero: false };
    }
    Ok(())
}

/// After [`relax_reshapes`] and dead code elimination: a value still computed from named dims
/// (a shape subgraph feeding anything but a Reshape target) would be folded at the bound, so
/// it is refused, naming the node that computes it.
pub fn check_no_dim_values(g: &Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>) -> Result<(), PassError> {
    let info = analyze(g, inputs)?;
    for n in &g.nodes {
        if n.outputs.iter().any(|o| info.ints.get(o).is_some_and(|i| i.iter().any(|d| d.as_const().is_none()))) {
            return Err(node_err(n, "computes with the value of a bounded dim (a shape computation not feeding a Reshape); pin the dims with --input".into()));
        }
    }
    Ok(())
}
