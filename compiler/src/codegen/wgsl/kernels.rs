//! One node's WGSL kernels. Every kernel binds the module's two buffers as arrays of 32-bit
//! words, `A` (arena: activations, then inputs) and `W` (weights); each tensor's word offset
//! and every shape are literals. Words, not floats: a float load would let a driver flush or
//! quiet the bits of an integer that happens to look like a denormal or a NaN, so an f32 is
//! `bitcast<f32>(A[k])`, an int32 `bitcast<i32>(A[k])`, an int64 two words (the low one is
//! computed on), a bool or byte one byte of a word.
use super::gemm::Load;
use super::scalar::{self, compute_type};
use crate::codegen::gpu::scalar::program;
use crate::codegen::gpu::window::tap_pos;
use crate::codegen::gpu::{self, gemm_dims, repeated_index, Dialect, GemmDims};
use crate::codegen::index::{batch_offset, broadcast_index, matmul_dims, strides, MatMulDims};
use crate::codegen::CodegenError;
use crate::ir::{DType, Graph, Node, NodeId, Op, ReduceOp, ValueId, ValueKind};
use crate::memory::MemoryPlan;
use std::collections::HashMap;
use std::fmt::Write;

/// The language the shared kernel text ([`crate::codegen::gpu`]) is printed in.
const D: Dialect = Dialect::Wgsl;

/// Invocations per workgroup of the elementwise-style kernels.
pub const GROUP: u32 = 256;
/// Most workgroups of one dispatch dimension (WebGPU's default limit); a grid-stride loop
/// covers the rest.
pub const MAX_GROUPS: usize = 65535;

/// A kernel: its WGSL (an entry point and the workgroup variables it uses), name and dispatch.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub source: String,
    pub workgroups: [u32; 3],
    /// Invocations per workgroup.
    pub invocations: u32,
    /// Bytes of workgroup memory.
    pub workgroup_bytes: u32,
}

/// Bytes of one weights binding: WebGPU's default `maxStorageBufferBindingSize`, which every
/// adapter offers, so a model's weights fit any device in chunks of this size (no tensor
/// straddles two).
pub const CHUNK: usize = 128 << 20;

/// The binding name and offset in it of a weight at global byte offset `off` of `len` bytes:
/// `W<c>` when it lies in one chunk, else `W` (read through `W(i)`, which picks the chunk of
/// global word `i`).
pub fn chunk_of(off: usize, len: usize) -> (String, usize) {
    if off / CHUNK == (off + len.max(1) - 1) / CHUNK {
        (format!("W{}", off / CHUNK), off % CHUNK)
    } else {
        ("W".into(), off)
    }
}

impl Kernel {
    /// The same kernel under the name `new`: its entry point and workgroup variables renamed
    /// (a node's second and later kernels).
    pub fn renamed(mut self, new: &str) -> Kernel {
        let old = std::mem::take(&mut self.name);
        self.source = self.source.replace(&format!("fn {old}("), &format!("fn {new}(")).replace(&format!("{old}_a"), &format!("{new}_a")).replace(&format!("{old}_b"), &format!("{new}_b"));
        self.name = new.to_string();
        self
    }
}

/// Where a node's operands live.
pub struct Cx<'a> {
    pub g: &'a Graph,
    pub plan: &'a MemoryPlan,
    /// Weights blob offsets (chunked: see [`CHUNK`]).
    pub weights: &'a HashMap<ValueId, usize>,
    /// Arena offsets of the graph inputs (after the planned activations).
    pub inputs: &'a HashMap<ValueId, usize>,
    /// Index tables of data-movement ops, appended to the weights blob after `tables_at`.
    pub tables: std::cell::RefCell<Vec<u8>>,
    pub tables_at: usize,
}

type R<T> = Result<T, CodegenError>;

