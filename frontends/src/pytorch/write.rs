//! A writer of `torch.save`-style state_dict archives: tests and tools that export weights
//! (the reader's fixtures beyond the committed torch-made ones are written with it).
use super::tensor::storage_name;
use super::zip;
use burnc_compiler::ir::DType;

/// The pickle opcodes torch's protocol-2 pickler emits for a state_dict.
#[derive(Default)]
pub struct Pickler(pub Vec<u8>);

impl Pickler {
    pub fn op(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }
    pub fn global(&mut self, module: &str, name: &str) -> &mut Self {
        self.0.push(b'c');
        self.0.extend_from_slice(format!("{module}\n{name}\n").as_bytes());
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.0.push(b'X');
        self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    pub fn int(&mut self, v: i64) -> &mut Self {
        match i32::try_from(v) {
            Ok(i) => {
                self.0.push(b'J');
                self.0.extend_from_slice(&i.to_le_bytes());
            }
            Err(_) => {
                self.0.extend_from_slice(&[0x8a, 8]);
                self.0.extend_from_slice(&v.to_le_bytes());
            }
        }
        self
    }
    pub fn ints(&mut self, v: &[usize]) -> &mut Self {
        self.op(b'(');
        for &x in v {
            self.int(x as i64);
        }
        self.op(b't')
    }
    /// `collections.OrderedDict()` (then MARK, key-value pairs, SETITEMS fill it).
    pub fn ordered_dict(&mut self) -> &mut Self {
        self.global("collections", "OrderedDict").op(b')').op(b'R')
    }
    /// `_rebuild_tensor_v2(('storage', torch.<T>Storage, key, 'cpu', numel), offset, size,
    /// stride, False, OrderedDict())`.
    pub fn tensor(&mut self, storage_type: &str, storage_key: &str, numel: usize, offset: usize, shape: &[usize], stride: &[usize]) -> &mut Self {
        self.global("torch._utils", "_rebuild_tensor_v2").op(b'(');
        self.op(b'(').str("storage").global("torch", storage_type).str(storage_key).str("cpu").int(numel as i64).op(b't').op(b'Q');
        self.int(offset as i64).ints(shape).ints(stride).op(0x89).ordered_dict();
        self.op(b't').op(b'R')
    }
}

/// C-order strides of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// A torch archive holding `data.pkl` plus the given `data/<key>` records, under `archive/`.
pub fn archive(pickle: &[u8], storages: &[(String, Vec<u8>)]) -> Vec<u8> {
    let names: Vec<String> = storages.iter().map(|(k, _)| format!("archive/data/{k}")).collect();
    let mut entries: Vec<(&str, &[u8])> = vec![("archive/data.pkl", pickle), ("archive/byteorder", b"little")];
    entries.extend(names.iter().zip(storages).map(|(n, (_, b))| (n.as_str(), b.as_slice())));
    entries.push(("archive/version", b"3\n"));
    zip::write(&entries)
}

/// A `torch.save(state_dict)` file of `tensors` (key, dtype, shape, little-endian bytes): an
/// OrderedDict of contiguous tensors, one storage each. Keys with dtypes torch has no storage
/// class for are written as float storages (tests only use the supported ones).
pub fn serialize(tensors: &[(&str, DType, &[usize], &[u8])]) -> Vec<u8> {
    let mut p = Pickler::default();
    p.op(0x80).op(2).ordered_dict().op(b'(');
    let mut storages = Vec::new();
    for (i, (key, dtype, shape, data)) in tensors.iter().enumerate() {
        let numel = data.len() / (dtype.bits() / 8).max(1);
        p.str(key).tensor(storage_name(*dtype).unwrap_or("FloatStorage"), &i.to_string(), numel, 0, shape, &contiguous_strides(shape));
        storages.push((i.to_string(), data.to_vec()));
    }
    p.op(b'u').op(b'.');
    archive(&p.0, &storages)
}
