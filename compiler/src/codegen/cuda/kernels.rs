//! One node's CUDA kernels. Every kernel takes the two base pointers of the module's device
//! buffers, `A` (arena: activations, then inputs) and `W` (weights), and nothing else: each
//! tensor's byte offset and every shape are literals, as in the CPU modules.
use super::scalar::{self, c_type};
use crate::codegen::gpu::scalar::program;
use crate::codegen::gpu::window::{out_coords, window_taps};
use crate::codegen::gpu::{self, gemm_dims, repeated_index, Dialect, GemmDims};
pub(super) use crate::codegen::index::strides;
use crate::codegen::index::{batch_offset, broadcast_index, matmul_dims, MatMulDims};
use crate::codegen::CodegenError;
use crate::ir::{DType, Graph, Node, NodeId, Op, ReduceOp, ValueId, ValueKind};
use crate::memory::MemoryPlan;
use crate::ops::matmul::{Gemm, MatMul};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// The language the shared kernel text ([`crate::codegen::gpu`]) is printed in.
const D: Dialect = Dialect::Cuda;

/// Threads per block of the elementwise-style kernels.
const BLOCK: u32 = 256;
/// Most blocks of a grid-stride kernel: enough to fill an H200 (132 SMs × 16), and the loop
/// covers the rest.
const MAX_BLOCKS: usize = 132 * 16;
/// The tile edge of the matrix-product kernel.
const TILE: usize = 16;

/// A kernel: its C source, name and launch shape.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub source: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory per block.
    pub shared: u32,
}

/// Where a node's operands live.
pub struct Cx<'a> {
    pub g: &'a Graph,
    pub plan: &'a MemoryPlan,
    /// Weights blob offsets.
    pub weights: &'a HashMap<ValueId, usize>,
    /// Arena offsets of the graph inputs (after the planned activations).
    pub inputs: &'a HashMap<ValueId, usize>,
    /// Elementwise nodes whose work a matrix product's epilogue does: product -> consumer.
    pub fused: &'a HashMap<NodeId, Vec<NodeId>>,
    /// 4-D values stored channels-last (see [`super::layout`]).
    pub nhwc: &'a HashSet<ValueId>,
    /// Nodes a fused attention kernel does ([`super::attention`]): no epilogue takes them.
    pub attention: &'a HashSet<NodeId>,
    /// Convolutions (by output) that first copy their NCHW input NHWC with its channels padded
    /// to this many ([`super::layout::thin_inputs`]; their weights are padded to match).
    pub thin: &'a HashMap<ValueId, usize>,
    /// The module is compiled for sm_90a: products may use `wgmma` ([`super::wgmma`]).
    pub wgmma: bool,
    /// f32 products run on tensor cores with TF32 inputs.
    pub tf32: bool,
}

type R<T> = Result<T, CodegenError>;

impl Cx<'_> {
    fn err(&self, n: &Node, reason: impl Into<String>) -> CodegenError {
        CodegenError::Unsupported { node: n.name.clone(), op: n.op.name(), reason: reason.into() }
    }

    fn ty(&self, n: &Node, v: ValueId) -> R<(DType, Vec<usize>)> {
        let t = self.g.tensor_type(v).ok_or_else(|| self.err(n, format!("`{}` is not a tensor", self.g.value(v).name)))?;
        let s = t.shape.as_ref().and_then(|s| s.as_fixed()).ok_or_else(|| self.err(n, format!("`{}` has no static shape", self.g.value(v).name)))?;
        Ok((t.dtype, s))
    }

    fn input(&self, n: &Node, i: usize) -> R<ValueId> {
        n.inputs.get(i).copied().flatten().ok_or_else(|| self.err(n, format!("missing input #{i}")))
    }

    fn output(&self, n: &Node, i: usize) -> R<ValueId> {
        n.outputs.get(i).copied().ok_or_else(|| self.err(n, format!("missing output #{i}")))
    }

    pub(super) fn c(&self, n: &Node, d: DType) -> R<&'static str> {
        c_type(d).ok_or_else(|| self.err(n, format!("{d} is not supported by the CUDA target yet")))
    }

    /// Whether value `v` starts 16 bytes aligned (both base pointers are).
    pub(super) fn aligned16(&self, v: ValueId) -> bool {
        let off = match &self.g.value(v).kind {
            ValueKind::Param(_) | ValueKind::Const(_) => self.weights.get(&v).copied(),
            ValueKind::Input => self.inputs.get(&v).copied(),
            ValueKind::Node(_) => self.plan.slots.get(&v).map(|s| s.offset),
            ValueKind::Outer => None,
        };
        off.is_some_and(|o| o % 16 == 0)
    }

    /// A C pointer expression to value `v`'s first element.
    pub(super) fn ptr(&self, n: &Node, v: ValueId) -> R<String> {
        let (d, _) = self.ty(n, v)?;
        let t = self.c(n, d)?;
        match &self.g.value(v).kind {
            ValueKind::Param(_) | ValueKind::Const(_) => {
                let off = self.weights.get(&v).ok_or_else(|| self.err(n, "weight missing from the layout"))?;
                Ok(format!("((const {t}*)(W + {off}))"))
            }
            ValueKind::Input => {
                let off = self.inputs.get(&v).ok_or_else(|| self.err(n, "input has no device slot"))?;
                Ok(format!("(({t}*)(A + {off}))"))
            }
            ValueKind::Node(_) => {
                let slot = self.plan.slots.get(&v).ok_or_else(|| self.err(n, format!("`{}` has no arena slot", self.g.value(v).name)))?;
                Ok(format!("(({t}*)(A + {}))", slot.offset))
            }
            ValueKind::Outer => Err(self.err(n, "values of an enclosing graph are not supported by the CUDA target")),
        }
    }
}

/// One node as an op definition sees it when writing its kernels ([`crate::ops::OpDef::cuda`]):
/// its operands' types and device pointers, and the kernel shapes every op shares.
pub type NodeCx<'a, 'g> = gpu::NodeCx<'a, Cx<'g>>;