/// A tensor in one of the buffers: `buf` is `A` or a weights chunk `W<c>`, `byte` its byte
/// offset there.
#[derive(Debug, Clone)]
pub struct Tensor {
    buf: String,
    byte: usize,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl Tensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The word of element `idx` (a u32 expression) of a tensor of `per` words per element,
    /// plus `extra` words.
    fn word(&self, idx: &str, per: usize, extra: usize) -> String {
        let base = self.byte / 4 + extra;
        let i = if per == 1 { idx.to_string() } else { format!("{per}u * ({idx})") };
        if self.buf == "W" {
            return format!("W({base}u + {i})");
        }
        if base == 0 {
            format!("{}[{i}]", self.buf)
        } else {
            format!("{}[{base}u + {i}]", self.buf)
        }
    }

    /// Element `idx` in its compute type ([`scalar::compute_type`]).
    pub fn load(&self, idx: &str) -> String {
        match self.dtype {
            DType::F32 => format!("bitcast<f32>({})", self.word(idx, 1, 0)),
            DType::I32 => format!("bitcast<i32>({})", self.word(idx, 1, 0)),
            DType::I64 => format!("bitcast<i32>({})", self.word(idx, 2, 0)),
            DType::F16 => format!("f16_value(half_{}({}u + ({idx})))", self.buf, self.byte / 2),
            DType::BF16 => format!("bitcast<f32>(half_{}({}u + ({idx})) << 16u)", self.buf, self.byte / 2),
            // Bytes: the one byte of its word.
            _ => format!("byte_{}({}u + ({idx}))", self.buf, self.byte),
        }
    }

    /// Store `v` (the compute type) at element `idx`; 32- and 64-bit types only (bytes are
    /// written a word at a time by [`pointwise`]).
    pub fn store(&self, idx: &str, v: &str) -> Option<String> {
        Some(match self.dtype {
            DType::F32 | DType::I32 => format!("{} = bitcast<u32>({v});", self.word(idx, 1, 0)),
            // The high word is the sign of the low one: int64 values computed in 32 bits.
            DType::I64 => format!("{{ let q = {v}; {} = bitcast<u32>(q); {} = bitcast<u32>(q >> 31u); }}", self.word(idx, 2, 0), self.word(idx, 2, 1)),
            _ => return None,
        })
    }

    /// [`Tensor::store`], and for 16-bit floats a read-modify-write of the element's half of
    /// its word: only for kernels in which one invocation writes both halves of every word it
    /// touches (see [`Tensor::owns_words`]).
    pub fn store_in_word(&self, idx: &str, v: &str) -> Option<String> {
        let bits = match self.dtype {
            DType::F16 => "f16_bits",
            DType::BF16 => "bf16_bits",
            _ => return self.store(idx, v),
        };
        let w = self.byte / 4;
        Some(format!("{{ let e = {idx}; let sh = (e & 1u) * 16u; let w = {w}u + e / 2u; A[w] = (A[w] & ~(0xffffu << sh)) | ({bits}({v}) << sh); }}"))
    }

    /// Whether runs of `run` consecutive elements starting at multiples of `run` cover whole
    /// words (so one invocation writing such a run owns its words).
    pub fn owns_words(&self, run: usize) -> bool {
        self.dtype.size() >= 4 || (self.dtype.size() == 2 && run % 2 == 0)
    }
}

impl Cx<'_> {
    pub fn err(&self, n: &Node, reason: impl Into<String>) -> CodegenError {
        CodegenError::Unsupported { node: n.name.clone(), op: n.op.name(), reason: reason.into() }
    }

    fn tensor(&self, n: &Node, v: ValueId) -> R<Tensor> {
        let t = self.g.tensor_type(v).ok_or_else(|| self.err(n, format!("`{}` is not a tensor", self.g.value(v).name)))?;
        let shape = t.shape.as_ref().and_then(|s| s.as_fixed()).ok_or_else(|| self.err(n, format!("`{}` has no static shape", self.g.value(v).name)))?;
        if compute_type(t.dtype).is_none() {
            return Err(self.err(n, format!("{} is not supported by the wgpu target yet", t.dtype)));
        }
        let (buf, byte) = match &self.g.value(v).kind {
            ValueKind::Param(_) | ValueKind::Const(_) => chunk_of(*self.weights.get(&v).ok_or_else(|| self.err(n, "weight missing from the layout"))?, t.dtype.size() * shape.iter().product::<usize>()),
            ValueKind::Input => ("A".into(), *self.inputs.get(&v).ok_or_else(|| self.err(n, "input has no arena slot"))?),
            ValueKind::Node(_) => ("A".into(), self.plan.slots.get(&v).ok_or_else(|| self.err(n, format!("`{}` has no arena slot", self.g.value(v).name)))?.offset),
            ValueKind::Outer => return Err(self.err(n, "values of an enclosing graph are not supported by the wgpu target")),
        };
        if byte % 4 != 0 {
            return Err(self.err(n, format!("`{}` is not word aligned", self.g.value(v).name)));
        }
        Ok(Tensor { buf, byte, dtype: t.dtype, shape })
    }
}

