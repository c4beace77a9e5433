//! What an op's rules see: its inputs' types and dims ([`ShapeCx`]), the node in generated code
//! ([`EmitCx`], fixed or bounded dims behind one interface) and the gradient builder
//! ([`GradCx`]).
use super::R;
use crate::autodiff::builder::B;
use crate::codegen::bounded::{node_is_symbolic, Sizes};
use crate::codegen::emit::{rust_ty, Ctx};
use crate::codegen::CodegenError;
use crate::ir::{AutoPad, Constraint, DType, DimExpr, Node, NodeId, Rel, ValueId, ValueKind, Window};
use crate::passes::symbolic::SymInfo;
use burnc_runtime::kernels::window::Window3;
use crate::tensor::Tensor;

/// One input as shape rules see it: dtype, dims (`None` while inference does not know the
/// rank yet), and the value when it is a small constant.
#[derive(Debug, Clone)]
pub struct Arg {
    pub dtype: DType,
    pub dims: Option<Vec<DimExpr>>,
    pub value: Option<Tensor>,
}

impl Arg {
    /// The dims, which the rule needs.
    pub fn dims(&self) -> R<&[DimExpr]> {
        self.dims.as_deref().ok_or_else(|| "the rank of an input is not known".to_string())
    }
}

/// One output's type (`dims` `None`: rank not known yet).
#[derive(Debug, Clone, PartialEq)]
pub struct OutType {
    pub dtype: DType,
    pub dims: Option<Vec<DimExpr>>,
}

/// The inputs of one node for its shape rule.
pub struct ShapeCx {
    args: Vec<Option<Arg>>,
    /// The contents of 1-D integer inputs that shape computations give as dim expressions
    /// (`Concat(Shape(x)[2:], [1])`), by input: bounded dims' pads or split sizes.
    ints: Vec<Option<Vec<DimExpr>>>,
    /// The relations between dims the rule declared that the dims alone do not decide
    /// (run-time checks under bounded dims).
    pub(crate) checks: Vec<Constraint>,
    /// Outputs' integer contents as dim expressions, where the rule gives them (a slice of a
    /// shape value): the bounded analysis follows shape computations through the op.
    pub(crate) out_ints: Vec<Option<Vec<DimExpr>>>,
    /// How many [`ShapeCx::unknown`] dims the rule made.
    unknowns: usize,
}

/// The prefix of [`ShapeCx::unknown`] dims' names (no named dim of a model starts so).
const UNKNOWN: &str = "?#";

/// Whether `d` depends on a dim the rule does not know ([`ShapeCx::unknown`]).
pub(crate) fn is_unknown(d: &DimExpr) -> bool {
    d.vars().iter().any(|v| v.starts_with(UNKNOWN))
}

impl ShapeCx {
    pub fn new(args: Vec<Option<Arg>>) -> ShapeCx {
        ShapeCx { args, ints: Vec::new(), checks: Vec::new(), out_ints: Vec::new(), unknowns: 0 }
    }

    /// Input `i`, which the op requires.
    pub fn arg(&self, i: usize) -> R<&Arg> {
        self.opt(i).ok_or_else(|| format!("input #{i} is missing"))
    }

    /// Input `i`'s integer contents as dim expressions: what a shape computation gave, or a
    /// constant's values; `None` when neither is known.
    pub fn ints(&self, i: usize) -> Option<Vec<DimExpr>> {
        if let Some(Some(v)) = self.ints.get(i) {
            return Some(v.clone());
        }
        let t = self.opt(i)?.value.as_ref()?;
        Some(t.to_i64_vec()?.into_iter().map(DimExpr::constant).collect())
    }

    /// Record input `i`'s contents as dim expressions (see [`ShapeCx::ints`]).
    pub(crate) fn set_ints(&mut self, i: usize, v: Vec<DimExpr>) {
        if self.ints.len() <= i {
            self.ints.resize(i + 1, None);
        }
        self.ints[i] = Some(v);
    }

    /// Give output `k`'s contents as dim expressions (see [`ShapeCx::out_ints`]).
    pub(crate) fn set_out_ints(&mut self, k: usize, v: Vec<DimExpr>) {
        if self.out_ints.len() <= k {
            self.out_ints.resize(k + 1, None);
        }
        self.out_ints[k] = Some(v);
    }

