//! The torch-made fixtures (tests/data/pytorch, values in manifest.json) read exactly; every
//! loading error is an `Err` naming what is wrong, and no truncation or mutation panics.
use super::write::{archive, contiguous_strides, Pickler};
use super::*;
use crate::safetensors::json::{self, Json};
use crate::safetensors::{apply, Rename, SafetensorsError, WeightsOptions};
use burnc_compiler::ir::{DType, Graph, Param, Shape, TensorType, ValueKind, ValueType};
use half::{bf16, f16};
use std::path::PathBuf;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/pytorch")
}

fn fixture(name: &str) -> Bytes {
    Bytes::from(std::fs::read(fixture_dir().join(name)).expect("fixture"))
}

/// Made with torch (make_fixtures.py; values in manifest.json).
const FIXTURES: [&str; 5] = ["cnn_state_dict.pt", "dtypes.pt", "views.pt", "checkpoint.pt", "legacy.pt"];
/// Every fixture, for the truncation and bit-flip sweeps (make_stdlib_fixtures.py made the last two).
const ALL: [&str; 7] = ["cnn_state_dict.pt", "dtypes.pt", "views.pt", "checkpoint.pt", "legacy.pt", "protocol4.pt", "big_endian.pt"];

fn field<'j>(obj: &'j Json, name: &str) -> &'j Json {
    match obj {
        Json::Obj(m) => m.iter().find(|(k, _)| k == name).map(|(_, v)| v).unwrap_or_else(|| panic!("no `{name}`")),
        _ => panic!("not an object"),
    }
}

fn torch_dtype(name: &str) -> DType {
    match name {
        "float32" => DType::F32,
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "float64" => DType::F64,
        "int64" => DType::I64,
        "int32" => DType::I32,
        "int16" => DType::I16,
        "int8" => DType::I8,
        "uint8" => DType::U8,
        "bool" => DType::Bool,
        other => panic!("dtype {other}"),
    }
}

/// Element `i` of little-endian `b` as f64 (exact for every dtype the fixtures hold).
fn element(d: DType, b: &[u8], i: usize) -> f64 {
    let w = d.bits() / 8;
    let e = &b[i * w..(i + 1) * w];
    match d {
        DType::F32 => f32::from_le_bytes(e.try_into().unwrap()) as f64,
        DType::F64 => f64::from_le_bytes(e.try_into().unwrap()),
        DType::F16 => f16::from_le_bytes(e.try_into().unwrap()).to_f64(),
        DType::BF16 => bf16::from_le_bytes(e.try_into().unwrap()).to_f64(),
        DType::I64 => i64::from_le_bytes(e.try_into().unwrap()) as f64,
        DType::I32 => i32::from_le_bytes(e.try_into().unwrap()) as f64,
        DType::I16 => i16::from_le_bytes(e.try_into().unwrap()) as f64,
        DType::I8 => e[0] as i8 as f64,
        DType::U8 | DType::Bool => e[0] as f64,
        other => panic!("dtype {other:?}"),
    }
}

