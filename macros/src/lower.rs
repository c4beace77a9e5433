//! Lowering a `#[model]` forward body to burnc's IR: a small interpreter over the syn AST of
//! straight-line code (`let` bindings, method calls, operators, layer calls) that tracks each
//! value's static shape and appends one IR node per operation. Every mistake is a `syn::Error`
//! at the span of the expression that made it.
use burnc_compiler::ops::matmul::{Gemm, MatMul};
use burnc_compiler::ops::view::Flatten;
use crate::layers::{Kind, Layer};
use burnc_compiler::ir::{
    AutoPad, BinaryOp, DType, Graph, Op, Param, PoolKind, ReduceOp, Shape, TensorType, UnaryOp, ValueId, ValueKind, ValueType, Window,
};
use burnc_compiler::ops::IntoOp;
use burnc_compiler::Tensor;
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{Error, Expr, Result};

/// A tensor value of the forward body.
#[derive(Clone, Debug)]
pub struct T {
    pub id: ValueId,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

#[derive(Clone, Debug)]
enum Val {
    Tensor(T),
    /// A number literal (or arithmetic of them).
    Num(f64),
    /// An array literal `[a, b, ..]` (shapes, permutations, concat lists).
    List(Vec<Val>),
    /// `a..b` (narrow/slice ranges); open ends are `None`.
    Range(Option<i64>, Option<i64>),
    /// A layer of the current struct (index into its fields), one instance of an array field:
    /// the variable of `for layer in &self.layers`.
    Layer(usize, Option<usize>),
}

/// A `#[derive(Model)]` struct used as a field of another: its layers and its `forward`.
pub struct SubDef {
    pub layers: Vec<Layer>,
    pub forward: syn::ImplItemFn,
}

/// Sub-model definitions by struct name.
pub type Defs = HashMap<String, SubDef>;

/// The struct whose `forward` is being lowered: the model's own, or a sub-model's while it is
/// inlined (then its parameters are keyed under `prefix`).
struct Scope {
    layers: Vec<Layer>,
    prefix: String,
    struct_name: String,
}

/// How deep sub-models may nest (a guard; cycles are refused before lowering).
const MAX_DEPTH: usize = 64;

pub const METHODS: &str = "relu, gelu, silu, sigmoid, tanh, exp, log, sqrt, abs, neg, softmax, log_softmax, matmul, reshape, \
flatten, transpose, permute, unsqueeze, squeeze, max_pool2d, avg_pool2d, mean, sum, max, narrow, slice, concat, powf, \
clamp_min, clamp_max, to_f32, to_i64";

/// The graph being built, and where each node came from.
pub struct Lower<'a> {
    pub g: Graph,
    defs: &'a Defs,
    scope: Scope,
    /// Variables, innermost block last.
    env: Vec<HashMap<String, Val>>,
    depth: usize,
    /// Node name → span of the expression that made it (to place errors of later passes).
    pub spans: HashMap<String, Span>,
    params: HashMap<String, ValueId>,
    counter: usize,
}

fn shape_str(s: &[usize]) -> String {
    format!("{s:?}")
}

/// numpy broadcasting of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let x = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
        let y = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
        out[i] = if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return None;
        };
    }
    Some(out)
}

/// The element type a `Tensor<..>` names: `f32` unless a leading type argument says otherwise.
fn dtype_of(ty: &syn::Type) -> Option<DType> {
    let syn::Type::Path(p) = ty else { return None };
    Some(match p.path.get_ident()?.to_string().as_str() {
        "f32" => DType::F32,
        "i64" => DType::I64,
        "i32" => DType::I32,
        _ => return None,
    })
}

/// Parse `Tensor<1, 1, 28, 28>`, `Tensor<i64, 1, 8>` or `Tensor<{ [1, 8] }>`.
pub fn tensor_type(ty: &syn::Type) -> Result<(DType, Vec<usize>)> {
    let bad = || Error::new_spanned(ty, "expected a tensor type: `Tensor<1, 1, 28, 28>` (f32) or `Tensor<i64, 1, 8>`");
    let syn::Type::Path(p) = ty else { return Err(bad()) };
    let seg = p.path.segments.last().ok_or_else(bad)?;
    if seg.ident != "Tensor" {
        return Err(bad());
    }
    let syn::PathArguments::AngleBracketed(args) = &seg.arguments else { return Err(bad()) };
    let mut dtype = DType::F32;
    let mut dims = Vec::new();
    for (i, a) in args.args.iter().enumerate() {
        match a {
            syn::GenericArgument::Type(t) if i == 0 => {
                dtype = dtype_of(t).ok_or_else(|| Error::new_spanned(t, "tensor element types: f32, i64, i32"))?;
            }
            syn::GenericArgument::Const(syn::Expr::Block(b)) if b.block.stmts.len() == 1 => {
                if let syn::Stmt::Expr(Expr::Array(arr), None) = &b.block.stmts[0] {
                    for e in &arr.elems {
                        dims.push(dim(e)?);
                    }
                } else {
                    dims.push(dim(&syn::Expr::Block(b.clone()))?);
                }
            }
            syn::GenericArgument::Const(e) => dims.push(dim(e)?),
            other => return Err(Error::new_spanned(other, "expected a dimension (an integer literal)")),
        }
    }
    Ok((dtype, dims))
}

fn dim(e: &Expr) -> Result<usize> {
    let v = crate::layers::const_int(e)?;
    if v <= 0 {
        return Err(Error::new_spanned(e, format!("dimensions are positive, got {v}")));
    }
    Ok(v as usize)
}

/// A dim index, negative from the end, checked against `rank`.
fn axis(v: i64, rank: usize, span: &dyn quote::ToTokens) -> Result<usize> {
    let r = rank as i64;
    if v < -r || v >= r.max(1) {
        return Err(Error::new_spanned(span, format!("dim {v} is out of range for rank {rank}")));
    }
    Ok(if v < 0 { (v + r) as usize } else { v as usize })
}

impl<'a> Lower<'a> {
    /// A graph with every layer's parameters (zeros until weights are applied), sub-models'
    /// included under their keys. `defs` must hold every sub-model the layers name, and the
    /// nesting must be free of cycles (`expand` checks both).
    pub fn new(struct_name: &str, layers: &[Layer], defs: &'a Defs) -> Self {
        let mut g = Graph { name: struct_name.to_string(), ..Default::default() };
        let mut params = HashMap::new();
        declare(&mut g, &mut params, defs, layers, "", 0);
        let scope = Scope { layers: layers.to_vec(), prefix: String::new(), struct_name: struct_name.to_string() };
        Lower { g, defs, scope, env: vec![HashMap::new()], depth: 0, spans: HashMap::new(), params, counter: 0 }
    }

    /// Declare a forward argument as a graph input.
    pub fn input(&mut self, name: &str, dtype: DType, shape: Vec<usize>) {
        let ty = ValueType::Tensor(TensorType { dtype, shape: Some(Shape::fixed(&shape)) });
        let id = self.g.add_value(name, ty, ValueKind::Input);
        self.g.inputs.push(id);
        self.define(name, Val::Tensor(T { id, shape, dtype }));
    }

    fn lookup(&self, name: &str) -> Option<&Val> {
        self.env.iter().rev().find_map(|m| m.get(name))
    }

    fn define(&mut self, name: &str, v: Val) {
        if let Some(top) = self.env.last_mut() {
            top.insert(name.to_string(), v);
        }
    }