    /// A dim that depends on the inputs' values, not known before the op runs (the number of
    /// nonzero elements): inference names it afresh, the bounded analysis refuses the node, and
    /// an evaluation, which knows the values, never gives one.
    pub fn unknown(&mut self) -> DimExpr {
        self.unknowns += 1;
        DimExpr::var(&format!("{UNKNOWN}{}", self.unknowns - 1))
    }

    /// Optional input `i`.
    pub fn opt(&self, i: usize) -> Option<&Arg> {
        self.args.get(i).and_then(Option::as_ref)
    }

    /// The inputs at fixed shapes (an evaluation's tensors, a scratch size at the bounds).
    pub fn of_shapes<'t>(inputs: impl IntoIterator<Item = Option<(DType, &'t [usize])>>) -> ShapeCx {
        let arg = |(dtype, s): (DType, &[usize])| Arg { dtype, dims: Some(s.iter().map(|&d| DimExpr::constant(d as i64)).collect()), value: None };
        ShapeCx::new(inputs.into_iter().map(|i| i.map(arg)).collect())
    }

    /// The inputs of an evaluation, with the values of small ones (the operands that decide
    /// shapes).
    pub fn of_tensors(ins: &[Option<&Tensor>]) -> ShapeCx {
        let arg = |t: &Tensor| Arg {
            dtype: t.dtype(),
            dims: Some(t.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()),
            value: (t.numel() <= 1 << 16).then(|| t.clone()),
        };
        ShapeCx::new(ins.iter().map(|t| t.map(arg)).collect())
    }

    /// Declare that `a` and `b` must be equal (`what` names them in the error or check).
    pub fn equal(&mut self, what: &str, a: &DimExpr, b: &DimExpr) -> R<()> {
        self.check(what, Rel::Equal, a, b)
    }

    /// Declare that `a` may not exceed `b`.
    pub fn at_most(&mut self, what: &str, a: &DimExpr, b: &DimExpr) -> R<()> {
        self.check(what, Rel::AtMost, a, b)
    }

    /// Declare that `b` must be a multiple of `a`.
    pub fn divides(&mut self, what: &str, a: &DimExpr, b: &DimExpr) -> R<()> {
        self.check(what, Rel::Divides, a, b)
    }

    /// `floor(x / k)` for a positive constant `k`, declaring that `k` divides `x`.
    pub fn divide(&mut self, what: &str, x: &DimExpr, k: i64) -> R<DimExpr> {
        if k < 1 {
            return Err(format!("{what}: cannot divide by {k}"));
        }
        let kk = DimExpr::constant(k);
        match x.exact_div(&kk) {
            Some(q) => Ok(q),
            None => {
                self.divides(what, &kk, x)?;
                Ok(x.floor_div(k))
            }
        }
    }

    fn check(&mut self, what: &str, rel: Rel, a: &DimExpr, b: &DimExpr) -> R<()> {
        let c = Constraint { what: what.to_string(), rel, left: a.clone(), right: b.clone() };
        match c.holds() {
            Some(true) => Ok(()),
            Some(false) => Err(c.failure()),
            None => {
                if !self.checks.contains(&c) {
                    self.checks.push(c);
                }
                Ok(())
            }
        }
    }

    /// numpy broadcasting of two shapes. Dims that are neither equal nor a constant 1 must be
    /// equal ([`ShapeCx::equal`]); the output takes the constant one where there is one.
    pub fn broadcast(&mut self, a: &[DimExpr], b: &[DimExpr]) -> R<Vec<DimExpr>> {
        let r = a.len().max(b.len());
        let one = DimExpr::constant(1);
        let mut out = Vec::with_capacity(r);
        for i in 0..r {
            let da = if i + a.len() >= r { &a[i + a.len() - r] } else { &one };
            let db = if i + b.len() >= r { &b[i + b.len() - r] } else { &one };
            out.push(if da == db || *db == one {
                da.clone()
            } else if *da == one {
                db.clone()
            } else {
                self.equal(&format!("broadcast dims {da} and {db}"), da, db)?;
                if da.as_const().is_some() { da.clone() } else { db.clone() }
            });
        }
        Ok(out)
    }

    /// Inputs `i` and `j` must have one dtype and shape.
    pub fn same_type(&mut self, i: usize, j: usize) -> R<()> {
        let (a, b) = (self.arg(i)?.clone(), self.arg(j)?.clone());
        if a.dtype != b.dtype {
            return Err(format!("inputs #{i} and #{j} are {} and {}", a.dtype, b.dtype));
        }
        let (Some(ad), Some(bd)) = (&a.dims, &b.dims) else { return Ok(()) };
        if ad.len() != bd.len() {
            return Err(format!("inputs #{i} and #{j} have ranks {} and {}", ad.len(), bd.len()));
        }
        for (k, (x, y)) in ad.iter().zip(bd).enumerate() {
            self.equal(&format!("dims {k} of inputs #{i} and #{j}"), x, y)?;
        }
        Ok(())
    }
}

