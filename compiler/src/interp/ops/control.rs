//! Control flow: If, Loop and Scan. Bodies run as subgraphs in a frame chained to the caller's,
//! so their `Outer` values resolve by name (at any nesting depth).
use super::shape::{concat, slice_axis};
use super::util::norm_axis_or_scalar;
use super::OpResult;
use crate::interp::{run_in, Frame, RtValue};
use crate::ir::{Graph, Op, ValueType};
use crate::tensor::{Data, Tensor};

pub fn eval(op: &Op, args: &[Option<RtValue>], n_outputs: usize, frame: &Frame<'_>) -> OpResult {
    match op {
        Op::If { then_branch, else_branch } => {
            let c = cond_value(args.first().and_then(|a| a.as_ref()).ok_or("missing input #0 (cond)")?)?;
            let g = if c { then_branch } else { else_branch };
            let outs = run_body(g, vec![], frame)?;
            if outs.len() != n_outputs {
                return Err(format!("branch returned {} values, the node has {n_outputs} outputs", outs.len()));
            }
            Ok(outs)
        }
        Op::Loop { body } => run_loop(body, args, n_outputs, frame),
        Op::Scan { body, num_scan_inputs, input_axes, output_axes, input_directions, output_directions } => run_scan(
            body,
            args,
            n_outputs,
            frame,
            ScanAttrs {
                num_scan_inputs: *num_scan_inputs,
                input_axes,
                output_axes,
                input_directions,
                output_directions,
            },
        ),
        Op::SequenceMap { body } => sequence_map(body, args, n_outputs, frame),
        _ => Err(format!("{} is not a control-flow op", op.name())),
    }
}

fn run_body(g: &Graph, inputs: Vec<RtValue>, frame: &Frame<'_>) -> OpResult {
    run_in(g, inputs, Some(frame)).map_err(|e| format!("in subgraph `{}`: {e}", g.name))
}

/// A condition: a bool (or numeric) tensor with exactly one element.
fn cond_value(v: &RtValue) -> Result<bool, String> {
    let t = v.as_tensor()?;
    if t.numel() != 1 {
        return Err(format!("condition must have one element, got shape {:?}", t.shape));
    }
    Ok(match &t.data {
        Data::Bool(b) => b[0],
        _ => t.to_f64_vec().first().is_some_and(|&x| x != 0.0),
    })
}

fn bool_scalar(b: bool) -> Tensor {
    Tensor::new(vec![], Data::Bool(vec![b]))
}

/// Stack equally shaped tensors along a new axis `axis` (0 ..= rank).
fn stack(items: &[Tensor], axis: usize) -> Result<Tensor, String> {
    let first = items.first().ok_or("cannot stack zero tensors")?;
    for t in items {
        if t.shape != first.shape || t.dtype() != first.dtype() {
            return Err(format!(
                "scan outputs differ between iterations: {}{:?} vs {}{:?}",
                first.dtype(),
                first.shape,
                t.dtype(),
                t.shape
            ));
        }
    }
    if axis > first.rank() {
        return Err(format!("axis {axis} out of range for stacking rank-{} tensors", first.rank()));
    }
    let parts: Vec<Tensor> = items
        .iter()
        .map(|t| {
            let mut s = t.shape.clone();
            s.insert(axis, 1);
            Tensor::new(s, t.data.clone())
        })
        .collect();
    let refs: Vec<&Tensor> = parts.iter().collect();
    concat(&refs, axis as i64)
}

/// Empty stacked output: `[0, dims…]` from the body's declared output type where fixed.
fn empty_stack(g: &Graph, out_idx: usize) -> Tensor {
    let ty = g.outputs.get(out_idx).map(|&v| &g.value(v).ty);
    match ty {
        Some(ValueType::Tensor(tt)) => {
            let mut shape = vec![0];
            if let Some(s) = &tt.shape {
                for d in &s.0 {
                    shape.push(match d {
                        crate::ir::Dim::Fixed(n) => *n,
                        _ => 0,
                    });
                }
            }
            Tensor::zeros(tt.dtype, shape)
        }
        _ => Tensor::zeros(crate::ir::DType::F32, vec![0]),
    }
}

