//! Typed access to a node's attributes, with errors that name the attribute.
use super::proto::{AttributeProto, GraphProto, TensorProto};

pub struct Attrs<'a>(pub &'a [AttributeProto]);

impl<'a> Attrs<'a> {
    fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        self.0.iter().find(|a| a.name() == name)
    }
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
    pub fn i(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(|a| a.i)
    }
    pub fn i_or(&self, name: &str, d: i64) -> i64 {
        self.i(name).unwrap_or(d)
    }
    pub fn f(&self, name: &str) -> Option<f32> {
        self.get(name).and_then(|a| a.f)
    }
    pub fn f_or(&self, name: &str, d: f32) -> f32 {
        self.f(name).unwrap_or(d)
    }
    pub fn s(&self, name: &str) -> Option<String> {
        self.get(name).and_then(|a| a.s.as_ref()).map(|b| String::from_utf8_lossy(b).into_owned())
    }
    pub fn s_or(&self, name: &str, d: &str) -> String {
        self.s(name).unwrap_or_else(|| d.to_string())
    }
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }
    /// A list of strings; `Err(index)` names the first one that is not UTF-8.
    pub fn strings(&self, name: &str) -> Option<Result<Vec<String>, usize>> {
        self.get(name).map(|a| a.strings.iter().enumerate().map(|(i, b)| String::from_utf8(b.to_vec()).map_err(|_| i)).collect())
    }
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.get(name).map(|a| a.floats.clone())
    }
    pub fn t(&self, name: &str) -> Option<&'a TensorProto> {
        self.get(name).and_then(|a| a.t.as_ref())
    }
    pub fn g(&self, name: &str) -> Option<&'a GraphProto> {
        self.get(name).and_then(|a| a.g.as_ref())
    }
}
