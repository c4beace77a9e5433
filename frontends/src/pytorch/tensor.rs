//! From the unpickled object to named tensors: walk dicts (dotted keys), rebuild each tensor
//! from its storage reference, offset, size and stride, and materialise it as contiguous
//! little-endian C-order bytes.
use super::pickle::{Heap, Obj, Value};
use super::PytorchError;
use crate::safetensors::TensorEntry;
use burnc_compiler::ir::DType;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};

/// Deeper than this is not a checkpoint (and a cyclic or hostile pickle must not recurse
/// without bound).
const MAX_DEPTH: usize = 64;

/// Objects visited per heap object at most: shared references (one state_dict under two
/// keys) visit an object more than once, but a pickle of lists that each hold the previous one
/// twice would take 2^depth visits.
const VISITS_PER_OBJECT: usize = 16;

/// A view that reads storage elements more than once (stride 0: an expanded tensor) is
/// materialised only up to this size; state_dicts hold small ones if any, and a corrupt size
/// must not drive a huge allocation.
const MAX_EXPANDED_BYTES: usize = 256 << 20;

/// The dtype of a `torch.<Name>Storage` class.
pub fn storage_dtype(name: &str) -> Option<DType> {
    Some(match name {
        "FloatStorage" => DType::F32,
        "DoubleStorage" => DType::F64,
        "HalfStorage" => DType::F16,
        "BFloat16Storage" => DType::BF16,
        "LongStorage" => DType::I64,
        "IntStorage" => DType::I32,
        "ShortStorage" => DType::I16,
        "CharStorage" => DType::I8,
        "ByteStorage" => DType::U8,
        "BoolStorage" => DType::Bool,
        "UInt16Storage" => DType::U16,
        "UInt32Storage" => DType::U32,
        "UInt64Storage" => DType::U64,
        _ => return None,
    })
}

/// The dtype of `torch.<name>`, a dtype object (the argument of `_rebuild_tensor_v3`).
fn torch_dtype(name: &str) -> Option<DType> {
    Some(match name {
        "float32" | "float" => DType::F32,
        "float64" | "double" => DType::F64,
        "float16" | "half" => DType::F16,
        "bfloat16" => DType::BF16,
        "int64" | "long" => DType::I64,
        "int32" | "int" => DType::I32,
        "int16" | "short" => DType::I16,
        "int8" => DType::I8,
        "uint8" => DType::U8,
        "bool" => DType::Bool,
        "uint16" => DType::U16,
        "uint32" => DType::U32,
        "uint64" => DType::U64,
        "float8_e4m3fn" => DType::F8E4M3FN,
        "float8_e5m2" => DType::F8E5M2,
        "float8_e4m3fnuz" => DType::F8E4M3FNUZ,
        "float8_e5m2fnuz" => DType::F8E5M2FNUZ,
        _ => return None,
    })
}

/// The `torch.<Name>Storage` class of `d` (for the writer).
pub fn storage_name(d: DType) -> Option<&'static str> {
    ["FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "IntStorage", "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage", "UInt16Storage", "UInt32Storage", "UInt64Storage"]
        .into_iter()
        .find(|n| storage_dtype(n) == Some(d))
}

/// Where a storage's bytes come from: the zip's `data/<key>` records, or the legacy file's
/// storage table. Returns the bytes of the whole storage.
pub type StorageFn<'a> = dyn Fn(&str) -> Result<Bytes, String> + 'a;

pub struct Collector<'a> {
    pub heap: &'a Heap,
    pub storage: &'a StorageFn<'a>,
    /// The file's byte order is big-endian: swap every element while materialising.
    pub big_endian: bool,
    pub out: BTreeMap<String, TensorEntry>,
    /// Objects on the current path (cycle guard).
    path: Vec<usize>,
    /// Visits left (see [`VISITS_PER_OBJECT`]).
    budget: usize,
}

fn tensor_err(key: &str, reason: impl Into<String>) -> PytorchError {
    PytorchError::Tensor { key: key.to_string(), reason: reason.into() }
}