/// One node as an op definition sees it when writing its WGSL ([`crate::ops::OpDef::wgsl`]).
pub type NodeCx<'a, 'g> = gpu::NodeCx<'a, Cx<'g>>;

impl<'a, 'g> NodeCx<'a, 'g> {
    pub(super) fn of(cx: &'a Cx<'g>, n: &'a Node, name: &'a str) -> Self {
        gpu::NodeCx::new(cx, cx.plan, "wgpu", n, name)
    }

    pub fn input(&self, i: usize) -> R<Tensor> {
        let v = self.n.inputs.get(i).copied().flatten().ok_or_else(|| self.err(format!("missing input #{i}")))?;
        self.cx.tensor(self.n, v)
    }

    pub fn opt_input(&self, i: usize) -> R<Option<Tensor>> {
        match self.n.inputs.get(i).copied().flatten() {
            Some(v) => Ok(Some(self.cx.tensor(self.n, v)?)),
            None => Ok(None),
        }
    }

    pub fn output(&self, i: usize) -> R<Tensor> {
        let v = self.n.outputs.get(i).copied().ok_or_else(|| self.err(format!("missing output #{i}")))?;
        self.cx.tensor(self.n, v)
    }

    /// Output `k` when something reads it (it has an arena slot).
    pub fn used_output(&self, k: usize) -> R<Option<Tensor>> {
        self.used(k).map(|v| self.cx.tensor(self.n, v)).transpose()
    }

    /// Output 0 of a view ([`crate::ops::OpDef::is_view`]): no kernel where the memory plan
    /// made it share input 0's slot, else a copy.
    pub fn view_copy(&self) -> R<Option<Kernel>> {
        let y = self.output(0)?;
        if self.output_is_alias() {
            return Ok(None);
        }
        Ok(Some(copy_words(self.name, &self.input(0)?, &y, y.numel() * y.dtype.size())))
    }

    /// The value of input `i` when it is a constant.
    pub fn konst(&self, i: usize) -> Option<crate::tensor::Tensor> {
        self.cx.g.const_value(self.n.inputs.get(i).copied().flatten()?)
    }

    /// A table of `bytes` stored with the weights: its buffer and word offset there.
    pub fn table(&self, bytes: &[u8]) -> R<(String, usize)> {
        table(self, bytes)
    }

    /// Output 0 of a data-movement op whose other inputs are constants, through an index
    /// table of the interpreter's own moves (see `by_table`).
    pub fn by_table(&self) -> R<Kernel> {
        by_table(self, &self.output(0)?)
    }

    /// A kernel computing every element `i` of `y`: `body(i)` gives the statements and the
    /// value (in `y`'s compute type).
    pub fn pointwise(&self, y: &Tensor, body: impl Fn(&str) -> R<(String, String)>) -> R<Kernel> {
        pointwise(self.name, y, &body).map_err(|e| self.err(e))
    }

    /// [`Self::pointwise`] as a later kernel of the node, its name the first's and `suffix`.
    pub fn pointwise_as(&self, suffix: &str, y: &Tensor, body: impl Fn(&str) -> R<(String, String)>) -> R<Kernel> {
        pointwise(&format!("{}{suffix}", self.name), y, &body).map_err(|e| self.err(e))
    }

    /// A kernel running `body` once per row `row < rows` of `len` elements, one invocation per
    /// row (reductions along rows).
    pub fn rows(&self, rows: usize, body: &str) -> Kernel {
        grid_loop(self.name, rows, "row", body)
    }
}