fn run_loop(body: &Graph, args: &[Option<RtValue>], n_outputs: usize, frame: &Frame<'_>) -> OpResult {
    let max_trip = match args.first() {
        Some(Some(v)) => {
            let t = v.as_tensor()?;
            let v = t.to_i64_vec().and_then(|v| (v.len() == 1).then(|| v[0]));
            Some(v.ok_or("M (max trip count) must be an integer scalar")?)
        }
        _ => None,
    };
    let mut cond = match args.get(1) {
        Some(Some(v)) => cond_value(v)?,
        _ => true,
    };
    // An omitted carried value is an empty optional.
    let mut carried: Vec<RtValue> = args.iter().skip(2).map(|a| a.clone().unwrap_or(RtValue::Optional(None))).collect();
    let n_carried = carried.len();
    if body.inputs.len() != n_carried + 2 {
        return Err(format!("Loop body takes {} inputs, expected {} (iter, cond, {n_carried} carried)", body.inputs.len(), n_carried + 2));
    }
    if body.outputs.len() < n_carried + 1 {
        return Err(format!("Loop body returns {} values, expected at least {}", body.outputs.len(), n_carried + 1));
    }
    let n_scan = body.outputs.len() - 1 - n_carried;
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); n_scan];
    let mut iter: i64 = 0;
    while cond && max_trip.is_none_or(|m| iter < m) {
        let mut inputs = Vec::with_capacity(n_carried + 2);
        inputs.push(RtValue::Tensor(Tensor::scalar_i64(iter)));
        inputs.push(RtValue::Tensor(bool_scalar(cond)));
        inputs.append(&mut carried);
        let mut outs = run_body(body, inputs, frame)?.into_iter();
        cond = cond_value(&outs.next().ok_or("Loop body returned nothing")?)?;
        carried.extend(outs.by_ref().take(n_carried));
        for (k, v) in outs.enumerate() {
            scans[k].push(v.into_tensor().map_err(|e| format!("scan output #{k}: {e}"))?);
        }
        iter += 1;
        if max_trip.is_none() && iter > (1 << 40) {
            return Err("Loop ran too many iterations".into());
        }
    }
    let mut result = carried;
    for (k, items) in scans.iter().enumerate() {
        let t = if items.is_empty() { empty_stack(body, 1 + n_carried + k) } else { stack(items, 0)? };
        result.push(RtValue::Tensor(t));
    }
    if result.len() < n_outputs {
        return Err(format!("Loop produced {} values, the node has {n_outputs} outputs", result.len()));
    }
    result.truncate(n_outputs);
    Ok(result)
}

struct ScanAttrs<'a> {
    num_scan_inputs: usize,
    input_axes: &'a [i64],
    output_axes: &'a [i64],
    input_directions: &'a [i64],
    output_directions: &'a [i64],
}

