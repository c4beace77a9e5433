//! `FusedAttention`: what the CPU fusion pass (`passes::fuse`) makes of an attention the graph
//! spells out — `MatMul(Q, Kᵀ)`, the scale and mask nodes on the scores, `Softmax` over the
//! keys, `MatMul(P, V)` and the Transposes around them (`passes::attention` finds them) — for
//! the runtime kernel `kernels::sdpa`, which keeps the scores in cache. f32, static shapes;
//! no front end makes it, and training graphs are not fused.
use super::{input, EmitCx, OpDef, OutType, ShapeCx, R};
use crate::codegen::emit::f32_lit;
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::sdpa as k;

/// Strides (elements) of a matrix operand: `batch` per batch dim, then rows and columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strides {
    pub batch: Vec<usize>,
    pub rows: usize,
    pub cols: usize,
}

impl Strides {
    fn view(&self) -> k::View<'_> {
        k::View { batch: &self.batch, rows: self.rows, cols: self.cols }
    }

    /// The runtime's `View` as Rust source.
    fn source(&self) -> String {
        format!("rt::kernels::sdpa::View {{ batch: &{:?}, rows: {}, cols: {} }}", self.batch, self.rows, self.cols)
    }
}

/// One elementwise step on the scores, in the graph's order.
#[derive(Debug, Clone, PartialEq)]
pub enum ScoreStep {
    Mul(f32),
    Div(f32),
    /// Adds node input `input` (a mask) read through `at`.
    Add { input: usize, at: Strides },
}

/// Inputs `(Q, Kᵀ, V, biases…)`, each read through its strides; the output has `out_shape`
/// and is written through `out`.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedAttention {
    pub batch: Vec<usize>,
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
    pub dv: usize,
    pub q: Strides,
    pub kt: Strides,
    pub v: Strides,
    pub steps: Vec<ScoreStep>,
    pub out: Strides,
    pub out_shape: Vec<usize>,
}

impl FusedAttention {
    /// Q, Kᵀ, V and one input per Add step.
    fn inputs(&self) -> usize {
        3 + self.steps.iter().filter(|s| matches!(s, ScoreStep::Add { .. })).count()
    }

    /// The kernel's scratch (f32 elements).
    pub fn scratch_elements(&self) -> usize {
        k::scratch_len(&self.dims(), &self.q.view(), &self.kt.view(), &self.v.view())
    }

    fn dims(&self) -> k::Dims<'_> {
        k::Dims { batch: &self.batch, sq: self.sq, sk: self.sk, d: self.d, dv: self.dv }
    }

    /// The largest element offset + 1 that `s` reaches over `rows × cols` per batch entry.
    fn extent(&self, s: &Strides, rows: usize, cols: usize) -> Option<usize> {
        if self.batch.contains(&0) || rows == 0 || cols == 0 {
            return Some(0);
        }
        let mut last = (rows - 1).checked_mul(s.rows)?.checked_add((cols - 1).checked_mul(s.cols)?)?;
        for (&n, &st) in self.batch.iter().zip(&s.batch) {
            last = last.checked_add((n - 1).checked_mul(st)?)?;
        }
        last.checked_add(1)
    }

    /// Each operand (and the output) holds what its strides reach.
    fn check(&self, numels: &[usize]) -> R<()> {
        let rank = self.batch.len();
        let mut operands = vec![("Q", &self.q, self.sq, self.d, 0), ("Kᵀ", &self.kt, self.d, self.sk, 1), ("V", &self.v, self.sk, self.dv, 2)];
        for st in &self.steps {
            if let ScoreStep::Add { input, at } = st {
                operands.push(("the bias", at, self.sq, self.sk, *input));
            }
        }
        for (what, s, rows, cols, i) in operands {
            let have = numels.get(i).copied().ok_or_else(|| format!("{what} (input {i}) is missing"))?;
            if s.batch.len() != rank || self.extent(s, rows, cols).is_none_or(|e| e > have) {
                return Err(format!("{what}'s strides reach past its {have} elements"));
            }
        }
        let out: usize = self.out_shape.iter().product();
        if self.out.batch.len() != rank || self.extent(&self.out, self.sq, self.dv).is_none_or(|e| e > out) {
            return Err(format!("the output's strides reach past its {out} elements"));
        }
        Ok(())
    }
}

/// Input `t` read through `s`.
fn matrix<'a>(t: &'a Tensor, s: &'a Strides) -> R<k::Matrix<'a>> {
    match &t.data {
        Data::F32(v) => Ok(k::Matrix { data: v, view: s.view() }),
        _ => Err(format!("every input must be f32, got {}", t.dtype())),
    }
}

