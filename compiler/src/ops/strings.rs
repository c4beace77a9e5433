//! String ops: StringConcat, StringNormalizer, StringSplit, RegexFullMatch and LabelEncoder.
//! The interpreter and generated code call the same kernels (`runtime::strings`), over string
//! handles; strings an op makes go to the `forward` call's heap (`h` in generated code).
use super::{input, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::str_array;
use crate::codegen::CodegenError;
use crate::interp::ops::util::{broadcast_shapes, broadcast_strides};
use crate::ir::{DType, DimExpr, Op, ValueId};
use crate::tensor::{Data, Tensor};
pub use burnc_runtime::strings::Case;
use burnc_runtime::strings::{self as kernels, Heap, Str};

/// The handles of a string tensor's elements.
fn handles(t: &Tensor) -> R<Vec<Str<'_>>> {
    match &t.data {
        Data::Str(v) => Ok(v.iter().map(|s| Str::new(s)).collect()),
        d => Err(format!("expected a string tensor, got {}", d.dtype())),
    }
}

fn owned(shape: Vec<usize>, v: &[Str]) -> Tensor {
    Tensor::new(shape, Data::Str(v.iter().map(|s| s.as_str().to_string()).collect()))
}

fn string_arg(cx: &ShapeCx, i: usize) -> R<Option<Vec<DimExpr>>> {
    let a = cx.arg(i)?;
    if a.dtype != DType::Str {
        return Err(format!("input #{i} must be a string tensor, got {}", a.dtype));
    }
    Ok(a.dims.clone())
}

/// A Rust string literal.
fn lit(s: &str) -> String {
    format!("{s:?}")
}

/// The rules every string op shares: none runs on a GPU target, none has a gradient, none
/// works in place or needs scratch.
macro_rules! no_gpu_no_grad {
    () => {
        none_of!(cuda, wgsl, scratch_bytes, in_place, forwards_values);

        flops!(per_output 1);
        fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
            Err(format!("{} has no gradient (strings are not differentiable)", self.name()))
        }
    };
}

/// StringConcat `(x, y)`: elementwise concatenation under numpy broadcasting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StringConcat;

impl OpDef for StringConcat {
    name!("StringConcat");
    none_of!(decides_shapes);