/// `@compute` entry point `name` running `body` for every `var < n` (a grid-stride loop).
pub fn grid_loop(name: &str, n: usize, var: &str, body: &str) -> Kernel {
    let groups = n.div_ceil(GROUP as usize).clamp(1, MAX_GROUPS);
    let stride = groups * GROUP as usize;
    let source = format!(
        "@compute @workgroup_size({GROUP})\nfn {name}(@builtin(global_invocation_id) gid: vec3<u32>) {{\n\
         for (var {var} = gid.x; {var} < {n}u; {var} += {stride}u) {{\n{body}\n}}\n}}\n"
    );
    Kernel { name: name.to_string(), source, workgroups: [groups as u32, 1, 1], invocations: GROUP, workgroup_bytes: 0 }
}

/// Every element of `y`, computed by `body(index) -> (statements, value)`. A `y` of 8- or
/// 16-bit elements is written a word (four or two elements) per invocation, so no two
/// invocations share a word.
pub fn pointwise(name: &str, y: &Tensor, body: &dyn Fn(&str) -> R<(String, String)>) -> Result<Kernel, String> {
    let n = y.numel();
    let err = |e: CodegenError| e.to_string();
    if let Some(store) = y.store("i", "out") {
        let (stmts, v) = body("i").map_err(err)?;
        return Ok(grid_loop(name, n, "i", &format!("{stmts}let out = {v};\n{store}")));
    }
    let (per, bits) = match y.dtype {
        DType::Bool => (4, "({v}) & 1u".to_string()),
        DType::U8 => (4, "({v}) & 0xffu".to_string()),
        DType::F16 => (2, "f16_bits({v})".to_string()),
        DType::BF16 => (2, "bf16_bits({v})".to_string()),
        d => return Err(format!("{d} outputs are not supported by the wgpu target yet")),
    };
    let (stmts, v) = body("e").map_err(err)?;
    let words = n.div_ceil(per);
    let body = format!(
        "var word = 0u;\nfor (var u = 0u; u < {per}u; u++) {{\nlet e = {per}u * w + u;\nif (e >= {n}u) {{ break; }}\n{stmts}word |= ({}) << ({}u * u);\n}}\nA[{}u + w] = word;",
        bits.replace("{v}", &v),
        32 / per,
        y.byte / 4
    );
    Ok(grid_loop(name, words, "w", &body))
}

/// Copy `bytes` bytes (rounded up to words: slots are word aligned and padded) from `x` to `y`.
fn copy_words(name: &str, x: &Tensor, y: &Tensor, bytes: usize) -> Kernel {
    let words = bytes.div_ceil(4);
    grid_loop(name, words, "i", &format!("A[{}u + i] = {};", y.byte / 4, x.word("i", 1, 0)))
}