fn run_scan(body: &Graph, args: &[Option<RtValue>], n_outputs: usize, frame: &Frame<'_>, a: ScanAttrs<'_>) -> OpResult {
    let m = a.num_scan_inputs;
    if args.len() < m {
        return Err(format!("Scan has {} inputs but num_scan_inputs is {m}", args.len()));
    }
    let n_state = args.len() - m;
    let mut state: Vec<RtValue> = Vec::with_capacity(n_state);
    for (i, v) in args[..n_state].iter().enumerate() {
        state.push(v.clone().ok_or_else(|| format!("missing state input #{i}"))?);
    }
    let mut scan_in: Vec<(&Tensor, usize, bool)> = Vec::with_capacity(m);
    for j in 0..m {
        let t = match &args[n_state + j] {
            Some(v) => v.as_tensor()?,
            None => return Err(format!("missing scan input #{j}")),
        };
        let axis = norm_axis_or_scalar(a.input_axes.get(j).copied().unwrap_or(0), t.rank())?;
        if t.rank() == 0 {
            return Err(format!("scan input #{j} is a scalar"));
        }
        let rev = a.input_directions.get(j).copied().unwrap_or(0) != 0;
        scan_in.push((t, axis, rev));
    }
    let len = match scan_in.first() {
        Some((t, ax, _)) => t.shape[*ax],
        None => 0,
    };
    for (j, (t, ax, _)) in scan_in.iter().enumerate() {
        if t.shape[*ax] != len {
            return Err(format!("scan input #{j} has length {} along its axis, expected {len}", t.shape[*ax]));
        }
    }
    if body.inputs.len() != n_state + m {
        return Err(format!("Scan body takes {} inputs, expected {}", body.inputs.len(), n_state + m));
    }
    if body.outputs.len() < n_state {
        return Err(format!("Scan body returns {} values, expected at least {n_state}", body.outputs.len()));
    }
    let k = body.outputs.len() - n_state;
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::with_capacity(len); k];
    for it in 0..len {
        let mut inputs = Vec::with_capacity(n_state + m);
        inputs.append(&mut state);
        for (t, ax, rev) in &scan_in {
            let i = if *rev { len - 1 - it } else { it };
            let mut s = slice_axis(t, *ax, i, 1)?;
            s.shape.remove(*ax);
            inputs.push(RtValue::Tensor(s));
        }
        let mut outs = run_body(body, inputs, frame)?.into_iter();
        state.extend(outs.by_ref().take(n_state));
        for (j, v) in outs.enumerate() {
            scans[j].push(v.into_tensor().map_err(|e| format!("scan output #{j}: {e}"))?);
        }
    }
    let mut result = state;
    for (j, mut items) in scans.into_iter().enumerate() {
        if a.output_directions.get(j).copied().unwrap_or(0) != 0 {
            items.reverse();
        }
        let t = if items.is_empty() {
            empty_stack(body, n_state + j)
        } else {
            let rank = items[0].rank() + 1;
            let ax = a.output_axes.get(j).copied().unwrap_or(0);
            let ax = norm_axis_or_scalar(ax, rank)?;
            stack(&items, ax)?
        };
        result.push(RtValue::Tensor(t));
    }
    if result.len() < n_outputs {
        return Err(format!("Scan produced {} values, the node has {n_outputs} outputs", result.len()));
    }
    result.truncate(n_outputs);
    Ok(result)
}

fn sequence_map(body: &Graph, args: &[Option<RtValue>], n_outputs: usize, frame: &Frame<'_>) -> OpResult {
    let ins: Vec<&RtValue> = args.iter().map(|a| a.as_ref().ok_or("SequenceMap inputs cannot be omitted")).collect::<Result<_, _>>()?;
    let len = match ins.first() {
        Some(RtValue::Sequence(items, _)) => items.len(),
        Some(_) => return Err("input #0 of SequenceMap must be a sequence".into()),
        None => return Err("SequenceMap needs an input sequence".into()),
    };
    for (i, v) in ins.iter().enumerate() {
        if let RtValue::Sequence(items, _) = v {
            if items.len() != len {
                return Err(format!("sequence input #{i} has {} items, expected {len}", items.len()));
            }
        }
    }
    if body.inputs.len() != ins.len() || body.outputs.len() != n_outputs {
        return Err(format!(
            "SequenceMap body takes {} inputs and returns {} values; the node has {} inputs and {n_outputs} outputs",
            body.inputs.len(),
            body.outputs.len(),
            ins.len()
        ));
    }
    let mut outs: Vec<Vec<Tensor>> = vec![Vec::with_capacity(len); n_outputs];
    for i in 0..len {
        let inputs: Vec<RtValue> = ins
            .iter()
            .map(|v| match v {
                RtValue::Sequence(items, _) => RtValue::Tensor(items[i].clone()),
                other => (*other).clone(),
            })
            .collect();
        for (k, v) in run_body(body, inputs, frame)?.into_iter().enumerate() {
            outs[k].push(v.into_tensor().map_err(|e| format!("body output #{k}: {e}"))?);
        }
    }
    Ok(outs
        .into_iter()
        .enumerate()
        .map(|(k, items)| {
            let dtype = items.first().map(|t| t.dtype()).or_else(|| match &body.value(body.outputs[k]).ty {
                ValueType::Tensor(t) => Some(t.dtype),
                _ => None,
            });
            RtValue::Sequence(items, dtype)
        })
        .collect())
}