impl<'a, 'g> NodeCx<'a, 'g> {
    fn of(cx: &'a Cx<'g>, n: &'a Node, name: &'a str) -> Self {
        gpu::NodeCx::new(cx, cx.plan, "CUDA", n, name)
    }

    pub fn input(&self, i: usize) -> R<ValueId> {
        self.cx.input(self.n, i)
    }

    pub fn opt_input(&self, i: usize) -> Option<ValueId> {
        self.n.inputs.get(i).copied().flatten()
    }

    pub fn output(&self, k: usize) -> R<ValueId> {
        self.cx.output(self.n, k)
    }

    /// The node's outputs, read or not.
    pub fn outputs(&self) -> &[ValueId] {
        &self.n.outputs
    }

    /// Output 0 of a view ([`crate::ops::OpDef::is_view`]): no kernel where the memory plan
    /// made it share input 0's slot, else a copy.
    pub fn view_copy(&self) -> R<Option<Kernel>> {
        let out = self.output(0)?;
        if self.output_is_alias() {
            return Ok(None);
        }
        let n: usize = self.ty(out)?.1.iter().product();
        Ok(Some(self.pointwise(n, &format!("{}[i] = {}[i];", self.ptr(out)?, self.ptr(self.input(0)?)?))))
    }

    /// Output `k` when something reads it (it has an arena slot).
    pub fn used_output(&self, k: usize) -> Option<ValueId> {
        self.used(k)
    }

    /// Dtype and static shape of `v`.
    pub fn ty(&self, v: ValueId) -> R<(DType, Vec<usize>)> {
        self.cx.ty(self.n, v)
    }

    /// A typed C pointer to `v`'s first element.
    pub fn ptr(&self, v: ValueId) -> R<String> {
        self.cx.ptr(self.n, v)
    }

    /// The C type `d` is stored as.
    pub fn c(&self, d: DType) -> R<&'static str> {
        self.cx.c(self.n, d)
    }

    /// The C type arithmetic on `d` runs in (`float` for the 16-bit floats).
    pub fn acc(&self, d: DType) -> R<&'static str> {
        scalar::compute_type(d).ok_or_else(|| self.err(format!("{d} is not supported by the CUDA target yet")))
    }

    /// A kernel running `body` once per flat index `i < n`.
    pub fn pointwise(&self, n: usize, body: &str) -> Kernel {
        pointwise(self.name, n, n, "", body)
    }

    /// [`Self::pointwise`] over `n` items (rows, say) of tensors of `elems` elements, which
    /// decide the index type.
    pub fn pointwise_over(&self, n: usize, elems: usize, body: &str) -> Kernel {
        pointwise(self.name, n, elems, "", body)
    }

    /// [`Self::pointwise`] as a later kernel of the node, its name the first's and `suffix`.
    pub fn pointwise_as(&self, suffix: &str, n: usize, body: &str) -> Kernel {
        pointwise(&format!("{}{suffix}", self.name), n, n, "", body)
    }

    /// Whether `v` starts 16 bytes aligned (for vector loads and stores).
    pub fn aligned16(&self, v: ValueId) -> bool {
        self.cx.aligned16(v)
    }

    /// Whether `v` is stored channels-last ([`super::layout`]).
    pub fn is_nhwc(&self, v: ValueId) -> bool {
        self.cx.nhwc.contains(&v)
    }

    /// A kernel running `body` once per row `row < rows`, one warp per row (`lane` is the
    /// thread's place in it): for reductions along contiguous rows.
    pub fn warp_rows(&self, rows: usize, body: &str) -> Kernel {
        warp_rows(self.name, rows, body)
    }
}

/// Warps per block of the row kernels.
const ROW_WARPS: usize = 8;

fn warp_rows(name: &str, rows: usize, body: &str) -> Kernel {
    let source = format!(
        "extern \"C\" __global__ void {name}(unsigned char* A, const unsigned char* __restrict__ W) {{\n\
         int row = blockIdx.x * {ROW_WARPS} + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n\
         if (row >= {rows}) return;\n{body}\n}}\n"
    );
    Kernel { name: name.to_string(), source, grid: [rows.div_ceil(ROW_WARPS).max(1) as u32, 1, 1], block: [(ROW_WARPS * 32) as u32, 1, 1], shared: 0 }
}

/// C statements leaving in `v` (a value in every lane of a warp) the warp's sum, or its
/// maximum, in every lane.
pub fn warp_reduce(v: &str, max: bool) -> String {
    let step = if max { format!("{{ auto w = __shfl_xor_sync(0xffffffffu, {v}, o); if (w > {v}) {v} = w; }}") } else { format!("{v} += __shfl_xor_sync(0xffffffffu, {v}, o);") };
    format!("for (int o = 16; o > 0; o >>= 1) {step}\n")
}

/// The index type of a kernel whose tensors have at most `elems` elements.
pub(super) fn ix(elems: usize) -> &'static str {
    if elems < i32::MAX as usize {
        "int"
    } else {
        "long long"
    }
}

fn blocks(n: usize, per: usize) -> u32 {
    n.div_ceil(per).clamp(1, MAX_BLOCKS) as u32
}

/// A kernel running `body` once per flat index `i < n` (a grid-stride loop), after `decls`.
pub(super) fn pointwise(name: &str, n: usize, elems: usize, decls: &str, body: &str) -> Kernel {
    let t = ix(elems.max(n));
    let source = format!(
        "extern \"C\" __global__ void {name}(unsigned char* A, const unsigned char* __restrict__ W) {{\n{decls}\
         for ({t} i = ({t})blockIdx.x * blockDim.x + threadIdx.x; i < ({t}){n}; i += ({t})gridDim.x * blockDim.x) {{\n{body}\n}}\n}}\n"
    );
    Kernel { name: name.to_string(), source, grid: [blocks(n, BLOCK as usize), 1, 1], block: [BLOCK, 1, 1], shared: 0 }
}