/// The kernels of node `id`, named `name…`; empty when the node needs none (a view whose
/// output shares its input's slot).
pub fn node(cx: &Cx, id: NodeId, name: &str) -> R<Vec<Kernel>> {
    let n = cx.g.node(id);
    let ncx = NodeCx::of(cx, n, name);
    if n.outputs.is_empty() {
        return Ok(vec![]);
    }
    let out = n.outputs[0];
    let y = cx.tensor(n, out)?;
    if y.numel() == 0 {
        return Ok(vec![]);
    }
    let od = y.dtype;
    let one = |k: R<Kernel>| k.map(|k| vec![k]);
    match &n.op {
        Op::Reshape { .. } | Op::Unary(crate::ir::UnaryOp::Identity) => Ok(ncx.view_copy()?.into_iter().collect()),
        Op::ConstantOfShape { value } => {
            let v = value.to_f64_vec().first().copied().unwrap_or(0.0);
            let lit = match compute_type(od) {
                Some("f32") => scalar::f32_lit(v as f32),
                Some("i32") => format!("i32({})", v as i32),
                _ => format!("{}u", v as u32),
            };
            one(ncx.pointwise(&y, |_| Ok((String::new(), lit.clone()))))
        }
        Op::Unary(u) => {
            let x = ncx.input(0)?;
            let e = scalar::unary(*u, "x", x.dtype).ok_or_else(|| cx.err(n, format!("{u:?} on {} is not supported by the wgpu target", x.dtype)))?;
            one(ncx.pointwise(&y, |i| Ok((format!("let x = {};\n", x.load(i)), e.clone()))))
        }
        Op::Binary(b) => {
            let (a, bb) = (ncx.input(0)?, ncx.input(1)?);
            let e = scalar::binary(*b, "a", "b", a.dtype).ok_or_else(|| cx.err(n, format!("{b:?} on {} is not supported by the wgpu target", a.dtype)))?;
            one(ncx.pointwise(&y, |i| {
                let ai = broadcast_index(&a.shape, &y.shape, i);
                let bi = broadcast_index(&bb.shape, &y.shape, i);
                Ok((format!("let a = {};\nlet b = {};\n", a.load(&ai), bb.load(&bi)), e.clone()))
            }))
        }
        Op::Elementwise(p) => {
            let ins: Vec<Tensor> = (0..n.inputs.len()).map(|k| ncx.input(k)).collect::<R<_>>()?;
            let on = y.numel();
            one(ncx.pointwise(&y, |i| {
                let vals: Vec<String> = ins
                    .iter()
                    .map(|t| t.load(&repeated_index(D, i, t.numel(), on)))
                    .collect();
                program(D, p, &vals).ok_or_else(|| cx.err(n, "elementwise program has a step the wgpu target cannot print"))
            }))
        }
        Op::Concat { axis } => {
            let axis = crate::ir::axis::norm_axis(*axis, y.shape.len()).map_err(|e| cx.err(n, e))?;
            let inner: usize = y.shape[axis + 1..].iter().product();
            let len = y.shape[axis];
            let ins: Vec<Tensor> = (0..n.inputs.len()).map(|k| ncx.input(k)).collect::<R<_>>()?;
            one(ncx.pointwise(&y, |i| {
                let mut s = format!("let c = ({i} / {inner}u) % {len}u;\nlet o = {i} / {}u;\nlet r = {i} % {inner}u;\nvar v = {};\n", inner * len, zero(od));
                let mut start = 0;
                for t in &ins {
                    let k = t.shape[axis];
                    if k == 0 {
                        continue;
                    }
                    let _ = writeln!(s, "if (c >= {start}u && c < {}u) {{ v = {}; }}", start + k, t.load(&format!("(o * {k}u + (c - {start}u)) * {inner}u + r")));
                    start += k;
                }
                Ok((s, "v".into()))
            }))
        }
        Op::Gather { axis } => {
            let (x, ix) = (ncx.input(0)?, ncx.input(1)?);
            let a = crate::ir::axis::norm_axis(*axis, x.shape.len()).map_err(|e| cx.err(n, e))?;
            let inner: usize = x.shape[a + 1..].iter().product();
            let ni = ix.numel();
            let len = x.shape[a];
            if !matches!(ix.dtype, DType::I64 | DType::I32) {
                return Err(cx.err(n, "Gather indices must be int32 or int64"));
            }
            // An index out of range reads element 0 rather than memory outside the tensor
            // (the interpreter refuses such an index; a device kernel cannot stop).
            one(ncx.pointwise(&y, |i| {
                Ok((
                    format!(
                        "let r = {i} % {inner}u;\nlet j = ({i} / {inner}u) % {ni}u;\nlet o = {i} / {}u;\nvar k = {};\nif (k < 0) {{ k += {len}; }}\nif (k < 0 || k >= {len}) {{ k = 0; }}\n",
                        inner * ni,
                        ix.load("j")
                    ),
                    x.load(&format!("(o * {len}u + u32(k)) * {inner}u + r")),
                ))
            }))
        }
        Op::Conv { window, group } => conv(&ncx, &y, window, *group),
        Op::Expand => one(by_table(&ncx, &y)),
        Op::Def(d) => d.wgsl(&ncx),
        _ => Err(cx.err(n, "not supported by the wgpu target yet")),
    }
}

