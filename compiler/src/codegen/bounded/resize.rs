//! Resize with bounded dims: the interpreter's per-axis tap tables depend on the axis's input
//! length, so they are computed at compile time for every length the bounds allow and stored
//! together in the weights blob; generated code picks a length's tables at run time through an
//! offset table. The tables grow with bound² per resized axis (fine for the bounds of small
//! images; computing taps at run time is the way past it).
use crate::codegen::emit::f64_lit;
use super::emit::Bx;
use crate::codegen::CodegenError;
use crate::interp::ops::resize::plan;
use crate::ir::{DimExpr, Node, NodeId, Op, ValueId};
use std::collections::BTreeSet;

/// At most this many assignments of a resized axis's named dims are enumerated.
const MAX_ASSIGNMENTS: usize = 1 << 16;

impl Bx<'_> {
    /// Every value `e` takes with each of its named dims in `1..=bound`.
    fn values_of(&self, n: &Node, e: &DimExpr) -> Result<BTreeSet<i64>, CodegenError> {
        let vars: Vec<String> = e.vars().into_iter().collect();
        let bounds: Vec<i64> = vars
            .iter()
            .map(|v| self.dims.iter().find(|(d, _)| d == v).map(|(_, b)| *b as i64).ok_or_else(|| self.err(n, format!("dim `{v}` has no bound"))))
            .collect::<Result<_, _>>()?;
        let count = bounds.iter().try_fold(1usize, |a, &b| a.checked_mul(b as usize)).filter(|&c| c <= MAX_ASSIGNMENTS);
        if count.is_none() {
            return Err(self.err(n, "`Resize` over an axis of several large bounded dims is not supported yet; pin them with --input"));
        }
        let mut out = BTreeSet::new();
        let mut cur = vec![1i64; vars.len()];
        loop {
            let val = |name: &str| vars.iter().position(|v| v == name).map(|i| cur[i]);
            if let Some(v) = e.eval(&val) {
                out.insert(v);
            }
            // Next assignment, odometer style.
            let mut i = 0;
            while i < cur.len() {
                cur[i] += 1;
                if cur[i] <= bounds[i] {
                    break;
                }
                cur[i] = 1;
                i += 1;
            }
            if i == cur.len() {
                break;
            }
        }
        Ok(out)
    }

    pub(super) fn resize(&self, id: NodeId, n: &Node, out: ValueId) -> Result<Option<String>, CodegenError> {
        let Op::Resize(at) = &n.op else { return Err(self.err(n, "not a Resize")) };
        let g = self.cx.g;
        let x = self.cx.input(n, 0)?;
        if g.tensor_type(x).map(|t| t.dtype) != Some(crate::ir::DType::F32) {
            return Err(self.err(n, "`Resize` on other types than f32 with bounded dims is not supported yet; pin them with --input"));
        }
        if n.inputs.get(1).copied().flatten().and_then(|v| g.const_value(v)).is_some_and(|t| t.numel() > 0) {
            return Err(self.err(n, "`Resize` with a roi and bounded dims is not supported yet; pin them with --input"));
        }
        let xs = self.shape(n, x)?;
        let r = xs.len();
        let scales = crate::passes::symbolic::resize_scales(g, n, at, r).map_err(|e| self.err(n, e))?;
        let half = crate::codegen::emit::scratch_bytes(g, id, self.cx.lowering) / 16;
        let rx = self.read(n, x)?;
        let y = self.write(n, out)?;
        if scales.iter().all(|&k| k == 1) {
            return Ok(Some(format!("{y}.copy_from_slice({rx});")));
        }
        let mut s = format!("let sc = {};\nlet (b0, b1) = sc.split_at_mut({half});\n", self.cx.scratch(n, id, "f64", 2 * half)?);
        s += &format!("rt::kernels::resize::widen({rx}, &mut b0[..{}]);\n", self.sizes.numel(&xs));
        let mut shape = xs.clone();
        let mut step = 0;
        for d in 0..r {
            let k = scales[d];
            if k == 1 {
                continue;
            }
            // Tap tables for every length axis d can have, one after another.
            let lens = self.values_of(n, &shape[d])?;
            let lmax = lens.iter().copied().max().unwrap_or(0).max(0) as usize;
            let (mut idx, mut w, mut ex, mut offs) = (Vec::new(), Vec::new(), Vec::new(), vec![0u32; 2 * (lmax + 1)]);
            let mut taps = None;
            for &l in lens.iter().filter(|&&l| l >= 1) {
                let mut fake = vec![1usize; r];
                fake[d] = l as usize;
                let mut sc = vec![1.0f64; r];
                sc[d] = k as f64;
                let (steps, _) = plan(at, &fake, None, Some(sc), None).map_err(|e| self.err(n, e))?;
                let st = steps.first().ok_or_else(|| self.err(n, "no resize step"))?;
                if *taps.get_or_insert(st.taps) != st.taps || st.out_len != l as usize * k as usize {
                    return Err(self.err(n, "`Resize` whose taps depend on the size is not supported with bounded dims yet"));
                }
                let too_big = |v: usize| u32::try_from(v).map_err(|_| self.err(n, "Resize tables too large; lower the bounds"));
                offs[2 * l as usize] = too_big(idx.len())?;
                offs[2 * l as usize + 1] = too_big(ex.len())?;
                idx.extend_from_slice(&st.idx);
                w.extend_from_slice(&st.w);
                ex.extend_from_slice(&st.extrap);
            }
            let taps = taps.unwrap_or(1);
            let (src, dst) = if step % 2 == 0 { ("b0", "b1") } else { ("b1", "b0") };
            let cur = self.sizes.numel(&shape);
            let outer = self.sizes.numel(&shape[..d]);
            let inner = self.sizes.numel(&shape[d + 1..]);
            let l = self.sizes.dim(&shape[d]);
            shape[d] = shape[d].scale(k);
            let on = self.sizes.dim(&shape[d]);
            let next = self.sizes.numel(&shape);
            s += &format!(
                "{{ let offs = {}; let (idx, w, ex) = ({}, {}, {});\n\
                   let (l, on) = ({l}, {on}); let (to, eo) = (offs[2 * l] as usize, offs[2 * l + 1] as usize);\n\
                   rt::kernels::resize::resample_axis(&{src}[..{cur}], {outer}, l, {inner}, &idx[to..to + on * {taps}], &w[to..to + on * {taps}], {taps}, &ex[eo..eo + on], {}, &mut {dst}[..{next}]); }}\n",
                self.cx.table(&offs),
                self.cx.table(&idx),
                self.cx.table_f64(&w),
                self.cx.table_u8(&ex),
                f64_lit(at.extrapolation_value as f64)
            );
            step += 1;
        }
        let last = if step % 2 == 1 { "b1" } else { "b0" };
        s += &format!("rt::kernels::resize::narrow(&{last}[..{}], {y});\n", self.sizes.numel(&shape));
        Ok(Some(s))
    }
}