/// The kernels of node `id`, named `name…`; empty when the node needs none (a view whose output
/// shares its input's slot).
pub fn node(cx: &Cx, id: NodeId, name: &str) -> R<Vec<Kernel>> {
    let n = cx.g.node(id);
    if n.outputs.is_empty() {
        return Ok(vec![]);
    }
    let out = cx.output(n, 0)?;
    let (od, oshape) = cx.ty(n, out)?;
    let on: usize = oshape.iter().product();
    if on == 0 {
        return Ok(vec![]);
    }
    let y = cx.ptr(n, out)?;
    let ot = cx.c(n, od)?;
    // Arithmetic runs in `at` (f32 for the 16-bit floats).
    let at = scalar::compute_type(od).unwrap_or(ot);
    let one = |body: String, decls: String| Ok(vec![pointwise(name, on, on, &decls, &body)]);
    match &n.op {
        Op::Reshape { .. } | Op::Unary(crate::ir::UnaryOp::Identity) => Ok(NodeCx::of(cx, n, name).view_copy()?.into_iter().collect()),
        Op::ConstantOfShape { value } => {
            let v = value.to_f64_vec().first().copied().unwrap_or(0.0);
            let lit = match od {
                DType::F32 | DType::BF16 | DType::F16 => scalar::f32_lit(v as f32),
                DType::F64 if v.is_finite() => format!("{v:e}"),
                DType::F64 => format!("(double){}", scalar::f32_lit(v as f32)),
                _ => match value.to_i64_vec().and_then(|v| v.first().copied()) {
                    Some(i) => format!("({ot}){i}LL"),
                    None => return Err(cx.err(n, "fill value is not an integer")),
                },
            };
            one(format!("{y}[i] = {lit};"), String::new())
        }
        Op::Unary(u) => {
            let xv = cx.input(n, 0)?;
            let (xd, _) = cx.ty(n, xv)?;
            let x = cx.ptr(n, xv)?;
            let e = scalar::unary(*u, &format!("{x}[i]"), xd).ok_or_else(|| cx.err(n, format!("{u:?} on {xd} is not supported by the CUDA target")))?;
            one(format!("{y}[i] = {e};"), String::new())
        }
        Op::Binary(b) => {
            let (av, bv) = (cx.input(n, 0)?, cx.input(n, 1)?);
            let ((ad, ashape), (_, bshape)) = (cx.ty(n, av)?, cx.ty(n, bv)?);
            let (a, bp) = (cx.ptr(n, av)?, cx.ptr(n, bv)?);
            let ai = broadcast_index(&ashape, &oshape, "i");
            let bi = broadcast_index(&bshape, &oshape, "i");
            let e = scalar::binary(*b, &format!("{a}[{ai}]"), &format!("{bp}[{bi}]"), ad).ok_or_else(|| cx.err(n, format!("{b:?} on {ad} is not supported by the CUDA target")))?;
            if scalar::binary_out(*b, ad) != od {
                return Err(cx.err(n, "output type does not match the op's"));
            }
            one(format!("{y}[i] = {e};"), String::new())
        }
        Op::Elementwise(p) => {
            let mut ins = Vec::new();
            for (k, v) in n.inputs.iter().enumerate() {
                let v = v.ok_or_else(|| cx.err(n, format!("missing input #{k}")))?;
                let (_, s) = cx.ty(n, v)?;
                let at = repeated_index(D, "i", s.iter().product(), on);
                let (vd, _) = cx.ty(n, v)?;
                let widen = if scalar::is_half(vd) { "(float)" } else { "" };
                ins.push(format!("{widen}{}[{at}]", cx.ptr(n, v)?));
            }
            let (body, last) = program(D, p, &ins).ok_or_else(|| cx.err(n, "elementwise program has a step the CUDA target cannot print"))?;
            one(format!("{body}{y}[i] = {last};"), String::new())
        }
        Op::Concat { axis } => {
            let axis = crate::ir::axis::norm_axis(*axis, oshape.len()).map_err(|e| cx.err(n, e))?;
            let inner: usize = oshape[axis + 1..].iter().product();
            let len = oshape[axis];
            let mut body = format!("int c = (i / {inner}) % {len}; long long o = i / {};\n", inner * len);
            let mut start = 0;
            for v in n.inputs.iter().flatten() {
                let (_, s) = cx.ty(n, *v)?;
                let k = s[axis];
                if k == 0 {
                    continue;
                }
                let _ = writeln!(body, "if (c < {}) {{ {y}[i] = {}[(o * {k} + (c - {start})) * {inner} + i % {inner}]; return_continue; }}", start + k, cx.ptr(n, *v)?);
                start += k;
            }
            // `continue` inside the grid-stride loop.
            one(body.replace("return_continue", "continue"), String::new())
        }
        _ if is_product(&n.op) && product(cx, n)?.is_some() => {
            let (mut p, index, pre) = product(cx, n)?.ok_or_else(|| cx.err(n, "no product"))?;
            let chain = cx.fused.get(&id).map(|c| c.as_slice()).unwrap_or(&[]);
            (p.epilogue, p.store) = epilogue(cx, n, out, chain, &index, &pre)?;
            if p.contiguous {
                p.vector = vector_epilogue(cx, n, out, chain, &index, &pre)?;
            }
            let packed = packed_input(cx, n, out, name)?;
            let skip = packed.as_ref().map_or(0, |(_, bytes, _)| *bytes);
            let scratch = cx.plan.scratch.get(&scratch_node(id, cx.fused)).map(|s| format!("((float*)(A + {}))", s.offset + skip));
            let mut ks: Vec<Kernel> = packed.map(|(_, _, k)| k).into_iter().collect();
            ks.extend(super::gemm::kernels(name, &p, scratch.as_deref()));
            Ok(ks)
        }
        Op::Conv { window, group } => {
            if !matches!(od, DType::F32 | DType::F64 | DType::BF16 | DType::F16) {
                return Err(cx.err(n, format!("Conv on {od} is not supported by the CUDA target")));
            }
            let (xv, wv) = (cx.input(n, 0)?, cx.input(n, 1)?);
            let ((_, xs), (_, ws)) = (cx.ty(n, xv)?, cx.ty(n, wv)?);
            if xs.len() < 3 || ws.len() != xs.len() {
                return Err(cx.err(n, "convolution input and weights need the same rank, at least 3"));
            }
            let win = crate::ops::window::resolve(window, &ws[2..], &xs[2..]).map_err(|e| cx.err(n, e))?;
            let (c_out, cg) = (ws[0], ws[1]);
            let mg = c_out / group.max(&1);
            let bias = match n.inputs.get(2).copied().flatten() {
                Some(b) => format!("{}[m]", cx.ptr(n, b)?),
                None => "0".into(),
            };
            let [id_, ih, iw] = win.input;
            let [od_, oh, ow] = win.output;
            let [kd, kh, kw] = win.kernel;
            let body = format!(
                "{coords} int m = (i / {}) % {c_out}; int b = i / {};\n\
                 int g = m / {mg};\n\
                 {at} acc = {bias};\n\
                 const {ot}* xb = {x} + ((long long)b * {} + (long long)g * {cg}) * {};\n\
                 const {ot}* wm = {w} + (long long)m * {};\n\
                 for (int c = 0; c < {cg}; ++c) {{\n{}\n}}\n\
                 {y}[i] = acc;",
                od_ * oh * ow,
                c_out * od_ * oh * ow,
                xs[1],
                id_ * ih * iw,
                cg * kd * kh * kw,
                window_taps(D, &win, &format!("acc += xb[(c * {id_} + z) * {} + yy * {iw} + xx] * wm[((c * {kd} + kz) * {kh} + ky) * {kw} + kx];", ih * iw)),
                coords = out_coords(D, &win, "i"),
                x = cx.ptr(n, xv)?,
                w = cx.ptr(n, wv)?,
            );
            one(body, String::new())
        }
        Op::Gather { axis } => {
            let (xv, iv) = (cx.input(n, 0)?, cx.input(n, 1)?);
            let ((_, xs), (idd, is)) = (cx.ty(n, xv)?, cx.ty(n, iv)?);
            let a = crate::ir::axis::norm_axis(*axis, xs.len()).map_err(|e| cx.err(n, e))?;
            let inner: usize = xs[a + 1..].iter().product();
            let ni: usize = is.iter().product();
            let len = xs[a];
            if !matches!(idd, DType::I64 | DType::I32) {
                return Err(cx.err(n, "Gather indices must be int32 or int64"));
            }
            // An index out of range reads element 0 rather than memory outside the tensor
            // (the interpreter refuses such an index; a device kernel cannot stop).
            let body = format!(
                "long long r = i % {inner}; long long j = (i / {inner}) % {ni}; long long o = i / {};\n\
                 long long k = (long long){ip}[j]; if (k < 0) k += {len}; if (k < 0 || k >= {len}) k = 0;\n\
                 {y}[i] = {x}[(o * {len} + k) * {inner} + r];",
                inner * ni,
                ip = cx.ptr(n, iv)?,
                x = cx.ptr(n, xv)?
            );
            one(body, String::new())
        }
        Op::Def(d) => d.cuda(&NodeCx::of(cx, n, name)),
        _ => Err(cx.err(n, "not supported by the CUDA target yet")),
    }
}

