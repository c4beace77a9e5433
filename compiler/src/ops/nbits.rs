//! Block-quantized weights kept packed: onnxruntime's MatMulNBits (`com.microsoft`), the
//! product `A · Wᵀ` with W stored as 4- or 8-bit blocks, each with a scale and a zero point,
//! through `kernels::nbits` (the layout is described there). Inputs: A `[…, K]`, B
//! `[N, blocks, block · bits / 8]` u8, scales `[N · blocks]`, zero points (optional: u8 packed
//! like B's values, or one float per block), then g_idx (refused by the frontend) and bias
//! `[N]`.
use super::{input, numel, product, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::nbits::{self as nk, NBits, ZeroPoints};

/// MatMulNBits with its attributes: `k` and `n` W's dims, `bits` 4 or 8, `block` values per
/// scale (a power of two, at least 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatMulNBits {
    pub k: usize,
    pub n: usize,
    pub bits: u32,
    pub block: usize,
}

const A: usize = 0;
const B: usize = 1;
const SCALES: usize = 2;
const ZERO: usize = 3;
const BIAS: usize = 5;

impl MatMulNBits {
    /// The op, its attributes checked (the frontend names the node on failure).
    pub fn new(k: usize, n: usize, bits: u32, block: usize) -> R<MatMulNBits> {
        if bits != 4 && bits != 8 {
            return Err(format!("{bits}-bit weights are not supported (4 and 8 are)"));
        }
        if block < 16 || !block.is_power_of_two() {
            return Err(format!("block_size {block} must be a power of two, at least 16"));
        }
        if k == 0 || n == 0 {
            return Err(format!("K = {k} and N = {n} must be positive"));
        }
        k.checked_mul(n).and_then(|e| e.checked_mul(4)).ok_or_else(|| format!("K = {k} × N = {n} is too large"))?;
        Ok(MatMulNBits { k, n, bits, block })
    }


    fn blocks(&self) -> usize {
        self.k.div_ceil(self.block)
    }

    /// Bytes of packed zero points per row of W.
    fn zero_row(&self) -> usize {
        (self.blocks() * self.bits as usize).div_ceil(8)
    }

    /// The runtime's description of the weights.
    fn weights<'a>(&self, b: &'a [u8], scales: &'a [f32], zero_points: ZeroPoints<'a>) -> NBits<'a> {
        NBits { b, scales, zero_points, n: self.n, k: self.k, bits: self.bits, block: self.block }
    }
}

/// `dims` hold exactly `want` elements.
fn count(cx: &mut ShapeCx, what: &str, dims: &[DimExpr], want: usize) -> R<()> {
    cx.equal(&format!("{what}'s element count"), &product(dims), &DimExpr::constant(want as i64))
}