impl OpDef for FusedAttention {
    name!("FusedAttention");
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let mut numels = Vec::new();
        for i in 0..self.inputs() {
            let a = cx.arg(i)?;
            if a.dtype != DType::F32 {
                return Err(format!("input {i} must be f32, got {}", a.dtype));
            }
            let n = a.dims()?.iter().map(|d| d.as_const().and_then(|c| usize::try_from(c).ok())).product::<Option<usize>>();
            numels.push(n.ok_or("FusedAttention needs static shapes")?);
        }
        self.check(&numels)?;
        Ok(vec![OutType { dtype: DType::F32, dims: Some(self.out_shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let ts: Vec<&Tensor> = (0..self.inputs()).map(|i| input(ins, i)).collect::<R<_>>()?;
        self.check(&ts.iter().map(|t| t.numel()).collect::<Vec<_>>())?;
        let (q, kt, v) = (matrix(ts[0], &self.q)?, matrix(ts[1], &self.kt)?, matrix(ts[2], &self.v)?);
        let steps = self
            .steps
            .iter()
            .map(|s| match s {
                ScoreStep::Mul(c) => Ok(k::Step::Mul(*c)),
                ScoreStep::Div(c) => Ok(k::Step::Div(*c)),
                ScoreStep::Add { input, at } => Ok(k::Step::Add(matrix(ts.get(*input).ok_or("a bias input is missing")?, at)?)),
            })
            .collect::<R<Vec<_>>>()?;
        let mut y = vec![0f32; self.out_shape.iter().product()];
        let mut scratch = vec![0f32; self.scratch_elements()];
        k::attention(&self.dims(), q, kt, v, &steps, &mut y, self.out.view(), &mut scratch);
        Ok(vec![Tensor::new(self.out_shape.clone(), Data::F32(y))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let matrix = |i: usize, s: &Strides| -> Result<String, CodegenError> { Ok(format!("rt::kernels::sdpa::Matrix {{ data: {}, view: {} }}", cx.read_input(i)?, s.source())) };
        let mut steps = Vec::new();
        for s in &self.steps {
            steps.push(match s {
                ScoreStep::Mul(c) => format!("rt::kernels::sdpa::Step::Mul({})", f32_lit(*c)),
                ScoreStep::Div(c) => format!("rt::kernels::sdpa::Step::Div({})", f32_lit(*c)),
                ScoreStep::Add { input, at } => format!("rt::kernels::sdpa::Step::Add({})", matrix(*input, at)?),
            });
        }
        let Self { batch, sq, sk, d, dv, .. } = self;
        Ok(format!(
            "rt::kernels::sdpa::attention(\n\
             &rt::kernels::sdpa::Dims {{ batch: &{batch:?}, sq: {sq}, sk: {sk}, d: {d}, dv: {dv} }},\n\
             {},\n{},\n{},\n&[{}],\n{},\n{},\n{},\n);",
            matrix(0, &self.q)?,
            matrix(1, &self.kt)?,
            matrix(2, &self.v)?,
            steps.join(", "),
            cx.write(cx.output(0)?)?,
            self.out.source(),
            cx.scratch(DType::F32)?,
        ))
    }

    fn scratch_bytes(&self, _: &[Option<(DType, Vec<usize>)>]) -> usize {
        self.scratch_elements() * 4
    }

    fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        // Two products, and about five operations per score (steps, max, exp, sum).
        let scores = self.batch.iter().product::<usize>() as u64 * self.sq as u64 * self.sk as u64;
        Some(scores * (2 * (self.d + self.dv) as u64 + 5))
    }
}

/// An attention over two heads, for the tests (not in `ops::examples`: the op is made by the
/// fusion pass at static shapes, so bounded-dims code never meets it).
pub fn examples() -> Vec<super::Example> {
    // Two heads split from [seq, heads · d] rows, Kᵀ read through strides, a scale and a
    // broadcast mask; the output written back as [seq, heads · dv].
    let (heads, sq, sk, d, dv) = (2usize, 5usize, 7usize, 4usize, 3usize);
    let f = |n: usize, k: usize| Tensor::from_f32s(vec![n], (0..n).map(|i| (((i * k) % 17) as f32 - 8.0) / 9.0).collect());
    let op = FusedAttention {
        batch: vec![1, heads],
        sq,
        sk,
        d,
        dv,
        q: Strides { batch: vec![0, d], rows: heads * d, cols: 1 },
        kt: Strides { batch: vec![0, d], rows: 1, cols: heads * d },
        v: Strides { batch: vec![0, dv], rows: heads * dv, cols: 1 },
        steps: vec![ScoreStep::Div(2.0), ScoreStep::Add { input: 3, at: Strides { batch: vec![0, 0], rows: 0, cols: 1 } }],
        out: Strides { batch: vec![0, dv], rows: heads * dv, cols: 1 },
        out_shape: vec![1, sq, heads * dv],
    };
    vec![super::Example { consts: vec![], op: super::OpRef::new(op), inputs: vec![f(sq * heads * d, 3), f(sk * heads * d, 5), f(sk * heads * dv, 7), f(sk, 11)] }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_past_an_input_are_refused() {
        let ex = examples().remove(0);
        let op = ex.op;
        let ins: Vec<Option<&Tensor>> = ex.inputs.iter().map(Some).collect();
        op.eval(&ins).unwrap();
        let short = Tensor::from_f32s(vec![3], vec![0.0; 3]);
        let mut bad = ins.clone();
        bad[2] = Some(&short);
        let err = op.eval(&bad).expect_err("V too short");
        assert!(err.contains("V's strides"), "{err}");
    }
}