/// Node `n` as a tensor-core product when it is one (16-bit MatMul, Gemm, or a 2-D
/// convolution with one group), with the C expression of an output element's flat index and
/// of its value before any fused consumer (`row`, `col`, `z`, `acc` in scope). The epilogue
/// is left empty.
fn product(cx: &Cx, n: &Node) -> R<Option<(super::gemm::Product, String, String)>> {
    use super::gemm::{Im2col, Operand, Product, VEC};
    let (Some(Some(av)), Some(Some(bv)), Some(&out)) = (n.inputs.first(), n.inputs.get(1), n.outputs.first()) else { return Ok(None) };
    let ((ad, ash), (bd, bsh), (od, osh)) = (cx.ty(n, *av)?, cx.ty(n, *bv)?, cx.ty(n, out)?);
    let mma = match od {
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        DType::F32 if cx.tf32 => "tf32",
        _ => return Ok(None),
    };
    if ad != od || bd != od {
        return Ok(None);
    }
    let (a, b) = (cx.ptr(n, *av)?, cx.ptr(n, *bv)?);
    let bias = |i: usize| -> R<Option<(ValueId, String)>> {
        match n.inputs.get(i).copied().flatten() {
            Some(v) => Ok(Some((v, cx.ptr(n, v)?))),
            None => Ok(None),
        }
    };
    let strided = |ptr: &str, batch: String, rs: usize, cs: usize| Operand::Strided { ptr: ptr.to_string(), batch, rs, cs };
    // The index type of the output's elements (the epilogue's `o`).
    let t = ix(osh.iter().product());
    let p = match &n.op {
        op if op.get::<MatMul>().is_some() => {
            if ash.len() < 2 || bsh.len() < 2 {
                return Ok(None);
            }
            let MatMulDims { m, k, n: nn, pa, pb, obat, batches } = matmul_dims(&ash, &bsh);
            if batches > 65535 || osh.iter().product::<usize>() != batches * m * nn {
                return Ok(None);
            }
            let bi = |p: &[usize], mat: usize| batch_offset(p, &obat, mat);
            // One weight matrix for every batch: the batches are rows of one product.
            let (m, batches, batch_a) = if pb.iter().all(|&d| d == 1) && pa == obat { (batches * m, 1, "0".to_string()) } else { (m, batches, bi(&pa, m * k)) };
            let index = format!("z * {} + ({t})row * {nn} + col", m * nn);
            (Product { m, n: nn, k, batches, a: strided(&a, batch_a, k, 1), b: strided(&b, bi(&pb, k * nn), nn, 1), mma, epilogue: String::new(), store: String::new(), contiguous: nn % VEC == 0, vector: None, wgmma: cx.wgmma }, index, "acc".to_string())
        }
        // Another op definition than MatMul: a Gemm, or no product.
        Op::Def(d) => {
            let Some(&Gemm { alpha, beta, trans_a, trans_b }) = d.get::<Gemm>() else { return Ok(None) };
            if ash.len() != 2 || bsh.len() != 2 {
                return Ok(None);
            }
            let GemmDims { m, k, n: nn, sa, sb } = gemm_dims(&ash, &bsh, trans_a, trans_b);
            let mut pre = format!("{} * acc", scalar::f32_lit(alpha));
            if let Some((cv, cp)) = bias(2)? {
                let (_, cs) = cx.ty(n, cv)?;
                let ci = broadcast_index(&cs, &[m, nn], &format!("(({t})row * {nn} + col)"));
                pre = format!("{pre} + {} * (float){cp}[{ci}]", scalar::f32_lit(beta));
            }
            let index = format!("({t})row * {nn} + col");
            (Product { m, n: nn, k, batches: 1, a: strided(&a, "0".into(), sa.0, sa.1), b: strided(&b, "0".into(), sb.0, sb.1), mma, epilogue: String::new(), store: String::new(), contiguous: nn % VEC == 0, vector: None, wgmma: cx.wgmma }, index, pre)
        }
        Op::Conv { window, group } => {
            if *group != 1 || ash.len() < 3 || bsh.len() != ash.len() {
                return Ok(None);
            }
            let win = crate::ops::window::resolve(window, &bsh[2..], &ash[2..]).map_err(|e| cx.err(n, e))?;
            if win.input[0] != 1 || win.kernel[0] != 1 || win.output[0] != 1 {
                return Ok(None);
            }
            let [_, oh, ow] = win.output;
            let hw = oh * ow;
            let (c_out, k) = (bsh[0], bsh[1..].iter().product::<usize>());
            // A thin input is read from its NHWC copy with padded channels.
            let packed = packed_input(cx, n, out, "")?;
            let im = Im2col {
                x: packed.as_ref().map_or(a, |(x, _, _)| x.clone()),
                c: bsh[1],
                h: win.input[1],
                w: win.input[2],
                oh,
                ow,
                kh: win.kernel[1],
                kw: win.kernel[2],
                stride: [win.strides[1], win.strides[2]],
                dilation: [win.dilations[1], win.dilations[2]],
                pad: [win.pads_begin[1], win.pads_begin[2]],
                nhwc: cx.nhwc.contains(av) || packed.is_some(),
            };
            // Weights are [C_out][C_in·KH·KW]: A, rows contiguous in k.
            let w = b;
            let pre = match bias(2)? {
                Some((_, bp)) => format!("acc + (float){bp}[row]"),
                None => "acc".into(),
            };
            if cx.nhwc.contains(&out) {
                // Channels-last output: rows are pixels, columns output channels, and the
                // weights ([C_out][k]) are B read along k.
                let pre = match bias(2)? {
                    Some((_, bp)) => format!("acc + (float){bp}[col]"),
                    None => "acc".into(),
                };
                let index = format!("({t})row * {c_out} + col");
                let p = Product { m: ash[0] * hw, n: c_out, k, batches: 1, a: Operand::Im2col(im), b: strided(&w, "0".into(), 1, k), mma, epilogue: String::new(), store: String::new(), contiguous: c_out % VEC == 0, vector: None, wgmma: cx.wgmma };
                return Ok(Some((p, index, pre)));
            }
            let index = format!("({t})(col / {hw}) * {} + ({t})row * {hw} + col % {hw}", c_out * hw);
            (Product { m: c_out, n: ash[0] * hw, k, batches: 1, a: strided(&w, "0".into(), k, 1), b: Operand::Im2col(im), mma, epilogue: String::new(), store: String::new(), contiguous: hw % VEC == 0, vector: None, wgmma: cx.wgmma }, index, pre)
        }
        _ => return Ok(None),
    };
    Ok(Some(p))
}

