//! Views: ops whose output 0 is input 0's bytes, under other dims (Flatten, Squeeze, Unsqueeze)
//! or unchanged (inference Dropout). [`OpDef::is_view`] says so: the memory plan gives output
//! 0 input 0's buffer where their sizes agree (`schedule::alias_source`), and the emitters write
//! a copy only where it did not ([`copy_unless_alias`], the GPU targets' `view_copy`).
use super::{fixed_size, input, numel, EmitCx, GradCx, IntoOp, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::{distinct_axes, norm_axis};
use crate::ir::{DType, DimExpr, ValueId};
use crate::tensor::{Data, Tensor};

/// Output 0 as a view of input 0 in generated code: nothing where the memory plan made it one,
/// else a copy (the source is a graph input or weight, or the plan kept them apart).
pub(crate) fn copy_unless_alias(cx: &EmitCx) -> Result<String, CodegenError> {
    let out = cx.output(0)?;
    if cx.is_alias(out) {
        return Ok(String::new());
    }
    Ok(format!("{}.copy_from_slice({});", cx.write(out)?, cx.read_input(0)?))
}

/// The rules a reshaping view has of its dims alone: its output is input 0's data under the
/// dims of its shape rule (evaluation), no code where the memory plan made it an alias, a copy
/// elsewhere (emitters), its values forwarded (shape computations), and the gradient dY under
/// X's dims.
macro_rules! view_rules {
    () => {
        fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
            eval_view(self, ins)
        }

        fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
            copy_unless_alias(cx)
        }

        fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
            Ok(cx.view_copy()?.into_iter().collect())
        }

        fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
            Ok(cx.view_copy()?.into_iter().collect())
        }

        fn is_view(&self) -> bool {
            true
        }

        fn forwards_values(&self, _: &[Option<Vec<i64>>]) -> Option<usize> {
            Some(0)
        }

        fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
            reshaped_back(cx)
        }
    };
}

/// A view's gradient: dY under X's dims (a view moves no data); the axes get none.
fn reshaped_back(cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
    let mut out = vec![None; cx.n.inputs.len()];
    out[0] = Some(cx.b.reshape_like(cx.dy()?, cx.input(0)?)?);
    Ok(out)
}

/// A view's output: input 0's data under the dims of the op's shape rule.
fn eval_view(op: &dyn OpDef, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
    let x = input(ins, 0)?;
    let outs = op.shapes(&mut ShapeCx::of_tensors(ins))?;
    let dims = outs.first().and_then(|o| o.dims.as_ref()).ok_or("the output's rank is not known")?;
    let shape = dims.iter().map(fixed_size).collect::<R<Vec<usize>>>()?;
    Ok(vec![Tensor::new(shape, x.data.clone())])
}

/// The output type of a view whose dims `dims` gives from input 0's (`None`: rank unknown).
fn view_type(cx: &ShapeCx, dims: impl FnOnce(&[DimExpr]) -> R<Option<Vec<DimExpr>>>) -> R<Vec<OutType>> {
    let x = cx.arg(0)?;
    let dims = match &x.dims {
        Some(xs) => dims(xs)?,
        None => None,
    };
    Ok(vec![OutType { dtype: x.dtype, dims }])
}

/// Axes from the attribute, or from input 1 (a constant or a shape computation); `None` when
/// input 1 is given but its values are not known yet.
fn axes(attr: &Option<Vec<i64>>, cx: &ShapeCx) -> Option<Vec<i64>> {
    match attr {
        Some(a) => Some(a.clone()),
        None if cx.opt(1).is_none() => Some(vec![]),
        None => cx.ints(1)?.iter().map(DimExpr::as_const).collect(),
    }
}

/// Flatten: `[d0 … d(axis−1), d(axis) …]` as `[product before, product from]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flatten {
    pub axis: i64,
}

impl OpDef for Flatten {
    name!("Flatten");
    none_of!(scratch_bytes, in_place, decides_shapes, flops);
    view_rules!();

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        view_type(cx, |xs| {
            let r = xs.len() as i64;
            let a = if self.axis < 0 { self.axis + r } else { self.axis };
            if a < 0 || a > r {
                return Err(format!("axis {} is out of range for rank {r}", self.axis));
            }
            let (before, from) = xs.split_at(a as usize);
            Ok(Some(vec![super::product(before), super::product(from)]))
        })
    }
}