/// A table of `bytes` stored with the weights: its buffer and word offset there.
fn table(cx: &NodeCx, bytes: &[u8]) -> R<(String, usize)> {
    let mut tables = cx.cx.tables.borrow_mut();
    let at = super::place(cx.cx.tables_at, &mut tables, bytes).ok_or_else(|| cx.err("index table larger than a weights binding"))?;
    let (buf, local) = chunk_of(at, bytes.len());
    Ok((buf, local / 4))
}

/// A data-movement op whose other inputs are constants, as a table of source indices made
/// when burnc runs (the interpreter run on the indices of input 0) and stored with the
/// weights: `y[i] = x[table[i] - 1]`, 0 meaning the op's fill (zero).
fn by_table(cx: &NodeCx, y: &Tensor) -> R<Kernel> {
    use crate::interp::RtValue;
    let n = cx.n;
    let x = cx.input(0)?;
    let len = x.numel();
    if len >= u32::MAX as usize || y.numel() > 1 << 26 {
        return Err(cx.err("too large for an index table"));
    }
    let mut args = vec![Some(RtValue::Tensor(crate::tensor::Tensor::from_i64s(x.shape.clone(), (1..=len as i64).collect())))];
    for (i, inp) in n.inputs.iter().enumerate().skip(1) {
        args.push(match inp {
            None => None,
            Some(v) => Some(RtValue::Tensor(cx.cx.g.const_value(*v).ok_or_else(|| cx.err(format!("input #{i} must be a constant for the wgpu target")))?)),
        });
    }
    let frame = crate::interp::Frame::empty(cx.cx.g);
    let outs = crate::interp::eval_op(&n.op, args, n.outputs.len(), &frame).map_err(|e| cx.err(e))?;
    let Some(RtValue::Tensor(t)) = outs.into_iter().next() else { return Err(cx.err("no index table")) };
    let idx = t.to_i64_vec().ok_or_else(|| cx.err("index table is not integer"))?;
    if idx.len() != y.numel() {
        return Err(cx.err("index table does not match the output"));
    }
    let bytes: Vec<u8> = idx.iter().flat_map(|&i| (i.max(0) as u32).to_le_bytes()).collect();
    let (buf, word) = table(cx, &bytes)?;
    cx.pointwise(y, |i| Ok((format!("let t = {buf}[{word}u + {i}];\nvar v = {};\nif (t != 0u) {{ v = {}; }}\n", zero(y.dtype), x.load("t - 1u")), "v".into())))
}

/// Zero of `d`'s compute type.
fn zero(d: DType) -> &'static str {
    match compute_type(d) {
        Some("f32") => "0.0",
        Some("i32") => "0i",
        _ => "0u",
    }
}