/// A graph's bounded-dims analysis and the run-time size table `sz` of its module: what
/// nodes whose dims depend on a named dim are emitted with.
#[derive(Clone, Copy)]
pub(crate) struct Sym<'a> {
    pub info: &'a SymInfo,
    pub sizes: &'a Sizes,
}

/// One node in generated code. With fixed shapes every size is a literal; with bounded dims
/// sizes that depend on a named dim come from the run-time size table `sz`, and views have
/// their run-time lengths.
pub struct EmitCx<'a> {
    cx: &'a Ctx<'a>,
    sym: Option<Sym<'a>>,
    id: NodeId,
    n: &'a Node,
}

impl<'a> EmitCx<'a> {
    pub(crate) fn fixed(cx: &'a Ctx<'a>, id: NodeId) -> EmitCx<'a> {
        EmitCx { cx, sym: None, id, n: cx.g.node(id) }
    }

    /// Node `id` with bounded dims when `sym` is given and the node reads or writes a value
    /// whose dims depend on a named dim; else with fixed shapes.
    pub(crate) fn new(cx: &'a Ctx<'a>, sym: Option<Sym<'a>>, id: NodeId) -> EmitCx<'a> {
        let sym = sym.filter(|s| node_is_symbolic(cx.g, s.info, id));
        EmitCx { cx, sym, id, n: cx.g.node(id) }
    }

    pub fn node(&self) -> &'a Node {
        self.n
    }

    pub(crate) fn id(&self) -> NodeId {
        self.id
    }

    /// The codegen context the node is emitted in (control flow emits its subgraphs there).
    pub(crate) fn ctx(&self) -> &'a Ctx<'a> {
        self.cx
    }

    /// The bounded-dims analysis and size table, under bounded dims.
    pub(crate) fn sym(&self) -> Option<Sym<'a>> {
        self.sym
    }

    /// Whether the node's dims depend on a named dim (sizes from the table `sz`).
    pub(crate) fn is_bounded(&self) -> bool {
        self.sym.is_some()
    }

    pub fn err(&self, reason: impl Into<String>) -> CodegenError {
        self.cx.err(self.n, reason)
    }

    /// The error of an op that has no bounded form yet.
    pub(crate) fn unsupported(&self) -> CodegenError {
        let op = self.n.source_op.as_ref().map(|(o, _)| o.clone()).unwrap_or_else(|| self.n.op.name());
        self.err(format!("`{op}` does not support bounded dims yet; pin them with --input"))
    }

    pub fn input(&self, i: usize) -> Result<ValueId, CodegenError> {
        self.cx.input(self.n, i)
    }

    pub fn opt_input(&self, i: usize) -> Option<ValueId> {
        self.n.inputs.get(i).copied().flatten()
    }

    pub fn output(&self, k: usize) -> Result<ValueId, CodegenError> {
        self.n.outputs.get(k).copied().ok_or_else(|| self.err(format!("missing output #{k}")))
    }

    pub fn dtype(&self, v: ValueId) -> Result<DType, CodegenError> {
        Ok(self.cx.ty(self.n, v)?.0)
    }

    /// The dtype of `v` when it is one of `supported` (the op's kernels' types); else an error
    /// naming the op and the dtype.
    pub fn dtype_among(&self, v: ValueId, supported: &[DType]) -> Result<DType, CodegenError> {
        let d = self.dtype(v)?;
        if !supported.contains(&d) {
            return Err(self.err(format!("{} on {d} is not supported by codegen yet", self.n.op.name())));
        }
        Ok(d)
    }

    /// The Rust element type of `v`.
    pub fn elem(&self, v: ValueId) -> Result<&'static str, CodegenError> {
        let d = self.dtype(v)?;
        rust_ty(d).ok_or_else(|| self.err(format!("dtype {d} is not supported by codegen yet")))
    }

    /// `v`'s dims: constants, or expressions of the named dims.
    pub fn dims(&self, v: ValueId) -> Result<Vec<DimExpr>, CodegenError> {
        let constants = |s: Vec<usize>| -> Vec<DimExpr> { s.iter().map(|&d| DimExpr::constant(d as i64)).collect() };
        let Some(sym) = self.sym else { return Ok(constants(self.cx.ty(self.n, v)?.1)) };
        if let Some(s) = sym.info.shapes.get(&v) {
            return Ok(s.clone());
        }
        // Weights and other static values keep their types.
        let g = self.cx.g;
        let s = g.tensor_type(v).and_then(|t| t.shape.as_ref()?.as_fixed());
        Ok(constants(s.ok_or_else(|| self.err(format!("value `{}` has no known shape", g.value(v).name)))?))
    }

    /// A `usize` expression for dim `d` (a constant as a plain literal, as hand-written code
    /// passes it to a `usize` parameter).
    pub fn size(&self, d: &DimExpr) -> Result<String, CodegenError> {
        match (self.sym, d.as_const()) {
            (_, Some(c)) => Ok(c.max(0).to_string()),
            (Some(sym), None) => Ok(sym.sizes.dim(d)),
            (None, None) => Err(self.err(format!("dim {d} is not fixed"))),
        }
    }

    /// A `usize` expression for the element count of `v`.
    pub fn numel(&self, v: ValueId) -> Result<String, CodegenError> {
        let dims = self.dims(v)?;
        let prod = dims.iter().fold(DimExpr::constant(1), |a, d| a.mul(d));
        self.size(&prod)
    }

    /// Store bytes in the weights blob (64-byte aligned); returns their offset.
    pub fn blob(&self, bytes: &[u8]) -> usize {
        self.cx.weights.borrow_mut().push_table(bytes)
    }

    /// Store a table in the weights blob; returns an expression of type `&[T]`.
    pub fn table<T: crate::tensor::LeBytes>(&self, v: &[T]) -> String {
        self.cx.table(v)
    }

    /// `&[T]` over `v` (with its run-time length under bounded dims).
    pub fn read(&self, v: ValueId) -> Result<String, CodegenError> {
        let Some(sym) = self.sym else { return self.cx.read(self.n, v) };
        match &self.cx.g.value(v).kind {
            ValueKind::Node(_) => Ok(format!("unsafe {{ rt::arena::view::<{}>(a, {}, {}) }}", self.elem(v)?, self.slot(v)?, self.len(v)?)),
            // A fill constant (a ConstantOfShape folded at the bounds): its prefix is the fill
            // at the run-time shape.
            ValueKind::Const(_) if sym.info.is_symbolic(v) => Ok(format!("&{}[..{}]", self.cx.read(self.n, v)?, self.len(v)?)),
            // Weights are static; graph inputs are the caller's slices (lengths checked).
            _ => self.cx.read(self.n, v),
        }
    }

    /// Arena offset of node output `v`.
    fn slot(&self, v: ValueId) -> Result<usize, CodegenError> {
        let slot = self.cx.plan.slots.get(&v).ok_or_else(|| self.err(format!("value `{}` has no arena slot", self.cx.g.value(v).name)))?;
        Ok(slot.offset)
    }

    /// `v`'s element count as views take it: a literal with fixed shapes, else the product
    /// of its dims' sizes.
    pub(crate) fn len(&self, v: ValueId) -> Result<String, CodegenError> {
        match self.sym {
            Some(sym) => Ok(sym.sizes.numel(&self.dims(v)?)),
            None => Ok(self.cx.ty(self.n, v)?.1.iter().product::<usize>().to_string()),
        }
    }

    /// `&[T]` over input `i`.
    pub fn read_input(&self, i: usize) -> Result<String, CodegenError> {
        self.read(self.input(i)?)
    }

    /// `Some(&[T])` over optional input `i`, `None` when absent.
    pub fn read_opt(&self, i: usize) -> Result<String, CodegenError> {
        Ok(match self.opt_input(i) {
            Some(v) => format!("Some({})", self.read(v)?),
            None => "None".into(),
        })
    }

    /// [`Self::read_opt`] over optional inputs `first..first + N`, the run of them a kernel's
    /// inputs struct usually ends in.
    pub fn read_opts<const N: usize>(&self, first: usize) -> Result<[String; N], CodegenError> {
        let mut out: [String; N] = std::array::from_fn(|_| String::new());
        for (k, s) in out.iter_mut().enumerate() {
            *s = self.read_opt(first + k)?;
        }
        Ok(out)
    }

    /// `Some(&mut [T])` over output `k` when something reads it ([`Self::used_output`]), else
    /// `None`.
    pub fn write_used(&self, k: usize) -> Result<String, CodegenError> {
        Ok(match self.used_output(k) {
            Some(v) => format!("Some({})", self.write(v)?),
            None => "None".into(),
        })
    }

    /// The input indices whose values the memory plan already put inside this node's output
    /// (a Concat's parts written in place by their producers).
    pub fn placed(&self) -> &'a [usize] {
        self.cx.plan.placed.get(&self.id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// `&mut [T]` over `len` elements of node output `v` from element `start` (fixed shapes).
    pub fn write_run(&self, v: ValueId, start: usize, len: usize) -> Result<String, CodegenError> {
        let at = start.checked_mul(self.cx.g.tensor_type(v).map_or(0, |t| t.dtype.size())).ok_or_else(|| self.err("run offset overflows"))?;
        Ok(format!("unsafe {{ rt::arena::view_mut::<{}>(a, {}, {len}) }}", self.elem(v)?, self.slot(v)? + at))
    }

    /// `&mut [T]` over node output `v` (with its run-time length under bounded dims).
    pub fn write(&self, v: ValueId) -> Result<String, CodegenError> {
        if self.sym.is_none() {
            return self.cx.write(self.n, v);
        }
        Ok(format!("unsafe {{ rt::arena::view_mut::<{}>(a, {}, {}) }}", self.elem(v)?, self.slot(v)?, self.len(v)?))
    }

    /// Strides (as `usize` expressions) reading an input of dims `shape` at each index of an
    /// output of dims `out` under numpy broadcasting: 0 along the input's dims of 1 (and the
    /// dims it lacks), as the interpreter's strides.
    pub fn broadcast_strides(&self, shape: &[DimExpr], out: &[DimExpr]) -> Result<Vec<String>, CodegenError> {
        let r = out.len();
        let one = DimExpr::constant(1);
        let mut st = vec!["0".to_string(); r];
        let mut acc = DimExpr::constant(1);
        for i in (0..r).rev() {
            let j = (i + shape.len()).checked_sub(r);
            let d = j.map(|j| &shape[j]).unwrap_or(&one);
            if *d != one {
                st[i] = self.size(&acc)?;
            }
            if j.is_some() {
                acc = acc.mul(d);
            }
        }
        Ok(st)
    }

    /// A `[usize; N]` expression of `dims`.
    pub fn sizes(&self, dims: &[DimExpr]) -> Result<String, CodegenError> {
        Ok(format!("[{}]", dims.iter().map(|d| self.size(d)).collect::<Result<Vec<_>, _>>()?.join(", ")))
    }

    /// A `Window3` literal for a window op from input `x` to output `y` (`kernel`: the
    /// spatial kernel dims): resolved at compile time when the spatial dims are fixed, else the
    /// geometry at the bounds with the run-time spatial sizes (and SAME pads computed from them).
    pub fn window(&self, w: &Window, kernel: &[usize], x: ValueId, y: ValueId) -> Result<String, CodegenError> {
        let ks: Vec<DimExpr> = kernel.iter().map(|&k| DimExpr::constant(k as i64)).collect();
        self.window_of(w, kernel, &ks, x, y)
    }

    /// [`Self::window`] with kernel dims `ks` that may depend on named dims (a convolution
    /// whose W is a graph input); `kernel` is their value at the bounds.
    pub(crate) fn window_of(&self, w: &Window, kernel: &[usize], ks: &[DimExpr], x: ValueId, y: ValueId) -> Result<String, CodegenError> {
        let at_bound = self.cx.ty(self.n, x)?.1;
        let sp = at_bound.get(2..).ok_or_else(|| self.err("a window op needs rank at least 3"))?;
        let win = crate::ops::window::resolve(w, kernel, sp).map_err(|e| self.err(e))?;
        let (xs, ys) = (self.dims(x)?, self.dims(y)?);
        let ys = ys.get(2..).ok_or_else(|| self.err("output rank below 3"))?;
        match self.sym {
            Some(sym) if xs[2..].iter().chain(ys).chain(ks).any(|d| d.as_const().is_none()) => Ok(run_time_window(sym.sizes, w, &win, ks, &xs[2..], ys)),
            _ => Ok(crate::codegen::emit::nn::window_lit(&win)),
        }
    }

    /// Output `k` when something reads it (the memory plan gave it a slot), else `None`: an
    /// optional output nobody uses is not computed.
    pub fn used_output(&self, k: usize) -> Option<ValueId> {
        let v = *self.n.outputs.get(k)?;
        self.cx.plan.slots.contains_key(&v).then_some(v)
    }

    /// The node's scratch space as `&mut [T]` of dtype `d`: all of it, as
    /// [`OpDef::scratch_bytes`] sized it at the bounds (`&mut []` when it asked for none).
    ///
    /// [`OpDef::scratch_bytes`]: super::OpDef::scratch_bytes
    pub fn scratch(&self, d: DType) -> Result<String, CodegenError> {
        let elem = rust_ty(d).ok_or_else(|| self.err(format!("scratch of {d}")))?;
        let size = d.size().max(1);
        match self.cx.plan.scratch.get(&self.id) {
            Some(slot) if slot.bytes >= size => {
                Ok(format!("unsafe {{ rt::arena::view_mut::<{elem}>(a, {}, {}) }}", slot.offset, slot.bytes / size))
            }
            _ => Ok("&mut []".into()),
        }
    }

    /// The node's inputs for the op's shape rule: dtypes, dims and the values of small
    /// constants (the run-time checks its relations need are already in place).
    pub fn shape_cx(&self) -> Result<ShapeCx, CodegenError> {
        let mut args = Vec::with_capacity(self.n.inputs.len());
        for v in &self.n.inputs {
            args.push(match *v {
                None => None,
                Some(v) => Some(Arg { dtype: self.dtype(v)?, dims: Some(self.dims(v)?), value: self.konst(v).filter(|t| t.numel() <= 1 << 16) }),
            });
        }
        let mut cx = ShapeCx::new(args);
        if let Some(sym) = self.sym {
            for (i, v) in self.n.inputs.iter().enumerate() {
                if let Some(ints) = v.and_then(|v| sym.info.ints.get(&v)) {
                    cx.set_ints(i, ints.clone());
                }
            }
        }
        Ok(cx)
    }

    /// The value of `v` when it is a constant.
    pub fn konst(&self, v: ValueId) -> Option<Tensor> {
        self.cx.g.const_value(v)
    }

    /// The integers of constant input `i` (an axis or a count given as a tensor).
    pub fn const_ints(&self, i: usize) -> Option<Vec<i64>> {
        self.konst(self.opt_input(i)?)?.to_i64_vec()
    }

    /// Whether the memory plan made `v` a view of another buffer (nothing to compute).
    pub fn is_alias(&self, v: ValueId) -> bool {
        self.cx.plan.aliases.contains_key(&v)
    }

    /// The input whose buffer the memory plan gave output 0 (the op computes in place).
    pub fn in_place_input(&self) -> Option<usize> {
        self.cx.plan.inplace.get(&self.id).copied()
    }
}

