//! Data movement over bounded dims: Transpose, Gather and Slice with constant indices, Concat
//! and Expand, each a loop over run-time sizes from the table `sz`.
use super::emit::Bx;
use crate::codegen::emit::rust_ty;
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, Node, ValueId};

impl Bx<'_> {
    pub(super) fn slice(&self, n: &Node, out: ValueId, od: DType) -> Result<Option<String>, CodegenError> {
        let x = self.input(n, 0)?;
        let xs = self.shape(n, x)?;
        let (start, ys, need) = crate::passes::symbolic::slice_plan(self.cx.g, n, &xs, self.info.slices.get(&n.name)).map_err(|e| if e.is_empty() { self.unsupported(n) } else { self.err(n, e) })?;
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
}
