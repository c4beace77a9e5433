//! What the fuzz targets share: the compile path every model goes through, and a builder of
//! small random graphs of valid ops for the structure-aware target.
use burnc_compiler::codegen::{self, CodegenOptions};
use burnc_compiler::ir::{Dim, Graph, ValueType};
use burnc_frontends::onnx::proto::{
    attribute_proto::AttributeType, tensor_shape_proto, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use prost::Message;

/// Validation happened in `load_bytes`; here: symbolic input dims pinned to 2, the passes,
/// the memory plan (with its verifier) and emission, which parses the module it writes.
/// Errors are fine; panics are what the fuzzer looks for.
pub fn compile(mut g: Graph) {
    for &i in &g.inputs.clone() {
        if let ValueType::Tensor(t) = &mut g.value_mut(i).ty {
            if let Some(s) = &mut t.shape {
                for d in &mut s.0 {
                    if !matches!(d, Dim::Fixed(_)) {
                        *d = Dim::Fixed(2);
                    }
                }
            }
        }
    }
    if burnc_compiler::passes::prepare(&mut g).is_err() {
        return;
    }
    // A small arena limit keeps the fuzzer's memory use small; a refusal is a clean error.
    let opts = CodegenOptions { max_arena: 1 << 26, ..Default::default() };
    let _ = codegen::generate(&g, &opts);
}

/// Bytes as a stream of small choices (zeros once exhausted).
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n.max(1)
    }
    /// A small signed int, mostly in -2..=5, sometimes extreme.
    fn int(&mut self) -> i64 {
        match self.byte() {
            250 => i64::MAX,
            251 => i64::MIN,
            252 => 1 << 40,
            253 => -1,
            b => (b % 8) as i64 - 2,
        }
    }
    fn ints(&mut self, n: usize) -> Vec<i64> {
        (0..n).map(|_| self.int()).collect()
    }
}

fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto { name: Some(name.into()), r#type: Some(AttributeType::Int as i32), i: Some(v), ..Default::default() }
}