/// A reduction over the axes marked in `red`: one invocation per output element walks its
/// reduced elements.
pub(crate) fn reduce(cx: &NodeCx, op: ReduceOp, x: &Tensor, y: &Tensor, red: &[bool]) -> R<Kernel> {
    let st = strides(&x.shape);
    // Output element i → base offset over the kept dims; reduced element r → offset over the
    // reduced dims.
    let kept: Vec<usize> = (0..x.shape.len()).filter(|&d| !red[d]).collect();
    let gone: Vec<usize> = (0..x.shape.len()).filter(|&d| red[d]).collect();
    let offset = |dims: &[usize], var: &str| -> String {
        let sh: Vec<usize> = dims.iter().map(|&d| x.shape[d]).collect();
        let ss = strides(&sh);
        let terms: Vec<String> = dims.iter().enumerate().filter(|(_, &d)| x.shape[d] != 1).map(|(k, &d)| format!("(({var} / {}u) % {}u) * {}u", ss[k], sh[k], st[d])).collect();
        if terms.is_empty() {
            "0u".into()
        } else {
            terms.join(" + ")
        }
    };
    let count: usize = gone.iter().map(|&d| x.shape[d]).product();
    let (init, step, fin) = match op {
        ReduceOp::Sum => ("0.0".to_string(), "acc += v;".to_string(), "acc".to_string()),
        ReduceOp::Mean => ("0.0".into(), "acc += v;".into(), format!("acc / {}", scalar::f32_lit(count as f32))),
        ReduceOp::Max => ("FIRST".into(), "if (v > acc || is_nan(v)) { acc = v; }".into(), "acc".into()),
        ReduceOp::Min => ("FIRST".into(), "if (v < acc || is_nan(v)) { acc = v; }".into(), "acc".into()),
        ReduceOp::Prod => ("1.0".into(), "acc *= v;".into(), "acc".into()),
        ReduceOp::L1 => ("0.0".into(), "acc += abs(v);".into(), "acc".into()),
        ReduceOp::L2 => ("0.0".into(), "acc += v * v;".into(), "sqrt(acc)".into()),
        ReduceOp::SumSquare => ("0.0".into(), "acc += v * v;".into(), "acc".into()),
        ReduceOp::LogSum => ("0.0".into(), "acc += v;".into(), "log(acc)".into()),
        ReduceOp::LogSumExp => ("0.0".into(), "acc += exp(v);".into(), "log(acc)".into()),
    };
    if count == 0 && init == "FIRST" {
        return Err(cx.err("Max/Min over an empty axis"));
    }
    cx.pointwise(y, |i| {
        let base = offset(&kept, i);
        let first = x.load(&format!("b + {}", offset(&gone, "0u")));
        Ok((format!("let b = {base};\nvar acc = {};\nfor (var r = 0u; r < {count}u; r++) {{ let v = {}; {step} }}\n", init.replace("FIRST", &first), x.load(&format!("b + {}", offset(&gone, "r")))), fin.clone()))
    })
}

/// The store of a product's element: its invocation owns pairs of adjacent columns
/// ([`super::gemm`]), so a 16-bit output whose rows are `cols` long, `cols` even, is written
/// half by half.
fn product_store(cx: &NodeCx, y: &Tensor, idx: &str, v: &str, cols: usize) -> R<String> {
    if !y.owns_words(cols) {
        return Err(cx.err(format!("a {} product output with rows of {cols} elements is not supported by the wgpu target yet", y.dtype)));
    }
    y.store_in_word(idx, v).ok_or_else(|| cx.err("output type"))
}

