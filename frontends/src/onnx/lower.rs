//! Opset-aware lowering of ONNX nodes onto burnc's core ops.
use burnc_compiler::ops::pool::{GlobalPool, Pool};
use burnc_compiler::ops::matmul::{Gemm, MatMul};
use burnc_compiler::ops::view::{Dropout, Flatten, Squeeze, Unsqueeze};
use super::attrs::Attrs;
use super::import::{node_label, Ctx};
use super::proto::NodeProto;
use super::{tensor, OnnxError};
use burnc_compiler::ir::{
    AutoPad, BinaryOp, DType, Op, PadMode, PoolKind, ReduceOp, ScatterReduction, SeqOp, UnaryOp,
    ValueId, Window,
};
use burnc_compiler::ir::{GridMode, GridPadding};
use burnc_compiler::ops::{activation, channel_norm, softmax, IntoOp, OpRef};
use burnc_compiler::Tensor;

struct N<'n> {
    node: &'n NodeProto,
    label: String,
    opset: i64,
}

impl N<'_> {
    fn err(&self, reason: impl Into<String>) -> OnnxError {
        OnnxError::Node { node: self.label.clone(), op: self.node.op_type().into(), opset: self.opset, reason: reason.into() }
    }
    fn attrs(&self) -> Attrs<'_> {
        Attrs(&self.node.attribute)
    }
}

fn usize_vec(n: &N, name: &str, v: Option<Vec<i64>>) -> Result<Vec<usize>, OnnxError> {
    v.unwrap_or_default()
        .into_iter()
        .map(|x| usize::try_from(x).map_err(|_| n.err(format!("attribute {name} has negative value {x}"))))
        .collect()
}

fn window(n: &N) -> Result<Window, OnnxError> {
    let a = n.attrs();
    let auto_pad = match a.s_or("auto_pad", "NOTSET").as_str() {
        "NOTSET" | "" => AutoPad::NotSet,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        other => return Err(n.err(format!("unknown auto_pad `{other}`"))),
    };
    Ok(Window {
        kernel_shape: usize_vec(n, "kernel_shape", a.ints("kernel_shape"))?,
        strides: usize_vec(n, "strides", a.ints("strides"))?,
        pads: usize_vec(n, "pads", a.ints("pads"))?,
        dilations: usize_vec(n, "dilations", a.ints("dilations"))?,
        auto_pad,
        ceil_mode: a.i_or("ceil_mode", 0) != 0,
    })
}

fn reduction(n: &N) -> Result<ScatterReduction, OnnxError> {
    Ok(match n.attrs().s_or("reduction", "none").as_str() {
        "none" => ScatterReduction::None,
        "add" => ScatterReduction::Add,
        "mul" => ScatterReduction::Mul,
        "max" => ScatterReduction::Max,
        "min" => ScatterReduction::Min,
        r => return Err(n.err(format!("unknown reduction `{r}`"))),
    })
}

fn dtype_attr(n: &N, name: &str) -> Result<Option<DType>, OnnxError> {
    match n.attrs().i(name) {
        None => Ok(None),
        Some(code) => DType::from_onnx_code(code as i32)
            .map(Some)
            .ok_or_else(|| n.err(format!("{name}: element type {} is not supported", burnc_compiler::ir::onnx_code_name(code as i32)))),
    }
}

