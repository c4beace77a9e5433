//! The weights blob (`model.bin`): every parameter and constant a node reads, little-endian,
//! each at a 64-byte aligned offset.
use super::Lowering;
use crate::ir::{Graph, ValueId, ValueKind};
use std::collections::HashMap;

pub const ALIGN: usize = 64;

/// The symbol of module `name`'s weights in package `package`: unique per package and module,
/// and a C identifier.
pub fn symbol(package: &str, name: &str) -> String {
    let clean = |s: &str| s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>();
    format!("burnc_weights_{}_{}", clean(package), clean(name))
}

/// The module's `WEIGHTS` static (`WEIGHTS_BYTES` bytes, 64-byte aligned): the blob embedded
/// with `include_bytes!`, or, with [`super::LinkedWeights`], an extern static the linker
/// resolves from the static library burnc wrote beside the module or from the blob the module
/// assembles itself.
pub fn weights_static(opts: &super::CodegenOptions) -> String {
    let Some(l) = &opts.linked_weights else {
        return included(&opts.weights_file);
    };
    let sym = super::names::str_lit(&l.symbol);
    let extern_static = |from: &str| {
        format!(
            "unsafe extern \"C\" {{\n\
             \x20   /// The weights blob, {from}.\n\
             \x20   #[link_name = {sym}]\n\
             \x20   static WEIGHTS_BLOB: rt::arena::Aligned<[u8; WEIGHTS_BYTES]>;\n\
             }}\n\
             /// The blob (sound: burnc defined the symbol as WEIGHTS_BYTES bytes, 64-byte aligned, never written).\n\
             static WEIGHTS: &rt::arena::Aligned<[u8; WEIGHTS_BYTES]> = unsafe {{ &WEIGHTS_BLOB }};\n"
        )
    };
    match &l.from {
        super::LinkFrom::Library(lib) => format!(
            "#[link(name = {}, kind = \"static\")]\n{}",
            super::names::str_lit(lib),
            extern_static(&format!("from `lib{}.a` (burnc wrote it beside this module)", super::names::text(lib)))
        ),
        super::LinkFrom::Assembler(path) => assembled(&l.symbol, path, &extern_static("assembled from the blob file by `global_asm!` above")),
    }
}

/// `static WEIGHTS` as the bytes of `file`, through `include_bytes!`.
fn included(file: &str) -> String {
    format!("static WEIGHTS: &rt::arena::Aligned<[u8; WEIGHTS_BYTES]> = &rt::arena::Aligned(*include_bytes!({}));\n", super::names::str_lit(file))
}

/// The targets where [`assembled`] defines the blob: ELF objects (GNU/LLVM assembler syntax) on
/// the architectures with stable `global_asm!`; Miri runs no assembly.
const ASSEMBLED_CFG: &str = "all(not(miri), any(target_os = \"linux\", target_os = \"android\", target_os = \"freebsd\", target_os = \"netbsd\", target_os = \"openbsd\", target_os = \"dragonfly\", target_os = \"none\"), any(target_arch = \"x86_64\", target_arch = \"x86\", target_arch = \"aarch64\", target_arch = \"arm\", target_arch = \"riscv32\", target_arch = \"riscv64\"))";

/// The blob at `path` assembled into the module's object as `symbol` (`.incbin`: the assembler
/// copies the file, so rustc and LLVM never hold the bytes), in a module of its own so that one
/// `cfg` picks it or, on other targets, `include_bytes!` of the same file. A path the assembler
/// string cannot carry (control characters) is included everywhere.
fn assembled(symbol: &str, path: &str, extern_static: &str) -> String {
    if path.chars().any(|c| c.is_control()) || !symbol.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return included(path);
    }
    // GNU assembler string escapes, then `{`/`}` doubled for global_asm!'s template.
    let asm_path: String = path
        .chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            '{' => vec!['{', '{'],
            '}' => vec!['}', '}'],
            c => vec![c],
        })
        .collect();
    let lines = [
        format!(".pushsection .rodata.{symbol},\"a\""),
        ".balign 64".into(),
        format!(".globl {symbol}"),
        format!(".hidden {symbol}"),
        format!(".type {symbol}, %object"),
        format!("{symbol}:"),
        format!(".incbin \"{asm_path}\""),
        format!(".size {symbol}, . - {symbol}"),
        ".popsection".into(),
    ];
    let asm: String = lines.iter().map(|l| format!("        {},\n", super::names::str_lit(l))).collect();
    let decl: String = extern_static.replace("\nstatic WEIGHTS", "\npub(super) static WEIGHTS").lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "#[cfg({ASSEMBLED_CFG})]\n\
         mod weights_blob {{\n\
         \x20   use super::{{rt, WEIGHTS_BYTES}};\n\
         \x20   core::arch::global_asm!(\n{asm}    );\n\
         {decl}\
         }}\n\
         #[cfg(not({ASSEMBLED_CFG}))]\n\
         mod weights_blob {{\n\
         \x20   use super::{{rt, WEIGHTS_BYTES}};\n\
         \x20   pub(super) {inc}\
         }}\n\
         use weights_blob::WEIGHTS;\n",
        inc = included(path),
    )
}

