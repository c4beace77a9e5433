//! The weights blob (`model.bin`): every parameter and constant a node reads, little-endian,
//! each at a 64-byte aligned offset.
use super::Lowering;
use crate::ir::{Graph, ValueId, ValueKind};
use std::collections::HashMap;

pub const ALIGN: usize = 64;

/// The module's `WEIGHTS` static (`WEIGHTS_BYTES` bytes, 64-byte aligned): the blob embedded
/// with `include_bytes!`, or, with [`super::LinkedWeights`], an extern static the linker
/// resolves from the static library burnc wrote beside the module.
pub fn weights_static(opts: &super::CodegenOptions) -> String {
    match &opts.linked_weights {
        None => format!(
            "static WEIGHTS: &rt::arena::Aligned<[u8; WEIGHTS_BYTES]> = &rt::arena::Aligned(*include_bytes!({}));\n",
            super::names::str_lit(&opts.weights_file)
        ),
        Some(l) => format!(
            "#[link(name = {lib}, kind = \"static\")]\n\
             unsafe extern \"C\" {{\n\
             \x20   /// The weights blob, from `lib{lib_text}.a` (burnc wrote it beside this module).\n\
             \x20   #[link_name = {sym}]\n\
             \x20   static WEIGHTS_BLOB: rt::arena::Aligned<[u8; WEIGHTS_BYTES]>;\n\
             }}\n\
             /// The blob (sound: burnc defined the symbol as WEIGHTS_BYTES bytes, 64-byte aligned, never written).\n\
             static WEIGHTS: &rt::arena::Aligned<[u8; WEIGHTS_BYTES]> = unsafe {{ &WEIGHTS_BLOB }};\n",
            lib = super::names::str_lit(&l.lib),
            lib_text = super::names::text(&l.lib),
            sym = super::names::str_lit(&l.symbol),
        ),
    }
}

pub struct WeightsLayout {
    pub offsets: HashMap<ValueId, usize>,
    /// f32 convolution weights stored packed for the GEMM (`conv_fused_prepacked`) or
    /// transformed for Winograd (`conv_winograd`): (offset, f32 elements); a value is in
    /// `offsets` too only when some other reader needs it plain. Keyed by the value and
    /// whether it is the Winograd layout (two convolutions may share weights but not layout).
    pub packed: HashMap<(ValueId, bool), (usize, usize)>,
    pub blob: Vec<u8>,
}

/// Lay out the weights read by `g`'s nodes (in first-use order, so a reader walks the file
/// front to back).
pub fn layout(g: &Graph, order: &[crate::ir::NodeId], lw: Lowering) -> WeightsLayout {
    layout_after(Vec::new(), g, order, &HashMap::new(), lw)
}

/// [`layout`] appended to an existing blob (a second graph of the same module sharing its
/// weights file); parameters named in `shared` are already in the blob at that offset.
pub fn layout_after(mut blob: Vec<u8>, g: &Graph, order: &[crate::ir::NodeId], shared: &HashMap<String, usize>, lw: Lowering) -> WeightsLayout {
    let mut offsets = HashMap::new();
    let mut packed = HashMap::new();
    for &nid in order {
        let node = g.node(nid);
        for (i, v) in node.inputs.iter().enumerate() {
            let Some(v) = v else { continue };
            let pre = if i == 1 { super::emit::prepacked_conv(g, node, lw) } else { None };
            let key = (*v, pre.is_some() && super::emit::nn::winograd_conv(g, node, lw));
            if (pre.is_some() && packed.contains_key(&key)) || (pre.is_none() && offsets.contains_key(v)) {
                continue;
            }
            if let (ValueKind::Param(_), Some(&off)) = (&g.value(*v).kind, shared.get(&g.value(*v).name)) {
                offsets.insert(*v, off);
                continue;
            }
            // Convolution weights in the GEMM's packed layout, packed here once instead of on
            // every call (a weight shared with a plain reader is stored both ways).
            if let (Some((d, win)), Some(bytes)) = (pre, value_bytes(&g.value(*v).kind)) {
                let w: Vec<f32> = crate::tensor::from_le(&bytes);
                let wp = super::emit::nn::packed_conv_weights(g, node, lw, &d, &win, &w);
                let off = blob.len().div_ceil(ALIGN) * ALIGN;
                blob.resize(off, 0);
                blob.extend_from_slice(&crate::tensor::to_le(&wp));
                packed.insert(key, (off, wp.len()));
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
    WeightsLayout { offsets, packed, blob }
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
