//! The Rust side of a GPU module, one writer for the CUDA and wgpu targets: the buffer sizes,
//! the kernels' source embedded, the table of launches, the offsets of inputs and outputs,
//! and a `Model` whose `forward` copies inputs in, runs the pass and copies outputs back.
//! What differs per target (the runtime module, how kernels are named and launched, how a
//! session starts) comes in a [`GpuHost`].
use crate::codegen::builder::{self, io, ModuleBuilder};
use crate::codegen::{names, CodegenError, CodegenOptions, IoDesc};
use super::{GpuKernel, GpuPlan};
use crate::ir::{DType, Graph, ValueId};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// One target's part of the module.
pub(crate) struct GpuHost {
    /// The runtime module (`cuda`, `wgpu`) and its error type.
    pub rt: &'static str,
    pub error: &'static str,
    /// For the header: " for CUDA", and its last line (sizes, launches).
    pub what: &'static str,
    pub summary: String,
    /// The first item after the size constants: the kernels' source, embedded.
    pub embed: String,
    /// Items after the kernels' names: the launch table and `SPEC`.
    pub items: String,
    /// `Model`'s constructors (`new`, `with_weights`) and target-specific methods, inside its `impl`.
    pub constructors: String,
    /// Also a `forward_async` (reads awaited, for wasm32 where nothing may block), and
    /// `forward` only off wasm32.
    pub async_forward: bool,
}

/// The arena offset of each graph input, placed after the planned activations of `m`, and the
/// arena's size with them (at least 64 bytes).
pub(crate) fn inputs_after(g: &Graph, m: &crate::memory::MemoryPlan) -> Result<(HashMap<ValueId, usize>, usize), CodegenError> {
    let mut offsets = HashMap::new();
    let mut end = crate::memory::align_up(m.arena_bytes);
    for &i in &g.inputs {
        let bytes = crate::schedule::value_bytes(g, i).ok_or_else(|| CodegenError::Graph { what: format!("input `{}`", g.value(i).name), reason: "has no static shape".into() })?;
        offsets.insert(i, end);
        end = end.checked_add(crate::memory::align_up(bytes)).ok_or_else(|| CodegenError::Graph { what: "arena".into(), reason: "size overflows".into() })?;
    }
    Ok((offsets, end.max(64)))
}

fn rust_ty(d: DType) -> Result<&'static str, CodegenError> {
    Ok(match d {
        DType::Bool => "bool",
        _ => crate::codegen::emit::rust_ty(d).ok_or_else(|| CodegenError::Graph { what: "dtype".into(), reason: format!("{d} is not supported by the GPU targets yet") })?,
    })
}