pub struct WeightsLayout {
    pub offsets: HashMap<ValueId, usize>,
    /// f32 convolution weights stored packed for the GEMM (`conv_fused_prepacked`) or
    /// transformed for Winograd (`conv_winograd`): (offset, f32 elements); a value is in
    /// `offsets` too only when some other reader needs it plain. Keyed by the value and
    /// whether it is the Winograd layout (two convolutions may share weights but not layout).
    pub packed: HashMap<(ValueId, bool), (usize, usize)>,
    /// i8 QLinearConv / QLinearMatMul weights stored packed for `runtime::kernels::qconv` /
    /// `qgemm` (`ops::integer::packed_q8`): (offset, bytes); in `offsets` too only when another
    /// reader needs them.
    pub packed_q8: HashMap<ValueId, (usize, usize)>,
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
    let mut packed_q8 = HashMap::new();
    for &nid in order {
        let node = g.node(nid);
        let q8 = crate::ops::integer::packed_q8(g, node);
        for (i, v) in node.inputs.iter().enumerate() {
            let Some(v) = v else { continue };
            if let (3, Some(p)) = (i, &q8) {
                if !packed_q8.contains_key(v) {
                    if let Some(wp) = crate::ops::integer::packed_q8_weights(g, node, p) {
                        let off = blob.len().div_ceil(ALIGN) * ALIGN;
                        blob.resize(off, 0);
                        blob.extend_from_slice(&wp);
                        packed_q8.insert(*v, (off, wp.len()));
                    }
                }
                continue;
            }
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
    WeightsLayout { offsets, packed, packed_q8, blob }
}

/// The bytes generated code reads for a weight (`None` for values that are not weights).
pub fn value_bytes(kind: &ValueKind) -> Option<Vec<u8>> {
    match kind {
        // String constants are written into the module as literals (`emit::str_array`).
        ValueKind::Param(p) if p.dtype == crate::ir::DType::Str => None,
        ValueKind::Const(t) if t.dtype() == crate::ir::DType::Str => None,
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

#[cfg(test)]
mod tests {
    use super::super::{CodegenOptions, LinkFrom, LinkedWeights};

    fn assembled(path: &str) -> String {
        let opts = CodegenOptions { linked_weights: Some(LinkedWeights { symbol: "burnc_weights_t".into(), from: LinkFrom::Assembler(path.into()) }), ..Default::default() };
        super::weights_static(&opts)
    }

    #[test]
    fn assembled_weights_pick_the_assembler_or_the_include_by_one_cfg() {
        let src = assembled("/out/w.bin");
        assert_eq!(src.matches("mod weights_blob").count(), 2, "{src}");
        assert!(src.contains("core::arch::global_asm!("), "{src}");
        assert!(src.contains(r#"".incbin \"/out/w.bin\"""#), "{src}");
        assert!(src.contains(r#"#[link_name = "burnc_weights_t"]"#), "{src}");
        assert!(src.contains(r#"pub(super) static WEIGHTS: &rt::arena::Aligned<[u8; WEIGHTS_BYTES]> = &rt::arena::Aligned(*include_bytes!("/out/w.bin"));"#), "{src}");
        assert!(src.ends_with("use weights_blob::WEIGHTS;\n"), "{src}");
    }

    #[test]
    fn a_path_is_escaped_for_the_assembler_the_template_and_rust() {
        // `"` and `\` escaped for the assembler's string, braces doubled for global_asm!'s
        // template, then all of it escaped once more as a Rust string literal.
        let src = assembled(r#"/o"u{t}\w.bin"#);
        assert!(src.contains(r#"".incbin \"/o\\\"u{{t}}\\\\w.bin\"""#), "{src}");
        assert!(src.contains(r#"include_bytes!("/o\"u{t}\\w.bin")"#), "{src}");
        // A path the assembler cannot carry is included on every target.
        let src = assembled("/o\nut/w.bin");
        assert!(!src.contains("global_asm"), "{src}");
        assert!(src.contains("include_bytes!"), "{src}");
    }
}