fn join(prefix: &str, k: &str) -> String {
    if prefix.is_empty() {
        k.to_string()
    } else {
        format!("{prefix}.{k}")
    }
}

impl<'a> Collector<'a> {
    pub fn new(heap: &'a Heap, storage: &'a StorageFn<'a>, big_endian: bool) -> Self {
        let budget = heap.objs.len().saturating_mul(VISITS_PER_OBJECT).saturating_add(1024);
        Collector { heap, storage, big_endian, out: BTreeMap::new(), path: Vec::new(), budget }
    }

    /// Collect every tensor reachable from `v` through dicts, lists and tuples; other objects
    /// (an optimizer's state, numbers, strings) are skipped.
    pub fn walk(&mut self, v: &Value, prefix: &str) -> Result<(), PytorchError> {
        let Value::Obj(id) = v else { return Ok(()) };
        if self.path.contains(id) || self.path.len() >= MAX_DEPTH {
            return Ok(());
        }
        self.budget = self.budget.checked_sub(1).ok_or_else(|| tensor_err(prefix, "the checkpoint's objects are shared too many times over (a corrupt or hostile pickle?)"))?;
        let heap = self.heap;
        let Some(obj) = heap.objs.get(*id) else { return Ok(()) };
        if self.is_tensor(v) {
            let t = self.rebuild(v, prefix, 0)?;
            if self.out.insert(prefix.to_string(), t).is_some() {
                return Err(tensor_err(prefix, "two tensors have this key (nested and dotted keys collide)"));
            }
            return Ok(());
        }
        self.path.push(*id);
        match obj {
            Obj::Dict(items) | Obj::Call { items, .. } => {
                // Dict semantics: a repeated key's last value wins.
                let mut last: HashMap<String, &Value> = HashMap::new();
                let mut order = Vec::new();
                for (k, val) in items {
                    let key = match k {
                        Value::Str(s) => s.to_string(),
                        Value::Int(i) => i.to_string(),
                        _ => continue,
                    };
                    if last.insert(key.clone(), val).is_none() {
                        order.push(key);
                    }
                }
                for key in order {
                    self.walk(last[&key], &join(prefix, &key))?;
                }
                if let Obj::Call { appended, .. } = obj {
                    for (i, val) in appended.iter().enumerate() {
                        self.walk(val, &join(prefix, &i.to_string()))?;
                    }
                }
            }
            Obj::List(items) | Obj::Tuple(items) => {
                for (i, val) in items.iter().enumerate() {
                    self.walk(val, &join(prefix, &i.to_string()))?;
                }
            }
            _ => {}
        }
        self.path.pop();
        Ok(())
    }

    /// A call of one of torch's `_rebuild_*` functions.
    fn is_tensor(&self, v: &Value) -> bool {
        match self.heap.get(v) {
            Some(Obj::Call { func, .. }) => {
                matches!(self.heap.global(func), Some((m, n)) if m.starts_with("torch") && n.starts_with("_rebuild_"))
            }
            _ => false,
        }
    }

    fn rebuild(&self, v: &Value, key: &str, depth: usize) -> Result<TensorEntry, PytorchError> {
        match self.heap.get(v) {
            Some(Obj::Call { func, args, .. }) => self.rebuild_call(func, args, key, depth),
            _ => Err(tensor_err(key, "not a tensor")),
        }
    }