    /// `name = v`: the innermost binding of `name` changes; false when there is none.
    fn assign(&mut self, name: &str, v: Val) -> bool {
        match self.env.iter_mut().rev().find(|m| m.contains_key(name)) {
            Some(m) => {
                m.insert(name.to_string(), v);
                true
            }
            None => false,
        }
    }

    /// Run the body; returns the tensors it returns (one, or several from a tuple).
    pub fn body(&mut self, block: &syn::Block) -> Result<Vec<(T, proc_macro2::TokenStream)>> {
        let mut tail: Option<&Expr> = None;
        for (i, stmt) in block.stmts.iter().enumerate() {
            let last = i + 1 == block.stmts.len();
            match stmt {
                syn::Stmt::Expr(Expr::Return(r), _) if last => {
                    tail = Some(r.expr.as_deref().ok_or_else(|| Error::new_spanned(r, "`return` needs a value"))?);
                }
                syn::Stmt::Expr(e, None) if last && !matches!(e, Expr::ForLoop(_) | Expr::Assign(_)) => tail = Some(e),
                s => self.stmt(s)?,
            }
        }
        let tail = tail.ok_or_else(|| Error::new_spanned(block, "`forward` must end with the tensor it returns"))?;
        let items: Vec<&Expr> = match tail {
            Expr::Tuple(t) => t.elems.iter().collect(),
            e => vec![e],
        };
        let mut outs = Vec::new();
        for e in items {
            match self.eval(e)? {
                Val::Tensor(t) => outs.push((t, quote::ToTokens::to_token_stream(e))),
                _ => return Err(Error::new_spanned(e, "`forward` must return tensors")),
            }
        }
        Ok(outs)
    }

    /// One statement: `let`, `x = ..;` or a `for` over an array of layers.
    fn stmt(&mut self, stmt: &syn::Stmt) -> Result<()> {
        match stmt {
            syn::Stmt::Local(local) => {
                let init = local.init.as_ref().ok_or_else(|| Error::new_spanned(local, "a `let` needs a value"))?;
                if init.diverge.is_some() {
                    return Err(Error::new_spanned(local, "`let .. else` is not supported"));
                }
                let (pat, ty) = match &local.pat {
                    syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
                    p => (p, None),
                };
                let v = self.eval(&init.expr)?;
                match pat {
                    syn::Pat::Ident(pi) => {
                        if let (Some(ty), Val::Tensor(t)) = (ty, &v) {
                            let (dt, shape) = tensor_type(ty)?;
                            if shape != t.shape || dt != t.dtype {
                                return Err(Error::new_spanned(ty, format!("shape mismatch: declared {}, the value is {}", shape_str(&shape), shape_str(&t.shape))));
                            }
                        }
                        self.define(&pi.ident.to_string(), v);
                    }
                    // `let (a, b) = self.block(x);` for a sub-model returning a tuple.
                    syn::Pat::Tuple(pt) if ty.is_none() => {
                        let Val::List(items) = v else {
                            return Err(Error::new_spanned(&init.expr, "only a sub-model returning several tensors can be unpacked"));
                        };
                        if items.len() != pt.elems.len() {
                            return Err(Error::new_spanned(pt, format!("the value has {} tensors, the pattern {} names", items.len(), pt.elems.len())));
                        }
                        for (p, v) in pt.elems.iter().zip(items) {
                            let syn::Pat::Ident(pi) = p else {
                                return Err(Error::new_spanned(p, "expected a name"));
                            };
                            self.define(&pi.ident.to_string(), v);
                        }
                    }
                    _ => return Err(Error::new_spanned(pat, "only `let name = ..;` and `let (a, b) = ..;` bindings are supported")),
                }
                Ok(())
            }
            syn::Stmt::Expr(Expr::Assign(a), _) => {
                let name = match &*a.left {
                    Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    _ => None,
                };
                let Some(name) = name else {
                    return Err(Error::new_spanned(&a.left, "only a variable can be assigned: `x = ..;`"));
                };
                let v = self.eval(&a.right)?;
                if !self.assign(&name, v) {
                    return Err(Error::new_spanned(&a.left, format!("unknown variable `{name}` (declare it with `let mut {name} = ..;` first)")));
                }
                Ok(())
            }
            syn::Stmt::Expr(Expr::ForLoop(f), _) => self.for_loop(f),
            syn::Stmt::Expr(e, _) => {
                Err(Error::new_spanned(e, "a statement without `let` has no effect here: bind it with `let`, or make it the last expression"))
            }
            other => Err(Error::new_spanned(other, "only `let` bindings, assignments, `for` loops over layers and a final expression are supported in `forward`")),
        }
    }

    /// `for layer in &self.layers { x = layer(x); }`: unrolled, once per layer of the array.
    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Result<()> {
        let syn::Pat::Ident(pi) = &*f.pat else {
            return Err(Error::new_spanned(&f.pat, "a `for` binds one name: `for layer in &self.layers`"));
        };
        let (idx, inst) = match self.layer_ref(&f.expr) {
            Some(r) => r?,
            None => return Err(Error::new_spanned(&f.expr, "only arrays of layers are iterated: `for layer in &self.layers { .. }`")),
        };
        let layer = &self.scope.layers[idx];
        let (Some(n), None) = (layer.count, inst) else {
            return Err(Error::new_spanned(&f.expr, format!("`{}` is one layer, not an array of them", layer.name)));
        };
        let var = pi.ident.to_string();
        for i in 0..n {
            self.env.push(HashMap::new());
            self.define(&var, Val::Layer(idx, Some(i)));
            let r = f.body.stmts.iter().try_for_each(|s| self.stmt(s));
            self.env.pop();
            r?;
        }
        Ok(())
    }

    /// The layer an expression names: `self.f`, `self.f[i]`, `&self.f`, `self.f.iter()`, or a
    /// loop variable; `None` when it names no layer.
    fn layer_ref(&mut self, e: &Expr) -> Option<Result<(usize, Option<usize>)>> {
        match e {
            Expr::Reference(r) => self.layer_ref(&r.expr),
            Expr::Paren(p) => self.layer_ref(&p.expr),
            Expr::Group(g) => self.layer_ref(&g.expr),
            Expr::MethodCall(m) if m.method == "iter" && m.args.is_empty() => self.layer_ref(&m.receiver),
            Expr::Field(f) if matches!(&*f.base, Expr::Path(p) if p.path.is_ident("self")) => {
                let syn::Member::Named(ident) = &f.member else {
                    return Some(Err(Error::new_spanned(&f.member, "expected a field name")));
                };
                Some(self.field(ident).map(|i| (i, None)))
            }
            Expr::Index(ix) => {
                let (idx, inst) = match self.layer_ref(&ix.expr)? {
                    Ok(r) => r,
                    Err(e) => return Some(Err(e)),
                };
                let layer = &self.scope.layers[idx];
                let (name, count) = (layer.name.clone(), layer.count);
                let Some(n) = count.filter(|_| inst.is_none()) else {
                    return Some(Err(Error::new_spanned(&ix.expr, format!("`{name}` is one layer, not an array of them"))));
                };
                Some(self.int(&ix.index).and_then(|i| {
                    if i < 0 || i as usize >= n {
                        return Err(Error::new_spanned(&ix.index, format!("index {i} is out of range: `{name}` holds {n} layers")));
                    }
                    Ok((idx, Some(i as usize)))
                }))
            }
            Expr::Path(p) => match self.lookup(&p.path.get_ident()?.to_string()) {
                Some(Val::Layer(i, inst)) => Some(Ok((*i, *inst))),
                _ => None,
            },
            _ => None,
        }
    }

