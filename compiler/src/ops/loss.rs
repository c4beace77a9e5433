//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: input [N, C, d…], integer targets
//! [N, d…], optional class weights [C]; the loss per sample, or its sum or (weighted) mean,
//! and for the softmax form the log-probabilities. Computed by the runtime kernel
//! `kernels::loss::nll_loss` in the input's float type (f64 in the interpreter).
use crate::ops::view::Unsqueeze;
use super::{input, EmitCx, GradCx, IntoOp, OpDef, OpRef, OutType, ShapeCx, R};
use crate::autodiff::builder::B;
use crate::codegen::CodegenError;
use crate::interp::ops::cast::cast;
use crate::ir::{BinaryOp, DType, DimExpr, LossReduction, Node, Op, ReduceOp, UnaryOp, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::loss as k;

/// `softmax`: SoftmaxCrossEntropyLoss (the input are scores), else NegativeLogLikelihoodLoss
/// (the input are log-probabilities). Targets equal to `ignore_index` add nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NllLoss {
    pub softmax: bool,
    pub reduction: LossReduction,
    pub ignore_index: Option<i64>,
}

impl NllLoss {
    fn kernel_reduction(&self) -> (k::Reduction, &'static str) {
        match self.reduction {
            LossReduction::None => (k::Reduction::None, "None"),
            LossReduction::Sum => (k::Reduction::Sum, "Sum"),
            LossReduction::Mean => (k::Reduction::Mean, "Mean"),
        }
    }

    /// `(N, C, d)` of the input, with the targets' and weights' shapes checked against it.
    fn geometry(cx: &mut ShapeCx) -> R<(DimExpr, DimExpr, DimExpr)> {
        let xs = cx.arg(0)?.dims()?.to_vec();
        if xs.len() < 2 {
            return Err(format!("input must have rank >= 2, got {}", xs.len()));
        }
        let t = cx.arg(1)?.clone();
        if !matches!(t.dtype, DType::I32 | DType::I64) {
            return Err(format!("target must be int32 or int64, got {}", t.dtype));
        }
        let ts = t.dims()?;
        if ts.len() + 1 != xs.len() {
            return Err(format!("target has rank {}, the input {}", ts.len(), xs.len()));
        }
        cx.equal("the batches of the input and the target", &xs[0], &ts[0])?;
        for (i, (a, b)) in xs[2..].iter().zip(&ts[1..]).enumerate() {
            cx.equal(&format!("the input's dim {} and the target's dim {}", i + 2, i + 1), a, b)?;
        }
        if let Some(w) = cx.opt(2).cloned() {
            let len = w.dims()?.iter().fold(DimExpr::constant(1), |a, d| a.mul(d));
            cx.equal("the weights and the classes", &len, &xs[1])?;
        }
        let d = xs[2..].iter().fold(DimExpr::constant(1), |a, d| a.mul(d));
        Ok((xs[0].clone(), xs[1].clone(), d))
    }
}

