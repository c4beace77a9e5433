//! The one validation of a decoded ModelProto, run before it is lowered, so every path that
//! loads an ONNX file (`run`, `inspect`, `-o`, `bench`, `train`, `Build`) refuses what one
//! refuses: IR version and opsets in the supported range; each graph's structure (one
//! producer per value, graph inputs and initializers never overwritten, unique input names,
//! nodes in order, outputs defined); attributes of the type the op defines, present when
//! required, and in range where the range needs no shapes. What needs shapes (a perm that
//! fits the rank, channels that divide by the group) is shape inference's.
use super::import::node_label;
use super::proto::attribute_proto::AttributeType;
use super::proto::{AttributeProto, GraphProto, ModelProto, NodeProto};
use super::OnnxError;
use burnc_compiler::ir::DType;
use std::collections::{HashMap, HashSet};

/// IR versions burnc reads: 3 (ONNX 1.0) to that of the onnx package the conformance suite
/// pins (onnx 1.23: IR 14).
pub const IR_VERSIONS: std::ops::RangeInclusive<i64> = 3..=14;
/// Opsets of the default domain burnc knows (onnx 1.23: 28).
pub const DEFAULT_OPSETS: std::ops::RangeInclusive<i64> = 1..=28;

pub fn validate(model: &ModelProto) -> Result<(), OnnxError> {
    let bad = |reason: String| OnnxError::Graph { what: "model".into(), reason };
    match model.ir_version {
        None => return Err(bad("has no IR version".into())),
        Some(v) if !IR_VERSIONS.contains(&v) => {
            return Err(bad(format!("IR version {v} is not supported ({}..={})", IR_VERSIONS.start(), IR_VERSIONS.end())))
        }
        Some(_) => {}
    }
    if model.opset_import.is_empty() {
        return Err(bad("imports no opset".into()));
    }
    let mut domains = HashSet::new();
    for o in &model.opset_import {
        let d = match o.domain() {
            "" | "ai.onnx" => "ai.onnx",
            d => d,
        };
        if !domains.insert(d) {
            return Err(bad(format!("domain `{d}` is imported twice")));
        }
        let v = o.version.unwrap_or(0);
        let range = match d {
            "ai.onnx" => DEFAULT_OPSETS,
            "ai.onnx.ml" => 1..=5,
            "ai.onnx.preview.training" | "ai.onnx.preview" => 1..=1,
            // Other domains: their ops are refused one by one when lowered.
            _ => 1..=i64::MAX,
        };
        if !range.contains(&v) {
            return Err(bad(format!("opset {v} of domain `{d}` is not supported ({}..={})", range.start(), range.end())));
        }
    }
    let opset = model.opset_import.iter().find(|o| matches!(o.domain(), "" | "ai.onnx")).and_then(|o| o.version).unwrap_or(1);
    let g = model.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    let opsets = model.opset_import.iter().map(|o| (if o.domain() == "ai.onnx" { "" } else { o.domain() }, o.version.unwrap_or(0))).collect();
    let rules = Rules { opset, opsets, schemas: schema_table() };
    graph(g, &Scope::default(), &rules)
}

/// What the checks of every graph share: the default opset (for messages), each domain's
/// opset and the ops' schemas.
struct Rules<'m> {
    opset: i64,
    opsets: HashMap<&'m str, i64>,
    schemas: HashMap<(&'static str, &'static str), Vec<Schema>>,
}

/// One version of an op's schema (from onnx's, `super::arity`).
struct Schema {
    since: u32,
    inputs: (u32, u32),
    outputs: (u32, u32),
    /// (name, AttributeProto type code, required).
    attributes: Vec<(&'static str, i32, bool)>,
}

fn schema_table() -> HashMap<(&'static str, &'static str), Vec<Schema>> {
    let mut m: HashMap<(&str, &str), Vec<Schema>> = HashMap::new();
    for &(d, op, since, a, b, c, e) in super::arity::ARITY {
        m.entry((d, op)).or_default().push(Schema { since, inputs: (a, b), outputs: (c, e), attributes: Vec::new() });
    }
    for &(d, op, since, name, ty, required) in super::arity::ATTRIBUTES {
        if let Some(s) = m.get_mut(&(d, op)).and_then(|v| v.iter_mut().find(|s| s.since == since)) {
            s.attributes.push((name, ty, required));
        }
    }
    m
}

impl Rules<'_> {
    /// The schema a node follows at the model's opset of its domain; None for ops outside
    /// onnx's domains (lowering refuses those it does not know).
    fn schema<'s>(&'s self, n: &'s NodeProto) -> Option<&'s Schema> {
        let domain = if n.domain() == "ai.onnx" { "" } else { n.domain() };
        let versions = self.schemas.get(&(domain, n.op_type()))?;
        let opset = self.opsets.get(domain).copied().unwrap_or(1);
        versions.iter().rev().find(|v| i64::from(v.since) <= opset)
    }
}

