//! Symbolic shapes for bounded dims (`--input x=1x3x{h<=64}x{w<=64}`): every tensor's dims as
//! [`DimExpr`]s over the named input dims, and the values of small integer tensors that shape
//! subgraphs compute (`Shape → Gather → Unsqueeze → Concat`), for the ops bounded codegen
//! supports. Any other op whose shapes depend on a named dim is an error naming the node.
//!
//! [`reshape_targets`] records, by node name, the symbolic target of each Reshape whose target a
//! shape subgraph computes: pinning the dims at their bounds folds that subgraph into a constant
//! at the bound's sizes, and the analysis of the folded graph takes the recorded target instead.
use super::infer::node_err;
use super::PassError;
use crate::ir::{BinaryOp, Constraint, DimExpr, Graph, Node, NodeId, Op, Rel, UnaryOp, ValueId, ValueKind, Window};
use std::collections::HashMap;

/// What the analysis knows: each tensor's dims, and the contents of 1-D / scalar integer
/// tensors computed from shapes.
#[derive(Debug, Default, Clone)]
pub struct SymInfo {
    pub shapes: HashMap<ValueId, Vec<DimExpr>>,
    pub ints: HashMap<ValueId, Vec<DimExpr>>,
    /// Sizes an op needs equal that the analysis cannot prove equal (a MatMul's inner dims
    /// `c*h*w` and `400`): bounded code checks each at run time and returns a `DimError`.
    pub constraints: Vec<Constraint>,
    /// Where comparisons of dims are decided (the bounds); empty: they are run-time values.
    pub at: HashMap<String, i64>,
    /// What keeps each decided comparison as decided (`q_heads == kv_heads`), for `forward`
    /// to check: the graph folds it at the bounds.
    pub guards: Vec<Constraint>,
    /// The analysis of each Scan body that depends on a named dim, by node; the body is the
    /// one codegen emits (outputs that are not node outputs copied, as `with_output_copies`).
    pub subs: HashMap<NodeId, SymInfo>,
}

impl SymInfo {
    /// Whether `v` holds integers computed from named dims (a shape computation's value).
    pub fn dim_valued(&self, v: ValueId) -> bool {
        self.ints.get(&v).is_some_and(|i| i.iter().any(|d| d.as_const().is_none()))
    }

    /// Whether node `n` reads its input `i` as a shape: a shape computation (its outputs are
    /// dim values too) or the target of a Reshape, Expand or ConstantOfShape.
    pub fn reads_as_shape(&self, n: &Node, i: usize) -> bool {
        let shape_op = n.outputs.iter().all(|o| self.ints.contains_key(o));
        let target = (matches!(n.op, Op::Reshape { .. } | Op::Expand) && i == 1) || (matches!(n.op, Op::ConstantOfShape { .. }) && i == 0);
        shape_op || target
    }
}

/// Record that `a` and `b` must be equal for node `n`'s `what`: nothing when they are the same
/// expression, an error when both are constants that differ, else a run-time [`Constraint`].
fn require_equal(s: &mut SymInfo, n: &Node, what: &str, a: &DimExpr, b: &DimExpr) -> R<()> {
    require(s, n, Constraint { what: what.to_string(), rel: Rel::Equal, left: a.clone(), right: b.clone() })
}