    fn rebuild_call(&self, func: &Value, args: &Value, key: &str, depth: usize) -> Result<TensorEntry, PytorchError> {
        let bad = |r: String| tensor_err(key, r);
        let (m, n) = self.heap.global(func).ok_or_else(|| bad("not a tensor".into()))?;
        let args = self.heap.seq(args).ok_or_else(|| bad(format!("{m}.{n} without an argument tuple")))?;
        let arg = |i: usize| args.get(i).ok_or_else(|| bad(format!("{m}.{n} has {} arguments, expected more than {i}", args.len())));
        if depth > 4 {
            return Err(bad("tensor wrapped too deeply".into()));
        }
        match n {
            // v3 (torch >= 2.1, for dtypes without a typed storage class: uint16-64, float8)
            // names the dtype in its 7th argument and references an untyped (byte) storage.
            "_rebuild_tensor_v2" | "_rebuild_tensor" | "_rebuild_tensor_v3" => {
                let offset = self.int(arg(1)?, key, "storage offset")?;
                let shape = self.ints(arg(2)?, key, "size")?;
                let stride = self.ints(arg(3)?, key, "stride")?;
                let explicit = match n {
                    "_rebuild_tensor_v3" => {
                        let d = arg(6)?;
                        let (dm, dn) = self.heap.global(d).ok_or_else(|| bad(format!("dtype argument {d:?} is not a torch dtype")))?;
                        Some(torch_dtype(dn).filter(|_| dm == "torch").ok_or_else(|| bad(format!("unsupported dtype {dm}.{dn}")))?)
                    }
                    _ => None,
                };
                let (dtype, storage) = self.storage(arg(0)?, key, explicit)?;
                let bytes = materialise(dtype, &storage, offset, &shape, &stride, self.big_endian).map_err(bad)?;
                Ok(TensorEntry { dtype, shape, bytes })
            }
            // An nn.Parameter: the tensor is the first argument.
            "_rebuild_parameter" | "_rebuild_parameter_with_state" => self.rebuild(arg(0)?, key, depth + 1),
            // A tensor subclass: (func, type, args, state); the tensor is func(*args).
            "_rebuild_from_type_v2" => self.rebuild_call(arg(0)?, arg(2)?, key, depth + 1),
            other => Err(bad(format!("unsupported tensor kind {m}.{other} (quantized, sparse and other special tensors cannot be read)"))),
        }
    }

    fn int(&self, v: &Value, key: &str, what: &str) -> Result<usize, PytorchError> {
        match v {
            Value::Int(i) => usize::try_from(*i).map_err(|_| tensor_err(key, format!("{what} {i} is negative"))),
            other => Err(tensor_err(key, format!("{what} is {other:?}, not an integer"))),
        }
    }

    fn ints(&self, v: &Value, key: &str, what: &str) -> Result<Vec<usize>, PytorchError> {
        let items = self.heap.seq(v).ok_or_else(|| tensor_err(key, format!("{what} is not a tuple")))?;
        items.iter().map(|i| self.int(i, key, what)).collect()
    }

    /// Resolve a persistent id `('storage', torch.<T>Storage, key, location, numel[, view])`
    /// to its dtype and bytes. A legacy view `(view_key, offset, size)` selects elements of
    /// the root storage.
    fn storage(&self, v: &Value, key: &str, explicit: Option<DType>) -> Result<(DType, Bytes), PytorchError> {
        let bad = |r: String| tensor_err(key, r);
        let Some(Obj::Persistent(pid)) = self.heap.get(v) else {
            return Err(bad("the storage argument is not a persistent storage reference".into()));
        };
        let t = self.heap.seq(pid).ok_or_else(|| bad("the storage reference is not a tuple".into()))?;
        let [tag, ty, skey, _location, _numel, rest @ ..] = t else {
            return Err(bad(format!("the storage reference has {} fields, expected 5 or 6", t.len())));
        };
        if *tag != Value::Str("storage".into()) {
            return Err(bad(format!("persistent id of kind {tag:?}, expected 'storage'")));
        }
        let (m, n) = self.heap.global(ty).ok_or_else(|| bad("the storage type is not a class".into()))?;
        let typed = storage_dtype(n).filter(|_| m == "torch" || m == "torch.cuda");
        let dtype = match (explicit, typed) {
            // An untyped storage holds bytes; the rebuild call says what they are.
            (Some(d), _) if n == "UntypedStorage" || typed.is_some() => d,
            (None, Some(d)) => d,
            _ => return Err(bad(format!("unsupported storage type {m}.{n} (burnc reads float, integer and bool tensors)"))),
        };
        let Value::Str(skey) = skey else {
            return Err(bad(format!("storage key is {skey:?}, not a string")));
        };
        let bytes = (self.storage)(skey).map_err(bad)?;
        let e = dtype.bits() / 8;
        if bytes.len() % e != 0 {
            return Err(bad(format!("storage `{skey}` holds {} bytes, not a whole number of {e}-byte elements", bytes.len())));
        }
        match rest {
            [] | [Value::None] => Ok((dtype, bytes)),
            [view] => {
                let vt = self.heap.seq(view).ok_or_else(|| bad("storage view metadata is not a tuple".into()))?;
                let [_, off, size] = vt else {
                    return Err(bad("storage view metadata is not (key, offset, size)".into()));
                };
                let (off, size) = (self.int(off, key, "view offset")?, self.int(size, key, "view size")?);
                let range = off.checked_add(size).and_then(|end| Some(off.checked_mul(e)?..end.checked_mul(e)?)).filter(|r| r.end <= bytes.len());
                let r = range.ok_or_else(|| bad(format!("storage view [{off}, +{size}) is outside storage `{skey}` ({} elements)", bytes.len() / e)))?;
                Ok((dtype, bytes.slice(r)))
            }
            _ => Err(bad(format!("the storage reference has {} fields, expected 5 or 6", t.len()))),
        }
    }
}

