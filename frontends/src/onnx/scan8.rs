//! Scan before opset 9: every input and state carries a leading batch axis and scan inputs
//! are scanned along axis 1. Lowered to the opset-9 form as two Scans: an outer one over the
//! batch (every operand is a scan input, every result a scan output, so each batch row is
//! sliced off and stacked back along axis 0) whose body is the original Scan, per row.
use super::attrs::Attrs;
use super::import::{node_label, Ctx};
use super::proto::NodeProto;
use super::OnnxError;
use burnc_compiler::ir::{Graph, Op, ValueKind, ValueType};

pub fn lower(ctx: &mut Ctx, node: &NodeProto) -> Result<(), OnnxError> {
    let label = node_label(node);
    let opset = ctx.opset;
    let err = |reason: &str| OnnxError::Node { node: label.clone(), op: "Scan".into(), opset, reason: reason.into() };
    let a = Attrs(&node.attribute);
    let body = a.g("body").ok_or_else(|| err("missing attribute `body`"))?;
    let m = a.i("num_scan_inputs").ok_or_else(|| err("missing attribute `num_scan_inputs`"))?;
    let m = usize::try_from(m).map_err(|_| err("negative num_scan_inputs"))?;
    if node.input.first().is_some_and(|s| !s.is_empty()) {
        return Err(err("sequence_lens (per-batch sequence lengths) is not supported"));
    }
    let operands = node.input.get(1..).unwrap_or_default();
    let states = operands.len().checked_sub(m).ok_or_else(|| err("fewer inputs than num_scan_inputs"))?;
    let mut ins = Vec::with_capacity(operands.len());
    for name in operands {
        ins.push(Some(ctx.lookup(&label, name)?.ok_or_else(|| err("a state or scan input is missing"))?));
    }
    let inner = ctx.subgraph(body)?;

    // The per-row body: its inputs are one batch row of each operand.
    let mut row = Graph { name: format!("{}/row", inner.name), ..Default::default() };
    for v in &inner.values {
        if matches!(v.kind, ValueKind::Outer) {
            row.add_value(v.name.clone(), ValueType::Unknown, ValueKind::Outer);
        }
    }
    let mut row_ins = Vec::with_capacity(operands.len());
    for _ in 0..operands.len() {
        let v = row.add_value(ctx.fresh(&label), ValueType::Unknown, ValueKind::Input);
        row.inputs.push(v);
        row_ins.push(Some(v));
    }
    let row_outs: Vec<String> = node.output.iter().map(|_| ctx.fresh(&label)).collect();
    let scan = Op::Scan {
        body: Box::new(inner),
        num_scan_inputs: m,
        input_axes: vec![],
        output_axes: vec![],
        input_directions: a.ints("directions").unwrap_or_default(),
        output_directions: vec![],
    };
    let (_, outs) = row.add_node(label.clone(), scan, row_ins, &row_outs);
    row.outputs = outs;

    let outer = Op::Scan {
        body: Box::new(row),
        num_scan_inputs: states + m,
        input_axes: vec![],
        output_axes: vec![],
        input_directions: vec![],
        output_directions: vec![],
    };
    let names: Vec<String> = node.output.iter().map(|o| if o.is_empty() { ctx.fresh(&label) } else { o.clone() }).collect();
    let (_, outs) = ctx.graph.add_node(label.clone(), outer, ins, &names);
    if let Some(l) = ctx.graph.nodes.last_mut() {
        l.source_op = Some(("Scan".into(), ctx.opset));
    }
    for (name, v) in node.output.iter().zip(outs) {
        ctx.bind(name, v);
    }
    Ok(())
}