/// The epilogue of product `n` whose output is `out`, as the code that computes an element and
/// the statement that stores it: `v` is the element's value (`pre`), each fused consumer in
/// `chain` runs on it in turn, and the result goes to flat index `o` (`index`) of the last
/// one's output, or of `out`.
fn epilogue(cx: &Cx, n: &Node, out: ValueId, chain: &[NodeId], index: &str, pre: &str) -> R<(String, String)> {
    let (body, store) = chain_body(cx, n, out, chain, index, pre, &mut |_, _| Ok(None))?;
    Ok((body, format!("{store}[o] = v;")))
}

/// The epilogue of [`epilogue`] over [`super::gemm::VEC`] neighbouring outputs (see
/// [`super::gemm::VectorEpilogue`]): operands as large as the output are read 16 bytes at a
/// time, the result stored 16 bytes at once. None when the output or such an operand is not
/// 16-byte aligned or not 16-bit.
fn vector_epilogue(cx: &Cx, n: &Node, out: ValueId, chain: &[NodeId], index: &str, pre: &str) -> R<Option<super::gemm::VectorEpilogue>> {
    use super::gemm::VEC;
    let t = ix(cx.ty(n, out)?.1.iter().product());
    let mut loads = format!("const {t} o0 = {index};\n");
    let (mut refused, mut k) = (false, 0);
    let mut read = |x: ValueId, c: &Node| -> R<Option<String>> {
        let (d, _) = cx.ty(c, x)?;
        if d.size() != 2 || !cx.aligned16(x) {
            refused = true;
            return Ok(None);
        }
        let ty = cx.c(c, d)?;
        let _ = writeln!(loads, "__align__(16) {ty} in{k}[{VEC}]; *(uint4*)in{k} = *(const uint4*)&{}[o0];", cx.ptr(c, x)?);
        k += 1;
        Ok(Some(format!("(float)in{}[u]", k - 1)))
    };
    let (body, store) = chain_body(cx, n, out, chain, index, pre, &mut read)?;
    let last = chain.last().map(|&c| cx.output(cx.g.node(c), 0)).transpose()?.unwrap_or(out);
    let (d, _) = cx.ty(n, last)?;
    if refused || d.size() != 2 || !cx.aligned16(last) {
        return Ok(None);
    }
    let ty = cx.c(n, d)?;
    Ok(Some(super::gemm::VectorEpilogue {
        loads: format!("{loads}__align__(16) {ty} outv[{VEC}];"),
        body,
        element: "outv[u] = v;".into(),
        flush: format!("*(uint4*)&{store}[o0] = *(const uint4*)outv;"),
    }))
}

