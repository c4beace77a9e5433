//! GridSample: X `[N, C, spatial…]` (1 to 3 spatial dims) sampled at the grid's normalized
//! coordinates `[N, out spatial…, k]`, by the runtime kernel `kernels::grid::grid_sample`; and
//! AffineGrid, which makes such a grid from affine transforms (`kernels::grid::affine_grid`).
use super::{input, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DimExpr, GridMode, GridPadding};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::grid as k;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridSample {
    pub mode: GridMode,
    pub padding: GridPadding,
    pub align_corners: bool,
}

/// The kernel's sizes as dim expressions (unused spatial slots 1).
struct Geometry {
    n: DimExpr,
    c: DimExpr,
    nsp: usize,
    input: [DimExpr; 3],
    output: [DimExpr; 3],
}

impl GridSample {
    fn geometry(cx: &mut ShapeCx) -> R<Geometry> {
        let (xs, gs) = (cx.arg(0)?.dims()?.to_vec(), cx.arg(1)?.dims()?.to_vec());
        let nsp = xs.len().saturating_sub(2);
        if !(1..=3).contains(&nsp) || gs.len() != xs.len() {
            return Err(format!("GridSample needs X [N, C, 1 to 3 spatial dims] and grid [N, spatial…, {nsp}], got ranks {} and {}", xs.len(), gs.len()));
        }
        cx.equal("the grid's last dim and X's spatial rank", &gs[gs.len() - 1], &DimExpr::constant(nsp as i64))?;
        cx.equal("the batches of X and the grid", &xs[0], &gs[0])?;
        let one = || DimExpr::constant(1);
        let (mut input, mut output) = ([one(), one(), one()], [one(), one(), one()]);
        input[..nsp].clone_from_slice(&xs[2..]);
        output[..nsp].clone_from_slice(&gs[1..gs.len() - 1]);
        Ok(Geometry { n: xs[0].clone(), c: xs[1].clone(), nsp, input, output })
    }
}

impl OpDef for GridSample {
    name!("GridSample");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    // [N, C, the grid's spatial dims].
    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (x, g) = (cx.arg(0)?.clone(), cx.arg(1)?.clone());
        if !x.dtype.is_float() || x.dtype != g.dtype {
            return Err(format!("GridSample needs X and grid of one float type, got {} and {}", x.dtype, g.dtype));
        }
        let dims = match (&x.dims, &g.dims) {
            (Some(_), Some(_)) => {
                let d = Self::geometry(cx)?;
                let mut out = vec![d.n, d.c];
                out.extend(d.output[..d.nsp].iter().cloned());
                Some(out)
            }
            _ => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, g) = (input(ins, 0)?, input(ins, 1)?);
        let (d, shape) = crate::interp::ops::grid::grid_dims(&x.shape, &g.shape)?;
        let len: usize = shape.iter().product();
        fn run<T: burnc_runtime::FloatElem>(x: &[T], g: &[T], d: &k::GridDims, op: &GridSample, len: usize) -> Vec<T> {
            let mut y = vec![T::zero(); len];
            k::grid_sample(x, g, d, op.mode, op.padding, op.align_corners, &mut y);
            y
        }
        let data = match (&x.data, &g.data) {
            (Data::F32(xv), Data::F32(gv)) => Data::F32(run(xv, gv, &d, self, len)),
            (Data::F64(xv), Data::F64(gv)) => Data::F64(run(xv, gv, &d, self, len)),
            (Data::F16(xv), Data::F16(gv)) => Data::F16(run(xv, gv, &d, self, len)),
            (Data::BF16(xv), Data::BF16(gv)) => Data::BF16(run(xv, gv, &d, self, len)),
            _ => return Err(format!("GridSample needs X and grid of one float type, got {} and {}", x.dtype(), g.dtype())),
        };
        Ok(vec![Tensor::new(shape, data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, g) = (cx.input(0)?, cx.input(1)?);
        let d = Self::geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        Ok(format!(
            "rt::kernels::grid::grid_sample({}, {}, &rt::kernels::grid::GridDims {{ n: {}, c: {}, nsp: {}, input: {}, output: {} }}, rt::kernels::grid::GridMode::{:?}, rt::kernels::grid::GridPadding::{:?}, {}, {});",
            cx.read(x)?,
            cx.read(g)?,
            cx.size(&d.n)?,
            cx.size(&d.c)?,
            d.nsp,
            cx.sizes(&d.input)?,
            cx.sizes(&d.output)?,
            self.mode,
            self.padding,
            self.align_corners,
            cx.write(cx.output(0)?)?
        ))
    }

    // About eight operations per output element (bilinear: four taps, two weights each).
    flops!(per_output 8);
}

/// AffineGrid `(theta [N, k, k + 1], size [N, C, (D,) H, W])` → the sampling grid
/// `[N, (D,) H, W, k]` (k = 2 or 3): theta applied to the normalized coordinates of each output
/// position. `size` decides the output's shape: a constant, or a shape computation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AffineGrid {
    pub align_corners: bool,
}