pub fn lower_node(ctx: &mut Ctx, node: &NodeProto) -> Result<(), OnnxError> {
    let n = N { node, label: node_label(node), opset: ctx.opset };
    let domain = node.domain();
    if domain == "ai.onnx.preview" && node.op_type() == "FlexAttention" {
        return super::flex::lower(ctx, node);
    }
    if domain == "ai.onnx.preview.training" {
        return super::training::lower(ctx, node);
    }
    if domain == "ai.onnx.ml" {
        return super::ml::lower(ctx, node, ctx.opset);
    }
    if domain == super::nchwc::DOMAIN {
        return super::nchwc::lower(ctx, node);
    }
    if !matches!(domain, "" | "ai.onnx" | "com.microsoft") {
        return Err(OnnxError::UnsupportedOp {
            node: n.label.clone(),
            op: node.op_type().into(),
            domain: domain.into(),
            opset: ctx.opset,
        });
    }
    let mut inputs: Vec<Option<ValueId>> = Vec::with_capacity(node.input.len());
    for name in &node.input {
        inputs.push(ctx.lookup(&n.label, name)?);
    }
    let a = n.attrs();
    let op_type = node.op_type();
    let opset = ctx.opset;
    // onnxruntime's contrib ops, apart: some share a name with a standard op of other semantics.
    if domain == "com.microsoft" {
        if super::contrib::lower(ctx, node, &inputs)? {
            return Ok(());
        }
        let op = match op_type {
            "BiasSplitGelu" => Op::Def(OpRef::new(activation::BiasSplitGelu)),
            _ => return Err(OnnxError::UnsupportedOp { node: n.label.clone(), op: op_type.into(), domain: domain.into(), opset }),
        };
        return emit(ctx, &n, op, inputs);
    }

    // Ops that lower to something other than one core node.
    match op_type {
        "Constant" => return lower_constant(ctx, &n),
        "TfIdfVectorizer" => return super::ml::tfidf(ctx, node, opset),
        "Sum" | "Mean" | "Max" | "Min" => {
            let bop = match op_type {
                "Max" => BinaryOp::Max,
                "Min" => BinaryOp::Min,
                _ => BinaryOp::Add,
            };
            let ins: Vec<ValueId> = inputs.iter().flatten().copied().collect();
            let Some((&first, rest)) = ins.split_first() else { return Err(n.err("needs at least one input")) };
            let out_name = node.output.first().cloned().unwrap_or_default();
            let mut acc = first;
            if rest.is_empty() {
                return emit(ctx, &n, Op::Unary(UnaryOp::Identity), vec![Some(acc)]);
            }
            for (i, &v) in rest.iter().enumerate() {
                let last = i + 1 == rest.len() && op_type != "Mean";
                let name = if last { out_name.clone() } else { ctx.fresh(&out_name) };
                let (_, outs) = ctx.graph.add_node(n.label.clone(), Op::Binary(bop), vec![Some(acc), Some(v)], &[name]);
                set_source(ctx, &n);
                acc = outs[0];
            }
            if op_type == "Mean" {
                // Divide by the count, as a scalar of the input's dtype (CastLike at run time).
                let count = ctx.constant(&out_name, Tensor::from_f32s(vec![], vec![ins.len() as f32]));
                let cname = ctx.fresh(&out_name);
                let (_, c) = ctx.graph.add_node(n.label.clone(), burnc_compiler::ops::cast::like(true), vec![Some(count), Some(acc)], &[cname]);
                let (_, outs) = ctx.graph.add_node(n.label.clone(), Op::Binary(BinaryOp::Div), vec![Some(acc), Some(c[0])], &[out_name.clone()]);
                set_source(ctx, &n);
                acc = outs[0];
            }
            ctx.bind(&out_name, acc);
            return Ok(());
        }
        "Clip" => {
            // Opset < 11: min/max attributes; later: optional inputs. Lowered to Max then Min.
            let x = inputs.first().copied().flatten().ok_or_else(|| n.err("missing input"))?;
            let out_name = node.output.first().cloned().unwrap_or_default();
            let (lo, hi) = if opset < 11 {
                let lo = a.f("min").map(|v| ctx.constant(&out_name, Tensor::from_f32s(vec![], vec![v])));
                let hi = a.f("max").map(|v| ctx.constant(&out_name, Tensor::from_f32s(vec![], vec![v])));
                let cast = |ctx: &mut Ctx, v: Option<ValueId>| {
                    v.map(|v| {
                        let name = ctx.fresh(&out_name);
                        ctx.graph.add_node(n.label.clone(), burnc_compiler::ops::cast::like(true), vec![Some(v), Some(x)], &[name]).1[0]
                    })
                };
                (cast(ctx, lo), cast(ctx, hi))
            } else {
                (inputs.get(1).copied().flatten(), inputs.get(2).copied().flatten())
            };
            let mut acc = x;
            let steps: Vec<(BinaryOp, ValueId)> =
                [(BinaryOp::Max, lo), (BinaryOp::Min, hi)].into_iter().filter_map(|(o, v)| v.map(|v| (o, v))).collect();
            if steps.is_empty() {
                return emit(ctx, &n, Op::Unary(UnaryOp::Identity), vec![Some(x)]);
            }
            for (i, (bop, v)) in steps.iter().enumerate() {
                let name = if i + 1 == steps.len() { out_name.clone() } else { ctx.fresh(&out_name) };
                let (_, outs) = ctx.graph.add_node(n.label.clone(), Op::Binary(*bop), vec![Some(acc), Some(*v)], &[name]);
                set_source(ctx, &n);
                acc = outs[0];
            }
            ctx.bind(&out_name, acc);
            return Ok(());
        }
        "Dropout" => {
            // Inference form (a free view; the mask, when asked for, is all true). ONNX's
            // training_mode is not honoured here: a train-graph builder switches Dropouts on
            // (`autodiff::enable_dropout`) with its own key per step.
            let x = inputs.first().copied().flatten();
            let ratio = if opset < 12 {
                a.f_or("ratio", 0.5)
            } else {
                inputs
                    .get(1)
                    .copied()
                    .flatten()
                    .and_then(|r| ctx.graph.const_value(r))
                    .and_then(|t| t.to_f64_vec().first().copied())
                    .map_or(0.5, |r| r as f32)
            };
            let mut outs: Vec<String> = vec![node.output.first().cloned().unwrap_or_default()];
            if let Some(mask) = node.output.get(1).filter(|m| !m.is_empty()) {
                outs.push(mask.clone());
            }
            let (_, vals) = ctx.graph.add_node(n.label.clone(), Dropout { ratio, training: false }.op(), vec![x], &outs);
            set_source(ctx, &n);
            for (name, v) in outs.iter().zip(vals) {
                ctx.bind(name, v);
            }
            return Ok(());
        }
        _ => {}
    }

    let unary = |u: UnaryOp| Some(Op::Unary(u));
    let binary = |b: BinaryOp| Some(Op::Binary(b));
    let op: Option<Op> = match op_type {
        "Identity" => unary(UnaryOp::Identity),
        "Abs" => unary(UnaryOp::Abs),
        "Neg" => unary(UnaryOp::Neg),
        "Exp" => unary(UnaryOp::Exp),
        "Log" => unary(UnaryOp::Log),
        "Sqrt" => unary(UnaryOp::Sqrt),
        "Reciprocal" => unary(UnaryOp::Reciprocal),
        "Floor" => unary(UnaryOp::Floor),
        "Ceil" => unary(UnaryOp::Ceil),
        "Round" => unary(UnaryOp::Round),
        "Sign" => unary(UnaryOp::Sign),
        "Sin" => unary(UnaryOp::Sin),
        "Cos" => unary(UnaryOp::Cos),
        "Tan" => unary(UnaryOp::Tan),
        "Asin" => unary(UnaryOp::Asin),
        "Acos" => unary(UnaryOp::Acos),
        "Atan" => unary(UnaryOp::Atan),
        "Sinh" => unary(UnaryOp::Sinh),
        "Cosh" => unary(UnaryOp::Cosh),
        "Asinh" => unary(UnaryOp::Asinh),
        "Acosh" => unary(UnaryOp::Acosh),
        "Atanh" => unary(UnaryOp::Atanh),
        "Erf" => unary(UnaryOp::Erf),
        "Relu" => unary(UnaryOp::Relu),
        "Sigmoid" => unary(UnaryOp::Sigmoid),
        "Tanh" => unary(UnaryOp::Tanh),
        "Softplus" => unary(UnaryOp::Softplus),
        "Softsign" => unary(UnaryOp::Softsign),
        "Not" => unary(UnaryOp::Not),
        "BitwiseNot" => unary(UnaryOp::BitwiseNot),
        "IsNaN" => unary(UnaryOp::IsNaN),
        "IsInf" => unary(UnaryOp::IsInf {
            detect_negative: a.i_or("detect_negative", 1) != 0,
            detect_positive: a.i_or("detect_positive", 1) != 0,
        }),
        "LeakyRelu" => unary(UnaryOp::LeakyRelu { alpha: a.f_or("alpha", 0.01) }),
        "Elu" => unary(UnaryOp::Elu { alpha: a.f_or("alpha", 1.0) }),
        "Selu" => unary(UnaryOp::Selu { alpha: a.f_or("alpha", 1.673_263_2), gamma: a.f_or("gamma", 1.050_701) }),
        "Celu" => unary(UnaryOp::Celu { alpha: a.f_or("alpha", 1.0) }),
        "HardSigmoid" => unary(UnaryOp::HardSigmoid { alpha: a.f_or("alpha", 0.2), beta: a.f_or("beta", 0.5) }),
        "HardSwish" => unary(UnaryOp::HardSwish),
        "ThresholdedRelu" => unary(UnaryOp::ThresholdedRelu { alpha: a.f_or("alpha", 1.0) }),
        "Gelu" => unary(UnaryOp::Gelu { tanh_approx: a.s_or("approximate", "none") == "tanh" }),
        "Mish" => unary(UnaryOp::Mish),
        "Add" => binary(BinaryOp::Add),
        "Sub" => binary(BinaryOp::Sub),
        "Mul" => binary(BinaryOp::Mul),
        "Div" => binary(BinaryOp::Div),
        "Pow" => binary(BinaryOp::Pow),
        "Mod" => binary(BinaryOp::Mod { fmod: a.i_or("fmod", 0) != 0 }),
        "And" => binary(BinaryOp::And),
        "Or" => binary(BinaryOp::Or),
        "Xor" => binary(BinaryOp::Xor),
        "Equal" => binary(BinaryOp::Equal),
        "Less" => binary(BinaryOp::Less),
        "LessOrEqual" => binary(BinaryOp::LessOrEqual),
        "Greater" => binary(BinaryOp::Greater),
        "GreaterOrEqual" => binary(BinaryOp::GreaterOrEqual),
        "BitShift" => match a.s("direction").as_deref() {
            Some("LEFT") => binary(BinaryOp::BitShiftLeft),
            Some("RIGHT") => binary(BinaryOp::BitShiftRight),
            d => return Err(n.err(format!("direction must be LEFT or RIGHT, got {d:?}"))),
        },
        "BitwiseAnd" => binary(BinaryOp::BitAnd),
        "BitwiseOr" => binary(BinaryOp::BitOr),
        "BitwiseXor" => binary(BinaryOp::BitXor),
        "PRelu" => binary(BinaryOp::PRelu),
        "Where" => Some(burnc_compiler::ops::select::op()),
        "Cast" => {
            let to = dtype_attr(&n, "to")?.ok_or_else(|| n.err("missing attribute `to`"))?;
            let round_mode = a.s_or("round_mode", "up");
            if round_mode != "up" && to == DType::F8E8M0 {
                return Err(n.err(format!("round_mode `{round_mode}` is not supported (only \"up\")")));
            }
            Some(burnc_compiler::ops::cast::op(to, a.i_or("saturate", 1) != 0))
        }
        "BitCast" => Some(burnc_compiler::ops::cast::BitCast { to: dtype_attr(&n, "to")?.ok_or_else(|| n.err("missing attribute `to`"))? }.op()),
        "CastLike" => Some(burnc_compiler::ops::cast::like(a.i_or("saturate", 1) != 0)),
        "MatMul" => Some(MatMul.op()),
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => Some(burnc_compiler::ops::loss::NllLoss {
            softmax: op_type == "SoftmaxCrossEntropyLoss",
            reduction: match a.s_or("reduction", "mean").as_str() {
                "none" => burnc_compiler::ir::LossReduction::None,
                "sum" => burnc_compiler::ir::LossReduction::Sum,
                "mean" => burnc_compiler::ir::LossReduction::Mean,
                r => return Err(n.err(format!("unknown reduction `{r}`"))),
            },
            ignore_index: a.i("ignore_index"),
        }
        .op()),
        "RMSNormalization" => Some(burnc_compiler::ops::norm::RmsNorm { axis: a.i_or("axis", -1), epsilon: a.f_or("epsilon", 1e-5) }.op()),
        // onnxruntime's name for RMS normalization (its transformer optimizer writes it in the
        // default domain, before ONNX had RMSNormalization); its inverse-deviation output is
        // not supported.
        "SimplifiedLayerNormalization" => {
            if node.output.get(1).is_some_and(|o| !o.is_empty()) {
                return Err(n.err("the inv_std_var output is not supported"));
            }
            Some(burnc_compiler::ops::norm::RmsNorm { axis: a.i_or("axis", -1), epsilon: a.f_or("epsilon", 1e-5) }.op())
        }
        "Attention" => Some(burnc_compiler::ops::attention::Attention {
            is_causal: a.i_or("is_causal", 0) != 0,
            q_num_heads: a.i("q_num_heads").map(|v| v.max(0) as usize),
            kv_num_heads: a.i("kv_num_heads").map(|v| v.max(0) as usize),
            qk_matmul_output_mode: a.i_or("qk_matmul_output_mode", 0),
            scale: a.f("scale"),
            softcap: a.f_or("softcap", 0.0),
            left_window_size: a.i_or("left_window_size", -1),
            right_window_size: a.i_or("right_window_size", -1),
        }
        .op()),
        "CausalConvWithState" => Some(burnc_compiler::ops::causal_conv::CausalConv {
            silu: match a.s_or("activation", "none").as_str() {
                "none" => false,
                "silu" | "swish" => true,
                other => return Err(n.err(format!("unknown activation `{other}`"))),
            },
        }
        .op()),
        "LinearAttention" => {
            let heads = |name: &str| -> Result<usize, OnnxError> {
                let v = a.i(name).ok_or_else(|| n.err(format!("missing attribute `{name}`")))?;
                usize::try_from(v).map_err(|_| n.err(format!("{name} must be positive, got {v}")))
            };
            let (gated, delta) = match a.s_or("update_rule", "gated_delta").as_str() {
                "linear" => (false, false),
                "gated" => (true, false),
                "delta" => (false, true),
                "gated_delta" => (true, true),
                other => return Err(n.err(format!("unknown update_rule `{other}`"))),
            };
            Some(
                burnc_compiler::ops::linear_attention::LinearAttention {
                    q_num_heads: heads("q_num_heads")?,
                    kv_num_heads: heads("kv_num_heads")?,
                    scale: a.f("scale"),
                    gated,
                    delta,
                }
                .op(),
            )
        }
        "Gemm" => Some(
            Gemm {
                alpha: a.f_or("alpha", 1.0),
                beta: a.f_or("beta", 1.0),
                trans_a: a.i_or("transA", 0) != 0,
                trans_b: a.i_or("transB", 0) != 0,
            }
            .op(),
        ),
        "Conv" => Some(Op::Conv { window: window(&n)?, group: a.i_or("group", 1).max(1) as usize }),
        "ConvTranspose" => Some(
            burnc_compiler::ops::conv_transpose::ConvTranspose {
                window: window(&n)?,
                group: a.i_or("group", 1).max(1) as usize,
                output_padding: usize_vec(&n, "output_padding", a.ints("output_padding"))?,
                output_shape: usize_vec(&n, "output_shape", a.ints("output_shape"))?,
            }
            .op(),
        ),
        "MaxPool" => Some(Pool { kind: PoolKind::Max, window: window(&n)?, column_major: a.i_or("storage_order", 0) != 0 }.op()),
        "AveragePool" => Some(Pool { kind: PoolKind::Avg { count_include_pad: a.i_or("count_include_pad", 0) != 0 }, window: window(&n)?, column_major: false }.op()),
        "LpPool" => Some(Pool { kind: PoolKind::Lp { p: a.i_or("p", 2) as f32 }, window: window(&n)?, column_major: false }.op()),
        "GlobalMaxPool" => Some(GlobalPool { kind: PoolKind::Max }.op()),
        "GlobalAveragePool" => Some(GlobalPool { kind: PoolKind::Avg { count_include_pad: true } }.op()),
        "GlobalLpPool" => Some(GlobalPool { kind: PoolKind::Lp { p: a.i_or("p", 2) as f32 } }.op()),
        "BatchNormalization" => {
            if a.i_or("training_mode", 0) != 0 {
                Some(channel_norm::BatchNormTraining { epsilon: a.f_or("epsilon", 1e-5), momentum: a.f_or("momentum", 0.9) }.op())
            } else {
                Some(channel_norm::BatchNorm { epsilon: a.f_or("epsilon", 1e-5) }.op())
            }
        }
        "InstanceNormalization" => Some(channel_norm::InstanceNorm::op(a.f_or("epsilon", 1e-5))),
        "LayerNormalization" => Some(burnc_compiler::ops::norm::LayerNorm { axis: a.i_or("axis", -1), epsilon: a.f_or("epsilon", 1e-5) }.op()),
        "LRN" => Some(
            channel_norm::Lrn {
                size: a.i("size").ok_or_else(|| n.err("missing attribute `size`"))?.max(1) as usize,
                alpha: a.f_or("alpha", 1e-4),
                beta: a.f_or("beta", 0.75),
                bias: a.f_or("bias", 1.0),
            }
            .op(),
        ),
        "LpNormalization" => Some(burnc_compiler::ops::norm::LpNorm { axis: a.i_or("axis", -1), p: a.i_or("p", 2) }.op()),
        "MeanVarianceNormalization" => Some(channel_norm::MeanVarianceNorm::op(a.ints("axes").unwrap_or(vec![0, 2, 3]))),
        "Softmax" | "LogSoftmax" => Some(
            softmax::Softmax { axis: a.i_or("axis", if opset < 13 { 1 } else { -1 }), log: op_type == "LogSoftmax", coerce_2d: opset < 13 }.op(),
        ),
        "Hardmax" => Some(softmax::Hardmax { axis: a.i_or("axis", if opset < 13 { 1 } else { -1 }), coerce_2d: opset < 13 }.op()),
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1" | "ReduceL2" | "ReduceLogSum"
        | "ReduceLogSumExp" | "ReduceSumSquare" => {
            let rop = match op_type {
                "ReduceSum" => ReduceOp::Sum,
                "ReduceMean" => ReduceOp::Mean,
                "ReduceMax" => ReduceOp::Max,
                "ReduceMin" => ReduceOp::Min,
                "ReduceProd" => ReduceOp::Prod,
                "ReduceL1" => ReduceOp::L1,
                "ReduceL2" => ReduceOp::L2,
                "ReduceLogSum" => ReduceOp::LogSum,
                "ReduceLogSumExp" => ReduceOp::LogSumExp,
                _ => ReduceOp::SumSquare,
            };
            Some(
                burnc_compiler::ops::reduce::Reduce {
                    op: rop,
                    axes: a.ints("axes"),
                    keepdims: a.i_or("keepdims", 1) != 0,
                    noop_with_empty_axes: a.i_or("noop_with_empty_axes", 0) != 0,
                }
                .op(),
            )
        }
        "ArgMax" | "ArgMin" => Some(
            burnc_compiler::ops::reduce::ArgReduce {
                max: op_type == "ArgMax",
                axis: a.i_or("axis", 0),
                keepdims: a.i_or("keepdims", 1) != 0,
                select_last_index: a.i_or("select_last_index", 0) != 0,
            }
            .op(),
        ),
        "CumProd" => Some(burnc_compiler::ops::cumulative::Cumulative { product: true, exclusive: a.i_or("exclusive", 0) != 0, reverse: a.i_or("reverse", 0) != 0 }.op()),
        "Swish" => Some(Op::Def(OpRef::new(activation::Swish { alpha: a.f_or("alpha", 1.0) }))),
        "SwiGLU" => Some(Op::Def(OpRef::new(activation::SwiGlu { alpha: a.f_or("alpha", 1.0) }))),
        "GroupNormalization" => Some(
            channel_norm::GroupNorm {
                num_groups: a.i("num_groups").ok_or_else(|| n.err("missing attribute `num_groups`"))?.max(0) as usize,
                epsilon: a.f_or("epsilon", 1e-5),
                per_channel: opset >= 21,
            }
            .op(),
        ),
        "RotaryEmbedding" => Some(
            burnc_compiler::ops::rotary::RotaryEmbedding {
                interleaved: a.i_or("interleaved", 0) != 0,
                rotary_embedding_dim: a.i_or("rotary_embedding_dim", 0).max(0) as usize,
                num_heads: a.i_or("num_heads", 0).max(0) as usize,
            }
            .op(),
        ),
        "CenterCropPad" => Some(burnc_compiler::ops::pad::CenterCropPad { axes: a.ints("axes") }.op()),
        "CumSum" => Some(burnc_compiler::ops::cumulative::Cumulative { product: false, exclusive: a.i_or("exclusive", 0) != 0, reverse: a.i_or("reverse", 0) != 0 }.op()),
        "TopK" => {
            if opset < 10 {
                // k was an attribute: make it the input it became.
                let k = a.i("k").ok_or_else(|| n.err("missing attribute `k`"))?;
                let kv = ctx.constant(&n.label, Tensor::from_i64s(vec![1], vec![k]));
                inputs.truncate(1);
                inputs.push(Some(kv));
            }
            // `sorted` is always honoured: the order is fixed either way.
            Some(burnc_compiler::ops::topk::TopK { axis: a.i_or("axis", -1), largest: a.i_or("largest", 1) != 0 }.op())
        }
        "Reshape" => {
            if opset < 5 {
                let shape = a.ints("shape").ok_or_else(|| n.err("missing attribute `shape`"))?;
                let sv = ctx.constant(&n.label, Tensor::from_i64s(vec![shape.len()], shape));
                inputs.truncate(1);
                inputs.push(Some(sv));
            }
            Some(Op::Reshape { allowzero: a.i_or("allowzero", 0) != 0 })
        }
        "Flatten" => Some(Flatten { axis: a.i_or("axis", 1) }.op()),
        "Squeeze" => Some(Squeeze { axes: a.ints("axes") }.op()),
        "Unsqueeze" => Some(Unsqueeze { axes: a.ints("axes") }.op()),
        "Transpose" => Some(burnc_compiler::ops::transpose::Transpose { perm: usize_vec(&n, "perm", a.ints("perm")).map(|p| (!p.is_empty()).then_some(p))? }.op()),
        "Concat" => Some(Op::Concat { axis: a.i("axis").ok_or_else(|| n.err("missing attribute `axis`"))? }),
        "Split" => Some(
            burnc_compiler::ops::split::Split {
                axis: a.i_or("axis", 0),
                sizes: a.ints("split"),
                outputs: a.i("num_outputs").map(|v| v.max(0) as usize).unwrap_or(node.output.len()),
            }
            .op(),
        ),
        "Slice" => {
            if opset < 10 {
                let starts = a.ints("starts").ok_or_else(|| n.err("missing attribute `starts`"))?;
                let ends = a.ints("ends").ok_or_else(|| n.err("missing attribute `ends`"))?;
                let mut extra = vec![starts, ends];
                if let Some(axes) = a.ints("axes") {
                    extra.push(axes);
                }
                inputs.truncate(1);
                for v in extra {
                    let c = ctx.constant(&n.label, Tensor::from_i64s(vec![v.len()], v));
                    inputs.push(Some(c));
                }
            }
            Some(burnc_compiler::ops::slice::Slice.op())
        }
        "Gather" => Some(Op::Gather { axis: a.i_or("axis", 0) }),
        "GatherElements" => Some(burnc_compiler::ops::gather::GatherElements { axis: a.i_or("axis", 0) }.op()),
        "GatherND" => Some(burnc_compiler::ops::gather::GatherNd { batch_dims: usize::try_from(a.i_or("batch_dims", 0)).map_err(|_| n.err("batch_dims must not be negative"))? }.op()),
        "ScatterElements" | "Scatter" => Some(burnc_compiler::ops::scatter::ScatterElements { axis: a.i_or("axis", 0), reduction: reduction(&n)? }.op()),
        "ScatterND" => Some(burnc_compiler::ops::scatter::ScatterNd { reduction: reduction(&n)? }.op()),
        "Expand" => Some(Op::Expand),
        "Tile" => Some(burnc_compiler::ops::tile::Tile.op()),
        "Pad" => {
            let mode = match a.s_or("mode", "constant").as_str() {
                "constant" => PadMode::Constant,
                "reflect" => PadMode::Reflect,
                "edge" => PadMode::Edge,
                "wrap" => PadMode::Wrap,
                m => return Err(n.err(format!("unknown mode `{m}`"))),
            };
            if opset < 11 {
                let pads = a.ints("pads").or(a.ints("paddings")).ok_or_else(|| n.err("missing attribute `pads`"))?;
                let pv = ctx.constant(&n.label, Tensor::from_i64s(vec![pads.len()], pads));
                let value = ctx.constant(&n.label, Tensor::from_f32s(vec![], vec![a.f_or("value", 0.0)]));
                inputs.truncate(1);
                inputs.push(Some(pv));
                inputs.push(Some(value));
            }
            Some(burnc_compiler::ops::pad::Pad { mode }.op())
        }
        "Shape" => Some(burnc_compiler::ops::dim_values::Shape { start: a.i_or("start", 0), end: a.i("end") }.op()),
        "Size" => Some(burnc_compiler::ops::dim_values::Size.op()),
        "ConstantOfShape" => {
            let value = match a.t("value") {
                Some(t) => tensor::to_tensor(t, ctx.model_dir)?,
                None => Tensor::from_f32s(vec![], vec![0.0]),
            };
            if value.numel() != 1 {
                return Err(n.err("attribute `value` must hold one element"));
            }
            Some(Op::ConstantOfShape { value: Tensor { shape: vec![], data: value.data } })
        }
        "Range" => Some(burnc_compiler::ops::range::Range.op()),
        "NonZero" => Some(burnc_compiler::ops::compress::NonZero.op()),
        "ImageDecoder" => {
            use burnc_compiler::ops::image::{ImageDecoder, PixelFormat};
            let format = match a.s_or("pixel_format", "RGB").as_str() {
                "RGB" => PixelFormat::Rgb,
                "BGR" => PixelFormat::Bgr,
                "Grayscale" => PixelFormat::Grayscale,
                f => return Err(n.err(format!("unknown pixel_format `{f}`"))),
            };
            Some(ImageDecoder { format }.op())
        }
        "StringConcat" => Some(burnc_compiler::ops::strings::op(burnc_compiler::ops::strings::StringConcat)),
        "StringNormalizer" => {
            use burnc_compiler::ops::strings::Case;
            // The C and POSIX locales change ASCII letters only; any other uses Unicode's rules.
            let ascii = matches!(a.s_or("locale", "en_US").as_str(), "C" | "POSIX");
            let case = match (a.s_or("case_change_action", "NONE").as_str(), ascii) {
                ("NONE", _) => Case::Keep,
                ("LOWER", false) => Case::Lower,
                ("UPPER", false) => Case::Upper,
                ("LOWER", true) => Case::AsciiLower,
                ("UPPER", true) => Case::AsciiUpper,
                (c, _) => return Err(n.err(format!("unknown case_change_action `{c}`"))),
            };
            let stopwords = a.strings("stopwords").unwrap_or(Ok(vec![])).map_err(|i| n.err(format!("stopwords[{i}] is not UTF-8")))?;
            let case_sensitive = a.i_or("is_case_sensitive", 0) != 0;
            Some(burnc_compiler::ops::strings::op(burnc_compiler::ops::strings::StringNormalizer { case, case_sensitive, stopwords }))
        }
        "StringSplit" => {
            let maxsplit = match a.i("maxsplit") {
                Some(m) => Some(usize::try_from(m).map_err(|_| n.err(format!("maxsplit {m} is negative")))?),
                None => None,
            };
            Some(burnc_compiler::ops::strings::op(burnc_compiler::ops::strings::StringSplit { delimiter: a.s("delimiter"), maxsplit }))
        }
        "RegexFullMatch" => {
            let pattern = a.s("pattern").ok_or_else(|| n.err("missing attribute `pattern`"))?;
            Some(burnc_compiler::ops::strings::op(burnc_compiler::ops::strings::RegexFullMatch::new(&pattern).map_err(|e| n.err(e))?))
        }
        "Trilu" => Some(burnc_compiler::ops::select::Trilu { upper: a.i_or("upper", 1) != 0 }.op()),
        "DepthToSpace" => Some(
            burnc_compiler::ops::depth_space::DepthToSpace {
                blocksize: a.i("blocksize").ok_or_else(|| n.err("missing attribute `blocksize`"))?.max(1) as usize,
                crd: a.s_or("mode", "DCR") == "CRD",
            }
            .op(),
        ),
        "SpaceToDepth" => Some(
            burnc_compiler::ops::depth_space::SpaceToDepth {
                blocksize: a.i("blocksize").ok_or_else(|| n.err("missing attribute `blocksize`"))?.max(1) as usize,
                crd: a.s_or("mode", "DCR") == "CRD",
            }
            .op(),
        ),
        "OneHot" => Some(burnc_compiler::ops::one_hot::OneHot { axis: a.i_or("axis", -1) }.op()),
        "EyeLike" => Some(burnc_compiler::ops::select::EyeLike { dtype: dtype_attr(&n, "dtype")?, k: a.i_or("k", 0) }.op()),
        "Compress" => Some(burnc_compiler::ops::compress::Compress { axis: a.i("axis") }.op()),
        "ReverseSequence" => Some(burnc_compiler::ops::reverse::ReverseSequence { batch_axis: a.i_or("batch_axis", 1), time_axis: a.i_or("time_axis", 0) }.op()),
        "Einsum" => Some(burnc_compiler::ops::einsum::Einsum::op(&a.s("equation").ok_or_else(|| n.err("missing attribute `equation`"))?).map_err(|e| n.err(e))?),
        "Resize" | "Upsample" => {
            use burnc_compiler::ops::resize::{AspectPolicy, Coord, Filter, Mode, Nearest, Resize};
            let bad = |what: &str, v: &str| n.err(format!("unknown {what} `{v}`"));
            let mode = match a.s_or("mode", "nearest").as_str() {
                "nearest" => Mode::Nearest,
                "linear" | "bilinear" | "trilinear" => Mode::Linear,
                "cubic" | "bicubic" => Mode::Cubic,
                m => return Err(bad("mode", m)),
            };
            let mut coord = match a.s_or("coordinate_transformation_mode", "half_pixel").as_str() {
                "half_pixel" => Coord::HalfPixel,
                "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
                "pytorch_half_pixel" => Coord::PytorchHalfPixel,
                "align_corners" => Coord::AlignCorners,
                "asymmetric" => Coord::Asymmetric,
                "tf_crop_and_resize" => Coord::TfCropAndResize,
                "tf_half_pixel_for_nn" => Coord::TfHalfPixelForNn,
                m => return Err(bad("coordinate_transformation_mode", m)),
            };
            let mut nearest = match a.s_or("nearest_mode", "round_prefer_floor").as_str() {
                "round_prefer_floor" => Nearest::RoundPreferFloor,
                "round_prefer_ceil" => Nearest::RoundPreferCeil,
                "floor" => Nearest::Floor,
                "ceil" => Nearest::Ceil,
                m => return Err(bad("nearest_mode", m)),
            };
            let policy = match a.s_or("keep_aspect_ratio_policy", "stretch").as_str() {
                "stretch" => AspectPolicy::Stretch,
                "not_larger" => AspectPolicy::NotLarger,
                "not_smaller" => AspectPolicy::NotSmaller,
                p => return Err(bad("keep_aspect_ratio_policy", p)),
            };
            // Upsample and Resize-10 are "asymmetric" nearest/linear with scales as input.
            if op_type == "Upsample" || opset < 11 {
                coord = Coord::Asymmetric;
                // floor when upsampling, ceil when downsampling (Resize-10 backend tests, ORT).
                nearest = Nearest::Simple;
                let scales = if let Some(s) = a.floats("scales") {
                    Some(ctx.constant(&n.label, Tensor::from_f32s(vec![s.len()], s)))
                } else {
                    inputs.get(1).copied().flatten()
                };
                // Core form: (X, roi, scales, sizes)
                inputs = vec![inputs.first().copied().flatten(), None, scales, None];
            }
            let filter = Filter {
                mode,
                coord,
                nearest,
                cubic_coeff_a: a.f_or("cubic_coeff_a", -0.75) as f64,
                exclude_outside: a.i_or("exclude_outside", 0) != 0,
                antialias: a.i_or("antialias", 0) != 0,
                extrapolation_value: a.f_or("extrapolation_value", 0.0) as f64,
            };
            Some(Resize { filter, axes: a.ints("axes"), policy }.op())
        }
        "If" => {
            let then_g = a.g("then_branch").ok_or_else(|| n.err("missing attribute `then_branch`"))?;
            let else_g = a.g("else_branch").ok_or_else(|| n.err("missing attribute `else_branch`"))?;
            Some(Op::If { then_branch: Box::new(ctx.subgraph(then_g)?), else_branch: Box::new(ctx.subgraph(else_g)?) })
        }
        "Loop" => {
            let body = a.g("body").ok_or_else(|| n.err("missing attribute `body`"))?;
            Some(Op::Loop { body: Box::new(ctx.subgraph(body)?) })
        }
        "Scan" => {
            let body = a.g("body").ok_or_else(|| n.err("missing attribute `body`"))?;
            if opset < 9 {
                return super::scan8::lower(ctx, node);
            }
            let num_scan_inputs = a.i("num_scan_inputs").ok_or_else(|| n.err("missing attribute `num_scan_inputs`"))?;
            Some(Op::Scan {
                body: Box::new(ctx.subgraph(body)?),
                num_scan_inputs: num_scan_inputs.max(0) as usize,
                input_axes: a.ints("scan_input_axes").unwrap_or_default(),
                output_axes: a.ints("scan_output_axes").unwrap_or_default(),
                input_directions: a.ints("scan_input_directions").unwrap_or_default(),
                output_directions: a.ints("scan_output_directions").unwrap_or_default(),
            })
        }
        "QuantizeLinear" => Some(burnc_compiler::ops::quant::Quantize {
            axis: a.i_or("axis", 1),
            block_size: usize::try_from(a.i_or("block_size", 0)).map_err(|_| n.err("negative block_size"))?,
            output_dtype: match a.i_or("output_dtype", 0) {
                0 => None,
                _ => dtype_attr(&n, "output_dtype")?,
            },
            saturate: a.i_or("saturate", 1) != 0,
        }
        .op()),
        "DequantizeLinear" => Some(burnc_compiler::ops::quant::Dequantize {
            axis: a.i_or("axis", 1),
            block_size: usize::try_from(a.i_or("block_size", 0)).map_err(|_| n.err("negative block_size"))?,
            output_dtype: match a.i_or("output_dtype", 0) {
                0 => None,
                _ => dtype_attr(&n, "output_dtype")?,
            },
        }
        .op()),
        "DynamicQuantizeLinear" => Some(burnc_compiler::ops::quant::DynamicQuantize::op()),
        "MatMulInteger" => Some(burnc_compiler::ops::integer::MatMulInteger.op()),
        "QLinearMatMul" => Some(burnc_compiler::ops::integer::QLinearMatMul.op()),
        "ConvInteger" => Some(burnc_compiler::ops::integer::ConvInteger { window: window(&n)?, group: a.i_or("group", 1).max(1) as usize }.op()),
        "QLinearConv" => Some(burnc_compiler::ops::integer::QLinearConv { window: window(&n)?, group: a.i_or("group", 1).max(1) as usize }.op()),
        "Shrink" => Some(activation::Shrink { lambd: a.f_or("lambd", 0.5), bias: a.f_or("bias", 0.0) }.op()),
        "Det" => Some(burnc_compiler::ops::linalg::Det.op()),
        "RNN" | "GRU" | "LSTM" => Some(burnc_compiler::ops::recurrent::Recurrent::op(super::rnn::rnn_attrs(op_type, &a).map_err(|e| n.err(e))?)),
        "Col2Im" => Some(
            burnc_compiler::ops::col2im::Col2Im {
                dilations: usize_vec(&n, "dilations", a.ints("dilations"))?,
                pads: usize_vec(&n, "pads", a.ints("pads"))?,
                strides: usize_vec(&n, "strides", a.ints("strides"))?,
            }
            .op(),
        ),
        "MaxUnpool" => Some(burnc_compiler::ops::unpool::MaxUnpool {
            kernel_shape: usize_vec(&n, "kernel_shape", a.ints("kernel_shape"))?,
            pads: usize_vec(&n, "pads", a.ints("pads"))?,
            strides: usize_vec(&n, "strides", a.ints("strides"))?,
        }
        .op()),
        "SequenceMap" => {
            let body = a.g("body").ok_or_else(|| n.err("missing attribute `body`"))?;
            Some(Op::SequenceMap { body: Box::new(ctx.subgraph(body)?) })
        }
        "SequenceConstruct" => Some(Op::Seq(SeqOp::Construct)),
        "SequenceEmpty" => Some(Op::Seq(SeqOp::Empty { dtype: dtype_attr(&n, "dtype")?.unwrap_or(DType::F32) })),
        "SequenceAt" => Some(Op::Seq(SeqOp::At)),
        "SequenceInsert" => Some(Op::Seq(SeqOp::Insert)),
        "SequenceErase" => Some(Op::Seq(SeqOp::Erase)),
        "SequenceLength" => Some(Op::Seq(SeqOp::Length)),
        "ConcatFromSequence" => Some(Op::Seq(SeqOp::ConcatFrom {
            axis: a.i("axis").ok_or_else(|| n.err("missing attribute `axis`"))?,
            new_axis: a.i_or("new_axis", 0) != 0,
        })),
        "SplitToSequence" => Some(Op::Seq(SeqOp::SplitTo { axis: a.i_or("axis", 0), keepdims: a.i_or("keepdims", 1) != 0 })),
        "Optional" => Some(Op::Seq(SeqOp::OptionalMake)),
        "OptionalHasElement" => Some(Op::Seq(SeqOp::OptionalHasElement)),
        "OptionalGetElement" => Some(Op::Seq(SeqOp::OptionalGetElement)),
        "DFT" => {
            if opset < 20 {
                // axis was an attribute (default 1): make it the input it became.
                let axis = ctx.constant(&n.label, Tensor::from_i64s(vec![], vec![a.i_or("axis", 1)]));
                inputs.resize(2, None);
                inputs.push(Some(axis));
            }
            Some(burnc_compiler::ops::spectral::Dft { inverse: a.i_or("inverse", 0) != 0, onesided: a.i_or("onesided", 0) != 0 }.op())
        }
        "STFT" => Some(burnc_compiler::ops::spectral::Stft { onesided: a.i_or("onesided", 1) != 0 }.op()),
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            use burnc_compiler::ops::spectral::{CosineWindow, WindowKind};
            Some(
                CosineWindow {
                    kind: match op_type {
                        "HannWindow" => WindowKind::Hann,
                        "HammingWindow" => WindowKind::Hamming,
                        _ => WindowKind::Blackman,
                    },
                    periodic: a.i_or("periodic", 1) != 0,
                    dtype: dtype_attr(&n, "output_datatype")?.unwrap_or(DType::F32),
                }
                .op(),
            )
        }
        "MelWeightMatrix" => Some(burnc_compiler::ops::spectral::MelWeightMatrix { dtype: dtype_attr(&n, "output_datatype")?.unwrap_or(DType::F32) }.op()),
        "GridSample" => Some(burnc_compiler::ops::grid::GridSample {
            mode: match a.s_or("mode", if opset < 20 { "bilinear" } else { "linear" }).as_str() {
                "nearest" => GridMode::Nearest,
                "linear" | "bilinear" => GridMode::Linear,
                "cubic" | "bicubic" => GridMode::Cubic,
                m => return Err(n.err(format!("unknown mode `{m}`"))),
            },
            padding: match a.s_or("padding_mode", "zeros").as_str() {
                "zeros" => GridPadding::Zeros,
                "border" => GridPadding::Border,
                "reflection" => GridPadding::Reflection,
                m => return Err(n.err(format!("unknown padding_mode `{m}`"))),
            },
            align_corners: a.i_or("align_corners", 0) != 0,
        }
        .op()),
        "AffineGrid" => Some(burnc_compiler::ops::grid::AffineGrid { align_corners: a.i_or("align_corners", 0) != 0 }.op()),
        "Unique" => Some(burnc_compiler::ops::unique::Unique { axis: a.i("axis"), sorted: a.i_or("sorted", 1) != 0 }.op()),
        "NonMaxSuppression" => Some(burnc_compiler::ops::detect::NonMaxSuppression { center_point_box: a.i_or("center_point_box", 0) != 0 }.op()),
        "RoiAlign" => {
            let pos = |name: &str, d: i64| usize::try_from(a.i_or(name, d)).map_err(|_| n.err(format!("negative {name}")));
            // Opset 16 added coordinate_transformation_mode; RoiAlign-10 behaves as output_half_pixel.
            let ctm = a.s_or("coordinate_transformation_mode", if opset < 16 { "output_half_pixel" } else { "half_pixel" });
            Some(burnc_compiler::ops::detect::RoiAlign {
                max_mode: match a.s_or("mode", "avg").as_str() {
                    "avg" => false,
                    "max" => true,
                    other => return Err(n.err(format!("unknown mode `{other}`"))),
                },
                half_pixel: match ctm.as_str() {
                    "half_pixel" => true,
                    "output_half_pixel" => false,
                    other => return Err(n.err(format!("unknown coordinate_transformation_mode `{other}`"))),
                },
                output_height: pos("output_height", 1)?,
                output_width: pos("output_width", 1)?,
                sampling_ratio: pos("sampling_ratio", 0)?,
                spatial_scale: a.f_or("spatial_scale", 1.0),
            }
            .op())
        }
        "DeformConv" => Some(
            burnc_compiler::ops::detect::DeformConv {
                window: window(&n)?,
                group: usize::try_from(a.i_or("group", 1)).map_err(|_| n.err("negative group"))?,
                offset_group: usize::try_from(a.i_or("offset_group", 1)).map_err(|_| n.err("negative offset_group"))?,
            }
            .op(),
        ),
        "TensorScatter" => Some(
            burnc_compiler::ops::scatter::TensorScatter {
                axis: a.i_or("axis", -2),
                circular: match a.s_or("mode", "linear").as_str() {
                    "linear" => false,
                    "circular" => true,
                    m => return Err(n.err(format!("unknown mode `{m}`"))),
                },
            }
            .op(),
        ),
        _ => None,
    };
    let Some(op) = op else {
        return Err(OnnxError::UnsupportedOp {
            node: n.label.clone(),
            op: op_type.into(),
            domain: if domain.is_empty() { "ai.onnx".into() } else { domain.into() },
            opset,
        });
    };
    emit(ctx, &n, op, inputs)
}