    /// The index of field `ident` of the struct being lowered.
    fn field(&self, ident: &syn::Ident) -> Result<usize> {
        let name = ident.to_string();
        self.scope.layers.iter().position(|l| l.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.scope.layers.iter().map(|l| l.name.as_str()).collect();
            Error::new_spanned(ident, format!("no field `{name}` in `{}` (fields: {})", self.scope.struct_name, known.join(", ")))
        })
    }

    fn fresh(&mut self, what: &str) -> String {
        self.counter += 1;
        format!("{what}_{}", self.counter)
    }

    /// Append a node with one output of the given (already checked) shape.
    fn node(&mut self, span: Span, what: &str, op: Op, inputs: Vec<Option<ValueId>>, shape: Vec<usize>, dtype: DType) -> T {
        let name = self.fresh(what);
        let (_, outs) = self.g.add_node(name.clone(), op, inputs, std::slice::from_ref(&name));
        self.spans.insert(name, span);
        T { id: outs[0], shape, dtype }
    }

    fn konst(&mut self, t: Tensor) -> ValueId {
        let name = self.fresh("const");
        self.g.add_const(name, t)
    }

    fn eval(&mut self, e: &Expr) -> Result<Val> {
        match e {
            Expr::Path(p) => {
                // `f32::MIN` and friends, for masks and clamps.
                if let [ty, c] = &p.path.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>()[..] {
                    if ty == "f32" {
                        let v = match c.as_str() {
                            "MIN" => f32::MIN,
                            "MAX" => f32::MAX,
                            "EPSILON" => f32::EPSILON,
                            "INFINITY" => f32::INFINITY,
                            "NEG_INFINITY" => f32::NEG_INFINITY,
                            _ => return Err(Error::new_spanned(p, "known constants: f32::MIN, f32::MAX, f32::EPSILON, f32::INFINITY, f32::NEG_INFINITY")),
                        };
                        return Ok(Val::Num(v as f64));
                    }
                }
                let id = p.path.get_ident().ok_or_else(|| Error::new_spanned(p, "expected a variable"))?;
                self.lookup(&id.to_string()).cloned().ok_or_else(|| Error::new_spanned(p, format!("unknown variable `{id}`")))
            }
            Expr::Lit(l) => match &l.lit {
                syn::Lit::Int(i) => Ok(Val::Num(i.base10_parse::<i64>()? as f64)),
                syn::Lit::Float(f) => Ok(Val::Num(f.base10_parse::<f64>()?)),
                _ => Err(Error::new_spanned(l, "only number literals are supported")),
            },
            Expr::Paren(p) => self.eval(&p.expr),
            Expr::Group(g) => self.eval(&g.expr),
            Expr::Reference(r) => self.eval(&r.expr),
            Expr::Array(a) => Ok(Val::List(a.elems.iter().map(|e| self.eval(e)).collect::<Result<_>>()?)),
            Expr::Range(r) => {
                if matches!(r.limits, syn::RangeLimits::Closed(_)) {
                    return Err(Error::new_spanned(r, "use a half-open range `a..b`"));
                }
                let end = |this: &mut Self, x: &Option<Box<Expr>>| -> Result<Option<i64>> {
                    match x {
                        None => Ok(None),
                        Some(e) => Ok(Some(this.int(e)?)),
                    }
                };
                Ok(Val::Range(end(self, &r.start)?, end(self, &r.end)?))
            }
            Expr::Unary(u) => match u.op {
                syn::UnOp::Neg(_) => match self.eval(&u.expr)? {
                    Val::Num(n) => Ok(Val::Num(-n)),
                    Val::Tensor(t) => Ok(Val::Tensor(self.unary(e.span(), UnaryOp::Neg, &t))),
                    _ => Err(Error::new_spanned(e, "cannot negate this")),
                },
                _ => Err(Error::new_spanned(e, "unsupported operator")),
            },
            Expr::Binary(b) => self.binary(e, b),
            Expr::MethodCall(m) => self.method(m),
            Expr::Call(c) => self.call(c),
            Expr::Field(f) => Err(Error::new_spanned(f, "a layer is called, not read: `self.layer(x)` or `self.layer.forward(x)`")),
            _ => Err(Error::new_spanned(e, "unsupported expression in `forward` (supported: `let`, method calls, + - * /, layer calls)")),
        }
    }

    fn int(&mut self, e: &Expr) -> Result<i64> {
        match self.eval(e)? {
            Val::Num(n) if n.fract() == 0.0 => Ok(n as i64),
            _ => Err(Error::new_spanned(e, "expected an integer")),
        }
    }

    fn ints(&mut self, e: &Expr) -> Result<Vec<i64>> {
        match self.eval(e)? {
            Val::List(items) => items
                .into_iter()
                .map(|v| match v {
                    Val::Num(n) if n.fract() == 0.0 => Ok(n as i64),
                    _ => Err(Error::new_spanned(e, "expected a list of integers")),
                })
                .collect(),
            _ => Err(Error::new_spanned(e, "expected a list of integers `[..]`")),
        }
    }

    fn tensor(&mut self, e: &Expr) -> Result<T> {
        match self.eval(e)? {
            Val::Tensor(t) => Ok(t),
            _ => Err(Error::new_spanned(e, "expected a tensor")),
        }
    }

    fn unary(&mut self, span: Span, op: UnaryOp, t: &T) -> T {
        self.node(span, "unary", Op::Unary(op), vec![Some(t.id)], t.shape.clone(), t.dtype)
    }

    fn binary(&mut self, e: &Expr, b: &syn::ExprBinary) -> Result<Val> {
        let (op, verb) = match b.op {
            syn::BinOp::Add(_) => (BinaryOp::Add, "add"),
            syn::BinOp::Sub(_) => (BinaryOp::Sub, "subtract"),
            syn::BinOp::Mul(_) => (BinaryOp::Mul, "multiply"),
            syn::BinOp::Div(_) => (BinaryOp::Div, "divide"),
            _ => return Err(Error::new_spanned(b.op, "supported operators: + - * /")),
        };
        let (l, r) = (self.eval(&b.left)?, self.eval(&b.right)?);
        let scalar = |this: &mut Self, n: f64| {
            let id = this.konst(Tensor::from_f32s(vec![], vec![n as f32]));
            T { id, shape: vec![], dtype: DType::F32 }
        };
        let (l, r) = match (l, r) {
            (Val::Num(x), Val::Num(y)) => {
                return Ok(Val::Num(match op {
                    BinaryOp::Add => x + y,
                    BinaryOp::Sub => x - y,
                    BinaryOp::Mul => x * y,
                    _ => x / y,
                }))
            }
            (Val::Tensor(l), Val::Num(y)) => {
                let r = scalar(self, y);
                (l, r)
            }
            (Val::Num(x), Val::Tensor(r)) => (scalar(self, x), r),
            (Val::Tensor(l), Val::Tensor(r)) => (l, r),
            _ => return Err(Error::new_spanned(e, format!("cannot {verb} these"))),
        };
        if l.dtype != r.dtype {
            return Err(Error::new_spanned(e, format!("cannot {verb} {} and {} tensors", l.dtype, r.dtype)));
        }
        let shape = broadcast(&l.shape, &r.shape)
            .ok_or_else(|| Error::new_spanned(e, format!("shape mismatch: cannot {verb} {} and {}", shape_str(&l.shape), shape_str(&r.shape))))?;
        Ok(Val::Tensor(self.node(e.span(), verb, Op::Binary(op), vec![Some(l.id), Some(r.id)], shape, l.dtype)))
    }

    /// `concat([a, b], dim)` (also `cat`).
    fn call(&mut self, c: &syn::ExprCall) -> Result<Val> {
        // `self.layers[0](x)`, `layer(x)` in a loop over layers.
        if let Some(r) = self.layer_ref(&c.func) {
            let (idx, inst) = r?;
            let args: Vec<&Expr> = c.args.iter().collect();
            return self.invoke(idx, inst, &args, c);
        }
        let name = match &*c.func {
            Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
            _ => String::new(),
        };
        match name.as_str() {
            "concat" | "cat" => {
                if c.args.len() != 2 {
                    return Err(Error::new_spanned(c, "concat takes ([tensors..], dim)"));
                }
                let list = match self.eval(&c.args[0])? {
                    Val::List(items) => items,
                    _ => return Err(Error::new_spanned(&c.args[0], "expected a list of tensors `[a, b]`")),
                };
                let ts: Vec<T> = list
                    .into_iter()
                    .map(|v| match v {
                        Val::Tensor(t) => Ok(t),
                        _ => Err(Error::new_spanned(&c.args[0], "expected a list of tensors `[a, b]`")),
                    })
                    .collect::<Result<_>>()?;
                let d = self.int(&c.args[1])?;
                Ok(Val::Tensor(self.concat(c, &ts, d, &c.args[1])?))
            }
            // `arange(n)` / `arange(start, end)`: i64 positions, a constant.
            "arange" => {
                let (a, b) = match c.args.len() {
                    1 => (0, self.int(&c.args[0])?),
                    2 => (self.int(&c.args[0])?, self.int(&c.args[1])?),
                    _ => return Err(Error::new_spanned(c, "arange takes (end) or (start, end)")),
                };
                if b <= a {
                    return Err(Error::new_spanned(c, format!("arange({a}, {b}) is empty")));
                }
                let id = self.konst(Tensor::from_i64s(vec![(b - a) as usize], (a..b).collect()));
                Ok(Val::Tensor(T { id, shape: vec![(b - a) as usize], dtype: DType::I64 }))
            }
            _ => Err(Error::new_spanned(&c.func, "unknown function (known: concat, cat, arange); layers are called as `self.layer(x)`")),
        }
    }

    fn concat(&mut self, e: &dyn quote::ToTokens, ts: &[T], d: i64, dspan: &dyn quote::ToTokens) -> Result<T> {
        let first = ts.first().ok_or_else(|| Error::new_spanned(e, "concat of nothing"))?;
        let ax = axis(d, first.shape.len(), dspan)?;
        let mut shape = first.shape.clone();
        shape[ax] = 0;
        for t in ts {
            let ok = t.shape.len() == first.shape.len() && t.dtype == first.dtype && t.shape.iter().enumerate().all(|(i, &s)| i == ax || s == first.shape[i]);
            if !ok {
                let all: Vec<String> = ts.iter().map(|t| shape_str(&t.shape)).collect();
                return Err(Error::new_spanned(e, format!("shape mismatch: cannot concat {} along dim {d}", all.join(" and "))));
            }
            shape[ax] += t.shape[ax];
        }
        let span = quote::ToTokens::to_token_stream(e).span();
        Ok(self.node(span, "concat", Op::Concat { axis: ax as i64 }, ts.iter().map(|t| Some(t.id)).collect(), shape, first.dtype))
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Result<Val> {
        // `self.layer(x)`, `self.layer.forward(x)`, `self.layers[0].forward(x)`, `layer.forward(x)`.
        let args: Vec<&Expr> = m.args.iter().collect();
        if let Expr::Path(p) = &*m.receiver {
            if p.path.is_ident("self") {
                let idx = self.field(&m.method)?;
                return self.invoke(idx, None, &args, m);
            }
        }
        if let Some(r) = self.layer_ref(&m.receiver) {
            let (idx, inst) = r?;
            if m.method != "forward" {
                let name = &self.scope.layers[idx].name;
                return Err(Error::new_spanned(&m.method, format!("layers have one method, `forward`: `self.{name}.forward(x)`")));
            }
            return self.invoke(idx, inst, &args, m);
        }
        let x = self.tensor(&m.receiver)?;
        let name = m.method.to_string();
        let args: Vec<&Expr> = m.args.iter().collect();
        let span = m.span();
        let nargs = |n: usize, form: &str| -> Result<()> {
            if args.len() != n {
                return Err(Error::new_spanned(m, format!("`{name}` takes {n} argument{}: {form}", if n == 1 { "" } else { "s" })));
            }
            Ok(())
        };
        let float = |x: &T| -> Result<()> {
            if !x.dtype.is_float() {
                return Err(Error::new_spanned(m, format!("`{name}` needs a float tensor, got {}", x.dtype)));
            }
            Ok(())
        };
        let unary = match name.as_str() {
            "relu" => Some(UnaryOp::Relu),
            "gelu" => Some(UnaryOp::Gelu { tanh_approx: false }),
            "sigmoid" => Some(UnaryOp::Sigmoid),
            "tanh" => Some(UnaryOp::Tanh),
            "exp" => Some(UnaryOp::Exp),
            "log" => Some(UnaryOp::Log),
            "sqrt" => Some(UnaryOp::Sqrt),
            "abs" => Some(UnaryOp::Abs),
            "neg" => Some(UnaryOp::Neg),
            _ => None,
        };
        if let Some(op) = unary {
            nargs(0, &format!("x.{name}()"))?;
            float(&x)?;
            return Ok(Val::Tensor(self.unary(span, op, &x)));
        }
        let out = match name.as_str() {
            "silu" => {
                nargs(0, "x.silu()")?;
                float(&x)?;
                let s = self.unary(span, UnaryOp::Sigmoid, &x);
                self.node(span, "silu", Op::Binary(BinaryOp::Mul), vec![Some(x.id), Some(s.id)], x.shape.clone(), x.dtype)
            }
            "powf" => {
                nargs(1, "x.powf(2.0)")?;
                float(&x)?;
                let p = match self.eval(args[0])? {
                    Val::Num(n) => n,
                    _ => return Err(Error::new_spanned(args[0], "expected a number")),
                };
                let c = self.konst(Tensor::from_f32s(vec![], vec![p as f32]));
                self.node(span, "pow", Op::Binary(BinaryOp::Pow), vec![Some(x.id), Some(c)], x.shape.clone(), x.dtype)
            }
            // PyTorch's `clamp(min=..)` / `clamp(max=..)` with a number: Max / Min against it.
            "clamp_min" | "clamp_max" => {
                nargs(1, &format!("x.{name}(1e-9)"))?;
                float(&x)?;
                let v = match self.eval(args[0])? {
                    Val::Num(n) => n,
                    _ => return Err(Error::new_spanned(args[0], "expected a number")),
                };
                let c = self.konst(Tensor::from_f32s(vec![], vec![v as f32]));
                let op = if name == "clamp_min" { BinaryOp::Max } else { BinaryOp::Min };
                self.node(span, &name, Op::Binary(op), vec![Some(x.id), Some(c)], x.shape.clone(), x.dtype)
            }
            "to_f32" | "to_i64" => {
                nargs(0, &format!("x.{name}()"))?;
                let to = if name == "to_f32" { DType::F32 } else { DType::I64 };
                self.node(span, "cast", burnc_compiler::ops::cast::op(to, false), vec![Some(x.id)], x.shape.clone(), to)
            }
            "softmax" | "log_softmax" => {
                nargs(1, &format!("x.{name}(dim)"))?;
                float(&x)?;
                let d = self.int(args[0])?;
                let ax = axis(d, x.shape.len(), args[0])?;
                self.node(span, &name, burnc_compiler::ops::softmax::Softmax { axis: ax as i64, log: name == "log_softmax", coerce_2d: false }.op(), vec![Some(x.id)], x.shape.clone(), x.dtype)
            }
            "matmul" => {
                nargs(1, "a.matmul(b)")?;
                let y = self.tensor(args[0])?;
                for (t, e) in [(&x, &*m.receiver), (&y, args[0])] {
                    if t.shape.len() < 2 {
                        return Err(Error::new_spanned(e, format!("matmul needs rank >= 2, got {}", shape_str(&t.shape))));
                    }
                }
                let (xr, yr) = (x.shape.len(), y.shape.len());
                let (k1, k2) = (x.shape[xr - 1], y.shape[yr - 2]);
                if k1 != k2 || x.dtype != y.dtype {
                    return Err(Error::new_spanned(m, format!("shape mismatch: cannot matmul {} and {} (inner dims {k1} and {k2})", shape_str(&x.shape), shape_str(&y.shape))));
                }
                let mut shape = broadcast(&x.shape[..xr - 2], &y.shape[..yr - 2]).ok_or_else(|| {
                    Error::new_spanned(m, format!("shape mismatch: cannot matmul {} and {} (batch dims do not broadcast)", shape_str(&x.shape), shape_str(&y.shape)))
                })?;
                shape.extend([x.shape[xr - 2], y.shape[yr - 1]]);
                self.node(span, "matmul", MatMul.op(), vec![Some(x.id), Some(y.id)], shape, x.dtype)
            }
            "reshape" => {
                nargs(1, "x.reshape([1, -1])")?;
                let dims = self.ints(args[0])?;
                let shape = self.infer_reshape(args[0], &x.shape, &dims)?;
                self.reshape(span, &x, shape)
            }
            "flatten" => {
                if args.len() > 2 {
                    return Err(Error::new_spanned(m, "`flatten` takes (start) or (start, end)"));
                }
                let r = x.shape.len();
                let s = if args.is_empty() { 0 } else { axis(self.int(args[0])?, r, args[0])? };
                let en = if args.len() == 2 { axis(self.int(args[1])?, r, args[1])? } else { r.saturating_sub(1) };
                if r == 0 || en < s {
                    return Err(Error::new_spanned(m, format!("cannot flatten dims {s}..={en} of {}", shape_str(&x.shape))));
                }
                let mut shape = x.shape[..s].to_vec();
                shape.push(x.shape[s..=en].iter().product());
                shape.extend_from_slice(&x.shape[en + 1..]);
                if s == 1 && en + 1 == r {
                    // The ONNX form, so a model exported from PyTorch lowers to the same graph.
                    self.node(span, "flatten", Flatten { axis: 1 }.op(), vec![Some(x.id)], shape, x.dtype)
                } else {
                    self.reshape(span, &x, shape)
                }
            }
            "transpose" => {
                nargs(2, "x.transpose(dim0, dim1)")?;
                let r = x.shape.len();
                let (a, b) = (axis(self.int(args[0])?, r, args[0])?, axis(self.int(args[1])?, r, args[1])?);
                let mut perm: Vec<usize> = (0..r).collect();
                perm.swap(a, b);
                self.permute(span, &x, perm)
            }
            "permute" => {
                nargs(1, "x.permute([0, 2, 1])")?;
                let p = self.ints(args[0])?;
                let r = x.shape.len();
                let perm: Vec<usize> = p.iter().map(|&d| axis(d, r, args[0])).collect::<Result<_>>()?;
                let mut seen = perm.clone();
                seen.sort();
                if perm.len() != r || seen != (0..r).collect::<Vec<_>>() {
                    return Err(Error::new_spanned(args[0], format!("{p:?} is not a permutation of the {r} dims of {}", shape_str(&x.shape))));
                }
                self.permute(span, &x, perm)
            }
            "unsqueeze" => {
                nargs(1, "x.unsqueeze(dim)")?;
                let d = self.int(args[0])?;
                let ax = axis(d, x.shape.len() + 1, args[0])?;
                let mut shape = x.shape.clone();
                shape.insert(ax, 1);
                self.reshape(span, &x, shape)
            }
            "squeeze" => {
                nargs(1, "x.squeeze(dim)")?;
                let ax = axis(self.int(args[0])?, x.shape.len(), args[0])?;
                if x.shape[ax] != 1 {
                    return Err(Error::new_spanned(args[0], format!("cannot squeeze dim {ax} of {}: it is not 1", shape_str(&x.shape))));
                }
                let mut shape = x.shape.clone();
                shape.remove(ax);
                self.reshape(span, &x, shape)
            }
            "max_pool2d" | "avg_pool2d" => {
                if args.is_empty() || args.len() > 3 {
                    return Err(Error::new_spanned(m, format!("`{name}` takes (kernel), (kernel, stride) or (kernel, stride, padding)")));
                }
                float(&x)?;
                if x.shape.len() != 4 {
                    return Err(Error::new_spanned(&m.receiver, format!("`{name}` needs a rank-4 [N, C, H, W] tensor, got {}", shape_str(&x.shape))));
                }
                let k = self.int(args[0])?.max(1) as usize;
                let s = if args.len() > 1 { self.int(args[1])?.max(1) as usize } else { k };
                let p = if args.len() > 2 { self.int(args[2])?.max(0) as usize } else { 0 };
                let mut shape = x.shape.clone();
                for (o, &d) in shape[2..].iter_mut().zip(&x.shape[2..]) {
                    let n = d + 2 * p;
                    if n < k {
                        return Err(Error::new_spanned(m, format!("`{name}`: kernel {k} is larger than the padded input {}", shape_str(&x.shape))));
                    }
                    *o = (n - k) / s + 1;
                }
                let kind = if name == "max_pool2d" { PoolKind::Max } else { PoolKind::Avg { count_include_pad: true } };
                let window = Window { kernel_shape: vec![k, k], strides: vec![s, s], pads: vec![p; 4], dilations: vec![1, 1], auto_pad: AutoPad::NotSet, ceil_mode: false };
                self.node(span, &name, burnc_compiler::ops::pool::Pool { kind, window, column_major: false }.op(), vec![Some(x.id)], shape, x.dtype)
            }
            "mean" | "sum" | "max" => {
                if args.is_empty() || args.len() > 2 {
                    return Err(Error::new_spanned(m, format!("`{name}` takes (dim) or (dim, keepdim)")));
                }
                let ax = axis(self.int(args[0])?, x.shape.len(), args[0])?;
                let keep = if args.len() == 2 {
                    match args[1] {
                        Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) => b.value,
                        e => return Err(Error::new_spanned(e, "keepdim is `true` or `false`")),
                    }
                } else {
                    false
                };
                let op = match name.as_str() {
                    "mean" => ReduceOp::Mean,
                    "sum" => ReduceOp::Sum,
                    _ => ReduceOp::Max,
                };
                let mut shape = x.shape.clone();
                if keep {
                    shape[ax] = 1;
                } else {
                    shape.remove(ax);
                }
                self.node(span, &name, burnc_compiler::ops::reduce::Reduce { op, axes: Some(vec![ax as i64]), keepdims: keep, noop_with_empty_axes: false }.op(), vec![Some(x.id)], shape, x.dtype)
            }
            "narrow" => {
                nargs(3, "x.narrow(dim, start, len)")?;
                let ax = axis(self.int(args[0])?, x.shape.len(), args[0])?;
                let (s, l) = (self.int(args[1])?, self.int(args[2])?);
                self.slice(m, &x, ax, s, s + l)?
            }
            "slice" => {
                nargs(2, "x.slice(dim, start..end)")?;
                let ax = axis(self.int(args[0])?, x.shape.len(), args[0])?;
                let (s, e) = match self.eval(args[1])? {
                    Val::Range(s, e) => (s.unwrap_or(0), e.unwrap_or(x.shape[ax] as i64)),
                    _ => return Err(Error::new_spanned(args[1], "expected a range `start..end`")),
                };
                let n = x.shape[ax] as i64;
                let fix = |v: i64| if v < 0 { v + n } else { v };
                self.slice(m, &x, ax, fix(s), fix(e))?
            }
            "concat" | "cat" => {
                nargs(2, "a.concat(b, dim)")?;
                let y = self.tensor(args[0])?;
                let d = self.int(args[1])?;
                self.concat(m, &[x, y], d, args[1])?
            }
            _ => return Err(Error::new_spanned(&m.method, format!("unknown method `{name}` (known: {METHODS})"))),
        };
        Ok(Val::Tensor(out))
    }

    fn infer_reshape(&self, e: &Expr, from: &[usize], dims: &[i64]) -> Result<Vec<usize>> {
        let total: usize = from.iter().product();
        let mut infer = None;
        let mut known = 1usize;
        for (i, &d) in dims.iter().enumerate() {
            match d {
                -1 if infer.is_none() => infer = Some(i),
                d if d > 0 => known *= d as usize,
                _ => return Err(Error::new_spanned(e, format!("bad reshape dims {dims:?}: positive sizes and at most one -1"))),
            }
        }
        let mut shape: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
        if let Some(i) = infer {
            if known == 0 || !total.is_multiple_of(known) {
                return Err(Error::new_spanned(e, format!("shape mismatch: cannot reshape {} ({total} elements) to {dims:?}", shape_str(from))));
            }
            shape[i] = total / known;
        } else if known != total {
            return Err(Error::new_spanned(e, format!("shape mismatch: cannot reshape {} ({total} elements) to {dims:?} ({known} elements)", shape_str(from))));
        }
        Ok(shape)
    }

    fn reshape(&mut self, span: Span, x: &T, shape: Vec<usize>) -> T {
        let s = self.konst(Tensor::from_i64s(vec![shape.len()], shape.iter().map(|&d| d as i64).collect()));
        self.node(span, "reshape", Op::Reshape { allowzero: false }, vec![Some(x.id), Some(s)], shape, x.dtype)
    }

    fn permute(&mut self, span: Span, x: &T, perm: Vec<usize>) -> T {
        let shape = perm.iter().map(|&p| x.shape[p]).collect();
        self.node(span, "transpose", burnc_compiler::ops::transpose::Transpose { perm: Some(perm) }.op(), vec![Some(x.id)], shape, x.dtype)
    }

    fn slice(&mut self, e: &dyn quote::ToTokens, x: &T, ax: usize, s: i64, en: i64) -> Result<T> {
        let n = x.shape[ax] as i64;
        if s < 0 || en > n || s >= en {
            return Err(Error::new_spanned(e, format!("slice {s}..{en} is out of range for dim {ax} of {} (size {n})", shape_str(&x.shape))));
        }
        let starts = self.konst(Tensor::from_i64s(vec![1], vec![s]));
        let ends = self.konst(Tensor::from_i64s(vec![1], vec![en]));
        let axes = self.konst(Tensor::from_i64s(vec![1], vec![ax as i64]));
        let mut shape = x.shape.clone();
        shape[ax] = (en - s) as usize;
        let span = quote::ToTokens::to_token_stream(e).span();
        Ok(self.node(span, "slice", burnc_compiler::ops::slice::Slice.op(), vec![Some(x.id), Some(starts), Some(ends), Some(axes)], shape, x.dtype))
    }

    fn param(&self, name: &str) -> Option<ValueId> {
        self.params.get(name).copied()
    }

    /// Call layer `idx` of the current struct (instance `inst` of an array field) on `args`;
    /// `whole` is the call expression, for error spans.
    fn invoke(&mut self, idx: usize, inst: Option<usize>, args: &[&Expr], whole: &dyn quote::ToTokens) -> Result<Val> {
        let layer = self.scope.layers[idx].clone();
        let name = layer.name.clone();
        if let (Some(n), None) = (layer.count, inst) {
            return Err(Error::new_spanned(
                whole,
                format!("`{name}` is an array of {n} layers: index it, `self.{name}[0](x)`, or loop, `for l in &self.{name} {{ x = l(x); }}`"),
            ));
        }
        let key = format!("{}{}", self.scope.prefix, layer.instance_key(inst));
        match &layer.kind {
            Kind::Sub { ty } => self.sub_call(&name, ty, key, args, whole),
            Kind::MultiHeadAttention { e, h, causal, .. } => self.attention(whole, args, &layer, &key, *e, *h, *causal),
            _ => self.layer_call(&layer, &key, args, whole),
        }
    }

    /// Inline a sub-model's `forward`: its arguments bound to `args`, its parameters keyed under
    /// `key`, its errors at its own tokens.
    fn sub_call(&mut self, name: &str, ty: &syn::Ident, key: String, args: &[&Expr], whole: &dyn quote::ToTokens) -> Result<Val> {
        let defs = self.defs;
        let def = defs.get(&ty.to_string()).ok_or_else(|| Error::new_spanned(whole, format!("internal: no definition of `{ty}` reached #[model]")))?;
        if self.depth >= MAX_DEPTH {
            return Err(Error::new_spanned(whole, format!("sub-models nest more than {MAX_DEPTH} deep")));
        }
        let params = forward_args(&def.forward)?;
        if args.len() != params.len() {
            let sig: Vec<String> = params.iter().map(|(id, _, shape)| format!("{id}: {}", shape_str(shape))).collect();
            return Err(Error::new_spanned(whole, format!("`{name}` ({ty}) takes {} tensor{}: forward({})", params.len(), if params.len() == 1 { "" } else { "s" }, sig.join(", "))));
        }
        let mut frame = HashMap::new();
        for (a, (id, dt, shape)) in args.iter().zip(&params) {
            let t = self.tensor(a)?;
            if t.dtype != *dt || t.shape != *shape {
                return Err(Error::new_spanned(
                    a,
                    format!("shape mismatch: `{ty}::forward` takes `{id}` as {} ({dt}), got {} ({})", shape_str(shape), shape_str(&t.shape), t.dtype),
                ));
            }
            frame.insert(id.to_string(), Val::Tensor(t));
        }
        let env = std::mem::replace(&mut self.env, vec![frame]);
        let scope = std::mem::replace(&mut self.scope, Scope { layers: def.layers.clone(), prefix: format!("{key}."), struct_name: ty.to_string() });
        self.depth += 1;
        let outs = self.body(&def.forward.block);
        self.depth -= 1;
        self.env = env;
        self.scope = scope;
        let outs = outs?;
        check_returns(&def.forward.sig, &outs)?;
        let mut ts: Vec<Val> = outs.into_iter().map(|(t, _)| Val::Tensor(t)).collect();
        Ok(if ts.len() == 1 { ts.remove(0) } else { Val::List(ts) })
    }

    fn layer_call(&mut self, layer: &Layer, key: &str, args: &[&Expr], whole: &dyn quote::ToTokens) -> Result<Val> {
        let name = layer.name.clone();
        if args.len() != 1 {
            return Err(Error::new_spanned(whole, format!("`{name}` takes one tensor: `self.{name}(x)`")));
        }
        let x = self.tensor(args[0])?;
        let span = quote::ToTokens::to_token_stream(whole).span();
        let desc = layer.describe();
        let p = |s: &str| self.param(&format!("{key}.{s}"));
        let wrong = |what: String| Error::new_spanned(args[0], format!("`{name}` ({desc}) {what}, got {}", shape_str(&x.shape)));
        if !matches!(layer.kind, Kind::Embedding { .. } | Kind::Dropout) && x.dtype != DType::F32 {
            return Err(Error::new_spanned(args[0], format!("`{name}` ({desc}) needs an f32 tensor, got {}", x.dtype)));
        }
        let out = match layer.kind {
            Kind::Linear { inp, out, .. } => {
                let r = x.shape.len();
                if r == 0 || x.shape[r - 1] != inp {
                    return Err(wrong(format!("expects a last dim of {inp}")));
                }
                let (w, b) = (p("weight"), p("bias"));
                let gemm = Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true }.op();
                if r == 2 {
                    self.node(span, &name, gemm, vec![Some(x.id), w, b], vec![x.shape[0], out], x.dtype)
                } else {
                    // Gemm is 2-D: fold the leading dims into rows and back.
                    let rows: usize = x.shape[..r - 1].iter().product();
                    let flat = self.reshape(span, &x, vec![rows, inp]);
                    let y = self.node(span, &name, gemm, vec![Some(flat.id), w, b], vec![rows, out], x.dtype);
                    let mut shape = x.shape[..r - 1].to_vec();
                    shape.push(out);
                    self.reshape(span, &y, shape)
                }
            }
            Kind::Conv { dims, inp, out, k, stride, padding, dilation, groups, .. } => {
                if x.shape.len() != dims + 2 || x.shape[1] != inp {
                    let form = if dims == 2 { "[N, C, H, W]" } else { "[N, C, L]" };
                    return Err(wrong(format!("expects {form} with C = {inp}")));
                }
                let mut shape = vec![x.shape[0], out];
                for d in 0..dims {
                    let n = x.shape[2 + d] + 2 * padding;
                    let span_k = dilation * (k - 1) + 1;
                    if n < span_k {
                        return Err(wrong(format!("kernel {k} does not fit the padded input")));
                    }
                    shape.push((n - span_k) / stride + 1);
                }
                let window = Window {
                    kernel_shape: vec![k; dims],
                    strides: vec![stride; dims],
                    pads: vec![padding; 2 * dims],
                    dilations: vec![dilation; dims],
                    auto_pad: AutoPad::NotSet,
                    ceil_mode: false,
                };
                self.node(span, &name, Op::Conv { window, group: groups }, vec![Some(x.id), p("weight"), p("bias")], shape, x.dtype)
            }
            Kind::BatchNorm { c, eps, two_d } => {
                let ok = if two_d { x.shape.len() == 4 } else { matches!(x.shape.len(), 2 | 3) };
                if !ok || x.shape[1] != c {
                    let form = if two_d { "[N, C, H, W]" } else { "[N, C] or [N, C, L]" };
                    return Err(wrong(format!("expects {form} with C = {c}")));
                }
                let ins = vec![Some(x.id), p("weight"), p("bias"), p("running_mean"), p("running_var")];
                self.node(span, &name, burnc_compiler::ops::channel_norm::BatchNorm { epsilon: eps }.op(), ins, x.shape.clone(), x.dtype)
            }
            Kind::LayerNorm { d, eps } => {
                if x.shape.last() != Some(&d) {
                    return Err(wrong(format!("expects a last dim of {d}")));
                }
                self.node(span, &name, burnc_compiler::ops::norm::LayerNorm { axis: -1, epsilon: eps }.op(), vec![Some(x.id), p("weight"), p("bias")], x.shape.clone(), x.dtype)
            }
            Kind::Embedding { d, .. } => {
                if !matches!(x.dtype, DType::I64 | DType::I32) {
                    return Err(Error::new_spanned(args[0], format!("`{name}` ({desc}) looks up integer ids, got a {} tensor", x.dtype)));
                }
                let mut shape = x.shape.clone();
                shape.push(d);
                self.node(span, &name, Op::Gather { axis: 0 }, vec![p("weight"), Some(x.id)], shape, DType::F32)
            }
            Kind::Dropout => x,
            Kind::MultiHeadAttention { .. } | Kind::Sub { .. } => return Err(Error::new_spanned(whole, "internal: layer kind dispatched wrongly")),
        };
        Ok(Val::Tensor(out))
    }

    /// `y = rows @ Wᵀ + b` for `x` of any rank >= 2 over its last dim, through a 2-D Gemm.
    fn project(&mut self, span: Span, x: &T, w: ValueId, b: Option<ValueId>, out: usize) -> T {
        let r = x.shape.len();
        let rows: usize = x.shape[..r - 1].iter().product();
        let flat = self.reshape(span, x, vec![rows, x.shape[r - 1]]);
        let gemm = Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true }.op();
        let y = self.node(span, "proj", gemm, vec![Some(flat.id), Some(w), b], vec![rows, out], x.dtype);
        let mut shape = x.shape[..r - 1].to_vec();
        shape.push(out);
        self.reshape(span, &y, shape)
    }

    /// `self.attn(x)` (self-attention) or `self.attn(q, k, v)`: PyTorch's `nn.MultiheadAttention`
    /// with `batch_first = True`, composed of core ops (projections, per-head scaled dot
    /// products, softmax, output projection); `causal` masks later positions.
    #[allow(clippy::too_many_arguments)]
    fn attention(&mut self, m: &dyn quote::ToTokens, args: &[&Expr], layer: &Layer, key: &str, e: usize, h: usize, causal: bool) -> Result<Val> {
        let name = layer.name.clone();
        let desc = layer.describe();
        if args.len() != 1 && args.len() != 3 {
            return Err(Error::new_spanned(m, format!("`{name}` takes (x) for self-attention or (query, key, value)")));
        }
        let mut ins = Vec::new();
        for a in args {
            let t = self.tensor(a)?;
            if t.shape.len() != 3 || t.shape[2] != e || t.dtype != DType::F32 {
                return Err(Error::new_spanned(a, format!("`{name}` ({desc}) expects an f32 [batch, seq, {e}] tensor, got {} {}", t.dtype, shape_str(&t.shape))));
            }
            ins.push(t);
        }
        let (q, k, v) = if ins.len() == 1 { (ins[0].clone(), ins[0].clone(), ins[0].clone()) } else { (ins[0].clone(), ins[1].clone(), ins[2].clone()) };
        if k.shape != v.shape || q.shape[0] != k.shape[0] {
            return Err(Error::new_spanned(m, format!("shape mismatch: `{name}` query {}, key {}, value {}", shape_str(&q.shape), shape_str(&k.shape), shape_str(&v.shape))));
        }
        let (b, sq, sk, dh) = (q.shape[0], q.shape[1], k.shape[1], e / h);
        if causal && sq != sk {
            return Err(Error::new_spanned(m, format!("`{name}` is causal: query and key need the same length, got {sq} and {sk}")));
        }
        let span = quote::ToTokens::to_token_stream(m).span();
        let p = |s: &str| self.param(&format!("{key}.{s}"));
        let undeclared = || Error::new_spanned(m, format!("internal: `{name}` has no declared projection weights"));
        let w_in = T { id: p("in_proj_weight").ok_or_else(undeclared)?, shape: vec![3 * e, e], dtype: DType::F32 };
        let b_in = p("in_proj_bias").map(|id| T { id, shape: vec![3 * e], dtype: DType::F32 });
        let (w_out, b_out) = (p("out_proj.weight").ok_or_else(undeclared)?, p("out_proj.bias"));
        let mut heads = Vec::new();
        for (i, (x, s)) in [(&q, sq), (&k, sk), (&v, sk)].into_iter().enumerate() {
            let lo = (i * e) as i64;
            let w = self.slice(m, &w_in, 0, lo, lo + e as i64)?;
            let bias = match &b_in {
                Some(bt) => Some(self.slice(m, bt, 0, lo, lo + e as i64)?.id),
                None => None,
            };
            let y = self.project(span, x, w.id, bias, e);
            let y = self.reshape(span, &y, vec![b, s, h, dh]);
            // q, v: [B, H, S, Dh]; k: [B, H, Dh, S] (transposed for the product).
            let perm = if i == 1 { vec![0, 2, 3, 1] } else { vec![0, 2, 1, 3] };
            heads.push(self.permute(span, &y, perm));
        }
        let scores = self.node(span, "scores", MatMul.op(), vec![Some(heads[0].id), Some(heads[1].id)], vec![b, h, sq, sk], DType::F32);
        let scale = self.konst(Tensor::from_f32s(vec![], vec![1.0 / (dh as f32).sqrt()]));
        let mut scores = self.node(span, "scale", Op::Binary(BinaryOp::Mul), vec![Some(scores.id), Some(scale)], vec![b, h, sq, sk], DType::F32);
        if causal {
            let mask: Vec<f32> = (0..sq * sk).map(|i| if i % sk > i / sk { f32::NEG_INFINITY } else { 0.0 }).collect();
            let mask = self.konst(Tensor::from_f32s(vec![sq, sk], mask));
            scores = self.node(span, "mask", Op::Binary(BinaryOp::Add), vec![Some(scores.id), Some(mask)], vec![b, h, sq, sk], DType::F32);
        }
        let probs = self.node(span, "softmax", burnc_compiler::ops::softmax::Softmax { axis: 3, log: false, coerce_2d: false }.op(), vec![Some(scores.id)], vec![b, h, sq, sk], DType::F32);
        let ctx = self.node(span, "context", MatMul.op(), vec![Some(probs.id), Some(heads[2].id)], vec![b, h, sq, dh], DType::F32);
        let ctx = self.permute(span, &ctx, vec![0, 2, 1, 3]);
        let ctx = self.reshape(span, &ctx, vec![b, sq, e]);
        Ok(Val::Tensor(self.project(span, &ctx, w_out, b_out, e)))
    }
}

