//! Building an IR graph from a GraphProto: values, initializers, scopes for subgraphs.
use super::proto::{type_proto, GraphProto, ModelProto, NodeProto, TypeProto, ValueInfoProto};
use super::{lower, tensor, Model, OnnxError};
use burnc_compiler::ir::{self, DType, Dim, Graph, Shape, TensorType, ValueId, ValueKind, ValueType};
use std::collections::HashMap;
use std::path::Path;

/// Name → value map of one graph, chained to the enclosing graph's for subgraphs.
pub struct Scope<'p> {
    names: HashMap<String, ValueId>,
    parent: Option<&'p Scope<'p>>,
}

impl<'p> Scope<'p> {
    fn defined_outside(&self, name: &str) -> bool {
        let mut s = self.parent;
        while let Some(p) = s {
            if p.names.contains_key(name) {
                return true;
            }
            s = p.parent;
        }
        false
    }
}

/// State while lowering one graph.
pub struct Ctx<'a, 'p> {
    pub graph: Graph,
    pub scope: Scope<'p>,
    pub opset: i64,
    pub model_dir: Option<&'a Path>,
    fresh: usize,
    /// The graph's `com.microsoft.nchwc` block and blocked values, when it has such ops.
    pub nchwc: Option<super::nchwc::Nchwc>,
}

impl<'a, 'p> Ctx<'a, 'p> {
    /// Value of an ONNX name (`""` is an omitted optional input).
    pub fn lookup(&mut self, node: &str, name: &str) -> Result<Option<ValueId>, OnnxError> {
        if name.is_empty() {
            return Ok(None);
        }
        if let Some(&v) = self.scope.names.get(name) {
            return Ok(Some(v));
        }
        if self.scope.defined_outside(name) {
            let v = self.graph.add_value(name, ValueType::Unknown, ValueKind::Outer);
            self.scope.names.insert(name.to_string(), v);
            return Ok(Some(v));
        }
        Err(OnnxError::Undefined { node: node.to_string(), name: name.to_string() })
    }

    pub fn bind(&mut self, name: &str, v: ValueId) {
        if !name.is_empty() {
            self.scope.names.insert(name.to_string(), v);
        }
    }

    /// A fresh name for a value the lowering introduces.
    pub fn fresh(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{base}/_{}", self.fresh)
    }

    /// A compiler-made constant with a fresh name.
    pub fn constant(&mut self, base: &str, t: burnc_compiler::Tensor) -> ValueId {
        let name = self.fresh(base);
        self.graph.add_const(name, t)
    }

    /// Lower a subgraph attribute in a scope chained to this one. The values it reads from
    /// further out become outer values of this graph too, so every graph between a value's
    /// definition and its reader carries it (codegen binds them level by level).
    pub fn subgraph(&mut self, g: &GraphProto) -> Result<Graph, OnnxError> {
        let scope = Scope { names: HashMap::new(), parent: Some(&self.scope) };
        let sub = build_graph(g, scope, self.opset, self.model_dir, true)?;
        for v in sub.values.iter().filter(|v| matches!(v.kind, ValueKind::Outer)) {
            self.lookup("<subgraph>", &v.name)?;
        }
        Ok(sub)
    }
}

pub fn import_model(model: &ModelProto, model_dir: Option<&Path>) -> Result<Model, OnnxError> {
    super::validate::validate(model)?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain(), "" | "ai.onnx"))
        .and_then(|o| o.version)
        .unwrap_or(1);
    let g = model.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    let scope = Scope { names: HashMap::new(), parent: None };
    let mut graph = build_graph(g, scope, opset, model_dir, false)?;
    if graph.name.is_empty() {
        graph.name = "model".into();
    }
    Ok(Model {
        graph,
        opset,
        ir_version: model.ir_version.unwrap_or(0),
        producer: model.producer_name().to_string(),
    })
}