fn set_source(ctx: &mut Ctx, n: &N) {
    if let Some(last) = ctx.graph.nodes.last_mut() {
        last.source_op = Some((n.node.op_type().to_string(), n.opset));
    }
}

/// Add one core node with the ONNX node's outputs (unnamed optional outputs get fresh names).
fn emit(ctx: &mut Ctx, n: &N, op: Op, inputs: Vec<Option<ValueId>>) -> Result<(), OnnxError> {
    let names: Vec<String> = n
        .node
        .output
        .iter()
        .map(|o| if o.is_empty() { ctx.fresh(&n.label) } else { o.clone() })
        .collect();
    let (_, outs) = ctx.graph.add_node(n.label.clone(), op, inputs, &names);
    set_source(ctx, n);
    for (name, v) in n.node.output.iter().zip(outs) {
        ctx.bind(name, v);
    }
    Ok(())
}

fn lower_constant(ctx: &mut Ctx, n: &N) -> Result<(), OnnxError> {
    let a = n.attrs();
    let t = if let Some(t) = a.t("value") {
        tensor::to_tensor(t, ctx.model_dir)?
    } else if let Some(v) = a.f("value_float") {
        Tensor::from_f32s(vec![], vec![v])
    } else if let Some(v) = a.floats("value_floats") {
        Tensor::from_f32s(vec![v.len()], v)
    } else if let Some(v) = a.i("value_int") {
        Tensor::scalar_i64(v)
    } else if let Some(v) = a.ints("value_ints") {
        Tensor::from_i64s(vec![v.len()], v)
    } else if a.has("sparse_value") {
        return Err(n.err("sparse_value constants are not supported"));
    } else if a.has("value_string") || a.has("value_strings") {
        return Err(n.err("string constants are not supported"));
    } else {
        return Err(n.err("no value attribute"));
    };
    let name = n.node.output.first().cloned().ok_or_else(|| n.err("no output"))?;
    let v = ctx.graph.add_const(name.clone(), t);
    ctx.bind(&name, v);
    Ok(())
}