/// Declare the parameters of `layers` (keyed under `prefix`), recursing into sub-models.
fn declare(g: &mut Graph, params: &mut HashMap<String, ValueId>, defs: &Defs, layers: &[Layer], prefix: &str, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    for l in layers {
        let insts: Vec<Option<usize>> = match l.count {
            Some(n) => (0..n).map(Some).collect(),
            None => vec![None],
        };
        for inst in insts {
            let key = format!("{prefix}{}", l.instance_key(inst));
            if let Kind::Sub { ty } = &l.kind {
                if let Some(d) = defs.get(&ty.to_string()) {
                    declare(g, params, defs, &d.layers, &format!("{key}."), depth + 1);
                }
                continue;
            }
            for (name, shape) in l.params(&key) {
                let n: usize = shape.iter().product();
                let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(&shape)) });
                let p = Param { dtype: DType::F32, shape, bytes: bytes::Bytes::from(vec![0u8; n * 4]) };
                let id = g.add_value(name.clone(), ty, ValueKind::Param(p));
                params.insert(name, id);
            }
        }
    }
}

/// The tensor arguments of a `forward` (after `&self`): name, dtype, shape.
pub fn forward_args(f: &syn::ImplItemFn) -> Result<Vec<(syn::Ident, DType, Vec<usize>)>> {
    let mut args = Vec::new();
    let mut has_self = false;
    for input in &f.sig.inputs {
        match input {
            syn::FnArg::Receiver(r) if r.reference.is_some() && r.mutability.is_none() => has_self = true,
            syn::FnArg::Receiver(r) => return Err(Error::new_spanned(r, "`forward` takes `&self`")),
            syn::FnArg::Typed(pt) => {
                let syn::Pat::Ident(pi) = &*pt.pat else {
                    return Err(Error::new_spanned(&pt.pat, "expected an argument name"));
                };
                let (dtype, shape) = tensor_type(&pt.ty)?;
                args.push((pi.ident.clone(), dtype, shape));
            }
        }
    }
    if !has_self {
        return Err(Error::new_spanned(&f.sig, "`forward` takes `&self` first"));
    }
    Ok(args)
}