/// Record constraint `c` of node `n`: nothing when it holds, an error when it fails at
/// constant sizes, else a run-time check (its `what` prefixed with the node).
fn require(s: &mut SymInfo, n: &Node, c: Constraint) -> R<()> {
    match c.holds() {
        Some(true) => Ok(()),
        Some(false) => Err(c.failure()),
        None => {
            let c = Constraint { what: format!("node `{}` ({}): {}", n.name, n.op.name(), c.what), ..c };
            if !s.constraints.contains(&c) {
                s.constraints.push(c);
            }
            Ok(())
        }
    }
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

use crate::ir::axis::norm_axis;

/// Symbolic Reshape targets by node name, and ConstantOfShape shapes by node name (`cos:NAME`)
/// and by output value name (`fill:NAME`: folding turns the node into a constant of the bound's shape, whose
/// prefix is the same fill at any smaller shape). See [`reshape_targets`].
pub type Targets = HashMap<String, Vec<DimExpr>>;

/// The key of a recorded fill value.
pub fn fill_key(value_name: &str) -> String {
    format!("\0fill:{value_name}")
}

/// Analyse `g` with graph inputs' dims from `inputs` (other inputs keep their static types)
/// and the Reshape targets recorded before folding.
pub fn analyze(g: &Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>, targets: &Targets) -> Result<SymInfo, PassError> {
    analyze_at(g, inputs, targets, &HashMap::new())
}

/// [`analyze`], deciding comparisons of dims at the values `at` (each with its guard).
pub fn analyze_at(g: &Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>, targets: &Targets, at: &HashMap<String, i64>) -> Result<SymInfo, PassError> {
    analyze_in(g, inputs, HashMap::new(), targets, at)
}

/// [`analyze_at`] with the contents of some integer values known (a Scan body's reads of the
/// enclosing graph's shape values).
fn analyze_in(g: &Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>, ints: HashMap<ValueId, Vec<DimExpr>>, targets: &Targets, at: &HashMap<String, i64>) -> Result<SymInfo, PassError> {
    let mut s = SymInfo { shapes: inputs.clone(), ints, at: at.clone(), ..SymInfo::default() };
    for (i, v) in g.values.iter().enumerate() {
        if let (crate::ir::ValueKind::Const(_), Some(sh)) = (&v.kind, targets.get(&fill_key(&v.name))) {
            s.shapes.insert(ValueId(i as u32), sh.clone());
        }
    }
    for (i, n) in g.nodes.iter().enumerate() {
        node(g, NodeId(i as u32), n, &mut s, targets).map_err(|reason| node_err(n, reason))?;
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

fn node(g: &Graph, id: NodeId, n: &Node, s: &mut SymInfo, targets: &Targets) -> R<()> {
    let ins: Vec<Option<Vec<DimExpr>>> = n.inputs.iter().map(|i| i.and_then(|v| shape_of(g, s, v).ok())).collect();
    let sym_ints = n.inputs.iter().flatten().any(|v| s.ints.get(v).is_some_and(|i| i.iter().any(|d| d.as_const().is_none())));
    let sym_shapes = n.inputs.iter().flatten().any(|v| s.is_symbolic(*v));
    let recorded = (matches!(n.op, Op::Reshape { .. }) && targets.contains_key(&n.name))
        || (matches!(n.op, Op::ConstantOfShape { .. }) && targets.contains_key(&format!("\0cos:{}", n.name)))
        || (matches!(n.op, Op::Expand) && targets.contains_key(&format!("\0exp:{}", n.name)));
    let static_ok = !sym_ints && !sym_shapes && !recorded;
    let has_ints = n.inputs.iter().flatten().any(|v| s.ints.contains_key(v));
    // Nothing here depends on a named dim: the static types hold.
    let statik = |s: &mut SymInfo| {
        for &o in &n.outputs {
            if let Some(d) = g.tensor_type(o).and_then(|t| t.shape.as_ref()?.as_fixed()) {
                s.shapes.insert(o, d.iter().map(|&x| c(x as i64)).collect());
            }
        }
    };
    // A Scan body may read named dims' tensors of the enclosing graph: always analysed.
    if static_ok && !has_ints && !matches!(n.op, Op::Scan { .. }) {
        statik(s);
        // Values an op gives from its inputs' dims alone (a Size) are a shape computation's.
        if let (Some(&o), Some(v)) = (n.outputs.first(), values_from_dims(g, n, &ins)) {
            s.ints.insert(o, v);
        }
        return Ok(());
    }
    if matches!(n.op, Op::Scan { .. }) {
        return scan(g, id, n, s, targets);
    }
    match rule(g, n, s, targets, &ins) {
        Ok(shape) => {
            s.shapes.insert(n.outputs[0], shape);
            Ok(())
        }
        // Constant shape values reaching an op without a rule (Cast → Sqrt of a head size).
        Err(_) if static_ok => {
            statik(s);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Output 0's values when the op's shape rule gives them from its inputs' dims `ins` alone
/// ([`crate::ops::ShapeCx::out_ints`] without values: a Size).
fn values_from_dims(g: &Graph, n: &Node, ins: &[Option<Vec<DimExpr>>]) -> Option<Vec<DimExpr>> {
    let Op::Def(d) = &n.op else { return None };
    let args = n.inputs.iter().zip(ins).map(|(v, dims)| Some(crate::ops::Arg { dtype: g.tensor_type((*v)?)?.dtype, dims: dims.clone(), value: None })).collect();
    let mut cx = crate::ops::ShapeCx::new(args);
    d.shapes(&mut cx).ok()?;
    cx.out_ints.into_iter().next().flatten()
}

/// Elementwise `b` of two shape values (one of them may be a single value).
fn int_binary(s: &mut SymInfo, n: &Node, b: BinaryOp, p: &[DimExpr], q: &[DimExpr]) -> R<Vec<DimExpr>> {
    let len = p.len().max(q.len());
    let get = |v: &[DimExpr], i: usize| if v.len() == 1 { v.first().cloned() } else { v.get(i).cloned() };
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        let (Some(l), Some(r)) = (get(p, i), get(q, i)) else { return Err("shape values of different lengths".to_string()) };
        let (lc, rc) = (l.as_const(), r.as_const());
        out.push(match b {
            BinaryOp::Add => l.add(&r),
            BinaryOp::Sub => l.sub(&r),
            BinaryOp::Mul => l.mul(&r),
            BinaryOp::Div => match rc {
                Some(k) if k > 0 => l.floor_div(k),
                _ => quotient_at(s, n, &l, &r)?,
            },
            BinaryOp::Mod { .. } => match rc {
                Some(k) if k > 0 => l.sub(&l.floor_div(k).scale(k)),
                Some(_) => return Err(unsupported(n)),
                None => {
                    quotient_at(s, n, &l, &r)?;
                    c(0)
                }
            },
            // Booleans as 0 / 1: one known side may decide the result.
            BinaryOp::And => match (lc, rc) {
                (Some(0), _) | (_, Some(0)) => c(0),
                (Some(_), _) => r,
                (_, Some(_)) => l,
                _ => return Err(unsupported(n)),
            },
            BinaryOp::Or => match (lc, rc) {
                (Some(x), _) | (_, Some(x)) if x != 0 => c(1),
                (Some(_), _) => r,
                (_, Some(_)) => l,
                _ => return Err(unsupported(n)),
            },
            BinaryOp::Equal | BinaryOp::Less | BinaryOp::LessOrEqual | BinaryOp::Greater | BinaryOp::GreaterOrEqual => decide(s, n, b, &l, &r)?,
            _ => return Err(unsupported(n)),
        });
    }
    Ok(out)
}

/// `l / r` for a dim `r` (query heads per key head), where `r` divides `l` at `s.at`: that
/// quotient as a constant, with the guard `l == q·r`; an error otherwise.
fn quotient_at(s: &mut SymInfo, n: &Node, l: &DimExpr, r: &DimExpr) -> R<DimExpr> {
    let at = |name: &str| s.at.get(name).copied();
    let (Some(x), Some(y)) = (l.eval(&at), r.eval(&at)) else { return Err(unsupported(n)) };
    if y < 1 || x < 0 || x % y != 0 {
        return Err(unsupported(n));
    }
    let guard = Constraint { what: format!("node `{}` (a quotient of dims decided at the bounds)", n.name), rel: Rel::Equal, left: l.clone(), right: r.scale(x / y) };
    if !s.guards.contains(&guard) {
        s.guards.push(guard);
    }
    Ok(c(x / y))
}

/// Comparison `b` of two dim values, decided at `s.at` (the bounds) with the guard that keeps
/// it so recorded in `s.guards`; an error when a dim has no value there.
fn decide(s: &mut SymInfo, n: &Node, b: BinaryOp, l: &DimExpr, r: &DimExpr) -> R<DimExpr> {
    let at = |name: &str| s.at.get(name).copied();
    let (Some(x), Some(y)) = (l.eval(&at), r.eval(&at)) else { return Err(unsupported(n)) };
    let holds = match b {
        BinaryOp::Equal => x == y,
        BinaryOp::Less => x < y,
        BinaryOp::LessOrEqual => x <= y,
        BinaryOp::Greater => x > y,
        _ => x >= y,
    };
    if l.as_const().is_none() || r.as_const().is_none() {
        let (rel, left, right) = match (b, holds) {
            (BinaryOp::Equal, true) => (Rel::Equal, l.clone(), r.clone()),
            (BinaryOp::Equal, false) => (Rel::Differ, l.clone(), r.clone()),
            (BinaryOp::Less, true) | (BinaryOp::GreaterOrEqual, false) => (Rel::AtMost, l.add(&c(1)), r.clone()),
            (BinaryOp::Less, false) | (BinaryOp::GreaterOrEqual, true) => (Rel::AtMost, r.clone(), l.clone()),
            (BinaryOp::LessOrEqual, true) | (BinaryOp::Greater, false) => (Rel::AtMost, l.clone(), r.clone()),
            _ => (Rel::AtMost, r.add(&c(1)), l.clone()),
        };
        let guard = Constraint { what: format!("node `{}` ({b:?} decided at the bounds)", n.name), rel, left, right };
        if !s.guards.contains(&guard) {
            s.guards.push(guard);
        }
    }
    Ok(c(i64::from(holds)))
}

/// The output dims of `n` (and the values of shape computations, into `s.ints`).
fn rule(g: &Graph, n: &Node, s: &mut SymInfo, targets: &Targets, ins: &[Option<Vec<DimExpr>>]) -> R<Vec<DimExpr>> {
    let x = |i: usize| -> R<Vec<DimExpr>> { ins.get(i).cloned().flatten().ok_or_else(|| format!("input #{i} has no known shape")) };
    let out = *n.outputs.first().ok_or("no output")?;
    let shape: Vec<DimExpr> = match &n.op {
        Op::Unary(UnaryOp::Identity) => {
            if let Some(i) = s.ints.get(&input(n, 0)?).cloned() {
                s.ints.insert(out, i);
            }
            // The mask has X's shape.
            if let Some(&m) = n.outputs.get(1) {
                s.shapes.insert(m, x(0)?);
            }
            x(0)?
        }
        Op::Def(d) => {
            let known: Vec<Option<Vec<i64>>> = n.inputs.iter().map(|v| ints_of(g, s, (*v)?)?.iter().map(|e| e.as_const()).collect()).collect();
            let forwarded = d.forwards_values(&known).and_then(|i| n.inputs.get(i).copied().flatten()).and_then(|v| ints_of(g, s, v));
            // The op's own shape rule; the equalities it needs become run-time checks.
            let mut args = Vec::with_capacity(n.inputs.len());
            for (i, v) in n.inputs.iter().enumerate() {
                let Some(v) = *v else {
                    args.push(None);
                    continue;
                };
                let dtype = g.tensor_type(v).map(|t| t.dtype).ok_or_else(|| format!("input #{i} has no type"))?;
                args.push(Some(crate::ops::Arg { dtype, dims: Some(x(i)?), value: g.const_value(v).filter(|t| t.numel() <= 1 << 16) }));
            }
            let mut cx = crate::ops::ShapeCx::new(args);
            for (i, v) in n.inputs.iter().enumerate() {
                if let Some(ints) = v.and_then(|v| s.ints.get(&v)) {
                    cx.set_ints(i, ints.clone());
                }
            }
            let outs = d.shapes(&mut cx)?;
            // An output length that depends on values (NonZero's): no bounded form.
            if outs.iter().flat_map(|o| o.dims.iter().flatten()).any(crate::ops::is_unknown) {
                return Err(unsupported(n));
            }
            for c in cx.checks {
                require(s, n, c)?;
            }
            if let Some(Some(v)) = cx.out_ints.into_iter().next() {
                s.ints.insert(out, v);
            }
            let mut dims = outs.into_iter().map(|t| t.dims.ok_or("the op gives an output of unknown rank"));
            let first = dims.next().ok_or("the op gives no output")??;
            for (&o, d) in n.outputs.iter().skip(1).zip(dims) {
                s.shapes.insert(o, d?);
            }
            // Repeated values, when the input has as many as the output.
            if let Some(v) = forwarded.filter(|v| prod(&first).as_const() == Some(v.len() as i64)) {
                s.ints.insert(out, v);
            }
            first
        }
        Op::Unary(UnaryOp::Not) => {
            if let Some(v) = ints_of(g, s, input(n, 0)?).and_then(|v| v.iter().map(|e| Some(c(i64::from(e.as_const()? == 0)))).collect()) {
                s.ints.insert(out, v);
            }
            x(0)?
        }
        Op::Unary(_) => x(0)?,
        // Inputs of the output's shape, one element or its last dims: numpy broadcasting.
        Op::Elementwise(_) => {
            let mut d = Vec::new();
            for i in 0..n.inputs.len() {
                d = broadcast(s, n, &d, &x(i)?)?;
            }
            d
        }
        Op::Gather { axis } if !s.ints.contains_key(&input(n, 0)?) => {
            // Data movement with constant indices: X's dims around the indices' shape.
            let xs = x(0)?;
            let idx = g.const_value(input(n, 1)?).ok_or_else(|| unsupported(n))?;
            let a = norm_axis(*axis, xs.len())?;
            let mut d = xs[..a].to_vec();
            d.extend(idx.shape.iter().map(|&v| c(v as i64)));
            d.extend(xs[a + 1..].iter().cloned());
            d
        }
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
        Op::Expand => {
            let xs = x(0)?;
            let t = match targets.get(&format!("\0exp:{}", n.name)) {
                Some(t) => t.clone(),
                None => ints_of(g, s, input(n, 1)?).ok_or_else(|| unsupported(n))?,
            };
            broadcast(s, n, &xs, &t)?
        }
        Op::ConstantOfShape { .. } => match targets.get(&format!("\0cos:{}", n.name)) {
            Some(t) => t.clone(),
            None => ints_of(g, s, input(n, 0)?).ok_or_else(|| unsupported(n))?,
        },
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
            let mut d = all.first().cloned().ok_or("Concat without inputs")?;
            if all.iter().any(|a| a.len() != r) {
                return Err("Concat inputs of different ranks".into());
            }
            for a in &all[1..] {
                for (i, (p, q)) in d.iter().zip(a).enumerate() {
                    if i != ax {
                        require_equal(s, n, &format!("the inputs' dims {i}"), p, q)?;
                    }
                }
            }
            d[ax] = all.iter().fold(c(0), |acc, a| acc.add(&a[ax]));
            d
        }
        Op::Binary(b) => {
            let (a, bb) = (x(0)?, x(1)?);
            let av = ints_of(g, s, input(n, 0)?);
            let bv = ints_of(g, s, input(n, 1)?);
            if let (Some(p), Some(q)) = (av, bv) {
                // Arithmetic without a rule (a division by a dim, an undecided comparison) is a
                // value not tracked: computed at run time from its inputs, which are then dim
                // values read as data (`passes::dim_values` makes them at run time).
                if let Ok(v) = int_binary(s, n, *b, &p, &q) {
                    s.ints.insert(out, v);
                }
            }
            let shape = broadcast(s, n, &a, &bb)?;
            // One known side can decide a logical op whatever the other (a run-time value).
            if !s.ints.contains_key(&out) && matches!(b, BinaryOp::And | BinaryOp::Or) {
                let absorbing = i64::from(*b == BinaryOp::Or);
                let decides = |v: Option<Vec<DimExpr>>| v.is_some_and(|v| !v.is_empty() && v.iter().all(|e| e.as_const().map(|x| i64::from(x != 0)) == Some(absorbing)));
                if let (true, Some(len)) = (decides(ints_of(g, s, input(n, 0)?)) || decides(ints_of(g, s, input(n, 1)?)), prod(&shape).as_const()) {
                    s.ints.insert(out, vec![c(absorbing); len.max(0) as usize]);
                }
            }
            shape
        }
        Op::Reshape { allowzero } => {
            let xs = x(0)?;
            let target = match targets.get(&n.name) {
                Some(t) => t.clone(),
                None => ints_of(g, s, input(n, 1)?).ok_or_else(|| unsupported(n))?,
            };
            // Reshaping a shape value (a scalar into [1], say) keeps its contents.
            if let Some(i) = s.ints.get(&input(n, 0)?).cloned() {
                s.ints.insert(out, i);
            }
            reshape(s, n, &xs, &target, *allowzero)?
        }
        Op::Conv { window, .. } | Op::FusedConv { window, .. } => {
            let (xs, ws) = (x(0)?, x(1)?);
            if xs.len() < 3 || ws.len() != xs.len() {
                return Err(format!("Conv needs X and W of the same rank, at least 3 (got {} and {})", xs.len(), ws.len()));
            }
            let kernel = conv_kernel(s, n, window, &ws)?;
            let group = match &n.op {
                Op::Conv { group, .. } | Op::FusedConv { group, .. } => *group as i64,
                _ => 1,
            };
            require_equal(s, n, "X's channels and W's input channels times group", &xs[1], &ws[1].scale(group))?;
            if group > 1 {
                require(s, n, Constraint { what: "group and W's output channels".into(), rel: Rel::Divides, left: c(group), right: ws[0].clone() })?;
            }
            let mut d = vec![xs[0].clone(), ws[0].clone()];
            d.extend(window_out(window, &kernel, &xs[2..])?);
            // A bounded kernel must fit the padded input (checked at run time; it also lets
            // the kernel be pinned below its bound where the input's bound is smaller).
            for (i, kd) in kernel.iter().enumerate().filter(|(_, kd)| kd.as_const().is_none()) {
                if let Some((extent, padded)) = crate::ops::window::extent_and_padded(window, kernel.len(), i, kd, &xs[2 + i]) {
                    require(s, n, Constraint { what: format!("the kernel extent and the padded input along spatial dim {i}"), rel: Rel::AtMost, left: extent, right: padded })?;
                }
            }
            d
        }
        _ => return Err(unsupported(n)),
    };
    Ok(shape)
}

/// A Scan: its body analysed with its inputs' dims over the named dims (the states as given,
/// each scan input without its scan axis, the enclosing graph's values it reads, by name).
/// The trip count is the scan inputs' common length; a state keeps its dims across iterations.
fn scan(g: &Graph, id: NodeId, n: &Node, s: &mut SymInfo, targets: &Targets) -> R<()> {
    let Op::Scan { body, num_scan_inputs: m, input_axes, output_axes, .. } = &n.op else { return Err(unsupported(n)) };
    let body = crate::codegen::with_output_copies(body).unwrap_or_else(|| (**body).clone());
    let n_state = n.inputs.len().checked_sub(*m).ok_or("fewer inputs than num_scan_inputs")?;
    if body.inputs.len() != n.inputs.len() || body.outputs.len() < n.outputs.len() || n.outputs.len() < n_state {
        return Err("the body's inputs and outputs do not match the node's".into());
    }
    let (mut ins, mut ints) = (HashMap::new(), HashMap::new());
    let mut len: Option<DimExpr> = None;
    for (i, (&v, &b)) in n.inputs.iter().zip(&body.inputs).enumerate() {
        let mut d = shape_of(g, s, v.ok_or_else(|| format!("input #{i} is missing"))?)?;
        if i >= n_state {
            let j = i - n_state;
            let l = d.remove(norm_axis(input_axes.get(j).copied().unwrap_or(0), d.len())?);
            match &len {
                Some(first) => require_equal(s, n, &format!("scan input #{j}'s length along its axis"), first, &l)?,
                None => len = Some(l),
            }
        }
        ins.insert(b, d);
    }
    let len = len.ok_or("Scan without scan inputs")?;
    for (k, bv) in body.values.iter().enumerate() {
        if !matches!(bv.kind, ValueKind::Outer) {
            continue;
        }
        let Some(ov) = (0..g.values.len()).rev().map(|o| ValueId(o as u32)).find(|&o| g.value(o).name == bv.name) else { continue };
        if let Ok(d) = shape_of(g, s, ov) {
            ins.insert(ValueId(k as u32), d);
        }
        if let Some(v) = s.ints.get(&ov) {
            ints.insert(ValueId(k as u32), v.clone());
        }
    }
    // The body's recorded targets, under the node's prefix (see `reshape_targets`).
    let prefix = sub_prefix(&n.name);
    let body_targets: Targets = targets.iter().filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_string(), v.clone()))).collect();
    let sub = analyze_in(&body, &ins, ints, &body_targets, &s.at).map_err(|e| format!("body: {e}"))?;
    // Dim values computing data in the body would be folded at the bounds.
    for bn in &body.nodes {
        if bn.inputs.iter().enumerate().any(|(i, v)| v.is_some_and(|v| sub.dim_valued(v)) && !sub.reads_as_shape(bn, i)) {
            return Err(format!("body node `{}` computes with the value of a bounded dim; pin the dims with --input", bn.name));
        }
    }
    for c in &sub.constraints {
        require(s, n, c.clone())?;
    }
    for gd in &sub.guards {
        if !s.guards.contains(gd) {
            s.guards.push(gd.clone());
        }
    }
    for (i, (&o, &bo)) in n.outputs.iter().zip(&body.outputs).enumerate() {
        let d = shape_of(&body, &sub, bo)?;
        let d = if i < n_state {
            let before = &ins[&body.inputs[i]];
            if before.len() != d.len() {
                return Err(format!("state #{i} changes rank in the body"));
            }
            for (k, (a, b)) in before.iter().zip(&d).enumerate() {
                require_equal(s, n, &format!("dim {k} of state #{i} before and after the body"), a, b)?;
            }
            before.clone()
        } else {
            let mut d = d;
            d.insert(norm_axis(output_axes.get(i - n_state).copied().unwrap_or(0), d.len() + 1)?, len.clone());
            d
        };
        s.shapes.insert(o, d);
    }
    if sub.shapes.values().flatten().any(|d| d.as_const().is_none()) || !sub.subs.is_empty() {
        s.subs.insert(id, sub);
    }
    Ok(())
}

/// numpy broadcasting: equal dims, or one of them the constant 1. Two dims that may differ
/// (`h` and `w`, or `h` and 64) are required equal at run time: a bounded dim that is 1 at
/// run time does not broadcast against a larger one (the code is laid out for equal dims).
fn broadcast(s: &mut SymInfo, n: &Node, a: &[DimExpr], b: &[DimExpr]) -> R<Vec<DimExpr>> {
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
                require_equal(s, n, &format!("broadcast dims {da} and {db}"), da, db)?;
                // The bounded side sizes the output (the constant, when there is one).
                Ok(if da.as_const().is_some() { da.clone() } else { db.clone() })
            }
        })
        .collect()
}

