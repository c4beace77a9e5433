//! A pickle virtual machine for the subset of Python objects a PyTorch checkpoint holds.
//!
//! Nothing is executed: a GLOBAL is just a (module, name) pair, and REDUCE/NEWOBJ/BUILD record
//! the call instead of making it, except for the dict classes (OrderedDict), whose later
//! SETITEMS must land in a real dict. Persistent ids (torch's storages) are kept as they are
//! for the tensor rebuilder to resolve.
//!
//! Every container lives in one arena (`Heap`) and values refer to it by index, so the memo
//! shares objects the way Python does (an OrderedDict memoised before its SETITEMS is the
//! filled dict when fetched later), and neither deep nesting nor cycles can overflow the stack
//! when values are dropped or cloned.
use std::collections::HashMap;
use std::rc::Rc;

/// A value on the stack or in a container: scalars inline, everything else an arena index.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer wider than 64 bits (LONG1/LONG4), as its little-endian two's complement bytes.
    BigInt(Rc<[u8]>),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Obj(usize),
}

/// A heap object.
#[derive(Debug, Clone)]
pub enum Obj {
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Global { module: String, name: String },
    /// The result of calling `func` with `args` (REDUCE, NEWOBJ): kept, not evaluated. `items`
    /// and `appended` collect SETITEM(S)/APPEND(S) on it (dict and list subclasses), `state`
    /// the BUILD argument.
    Call { func: Value, args: Value, state: Option<Value>, items: Vec<(Value, Value)>, appended: Vec<Value> },
    /// A persistent id (BINPERSID): for torch, a storage reference tuple.
    Persistent(Value),
}

#[derive(Debug, Default)]
pub struct Heap {
    pub objs: Vec<Obj>,
}

impl Heap {
    pub fn get(&self, v: &Value) -> Option<&Obj> {
        match v {
            Value::Obj(i) => self.objs.get(*i),
            _ => None,
        }
    }
    fn push(&mut self, o: Obj) -> Value {
        self.objs.push(o);
        Value::Obj(self.objs.len() - 1)
    }
    /// `(module, name)` when `v` is a GLOBAL.
    pub fn global(&self, v: &Value) -> Option<(&str, &str)> {
        match self.get(v) {
            Some(Obj::Global { module, name }) => Some((module, name)),
            _ => None,
        }
    }
    /// The items of a tuple or list.
    pub fn seq(&self, v: &Value) -> Option<&[Value]> {
        match self.get(v) {
            Some(Obj::Tuple(x) | Obj::List(x)) => Some(x),
            _ => None,
        }
    }
}

/// Why the machine stopped: (byte offset of the opcode, reason).
#[derive(Debug, Clone, PartialEq)]
pub enum PickleError {
    UnknownOpcode { offset: usize, opcode: u8 },
    Bad { offset: usize, reason: String },
}

/// Classes that unpickle to a plain dict: their REDUCE makes a dict that SETITEMS fills.
fn is_dict_class(module: &str, name: &str) -> bool {
    matches!((module, name), ("collections", "OrderedDict" | "defaultdict") | ("builtins" | "__builtin__", "dict"))
}

struct Vm<'a> {
    data: &'a [u8],
    pos: usize,
    heap: Heap,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u64, Value>,
}

/// Run one pickle starting at `start`; returns the unpickled value, the heap it refers to, and
/// the offset just past STOP (where a following pickle would start).
pub fn load(data: &[u8], start: usize) -> Result<(Value, Heap, usize), PickleError> {
    let mut vm = Vm { data, pos: start, heap: Heap::default(), stack: Vec::new(), marks: Vec::new(), memo: HashMap::new() };
    loop {
        let at = vm.pos;
        let op = *data.get(at).ok_or_else(|| PickleError::Bad { offset: at, reason: "pickle ends without STOP (truncated?)".into() })?;
        vm.pos += 1;
        match vm.step(op) {
            Ok(true) => {
                let v = vm.pop().map_err(|reason| PickleError::Bad { offset: at, reason })?;
                return Ok((v, vm.heap, vm.pos));
            }
            Ok(false) => {}
            Err(Step::Unknown) => return Err(PickleError::UnknownOpcode { offset: at, opcode: op }),
            Err(Step::Bad(reason)) => return Err(PickleError::Bad { offset: at, reason: format!("{} ({reason})", op_name(op)) }),
        }
    }
}