/// Check what a body returned against the signature's declared tensor types.
pub fn check_returns(sig: &syn::Signature, outs: &[(T, proc_macro2::TokenStream)]) -> Result<()> {
    let declared: Vec<(&syn::Type, (DType, Vec<usize>))> = match &sig.output {
        syn::ReturnType::Default => return Err(Error::new_spanned(sig, "`forward` must declare what it returns: `-> Tensor<1, 10>`")),
        syn::ReturnType::Type(_, ty) => match &**ty {
            syn::Type::Tuple(t) => t.elems.iter().map(|t| Ok((t, tensor_type(t)?))).collect::<Result<_>>()?,
            t => vec![(t, tensor_type(t)?)],
        },
    };
    if declared.len() != outs.len() {
        return Err(Error::new_spanned(&sig.output, format!("`forward` declares {} outputs, the body returns {}", declared.len(), outs.len())));
    }
    for ((ty, (dt, shape)), (t, span)) in declared.iter().zip(outs) {
        if *shape != t.shape || *dt != t.dtype {
            let mut e = Error::new_spanned(span, format!("shape mismatch: `forward` returns {:?} ({}), but this is {:?} ({})", shape, dt, t.shape, t.dtype));
            e.combine(Error::new_spanned(ty, "declared here"));
            return Err(e);
        }
    }
    Ok(())
}