/// Squeeze: the listed axes of size 1 removed (every axis of size 1 when none are listed).
/// Axes from the attribute, or input 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Squeeze {
    pub axes: Option<Vec<i64>>,
}

impl OpDef for Squeeze {
    name!("Squeeze");
    none_of!(scratch_bytes, in_place, flops);
    view_rules!();

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let axes = axes(&self.axes, cx);
        view_type(cx, |xs| {
            let Some(axes) = axes else { return Ok(None) };
            if axes.is_empty() {
                // Which dims are 1 is known only for constants: a named dim may be 1 at run time.
                if xs.iter().any(|d| d.as_const().is_none()) {
                    return Ok(None);
                }
                return Ok(Some(xs.iter().filter(|d| d.as_const() != Some(1)).cloned().collect()));
            }
            let ax = distinct_axes(&axes, xs.len(), norm_axis)?;
            for &a in &ax {
                match xs[a].as_const() {
                    Some(d) if d != 1 => return Err(format!("cannot squeeze axis {a} of size {d}")),
                    _ => {}
                }
            }
            Ok(Some(xs.iter().enumerate().filter(|(i, _)| !ax.contains(i)).map(|(_, d)| d.clone()).collect()))
        })
    }

    // The axes input decides the output's rank.
    shape_inputs!(1);
}

/// Unsqueeze: dims of size 1 inserted at the listed axes (of the output). Axes from the
/// attribute, or input 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsqueeze {
    pub axes: Option<Vec<i64>>,
}

impl OpDef for Unsqueeze {
    name!("Unsqueeze");
    none_of!(scratch_bytes, in_place, flops);
    view_rules!();

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let axes = match (&self.axes, cx.opt(1)) {
            (None, None) => return Err("missing axes".into()),
            _ => axes(&self.axes, cx),
        };
        view_type(cx, |xs| {
            let Some(axes) = axes else { return Ok(None) };
            let r = xs.len() + axes.len();
            let ax = distinct_axes(&axes, r, norm_axis)?;
            let mut src = xs.iter();
            (0..r).map(|i| if ax.contains(&i) { Some(DimExpr::constant(1)) } else { src.next().cloned() }).collect::<Option<Vec<_>>>().ok_or_else(|| "bad axes".to_string()).map(Some)
        })
    }

    shape_inputs!(1);
}

/// Dropout `(x, key?) → (y, mask?)`. Inference (`training: false`): y = x, a view, and the
/// mask all true. Training: each element is kept with probability 1 − `ratio` by a
/// counter-based hash of (key, element index), kept values scaled by 1 / (1 − ratio); `key` is
/// an integer scalar, new each step, so the same key gives the same mask (the gradient
/// recomputes it instead of storing it). `autodiff::enable_dropout` switches a graph's
/// inference Dropouts to training ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dropout {
    pub ratio: f32,
    pub training: bool,
}

