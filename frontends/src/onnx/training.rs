//! The ai.onnx.preview.training domain, lowered onto core ops so a training step goes through
//! the same passes, interpreter and codegen as inference:
//! - `Gradient` runs burnc's reverse-mode autodiff (`burnc_compiler::autodiff`) over the graph
//!   built so far, seeding `y` with ones as the ONNX reference does.
//! - `Adagrad`, `Momentum` and `Adam` become their update formulas (the spec's reference
//!   implementations, in the same order of operations), elementwise in X's dtype. The step
//!   count T decides between branches (T > 0) with a `Where`, so T stays a run-time input.
use super::attrs::Attrs;
use super::import::{node_label, Ctx};
use super::proto::NodeProto;
use super::OnnxError;
use burnc_compiler::ir::{BinaryOp, Op, UnaryOp, ValueId};
use burnc_compiler::Tensor;

struct L<'n> {
    node: &'n NodeProto,
    label: String,
    opset: i64,
}

impl L<'_> {
    fn err(&self, reason: impl Into<String>) -> OnnxError {
        OnnxError::Node { node: self.label.clone(), op: self.node.op_type().into(), opset: self.opset, reason: reason.into() }
    }

    /// One core node; `name` is an ONNX output name to bind, else the value gets a fresh one.
    fn add(&self, ctx: &mut Ctx, op: Op, inputs: &[ValueId], name: Option<&str>) -> ValueId {
        let vname = name.filter(|s| !s.is_empty()).map_or_else(|| ctx.fresh(&self.label), str::to_string);
        let (_, outs) = ctx.graph.add_node(self.label.clone(), op, inputs.iter().map(|&v| Some(v)).collect(), &[vname]);
        if let Some(last) = ctx.graph.nodes.last_mut() {
            last.source_op = Some((self.node.op_type().to_string(), self.opset));
        }
        if let Some(n) = name {
            ctx.bind(n, outs[0]);
        }
        outs[0]
    }

    fn bin(&self, ctx: &mut Ctx, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        self.add(ctx, Op::Binary(op), &[a, b], None)
    }

    /// A scalar attribute value as a constant of `like`'s dtype.
    fn scalar(&self, ctx: &mut Ctx, v: f64, like: ValueId) -> ValueId {
        let c = ctx.constant(&self.label, Tensor::from_f32s(vec![], vec![v as f32]));
        self.add(ctx, burnc_compiler::ops::cast::like(false), &[c, like], None)
    }
}

pub fn lower(ctx: &mut Ctx, node: &NodeProto) -> Result<(), OnnxError> {
    let l = L { node, label: node_label(node), opset: ctx.opset };
    match node.op_type() {
        "Gradient" => gradient(ctx, &l),
        "Adagrad" | "Momentum" | "Adam" => optimizer(ctx, &l),
        op => Err(OnnxError::UnsupportedOp {
            node: l.label.clone(),
            op: op.into(),
            domain: node.domain().into(),
            opset: ctx.opset,
        }),
    }
}

fn gradient(ctx: &mut Ctx, l: &L) -> Result<(), OnnxError> {
    let a = Attrs(&l.node.attribute);
    let xs_names: Vec<String> = a
        .0
        .iter()
        .find(|at| at.name() == "xs")
        .map(|at| at.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect())
        .ok_or_else(|| l.err("missing attribute `xs`"))?;
    let y_name = a.s("y").ok_or_else(|| l.err("missing attribute `y`"))?;
    if xs_names.len() != l.node.output.len() {
        return Err(l.err(format!("{} outputs for {} xs", l.node.output.len(), xs_names.len())));
    }
    let y = ctx.lookup(&l.label, &y_name)?.ok_or_else(|| l.err("`y` is empty"))?;
    let mut xs = Vec::with_capacity(xs_names.len());
    for x in &xs_names {
        xs.push(ctx.lookup(&l.label, x)?.ok_or_else(|| l.err("an entry of `xs` is empty"))?);
    }
    let grads = burnc_compiler::autodiff::gradients(&mut ctx.graph, y, None, &xs).map_err(|e| l.err(e.to_string()))?;
    // An Identity per output gives each gradient the ONNX output's name, and two outputs that
    // are the same gradient value (d(a+b)/da = d(a+b)/db) distinct values.
    for (out, g) in l.node.output.iter().zip(grads) {
        l.add(ctx, Op::Unary(UnaryOp::Identity), &[g], Some(out));
    }
    Ok(())
}