/// A node with more inputs or outputs than its op's schema allows, or fewer than it requires.
fn arity(n: &NodeProto, schema: &Schema) -> Result<(), String> {
    let count = |k: usize, (lo, hi): (u32, u32), what: &str| -> Result<(), String> {
        let k = u32::try_from(k).unwrap_or(u32::MAX);
        if k < lo || k > hi {
            let range = if hi == u32::MAX { format!("at least {lo}") } else if lo == hi { format!("{lo}") } else { format!("{lo} to {hi}") };
            return Err(format!("has {k} {what}, the op takes {range} (schema of opset {})", schema.since));
        }
        Ok(())
    };
    count(n.input.len(), schema.inputs, "inputs")?;
    count(n.output.len(), schema.outputs, "outputs")
}

/// What enclosing graphs define: `names` a subgraph may read (defined before the node that
/// holds it), `taken` every name of theirs (a subgraph may not define one again: SSA spans
/// the nested scopes).
#[derive(Default)]
struct Scope<'a> {
    names: HashSet<&'a str>,
    taken: HashSet<&'a str>,
}

fn graph(g: &GraphProto, outer: &Scope, rules: &Rules) -> Result<(), OnnxError> {
    let opset = rules.opset;
    let what = if g.name().is_empty() { "graph".to_string() } else { format!("`{}`", g.name()) };
    let bad = |reason: String| OnnxError::Graph { what: what.clone(), reason };
    // Inputs and initializers (an initializer may also be listed as an input: a default).
    let inputs = unique_names(g.input.iter().map(|i| i.name()), "input").map_err(bad)?;
    for v in g.input.iter().chain(&g.output).chain(&g.value_info) {
        declared_dims(v).map_err(|r| bad(format!("value `{}`: {r}", v.name())))?;
    }
    let inits = unique_names(g.initializer.iter().map(|t| t.name()), "initializer").map_err(bad)?;
    // Every value a node writes, with its producer: one producer each, never an input.
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (k, n) in g.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            let node = |reason: String| node_err(n, opset, reason);
            if inputs.contains(o.as_str()) || inits.contains(o.as_str()) {
                return Err(node(format!("writes `{o}`, which is a graph input or initializer")));
            }
            if let Some(&first) = producer.get(o.as_str()) {
                let reason = if first == k {
                    format!("writes `{o}` twice")
                } else {
                    format!("writes `{o}`, which node `{}` writes too (a value has one producer)", node_label(&g.node[first]))
                };
                return Err(node(reason));
            }
            if outer.taken.contains(o.as_str()) {
                return Err(node(format!("writes `{o}`, which an enclosing graph defines (names are unique across nested graphs)")));
            }
            producer.insert(o, k);
        }
    }
    // Nodes in order: a node reads only what is defined before it.
    let mut defined: HashSet<&str> = inputs.iter().chain(&inits).copied().collect();
    for (k, n) in g.node.iter().enumerate() {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            if defined.contains(i.as_str()) || outer.names.contains(i.as_str()) {
                continue;
            }
            let reason = match producer.get(i.as_str()) {
                Some(&p) if p >= k => format!(
                    "reads `{i}`, which node `{}` writes later: the graph has a cycle or its nodes are out of order",
                    node_label(&g.node[p])
                ),
                _ => format!("reads `{i}`, which no input, initializer or node defines"),
            };
            return Err(node_err(n, opset, reason));
        }
        attributes(n, opset, rules.schema(n))?;
        // Subgraphs see everything defined so far in this graph and the enclosing ones.
        let subs: Vec<&GraphProto> = n.attribute.iter().flat_map(|a| a.g.iter().chain(&a.graphs)).collect();
        if !subs.is_empty() {
            let mut scope = Scope { names: outer.names.clone(), taken: outer.taken.clone() };
            scope.names.extend(defined.iter().copied());
            scope.taken.extend(inputs.iter().chain(&inits).chain(producer.keys()).copied());
            for s in subs {
                graph(s, &scope, rules)?;
            }
        }
        defined.extend(n.output.iter().filter(|o| !o.is_empty()).map(String::as_str));
    }
    for o in &g.output {
        if o.name().is_empty() {
            return Err(bad("has an output with an empty name".into()));
        }
        if !defined.contains(o.name()) && !outer.names.contains(o.name()) {
            return Err(bad(format!("output `{}` is not computed by any node, input or initializer", o.name())));
        }
    }
    Ok(())
}