#[test]
fn fixtures_match_the_manifest() {
    let text = std::fs::read_to_string(fixture_dir().join("manifest.json")).expect("manifest");
    let manifest = json::parse(&text).expect("json");
    let Json::Obj(files) = field(&manifest, "files") else { panic!("files") };
    assert_eq!(files.len(), FIXTURES.len());
    for (file, tensors) in files {
        let got = parse(fixture(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let Json::Obj(tensors) = tensors else { panic!("{file}") };
        let want_keys: Vec<&str> = tensors.iter().map(|(k, _)| k.as_str()).collect();
        let got_keys: Vec<&str> = got.tensors.keys().map(|k| k.as_str()).collect();
        let mut sorted = want_keys.clone();
        sorted.sort();
        assert_eq!(got_keys, sorted, "{file}: keys");
        for (key, spec) in tensors {
            let t = &got.tensors[key];
            let Json::Str(dtype) = field(spec, "dtype") else { panic!() };
            assert_eq!(t.dtype, torch_dtype(dtype), "{file} {key}");
            let Json::Arr(shape) = field(spec, "shape") else { panic!() };
            let shape: Vec<usize> = shape.iter().map(|d| d.as_u64().unwrap() as usize).collect();
            assert_eq!(t.shape, shape, "{file} {key}");
            let Json::Arr(values) = field(spec, "values") else { panic!() };
            let n: usize = shape.iter().product();
            assert_eq!(values.len(), n, "{file} {key}");
            assert_eq!(t.bytes.len(), n * t.dtype.bits() / 8, "{file} {key}: byte length");
            for (i, v) in values.iter().enumerate() {
                let want = match v {
                    Json::Num(s) => s.parse::<f64>().unwrap(),
                    Json::Bool(b) => *b as u8 as f64,
                    other => panic!("{other:?}"),
                };
                assert_eq!(element(t.dtype, &t.bytes, i), want, "{file} {key}[{i}]");
            }
        }
    }
}

/// Fixtures of make_stdlib_fixtures.py (torch's layout and globals, written without torch).
#[test]
fn protocol_4_parameters_and_big_endian() {
    let t = parse(fixture("protocol4.pt")).expect("protocol 4");
    assert_eq!(t.tensors.keys().collect::<Vec<_>>(), ["model.b", "model.w"], "an object with state, ints and lists are skipped");
    let w = &t.tensors["model.w"];
    assert_eq!((w.dtype, w.shape.as_slice()), (DType::F32, &[2, 3][..]));
    assert_eq!((0..6).map(|i| element(DType::F32, &w.bytes, i)).collect::<Vec<_>>(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let b = &t.tensors["model.b"];
    assert_eq!((b.dtype, element(DType::F64, &b.bytes, 0), element(DType::F64, &b.bytes, 1)), (DType::F64, 0.5, -1.5));

    let t = parse(fixture("big_endian.pt")).expect("big endian");
    let w = &t.tensors["w"];
    assert_eq!((0..3).map(|i| element(DType::I32, &w.bytes, i)).collect::<Vec<_>>(), [1.0, -2.0, 300.0]);
}

#[test]
fn checkpoint_nests_and_skips_non_tensors() {
    let ck = parse(fixture("checkpoint.pt")).expect("checkpoint");
    assert!(ck.tensors.keys().all(|k| k.starts_with("model.")), "{:?}", ck.tensors.keys());
    let sd = parse(fixture("cnn_state_dict.pt")).expect("state dict");
    assert_eq!(ck.tensors.len(), sd.tensors.len());
    let bn = &sd.tensors["1.num_batches_tracked"];
    assert_eq!((bn.dtype, bn.shape.as_slice()), (DType::I64, &[][..]));
}

#[test]
fn contiguous_tensors_are_not_copied() {
    let bytes = fixture("views.pt");
    let v = parse(bytes.clone()).expect("views");
    let inside = |b: &Bytes| {
        let (lo, hi) = (bytes.as_ptr() as usize, bytes.as_ptr() as usize + bytes.len());
        (lo..hi).contains(&(b.as_ptr() as usize))
    };
    assert!(inside(&v.tensors["base"].bytes) && inside(&v.tensors["row2"].bytes), "contiguous views slice the file");
    assert!(!inside(&v.tensors["t"].bytes), "a transposed view is copied");
}

#[test]
fn writer_round_trips() {
    let w: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let b: Vec<u8> = [7i64, -8].iter().flat_map(|x| x.to_le_bytes()).collect();
    let file = serialize(&[("fc.weight", DType::F32, &[2, 3], &w), ("fc.n", DType::I64, &[2], &b)]);
    let t = parse(Bytes::from(file)).expect("parse");
    assert_eq!(t.tensors.len(), 2);
    assert_eq!(t.tensors["fc.weight"].bytes.as_ref(), w.as_slice());
    assert_eq!(t.tensors["fc.weight"].shape, vec![2, 3]);
    assert_eq!(t.tensors["fc.n"].bytes.as_ref(), b.as_slice());
    assert_eq!(t.tensors["fc.n"].dtype, DType::I64);
}

// ---- errors ----

/// A one-tensor archive: `shape`/`stride`/`offset` over a storage of `storage` bytes.
fn one_tensor(storage_type: &str, storage: Vec<u8>, numel: usize, offset: usize, shape: &[usize], stride: &[usize]) -> Bytes {
    let mut p = Pickler::default();
    p.op(0x80).op(2).ordered_dict().op(b'(').str("w").tensor(storage_type, "0", numel, offset, shape, stride).op(b'u').op(b'.');
    Bytes::from(archive(&p.0, &[("0".into(), storage)]))
}

fn err(b: Bytes) -> PytorchError {
    match parse(b) {
        Err(e) => e,
        Ok(t) => panic!("expected an error, got {:?}", t.tensors.keys()),
    }
}

#[test]
fn a_view_past_its_storage_is_an_error() {
    let e = err(one_tensor("FloatStorage", vec![0; 12], 3, 0, &[4], &[1]));
    let msg = e.to_string();
    assert!(matches!(&e, PytorchError::Tensor { key, .. } if key == "w"), "{msg}");
    assert!(msg.contains("reaches past the end of its storage (3 elements)"), "{msg}");
    // By offset, and by a stride.
    assert!(err(one_tensor("FloatStorage", vec![0; 16], 4, 2, &[3], &[1])).to_string().contains("offset 2"));
    assert!(err(one_tensor("FloatStorage", vec![0; 16], 4, 0, &[2, 2], &[3, 1])).to_string().contains("stride [3, 1]"));
    // A storage whose bytes are not whole elements.
    assert!(err(one_tensor("FloatStorage", vec![0; 10], 3, 0, &[2], &[1])).to_string().contains("not a whole number"));
    // Rank of size and stride differ; a negative size.
    assert!(err(one_tensor("FloatStorage", vec![0; 16], 4, 0, &[2, 2], &[1])).to_string().contains("differ in rank"));
    // In range: a transposed, strided view reads right.
    let data: Vec<u8> = (0..6).flat_map(|x| (x as f32).to_le_bytes()).collect();
    let t = parse(one_tensor("FloatStorage", data, 6, 1, &[2, 2], &[1, 2])).expect("view");
    let got: Vec<f64> = (0..4).map(|i| element(DType::F32, &t.tensors["w"].bytes, i)).collect();
    assert_eq!(got, vec![1.0, 3.0, 2.0, 4.0]);
}

/// torch >= 2.1 writes uint16-64 and float8 tensors with `_rebuild_tensor_v3(storage, offset,
/// size, stride, requires_grad, hooks, dtype)` over an untyped byte storage.
#[test]
fn rebuild_tensor_v3_reads_the_explicit_dtype() {
    let data: Vec<u8> = [1u16, 2, 3, 65535].iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut p = Pickler::default();
    p.op(0x80).op(2).ordered_dict().op(b'(').str("u");
    p.global("torch._utils", "_rebuild_tensor_v3").op(b'(');
    p.op(b'(').str("storage").global("torch", "UntypedStorage").str("0").str("cpu").int(8).op(b't').op(b'Q');
    p.int(1).ints(&[3]).ints(&[1]).op(0x89).ordered_dict().global("torch", "uint16").op(b't').op(b'R');
    p.op(b'u').op(b'.');
    let t = parse(Bytes::from(archive(&p.0, &[("0".into(), data.clone())]))).expect("v3");
    let u = &t.tensors["u"];
    assert_eq!((u.dtype, u.shape.as_slice(), u.bytes.as_ref()), (DType::U16, &[3][..], &data[2..]));
    // An unknown dtype name is an error naming it.
    let mut bad = p.0.clone();
    let at = bad.windows(6).position(|w| w == b"uint16").unwrap();
    bad[at..at + 6].copy_from_slice(b"cplx64");
    let msg = err(Bytes::from(archive(&bad, &[("0".into(), data)]))).to_string();
    assert!(msg.contains("unsupported dtype torch.cplx64"), "{msg}");
}

#[test]
fn unsupported_storage_types_name_the_key() {
    let msg = err(one_tensor("ComplexFloatStorage", vec![0; 16], 2, 0, &[2], &[1])).to_string();
    assert!(msg.contains("tensor `w`") && msg.contains("unsupported storage type torch.ComplexFloatStorage"), "{msg}");
    let msg = err(one_tensor("QInt8Storage", vec![0; 2], 2, 0, &[2], &[1])).to_string();
    assert!(msg.contains("torch.QInt8Storage"), "{msg}");
}

#[test]
fn an_unknown_opcode_names_it_and_its_offset() {
    let b = Bytes::from(archive(&[0x80, 2, b'}', 0xff, b'.'], &[]));
    match err(b) {
        PytorchError::UnknownOpcode { entry, offset, opcode } => {
            assert_eq!((entry.as_str(), offset, opcode), ("archive/data.pkl", 3, 0xff));
        }
        other => panic!("{other}"),
    }
    let msg = err(Bytes::from(archive(&[0x80, 2, 0xff], &[]))).to_string();
    assert_eq!(msg, "archive/data.pkl: unknown pickle opcode 0xff at byte 2");
}

#[test]
fn archive_structure_errors() {
    // No data.pkl.
    let msg = err(Bytes::from(zip::write(&[("archive/version", b"3\n"), ("archive/data/0", &[0; 4])]))).to_string();
    assert!(msg.contains("no `data.pkl`") && msg.contains("archive/data/0"), "{msg}");
    // A storage record the pickle names but the archive lacks.
    let mut p = Pickler::default();
    p.op(0x80).op(2).ordered_dict().op(b'(').str("w").tensor("FloatStorage", "7", 1, 0, &[1], &[1]).op(b'u').op(b'.');
    let msg = err(Bytes::from(archive(&p.0, &[]))).to_string();
    assert!(msg.contains("tensor `w`") && msg.contains("archive/data/7` is missing"), "{msg}");
    // A pickle without STOP; a stack underflow.
    let msg = err(Bytes::from(archive(&[0x80, 2, b'}'], &[]))).to_string();
    assert!(msg.contains("without STOP") && msg.contains("byte 3"), "{msg}");
    let msg = err(Bytes::from(archive(&[0x80, 2, b's', b'.'], &[]))).to_string();
    assert!(msg.contains("SETITEM") && msg.contains("byte 2"), "{msg}");
    // Not a checkpoint at all.
    assert!(matches!(err(Bytes::from_static(b"hello world, not a checkpoint")), PytorchError::NotPytorch));
    // A compressed (deflate) record: patch the method in the local and central headers.
    let mut z = zip::write(&[("archive/data.pkl", &[0x80, 2, b'}', b'.'])]);
    z[8] = 8;
    let central = z.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    z[central + 10] = 8;
    let msg = err(Bytes::from(z)).to_string();
    assert!(msg.contains("compressed (method 8)") && msg.contains("archive/data.pkl"), "{msg}");
    // A corrupted record fails its CRC.
    let mut z = std::fs::read(fixture_dir().join("views.pt")).unwrap();
    let at = z.windows(4).position(|w| w == [0, 0, 0x80, 0x40]).expect("a float in the data");
    z[at + 3] ^= 0x01;
    let msg = err(Bytes::from(z)).to_string();
    assert!(msg.contains("CRC-32 mismatch") && msg.contains("views/data/0"), "{msg}");
}

#[test]
fn legacy_errors() {
    let full = fixture("legacy.pt");
    let msg = err(full.slice(..full.len() - 4)).to_string();
    assert!(msg.contains("legacy") && msg.contains("run past the end of the file"), "{msg}");
    let msg = err(full.slice(..100)).to_string();
    assert_eq!(msg, "legacy file, system info pickle: bad pickle at byte 95: BINUNICODE (length 5 runs past the end of the data)");
}

#[test]
fn every_truncation_is_an_error() {
    for name in ALL {
        let full = fixture(name);
        for n in 0..full.len() {
            assert!(parse(full.slice(..n)).is_err(), "{name} cut to {n} bytes loaded");
        }
    }
}

/// xorshift64*: deterministic mutations without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn bit_flips_never_panic_and_corrupt_data_is_caught() {
    for name in ALL {
        let full = fixture(name).to_vec();
        let reference = parse(Bytes::from(full.clone())).expect("fixture").tensors;
        for i in 0..full.len() {
            let mut b = full.clone();
            b[i] ^= 1 << (i % 8);
            // A flip either fails or leaves every tensor as it was (zip metadata such as a
            // timestamp), except in the legacy format, which has no checksum: there it may
            // change a value, but must not panic.
            if let Ok(t) = parse(Bytes::from(b)) {
                if name != "legacy.pt" {
                    let same = t.tensors.len() == reference.len()
                        && t.tensors.iter().zip(&reference).all(|((k, a), (k2, r))| k == k2 && a.dtype == r.dtype && a.shape == r.shape && a.bytes == r.bytes);
                    assert!(same, "{name}: flipping a bit of byte {i} changed the tensors without an error");
                }
            }
        }
    }
}

/// The pickle is behind a CRC in the zip: mutate it and re-archive so the VM itself sees the
/// damage. Every outcome is fine except a panic.
#[test]
fn mutated_pickles_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for name in ["cnn_state_dict.pt", "dtypes.pt", "views.pt", "checkpoint.pt", "protocol4.pt"] {
        let full = fixture(name);
        let entries = zip::entries(&full).expect("zip");
        let prefix = entries[0].name.split_once('/').expect("a folder").0;
        let pkl = entries.iter().find(|e| e.name.ends_with("data.pkl")).unwrap().data.to_vec();
        let storages: Vec<(String, Vec<u8>)> = entries
            .iter()
            .filter_map(|e| e.name.strip_prefix(&format!("{prefix}/data/")).map(|k| (k.to_string(), e.data.to_vec())))
            .collect();
        for round in 0..1500 {
            let mut p = pkl.clone();
            for _ in 0..1 + round % 4 {
                let i = rng.below(p.len());
                match rng.below(4) {
                    0 => p[i] ^= 1 << rng.below(8),
                    1 => p[i] = rng.next() as u8,
                    2 => {
                        p.remove(i);
                    }
                    _ => p.truncate(i),
                }
                if p.is_empty() {
                    break;
                }
            }
            let _ = parse(Bytes::from(archive(&p, &storages)));
        }
    }
    // The legacy format has no checksum: mutate the file itself.
    let full = fixture("legacy.pt").to_vec();
    for _ in 0..3000 {
        let mut b = full.clone();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
        }
        let _ = parse(Bytes::from(b));
    }
}

#[test]
fn cyclic_and_deep_pickles_terminate() {
    // d = {}; d["self"] = d — a cycle through the memo.
    let cyc = [0x80, 2, b'}', b'q', 0, b'X', 4, 0, 0, 0, b's', b'e', b'l', b'f', b'h', 0, b's', b'.'];
    assert!(parse(Bytes::from(archive(&cyc, &[]))).expect("cycle").tensors.is_empty());
    // 100k nested lists.
    let mut deep = vec![0x80, 2];
    deep.extend(std::iter::repeat_n(b']', 100_000));
    deep.extend(std::iter::repeat_n(b'a', 99_999));
    deep.push(b'.');
    assert!(parse(Bytes::from(archive(&deep, &[]))).expect("deep").tensors.is_empty());
    // l0 = []; l_k = [l_{k-1}, l_{k-1}] for 60 levels: 2^60 paths, refused quickly.
    let mut dag = vec![0x80, 2, b']'];
    for _ in 0..60 {
        dag.extend_from_slice(&[b'q', 0, b'(', b'h', 0, b'h', 0, b'l']);
    }
    dag.push(b'.');
    let msg = err(Bytes::from(archive(&dag, &[]))).to_string();
    assert!(msg.contains("shared too many times"), "{msg}");
    // An expanded view: fine when small, refused when huge.
    let t = parse(one_tensor("FloatStorage", 1.5f32.to_le_bytes().to_vec(), 1, 0, &[2, 3], &[0, 0])).expect("expanded");
    assert_eq!(t.tensors["w"].bytes.len(), 24);
    let msg = err(one_tensor("FloatStorage", vec![0; 4], 1, 0, &[1 << 20, 1 << 20], &[0, 0])).to_string();
    assert!(msg.contains("expanded view"), "{msg}");
}

#[test]
fn an_archive_without_a_folder_reads() {
    let mut p = Pickler::default();
    p.op(0x80).op(2).ordered_dict().op(b'(').str("w").tensor("FloatStorage", "0", 1, 0, &[1], &[1]).op(b'u').op(b'.');
    let z = zip::write(&[("data.pkl", &p.0), ("data/0", &2.0f32.to_le_bytes())]);
    let t = parse(Bytes::from(z)).expect("root-level records");
    assert_eq!(t.tensors["w"].bytes.as_ref(), 2.0f32.to_le_bytes());
}

// ---- with apply: the same Mismatch errors as safetensors ----

fn graph(params: &[(&str, DType, &[usize])]) -> Graph {
    let mut g = Graph::default();
    for (name, dtype, shape) in params {
        let n: usize = shape.iter().product();
        let ty = ValueType::Tensor(TensorType { dtype: *dtype, shape: Some(Shape::fixed(shape)) });
        let p = Param { dtype: *dtype, shape: shape.to_vec(), bytes: Bytes::from(vec![0u8; n * dtype.bits() / 8]) };
        g.add_value(*name, ty, ValueKind::Param(p));
    }
    g
}

#[test]
fn checkpoint_applies_with_a_rename_and_mismatches_are_listed() {
    let ck = parse(fixture("checkpoint.pt")).expect("checkpoint");
    let cnn: Vec<(&str, DType, &[usize])> = vec![
        ("0.weight", DType::F32, &[4, 1, 3, 3]),
        ("0.bias", DType::F32, &[4]),
        ("1.weight", DType::F32, &[4]),
        ("1.bias", DType::F32, &[4]),
        ("1.running_mean", DType::F32, &[4]),
        ("1.running_var", DType::F32, &[4]),
        ("1.num_batches_tracked", DType::I64, &[]),
        ("4.weight", DType::F32, &[10, 144]),
        ("4.bias", DType::F32, &[10]),
    ];
    let opts = WeightsOptions { renames: vec![Rename::parse("model.*=*").unwrap()], allow_unused: false };
    let mut g = graph(&cnn);
    let done = apply(&mut g, &ck, &opts).expect("apply");
    assert_eq!(done.replaced, 9);

    // Missing `4.bias`, an unexpected `model.4.bias`, a wrong shape and a wrong dtype.
    let mut bad = cnn.clone();
    bad.retain(|(n, _, _)| *n != "4.bias");
    bad[0].2 = &[4, 1, 5, 5];
    bad[6].1 = DType::F32;
    bad.push(("head.bias", DType::F32, &[10]));
    let mut g = graph(&bad);
    let Err(SafetensorsError::Mismatch(m)) = apply(&mut g, &ck, &opts) else { panic!("mismatch") };
    assert_eq!(m.missing, vec!["head.bias"]);
    assert_eq!(m.unused, vec!["4.bias"]);
    assert_eq!(m.shapes, vec![("0.weight".to_string(), vec![4, 1, 5, 5], vec![4, 1, 3, 3])]);
    assert_eq!(m.dtypes.len(), 1);
    let msg = m.to_string();
    assert!(msg.contains("`1.num_batches_tracked`: the model's dtype is") && msg.contains("I64"), "{msg}");
}

#[test]
fn strides_helper_is_c_order() {
    assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
    assert_eq!(contiguous_strides(&[]), Vec::<usize>::new());
}