/// The elements `offset + Σ i_k·stride_k` of `storage` in C order, as contiguous bytes: a
/// slice of the storage when the view is already contiguous, a copy otherwise. Every index is
/// checked against the storage's length first.
pub fn materialise(dtype: DType, storage: &Bytes, offset: usize, shape: &[usize], stride: &[usize], big_endian: bool) -> Result<Bytes, String> {
    if shape.len() != stride.len() {
        return Err(format!("size {shape:?} and stride {stride:?} differ in rank"));
    }
    let e = dtype.bits() / 8;
    let available = storage.len() / e;
    let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| format!("size {shape:?} is too large"))?;
    if numel == 0 {
        return Ok(Bytes::new());
    }
    // The highest element the view touches bounds them all (strides are non-negative).
    shape
        .iter()
        .zip(stride)
        .try_fold(offset, |a, (&d, &s)| (d - 1).checked_mul(s).and_then(|x| a.checked_add(x)))
        .filter(|&last| last < available)
        .ok_or_else(|| format!("view (offset {offset}, size {shape:?}, stride {stride:?}) reaches past the end of its storage ({available} elements)"))?;
    // C-order strides, ignoring dimensions of size 1 (their stride is arbitrary).
    let mut want = 1usize;
    let mut contiguous = true;
    for (&d, &s) in shape.iter().zip(stride).rev() {
        if d != 1 && s != want {
            contiguous = false;
        }
        want *= d;
    }
    if numel > available && numel.saturating_mul(e) > MAX_EXPANDED_BYTES {
        return Err(format!("expanded view (size {shape:?}, stride {stride:?}) of a {available}-element storage would take {} bytes", numel.saturating_mul(e)));
    }
    let out = if contiguous {
        storage.slice(offset * e..(offset + numel) * e)
    } else {
        let mut out = Vec::with_capacity(numel * e);
        let mut idx = vec![0usize; shape.len()];
        let mut at = offset;
        for _ in 0..numel {
            out.extend_from_slice(&storage[at * e..(at + 1) * e]);
            // Odometer step: advance the last dimension, carrying into earlier ones.
            for k in (0..shape.len()).rev() {
                // Wrapping: a size-1 dimension's stride may be anything; it is undone before use.
                idx[k] += 1;
                at = at.wrapping_add(stride[k]);
                if idx[k] < shape[k] {
                    break;
                }
                at = at.wrapping_sub(stride[k].wrapping_mul(shape[k]));
                idx[k] = 0;
            }
        }
        Bytes::from(out)
    };
    Ok(if big_endian && e > 1 {
        Bytes::from(out.chunks_exact(e).flat_map(|c| c.iter().rev().copied()).collect::<Vec<u8>>())
    } else {
        out
    })
}