fn build_graph(
    g: &GraphProto,
    scope: Scope<'_>,
    opset: i64,
    model_dir: Option<&Path>,
    is_subgraph: bool,
) -> Result<Graph, OnnxError> {
    let mut ctx = Ctx { graph: Graph { name: g.name().to_string(), ..Default::default() }, scope, opset, model_dir, fresh: 0, nchwc: super::nchwc::scan(g) };
    let declared: HashMap<&str, &ValueInfoProto> =
        g.value_info.iter().chain(&g.output).chain(&g.input).map(|v| (v.name(), v)).collect();
    // Initializers first: an input with the same name is an overridable default, which burnc
    // treats as a weight (the name stays out of the run-time inputs).
    for init in &g.initializer {
        let p = tensor::to_param(init, model_dir)?;
        let ty = ValueType::Tensor(TensorType { dtype: p.dtype, shape: Some(Shape::fixed(&p.shape)) });
        let v = ctx.graph.add_value(init.name(), ty, ValueKind::Param(p));
        ctx.bind(init.name(), v);
    }
    if !g.sparse_initializer.is_empty() {
        return Err(OnnxError::Graph { what: g.name().into(), reason: "sparse initializers are not supported".into() });
    }
    for inp in &g.input {
        if ctx.scope.names.contains_key(inp.name()) {
            continue;
        }
        let ty = value_type(inp.r#type.as_ref());
        let v = ctx.graph.add_value(inp.name(), ty, ValueKind::Input);
        ctx.bind(inp.name(), v);
        ctx.graph.inputs.push(v);
    }
    for node in &g.node {
        lower::lower_node(&mut ctx, node)?;
    }
    for out in &g.output {
        let v = ctx.lookup("<graph output>", out.name())?.ok_or_else(|| OnnxError::Graph {
            what: g.name().into(),
            reason: "an output has an empty name".into(),
        })?;
        ctx.graph.outputs.push(v);
    }
    // Declared types (value_info, outputs) fill in what the nodes did not say.
    for (i, val) in ctx.graph.values.iter_mut().enumerate() {
        if matches!(val.ty, ValueType::Unknown) {
            if let Some(vi) = declared.get(val.name.as_str()) {
                val.ty = value_type(vi.r#type.as_ref());
            }
        }
        let _ = i;
    }
    let _ = is_subgraph;
    if cfg!(debug_assertions) {
        ir::verify::verify(&ctx.graph)
            .map_err(|e| OnnxError::Graph { what: g.name().into(), reason: format!("internal: {e}") })?;
    }
    Ok(ctx.graph)
}

/// An ONNX TypeProto as an IR value type.
pub fn value_type(t: Option<&TypeProto>) -> ValueType {
    let Some(t) = t else { return ValueType::Unknown };
    match &t.value {
        Some(type_proto::Value::TensorType(tt)) => {
            let Some(dtype) = tt.elem_type.and_then(DType::from_onnx_code) else { return ValueType::Unknown };
            let shape = tt.shape.as_ref().map(|s| {
                Shape(
                    s.dim
                        .iter()
                        .enumerate()
                        .map(|(i, d)| match &d.value {
                            Some(super::proto::tensor_shape_proto::dimension::Value::DimValue(v)) if *v >= 0 => {
                                Dim::Fixed(*v as usize)
                            }
                            Some(super::proto::tensor_shape_proto::dimension::Value::DimParam(p)) if !p.is_empty() => {
                                Dim::Sym { name: p.clone(), bound: None }
                            }
                            _ => Dim::Sym { name: format!("?{i}"), bound: None },
                        })
                        .collect(),
                )
            });
            ValueType::Tensor(TensorType { dtype, shape })
        }
        Some(type_proto::Value::SequenceType(s)) => {
            let inner = value_type(s.elem_type.as_deref());
            ValueType::Sequence(match inner {
                ValueType::Tensor(t) => Some(t.dtype),
                _ => None,
            })
        }
        Some(type_proto::Value::OptionalType(o)) => ValueType::Optional(Box::new(value_type(o.elem_type.as_deref()))),
        _ => ValueType::Unknown,
    }
}

/// Node name for messages: its name, or its first output.
pub fn node_label(n: &NodeProto) -> String {
    if !n.name().is_empty() {
        n.name().to_string()
    } else {
        n.output.first().cloned().unwrap_or_else(|| n.op_type().to_string())
    }
}
