//! The graph: values and nodes in SSA form, with inputs, outputs, parameters and constants.
use super::{DType, Op, Shape};
use crate::tensor::Tensor;
use bytes::Bytes;
use std::collections::{HashMap, HashSet};

/// Index of a value in [`Graph::values`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// Index of a node in [`Graph::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Static type of a value: dtype plus shape (`None` when even the rank is unknown).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Option<Shape>,
}

/// What a value is besides a node output.
#[derive(Debug, Clone)]
pub enum ValueKind {
    /// A graph input, fed at run time.
    Input,
    /// Produced by a node.
    Node(NodeId),
    /// A weight: bytes kept by reference into the model file (memory-mapped), not copied.
    Param(Param),
    /// A small constant the compiler made or folded (shape vectors, scalars).
    Const(Tensor),
    /// A value of an enclosing graph, used by a subgraph (If/Loop/Scan bodies).
    Outer,
}

/// A parameter's bytes: little-endian elements, possibly a slice of a memory map.
#[derive(Debug, Clone)]
pub struct Param {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Bytes,
}

impl Param {
    /// Decode into an owned tensor (the interpreter does this once per run).
    pub fn to_tensor(&self) -> Option<Tensor> {
        let n = self.shape.iter().product::<usize>();
        let data = crate::tensor::Data::from_packed(self.dtype, &self.bytes, n)?;
        Some(Tensor::new(self.shape.clone(), data))
    }
}

/// Kind of a value's content: a tensor, or the ONNX sequence/optional wrappers (interpreter only).
#[derive(Debug, Clone, PartialEq)]
pub enum ValueType {
    Tensor(TensorType),
    Sequence(Option<DType>),
    Optional(Box<ValueType>),
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Value {
    pub name: String,
    pub ty: ValueType,
    pub kind: ValueKind,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub op: Op,
    /// Inputs; `None` marks an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<ValueId>,
    /// The op as the source file spelled it (for errors): e.g. `("Conv", 11)`.
    pub source_op: Option<(String, i64)>,
}

/// A computation graph. Nodes are kept in a valid topological order.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub name: String,
    pub values: Vec<Value>,
    pub nodes: Vec<Node>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
}

impl Graph {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.0 as usize]
    }

    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        &mut self.values[id.0 as usize]
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    pub fn add_value(&mut self, name: impl Into<String>, ty: ValueType, kind: ValueKind) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(Value { name: name.into(), ty, kind });
        id
    }

    pub fn add_const(&mut self, name: impl Into<String>, t: Tensor) -> ValueId {
        let ty = ValueType::Tensor(TensorType { dtype: t.dtype(), shape: Some(Shape::fixed(&t.shape)) });
        self.add_value(name, ty, ValueKind::Const(t))
    }

    /// Append a node whose outputs are fresh values with the given names.
    pub fn add_node(
        &mut self,
        name: impl Into<String>,
        op: Op,
        inputs: Vec<Option<ValueId>>,
        output_names: &[String],
    ) -> (NodeId, Vec<ValueId>) {
        let nid = NodeId(self.nodes.len() as u32);
        let outputs: Vec<ValueId> = output_names
            .iter()
            .map(|n| self.add_value(n.clone(), ValueType::Unknown, ValueKind::Node(nid)))
            .collect();
        self.nodes.push(Node { name: name.into(), op, inputs, outputs: outputs.clone(), source_op: None });
        (nid, outputs)
    }

    /// The tensor type of a value, when it is a tensor with a known type.
    pub fn tensor_type(&self, id: ValueId) -> Option<&TensorType> {
        match &self.value(id).ty {
            ValueType::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// Constant content of a value (constants and parameters), if any.
    pub fn const_value(&self, id: ValueId) -> Option<Tensor> {
        match &self.value(id).kind {
            ValueKind::Const(t) => Some(t.clone()),
            ValueKind::Param(p) => p.to_tensor(),
            _ => None,
        }
    }

    /// Node indices reading each value (a node once per input slot that reads it).
    pub fn consumers(&self) -> HashMap<ValueId, Vec<usize>> {
        let mut m: HashMap<ValueId, Vec<usize>> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for v in n.inputs.iter().flatten() {
                m.entry(*v).or_default().push(i);
            }
        }
        m
    }

    /// Number of uses of each value (node inputs plus graph outputs).
    pub fn use_counts(&self) -> HashMap<ValueId, usize> {
        let mut m = HashMap::new();
        for n in &self.nodes {
            for v in n.inputs.iter().flatten() {
                *m.entry(*v).or_insert(0) += 1;
            }
        }
        for v in &self.outputs {
            *m.entry(*v).or_insert(0) += 1;
        }
        m
    }

    /// Parameters: (value id, param).
    pub fn params(&self) -> impl Iterator<Item = (ValueId, &Param)> {
        self.values.iter().enumerate().filter_map(|(i, v)| match &v.kind {
            ValueKind::Param(p) => Some((ValueId(i as u32), p)),
            _ => None,
        })
    }
}

/// `base`, or else the first of `base_2`, `base_3`, … not in `taken`; added to `taken`.
pub fn unique_name(base: String, taken: &mut HashSet<String>) -> String {
    let mut name = base.clone();
    let mut k = 1;
    while !taken.insert(name.clone()) {
        k += 1;
        name = format!("{base}_{k}");
    }
    name
}