    no_gpu_no_grad!();

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (a, b) = (string_arg(cx, 0)?, string_arg(cx, 1)?);
        let dims = match (a, b) {
            (Some(a), Some(b)) => Some(cx.broadcast(&a, &b)?),
            _ => None,
        };
        Ok(vec![OutType { dtype: DType::Str, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (a, b) = (input(ins, 0)?, input(ins, 1)?);
        let shape = broadcast_shapes(&a.shape, &b.shape)?;
        let n = crate::interp::ops::util::numel(&shape)?;
        let mut y = vec![Str::EMPTY; n];
        let mut heap = Heap::new();
        let (sa, sb) = (broadcast_strides(&a.shape, &shape), broadcast_strides(&b.shape, &shape));
        kernels::concat(&handles(a)?, &sa, &handles(b)?, &sb, &mut y, &shape, &mut heap);
        Ok(vec![owned(shape, &y)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (a, b, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
        let os = cx.dims(y)?;
        let st = |v: ValueId| -> Result<String, CodegenError> { Ok(format!("[{}]", cx.broadcast_strides(&cx.dims(v)?, &os)?.join(", "))) };
        Ok(format!(
            "rt::strings::concat({}, &{}, {}, &{}, {}, &{}, h);",
            cx.read(a)?,
            st(a)?,
            cx.read(b)?,
            st(b)?,
            cx.write(y)?,
            cx.sizes(&os)?
        ))
    }
}

/// StringNormalizer `(x)` of shape `[C]` or `[1, C]`: drops stopwords, changes case. How many
/// elements stay depends on the data unless there are no stopwords.
#[derive(Debug, Clone, PartialEq)]
pub struct StringNormalizer {
    pub case: Case,
    pub case_sensitive: bool,
    pub stopwords: Vec<String>,
}

impl StringNormalizer {
    fn stop(&self) -> Vec<&str> {
        self.stopwords.iter().map(String::as_str).collect()
    }

    /// The output shape for `kept` elements out of an input of shape `x` (an empty result is
    /// one empty string, as onnxruntime gives).
    fn out_shape(x: &[usize], kept: usize) -> Vec<usize> {
        let kept = kept.max(1);
        if x.len() == 2 {
            vec![1, kept]
        } else {
            vec![kept]
        }
    }

    fn check_rank(dims: &[DimExpr]) -> R<()> {
        match dims.len() {
            1 => Ok(()),
            2 if dims[0].as_const() == Some(1) => Ok(()),
            _ => Err(format!("input must be [C] or [1, C], got rank {}", dims.len())),
        }
    }
}

impl OpDef for StringNormalizer {
    name!("StringNormalizer");

    no_gpu_no_grad!();

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dims = string_arg(cx, 0)?;
        if let Some(d) = &dims {
            Self::check_rank(d)?;
        }
        // With stopwords the count is known only from the values.
        let dims = match (&dims, &cx.arg(0)?.value) {
            (_, Some(v)) => Some(self.eval(&[Some(v)])?[0].shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()),
            (Some(d), None) if self.stopwords.is_empty() => Some(d.clone()),
            _ => None,
        };
        Ok(vec![OutType { dtype: DType::Str, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let xs = handles(x)?;
        let mut y = vec![Str::EMPTY; xs.len().max(1)];
        let mut heap = Heap::new();
        let kept = kernels::normalize(&xs, &self.stop(), self.case_sensitive, self.case, &mut y, &mut heap);
        y.truncate(kept.max(1));
        Ok(vec![owned(Self::out_shape(&x.shape, kept), &y)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        if !self.stopwords.is_empty() {
            return Err(cx.err("with stopwords the output's length depends on the input's values: make the input a constant"));
        }
        let case = format!("{:?}", self.case);
        Ok(format!(
            "rt::strings::normalize({}, &[], {}, rt::strings::Case::{case}, {}, h);",
            cx.read_input(0)?,
            self.case_sensitive,
            cx.write(cx.output(0)?)?
        ))
    }

    fn decides_shapes(&self, _: usize) -> bool {
        !self.stopwords.is_empty()
    }
}

/// StringSplit `(x)` → `(y, counts)`: `y` is `x`'s shape plus one dim, as wide as the most
/// pieces any element splits into (which the values decide), padded with empty strings.
#[derive(Debug, Clone, PartialEq)]
pub struct StringSplit {
    pub delimiter: Option<String>,
    pub maxsplit: Option<usize>,
}

impl StringSplit {
    fn width(&self, xs: &[Str]) -> usize {
        xs.iter().map(|s| kernels::split_count(s.as_str(), self.delimiter.as_deref(), self.maxsplit)).max().unwrap_or(0)
    }
}

impl OpDef for StringSplit {
    name!("StringSplit");

    no_gpu_no_grad!();

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dims = string_arg(cx, 0)?;
        let width = match &cx.arg(0)?.value {
            Some(v) => Some(self.width(&handles(v)?)),
            None => None,
        };
        let y = match (&dims, width) {
            (Some(d), Some(w)) => Some(d.iter().cloned().chain([DimExpr::constant(w as i64)]).collect()),
            _ => None,
        };
        Ok(vec![OutType { dtype: DType::Str, dims: y }, OutType { dtype: DType::I64, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let xs = handles(x)?;
        let width = self.width(&xs);
        let mut y = vec![Str::EMPTY; xs.len() * width];
        let mut counts = vec![0i64; xs.len()];
        kernels::split_rows(&xs, self.delimiter.as_deref(), self.maxsplit, width, &mut y, &mut counts);
        let mut shape = x.shape.clone();
        shape.push(width);
        Ok(vec![owned(shape, &y), Tensor::new(x.shape.clone(), Data::I64(counts))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (y, counts) = (cx.output(0)?, cx.output(1)?);
        let width = cx.dims(y)?.last().and_then(DimExpr::as_const).ok_or_else(|| cx.err("the output's width depends on the input's values: make the input a constant"))?;
        let delimiter = self.delimiter.as_deref().map_or("None".to_string(), |d| format!("Some({})", lit(d)));
        let maxsplit = self.maxsplit.map_or("None".to_string(), |m| format!("Some({m})"));
        let counts = match cx.used_output(1) {
            Some(_) => cx.write(counts)?,
            None => format!("&mut [0i64; {}][..]", cx.numel(cx.input(0)?)?),
        };
        Ok(format!("rt::strings::split_rows({}, {delimiter}, {maxsplit}, {width}, {}, {counts});", cx.read_input(0)?, cx.write(y)?))
    }

    shape_inputs!(0);
}

/// RegexFullMatch `(x)` → bool: whether all of each string matches `pattern` (RE2 syntax).
#[derive(Debug, Clone)]
pub struct RegexFullMatch {
    pub pattern: String,
    /// The pattern as a serialized dense DFA, anchored at the start and ending in `\z`.
    dfa: super::regex::Aligned,
}

impl PartialEq for RegexFullMatch {
    fn eq(&self, o: &Self) -> bool {
        self.pattern == o.pattern
    }
}

impl RegexFullMatch {
    pub fn new(pattern: &str) -> R<RegexFullMatch> {
        Ok(RegexFullMatch { pattern: pattern.to_string(), dfa: super::regex::Aligned::new(&super::regex::compile(pattern)?) })
    }
}

impl OpDef for RegexFullMatch {
    name!("RegexFullMatch");
    none_of!(decides_shapes);

    no_gpu_no_grad!();

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        Ok(vec![OutType { dtype: DType::Bool, dims: string_arg(cx, 0)? }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let xs = handles(x)?;
        let mut y = vec![0u8; xs.len()];
        kernels::full_match(self.dfa.bytes(), &xs, &mut y).ok_or("the pattern's automaton does not load")?;
        Ok(vec![Tensor::new(x.shape.clone(), Data::Bool(y.iter().map(|&b| b != 0).collect()))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let dfa = cx.blob(self.dfa.bytes());
        Ok(format!(
            "// The pattern {} as a dense DFA in the weights blob (written by burnc, so it loads).\n\
             let _ = rt::strings::full_match(unsafe {{ rt::arena::weights::<u8>(w, {dfa}, {}) }}, {}, {});",
            crate::codegen::names::text(&lit(&self.pattern)),
            self.dfa.bytes().len(),
            cx.read_input(0)?,
            cx.write(cx.output(0)?)?
        ))
    }
}

/// LabelEncoder (ai.onnx.ml) `(x)`: each element of `x` found among `keys` becomes the value at
/// the same position, any other becomes `default`. Keys and values are 1-D tensors of any
/// type (strings, integers, floats; float keys compare with NaN equal to NaN).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelEncoder {
    pub keys: Tensor,
    pub values: Tensor,
    pub default: Tensor,
}

/// A key as it is looked up: text, an integer, or a float's canonical bits (one NaN, one zero).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Text(String),
    Int(i64),
    Float(u64),
}

fn keys_of(t: &Tensor) -> R<Vec<Key>> {
    Ok(match &t.data {
        Data::Str(v) => v.iter().map(|s| Key::Text(s.clone())).collect(),
        _ if t.dtype().is_float() => t.to_f64_vec().into_iter().map(|f| Key::Float(canonical(f))).collect(),
        _ => t.to_i64_vec().ok_or_else(|| format!("keys of type {} are not supported", t.dtype()))?.into_iter().map(Key::Int).collect(),
    })
}

fn canonical(f: f64) -> u64 {
    if f.is_nan() {
        f64::NAN.to_bits()
    } else if f == 0.0 {
        0
    } else {
        f.to_bits()
    }
}

impl LabelEncoder {
    pub fn new(keys: Tensor, values: Tensor, default: Tensor) -> R<LabelEncoder> {
        if keys.numel() != values.numel() {
            return Err(format!("{} keys but {} values", keys.numel(), values.numel()));
        }
        if default.numel() != 1 || default.dtype() != values.dtype() {
            return Err(format!("the default must be one value of the values' type {}", values.dtype()));
        }
        keys_of(&keys)?;
        Ok(LabelEncoder { keys, values, default })
    }

    /// (key, index into `values`), sorted by key, the first of equal keys kept.
    fn table(&self) -> R<Vec<(Key, usize)>> {
        let mut t: Vec<(Key, usize)> = keys_of(&self.keys)?.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
        t.sort();
        t.dedup_by(|b, a| a.0 == b.0);
        Ok(t)
    }

    fn key_type_matches(&self, x: DType) -> bool {
        let k = self.keys.dtype();
        (x == DType::Str) == (k == DType::Str) && (x.is_float() == k.is_float())
    }
}

impl OpDef for LabelEncoder {
    name!("LabelEncoder");
    none_of!(decides_shapes);

    no_gpu_no_grad!();

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        if !self.key_type_matches(x.dtype) {
            return Err(format!("input of type {} against keys of type {}", x.dtype, self.keys.dtype()));
        }
        Ok(vec![OutType { dtype: self.values.dtype(), dims: x.dims.clone() }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let table: std::collections::HashMap<Key, usize> = self.table()?.into_iter().collect();
        let idx: Vec<Option<usize>> = keys_of(x)?.into_iter().map(|k| table.get(&k).copied()).collect();
        let data = match (&self.values.data, &self.default.data) {
            (Data::Str(v), Data::Str(d)) => Data::Str(idx.iter().map(|i| i.map_or(d[0].clone(), |i| v[i].clone())).collect()),
            _ => {
                let (v, d) = (self.values.data.to_le_bytes(), self.default.data.to_le_bytes());
                let w = self.values.dtype().size();
                let bytes: Vec<u8> = idx.iter().flat_map(|i| i.map_or(&d[..w], |i| &v[i * w..(i + 1) * w]).to_vec()).collect();
                Data::from_le_bytes(self.values.dtype(), &bytes).ok_or("values of this type are not supported")?
            }
        };
        Ok(vec![Tensor::new(x.shape.clone(), data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let mut table = self.table().map_err(|e| cx.err(e))?;
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        // Sorted keys, binary-searched per element; an element's key is made the same way.
        let (keys, key_of) = if self.keys.dtype() == DType::Str {
            let v: Vec<&str> = table.iter().map(|(k, _)| if let Key::Text(s) = k { s.as_str() } else { "" }).collect();
            (str_array(&v), "k.as_str()")
        } else {
            let bits = |k: &Key| match k {
                Key::Float(b) => *b as i64,
                Key::Int(i) => *i,
                Key::Text(_) => 0,
            };
            // Float keys are their canonical bits, searched as i64: sort in that order.
            table.sort_by_key(|(k, _)| bits(k));
            let v: Vec<i64> = table.iter().map(|(k, _)| bits(k)).collect();
            let key_of = if self.keys.dtype().is_float() {
                "{ let f = rt::Elem::to_f64(k); (if f.is_nan() { f64::NAN.to_bits() } else if f == 0.0 { 0 } else { f.to_bits() }) as i64 }"
            } else {
                "rt::Elem::to_i64(k)"
            };
            (cx.table(&v), key_of)
        };
        let cmp = if self.keys.dtype() == DType::Str { "p.as_str().cmp(k)" } else { "p.cmp(&k)" };
        let order: Vec<u32> = table.iter().map(|&(_, i)| i as u32).collect();
        let (values, default) = match (&self.values.data, &self.default.data) {
            (Data::Str(v), Data::Str(d)) => {
                let v: Vec<&str> = order.iter().map(|&i| v[i as usize].as_str()).collect();
                (str_array(&v), format!("rt::strings::Str::new({})", lit(&d[0])))
            }
            _ => {
                let t = cx.elem(y)?;
                let (v, w) = (self.values.data.to_le_bytes(), self.values.dtype().size());
                let bytes: Vec<u8> = order.iter().flat_map(|&i| v[i as usize * w..(i as usize + 1) * w].to_vec()).collect();
                let off = cx.blob(&bytes);
                let d = cx.blob(&self.default.data.to_le_bytes());
                (
                    format!("unsafe {{ rt::arena::weights::<{t}>(w, {off}, {}) }}", order.len()),
                    format!("unsafe {{ rt::arena::weights::<{t}>(w, {d}, 1) }}[0]"),
                )
            }
        };
        Ok(format!(
            "let (keys, values, x, y) = ({keys}, {values}, {}, {});\n\
             for (o, &k) in y.iter_mut().zip(x) {{\n\
             let k = {key_of};\n\
             *o = match keys.binary_search_by(|p| {cmp}) {{ Ok(i) => values[i], Err(_) => ({default}) }};\n\
             }}",
            cx.read(x)?,
            cx.write(y)?
        ))
    }
}

/// The IR node of each op (for frontends).
pub fn op(d: impl OpDef + 'static) -> Op {
    Op::Def(OpRef::new(d))
}

pub fn examples() -> Vec<super::Example> {
    let s = |shape: Vec<usize>, v: &[&str]| Tensor::new(shape, Data::Str(v.iter().map(|s| s.to_string()).collect()));
    let words = s(vec![2, 2], &["Hello World", "a.b.c", "Grüße, Welt", ""]);
    let mut v = vec![
        super::Example { consts: vec![], op: OpRef::new(StringConcat), inputs: vec![words.clone(), s(vec![1, 2], &["!", "?"])] },
        super::Example {
            consts: vec![],
            op: OpRef::new(StringNormalizer { case: Case::Upper, case_sensitive: true, stopwords: vec![] }),
            inputs: vec![s(vec![3], &["monday", "Grüße", "x"])],
        },
        super::Example {
            consts: vec![],
            op: OpRef::new(LabelEncoder::new(s(vec![3], &["a.b.c", "Hello World", "z"]), Tensor::from_i64s(vec![3], vec![1, 2, 3]), Tensor::from_i64s(vec![], vec![-1])).expect("encoder")),
            inputs: vec![words.clone()],
        },
        super::Example {
            consts: vec![],
            op: OpRef::new(LabelEncoder::new(Tensor::from_i64s(vec![3], vec![7, -2, 5]), s(vec![3], &["seven", "minus two", "five"]), s(vec![], &["?"])).expect("encoder")),
            inputs: vec![Tensor::from_i64s(vec![4], vec![5, 6, 7, -2])],
        },
    ];
    // Without the `regex` feature the op is refused, so it has no example.
    if let Ok(op) = RegexFullMatch::new(r"[\w ]+\s\w+|a\.b.*") {
        v.push(super::Example { consts: vec![], op: OpRef::new(op), inputs: vec![words] });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Tensor {
        Tensor::new(vec![v.len()], Data::Str(v.iter().map(|s| s.to_string()).collect()))
    }

    fn texts(t: &Tensor) -> Vec<String> {
        match &t.data {
            Data::Str(v) => v.clone(),
            _ => panic!("not strings"),
        }
    }

    #[test]
    fn split_follows_python() {
        let op = StringSplit { delimiter: None, maxsplit: None };
        let y = op.eval(&[Some(&s(&["  a  b c ", "", "d"]))]).expect("eval");
        assert_eq!(y[0].shape, vec![3, 3]);
        assert_eq!(texts(&y[0]), ["a", "b", "c", "", "", "", "d", "", ""]);
        assert_eq!(y[1].to_i64_vec(), Some(vec![3, 0, 1]));
        let op = StringSplit { delimiter: Some("-".into()), maxsplit: Some(1) };
        let y = op.eval(&[Some(&s(&["a-b-c", "-"]))]).expect("eval");
        assert_eq!(texts(&y[0]), ["a", "b-c", "", ""]);
    }

    #[test]
    fn normalizer_drops_stopwords_and_keeps_one_empty_string() {
        let op = StringNormalizer { case: Case::Lower, case_sensitive: false, stopwords: vec!["MONDAY".into()] };
        let y = op.eval(&[Some(&s(&["Monday", "TUESDAY"]))]).expect("eval");
        assert_eq!(texts(&y[0]), ["tuesday"]);
        let y = op.eval(&[Some(&s(&["monday"]))]).expect("eval");
        assert_eq!((y[0].shape.clone(), texts(&y[0])), (vec![1], vec![String::new()]));
    }

    #[test]
    fn regex_classes_are_ascii_as_in_re2() {
        let op = RegexFullMatch::new(r"\w+").expect("pattern");
        let y = op.eval(&[Some(&s(&["abc_1", "grüße", "a b"]))]).expect("eval");
        assert_eq!(y[0].data, Data::Bool(vec![true, false, false]));
        let op = RegexFullMatch::new(r"\bx\b.*").expect("pattern");
        let y = op.eval(&[Some(&s(&["x y", "xy"]))]).expect("eval");
        assert_eq!(y[0].data, Data::Bool(vec![true, false]));
    }

    #[test]
    fn label_encoder_float_keys_match_nan_and_signed_zero() {
        let keys = Tensor::from_f32s(vec![3], vec![f32::NAN, 0.0, 2.5]);
        let op = LabelEncoder::new(keys, Tensor::from_i64s(vec![3], vec![1, 2, 3]), Tensor::from_i64s(vec![], vec![9])).expect("encoder");
        let y = op.eval(&[Some(&Tensor::from_f32s(vec![4], vec![-0.0, f32::NAN, 2.5, 1.0]))]).expect("eval");
        assert_eq!(y[0].to_i64_vec(), Some(vec![2, 1, 3, 9]));
    }
}