/// A `Window3` literal under bounded dims: the static geometry at the bounds (`win_at_bound`)
/// with the spatial input, output and kernel (`ks`) sizes from the run-time table.
fn run_time_window(sizes: &Sizes, w: &Window, win_at_bound: &Window3, ks: &[DimExpr], xs: &[DimExpr], ys: &[DimExpr]) -> String {
    let k = xs.len();
    // The dilated kernel extent `(k − 1)·d + 1` of spatial dim `i`, and its code.
    let extent = |i: usize| ks.get(i).cloned().unwrap_or_else(|| DimExpr::constant(win_at_bound.kernel[3 - k + i] as i64)).sub(&DimExpr::constant(1)).scale(win_at_bound.dilations[3 - k + i] as i64).add(&DimExpr::constant(1));
    let extent_code = |i: usize| match extent(i).as_const() {
        Some(dk) => format!("{dk}"),
        None => format!("(({} - 1) * {} + 1)", sizes.dim(&ks[i]), win_at_bound.dilations[3 - k + i]),
    };
    let kernel = if ks.iter().all(|d| d.as_const().is_some()) {
        format!("{:?}", win_at_bound.kernel)
    } else {
        let mut a: Vec<String> = vec!["1".into(); 3 - k];
        a.extend(ks.iter().map(|d| sizes.dim(d)));
        format!("[{}]", a.join(", "))
    };
    let fill = |v: &[DimExpr]| {
        let mut a: Vec<String> = vec!["1usize".into(); 3 - k];
        a.extend(v.iter().map(|d| sizes.dim(d)));
        format!("[{}]", a.join(", "))
    };
    let (mut pb, mut pe): (Vec<String>, Vec<String>) =
        (win_at_bound.pads_begin.iter().map(|p| format!("{p}isize")).collect(), win_at_bound.pads_end.iter().map(|p| format!("{p}isize")).collect());
    let same = matches!(w.auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
    if !same {
        // The window must fit the padded input (as geom::resolve requires): one more
        // derived size `len + pads − extent + 1` that `forward` checks is at least 1.
        for (i, x) in xs.iter().enumerate() {
            let j = 3 - k + i;
            let pads = (win_at_bound.pads_begin[j] + win_at_bound.pads_end[j]) as i64;
            let _ = sizes.dim(&x.add(&DimExpr::constant(pads + 1)).sub(&extent(i)));
        }
    } else {
        // SAME pads depend on the size: total = (out − 1)·s + dk − len, split as geom::resolve.
        for i in 0..k {
            let j = 3 - k + i;
            let dk = extent_code(i);
            let total = format!("(({} - 1) * {} + {dk}).saturating_sub({})", sizes.dim(&ys[i]), win_at_bound.strides[j], sizes.dim(&xs[i]));
            let (small, big) = (format!("(({total}) / 2) as isize"), format!("(({total}) - ({total}) / 2) as isize"));
            if w.auto_pad == AutoPad::SameUpper {
                (pb[j], pe[j]) = (small, big);
            } else {
                (pb[j], pe[j]) = (big, small);
            }
        }
    }
    format!(
        "rt::kernels::window::Window3 {{ input: {}, output: {}, kernel: {kernel}, strides: {:?}, dilations: {:?}, pads_begin: [{}], pads_end: [{}] }}",
        fill(xs),
        fill(ys),
        win_at_bound.strides,
        win_at_bound.dilations,
        pb.join(", "),
        pe.join(", ")
    )
}

/// The gradient rule's view of one forward node.
pub struct GradCx<'a, 'g> {
    pub b: &'a mut B<'g>,
    pub n: &'a Node,
    /// Each output's gradient (`None`: not needed).
    pub dys: &'a [Option<ValueId>],
    need: &'a [bool],
}

impl<'a, 'g> GradCx<'a, 'g> {
    pub(crate) fn new(b: &'a mut B<'g>, n: &'a Node, dys: &'a [Option<ValueId>], need: &'a [bool]) -> Self {
        GradCx { b, n, dys, need }
    }

    pub fn input(&self, i: usize) -> R<ValueId> {
        self.n.inputs.get(i).copied().flatten().ok_or_else(|| format!("input {i} is missing"))
    }

    pub fn output(&self, k: usize) -> R<ValueId> {
        self.n.outputs.get(k).copied().ok_or_else(|| format!("output {k} is missing"))
    }

    /// Output 0's gradient (a gradient on another output is refused, not dropped).
    pub fn dy(&self) -> R<ValueId> {
        crate::autodiff::dy0(self.dys)
    }

    /// Output `k`'s gradient, if it has one.
    pub fn dy_at(&self, k: usize) -> Option<ValueId> {
        self.dys.get(k).copied().flatten()
    }

    /// Whether input `i`'s gradient is needed.
    pub fn wants(&self, i: usize) -> bool {
        self.need.get(i).copied().unwrap_or(false)
    }
}