/// The code computing `o` and the value `v` of one output of product `n` through its fused
/// `chain`, and the pointer the last node stores to. `same_shape` reads an operand as large
/// as the chain's output (index `o`) when it can do better than a plain load (None: a load).
#[allow(clippy::type_complexity)]
pub(super) fn chain_body(cx: &Cx, n: &Node, out: ValueId, chain: &[NodeId], index: &str, pre: &str, same_shape: &mut dyn FnMut(ValueId, &Node) -> R<Option<String>>) -> R<(String, String)> {
    let mut s = format!("const {} o = {index};\nfloat v = {pre};\n", ix(cx.ty(n, out)?.1.iter().product()));
    let (mut cur, mut store) = (out, cx.ptr(n, out)?);
    for &cid in chain {
        let c = cx.g.node(cid);
        let cout = cx.output(c, 0)?;
        let (_, cshape) = cx.ty(c, cout)?;
        let on: usize = cshape.iter().product();
        // An operand of the consumer as an f32 expression at output index `o`.
        let mut operand = |x: ValueId, bcast: bool| -> R<String> {
            if x == cur {
                return Ok("v".into());
            }
            let (d, sh) = cx.ty(c, x)?;
            let len: usize = sh.iter().product();
            if sh == cshape {
                if let Some(e) = same_shape(x, c)? {
                    return Ok(e);
                }
            }
            let at = if bcast { broadcast_index(&sh, &cshape, "o") } else { repeated_index(D, "o", len, on) };
            let widen = if scalar::is_half(d) { "(float)" } else { "" };
            Ok(format!("{widen}{}[{at}]", cx.ptr(c, x)?))
        };
        let r = match &c.op {
            Op::Unary(u) => scalar::unary(*u, "v", DType::F32).ok_or_else(|| cx.err(c, format!("{u:?} cannot be fused")))?,
            Op::Binary(b) => {
                let (x, y) = (operand(cx.input(c, 0)?, true)?, operand(cx.input(c, 1)?, true)?);
                scalar::binary(*b, &x, &y, DType::F32).ok_or_else(|| cx.err(c, format!("{b:?} cannot be fused")))?
            }
            Op::Elementwise(p) => {
                let ins: Vec<String> = c.inputs.iter().enumerate().map(|(k, x)| operand(x.ok_or_else(|| cx.err(c, format!("missing input #{k}")))?, false)).collect::<R<_>>()?;
                let (body, last) = program(D, p, &ins).ok_or_else(|| cx.err(c, "elementwise program has a step the CUDA target cannot print"))?;
                // Each program's temporaries in their own scope.
                s.push_str("{\n");
                s.push_str(&body);
                let _ = writeln!(s, "v = {last};\n}}");
                cur = cout;
                store = cx.ptr(c, cout)?;
                continue;
            }
            _ => return Err(cx.err(c, "only elementwise nodes fuse into a product")),
        };
        let _ = writeln!(s, "v = {r};");
        cur = cout;
        store = cx.ptr(c, cout)?;
    }
    Ok((s, store))
}

/// The elementwise nodes a tensor-core product's epilogue can do (product -> consumers, in
/// order): each consumer is the next node run and the only reader of the value before it,
/// and, with `check_slots`, no consumer's output is stored over anything the chain still
/// reads (planning with [`chain_reads`] keeps those live).
pub fn fusions(cx: &Cx, check_slots: bool) -> R<HashMap<NodeId, Vec<NodeId>>> {
    let g = cx.g;
    let order = &cx.plan.order;
    let mut readers: HashMap<ValueId, usize> = HashMap::new();
    for &id in order {
        for v in g.node(id).inputs.iter().flatten() {
            *readers.entry(*v).or_default() += 1;
        }
    }
    let overlaps = |a: ValueId, b: ValueId| match (cx.plan.slots.get(&a), cx.plan.slots.get(&b)) {
        (Some(x), Some(y)) => x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes,
        _ => false,
    };
    let numel = |s: &[usize]| s.iter().product::<usize>();
    let mut out = HashMap::new();
    for (i, &pid) in order.iter().enumerate() {
        let p = g.node(pid);
        if p.outputs.len() != 1 || !is_product(&p.op) || cx.attention.contains(&pid) || product(cx, p)?.is_none() {
            continue;
        }
        let (vd, vs) = cx.ty(p, p.outputs[0])?;
        // Everything the chain reads so far, which no later store may overwrite.
        let mut reads: Vec<ValueId> = p.inputs.iter().flatten().copied().collect();
        let (mut cur, mut chain) = (p.outputs[0], Vec::new());
        for &cid in &order[i + 1..] {
            let c = g.node(cid);
            if !matches!(c.op, Op::Unary(_) | Op::Binary(_) | Op::Elementwise(_)) || c.outputs.len() != 1 || cx.attention.contains(&cid) {
                break;
            }
            let cv = c.outputs[0];
            let uses = c.inputs.iter().flatten().filter(|&&x| x == cur).count();
            if uses == 0 || readers.get(&cur) != Some(&uses) || g.outputs.contains(&cur) || cx.plan.aliases.contains_key(&cv) {
                break;
            }
            let (cd, cs) = cx.ty(c, cv)?;
            if cd != vd || numel(&cs) != numel(&vs) {
                break;
            }
            reads.extend(c.inputs.iter().flatten().copied().filter(|&x| x != cur));
            if check_slots && reads.iter().any(|&x| overlaps(x, cv)) {
                break;
            }
            chain.push(cid);
            cur = cv;
        }
        if !chain.is_empty() {
            out.insert(pid, chain);
        }
    }
    Ok(out)
}