impl AffineGrid {
    /// The batch and spatial sizes from `size`, theta's dims checked against them; `None`
    /// while `size`'s values are not known.
    fn geometry(cx: &mut ShapeCx) -> R<Option<(DimExpr, Vec<DimExpr>)>> {
        let Some(size) = cx.ints(1) else { return Ok(None) };
        let ts = cx.arg(0)?.dims()?.to_vec();
        let nsp = size.len().saturating_sub(2);
        if !(2..=3).contains(&nsp) || ts.len() != 3 {
            return Err(format!("AffineGrid needs size [N, C, (D,) H, W] and theta [N, {nsp}, {}], got {} sizes and theta of rank {}", nsp + 1, size.len(), ts.len()));
        }
        if let Some(v) = size.iter().find_map(|d| d.as_const().filter(|&v| v < 0)) {
            return Err(format!("negative size {v}"));
        }
        cx.equal("theta's batch and size[0]", &ts[0], &size[0])?;
        cx.equal("theta's rows and the spatial rank", &ts[1], &DimExpr::constant(nsp as i64))?;
        cx.equal("theta's columns and the spatial rank + 1", &ts[2], &DimExpr::constant(nsp as i64 + 1))?;
        // The two are equal: the constant one, where there is one.
        let n = if ts[0].as_const().is_some() { ts[0].clone() } else { size[0].clone() };
        Ok(Some((n, size[2..].to_vec())))
    }
}

impl OpDef for AffineGrid {
    name!("AffineGrid");
    none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let t = cx.arg(0)?.clone();
        if !t.dtype.is_float() {
            return Err(format!("AffineGrid needs a float theta, got {}", t.dtype));
        }
        if !cx.arg(1)?.dtype.is_int() {
            return Err(format!("AffineGrid needs an integer size, got {}", cx.arg(1)?.dtype));
        }
        let dims = match t.dims {
            Some(_) => Self::geometry(cx)?.map(|(n, sp)| {
                let k = DimExpr::constant(sp.len() as i64);
                std::iter::once(n).chain(sp).chain([k]).collect()
            }),
            None => None,
        };
        Ok(vec![OutType { dtype: t.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let theta = input(ins, 0)?;
        let size = input(ins, 1)?;
        if !size.dtype().is_int() {
            return Err(format!("AffineGrid needs an integer size, got {}", size.dtype()));
        }
        let mut cx = ShapeCx::of_shapes([Some((theta.dtype(), &theta.shape[..])), Some((size.dtype(), &size.shape[..]))]);
        cx.set_ints(1, size.to_i64_vec().ok_or("size must be integers")?.into_iter().map(DimExpr::constant).collect());
        let (n, sp) = Self::geometry(&mut cx)?.ok_or("size must be given")?;
        let at = |d: &DimExpr| d.as_const().unwrap_or(0).max(0) as usize;
        let (n, sp): (usize, Vec<usize>) = (at(&n), sp.iter().map(at).collect());
        let mut shape = vec![n];
        shape.extend(&sp);
        shape.push(sp.len());
        let len = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("AffineGrid's output is too large")?;
        fn run<T: burnc_runtime::FloatElem>(theta: &[T], n: usize, sp: &[usize], align: bool, len: usize) -> Vec<T> {
            let mut y = vec![T::zero(); len];
            k::affine_grid(theta, n, sp, align, &mut y);
            y
        }
        let data = match &theta.data {
            Data::F32(v) => Data::F32(run(v, n, &sp, self.align_corners, len)),
            Data::F64(v) => Data::F64(run(v, n, &sp, self.align_corners, len)),
            Data::F16(v) => Data::F16(run(v, n, &sp, self.align_corners, len)),
            Data::BF16(v) => Data::BF16(run(v, n, &sp, self.align_corners, len)),
            _ => return Err(format!("AffineGrid needs a float theta, got {}", theta.dtype())),
        };
        Ok(vec![Tensor::new(shape, data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let theta = cx.input(0)?;
        let (n, sp) = Self::geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?.ok_or_else(|| cx.err("size must be a constant for codegen"))?;
        Ok(format!(
            "rt::kernels::grid::affine_grid({}, {}, &{}, {}, {});",
            cx.read(theta)?,
            cx.size(&n)?,
            cx.sizes(&sp)?,
            self.align_corners,
            cx.write(cx.output(0)?)?
        ))
    }

    // A k × (k + 1) product per output point: about three operations per output element.
    flops!(per_output 3);

    shape_inputs!(1);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 2, 3, 4], (0..48).map(|i| ((i * 5) % 9) as f32 - 4.0).collect());
    let grid = Tensor::from_f32s(vec![2, 2, 3, 2], (0..24).map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.1).collect());
    let op = |mode, padding, align_corners| OpRef::new(GridSample { mode, padding, align_corners });
    vec![
        super::Example { consts: vec![], op: op(GridMode::Linear, GridPadding::Zeros, false), inputs: vec![x.clone(), grid.clone()] },
        super::Example { consts: vec![], op: op(GridMode::Nearest, GridPadding::Reflection, true), inputs: vec![x, grid] },
        super::Example {
            consts: vec![1],
            op: OpRef::new(AffineGrid { align_corners: false }),
            inputs: vec![Tensor::from_f32s(vec![2, 2, 3], (0..12).map(|i| ((i * 5) % 7) as f32 / 4.0 - 0.7).collect()), Tensor::from_i64s(vec![4], vec![2, 3, 4, 5])],
        },
        super::Example {
            consts: vec![1],
            op: OpRef::new(AffineGrid { align_corners: true }),
            inputs: vec![Tensor::from_f32s(vec![1, 3, 4], (0..12).map(|i| ((i * 3) % 5) as f32 / 3.0 - 0.5).collect()), Tensor::from_i64s(vec![5], vec![1, 2, 2, 3, 4])],
        },
    ]
}