/// The module of plan `p`: its source, inputs and outputs.
pub(crate) fn write<K: GpuKernel>(h: &GpuHost, p: &GpuPlan<K>, opts: &CodegenOptions) -> Result<(String, Vec<IoDesc>, Vec<IoDesc>), CodegenError> {
    let (g, rt, error) = (&p.graph, h.rt, h.error);
    let mut taken = HashSet::new();
    let inputs: Vec<IoDesc> = g.inputs.iter().map(|&i| io(g, i, &mut taken)).collect::<Result<_, _>>()?;
    let outputs = builder::outputs(g, &p.memory, |_, _| {})?;
    // `outputs` checked that each has a slot.
    let out_offsets: Vec<usize> = g.outputs.iter().map(|o| p.memory.slots[o].offset).collect();
    let numel = |d: &IoDesc| d.shape.iter().product::<usize>();

    let mut m = ModuleBuilder::new(&opts.source_name, h.what);
    m.io_lines(&inputs, &outputs);
    m.note(&h.summary);
    m.constant("ARENA_BYTES", "Bytes of device memory for activations and inputs.", p.arena_bytes);
    m.weights_bytes(opts, p.weights.blob.len());
    m.weights_static(opts);
    let mut src = String::new();
    let knames: Vec<String> = p.kernels.iter().map(|k| names::str_lit(k.name())).collect();
    let _ = writeln!(src, "{}\nconst KERNELS: [&str; {}] = [{}];", h.embed, knames.len(), knames.join(", "));
    src.push_str(&h.items);
    for (d, &i) in inputs.iter().zip(&g.inputs) {
        let _ = writeln!(src, "/// Arena offset of input `{}` (for data already on the device).\npub const INPUT_{}: usize = {};", names::text(&d.name), d.ident.to_uppercase(), p.input_offsets[&i]);
    }
    for (d, off) in outputs.iter().zip(&out_offsets) {
        let _ = writeln!(src, "/// Arena offset of output `{}`.\npub const OUTPUT_{}: usize = {off};", names::text(&d.name), d.ident.to_uppercase());
    }
    let _ = writeln!(src, "/// The model's outputs, copied back from the device.\npub struct Outputs {{");
    for d in &outputs {
        let _ = writeln!(src, "    /// `{}`: {} {:?}\n    pub {}: Vec<{}>,", names::text(&d.name), d.dtype, d.shape, d.ident, rust_ty(d.dtype)?);
    }
    src.push_str("}\n");
    let _ = write!(
        src,
        "/// The compiled model on one device: weights uploaded once, the forward pass replayed.
pub struct Model {{
    session: rt::{rt}::Session,
}}
impl Model {{
{}
    /// The device session, for data that stays on the device: write inputs at `INPUT_*`,
    /// call `run`, read outputs at `OUTPUT_*`.
    pub fn session(&mut self) -> &mut rt::{rt}::Session {{
        &mut self.session
    }}
",
        h.constructors
    );
    let params: Vec<String> = inputs.iter().map(|d| Ok(format!("{}: &[{}; {}]", d.ident, rust_ty(d.dtype)?, numel(d)))).collect::<Result<_, CodegenError>>()?;
    let params = params.join(", ");
    let fields: Vec<&str> = outputs.iter().map(|d| d.ident.as_str()).collect();
    // The body of `forward` (or `forward_async`, whose reads are awaited).
    let forward = |read: &str, sync_only: bool| -> Result<String, CodegenError> {
        let mut f = String::new();
        if sync_only {
            f.push_str("    #[cfg(not(target_arch = \"wasm32\"))]\n");
        }
        let (asyncness, name, doc) = if read == "read" { ("", "forward", "") } else { ("async ", "forward_async", " The form to use on wasm32.") };
        let _ = writeln!(f, "    /// Copy the inputs to the device, run the forward pass and copy the outputs back.{doc}\n    #[allow(clippy::too_many_arguments)]\n    pub {asyncness}fn {name}(&mut self, {params}) -> Result<Outputs, rt::{rt}::{error}> {{");
        for d in &inputs {
            let bytes = if d.dtype == DType::Bool { format!("&{}.map(u8::from)", d.ident) } else { format!("{}.as_slice()", d.ident) };
            let _ = writeln!(f, "        self.session.write(INPUT_{}, rt::{rt}::bytes_of({bytes}))?;", d.ident.to_uppercase());
        }
        f.push_str("        self.session.run()?;\n");
        let wait = if read == "read" { "" } else { ".await" };
        for d in &outputs {
            let up = d.ident.to_uppercase();
            if d.dtype == DType::Bool {
                let _ = writeln!(f, "        let mut {0} = vec![0u8; {1}];\n        self.session.{read}(OUTPUT_{up}, rt::{rt}::bytes_of_mut(&mut {0})){wait}?;\n        let {0}: Vec<bool> = {0}.into_iter().map(|b| b != 0).collect();", d.ident, numel(d));
            } else {
                let _ = writeln!(f, "        let mut {0} = vec![{1}::default(); {2}];\n        self.session.{read}(OUTPUT_{up}, rt::{rt}::bytes_of_mut(&mut {0})){wait}?;", d.ident, rust_ty(d.dtype)?, numel(d));
            }
        }
        let _ = writeln!(f, "        Ok(Outputs {{ {} }})\n    }}", fields.join(", "));
        Ok(f)
    };
    src.push_str(&forward("read", h.async_forward)?);
    if h.async_forward {
        src.push_str(&forward("read_async", false)?);
    }
    src.push_str("}\n");
    m.item(&src);
    let source = m.finish()?;
    Ok((source, inputs, outputs))
}
