//! Bad files never panic: truncated, bit-flipped and random-byte ONNX files give a clean error
//! from the frontend; models that still decode run through the interpreter without panicking.
use burnc_compiler::interp::{self, RtValue};
use burnc_frontends::onnx;
use bytes::Bytes;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

fn example() -> (Vec<u8>, RtValue) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/mnist");
    let model = std::fs::read(dir.join("mnist_cnn.onnx")).expect("examples/mnist/mnist_cnn.onnx");
    let input = std::fs::read(dir.join("input_0.pb")).expect("examples/mnist/input_0.pb");
    let input = onnx::values::decode_value(&input, onnx::values::ValueKindHint::Tensor).expect("input decodes");
    (model, input)
}

/// xorshift64*: a fixed, dependency-free generator so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Decode, and run when it decodes; Ok(true) when the frontend refused with a message.
fn try_model(bytes: &[u8], input: &RtValue) -> Result<bool, String> {
    let bytes = Bytes::copy_from_slice(bytes);
    let r = catch_unwind(AssertUnwindSafe(|| match onnx::load_bytes(bytes, None) {
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty(), "empty error message");
            true
        }
        Ok(m) => {
            let _ = burnc_compiler::passes::prepare(&mut m.graph.clone());
            let inputs = m.graph.inputs.iter().map(|_| input.clone()).collect();
            let _ = interp::run(&m.graph, inputs);
            false
        }
    }));
    r.map_err(|p| {
        p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
    })
}

#[test]
fn truncated_files_error_cleanly() {
    let (model, input) = example();
    let mut refused = 0;
    let mut tried = 0;
    let step = (model.len() / 400).max(1);
    for cut in (0..model.len()).step_by(step) {
        tried += 1;
        match try_model(&model[..cut], &input) {
            Ok(true) => refused += 1,
            Ok(false) => {}
            Err(p) => panic!("truncation at {cut} bytes panicked: {p}"),
        }
    }
    // A cut that lands on a field boundary can still be a valid (smaller) model; almost all
    // others must be refused.
    assert!(refused * 10 >= tried * 9, "only {refused}/{tried} truncations were refused");
}

#[test]
fn bit_flips_never_panic() {
    let (model, input) = example();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..600 {
        let mut m = model.clone();
        for _ in 0..(1 + rng.next() % 4) {
            let i = (rng.next() as usize) % m.len();
            m[i] ^= 1 << (rng.next() % 8);
        }
        if let Err(p) = try_model(&m, &input) {
            panic!("bit-flipped model panicked: {p}");
        }
    }
}

#[test]
fn random_bytes_are_refused() {
    let (_, input) = example();
    let mut rng = Rng(42);
    for len in [0usize, 1, 2, 7, 64, 1000, 65536] {
        for _ in 0..20 {
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            match try_model(&bytes, &input) {
                Ok(true) => {}
                // An empty buffer is a valid empty ModelProto, which has no graph: refused too.
                Ok(false) => panic!("{len} random bytes decoded as a model"),
                Err(p) => panic!("{len} random bytes panicked: {p}"),
            }
        }
    }
}

#[test]
fn error_names_node_op_and_opset() {
    // An unsupported op in an otherwise valid file: the error says which node, op and opset.
    use onnx::proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto, ValueInfoProto};
    use prost::Message;
    let node = NodeProto {
        op_type: Some("NoSuchOp".into()),
        name: Some("weird".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let vi = |n: &str| ValueInfoProto { name: Some(n.into()), ..Default::default() };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto { node: vec![node], input: vec![vi("x")], output: vec![vi("y")], ..Default::default() }),
        ..Default::default()
    };
    let err = onnx::load_bytes(Bytes::from(model.encode_to_vec()), None).expect_err("unsupported op must fail");
    let msg = err.to_string();
    assert!(msg.contains("weird") && msg.contains("NoSuchOp") && msg.contains("17"), "{msg}");
}