/// Inputs (R, T, X…, G…, V…, H…), outputs (X_new…, V_new…, H_new…): n tensors each.
fn optimizer(ctx: &mut Ctx, l: &L) -> Result<(), OnnxError> {
    let a = Attrs(&l.node.attribute);
    let op = l.node.op_type();
    let groups = match op {
        "Adagrad" | "Momentum" => 3,
        _ => 4,
    };
    let n_in = l.node.input.len();
    let n = n_in.checked_sub(2).filter(|k| k % groups == 0 && *k > 0).map(|k| k / groups);
    let Some(n) = n else { return Err(l.err(format!("{n_in} inputs do not form R, T and {groups} groups of tensors"))) };
    if l.node.output.len() != n * (groups - 1) {
        return Err(l.err(format!("{} outputs for {n} tensors", l.node.output.len())));
    }
    let mut ins = Vec::with_capacity(n_in);
    for name in &l.node.input {
        ins.push(ctx.lookup(&l.label, name)?.ok_or_else(|| l.err("an input is empty"))?);
    }
    let (r, t) = (ins[0], ins[1]);
    let x0 = ins[2];
    // Shared scalars, in X's dtype: the learning rate, the step as a number, whether T > 0.
    let rate = l.add(ctx, burnc_compiler::ops::cast::like(false), &[r, x0], None);
    let step = l.add(ctx, burnc_compiler::ops::cast::like(false), &[t, x0], None);
    let zero_i = ctx.constant(&l.label, Tensor::scalar_i64(0));
    let started = l.bin(ctx, BinaryOp::Greater, t, zero_i);
    let norm = a.f_or("norm_coefficient", 0.0) as f64;
    let out = |k: usize, i: usize| l.node.output[k * n + i].clone();
    match op {
        "Adagrad" => {
            let decay = l.scalar(ctx, a.f_or("decay_factor", 0.0) as f64, x0);
            let eps = l.scalar(ctx, a.f_or("epsilon", 0.0) as f64, x0);
            let one = l.scalar(ctx, 1.0, x0);
            // r / (1 + t·decay)
            let td = l.bin(ctx, BinaryOp::Mul, step, decay);
            let den = l.bin(ctx, BinaryOp::Add, one, td);
            let lr = l.bin(ctx, BinaryOp::Div, rate, den);
            for i in 0..n {
                let (x, g, h) = (ins[2 + i], ins[2 + n + i], ins[2 + 2 * n + i]);
                let gr = regularized(ctx, l, norm, x, g);
                let gg = l.bin(ctx, BinaryOp::Mul, gr, gr);
                let h_new = l.add(ctx, Op::Binary(BinaryOp::Add), &[h, gg], Some(&out(1, i)));
                let hs = l.add(ctx, Op::Unary(UnaryOp::Sqrt), &[h_new], None);
                let hs = l.bin(ctx, BinaryOp::Add, hs, eps);
                let step_x = l.bin(ctx, BinaryOp::Mul, lr, gr);
                let step_x = l.bin(ctx, BinaryOp::Div, step_x, hs);
                l.add(ctx, Op::Binary(BinaryOp::Sub), &[x, step_x], Some(&out(0, i)));
            }
        }
        "Momentum" => {
            let nesterov = match a.s("mode").as_deref() {
                Some("standard") => false,
                Some("nesterov") => true,
                m => return Err(l.err(format!("mode must be standard or nesterov, got {m:?}"))),
            };
            let alpha = l.scalar(ctx, a.f("alpha").ok_or_else(|| l.err("missing attribute `alpha`"))? as f64, x0);
            let beta = l.scalar(ctx, a.f("beta").ok_or_else(|| l.err("missing attribute `beta`"))? as f64, x0);
            let one = l.scalar(ctx, 1.0, x0);
            // The first step takes the gradient unscaled.
            let beta_adj = l.add(ctx, burnc_compiler::ops::select::op(), &[started, beta, one], None);
            for i in 0..n {
                let (x, g, v) = (ins[2 + i], ins[2 + n + i], ins[2 + 2 * n + i]);
                let gr = regularized(ctx, l, norm, x, g);
                let av = l.bin(ctx, BinaryOp::Mul, alpha, v);
                let bg = l.bin(ctx, BinaryOp::Mul, beta_adj, gr);
                let v_new = l.add(ctx, Op::Binary(BinaryOp::Add), &[av, bg], Some(&out(1, i)));
                let dir = if nesterov {
                    let av = l.bin(ctx, BinaryOp::Mul, alpha, v_new);
                    l.bin(ctx, BinaryOp::Add, gr, av)
                } else {
                    v_new
                };
                let upd = l.bin(ctx, BinaryOp::Mul, rate, dir);
                l.add(ctx, Op::Binary(BinaryOp::Sub), &[x, upd], Some(&out(0, i)));
            }
        }
        _ => {
            let (alpha_f, beta_f) = (a.f_or("alpha", 0.9) as f64, a.f_or("beta", 0.999) as f64);
            let alpha = l.scalar(ctx, alpha_f, x0);
            let beta = l.scalar(ctx, beta_f, x0);
            let one_m_alpha = l.scalar(ctx, 1.0 - alpha_f, x0);
            let one_m_beta = l.scalar(ctx, 1.0 - beta_f, x0);
            let eps = l.scalar(ctx, a.f_or("epsilon", 1e-6) as f64, x0);
            let post = l.scalar(ctx, 1.0 - a.f_or("norm_coefficient_post", 0.0) as f64, x0);
            let one = l.scalar(ctx, 1.0, x0);
            // Bias correction r·sqrt(1 - βᵗ) / (1 - αᵗ) once T > 0; at T = 0 it would divide by
            // zero, and Where takes r there.
            let at = l.bin(ctx, BinaryOp::Pow, alpha, step);
            let bt = l.bin(ctx, BinaryOp::Pow, beta, step);
            let one_m_at = l.bin(ctx, BinaryOp::Sub, one, at);
            let one_m_bt = l.bin(ctx, BinaryOp::Sub, one, bt);
            let sq = l.add(ctx, Op::Unary(UnaryOp::Sqrt), &[one_m_bt], None);
            let corr = l.bin(ctx, BinaryOp::Mul, rate, sq);
            let corr = l.bin(ctx, BinaryOp::Div, corr, one_m_at);
            let lr = l.add(ctx, burnc_compiler::ops::select::op(), &[started, corr, rate], None);
            for i in 0..n {
                let (x, g, v, h) = (ins[2 + i], ins[2 + n + i], ins[2 + 2 * n + i], ins[2 + 3 * n + i]);
                let gr = regularized(ctx, l, norm, x, g);
                let av = l.bin(ctx, BinaryOp::Mul, alpha, v);
                let ag = l.bin(ctx, BinaryOp::Mul, one_m_alpha, gr);
                let v_new = l.add(ctx, Op::Binary(BinaryOp::Add), &[av, ag], Some(&out(1, i)));
                let bh = l.bin(ctx, BinaryOp::Mul, beta, h);
                let gg = l.bin(ctx, BinaryOp::Mul, gr, gr);
                let bg = l.bin(ctx, BinaryOp::Mul, one_m_beta, gg);
                let h_new = l.add(ctx, Op::Binary(BinaryOp::Add), &[bh, bg], Some(&out(2, i)));
                let hs = l.add(ctx, Op::Unary(UnaryOp::Sqrt), &[h_new], None);
                let hs = l.bin(ctx, BinaryOp::Add, hs, eps);
                let ratio = l.bin(ctx, BinaryOp::Div, v_new, hs);
                let upd = l.bin(ctx, BinaryOp::Mul, lr, ratio);
                let x_new = l.bin(ctx, BinaryOp::Sub, x, upd);
                l.add(ctx, Op::Binary(BinaryOp::Mul), &[post, x_new], Some(&out(0, i)));
            }
        }
    }
    Ok(())
}

/// norm_coefficient · x + g (the gradient of the L2 penalty added), or g when it is 0.
fn regularized(ctx: &mut Ctx, l: &L, norm: f64, x: ValueId, g: ValueId) -> ValueId {
    if norm == 0.0 {
        return g;
    }
    let k = l.scalar(ctx, norm, x);
    let kx = l.bin(ctx, BinaryOp::Mul, k, x);
    l.bin(ctx, BinaryOp::Add, kx, g)
}
