//! Put a safetensors file's tensors in place of a graph's parameters.
use super::convert::{convert, convertible};
use super::rename::{rename, Rename};
use super::{dtype_name, SafeTensors, SafetensorsError};
use burnc_compiler::ir::{Graph, Param, ValueKind};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;

/// How file keys meet parameter names.
#[derive(Debug, Clone, Default)]
pub struct WeightsOptions {
    /// Applied to every key, first match wins; see [`Rename`].
    pub renames: Vec<Rename>,
    /// Ignore tensors that no parameter takes instead of refusing the file.
    pub allow_unused: bool,
}

/// Everything that keeps a file from fitting a graph, reported at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mismatch {
    /// Parameters the file has no tensor for.
    pub missing: Vec<String>,
    /// Keys (as renamed) that match no parameter.
    pub unused: Vec<String>,
    /// Two keys that rename to one parameter: (parameter, keys).
    pub collisions: Vec<(String, Vec<String>)>,
    /// (parameter, model shape, file shape).
    pub shapes: Vec<(String, Vec<usize>, Vec<usize>)>,
    /// (parameter, model dtype, file dtype, why) for dtypes that do not convert.
    pub dtypes: Vec<(String, String, String, String)>,
}

impl Mismatch {
    fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.unused.is_empty() && self.collisions.is_empty() && self.shapes.is_empty() && self.dtypes.is_empty()
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!("{} parameters have no tensor in the file: {}", self.missing.len(), self.missing.join(", ")));
        }
        if !self.unused.is_empty() {
            parts.push(format!(
                "{} tensors match no parameter (rename them with --rename, or allow with --allow-unused-weights): {}",
                self.unused.len(),
                self.unused.join(", ")
            ));
        }
        for (p, keys) in &self.collisions {
            parts.push(format!("keys {} all rename to `{p}`", keys.join(", ")));
        }
        for (p, want, got) in &self.shapes {
            parts.push(format!("`{p}`: the model's shape is {want:?}, the file's {got:?}"));
        }
        for (p, want, got, why) in &self.dtypes {
            parts.push(format!("`{p}`: the model's dtype is {want}, the file's {got}{why}"));
        }
        write!(f, "weights do not fit the model: {}", parts.join("; "))
    }
}

/// What [`apply`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// Parameters whose bytes now come from the file.
    pub replaced: usize,
    /// Of those, parameters converted to the model's dtype (the rest reference the file's map).
    pub converted: usize,
    /// Keys ignored under `allow_unused`.
    pub unused: Vec<String>,
}

/// Replace every parameter of `graph` (the top-level graph; subgraph bodies keep their own
/// initializers) with the file's tensor of the same name after renaming. Shapes must match
/// exactly; dtypes that differ are converted when [`convertible`]. Nothing changes unless the
/// whole file fits.
pub fn apply(graph: &mut Graph, file: &SafeTensors, opts: &WeightsOptions) -> Result<Applied, SafetensorsError> {
    let mut by_name: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for key in file.tensors.keys() {
        by_name.entry(rename(&opts.renames, key)).or_default().push(key);
    }
    let params: BTreeMap<String, usize> =
        graph.values.iter().enumerate().filter(|(_, v)| matches!(v.kind, ValueKind::Param(_))).map(|(i, v)| (v.name.clone(), i)).collect();
    let mut m = Mismatch::default();
    let mut applied = Applied::default();
    let mut new_params: Vec<(usize, Param)> = Vec::new();
    for (name, keys) in &by_name {
        if keys.len() > 1 {
            m.collisions.push((name.clone(), keys.iter().map(|k| format!("`{k}`")).collect()));
            continue;
        }
        let Some(&idx) = params.get(name) else {
            m.unused.push(name.clone());
            continue;
        };
        let ValueKind::Param(old) = &graph.values[idx].kind else { continue };
        let t = &file.tensors[keys[0]];
        if t.shape != old.shape {
            m.shapes.push((name.clone(), old.shape.clone(), t.shape.clone()));
            continue;
        }
        let file_dtype = dtype_name(t.dtype).unwrap_or("?").to_string();
        let bytes = if t.dtype == old.dtype {
            // Same dtype: keep a slice of the memory map, no copy.
            t.bytes.clone()
        } else if convertible(t.dtype, old.dtype) {
            let n = t.shape.iter().product();
            match convert(t.dtype, old.dtype, &t.bytes, n) {
                Ok(b) => {
                    applied.converted += 1;
                    Bytes::from(b)
                }
                Err(why) => {
                    m.dtypes.push((name.clone(), old.dtype.to_string(), file_dtype, format!(" ({why})")));
                    continue;
                }
            }
        } else {
            m.dtypes.push((name.clone(), old.dtype.to_string(), file_dtype, " (no conversion between them)".into()));
            continue;
        };
        new_params.push((idx, Param { dtype: old.dtype, shape: old.shape.clone(), bytes }));
    }
    m.missing = params.keys().filter(|p| !by_name.contains_key(*p)).cloned().collect();
    if opts.allow_unused {
        applied.unused = std::mem::take(&mut m.unused);
    }
    if !m.is_empty() {
        return Err(SafetensorsError::Mismatch(Box::new(m)));
    }
    applied.replaced = new_params.len();
    for (idx, p) in new_params {
        graph.values[idx].kind = ValueKind::Param(p);
    }
    Ok(applied)
}
