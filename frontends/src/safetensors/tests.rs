//! Every error kind, on small files written here (header + data).
use super::*;
use burnc_compiler::ir::{Shape, TensorType, ValueType};

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A raw file: header text then data.
fn raw(header: &str, data: &[u8]) -> Bytes {
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    b.extend_from_slice(data);
    Bytes::from(b)
}

fn corrupt_msg(b: Bytes) -> String {
    match parse(b) {
        Err(SafetensorsError::Corrupt(m)) => m,
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// A graph holding f32 parameters `w` [2, 2] and `b` [2].
fn graph() -> Graph {
    let mut g = Graph::default();
    for (name, shape) in [("w", vec![2, 2]), ("b", vec![2])] {
        let n: usize = shape.iter().product();
        let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(&shape)) });
        let p = Param { dtype: DType::F32, shape, bytes: Bytes::from(f32s(&vec![0.0; n])) };
        g.add_value(name, ty, ValueKind::Param(p));
    }
    g
}

use burnc_compiler::ir::{Graph, Param, ValueKind};

fn param<'g>(g: &'g Graph, name: &str) -> &'g Param {
    match g.values.iter().find(|v| v.name == name).map(|v| &v.kind) {
        Some(ValueKind::Param(p)) => p,
        _ => panic!("no param {name}"),
    }
}

#[test]
fn reads_by_reference_and_applies() {
    let file = Bytes::from(serialize(&[("w", DType::F32, &[2, 2], &f32s(&[1., 2., 3., 4.])), ("b", DType::F32, &[2], &f32s(&[5., 6.]))]));
    let st = parse(file.clone()).expect("parse");
    // The tensor's bytes point into the file's buffer.
    let w = &st.tensors["w"];
    let base = file.as_ptr() as usize;
    assert!((w.bytes.as_ptr() as usize) >= base && (w.bytes.as_ptr() as usize) < base + file.len());
    let mut g = graph();
    let done = apply(&mut g, &st, &WeightsOptions::default()).expect("apply");
    assert_eq!((done.replaced, done.converted), (2, 0));
    assert_eq!(param(&g, "b").to_tensor().expect("t").to_f64_vec(), [5., 6.]);
}

#[test]
fn converts_f16_and_bf16_and_renames() {
    let h: Vec<u8> = [1.5f32, -2., 0.25, 8.].iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect();
    let bh: Vec<u8> = [3.0f32, 0.5].iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()).collect();
    let file = serialize(&[("model.w", DType::F16, &[2, 2], &h), ("model.b", DType::BF16, &[2], &bh)]);
    let st = parse(Bytes::from(file)).expect("parse");
    let mut g = graph();
    let opts = WeightsOptions { renames: vec![Rename::parse("model.*=*").expect("rule")], allow_unused: false };
    let done = apply(&mut g, &st, &opts).expect("apply");
    assert_eq!(done.converted, 2);
    assert_eq!(param(&g, "w").dtype, DType::F32);
    assert_eq!(param(&g, "w").to_tensor().expect("t").to_f64_vec(), [1.5, -2., 0.25, 8.]);
    assert_eq!(param(&g, "b").to_tensor().expect("t").to_f64_vec(), [3., 0.5]);
}

#[test]
fn mismatches_are_listed_together() {
    let file = serialize(&[
        ("w", DType::F32, &[4], &f32s(&[0.; 4])),
        ("extra1", DType::F32, &[1], &f32s(&[0.])),
        ("extra2", DType::F32, &[1], &f32s(&[0.])),
    ]);
    let st = parse(Bytes::from(file)).expect("parse");
    let mut g = graph();
    let Err(SafetensorsError::Mismatch(m)) = apply(&mut g, &st, &WeightsOptions::default()) else { panic!("mismatch expected") };
    assert_eq!(m.missing, ["b"]);
    assert_eq!(m.unused, ["extra1", "extra2"]);
    assert_eq!(m.shapes, [("w".to_string(), vec![2, 2], vec![4])]);
    let msg = SafetensorsError::Mismatch(m).to_string();
    assert!(msg.contains("`w`: the model's shape is [2, 2], the file's [4]") && msg.contains("extra1, extra2") && msg.contains(": b"), "{msg}");
    // The graph is untouched when the file does not fit.
    assert_eq!(param(&g, "w").shape, [2, 2]);

    // allow_unused drops only the unused-key complaint.
    let file = serialize(&[("w", DType::F32, &[2, 2], &f32s(&[0.; 4])), ("b", DType::F32, &[2], &f32s(&[0.; 2])), ("x", DType::F32, &[1], &f32s(&[0.]))]);
    let st = parse(Bytes::from(file)).expect("parse");
    let opts = WeightsOptions { allow_unused: true, ..Default::default() };
    assert_eq!(apply(&mut g, &st, &opts).expect("apply").unused, ["x"]);
}

