//! String tensors (feature `strings`): the element type generated code keeps in the arena and
//! the kernels of the string ops, which the interpreter calls too.
//!
//! A string tensor holds [`Str`] handles — a pointer and a length, like `&str`, but valid when
//! zeroed (the empty string), so an arena slot can hold them. The text they point to belongs
//! to the caller's inputs, to constants in the module, or to the [`Heap`] a `forward` call is
//! given for the strings it makes (concatenation, case changes); a model that only compares,
//! looks up, splits or moves strings never allocates.
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::marker::PhantomData;

/// One string element: `&'a str` that is valid when all-zero (the empty string).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Str<'a> {
    ptr: *const u8,
    len: usize,
    _text: PhantomData<&'a str>,
}

// SAFETY: a `Str` is a shared borrow of UTF-8 bytes, as `&str` is.
unsafe impl Send for Str<'_> {}
unsafe impl Sync for Str<'_> {}

impl<'a> Str<'a> {
    pub const EMPTY: Str<'static> = Str { ptr: core::ptr::null(), len: 0, _text: PhantomData };

    pub const fn new(s: &'a str) -> Str<'a> {
        Str { ptr: s.as_ptr(), len: s.len(), _text: PhantomData }
    }

    /// The text, for as long as it lives (not only as long as this handle).
    pub fn as_str(&self) -> &'a str {
        if self.len == 0 {
            return "";
        }
        // SAFETY: a non-empty `Str` is only made by `new` from a `&'a str`.
        unsafe { core::str::from_utf8_unchecked(core::slice::from_raw_parts(self.ptr, self.len)) }
    }
}

/// Handles to `N` strings (a string input of generated code).
pub fn strs<'a, const N: usize>(v: [&'a str; N]) -> [Str<'a>; N] {
    v.map(Str::new)
}

impl Default for Str<'_> {
    fn default() -> Self {
        Str::EMPTY
    }
}

impl core::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Str<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.as_str() == o.as_str()
    }
}

impl PartialEq<str> for Str<'_> {
    fn eq(&self, o: &str) -> bool {
        self.as_str() == o
    }
}

impl PartialEq<&str> for Str<'_> {
    fn eq(&self, o: &&str) -> bool {
        self.as_str() == *o
    }
}

impl core::fmt::Debug for Str<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl core::fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text of lifetime `'s`: the interpreter's `&str`, generated code's [`Str`].
pub trait Text<'s>: Copy {
    fn text(self) -> &'s str;
}

impl<'s> Text<'s> for &'s str {
    fn text(self) -> &'s str {
        self
    }
}

impl<'s> Text<'s> for Str<'s> {
    fn text(self) -> &'s str {
        self.as_str()
    }
}

/// The strings one `forward` call makes. `forward` empties it first, so the outputs of a call
/// stay valid until the next call (which needs the heap back mutably).
#[derive(Default)]
pub struct Heap {
    items: Vec<Box<str>>,
}

impl Heap {
    pub const fn new() -> Heap {
        Heap { items: Vec::new() }
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// Keep `s` and hand out its handle.
    pub fn keep(&mut self, s: String) -> Str<'static> {
        let b: Box<str> = s.into_boxed_str();
        // A box's bytes do not move when the vector grows, and nothing frees them before
        // `clear`, which needs `&mut self`: generated code holds the heap borrowed mutably for
        // as long as its outputs live.
        let h = Str { ptr: b.as_ptr(), len: b.len(), _text: PhantomData };
        self.items.push(b);
        h
    }
}

/// StringNormalizer's case change: Unicode's mapping, or (the `C` and `POSIX` locales) ASCII
/// letters only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Keep,
    Lower,
    Upper,
    AsciiLower,
    AsciiUpper,
}

/// `s` in `case` (`None`: unchanged).
pub fn change_case(s: &str, case: Case) -> Option<String> {
    match case {
        Case::Keep => None,
        Case::Lower => Some(s.to_lowercase()),
        Case::Upper => Some(s.to_uppercase()),
        Case::AsciiLower => Some(s.to_ascii_lowercase()),
        Case::AsciiUpper => Some(s.to_ascii_uppercase()),
    }
}

/// Whether `s` is one of `stopwords`, compared exactly or, when `case_sensitive` is false,
/// after lowercasing both.
pub fn is_stopword(s: &str, stopwords: &[&str], case_sensitive: bool) -> bool {
    if case_sensitive {
        stopwords.contains(&s)
    } else {
        let l = s.to_lowercase();
        stopwords.iter().any(|w| w.to_lowercase() == l)
    }
}

/// The pieces StringSplit cuts `s` into: at each `delimiter`, or (none or empty) at runs of
/// whitespace with empty pieces dropped, as Python's `str.split`; at most `maxsplit` cuts.
pub fn split<'s>(s: &'s str, delimiter: Option<&str>, maxsplit: Option<usize>, mut put: impl FnMut(&'s str)) {
    let max = maxsplit.unwrap_or(usize::MAX);
    match delimiter.filter(|d| !d.is_empty()) {
        Some(d) => {
            let mut rest = s;
            let mut cuts = 0;
            while cuts < max {
                match rest.find(d) {
                    Some(at) => {
                        put(&rest[..at]);
                        rest = &rest[at + d.len()..];
                        cuts += 1;
                    }
                    None => break,
                }
            }
            put(rest);
        }
        None => {
            let mut rest = s.trim_start();
            let mut cuts = 0;
            while !rest.is_empty() {
                if cuts == max {
                    put(rest.trim_end());
                    return;
                }
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                put(&rest[..end]);
                rest = rest[end..].trim_start();
                cuts += 1;
            }
        }
    }
}