fn back(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> R<Tensor> {
    cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

impl OpDef for NllLoss {
    none_of!(cuda, scratch_bytes, in_place, decides_shapes, forwards_values);

    // Per sample: the log-sum-exp over the classes (softmax form), the log-probabilities, and
    // the weighted loss; without reduction one invocation per sample, with one a single
    // invocation walks every sample (these ops sit at the end of training graphs, small). A
    // target out of range adds nothing (the interpreter refuses it; a kernel cannot stop).
    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        use crate::codegen::wgsl::scalar::{f32_lit, is_float};
        let (x, t, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
        if !is_float(x.dtype) {
            return Err(cx.err(format!("{} on {} is not supported by the wgpu target yet", self.name(), x.dtype)));
        }
        let weight = cx.opt_input(2)?;
        let (n, c) = (x.shape[0], x.shape[1]);
        let d: usize = x.shape[2..].iter().product();
        let at = |j: &str| format!("(i * {c}u + {j}) * {d}u + k");
        let mut sample = String::from("var lse = 0.0;\n");
        if self.softmax {
            sample += &format!(
                "var mx = {};\nfor (var j = 1u; j < {c}u; j++) {{ mx = max(mx, {}); }}\nvar se = 0.0;\nfor (var j = 0u; j < {c}u; j++) {{ se += exp({} - mx); }}\nlse = mx + log(se);\n",
                x.load(&at("0u")),
                x.load(&at("j")),
                x.load(&at("j"))
            );
            if let Some(lp) = cx.used_output(1)? {
                if lp.store("0u", "0.0").is_none() {
                    return Err(cx.err(format!("{} log-probabilities are not supported by the wgpu target yet", lp.dtype)));
                }
                sample += &format!("for (var j = 0u; j < {c}u; j++) {{ {} }}\n", lp.store(&at("j"), &format!("{} - lse", x.load(&at("j")))).unwrap_or_default());
            }
        }
        let ignore = self.ignore_index.map(|v| format!(" && tv != {}", v.clamp(i32::MIN as i64, i32::MAX as i64))).unwrap_or_default();
        let w = weight.as_ref().map(|w| w.load("u32(tv)")).unwrap_or_else(|| "1.0".into());
        sample += &format!(
            "let tv = {};\nvar l = 0.0;\nvar w = 0.0;\nif (tv >= 0 && tv < {c}{ignore}) {{ w = {w}; l = -({} - lse) * w; }}\n",
            t.load(&format!("i * {d}u + k")),
            x.load(&at("u32(tv)"))
        );
        let kernel = match self.reduction {
            LossReduction::None => {
                let store = y.store("s", "l").ok_or_else(|| cx.err("loss output type"))?;
                cx.rows(n * d, &format!("let s = row;\nlet i = s / {d}u;\nlet k = s % {d}u;\n{sample}{store}"))
            }
            r => {
                let denom = if weight.is_some() || self.ignore_index.is_some() { "wsum".to_string() } else { f32_lit((n * d) as f32) };
                let v = if r == LossReduction::Sum { "total".to_string() } else { format!("total / {denom}") };
                let store = y.store_in_word("0u", &v).ok_or_else(|| cx.err("loss output type"))?;
                cx.rows(1, &format!("var total = 0.0;\nvar wsum = 0.0;\nfor (var s = 0u; s < {}u; s++) {{\nlet i = s / {d}u;\nlet k = s % {d}u;\n{sample}total += l;\nwsum += w;\n}}\n{store}", n * d))
            }
        };
        Ok(vec![kernel])
    }

    name!(softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss");

    // The loss per sample ([N, d…]: the input without the class axis) or reduced to a
    // scalar; then SoftmaxCrossEntropyLoss's log-probabilities, shaped like the input.
    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let known = (0..3).all(|i| cx.opt(i).is_none_or(|a| a.dims.is_some()));
        if known {
            Self::geometry(cx)?;
        }
        let loss = match (self.reduction, &x.dims) {
            (LossReduction::None, Some(d)) if d.len() >= 2 => Some([&d[..1], &d[2..]].concat()),
            (LossReduction::None, _) => None,
            _ => Some(vec![]),
        };
        let mut out = vec![OutType { dtype: x.dtype, dims: loss }];
        if self.softmax {
            out.push(OutType { dtype: x.dtype, dims: x.dims.clone() });
        }
        Ok(out)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, target) = (input(ins, 0)?, input(ins, 1)?);
        let weight = ins.get(2).copied().flatten();
        let mut cx = ShapeCx::of_shapes(ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..]))));
        Self::geometry(&mut cx)?;
        let (n, c) = (x.shape[0], x.shape[1]);
        let d: usize = x.shape[2..].iter().product();
        let t = target.to_i64_vec().ok_or("target must be integers")?;
        let w = weight.map(|w| w.to_f64_vec());
        let xv = x.to_f64_vec();
        let red = self.kernel_reduction().0;
        let mut loss = vec![0.0f64; if red == k::Reduction::None { n * d } else { 1 }];
        let mut log_prob = if self.softmax { vec![0.0f64; xv.len()] } else { vec![] };
        k::nll_loss(&xv, &t, w.as_deref(), n, c, d, self.softmax, self.ignore_index, red, &mut loss, self.softmax.then_some(&mut log_prob[..]))
            .map_err(|tv| format!("target {tv} is out of range for {c} classes"))?;
        let out_shape = if red == k::Reduction::None { target.shape.clone() } else { vec![] };
        let mut outs = vec![back(x.dtype(), out_shape, loss)?];
        if self.softmax {
            outs.push(back(x.dtype(), x.shape.clone(), log_prob)?);
        }
        Ok(outs)
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, target) = (cx.input(0)?, cx.input(1)?);
        cx.dtype_among(x, &[DType::F32, DType::F64])?;
        let (nb, c, d) = Self::geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        let weight = match cx.opt_input(2) {
            Some(w) => format!("Some({})", cx.read(w)?),
            None => "None".into(),
        };
        let log_prob = match cx.used_output(1) {
            Some(v) if self.softmax => format!("Some({})", cx.write(v)?),
            _ => "None".into(),
        };
        // A target out of range leaves the loss as the kernel found it: the kernel checks
        // every target before it writes.
        Ok(format!(
            "let _ = rt::kernels::loss::nll_loss({}, {}, {weight}, {}, {}, {}, {}, {:?}, rt::kernels::loss::Reduction::{}, {}, {log_prob});",
            cx.read(x)?,
            cx.read(target)?,
            cx.size(&nb)?,
            cx.size(&c)?,
            cx.size(&d)?,
            self.softmax,
            self.ignore_index,
            self.kernel_reduction().1,
            cx.write(cx.output(0)?)?,
        ))
    }

    // About one operation per input element.
    flops!(per_input 1);

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        gradient(self, cx)
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![3, 4, 2], (0..24).map(|i| ((i * 5 % 7) as f32 - 3.0) / 4.0).collect());
    let t = Tensor::from_i64s(vec![3, 2], vec![0, 3, 1, -1, 2, 2]);
    let w = Tensor::from_f32s(vec![4], vec![1.0, 0.5, 2.0, 1.5]);
    let op = |softmax, reduction| OpRef::new(NllLoss { softmax, reduction, ignore_index: Some(-1) });
    vec![
        super::Example { consts: vec![], op: op(true, LossReduction::Mean), inputs: vec![x.clone(), t.clone(), w] },
        super::Example { consts: vec![], op: op(false, LossReduction::None), inputs: vec![x, t] },
    ]
}