impl OpDef for MatMulNBits {
    name!("MatMulNBits");
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let a = cx.arg(A)?.clone();
        if a.dtype != DType::F32 {
            return Err(format!("MatMulNBits on {} inputs is not supported yet (f32 is)", a.dtype));
        }
        let b = cx.arg(B)?.clone();
        if b.dtype != DType::U8 {
            return Err(format!("B must be uint8, got {}", b.dtype));
        }
        let bb = (self.block * self.bits as usize / 8) as i64;
        if let Some(d) = &b.dims {
            let want = [self.n as i64, self.blocks() as i64, bb].map(DimExpr::constant);
            if d.len() != 3 {
                return Err(format!("B must be [N, blocks, block bytes] = [{}, {}, {bb}], got rank {}", self.n, self.blocks(), d.len()));
            }
            for (i, (g, w)) in d.iter().zip(&want).enumerate() {
                cx.equal(&format!("B dim {i}"), g, w)?;
            }
        }
        let s = cx.arg(SCALES)?.clone();
        if s.dtype != DType::F32 {
            return Err(format!("the scales must be {} like A, got {}", a.dtype, s.dtype));
        }
        if let Some(d) = &s.dims {
            count(cx, "the scales", d, self.n * self.blocks())?;
        }
        if let Some(z) = cx.opt(ZERO).cloned() {
            let want = match z.dtype {
                DType::U8 => self.n * self.zero_row(),
                DType::F32 => self.n * self.blocks(),
                t => return Err(format!("zero points must be uint8 or {}, got {t}", a.dtype)),
            };
            if let Some(d) = &z.dims {
                count(cx, "the zero points", d, want)?;
            }
        }
        if cx.opt(4).is_some() {
            return Err("g_idx (act-order weights) is not supported".into());
        }
        if let Some(bias) = cx.opt(BIAS).cloned() {
            if bias.dtype != DType::F32 {
                return Err(format!("the bias must be {}, got {}", a.dtype, bias.dtype));
            }
            if let Some(d) = &bias.dims {
                count(cx, "the bias", d, self.n)?;
            }
        }
        let dims = match &a.dims {
            Some(d) => {
                let (last, lead) = d.split_last().ok_or("A must have at least one dim")?;
                cx.equal("A's last dim and K", last, &DimExpr::constant(self.k as i64))?;
                let mut out = lead.to_vec();
                out.push(DimExpr::constant(self.n as i64));
                Some(out)
            }
            None => None,
        };
        Ok(vec![OutType { dtype: DType::F32, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        self.shapes(&mut ShapeCx::of_tensors(ins))?;
        let (a, b, s) = (input(ins, A)?, input(ins, B)?, input(ins, SCALES)?);
        let (Data::F32(av), Data::U8(bv), Data::F32(sv)) = (&a.data, &b.data, &s.data) else {
            return Err("internal: MatMulNBits operand types".into());
        };
        let zero_points = match ins.get(ZERO).copied().flatten().map(|z| &z.data) {
            None => ZeroPoints::Default,
            Some(Data::U8(z)) => ZeroPoints::Packed(z),
            Some(Data::F32(z)) => ZeroPoints::Float(z),
            Some(_) => return Err("internal: MatMulNBits zero point type".into()),
        };
        let bias = match ins.get(BIAS).copied().flatten().map(|t| &t.data) {
            None => None,
            Some(Data::F32(v)) => Some(&v[..]),
            Some(_) => return Err("internal: MatMulNBits bias type".into()),
        };
        let m = a.numel() / self.k;
        let mut y = vec![0f32; m * self.n];
        let mut scratch = vec![0f32; nk::scratch_len(self.k, self.block)];
        nk::matmul_nbits(av, &self.weights(bv, sv, zero_points), bias, &mut y, m, &mut scratch);
        let mut shape = a.shape.clone();
        if let Some(last) = shape.last_mut() {
            *last = self.n;
        }
        Ok(vec![Tensor::new(shape, Data::F32(y))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (a, y) = (cx.input(A)?, cx.output(0)?);
        let (ra, rb, rs, wy) = (cx.read(a)?, cx.read_input(B)?, cx.read_input(SCALES)?, cx.write(y)?);
        let zero = match cx.opt_input(ZERO) {
            None => "ZeroPoints::Default".to_string(),
            Some(z) if cx.dtype(z)? == DType::U8 => format!("ZeroPoints::Packed({})", cx.read(z)?),
            Some(z) => format!("ZeroPoints::Float({})", cx.read(z)?),
        };
        let bias = cx.read_opt(BIAS)?;
        let m = format!("{} / {}", cx.numel(a)?, self.k);
        let scratch = cx.scratch(DType::F32)?;
        let (k, n, bits, block) = (self.k, self.n, self.bits, self.block);
        Ok(format!(
            "{{\n    use rt::kernels::nbits::{{NBits, ZeroPoints}};\n    \
             let packed = NBits {{ b: {rb}, scales: {rs}, zero_points: {zero}, n: {n}, k: {k}, bits: {bits}, block: {block} }};\n    \
             rt::kernels::nbits::matmul_nbits({ra}, &packed, {bias}, {wy}, {m}, {scratch});\n}}"
        ))
    }

    fn scratch_bytes(&self, _: &[Option<(DType, Vec<usize>)>]) -> usize {
        nk::scratch_len(self.k, self.block) * 4
    }

    fn flops(&self, _: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        numel(outs.first()?).map(|e| e.saturating_mul(2 * self.k as u64))
    }

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err("MatMulNBits has no gradient (its weights are quantized constants)".into())
    }
}

/// Products of each layout: 4 and 8 bits, packed, float and default zero points, a padded
/// last block and batches of rows (a bias, which needs g_idx absent before it, is tested
/// through ONNX models in tests/contrib_ops.rs).
pub fn examples() -> Vec<super::Example> {
    let mk = |k: usize, n: usize, bits: u32, block: usize, m: usize, zero: &str| {
        let op = MatMulNBits::new(k, n, bits, block).expect("valid attributes");
        let (blocks, bb) = (op.blocks(), block * bits as usize / 8);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.07).collect();
        let b: Vec<u8> = (0..n * blocks * bb).map(|i| (i * 97 + 13) as u8).collect();
        let s: Vec<f32> = (0..n * blocks).map(|i| 0.02 + (i % 5) as f32 * 0.01).collect();
        let mut inputs = vec![Tensor::from_f32s(vec![m, k], a), Tensor::new(vec![n, blocks, bb], Data::U8(b)), Tensor::from_f32s(vec![n * blocks], s)];
        match zero {
            "packed" => inputs.push(Tensor::new(vec![n * op.zero_row()], Data::U8((0..n * op.zero_row()).map(|i| (i * 31 + 5) as u8).collect()))),
            "float" => inputs.push(Tensor::from_f32s(vec![n * blocks], (0..n * blocks).map(|i| (i % 3) as f32 + 7.5).collect())),
            _ => {}
        }
        super::Example { consts: vec![], op: OpRef::new(op), inputs }
    };
    vec![mk(64, 6, 4, 32, 1, "packed"), mk(70, 5, 4, 16, 3, "default"), mk(48, 4, 8, 16, 2, "float")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_and_operands_are_checked() {
        assert!(MatMulNBits::new(64, 8, 3, 32).unwrap_err().contains("3-bit"));
        assert!(MatMulNBits::new(64, 8, 4, 24).unwrap_err().contains("power of two"));
        assert!(MatMulNBits::new(usize::MAX / 2, 8, 4, 32).unwrap_err().contains("too large"));
        let op = MatMulNBits::new(64, 8, 4, 32).unwrap();
        let a = Tensor::from_f32s(vec![1, 64], vec![0.0; 64]);
        let b = Tensor::new(vec![8, 2, 16], Data::U8(vec![0; 256]));
        let s = Tensor::from_f32s(vec![16], vec![1.0; 16]);
        assert!(op.eval(&[Some(&a), Some(&b), Some(&s)]).is_ok());
        let short = Tensor::from_f32s(vec![15], vec![1.0; 15]);
        assert!(op.eval(&[Some(&a), Some(&b), Some(&short)]).unwrap_err().contains("scales"));
        let wrong_k = Tensor::from_f32s(vec![1, 63], vec![0.0; 63]);
        assert!(op.eval(&[Some(&wrong_k), Some(&b), Some(&s)]).unwrap_err().contains("K"));
        let bad_b = Tensor::new(vec![8, 2, 15], Data::U8(vec![0; 240]));
        assert!(op.eval(&[Some(&a), Some(&bad_b), Some(&s)]).unwrap_err().contains("B dim 2"));
    }
}