/// For a convolution writing `out` whose thin NCHW input is first copied NHWC with padded
/// channels (see [`Cx::thin`]): the copy's pointer (at the start of the node's scratch), its
/// bytes (rounded up to keep what follows aligned) and the kernel that makes it, one pixel per
/// thread and one vector store.
fn packed_input(cx: &Cx, n: &Node, out: ValueId, name: &str) -> R<Option<(String, usize, Kernel)>> {
    let Some(&cp) = cx.thin.get(&out) else { return Ok(None) };
    let xv = cx.input(n, 0)?;
    let (_, xs) = cx.ty(n, xv)?;
    let [batch, c, h, w] = xs[..] else { return Err(cx.err(n, "a packed convolution input must be 4-D")) };
    let pixels = batch * h * w;
    let bytes = crate::memory::align_up(pixels.saturating_mul(cp).saturating_mul(2));
    let ValueKind::Node(id) = cx.g.value(out).kind else { return Ok(None) };
    // The first plan only sizes the scratch: no offset yet.
    let at = cx.plan.scratch.get(&scratch_node(id, cx.fused)).map_or(0, |s| s.offset);
    let t = ix(pixels.saturating_mul(cp).max(batch * c * h * w));
    let hw = h * w;
    let vec = if cp == 4 { "uint2" } else { "uint4" };
    // Channel pairs packed into 32-bit words, low half first.
    let words: Vec<String> = (0..cp / 2)
        .map(|j| {
            let half = |k: usize| if k < c { format!("(unsigned)x[src + {}]", k * hw) } else { "0u".into() };
            format!("{} | ({} << 16)", half(2 * j), half(2 * j + 1))
        })
        .collect();
    let decls = format!("const unsigned short* x = (const unsigned short*){};\n{vec}* packed = ({vec}*)(A + {at});\n", cx.ptr(n, xv)?);
    let body = format!(
        "// Pixel i of image b: its {c} channels and {zeros} zeros, one {bytes}-byte store.\n\
         const {t} b = i / {hw}, src = b * {chw} + i % {hw};\n\
         packed[i] = make_{vec}({words});",
        zeros = cp - c,
        bytes = cp * 2,
        chw = c * hw,
        words = words.join(", "),
    );
    let kernel = pointwise(&format!("{name}_pack"), pixels, pixels * cp, &decls, &body);
    Ok(Some((format!("((const unsigned short*)(A + {at}))"), bytes, kernel)))
}

/// The node whose step holds product `id`'s scratch: the last of its fused chain, where
/// everything the chain reads and its output are live, so the partial sums overlap neither.
fn scratch_node(id: NodeId, fused: &HashMap<NodeId, Vec<NodeId>>) -> NodeId {
    fused.get(&id).and_then(|c| c.last().copied()).unwrap_or(id)
}

/// The f32 scratch each product split over k needs, at [`scratch_node`] of `fused`, for
/// [`crate::memory::PlanOptions::scratch`].
pub fn split_scratch(cx: &Cx, fused: &HashMap<NodeId, Vec<NodeId>>) -> R<HashMap<NodeId, usize>> {
    let mut out = HashMap::new();
    for &id in &cx.plan.order {
        if cx.attention.contains(&id) {
            continue;
        }
        let n = cx.g.node(id);
        if let Some((p, _, _)) = product(cx, n)? {
            let packed = match n.outputs.first() {
                Some(&y) => packed_input(cx, n, y, "")?.map_or(0, |(_, bytes, _)| bytes),
                None => 0,
            };
            let bytes = packed + super::gemm::scratch_bytes(&p);
            if bytes > 0 {
                out.insert(scratch_node(id, fused), bytes);
            }
        }
    }
    Ok(out)
}

/// What each fused consumer must keep live (its chain's product's inputs and the earlier
/// consumers' inputs), for [`crate::memory::PlanOptions::also_reads`].
pub fn chain_reads(g: &Graph, fused: &HashMap<NodeId, Vec<NodeId>>) -> HashMap<NodeId, Vec<ValueId>> {
    let mut out = HashMap::new();
    for (&p, chain) in fused {
        let mut reads: Vec<ValueId> = g.node(p).inputs.iter().flatten().copied().collect();
        for &c in chain {
            out.insert(c, reads.clone());
            reads.extend(g.node(c).inputs.iter().flatten().copied());
        }
    }
    out
}

/// Whether node op `op` is a matrix product the tensor-core path may take (see [`product`]).
fn is_product(op: &Op) -> bool {
    matches!(op, Op::Conv { .. }) || op.get::<MatMul>().is_some() || op.get::<Gemm>().is_some()
}