fn reshape(s: &mut SymInfo, n: &Node, xs: &[DimExpr], target: &[DimExpr], allowzero: bool) -> R<Vec<DimExpr>> {
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
        let total = prod(xs);
        let known = match total.div_floor(&known) {
            Some(_) => known,
            None => unify_at(s, n, &total, &known),
        };
        out[i] = total.div_floor(&known).ok_or_else(|| format!("cannot divide {total} by {known} for Reshape's -1"))?;
        // A quotient rounded down holds only where the division is exact: checked at run time.
        require_equal(s, n, "the input's size and the target's", &total, &prod(&out))?;
    } else {
        // A constant target of a bounded input: the sizes agree only at some dims.
        require_equal(s, n, "the input's size and the target's", &prod(xs), &prod(&out))?;
    }
    Ok(out)
}

/// `known` with each named dim that `total` lacks replaced by one of `total`'s that has its
/// value at `s.at` (a key's batch read from the query's shape: `[B_q, S, H, -1]` of a
/// `[B_k, S, H·D]` key), each such equality a guard for `forward`. Unchanged without values.
fn unify_at(s: &mut SymInfo, n: &Node, total: &DimExpr, known: &DimExpr) -> DimExpr {
    let (have, mut known) = (total.vars(), known.clone());
    for w in known.vars().into_iter().filter(|w| !have.contains(w)) {
        let Some(value) = s.at.get(&w).copied() else { continue };
        let Some(u) = have.iter().find(|u| s.at.get(*u) == Some(&value)) else { continue };
        let guard = Constraint { what: format!("node `{}` (Reshape's -1, dims equal at the bounds)", n.name), rel: Rel::Equal, left: DimExpr::var(&w), right: DimExpr::var(u) };
        known = known.substitute(&w, &DimExpr::var(u));
        if !s.guards.contains(&guard) {
            s.guards.push(guard);
        }
    }
    known
}