// The gradient. Per sample the loss is
// l = -w[t]·x[t] (x = LogSoftmax(scores) with `softmax`), 0 where t is ignore_index; the
// reduction sums, or divides the sum by W = Σ w[t] over the samples not ignored (ONNX's mean).
// With c = w[t]·valid, the per-sample factor g = dy (none, sum) or dy / W (mean):
//   dx = -onehot(t)·c·g                         (NLL)
//   dx = (softmax(x) - onehot(t))·c·g           (softmax cross-entropy)
// The one-hot is Equal(classes, t) so an out-of-range ignore_index (e.g. -100) needs no
// special case; ignored targets are replaced by 0 before w is gathered.
// The log-probabilities output of SoftmaxCrossEntropyLoss is LogSoftmax(x); a gradient on it
// adds LogSoftmax's rule. The class weights get dw[k] = Σ_{t = k} valid·g·(u - L·[mean]),
// with u = -x[t] the unweighted per-sample loss and L the mean loss.
fn gradient(op: &NllLoss, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
    let NllLoss { softmax, reduction, ignore_index } = *op;
    let (x, t, w) = (cx.input(0)?, cx.input(1)?, cx.n.inputs.get(2).copied().flatten());
    let want: Vec<bool> = (0..3).map(|i| cx.wants(i)).collect();
    let want = |i: usize| want[i];
    let (dloss, dlogp, n) = (cx.dy_at(0), cx.dy_at(1), cx.n);
    let b = &mut *cx.b;
    let dt = b.dtype(x)?;
    let xd = b.dims(x)?;
    let r = xd.len();
    if r < 2 {
        return Err(format!("input of rank {r} (need [N, C, …])"));
    }
    let c = xd[1].fixed().ok_or("the class dim must be static")?;
    let mut out = vec![None; n.inputs.len()];
    if dlogp.is_some() && !softmax {
        return Err("internal: a gradient on output 1 of NegativeLogLikelihoodLoss".into());
    }

    // Targets as i64, ignored ones replaced by class 0 (their weight is zeroed via `valid`).
    let t64 = if b.dtype(t)? == DType::I64 { t } else { b.node(crate::ops::cast::op(DType::I64, false), &[t])? };
    let (t_safe, valid) = match ignore_index {
        Some(ig) => {
            let igv = b.konst(Tensor::scalar_i64(ig));
            let is_ig = b.bin(BinaryOp::Equal, t64, igv)?;
            let zero = b.konst(Tensor::scalar_i64(0));
            let safe = b.node(crate::ops::select::op(), &[is_ig, zero, t64])?;
            let keep = b.node(Op::Unary(UnaryOp::Not), &[is_ig])?;
            (safe, Some(b.node(crate::ops::cast::op(dt, false), &[keep])?))
        }
        None => (t64, None),
    };
    // Per-sample weight c = w[t]·valid, [N, d…].
    let wt = match w {
        Some(w) => Some(b.node(Op::Gather { axis: 0 }, &[w, t_safe])?),
        None => None,
    };
    let coef = match (wt, valid) {
        (Some(a), Some(v)) => Some(b.mul(a, v)?),
        (a, v) => a.or(v),
    };
    // onehot [N, C, d…]: classes shaped [C, 1…] against t unsqueezed at axis 1.
    let mut cshape = vec![c];
    cshape.extend(std::iter::repeat_n(1, r - 2));
    let classes = b.konst(Tensor::from_i64s(cshape, (0..c as i64).collect()));
    let tu = b.node(Unsqueeze { axes: Some(vec![1]) }.op(), &[t_safe])?;
    let eq = b.bin(BinaryOp::Equal, tu, classes)?;
    let onehot = b.node(crate::ops::cast::op(dt, false), &[eq])?;
    // x as log-probabilities.
    let logp = if softmax {
        match n.outputs.get(1) {
            Some(&lp) => lp,
            None => b.node(super::softmax::Softmax { axis: 1, log: true, coerce_2d: false }.op(), &[x])?,
        }
    } else {
        x
    };
    // W = Σ c (or the count N·d when every weight is 1).
    let denom = if reduction == LossReduction::Mean {
        Some(match coef {
            Some(cf) => b.node(crate::ops::reduce::Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false }.op(), &[cf])?,
            None => {
                let s = b.node(crate::ops::dim_values::Size.op(), &[t])?;
                b.node(crate::ops::cast::op(dt, false), &[s])?
            }
        })
    } else {
        None
    };
    // g: dy per sample, [N, d…] or a scalar.
    let g = match dloss {
        Some(dy) => Some(match denom {
            Some(wsum) => b.div(dy, wsum)?,
            None => dy,
        }),
        None => None,
    };
    // Factor on the one-hot: c·g, [N, 1, d…] (or a scalar when neither depends on the sample).
    let cg = match (g, coef) {
        (Some(g), Some(cf)) => Some(b.mul(cf, g)?),
        (g, _) => g,
    };
    let cg_u = match cg {
        Some(v) if b.rank(v)? > 0 => Some(b.node(Unsqueeze { axes: Some(vec![1]) }.op(), &[v])?),
        v => v,
    };
    if want(0) {
        let mut dx = match cg_u {
            Some(f) => {
                let base = if softmax {
                    let p = b.un(UnaryOp::Exp, logp)?;
                    b.sub(p, onehot)?
                } else {
                    b.neg(onehot)?
                };
                // f is [N, 1, d…] or a scalar, so the product has x's shape.
                Some(b.mul(base, f)?)
            }
            None => None,
        };
        // LogSoftmax's rule for a gradient on the log-probabilities: dl - p·Σ_c dl.
        if let Some(dl) = dlogp {
            let s = b.reduce_sum(dl, vec![1], true)?;
            let p = b.un(UnaryOp::Exp, logp)?;
            let ps = b.mul(p, s)?;
            let d = b.sub(dl, ps)?;
            dx = Some(match dx {
                Some(prev) => b.add(prev, d)?,
                None => d,
            });
        }
        out[0] = dx;
    }
    if let (true, Some(w), Some(g)) = (want(2), w, g) {
        out[2] = Some(weight_grad(b, onehot, logp, valid, g, reduction, w, n, c, r)?);
    }
    Ok(out)
}