/// MatMul (batched, broadcasting; `gemm` `None`) or Gemm as one tiled kernel: a block computes
/// a TILE×TILE tile of one batch's output, staging TILE-wide slices of both operands in shared
/// memory.
pub(crate) fn tiled_product(ncx: &NodeCx, gemm: Option<&Gemm>) -> R<Vec<Kernel>> {
    let (cx, n, name) = (ncx.cx, ncx.n, ncx.name);
    let (av, bv) = (cx.input(n, 0)?, cx.input(n, 1)?);
    let ((ad, ash), (_, bsh)) = (cx.ty(n, av)?, cx.ty(n, bv)?);
    let out = cx.output(n, 0)?;
    let (od, osh) = cx.ty(n, out)?;
    if !matches!(ad, DType::F32 | DType::F64 | DType::BF16 | DType::F16) || ad != od {
        return Err(cx.err(n, format!("matrix products on {ad} are not supported by the CUDA target yet")));
    }
    let t = cx.c(n, od)?;
    let at = scalar::compute_type(od).unwrap_or(t);
    // Operand views: (rows, cols, row stride, col stride) of one batch, plus batch offsets.
    let (m, k, nn, sa, sb, batch_a, batch_b, batches, epilogue) = match gemm {
        Some(&Gemm { alpha, beta, trans_a, trans_b }) => {
            let GemmDims { m, k, n: nn, sa, sb } = gemm_dims(&ash, &bsh, trans_a, trans_b);
            let mut ep = format!("({at}){} * acc", scalar::f32_lit(alpha));
            if let Some(cv) = n.inputs.get(2).copied().flatten() {
                let (_, cs) = cx.ty(n, cv)?;
                let ci = broadcast_index(&cs, &[m, nn], "(row * N + col)");
                ep = format!("{ep} + ({at}){} * ({at}){}[{ci}]", scalar::f32_lit(beta), cx.ptr(n, cv)?);
            }
            (m, k, nn, sa, sb, "0".to_string(), "0".to_string(), 1, ep)
        }
        None => {
            let MatMulDims { m, k, n: nn, pa, pb, obat, batches } = matmul_dims(&ash, &bsh);
            let bi = |p: &[usize], mat: usize| batch_offset(p, &obat, mat);
            (m, k, nn, (k, 1), (nn, 1), bi(&pa, m * k), bi(&pb, k * nn), batches, "acc".to_string())
        }
    };
    if osh.iter().product::<usize>() != batches * m * nn {
        return Err(cx.err(n, "output shape does not match the product's"));
    }
    let (a, b, y) = (cx.ptr(n, av)?, cx.ptr(n, bv)?, cx.ptr(n, out)?);
    let source = format!(
        "extern \"C\" __global__ void {name}(unsigned char* A, const unsigned char* __restrict__ W) {{\n\
         const int M = {m}, N = {nn}, K = {k};\n\
         __shared__ {t} As[{TILE}][{TILE} + 1];\n__shared__ {t} Bs[{TILE}][{TILE} + 1];\n\
         long long z = blockIdx.z;\n\
         const {t}* a = {a} + {batch_a};\nconst {t}* b = {b} + {batch_b};\n{t}* y = {y} + z * {};\n\
         int tx = threadIdx.x, ty = threadIdx.y;\n\
         int row = blockIdx.y * {TILE} + ty, col = blockIdx.x * {TILE} + tx;\n\
         {at} acc = 0;\n\
         for (int k0 = 0; k0 < K; k0 += {TILE}) {{\n\
           int ka = k0 + tx, kb = k0 + ty;\n\
           As[ty][tx] = (row < M && ka < K) ? a[(long long)row * {} + (long long)ka * {}] : ({t})0;\n\
           Bs[ty][tx] = (kb < K && col < N) ? b[(long long)kb * {} + (long long)col * {}] : ({t})0;\n\
           __syncthreads();\n\
           #pragma unroll\n\
           for (int kk = 0; kk < {TILE}; ++kk) acc += As[ty][kk] * Bs[kk][tx];\n\
           __syncthreads();\n\
         }}\n\
         if (row < M && col < N) y[(long long)row * N + col] = {epilogue};\n}}\n",
        m * nn,
        sa.0,
        sa.1,
        sb.0,
        sb.1,
    );
    if batches > 65535 {
        return Err(cx.err(n, format!("{batches} matrix products in one node: more than one grid holds")));
    }
    Ok(vec![Kernel { name: name.to_string(), source, grid: [nn.div_ceil(TILE).max(1) as u32, m.div_ceil(TILE).max(1) as u32, batches.max(1) as u32], block: [TILE as u32, TILE as u32, 1], shared: 0 }])
}

/// A reduction over the axes marked in `red`: one thread per output element walks its
/// reduced elements. `t` is the C type the sums run in, `on` the output's element count.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce(cx: &NodeCx, op: ReduceOp, xs: &[usize], red: &[bool], x: &str, y: &str, t: &str, on: usize) -> R<Vec<Kernel>> {
    let st = strides(xs);
    // Output element i → base offset over the kept dims; reduced element r → offset over the
    // reduced dims.
    let kept: Vec<usize> = (0..xs.len()).filter(|&a| !red[a]).collect();
    let rdims: Vec<usize> = (0..xs.len()).filter(|&a| red[a]).collect();
    let rcount: usize = rdims.iter().map(|&a| xs[a]).product();
    let offset = |dims: &[usize], v: &str| -> String {
        let mut terms = Vec::new();
        let mut inner = 1;
        for &a in dims.iter().rev() {
            if xs[a] != 1 {
                terms.push(format!("(({v} / {inner}) % {}) * {}", xs[a], st[a]));
            }
            inner *= xs[a];
        }
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    };
    let (init, step, fin) = {
        let (exp, log, sqrt) = if t == "float" { ("expf", "logf", "sqrtf") } else { ("exp", "log", "sqrt") };
        match op {
            ReduceOp::Sum => ("0".to_string(), "acc += v;".to_string(), "acc".to_string()),
            ReduceOp::Mean => ("0".into(), "acc += v;".into(), format!("acc / ({t}){rcount}")),
            ReduceOp::Max => ("-(1.0 / 0.0)".into(), "if (v > acc || v != v) acc = v;".into(), "acc".into()),
            ReduceOp::Min => ("(1.0 / 0.0)".into(), "if (v < acc || v != v) acc = v;".into(), "acc".into()),
            ReduceOp::Prod => ("1".into(), "acc *= v;".into(), "acc".into()),
            ReduceOp::L1 => ("0".into(), "acc += v < 0 ? -v : v;".into(), "acc".into()),
            ReduceOp::L2 => ("0".into(), "acc += v * v;".into(), format!("{sqrt}(acc)")),
            ReduceOp::SumSquare => ("0".into(), "acc += v * v;".into(), "acc".into()),
            ReduceOp::LogSum => ("0".into(), "acc += v;".into(), format!("{log}(acc)")),
            ReduceOp::LogSumExp => ("0".into(), format!("acc += {exp}(v);"), format!("{log}(acc)")),
        }
    };
    if rcount == 0 {
        return Err(cx.err("reduction over an empty axis is not supported by the CUDA target"));
    }
    let body = format!(
        "long long base = {};\n{t} acc = {init};\nfor (long long r = 0; r < {rcount}; ++r) {{ {t} v = {x}[base + {}]; {step} }}\n{y}[i] = {fin};",
        offset(&kept, "i"),
        offset(&rdims, "r")
    );
    Ok(vec![cx.pointwise_over(on, xs.iter().product(), &body)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_indices_follow_numpy() {
        assert_eq!(broadcast_index(&[2, 3], &[2, 3], "i"), "i");
        assert_eq!(broadcast_index(&[1], &[2, 3], "i"), "0");
        // A bias along the last dim.
        assert_eq!(broadcast_index(&[3], &[2, 3], "i"), "((i / 1) % 3)");
        // A per-row value [2, 1] against [2, 3].
        assert_eq!(broadcast_index(&[2, 1], &[2, 3], "i"), "(i / 3)");
        // Same elements, leading ones.
        assert_eq!(broadcast_index(&[1, 6], &[6], "i"), "i");
    }

    #[test]
    fn index_type_widens_past_i32() {
        assert_eq!(ix(1000), "int");
        assert_eq!(ix(1 << 31), "long long");
    }
}