/// The number of pieces [`split`] cuts `s` into.
pub fn split_count(s: &str, delimiter: Option<&str>, maxsplit: Option<usize>) -> usize {
    let mut n = 0;
    split(s, delimiter, maxsplit, |_| n += 1);
    n
}

/// StringSplit over `x`: row `i` of `y` (`width` strings) holds the pieces of `x[i]`, padded
/// with empty strings, and `counts[i]` their number. Pieces beyond `width` are dropped.
pub fn split_rows<'s, T: Text<'s>>(x: &[T], delimiter: Option<&str>, maxsplit: Option<usize>, width: usize, y: &mut [Str<'s>], counts: &mut [i64]) {
    for (i, &s) in x.iter().enumerate() {
        let row = &mut y[i * width..(i + 1) * width];
        row.fill(Str::EMPTY);
        let mut k = 0;
        split(s.text(), delimiter, maxsplit, |p| {
            if k < width {
                row[k] = Str::new(p);
            }
            k += 1;
        });
        counts[i] = k as i64;
    }
}

/// RegexFullMatch: whether all of `s` matches the compiled pattern, a dense DFA serialized by
/// the compiler (anchored, ending in `\z`). `None` when the DFA bytes do not deserialize.
pub fn full_match(dfa: &[u8], x: &[Str], y: &mut [u8]) -> Option<()> {
    use regex_automata::dfa::{dense::DFA, Automaton};
    use regex_automata::{Anchored, Input};
    let (dfa, _) = DFA::from_bytes(dfa).ok()?;
    for (o, s) in y.iter_mut().zip(x) {
        let input = Input::new(s.as_str()).anchored(Anchored::Yes);
        *o = matches!(dfa.try_search_fwd(&input), Ok(Some(_))) as u8;
    }
    Some(())
}

/// StringConcat: `y[i] = a[ia] + b[ib]` under numpy broadcasting (strides 0 on broadcast
/// dims, as `kernels::broadcast`), the results kept in `heap`.
#[allow(clippy::too_many_arguments)]
pub fn concat(a: &[Str], a_strides: &[usize], b: &[Str], b_strides: &[usize], y: &mut [Str<'static>], shape: &[usize], heap: &mut Heap) {
    let mut made: Vec<String> = alloc::vec![String::new(); y.len()];
    crate::kernels::broadcast::binary(a, a_strides, b, b_strides, &mut made, shape, |p, q| {
        let mut s = String::with_capacity(p.len() + q.len());
        s.push_str(p.as_str());
        s.push_str(q.as_str());
        s
    });
    for (o, s) in y.iter_mut().zip(made) {
        *o = heap.keep(s);
    }
}

/// StringNormalizer: the elements of `x` that are not stopwords, in `case`, written to the
/// front of `y`; returns how many. Strings a case change makes are kept in `heap`, the others
/// are `x`'s own.
pub fn normalize<'s>(x: &[Str<'s>], stopwords: &[&str], case_sensitive: bool, case: Case, y: &mut [Str<'s>], heap: &mut Heap) -> usize {
    let mut k = 0;
    for &s in x {
        if is_stopword(s.as_str(), stopwords, case_sensitive) {
            continue;
        }
        y[k] = match change_case(s.as_str(), case) {
            Some(c) if c != s.as_str() => heap.keep(c),
            _ => s,
        };
        k += 1;
    }
    k
}

/// Strings as bytes, each a `u32` little-endian byte length and its UTF-8 bytes (how the
/// compiler's harnesses pass string tensors through files).
pub fn encode(v: &[Str]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in v {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    out
}

/// The strings [`encode`] wrote, borrowed from `b`; `None` when a length runs past the end or a
/// string is not UTF-8.
pub fn decode(mut b: &[u8]) -> Option<Vec<Str<'_>>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let len = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let text = core::str::from_utf8(b.get(4..4usize.checked_add(len)?)?).ok()?;
        out.push(Str::new(text));
        b = &b[4 + len..];
    }
    Some(out)
}

/// A number as Cast writes it to a string: `%.8g` (8 significant digits, trailing zeros
/// dropped, an exponent of two digits or more), `NaN`, `INF` and `-INF`, as onnxruntime.
pub fn float_text(x: f64) -> String {
    use alloc::format;
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "INF".into() } else { "-INF".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Rounded to 8 significant digits first: the exponent is the rounded number's.
    let sci = format!("{:.7e}", x);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').into()
        } else {
            s.into()
        }
    };
    if !(-4..8).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.unsigned_abs())
    } else {
        trim(&format!("{:.*}", (7 - exp) as usize, x))
    }
}

/// An integer as Cast writes it to a string.
pub fn int_text(x: i64) -> String {
    use alloc::string::ToString;
    x.to_string()
}

/// An unsigned integer as Cast writes it to a string.
pub fn uint_text(x: u64) -> String {
    use alloc::string::ToString;
    x.to_string()
}

/// A string read as a float for Cast: surrounding whitespace ignored, `inf`, `infinity` and
/// `nan` in any case; `None` when it is not a number.
pub fn parse_float(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok()
}

/// A string read as an integer for Cast (an optional sign, decimal digits, surrounding
/// whitespace ignored); `None` when it is not one or does not fit 64 bits.
pub fn parse_int(s: &str) -> Option<i128> {
    let v = s.trim().parse::<i128>().ok()?;
    (i64::MIN as i128..=u64::MAX as i128).contains(&v).then_some(v)
}
