//! Elementwise chains as scalar programs: what one output element of a fused group of
//! elementwise nodes is, as a list of steps over the group's inputs (`Op::Elementwise`). The
//! interpreter evaluates a program per element; code generation prints it as the body of one
//! loop. Each step is an op whose scalar function is defined once (`runtime::kernels::unary`,
//! `runtime::Elem`), so a fused group gives the unfused nodes' bits.
use super::{BinaryOp, UnaryOp};
use burnc_runtime::kernels::unary::{eval_f32, Unary};
use burnc_runtime::Elem;

/// What a step reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    /// Input `i` of the node, at this element (or its one element, for a one-element input).
    Input(usize),
    /// The result of an earlier step.
    Step(usize),
    /// A one-element f32 constant, written into the code as a literal.
    Const(f32),
}

/// Whether an input of shape `s` repeats along an output of shape `out`: leading 1s aside, its
/// dims are the output's last ones (a bias `[C]` against `[N, S, C]`), so output element `j`
/// reads its element `j % numel(s)`.
pub fn repeats_along(s: &[usize], out: &[usize]) -> bool {
    let dims: Vec<usize> = s.iter().copied().skip_while(|&d| d == 1).collect();
    dims.len() < out.len() && out.ends_with(&dims)
}

/// One step's function.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScalarOp {
    /// A float function of the runtime's (`Unary`), as `map_f32` applies it.
    Unary(Unary),
    Binary(Arith),
}

/// The binary functions a step can apply (f32, as `runtime::Elem` defines them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

impl ScalarOp {
    /// The step for a unary node, when it has a scalar f32 function.
    pub fn unary(u: UnaryOp) -> Option<ScalarOp> {
        crate::interp::ops::elementwise::runtime_unary(u).map(ScalarOp::Unary)
    }

    /// The step for a binary node, when it is plain f32 arithmetic.
    pub fn binary(b: BinaryOp) -> Option<ScalarOp> {
        Some(ScalarOp::Binary(match b {
            BinaryOp::Add => Arith::Add,
            BinaryOp::Sub => Arith::Sub,
            BinaryOp::Mul => Arith::Mul,
            BinaryOp::Div => Arith::Div,
            BinaryOp::Max => Arith::Max,
            BinaryOp::Min => Arith::Min,
            _ => return None,
        }))
    }

    pub fn arity(&self) -> usize {
        match self {
            ScalarOp::Unary(_) => 1,
            ScalarOp::Binary(_) => 2,
        }
    }

    /// The function on f32 values, as the unfused kernels compute it.
    pub fn eval_f32(&self, args: &[f32]) -> f32 {
        match *self {
            ScalarOp::Unary(u) => eval_f32(u, args[0]),
            ScalarOp::Binary(b) => {
                let (p, q) = (args[0], args[1]);
                match b {
                    Arith::Add => p.add(q),
                    Arith::Sub => p.sub(q),
                    Arith::Mul => p.mul(q),
                    Arith::Div => p.div(q),
                    Arith::Max => p.max_of(q),
                    Arith::Min => p.min_of(q),
                }
            }
        }
    }
}

impl Arith {
    /// The node op this step function is the scalar function of.
    pub fn op(self) -> BinaryOp {
        match self {
            Arith::Add => BinaryOp::Add,
            Arith::Sub => BinaryOp::Sub,
            Arith::Mul => BinaryOp::Mul,
            Arith::Div => BinaryOp::Div,
            Arith::Max => BinaryOp::Max,
            Arith::Min => BinaryOp::Min,
        }
    }
}

/// The node op a runtime unary function is the scalar function of (the inverse of
/// [`ScalarOp::unary`]), so the GPU printers write a step as they write that op.
pub fn unary_op(u: Unary) -> UnaryOp {
    match u {
        Unary::Abs => UnaryOp::Abs,
        Unary::Neg => UnaryOp::Neg,
        Unary::Exp => UnaryOp::Exp,
        Unary::Log => UnaryOp::Log,
        Unary::Sqrt => UnaryOp::Sqrt,
        Unary::Reciprocal => UnaryOp::Reciprocal,
        Unary::Floor => UnaryOp::Floor,
        Unary::Ceil => UnaryOp::Ceil,
        Unary::Round => UnaryOp::Round,
        Unary::Sign => UnaryOp::Sign,
        Unary::Sin => UnaryOp::Sin,
        Unary::Cos => UnaryOp::Cos,
        Unary::Tan => UnaryOp::Tan,
        Unary::Asin => UnaryOp::Asin,
        Unary::Acos => UnaryOp::Acos,
        Unary::Atan => UnaryOp::Atan,
        Unary::Sinh => UnaryOp::Sinh,
        Unary::Cosh => UnaryOp::Cosh,
        Unary::Asinh => UnaryOp::Asinh,
        Unary::Acosh => UnaryOp::Acosh,
        Unary::Atanh => UnaryOp::Atanh,
        Unary::Erf => UnaryOp::Erf,
        Unary::Relu => UnaryOp::Relu,
        Unary::Sigmoid => UnaryOp::Sigmoid,
        Unary::Tanh => UnaryOp::Tanh,
        Unary::Softplus => UnaryOp::Softplus,
        Unary::Softsign => UnaryOp::Softsign,
        Unary::LeakyRelu(alpha) => UnaryOp::LeakyRelu { alpha },
        Unary::Elu(alpha) => UnaryOp::Elu { alpha },
        Unary::Selu(alpha, gamma) => UnaryOp::Selu { alpha, gamma },
        Unary::Celu(alpha) => UnaryOp::Celu { alpha },
        Unary::HardSigmoid(alpha, beta) => UnaryOp::HardSigmoid { alpha, beta },
        Unary::HardSwish => UnaryOp::HardSwish,
        Unary::ThresholdedRelu(alpha) => UnaryOp::ThresholdedRelu { alpha },
        Unary::Gelu => UnaryOp::Gelu { tanh_approx: false },
        Unary::GeluTanh => UnaryOp::Gelu { tanh_approx: true },
        Unary::Mish => UnaryOp::Mish,
    }
}

