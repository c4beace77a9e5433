//! Data movement over bounded dims: Transpose, Gather and Slice with constant indices, Concat
//! and Expand, each a loop over run-time sizes from the table `sz`.
use super::emit::{norm, Bx};
use crate::codegen::emit::rust_ty;
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, Node, Op, ValueId};

impl Bx<'_> {
    pub(super) fn gather(&self, n: &Node, out: ValueId) -> Result<Option<String>, CodegenError> {
        let Op::Gather { axis } = &n.op else { return Err(self.unsupported(n)) };
        let (x, iv) = (self.input(n, 0)?, self.input(n, 1)?);
        let idx = self.cx.konst(iv).and_then(|t| t.to_i64_vec()).ok_or_else(|| self.unsupported(n))?;
        let xs = self.shape(n, x)?;
        let a = norm(*axis, xs.len()).map_err(|e| self.err(n, e))?;
        // Each index as a run-time expression; on a bounded axis, `forward` checks the
        // index is in range for the actual dims (a derived size `len − i` ≥ 1).
        let len = &xs[a];
        let mut exprs = Vec::with_capacity(idx.len());
        for &i in &idx {
            match len.as_const() {
                Some(l) => {
                    let j = if i < 0 { i + l } else { i };
                    if !(0..l).contains(&j) {
                        return Err(self.err(n, format!("index {i} is out of range for a dim of {l}")));
                    }
                    exprs.push(format!("{j}usize"));
                }
                None if i < 0 => {
                    // len + i ≥ 0  ⇔  len + i + 1 ≥ 1.
                    let need = self.sizes.dim(&len.add(&DimExpr::constant(i + 1)));
                    exprs.push(format!("({need} - 1)"));
                }
                None => {
                    let _ = self.sizes.dim(&len.sub(&DimExpr::constant(i)));
                    exprs.push(format!("{i}usize"));
                }
            }
        }
        let (outer, inner, l) = (self.sizes.numel(&xs[..a]), self.sizes.numel(&xs[a + 1..]), self.sizes.dim(len));
        Ok(Some(format!(
            "let (x, y) = ({}, {});\nlet (outer, inner, l) = ({outer}, {inner}, {l});\nlet idx: [usize; {ni}] = [{}];\n\
             for o in 0..outer {{ for (j, &i) in idx.iter().enumerate() {{\n\
               y[(o * {ni} + j) * inner..(o * {ni} + j + 1) * inner].copy_from_slice(&x[(o * l + i) * inner..(o * l + i + 1) * inner]);\n\
             }} }}",
            self.read(n, x)?,
            self.write(n, out)?,
            exprs.join(", "),
            ni = idx.len()
        )))
    }

    pub(super) fn slice(&self, n: &Node, out: ValueId, od: DType) -> Result<Option<String>, CodegenError> {
        let x = self.input(n, 0)?;
        let xs = self.shape(n, x)?;
        let (start, ys, need) = crate::passes::symbolic::slice_plan(self.cx.g, n, &xs).map_err(|e| if e.is_empty() { self.unsupported(n) } else { self.err(n, e) })?;
        for e in &need {
            // Registered in the size table: `forward` checks each is at least 1.
            let _ = self.sizes.dim(e);
        }
        let r = xs.len();
        let t = rust_ty(od).ok_or_else(|| self.unsupported(n))?;
        let lits = |v: &[DimExpr]| v.iter().map(|d| self.sizes.dim(d)).collect::<Vec<_>>().join(", ");
        // A start may be 0 at run time, and every table size must be at least 1: a
        // bounded start `len + s` is written as `(len + s + 1) − 1`.
        let starts: Vec<String> = start
            .iter()
            .map(|d| if d.as_const().is_some() { self.sizes.dim(d) } else { format!("({} - 1)", self.sizes.dim(&d.add(&DimExpr::constant(1)))) })
            .collect();
        Ok(Some(format!(
            "let (x, y) = ({}, {});\nlet xs: [usize; {r}] = [{}];\nlet ys: [usize; {r}] = [{}];\nlet st: [usize; {r}] = [{}];\n\
             let mut xst = [1usize; {r}]; for d in (0..{r}usize.saturating_sub(1)).rev() {{ xst[d] = xst[d + 1] * xs[d + 1]; }}\n\
             let mut idx = [0usize; {r}];\n\
             for o in y.iter_mut() {{\n\
               let mut off = 0usize; for d in 0..{r} {{ off += (st[d] + idx[d]) * xst[d]; }}\n\
               *o = x[off];\n\
               for d in (0..{r}).rev() {{ idx[d] += 1; if idx[d] < ys[d] {{ break; }} idx[d] = 0; }}\n\
             }}\nlet _: &[{t}] = x;",
            self.read(n, x)?,
            self.write(n, out)?,
            lits(&xs),
            lits(&ys),
            starts.join(", ")
        )))
    }

    pub(super) fn expand(&self, n: &Node, out: ValueId, od: DType) -> Result<Option<String>, CodegenError> {
        let x = self.input(n, 0)?;
        let (xs, os) = (self.shape(n, x)?, self.shape(n, out)?);
        let t = rust_ty(od).ok_or_else(|| self.unsupported(n))?;
        let sx = self.bcast_strides(&xs, &os);
        let rx = self.read(n, x)?;
        let oshape: Vec<String> = os.iter().map(|d| self.sizes.dim(d)).collect();
        Ok(Some(format!(
            "let x = {rx}; let sx = [{}];\nrt::kernels::broadcast::binary(x, &sx, x, &sx, {}, &[{}], |p: {t}, _q: {t}| p);",
            sx.join(", "),
            self.write(n, out)?,
            oshape.join(", ")
        )))
    }
}
