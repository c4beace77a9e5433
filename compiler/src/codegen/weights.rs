//! The weights blob (`model.bin`): every parameter and constant a node reads, little-endian,
//! each at a 64-byte aligned offset.
use crate::ir::{Graph, ValueId, ValueKind};
use std::collections::HashMap;

pub const ALIGN: usize = 64;

pub struct WeightsLayout {
    pub offsets: HashMap<ValueId, usize>,
    pub blob: Vec<u8>,
}

/// Lay out the weights read by `g`'s nodes (in first-use order, so a reader walks the file
/// front to back).
pub fn layout(g: &Graph, order: &[crate::ir::NodeId]) -> WeightsLayout {
    layout_after(Vec::new(), g, order, &HashMap::new())
}

/// [`layout`] appended to an existing blob (a second graph of the same module sharing its
/// weights file); parameters named in `shared` are already in the blob at that offset.
pub fn layout_after(mut blob: Vec<u8>, g: &Graph, order: &[crate::ir::NodeId], shared: &HashMap<String, usize>) -> WeightsLayout {
    let mut offsets = HashMap::new();
    for &nid in order {
        for v in g.node(nid).inputs.iter().flatten() {
            if offsets.contains_key(v) {
                continue;
            }
            if let (ValueKind::Param(_), Some(&off)) = (&g.value(*v).kind, shared.get(&g.value(*v).name)) {
                offsets.insert(*v, off);
                continue;
            }
            let Some(bytes) = value_bytes(&g.value(*v).kind) else { continue };
            let off = blob.len().div_ceil(ALIGN) * ALIGN;
            blob.resize(off, 0);
            blob.extend_from_slice(&bytes);
            offsets.insert(*v, off);
        }
    }
    let end = blob.len().div_ceil(ALIGN) * ALIGN;
    blob.resize(end.max(ALIGN), 0);
    WeightsLayout { offsets, blob }
}

/// The bytes generated code reads for a weight (`None` for values that are not weights).
pub fn value_bytes(kind: &ValueKind) -> Option<Vec<u8>> {
    match kind {
        // Sub-byte types are packed in the file; generated code reads one per byte.
        ValueKind::Param(p) if p.dtype.bits() < 8 => p.to_tensor().map(|t| t.data.to_le_bytes()),
        ValueKind::Param(p) => Some(p.bytes.to_vec()),
        ValueKind::Const(t) => Some(t.data.to_le_bytes()),
        _ => None,
    }
}

impl WeightsLayout {
    /// Append a compile-time table (index maps) and return its offset.
    pub fn push_table(&mut self, bytes: &[u8]) -> usize {
        let off = self.blob.len().div_ceil(ALIGN) * ALIGN;
        self.blob.resize(off, 0);
        self.blob.extend_from_slice(bytes);
        let end = self.blob.len().div_ceil(ALIGN) * ALIGN;
        self.blob.resize(end, 0);
        off
    }
}