/// How a language writes a program's pieces (the GPU targets' printers).
pub struct Printer<'a> {
    /// `u(x)` on an f32.
    pub unary: &'a dyn Fn(UnaryOp, &str) -> Option<String>,
    /// `a op b` on f32s.
    pub binary: &'a dyn Fn(BinaryOp, &str, &str) -> Option<String>,
    /// An f32 literal with exactly its bits.
    pub lit: &'a dyn Fn(f32) -> String,
    /// The declaration of step `k` with value `e`.
    pub decl: &'a dyn Fn(usize, &str) -> String,
}

impl ScalarProgram {
    /// The statements computing one element, `inputs[i]` being the expression of input `i`
    /// at this element; returns them and the name of the result (`s<last>`). `None` when a
    /// step reads what does not exist or the printer has no text for it.
    pub fn print(&self, inputs: &[String], p: &Printer) -> Option<(String, String)> {
        let mut body = String::new();
        for (k, s) in self.steps.iter().enumerate() {
            let arg = |o: &Operand| -> Option<String> {
                Some(match *o {
                    Operand::Input(i) => inputs.get(i)?.clone(),
                    Operand::Step(j) => format!("s{j}"),
                    Operand::Const(c) => (p.lit)(c),
                })
            };
            let args: Vec<String> = s.args.iter().map(arg).collect::<Option<_>>()?;
            let e = match s.op {
                ScalarOp::Unary(u) => (p.unary)(unary_op(u), args.first()?)?,
                ScalarOp::Binary(b) => (p.binary)(b.op(), args.first()?, args.get(1)?)?,
            };
            body.push_str(&(p.decl)(k, &e));
        }
        Some((body, format!("s{}", self.steps.len().checked_sub(1)?)))
    }
}

/// One step: `op(args…)`, and the node it came from (for comments and reports).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub op: ScalarOp,
    pub args: Vec<Operand>,
    pub node: String,
}

/// A fused elementwise group: steps in order, the last one's result is the output element.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScalarProgram {
    pub steps: Vec<Step>,
}

impl ScalarProgram {
    /// The output element for the group's input elements `inputs`.
    pub fn eval_f32(&self, inputs: &[f32]) -> f32 {
        self.eval_f32_in(inputs, &mut Vec::with_capacity(self.steps.len()))
    }

    /// [`ScalarProgram::eval_f32`] with the steps' results kept in `vals` (cleared first), so
    /// a caller looping over elements allocates once.
    pub fn eval_f32_in(&self, inputs: &[f32], vals: &mut Vec<f32>) -> f32 {
        vals.clear();
        for s in &self.steps {
            let mut args = [0f32; 2];
            for (slot, a) in args.iter_mut().zip(&s.args) {
                *slot = match *a {
                    Operand::Input(i) => inputs[i],
                    Operand::Step(j) => vals[j],
                    Operand::Const(c) => c,
                };
            }
            vals.push(s.op.eval_f32(&args[..s.args.len().min(2)]));
        }
        vals.last().copied().unwrap_or(f32::NAN)
    }

    /// Whether the program is well formed for `inputs` inputs: each step has its op's arity
    /// and reads only inputs that exist and earlier steps.
    pub fn check(&self, inputs: usize) -> Result<(), String> {
        if self.steps.is_empty() {
            return Err("an elementwise program needs a step".into());
        }
        for (k, s) in self.steps.iter().enumerate() {
            if s.args.len() != s.op.arity() {
                return Err(format!("step {k} has {} operands for {:?}", s.args.len(), s.op));
            }
            for a in &s.args {
                match *a {
                    Operand::Input(i) if i >= inputs => return Err(format!("step {k} reads input {i} of {inputs}")),
                    Operand::Step(j) if j >= k => return Err(format!("step {k} reads step {j}, not an earlier one")),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_program_gives_the_unfused_bits() {
        // x · sigmoid(x), as Sigmoid then Mul.
        let p = ScalarProgram {
            steps: vec![
                Step { op: ScalarOp::Unary(Unary::Sigmoid), args: vec![Operand::Input(0)], node: "sig".into() },
                Step { op: ScalarOp::Binary(Arith::Mul), args: vec![Operand::Input(0), Operand::Step(0)], node: "mul".into() },
            ],
        };
        p.check(1).expect("well formed");
        for x in [-3.5f32, -0.0, 0.0, 1e-3, 2.25, 40.0, f32::NAN] {
            let (got, want) = (p.eval_f32(&[x]), x * eval_f32(Unary::Sigmoid, x));
            // A NaN's sign and payload are not specified through arithmetic: NaN is enough.
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{x}: {got} vs {want}");
        }
        assert!(p.check(0).is_err());
        let bad = ScalarProgram { steps: vec![Step { op: ScalarOp::Binary(Arith::Add), args: vec![Operand::Step(0), Operand::Const(1.0)], node: "a".into() }] };
        assert!(bad.check(1).is_err());
    }
}