/// MatMul (batched, broadcasting) on the tiled product.
pub(crate) fn matmul(cx: &NodeCx) -> R<Vec<Kernel>> {
    let (a, b, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
    if !scalar::is_float(a.dtype) || !scalar::is_float(y.dtype) {
        return Err(cx.err(format!("matrix products on {} are not supported by the wgpu target yet", a.dtype)));
    }
    let MatMulDims { m, k, n, pa, pb, obat, batches } = matmul_dims(&a.shape, &b.shape);
    if y.numel() != batches * m * n {
        return Err(cx.err("output shape does not match the product's"));
    }
    let (ba, bb) = (batch_offset(&pa, &obat, m * k), batch_offset(&pb, &obat, k * n));
    let p = super::gemm::Product {
        m,
        n,
        k,
        batches,
        a: Load::Expr(a.load(&format!("{ba} + r * {k}u + kk"))),
        a_k_contiguous: true,
        b: Load::Expr(b.load(&format!("{bb} + kk * {n}u + c"))),
        prelude: String::new(),
        epilogue: product_store(cx, &y, &format!("z * {}u + r * {n}u + c", m * n), "acc", n)?,
    };
    Ok(vec![super::gemm::kernel(cx.name(), &p)])
}

/// Gemm: `alpha · op(A) · op(B) + beta · C`.
pub(crate) fn gemm(cx: &NodeCx, g: &crate::ops::matmul::Gemm) -> R<Vec<Kernel>> {
    let &crate::ops::matmul::Gemm { alpha, beta, trans_a: ta, trans_b: tb } = g;
    let (a, b, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
    if !scalar::is_float(a.dtype) || !scalar::is_float(y.dtype) {
        return Err(cx.err(format!("matrix products on {} are not supported by the wgpu target yet", a.dtype)));
    }
    let GemmDims { m, k, n, .. } = gemm_dims(&a.shape, &b.shape, ta, tb);
    let ai = if ta { format!("kk * {m}u + r") } else { format!("r * {k}u + kk") };
    let bi = if tb { format!("c * {k}u + kk") } else { format!("kk * {n}u + c") };
    let mut v = if alpha == 1.0 { "acc".to_string() } else { format!("{} * acc", scalar::f32_lit(alpha)) };
    if let Some(c) = cx.opt_input(2)? {
        let ci = broadcast_index(&c.shape, &[m, n], "(r * N + c)").replace('N', &format!("{n}u"));
        let term = c.load(&ci);
        v = if beta == 1.0 { format!("{v} + {term}") } else { format!("{v} + {} * {term}", scalar::f32_lit(beta)) };
    }
    let p = super::gemm::Product {
        m,
        n,
        k,
        batches: 1,
        a: Load::Expr(a.load(&ai)),
        a_k_contiguous: !ta,
        b: Load::Expr(b.load(&bi)),
        prelude: String::new(),
        epilogue: product_store(cx, &y, &format!("r * {n}u + c"), &v, n)?,
    };
    Ok(vec![super::gemm::kernel(cx.name(), &p)])
}

/// Convolution as an implicit GEMM: rows are one group's output channels, columns one
/// image's output positions, the depth its input channels × taps (read from the input
/// through the window, zero in the padding).
fn conv(cx: &NodeCx, y: &Tensor, window: &crate::ir::Window, group: usize) -> R<Vec<Kernel>> {
    let (x, w) = (cx.input(0)?, cx.input(1)?);
    if !scalar::is_float(x.dtype) || !scalar::is_float(y.dtype) {
        return Err(cx.err(format!("Conv on {} is not supported by the wgpu target yet", x.dtype)));
    }
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return Err(cx.err("convolution input and weights need the same rank, at least 3"));
    }
    let win = crate::ops::window::resolve(window, &w.shape[2..], &x.shape[2..]).map_err(|e| cx.err(e))?;
    let group = group.max(1);
    let (c_out, cg) = (w.shape[0], w.shape[1]);
    let mg = c_out / group;
    let [id, ih, iw] = win.input;
    let [od, oh, ow] = win.output;
    let [kd, kh, kw] = win.kernel;
    let (taps, pixels) = (kd * kh * kw, od * oh * ow);
    let k = cg * taps;
    let batch = x.shape[0];
    // z = image · groups + group.
    let prelude = format!("let img = z / {group}u;\nlet grp = z % {group}u;\n");
    let x_at = x.load(&format!("((img * {}u + grp * {cg}u + ci) * {}u) + u32((iz * {ih} + iy) * {iw} + ix)", x.shape[1], id * ih * iw));
    let tap_fn = format!(
        "let ci = kk / {taps}u; let t = kk % {taps}u;\n\
         let kz = i32(t / {}u); let ky = i32((t / {kw}u) % {kh}u); let kx = i32(t % {kw}u);\n\
         let ox = i32(c % {ow}u); let oy = i32((c / {ow}u) % {oh}u); let oz = i32(c / {}u);\n\
         let iz = {}; let iy = {}; let ix = {};\n\
         if (iz >= 0 && iz < {id} && iy >= 0 && iy < {ih} && ix >= 0 && ix < {iw}) {{ v = {x_at}; }}",
        kh * kw,
        oh * ow,
        tap_pos(&win, 0, "oz", "kz"),
        tap_pos(&win, 1, "oy", "ky"),
        tap_pos(&win, 2, "ox", "kx"),
    );
    let mut v = "acc".to_string();
    if let Some(bias) = cx.opt_input(2)? {
        v = format!("acc + {}", bias.load(&format!("grp * {mg}u + r")));
    }
    let p = super::gemm::Product {
        m: mg,
        n: pixels,
        k,
        batches: batch * group,
        a: Load::Expr(w.load(&format!("(grp * {mg}u + r) * {k}u + kk"))),
        a_k_contiguous: true,
        b: Load::Stmts(tap_fn),
        prelude,
        epilogue: product_store(cx, y, &format!("(img * {c_out}u + grp * {mg}u + r) * {pixels}u + c"), &v, pixels)?,
    };
    Ok(vec![super::gemm::kernel(cx.name(), &p)])
}