impl OpDef for Dropout {
    name!("Dropout");
    none_of!(scratch_bytes, in_place, decides_shapes);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims.clone() }, OutType { dtype: DType::Bool, dims: x.dims.clone() }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        if !self.training {
            return Ok(vec![x.clone(), Tensor::new(x.shape.clone(), Data::Bool(vec![true; x.numel()]))]);
        }
        if !x.dtype().is_float() {
            return Err(format!("training-mode Dropout needs a float input, got {}", x.dtype()));
        }
        let key = ins.get(1).copied().flatten().ok_or("training-mode Dropout needs its key input")?;
        let key = match key.to_i64_vec().as_deref() {
            Some([k]) => *k as u64,
            _ => return Err(format!("the key must be one integer, got {} {:?}", key.dtype(), key.shape)),
        };
        let mut m = vec![0u8; x.numel()];
        let data = crate::map_float_data!(&x.data, v => {
            let mut out = v.clone();
            burnc_runtime::kernels::dropout::dropout(v, &mut out, key, self.ratio, &mut m);
            out
        }, other => return Err("unreachable: not a float".into()));
        let mask = Data::Bool(m.iter().map(|&k| k != 0).collect());
        Ok(vec![Tensor::new(x.shape.clone(), data), Tensor::new(x.shape.clone(), mask)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let mask = cx.used_output(1).map(|m| cx.write(m)).transpose()?;
        if self.training {
            let key = cx.opt_input(1).ok_or_else(|| cx.err("training-mode Dropout needs its key input"))?;
            let m = mask.unwrap_or_else(|| "&mut []".into());
            return Ok(format!(
                "rt::kernels::dropout::dropout({}, {}, ({})[0] as u64, {}, {m});",
                cx.read_input(0)?,
                cx.write(cx.output(0)?)?,
                cx.read(key)?,
                crate::codegen::emit::f32_lit(self.ratio)
            ));
        }
        let mut code = copy_unless_alias(cx)?;
        if let Some(m) = mask {
            code.push_str(&format!("{m}.fill(1);"));
        }
        Ok(code)
    }

    // Inference Dropout's mask keeps every element.
    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        if self.training {
            return Err(cx.err("training Dropout is not supported by the CUDA target yet"));
        }
        let mut ks: Vec<super::CudaKernel> = cx.view_copy()?.into_iter().collect();
        if let Some(&mask) = cx.outputs().get(1) {
            let n = cx.ty(mask)?.1.iter().product();
            ks.push(cx.pointwise_as("_mask", n, &format!("{}[i] = 1;", cx.ptr(mask)?)));
        }
        Ok(ks)
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        if self.training {
            return Err(cx.unsupported());
        }
        let mut ks: Vec<super::WgslKernel> = cx.view_copy()?.into_iter().collect();
        if cx.has_output(1) {
            ks.push(cx.pointwise_as("_mask", &cx.output(1)?, |_| Ok((String::new(), "1u".into())))?);
        }
        Ok(ks)
    }

    fn is_view(&self) -> bool {
        !self.training
    }

    // One FLOP per element (the scale), as the elementwise ops count.
    fn flops(&self, _: &[Option<Vec<usize>>], outputs: &[Option<Vec<usize>>]) -> Option<u64> {
        numel(outputs.first()?)
    }

    fn forwards_values(&self, _: &[Option<Vec<i64>>]) -> Option<usize> {
        (!self.training).then_some(0)
    }

    // Training: the same Dropout (same key and ratio) of dY, its mask recomputed.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let dy = cx.dy()?;
        if !self.training {
            return Ok(vec![Some(dy)]);
        }
        let key = cx.input(1).map_err(|_| "training-mode Dropout without its key input".to_string())?;
        let dx = cx.b.node(self.op(), &[dy, key])?;
        Ok(vec![Some(dx), None])
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 1], (0..6).map(|i| i as f32 - 2.5).collect());
    let xi = Tensor::from_i64s(vec![3, 1], vec![4, -1, 7]);
    let ax = |v: Vec<i64>| Tensor::from_i64s(vec![v.len()], v);
    vec![
        super::Example { consts: vec![], op: OpRef::new(Flatten { axis: 1 }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(Flatten { axis: -1 }), inputs: vec![xi.clone()] },
        super::Example { consts: vec![], op: OpRef::new(Squeeze { axes: Some(vec![-1]) }), inputs: vec![x.clone()] },
        super::Example { consts: vec![1], op: OpRef::new(Squeeze { axes: None }), inputs: vec![xi.clone(), ax(vec![1])] },
        super::Example { consts: vec![], op: OpRef::new(Unsqueeze { axes: Some(vec![0, -1]) }), inputs: vec![x.clone()] },
        super::Example { consts: vec![1], op: OpRef::new(Unsqueeze { axes: None }), inputs: vec![xi, ax(vec![1])] },
        super::Example { consts: vec![], op: OpRef::new(Dropout { ratio: 0.5, training: false }), inputs: vec![x] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::{generate, CodegenOptions};
    use crate::ir::{Graph, Op, Shape, TensorType, UnaryOp, ValueKind, ValueType};

    #[test]
    fn views_keep_the_data_under_their_dims() {
        let x = Tensor::from_f32s(vec![2, 1, 3], (0..6).map(|i| i as f32).collect());
        let dims = |op: &dyn OpDef, ins: &[Option<&Tensor>]| op.eval(ins).map(|y| y[0].shape.clone());
        assert_eq!(dims(&Flatten { axis: 2 }, &[Some(&x)]), Ok(vec![2, 3]));
        assert_eq!(dims(&Flatten { axis: 0 }, &[Some(&x)]), Ok(vec![1, 6]));
        assert!(Flatten { axis: 4 }.eval(&[Some(&x)]).is_err());
        assert_eq!(dims(&Squeeze { axes: None }, &[Some(&x)]), Ok(vec![2, 3]));
        assert_eq!(dims(&Squeeze { axes: Some(vec![-2]) }, &[Some(&x)]), Ok(vec![2, 3]));
        assert!(Squeeze { axes: Some(vec![0]) }.eval(&[Some(&x)]).is_err());
        assert!(Squeeze { axes: Some(vec![1, -2]) }.eval(&[Some(&x)]).is_err());
        let one = Tensor::from_i64s(vec![1], vec![1]);
        assert_eq!(dims(&Unsqueeze { axes: None }, &[Some(&x), Some(&one)]), Ok(vec![2, 1, 1, 3]));
        assert_eq!(dims(&Unsqueeze { axes: Some(vec![0, 4]) }, &[Some(&x)]), Ok(vec![1, 2, 1, 3, 1]));
        assert!(Unsqueeze { axes: None }.eval(&[Some(&x)]).is_err());
        assert_eq!(Flatten { axis: 1 }.eval(&[Some(&x)]).map(|y| y[0].to_f64_vec()), Ok(x.to_f64_vec()));
    }

    #[test]
    fn squeeze_of_a_named_dim_without_axes_has_no_known_rank() {
        let mut cx = ShapeCx::new(vec![Some(super::super::Arg { dtype: DType::F32, dims: Some(vec![DimExpr::var("N"), DimExpr::constant(1)]), value: None })]);
        let out = Squeeze { axes: None }.shapes(&mut cx).map(|o| o[0].dims.clone());
        assert_eq!(out, Ok(None));
    }

    #[test]
    fn inference_dropout_is_the_identity_and_a_view() {
        let x = Tensor::from_f32s(vec![4], vec![1., -2., 3., 0.5]);
        let d = Dropout { ratio: 0.5, training: false };
        let y = d.eval(&[Some(&x)]).expect("evaluates");
        assert_eq!(y[0], x);
        assert_eq!(y[1], Tensor::new(vec![4], Data::Bool(vec![true; 4])));
        assert!(d.is_view() && !Dropout { ratio: 0.5, training: true }.is_view());
    }

    /// x → Tanh → Dropout → Tanh, the Dropout in `training` mode (keyed by an i64 input).
    fn dropout_graph(training: bool) -> Graph {
        let mut g = Graph::default();
        let ty = |d: DType, s: &[usize]| ValueType::Tensor(TensorType { dtype: d, shape: Some(Shape::fixed(s)) });
        let x = g.add_value("x", ty(DType::F32, &[2, 8]), ValueKind::Input);
        g.inputs = vec![x];
        let a = g.add_node("a", Op::Unary(UnaryOp::Tanh), vec![Some(x)], &["a".into()]).1[0];
        let d = g.add_node("d", Dropout { ratio: 0.25, training: false }.op(), vec![Some(a)], &["d".into()]).1[0];
        let y = g.add_node("y", Op::Unary(UnaryOp::Tanh), vec![Some(d)], &["y".into()]).1[0];
        g.outputs = vec![y];
        if training {
            let k = g.add_value("key", ty(DType::I64, &[]), ValueKind::Input);
            g.inputs.push(k);
            assert_eq!(crate::autodiff::enable_dropout(&mut g, k).expect("switches"), 1);
        }
        crate::passes::prepare(&mut g).expect("prepares");
        g
    }

    #[test]
    fn inference_is_a_free_alias_and_training_calls_the_kernel() {
        let opts = CodegenOptions::default();
        let inf = generate(&dropout_graph(false), &opts).expect("generates").source;
        assert!(!inf.contains("dropout"), "{inf}");
        let tr = generate(&dropout_graph(true), &opts).expect("generates").source;
        assert!(tr.contains("rt::kernels::dropout::dropout("), "{tr}");
        assert!(tr.contains("[0] as u64"), "{tr}");
        // The interpreter runs the same graph.
        let out = crate::interp::run(
            &dropout_graph(true),
            vec![
                crate::interp::RtValue::Tensor(Tensor::from_f32s(vec![2, 8], vec![0.5; 16])),
                crate::interp::RtValue::Tensor(Tensor::scalar_i64(3)),
            ],
        )
        .expect("runs");
        assert_eq!(out.len(), 1);
    }
}