enum Step {
    Unknown,
    Bad(String),
}

impl From<String> for Step {
    fn from(s: String) -> Step {
        Step::Bad(s)
    }
}

impl From<&str> for Step {
    fn from(s: &str) -> Step {
        Step::Bad(s.into())
    }
}

fn op_name(op: u8) -> &'static str {
    match op {
        b'(' => "MARK", b'.' => "STOP", b'0' => "POP", b'1' => "POP_MARK", b'2' => "DUP",
        b'F' => "FLOAT", b'I' => "INT", b'J' => "BININT", b'K' => "BININT1", b'L' => "LONG",
        b'M' => "BININT2", b'N' => "NONE", b'P' => "PERSID", b'Q' => "BINPERSID", b'R' => "REDUCE",
        b'S' => "STRING", b'T' => "BINSTRING", b'U' => "SHORT_BINSTRING", b'V' => "UNICODE",
        b'X' => "BINUNICODE", b'a' => "APPEND", b'b' => "BUILD", b'c' => "GLOBAL", b'd' => "DICT",
        b'}' => "EMPTY_DICT", b'e' => "APPENDS", b'g' => "GET", b'h' => "BINGET", b'i' => "INST",
        b'j' => "LONG_BINGET", b'l' => "LIST", b']' => "EMPTY_LIST", b'o' => "OBJ", b'p' => "PUT",
        b'q' => "BINPUT", b'r' => "LONG_BINPUT", b's' => "SETITEM", b't' => "TUPLE",
        b')' => "EMPTY_TUPLE", b'u' => "SETITEMS", b'G' => "BINFLOAT", b'B' => "BINBYTES",
        b'C' => "SHORT_BINBYTES", 0x80 => "PROTO", 0x81 => "NEWOBJ", 0x85 => "TUPLE1",
        0x86 => "TUPLE2", 0x87 => "TUPLE3", 0x88 => "NEWTRUE", 0x89 => "NEWFALSE", 0x8a => "LONG1",
        0x8b => "LONG4", 0x8c => "SHORT_BINUNICODE", 0x8d => "BINUNICODE8", 0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET", 0x90 => "ADDITEMS", 0x91 => "FROZENSET", 0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL", 0x94 => "MEMOIZE", 0x95 => "FRAME", 0x96 => "BYTEARRAY8",
        _ => "opcode",
    }
}