/// The set of `names` (of graph inputs or initializers: `what`), none empty, none twice.
fn unique_names<'a>(names: impl Iterator<Item = &'a str>, what: &str) -> Result<HashSet<&'a str>, String> {
    let mut set = HashSet::new();
    for n in names {
        if n.is_empty() {
            return Err(format!("has an {what} with an empty name"));
        }
        if !set.insert(n) {
            return Err(format!("has two {what}s named `{n}`"));
        }
    }
    Ok(set)
}

fn node_err(n: &NodeProto, opset: i64, reason: String) -> OnnxError {
    OnnxError::Node { node: node_label(n), op: n.op_type().to_string(), opset, reason }
}

/// What an attribute holds: its declared type, or (old files leave `type` unset) the field
/// in use; `Undefined` when neither tells (an unset type and an empty list).
fn kind(a: &AttributeProto) -> AttributeType {
    if let Some(t) = a.r#type.and_then(|t| AttributeType::try_from(t).ok()).filter(|&t| t != AttributeType::Undefined) {
        return t;
    }
    if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else {
        AttributeType::Undefined
    }
}

fn attributes(n: &NodeProto, opset: i64, schema: Option<&Schema>) -> Result<(), OnnxError> {
    let err = |reason: String| node_err(n, opset, reason);
    if let Some(schema) = schema {
        arity(n, schema).map_err(err)?;
    }
    let mut seen = HashSet::new();
    for a in &n.attribute {
        let name = a.name();
        if !seen.insert(name) {
            return Err(err(format!("attribute `{name}` is given twice")));
        }
        // A declared type whose field is absent is no error: proto3 writers omit zeros.
        let k = kind(a);
        let want = schema.and_then(|s| s.attributes.iter().find(|x| x.0 == name)).and_then(|x| AttributeType::try_from(x.1).ok());
        if let Some(want) = want {
            // An empty list with no declared type says nothing.
            if k != want && k != AttributeType::Undefined {
                return Err(err(format!("attribute `{name}` must be {want:?}, the model gives {k:?}")));
            }
        }
        if !matches!(n.domain(), "" | "ai.onnx") {
            continue;
        }
        let ints = || if k == AttributeType::Int { a.i.into_iter().collect() } else { a.ints.clone() };
        match name {
            "group" | "size" | "blocksize" | "num_outputs" | "hidden_size" if a.i.is_some_and(|v| v < 1) => {
                return Err(err(format!("attribute `{name}` is {}, it must be at least 1", a.i.unwrap_or(0))))
            }
            "kernel_shape" | "strides" | "dilations" if ints().iter().any(|&v| v < 1) => {
                return Err(err(format!("attribute `{name}` is {:?}, every entry must be at least 1", ints())))
            }
            "perm" => {
                let p = ints();
                let mut seen = HashSet::new();
                if let Some(v) = p.iter().find(|&&v| v < 0 || !seen.insert(v)) {
                    return Err(err(format!("attribute `perm` {p:?} is not a permutation ({v} is negative or repeated)")));
                }
            }
            // Cast-1 named the type by a string; from opset 6 it is an int.
            "to" if n.op_type() == "Cast" && k == AttributeType::Int => {
                let code = a.i.unwrap_or(0);
                if i32::try_from(code).ok().and_then(DType::from_onnx_code).is_none() {
                    return Err(err(format!("attribute `to` is {code}, which is no ONNX data type burnc knows")));
                }
            }
            _ => {}
        }
    }
    for (name, _, required) in schema.map(|s| s.attributes.as_slice()).unwrap_or_default() {
        if *required && !seen.contains(name) {
            return Err(err(format!("attribute `{name}` is required")));
        }
    }
    Ok(())
}
/// A declared tensor shape's dims are sizes: never negative.
fn declared_dims(v: &super::proto::ValueInfoProto) -> Result<(), String> {
    use super::proto::tensor_shape_proto::dimension::Value;
    use super::proto::type_proto;
    if let Some(type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        for (i, d) in t.shape.iter().flat_map(|s| &s.dim).enumerate() {
            if let Some(Value::DimValue(n)) = d.value {
                if n < 0 {
                    return Err(format!("dim {i} is declared {n}"));
                }
            }
        }
    }
    Ok(())
}