/// dw[k] = Σ_{samples with t = k} valid·g·(u - L) (L only for the mean), u = -logp[t].
#[allow(clippy::too_many_arguments)]
fn weight_grad(
    b: &mut B<'_>,
    onehot: ValueId,
    logp: ValueId,
    valid: Option<ValueId>,
    g: ValueId,
    reduction: LossReduction,
    w: ValueId,
    n: &Node,
    c: usize,
    r: usize,
) -> R<ValueId> {
    let picked = b.mul(onehot, logp)?;
    let picked = b.reduce_sum(picked, vec![1], false)?;
    let mut u = b.neg(picked)?;
    if reduction == LossReduction::Mean {
        let l = *n.outputs.first().ok_or("output 0 is missing")?;
        u = b.sub(u, l)?;
    }
    let mut h = b.mul(u, g)?;
    if let Some(v) = valid {
        h = b.mul(h, v)?;
    }
    let hu = b.node(Unsqueeze { axes: Some(vec![1]) }.op(), &[h])?;
    let t = b.mul(onehot, hu)?;
    let axes: Vec<i64> = std::iter::once(0).chain(2..r as i64).collect();
    let d = b.reduce_sum(t, axes, false)?;
    if b.fixed_dims(d)? != [c] {
        return Err(format!("internal: weight gradient shaped {:?}", b.dims(d)?));
    }
    b.reshape_like(d, w)
}