fn attr_ints(name: &str, v: Vec<i64>) -> AttributeProto {
    AttributeProto { name: Some(name.into()), r#type: Some(AttributeType::Ints as i32), ints: v, ..Default::default() }
}

fn int_tensor(name: &str, v: Vec<i64>) -> TensorProto {
    TensorProto { name: Some(name.into()), dims: vec![v.len() as i64], data_type: Some(7), int64_data: v, ..Default::default() }
}

fn float_tensor(name: &str, dims: &[i64], c: &mut Choices) -> TensorProto {
    let n: i64 = dims.iter().product();
    let v = (0..n.clamp(0, 4096)).map(|_| c.int() as f32 * 0.25).collect();
    TensorProto { name: Some(name.into()), dims: dims.to_vec(), data_type: Some(1), float_data: v, ..Default::default() }
}

fn value_info(name: &str, dims: Option<&[i64]>) -> ValueInfoProto {
    let shape = dims.map(|d| TensorShapeProto {
        dim: d.iter().map(|&v| tensor_shape_proto::Dimension { value: Some(tensor_shape_proto::dimension::Value::DimValue(v)), ..Default::default() }).collect(),
    });
    let tensor = type_proto::Tensor { elem_type: Some(1), shape };
    ValueInfoProto { name: Some(name.into()), r#type: Some(TypeProto { value: Some(type_proto::Value::TensorType(tensor)), ..Default::default() }), ..Default::default() }
}

/// A model of up to 12 nodes drawn from `data`: float inputs of rank 1 to 4 with dims 1 to 5,
/// each node an op from a fixed list reading earlier values, with random attributes and
/// constant operands (shapes, axes, weights) that are often, not always, consistent.
pub fn random_model(data: &[u8]) -> Vec<u8> {
    let mut c = Choices(data);
    let mut inputs = Vec::new();
    let mut values: Vec<String> = Vec::new();
    for k in 0..1 + c.below(2) {
        let rank = 1 + c.below(4);
        let dims: Vec<i64> = (0..rank).map(|_| 1 + c.below(5) as i64).collect();
        let name = format!("x{k}");
        inputs.push(value_info(&name, Some(&dims)));
        values.push(name);
    }
    let mut nodes = Vec::new();
    let mut inits = Vec::new();
    for k in 0..1 + c.below(12) {
        let out = format!("v{k}");
        let a = values[c.below(values.len())].clone();
        let b = values[c.below(values.len())].clone();
        let konst = |c: &mut Choices, inits: &mut Vec<TensorProto>, n: usize| {
            let name = format!("k{k}_{}", inits.len());
            inits.push(int_tensor(&name, c.ints(n)));
            name
        };
        let (op, ins, attrs): (&str, Vec<String>, Vec<AttributeProto>) = match c.below(24) {
            0 => ("Relu", vec![a], vec![]),
            1 => ("Sigmoid", vec![a], vec![]),
            2 => ("Add", vec![a, b], vec![]),
            3 => ("Mul", vec![a, b], vec![]),
            4 => ("Div", vec![a, b], vec![]),
            5 => ("MatMul", vec![a, b], vec![]),
            6 => {
                let r = 1 + c.below(4);
                let mut perm: Vec<i64> = (0..r as i64).collect();
                for i in (1..r).rev() {
                    perm.swap(i, c.below(i + 1));
                }
                if c.below(8) == 0 {
                    perm[0] = c.int();
                }
                ("Transpose", vec![a], vec![attr_ints("perm", perm)])
            }
            7 => {
                let n = 1 + c.below(4);
                let s = konst(&mut c, &mut inits, n);
                ("Reshape", vec![a, s], vec![])
            }
            8 => ("Concat", vec![a, b], vec![attr_i("axis", c.int())]),
            9 => ("Softmax", vec![a], vec![attr_i("axis", c.int())]),
            10 => {
                let n = 1 + c.below(2);
                let ax = konst(&mut c, &mut inits, n);
                ("ReduceSum", vec![a, ax], vec![attr_i("keepdims", c.below(2) as i64)])
            }
            11 => ("Flatten", vec![a], vec![attr_i("axis", c.int())]),
            12 => {
                let n = 1 + c.below(3);
                let (s, e, ax) = (konst(&mut c, &mut inits, n), konst(&mut c, &mut inits, n), konst(&mut c, &mut inits, n));
                ("Slice", vec![a, s, e, ax], vec![])
            }
            13 => {
                let n = 1 + c.below(4);
                let i = konst(&mut c, &mut inits, n);
                ("Gather", vec![a, i], vec![attr_i("axis", c.int())])
            }
            14 => {
                let ax = konst(&mut c, &mut inits, 1);
                ("Unsqueeze", vec![a, ax], vec![])
            }
            15 => {
                let (cin, cout, kk) = (1 + c.below(4) as i64, 1 + c.below(4) as i64, 1 + c.below(3) as i64);
                let name = format!("w{k}");
                inits.push(float_tensor(&name, &[cout, cin, kk, kk], &mut c));
                let attrs = vec![attr_i("group", 1 + c.below(2) as i64), attr_ints("strides", vec![1 + c.below(2) as i64; 2]), attr_ints("pads", vec![c.below(2) as i64; 4])];
                ("Conv", vec![a, name], attrs)
            }
            16 => {
                let kk = 1 + c.below(3) as i64;
                ("MaxPool", vec![a], vec![attr_ints("kernel_shape", vec![kk; 2]), attr_ints("strides", vec![1 + c.below(2) as i64; 2])])
            }
            17 => ("GlobalAveragePool", vec![a], vec![]),
            18 => {
                let (m, n) = (1 + c.below(5) as i64, 1 + c.below(5) as i64);
                let name = format!("g{k}");
                inits.push(float_tensor(&name, &[m, n], &mut c));
                ("Gemm", vec![a, name], vec![attr_i("transB", c.below(2) as i64)])
            }
            19 => {
                let n = 2 * (1 + c.below(4));
                let p = konst(&mut c, &mut inits, n);
                ("Pad", vec![a, p], vec![])
            }
            20 => {
                let n = 1 + c.below(4);
                let s = konst(&mut c, &mut inits, n);
                ("Expand", vec![a, s], vec![])
            }
            21 => {
                let n = 1 + c.below(4);
                let r = konst(&mut c, &mut inits, n);
                ("Tile", vec![a, r], vec![])
            }
            22 => ("Cast", vec![a], vec![attr_i("to", [1, 6, 7, 10, 11, 3, 9][c.below(7)])]),
            _ => ("Split", vec![a], vec![attr_i("axis", c.int()), attr_i("num_outputs", 1 + c.below(3) as i64)]),
        };
        let outs: Vec<String> = if op == "Split" {
            let n = attrs.iter().find(|a| a.name() == "num_outputs").and_then(|a| a.i).unwrap_or(1);
            (0..n).map(|j| format!("{out}_{j}")).collect()
        } else {
            vec![out]
        };
        values.extend(outs.iter().cloned());
        nodes.push(NodeProto { op_type: Some(op.into()), name: Some(format!("n{k}")), input: ins, output: outs, attribute: attrs, ..Default::default() });
    }
    let last = values.last().cloned().unwrap_or_default();
    let graph = GraphProto { name: Some("fuzz".into()), node: nodes, initializer: inits, input: inputs, output: vec![value_info(&last, None)], ..Default::default() };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(18) }],
        graph: Some(graph),
        ..Default::default()
    };
    model.encode_to_vec()
}