#[test]
fn dtype_mismatch_and_collision() {
    let ints: Vec<u8> = [1i32, 2, 3, 4].iter().flat_map(|x| x.to_le_bytes()).collect();
    let file = serialize(&[("w", DType::I32, &[2, 2], &ints), ("a.b", DType::F32, &[2], &f32s(&[0.; 2])), ("c.b", DType::F32, &[2], &f32s(&[0.; 2]))]);
    let st = parse(Bytes::from(file)).expect("parse");
    let opts = WeightsOptions { renames: vec![Rename::parse("*.b=b").expect("rule")], allow_unused: false };
    let Err(SafetensorsError::Mismatch(m)) = apply(&mut graph(), &st, &opts) else { panic!("mismatch expected") };
    assert_eq!(m.dtypes.len(), 1);
    assert_eq!((m.dtypes[0].0.as_str(), m.dtypes[0].1.as_str(), m.dtypes[0].2.as_str()), ("w", "f32", "I32"));
    assert_eq!(m.collisions, [("b".to_string(), vec!["`a.b`".to_string(), "`c.b`".to_string()])]);
    // `b` is reported as a collision, not as missing.
    assert!(m.missing.is_empty(), "{m:?}");
}

#[test]
fn truncated_and_corrupt_files() {
    let good = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    assert!(corrupt_msg(Bytes::from_static(b"\x10\0\0")).contains("too short"));
    // Header length past the end of the file.
    let mut b = raw(good, &[0; 8]).to_vec();
    b[0] = 200;
    assert!(corrupt_msg(Bytes::from(b)).contains("past the end"));
    assert!(corrupt_msg(raw(&"x".repeat(16), &[])).contains("bad JSON"));
    assert!(corrupt_msg(raw(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}"#, &[0; 8])).contains("bad JSON"));
    assert!(corrupt_msg(raw("[]", &[])).contains("not an object"));
    // Data shorter than the offsets say (a truncated download).
    assert!(corrupt_msg(raw(good, &[0; 5])).contains("out of range"));
    assert!(corrupt_msg(raw(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}"#, &[0; 8])).contains("out of range"));
    // Size that does not match shape x dtype.
    assert!(corrupt_msg(raw(r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, &[0; 8])).contains("takes 12"));
    let two = |a: &str, b: &str| format!(r#"{{"a":{{"dtype":"F32","shape":[1],"data_offsets":{a}}},"b":{{"dtype":"F32","shape":[1],"data_offsets":{b}}}}}"#);
    assert!(corrupt_msg(raw(&two("[0,4]", "[2,6]"), &[0; 8])).contains("overlaps"));
    assert!(corrupt_msg(raw(&two("[0,4]", "[8,12]"), &[0; 12])).contains("belong to no tensor"));
    assert!(corrupt_msg(raw(good, &[0; 9])).contains("at the end"));
    assert!(corrupt_msg(raw(r#"{"w":{"dtype":"Q9","shape":[],"data_offsets":[0,0]}}"#, &[])).contains("unsupported dtype"));
    assert!(corrupt_msg(raw(r#"{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}"#, &[])).contains("non-negative"));
    assert!(corrupt_msg(raw(r#"{"w":{"dtype":"F32","shape":[1]}}"#, &[])).contains("no `data_offsets`"));
    assert!(corrupt_msg(raw(r#"{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,0]}}"#, &[])).contains("too large"));
    assert!(corrupt_msg(raw(r#"{"__metadata__":{"a":1}}"#, &[])).contains("not a string"));
    let mut huge = u64::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(b"{}");
    assert!(corrupt_msg(Bytes::from(huge)).contains("limit"));
    // Invalid UTF-8 in the header.
    let mut bad_utf8 = 1u64.to_le_bytes().to_vec();
    bad_utf8.push(0xff);
    assert!(corrupt_msg(Bytes::from(bad_utf8)).contains("UTF-8"));
}

#[test]
fn metadata_and_empty_file() {
    let st = parse(raw(r#"{"__metadata__":{"format":"pt"}}"#, &[])).expect("parse");
    assert_eq!(st.metadata["format"], "pt");
    assert!(st.tensors.is_empty());
}

#[test]
fn missing_file_is_io_error() {
    assert!(matches!(load(Path::new("/nonexistent/w.safetensors")), Err(SafetensorsError::Io { .. })));
}

#[test]
fn mutated_files_never_panic() {
    let good = serialize(&[("a", DType::F32, &[2], &f32s(&[1., 2.])), ("b", DType::F16, &[1], &[0, 0x3c]), ("__x\"y", DType::I8, &[0], &[])]);
    assert!(parse(Bytes::from(good.clone())).is_ok());
    // Every truncation is refused (the data must tile the buffer exactly).
    for n in 0..good.len() {
        assert!(parse(Bytes::from(good[..n].to_vec())).is_err(), "prefix {n}");
    }
    // Every byte replaced by characters that matter to the header or the length: errors or
    // a different valid file, never a panic.
    for i in 0..good.len() {
        for c in [0u8, 0xff, b'"', b'9', b'{', b']', b'\\', b','] {
            let mut b = good.clone();
            b[i] = c;
            let _ = parse(Bytes::from(b));
        }
    }
}