/// A convolution's spatial kernel dims: `kernel_shape` (W's dims must equal it, checked at run
/// time when they are bounded), else W's dims, which may be bounded too (W a graph input).
pub fn conv_kernel(s: &mut SymInfo, n: &Node, window: &Window, ws: &[DimExpr]) -> R<Vec<DimExpr>> {
    if window.kernel_shape.is_empty() {
        return Ok(ws.get(2..).unwrap_or_default().to_vec());
    }
    if window.kernel_shape.len() + 2 != ws.len() {
        return Err(format!("kernel_shape {:?} does not fit W's rank {}", window.kernel_shape, ws.len()));
    }
    let mut k = Vec::with_capacity(ws.len() - 2);
    for (i, &v) in window.kernel_shape.iter().enumerate() {
        let v = c(i64::try_from(v).map_err(|_| "kernel_shape out of range")?);
        require_equal(s, n, &format!("kernel_shape and W's dim {}", i + 2), &ws[2 + i], &v)?;
        k.push(v);
    }
    Ok(k)
}

/// Output spatial dims of a convolution's window ([`crate::ops::window::window_out`]).
fn window_out(w: &Window, kernel: &[DimExpr], input: &[DimExpr]) -> R<Vec<DimExpr>> {
    let out = crate::ops::window::window_out(w, kernel, input)?;
    out.into_iter().map(|d| d.ok_or_else(|| "a window whose last position depends on the sizes is not supported with bounded dims yet; pin them with --input".to_string())).collect()
}