/// Little-endian two's complement bytes as an i64, when they fit.
fn small_int(b: &[u8]) -> Option<i64> {
    if b.is_empty() {
        return Some(0);
    }
    let neg = b[b.len() - 1] & 0x80 != 0;
    let fill = if neg { 0xFF } else { 0 };
    if b.len() > 8 && b[8..].iter().any(|&x| x != fill) {
        return None;
    }
    let mut a = [fill; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    let v = i64::from_le_bytes(a);
    // Nine or more bytes fit only when the sign of the low eight agrees.
    if b.len() > 8 && (v < 0) != neg {
        return None;
    }
    Some(v)
}

impl Vm<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Step> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| Step::Bad(format!("{n}-byte argument runs past the end of the data")))?;
        let b = &self.data[self.pos..end];
        self.pos = end;
        Ok(b)
    }
    fn uint(&mut self, n: usize) -> Result<u64, Step> {
        let b = self.take(n)?;
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn len(&mut self, n: usize) -> Result<usize, Step> {
        let v = self.uint(n)?;
        usize::try_from(v).ok().filter(|&l| l <= self.data.len() - self.pos).ok_or_else(|| Step::Bad(format!("length {v} runs past the end of the data")))
    }
    /// A text-protocol argument: up to the next newline.
    fn line(&mut self) -> Result<String, Step> {
        let rest = &self.data[self.pos..];
        let n = rest.iter().position(|&b| b == b'\n').ok_or("argument line has no newline")?;
        let s = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.pos += n + 1;
        Ok(s)
    }
    fn pop(&mut self) -> Result<Value, String> {
        self.stack.pop().ok_or_else(|| "stack underflow".into())
    }
    fn top(&self) -> Result<&Value, Step> {
        self.stack.last().ok_or_else(|| "empty stack".into())
    }
    /// Everything above the last MARK, removing the mark.
    fn pop_mark(&mut self) -> Result<Vec<Value>, Step> {
        let m = self.marks.pop().ok_or("no MARK to pop to")?;
        if m > self.stack.len() {
            return Err("MARK above the top of the stack".into());
        }
        Ok(self.stack.split_off(m))
    }
    fn push(&mut self, v: Value) {
        self.stack.push(v);
    }
    fn push_obj(&mut self, o: Obj) {
        let v = self.heap.push(o);
        self.push(v);
    }
    fn memo_put(&mut self, key: u64) -> Result<(), Step> {
        let v = self.top()?.clone();
        self.memo.insert(key, v);
        Ok(())
    }
    fn memo_get(&mut self, key: u64) -> Result<(), Step> {
        let v = self.memo.get(&key).cloned().ok_or_else(|| Step::Bad(format!("memo key {key} was never stored")))?;
        self.push(v);
        Ok(())
    }
    fn str_of(&self, v: &Value) -> Result<String, Step> {
        match v {
            Value::Str(s) => Ok(s.to_string()),
            other => Err(Step::Bad(format!("expected a string, found {other:?}"))),
        }
    }
    /// REDUCE/NEWOBJ: dict classes become dicts (filled from an iterable argument where
    /// one is given as a list of pairs), anything else a recorded call.
    fn call(&mut self, func: Value, args: Value) {
        if let Some((m, n)) = self.heap.global(&func) {
            if is_dict_class(m, n) {
                let mut items = Vec::new();
                if let Some([arg0, ..]) = self.heap.seq(&args) {
                    for pair in self.heap.seq(arg0).unwrap_or(&[]) {
                        if let Some([k, v]) = self.heap.seq(pair) {
                            items.push((k.clone(), v.clone()));
                        }
                    }
                }
                return self.push_obj(Obj::Dict(items));
            }
        }
        self.push_obj(Obj::Call { func, args, state: None, items: Vec::new(), appended: Vec::new() });
    }
    fn set_items(&mut self, target: &Value, kv: Vec<Value>) -> Result<(), Step> {
        if !kv.len().is_multiple_of(2) {
            return Err("odd number of values for SETITEMS".into());
        }
        let mut pairs = Vec::with_capacity(kv.len() / 2);
        let mut it = kv.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            pairs.push((k, v));
        }
        match target {
            Value::Obj(i) => match self.heap.objs.get_mut(*i) {
                Some(Obj::Dict(items) | Obj::Call { items, .. }) => {
                    // Repeated keys are kept in order; readers take the last (dict semantics).
                    items.extend(pairs);
                    Ok(())
                }
                _ => Err("SETITEM target is not a dict".into()),
            },
            _ => Err("SETITEM target is not a dict".into()),
        }
    }
    fn append(&mut self, target: &Value, vals: Vec<Value>) -> Result<(), Step> {
        match target {
            Value::Obj(i) => match self.heap.objs.get_mut(*i) {
                Some(Obj::List(items) | Obj::Set(items) | Obj::Call { appended: items, .. }) => {
                    items.extend(vals);
                    Ok(())
                }
                _ => Err("APPEND target is not a list".into()),
            },
            _ => Err("APPEND target is not a list".into()),
        }
    }

    /// Execute one opcode; `Ok(true)` at STOP.
    fn step(&mut self, op: u8) -> Result<bool, Step> {
        match op {
            0x80 => {
                let p = self.uint(1)?;
                if p > 5 {
                    return Err(Step::Bad(format!("unsupported pickle protocol {p}")));
                }
            }
            0x95 => {
                self.uint(8)?; // FRAME: a length hint, nothing to do
            }
            b'.' => return Ok(true),
            b'(' => self.marks.push(self.stack.len()),
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let v = self.top()?.clone();
                self.push(v);
            }
            // Integers.
            b'J' => {
                let v = self.uint(4)? as u32 as i32;
                self.push(Value::Int(v as i64));
            }
            b'K' => {
                let v = self.uint(1)?;
                self.push(Value::Int(v as i64));
            }
            b'M' => {
                let v = self.uint(2)?;
                self.push(Value::Int(v as i64));
            }
            0x8a | 0x8b => {
                let n = if op == 0x8a { self.len(1)? } else { self.len(4)? };
                let b = self.take(n)?;
                let v = match small_int(b) {
                    Some(i) => Value::Int(i),
                    None => Value::BigInt(b.into()),
                };
                self.push(v);
            }
            b'I' | b'L' => {
                let l = self.line()?;
                let t = l.trim_end_matches('L');
                let v = match t {
                    "01" if op == b'I' => Value::Bool(true),
                    "00" if op == b'I' => Value::Bool(false),
                    _ => Value::Int(t.parse().map_err(|_| Step::Bad(format!("bad integer `{l}`")))?),
                };
                self.push(v);
            }
            // Floats.
            b'G' => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                self.push(Value::Float(f64::from_be_bytes(a)));
            }
            b'F' => {
                let l = self.line()?;
                self.push(Value::Float(l.parse().map_err(|_| Step::Bad(format!("bad float `{l}`")))?));
            }
            // Strings and bytes.
            b'X' | 0x8c | 0x8d => {
                let n = match op {
                    0x8c => self.len(1)?,
                    b'X' => self.len(4)?,
                    _ => self.len(8)?,
                };
                let s = std::str::from_utf8(self.take(n)?).map_err(|e| Step::Bad(format!("string is not UTF-8: {e}")))?;
                let v = Value::Str(s.into());
                self.push(v);
            }
            b'V' => {
                let l = self.line()?;
                self.push(Value::Str(l.into()));
            }
            // Python 2 str: bytes that Python 3 decodes (ASCII in practice; latin-1 otherwise).
            b'T' | b'U' => {
                let n = if op == b'U' { self.len(1)? } else { self.len(4)? };
                let s: String = self.take(n)?.iter().map(|&b| b as char).collect();
                self.push(Value::Str(s.into()));
            }
            b'S' => {
                let l = self.line()?;
                let s = l.trim().trim_matches(|c| c == '\'' || c == '"');
                self.push(Value::Str(s.into()));
            }
            b'B' | b'C' | 0x8e | 0x96 => {
                let n = match op {
                    b'C' => self.len(1)?,
                    b'B' => self.len(4)?,
                    _ => self.len(8)?,
                };
                let v = Value::Bytes(self.take(n)?.into());
                self.push(v);
            }
            b'N' => self.push(Value::None),
            0x88 => self.push(Value::Bool(true)),
            0x89 => self.push(Value::Bool(false)),
            // Containers.
            b'}' => self.push_obj(Obj::Dict(Vec::new())),
            b']' => self.push_obj(Obj::List(Vec::new())),
            b')' => self.push_obj(Obj::Tuple(Vec::new())),
            0x8f => self.push_obj(Obj::Set(Vec::new())),
            b't' => {
                let items = self.pop_mark()?;
                self.push_obj(Obj::Tuple(items));
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if self.stack.len() < n {
                    return Err("stack underflow".into());
                }
                let items = self.stack.split_off(self.stack.len() - n);
                self.push_obj(Obj::Tuple(items));
            }
            b'l' => {
                let items = self.pop_mark()?;
                self.push_obj(Obj::List(items));
            }
            0x91 => {
                let items = self.pop_mark()?;
                self.push_obj(Obj::Set(items));
            }
            b'd' => {
                let kv = self.pop_mark()?;
                self.push_obj(Obj::Dict(Vec::new()));
                let d = self.top()?.clone();
                self.set_items(&d, kv)?;
            }
            b'a' => {
                let v = self.pop()?;
                let l = self.top()?.clone();
                self.append(&l, vec![v])?;
            }
            b'e' | 0x90 => {
                let vals = self.pop_mark()?;
                let l = self.top()?.clone();
                self.append(&l, vals)?;
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                let d = self.top()?.clone();
                self.set_items(&d, vec![k, v])?;
            }
            b'u' => {
                let kv = self.pop_mark()?;
                let d = self.top()?.clone();
                self.set_items(&d, kv)?;
            }
            // Memo.
            b'q' => {
                let k = self.uint(1)?;
                self.memo_put(k)?;
            }
            b'r' => {
                let k = self.uint(4)?;
                self.memo_put(k)?;
            }
            b'p' => {
                let l = self.line()?;
                let k = l.parse().map_err(|_| Step::Bad(format!("bad memo key `{l}`")))?;
                self.memo_put(k)?;
            }
            0x94 => {
                let k = self.memo.len() as u64;
                self.memo_put(k)?;
            }
            b'h' => {
                let k = self.uint(1)?;
                self.memo_get(k)?;
            }
            b'j' => {
                let k = self.uint(4)?;
                self.memo_get(k)?;
            }
            b'g' => {
                let l = self.line()?;
                let k = l.parse().map_err(|_| Step::Bad(format!("bad memo key `{l}`")))?;
                self.memo_get(k)?;
            }
            // Globals, calls, objects.
            b'c' => {
                let (module, name) = (self.line()?, self.line()?);
                self.push_obj(Obj::Global { module, name });
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (module, name) = (self.str_of(&module)?, self.str_of(&name)?);
                self.push_obj(Obj::Global { module, name });
            }
            b'R' | 0x81 => {
                let args = self.pop()?;
                let func = self.pop()?;
                self.call(func, args);
            }
            0x92 => {
                let _kwargs = self.pop()?;
                let args = self.pop()?;
                let func = self.pop()?;
                self.call(func, args);
            }
            b'i' => {
                let (module, name) = (self.line()?, self.line()?);
                let args = self.pop_mark()?;
                let func = self.heap.push(Obj::Global { module, name });
                let args = self.heap.push(Obj::Tuple(args));
                self.call(func, args);
            }
            b'o' => {
                let mut items = self.pop_mark()?;
                if items.is_empty() {
                    return Err("OBJ without a class".into());
                }
                let func = items.remove(0);
                let args = self.heap.push(Obj::Tuple(items));
                self.call(func, args);
            }
            b'b' => {
                let state = self.pop()?;
                let Value::Obj(i) = *self.top()? else { return Err("BUILD target is not an object".into()) };
                match self.heap.objs.get_mut(i) {
                    Some(Obj::Call { state: s, .. }) => *s = Some(state),
                    // A dict subclass's BUILD sets attributes, not items: nothing to keep.
                    Some(Obj::Dict(_)) => {}
                    _ => return Err("BUILD target is not an object".into()),
                }
            }
            b'Q' => {
                let pid = self.pop()?;
                self.push_obj(Obj::Persistent(pid));
            }
            b'P' => {
                let l = self.line()?;
                self.push_obj(Obj::Persistent(Value::Str(l.into())));
            }
            _ => return Err(Step::Unknown),
        }
        Ok(false)
    }
}