/// The symbolic target of every Reshape whose target a shape subgraph computes from named
/// dims, by node name (see the module doc), and the analysis of the unpinned graph they come
/// from (its constraints say which dims an op allows one value). Node names must be unique.
pub fn reshape_targets(g: &Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>, at: &HashMap<String, i64>) -> Result<(Targets, SymInfo), PassError> {
    let info = analyze_at(g, inputs, &Targets::new(), at)?;
    let mut out = Targets::new();
    record_targets(g, &info, "", &mut out);
    Ok((out, info))
}

/// The prefix of the targets recorded in Scan `name`'s body.
fn sub_prefix(name: &str) -> String {
    format!("\0sub:{name}\0")
}

/// [`reshape_targets`] of graph `g` analysed as `info`, keys prefixed with `prefix`; Scan
/// bodies recursively, under their node's prefix (when their node names are unique).
fn record_targets(g: &Graph, info: &SymInfo, prefix: &str, out: &mut Targets) {
    let key = |k: String| format!("{prefix}{k}");
    for n in &g.nodes {
        // Data movement of a fill is the same fill at its own shape (a zero initial state
        // sliced from an expanded zero tensor): folded at the bounds too, and recorded alike.
        // So is a unary elementwise op of one (a fill cast to the scores' type).
        let moves = match &n.op {
            Op::Reshape { .. } | Op::Unary(_) => true,
            // An op that only moves input 0's elements, its other inputs deciding where.
            Op::Def(d) => {
                let fixed = |vs: Vec<Option<ValueId>>| -> Vec<Option<Vec<usize>>> { vs.into_iter().map(|v| g.tensor_type(v?)?.shape.as_ref()?.as_fixed()).collect() };
                let moved = (1..n.inputs.len()).all(|i| d.decides_shapes(i)) && d.flops(&fixed(n.inputs.clone()), &fixed(n.outputs.iter().copied().map(Some).collect())) == Some(0);
                (n.inputs.len() == 1 && d.forwards_values(&[]) == Some(0)) || moved
            }
            _ => false,
        };
        let from_fill = n.inputs.first().copied().flatten().is_some_and(|v| out.contains_key(&key(fill_key(&g.value(v).name))));
        if let (true, true, Some(&o)) = (moves, from_fill, n.outputs.first()) {
            if let Some(sh) = info.shapes.get(&o).filter(|sh| sh.iter().any(|d| d.as_const().is_none())) {
                out.insert(key(fill_key(&g.value(o).name)), sh.clone());
            }
        }
        let at = match n.op {
            Op::Reshape { .. } | Op::Expand => 1,
            Op::ConstantOfShape { .. } => 0,
            _ => continue,
        };
        let Some(Some(tv)) = n.inputs.get(at).copied() else { continue };
        if let Some(t) = info.ints.get(&tv).filter(|t| t.iter().any(|d| d.as_const().is_none())) {
            match (&n.op, n.outputs.first()) {
                (Op::ConstantOfShape { .. }, Some(&o)) => {
                    out.insert(key(format!("\0cos:{}", n.name)), t.clone());
                    out.insert(key(fill_key(&g.value(o).name)), t.clone());
                }
                (Op::Expand, Some(&o)) => {
                    out.insert(key(format!("\0exp:{}", n.name)), t.clone());
                    // Expanding one constant element is a fill too (folded at the bounds).
                    let xv = n.inputs.first().copied().flatten();
                    if xv.and_then(|v| g.const_value(v)).is_some_and(|c| c.numel() == 1) {
                        let xs = xv.and_then(|v| info.shapes.get(&v).cloned().or_else(|| g.tensor_type(v)?.shape.as_ref()?.as_fixed().map(|d| d.iter().map(|&e| c(e as i64)).collect())));
                        if let Some(sh) = xs.and_then(|xs| broadcast(&mut SymInfo::default(), n, &xs, t).ok()) {
                            out.insert(key(fill_key(&g.value(o).name)), sh);
                        }
                    }
                }
                _ => {
                    out.insert(key(n.name.clone()), t.clone());
                }
            }
        }
    }
    for (&id, sub) in &info.subs {
        let n = g.node(id);
        let Op::Scan { body, .. } = &n.op else { continue };
        let body = crate::codegen::with_output_copies(body).unwrap_or_else(|| (**body).clone());
        let mut names = std::collections::HashSet::new();
        if body.nodes.iter().all(|b| !b.name.is_empty() && names.insert(&b.name)) {
            record_targets(&body, sub, &format!("{prefix}{}", sub_prefix(&n.name)), out);
        }
    }
}

/// Values computed from named dims may only feed shape computations and Reshape targets:
/// anything else would be folded at the bound. Refused here, naming the node that reads one.
pub fn check_no_dim_values(g: &Graph, inputs: &HashMap<ValueId, Vec<DimExpr>>, at: &HashMap<String, i64>) -> Result<(), PassError> {
    let info = analyze_at(g, inputs, &Targets::new(), at)?;
    for n in &g.nodes {
        for (i, v) in n.inputs.iter().enumerate() {
            if v.is_some_and(|v| info.dim_valued(v)) && !info.reads_as_shape(n, i) {
                return Err(node_err(n, "computes with the value of a bounded dim (a shape computation not feeding a Reshape target); pin the dims with --input".into()));
            }
        }
    }
    if let Some(o) = g.outputs.iter().find(|&&o| info.dim_valued(o)) {
        return Err(PassError::Node { node: g.value(*o).name.clone(), op: "output".into(), reason: "is computed from bounded dims; pin them with --input".into() });
    }
    Ok(())
}
