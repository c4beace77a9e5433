//! Generated training code: one module with `forward` (inference with the current
//! parameters) and `train_step` (forward, loss, backward, optimizer update), each planned in
//! its own arena. Trainable parameters and optimizer moments live in a state buffer the caller
//! owns ([`State`]); frozen weights stay in the weights blob (flash on a microcontroller).
//!
//! The train graph is the functional one `train::build_step` makes; here each `ParamUpdate`
//! loses its outputs and updates the state buffer in place, after every other reader of the
//! parameter (the scheduler orders it so).
use super::emit::Ctx;
use super::builder::{self, emit_parts, fixed_array, fixed_output_fields, io, outputs_literal, array_read, Entry, ModuleBuilder, Params, Parts};
use super::names;
use super::{plan_memory, weights, CodegenError, CodegenOptions, IoDesc, Lowering};
use crate::ir::Graph;
use crate::ops::optim::ParamUpdate;
use crate::tensor::Tensor;
use crate::train::TrainGraph;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// A parameter as the generated module lists it.
#[derive(Debug, Clone)]
pub struct ParamDesc {
    pub name: String,
    pub shape: Vec<usize>,
    /// Byte offset: in the state buffer when trainable, else in the weights blob.
    pub offset: usize,
    pub trainable: bool,
}

/// The generated training module and what the compiler knows about it.
pub struct TrainGenerated {
    pub source: String,
    pub weights: Vec<u8>,
    /// `forward`'s arena.
    pub arena_bytes: usize,
    pub train_arena_bytes: usize,
    pub train_lower_bound_bytes: usize,
    /// Sum of all buffers of the train step without reuse.
    pub train_total_buffer_bytes: usize,
    pub state_bytes: usize,
    pub safetensors_bytes: usize,
    pub inputs: Vec<IoDesc>,
    pub target: IoDesc,
    pub outputs: Vec<IoDesc>,
    pub params: Vec<ParamDesc>,
}

impl TrainGenerated {
    pub fn memory_line(&self) -> String {
        format!(
            "memory: train arena {} bytes (lower bound {}, sum of all buffers {}), state {} bytes, forward arena {} bytes, weights {} bytes",
            self.train_arena_bytes, self.train_lower_bound_bytes, self.train_total_buffer_bytes, self.state_bytes, self.arena_bytes, self.weights.len()
        )
    }
}

fn align(n: usize) -> usize {
    n.div_ceil(weights::ALIGN) * weights::ALIGN
}

/// `forward`: the prepared model graph whose trainable parameters are inputs (by name, as in
/// `tg.params`); `frozen`: every other f32 parameter with its value (saved with the trained
/// ones by `write_safetensors`).
pub fn generate_train(forward: &Graph, tg: &TrainGraph, frozen: &[(String, Tensor)], opts: &CodegenOptions) -> Result<TrainGenerated, CodegenError> {
    // Frozen weights stay in the plain layout: `set_frozen` replaces them at run time, so the
    // compiler must not pack them for the GEMM (nor size scratch as if it had).
    let lw = Lowering::PLAIN;
    let gerr = |what: &str, reason: String| CodegenError::Graph { what: what.into(), reason };

    // State layout: parameters first (so they are one run of bytes), then the moments.
    let mut state_off: HashMap<String, usize> = HashMap::new();
    let mut next = 0usize;
    for p in &tg.params {
        state_off.insert(p.name.clone(), next);
        next += align(p.shape.iter().product::<usize>() * 4);
    }
    for p in &tg.params {
        for &m in &p.moments {
            state_off.insert(tg.graph.value(m).name.clone(), next);
            next += align(p.shape.iter().product::<usize>() * 4);
        }
    }
    let state_bytes = next.max(weights::ALIGN);

    // ---- forward
    // No fusion: folding BatchNorm into conv weights would bake frozen parameters that the
    // caller may still replace (`set_frozen`), and the train step is not fused either, so
    // forward and train_step round alike.
    let fg = forward;
    let copied;
    let fg = match super::with_output_copies(fg) {
        Some(c) => {
            copied = c;
            &copied
        }
        None => fg,
    };
    let fplan = plan_memory(fg, lw, opts.max_arena)?;
    // Names the generated functions use themselves.
    let mut taken: HashSet<String> = ["lr", "step", "dropout_key", "s", "arena", "entries", "empty"].iter().map(|s| s.to_string()).collect();
    let mut fstate = HashMap::new();
    let mut inputs = Vec::new();
    let mut fnames = HashMap::new();
    for &v in &fg.inputs {
        let name = &fg.value(v).name;
        match state_off.get(name) {
            Some(&off) => {
                fstate.insert(v, off);
            }
            None => {
                let d = io(fg, v, &mut taken)?;
                fnames.insert(v, array_read(&d.ident));
                inputs.push(d);
            }
        }
    }
    let outputs = builder::outputs(fg, &fplan, |_, _| {})?;
    let fcx = Ctx { g: fg, plan: &fplan, weights: std::cell::RefCell::new(weights::layout(fg, &fplan.order, lw)), inputs: fnames, state: fstate, lowering: lw };
    let fparts = emit_parts(&fcx, None, opts.nodes_per_fn, None)?;
    let fwl = fcx.weights.into_inner();
    let frozen_in_fwd: HashMap<String, usize> = fwl
        .offsets
        .iter()
        .filter(|(v, _)| matches!(fg.value(**v).kind, crate::ir::ValueKind::Param(_)))
        .map(|(v, &o)| (fg.value(*v).name.clone(), o))
        .collect();

    // ---- train step: updates in place, the loss the only output.
    let mut tgraph = tg.graph.clone();
    let loss = *tgraph.outputs.first().ok_or_else(|| gerr("train graph", "has no loss output".into()))?;
    for n in &mut tgraph.nodes {
        if n.op.get::<ParamUpdate>().is_some() {
            n.outputs.clear();
        }
    }
    tgraph.outputs = vec![loss];
    let tplan = plan_memory(&tgraph, lw, opts.max_arena)?;
    let loss_slot = tplan.slots.get(&loss).ok_or_else(|| gerr("train graph", "the loss has no arena slot".into()))?.offset;
    let mut tstate = HashMap::new();
    let mut tnames = HashMap::new();
    let data_names: HashSet<&str> = tg.data_inputs.iter().map(|&v| tg.graph.value(v).name.as_str()).collect();
    let mut t_taken = taken.clone();
    let mut extra = Vec::new(); // target, lr, step
    for &v in &tgraph.inputs {
        let name = tgraph.value(v).name.clone();
        if let Some(&off) = state_off.get(&name) {
            tstate.insert(v, off);
        } else if data_names.contains(name.as_str()) {
            let d = inputs.iter().find(|d| d.name == name).ok_or_else(|| gerr(&name, "is a train input but not a forward input".into()))?;
            tnames.insert(v, array_read(&d.ident));
        } else {
            // target, lr, step: the step's own parameters.
            // The scalars train_step makes itself have fixed names.
            let own = if v == tg.lr {
                Some("lr")
            } else if v == tg.step {
                Some("step")
            } else if Some(v) == tg.dropout_key {
                Some("dropout_key")
            } else {
                None
            };
            let d = match (own, &tgraph.value(v).ty) {
                (Some(id), crate::ir::ValueType::Tensor(t)) => IoDesc { name: name.clone(), ident: id.into(), dtype: t.dtype, shape: vec![] },
                _ => io(&tgraph, v, &mut t_taken)?,
            };
            tnames.insert(v, array_read(&d.ident));
            extra.push((v, d));
        }
    }
    let target = extra.iter().find(|(v, _)| *v == tg.target).map(|(_, d)| d.clone()).ok_or_else(|| gerr("train graph", "no target input".into()))?;
    let tcx = Ctx {
        g: &tgraph,
        plan: &tplan,
        weights: std::cell::RefCell::new(weights::layout_after(fwl.blob, &tgraph, &tplan.order, &frozen_in_fwd, lw)),
        inputs: tnames,
        state: tstate,
        lowering: lw,
    };
    let tparts = emit_parts(&tcx, None, opts.nodes_per_fn, None)?;
    let mut wl = tcx.weights.into_inner();
    // Frozen parameters the train step reads but forward does not.
    let mut frozen_at = frozen_in_fwd.clone();
    for (v, &o) in &wl.offsets {
        if matches!(tgraph.value(*v).kind, crate::ir::ValueKind::Param(_)) {
            frozen_at.entry(tgraph.value(*v).name.clone()).or_insert(o);
        }
    }

    // Initial values of the trainable parameters, and frozen ones not already in the blob.
    let mut init: Vec<(usize, usize, usize)> = Vec::new(); // (blob offset, state offset, bytes)
    for p in &tg.params {
        let bytes = p.init.data.to_le_bytes();
        let off = wl.push_table(&bytes);
        init.push((off, state_off[&p.name], bytes.len()));
    }
    let mut params: Vec<ParamDesc> = tg.params.iter().map(|p| ParamDesc { name: p.name.clone(), shape: p.shape.clone(), offset: state_off[&p.name], trainable: true }).collect();
    for (name, t) in frozen {
        let offset = match frozen_at.get(name) {
            Some(&o) => o,
            None => wl.push_table(&t.data.to_le_bytes()),
        };
        params.push(ParamDesc { name: name.clone(), shape: t.shape.clone(), offset, trainable: false });
    }
    let safetensors_bytes = {
        let datas: Vec<Vec<u8>> = params.iter().map(|p| vec![0u8; p.shape.iter().product::<usize>() * 4]).collect();
        let entries: Vec<burnc_runtime::train::safetensors::Entry> = params
            .iter()
            .zip(&datas)
            .map(|(p, d)| burnc_runtime::train::safetensors::Entry { name: &p.name, dtype: "F32", shape: &p.shape, data: d })
            .collect();
        burnc_runtime::train::safetensors::serialized_len(&entries)
    };

    // ---- the module
    let arena_bytes = fplan.arena_bytes.max(64);
    let train_arena_bytes = tplan.arena_bytes.max(64);
    let Params { forward: fsig, parts: fpsig, args: fargs } = builder::params(&inputs, false, fixed_array);
    let extra_descs: Vec<IoDesc> = extra.iter().map(|(_, d)| d.clone()).collect();
    let Params { parts: tpsig, args: targs, .. } = builder::params(&[inputs.as_slice(), &extra_descs].concat(), false, fixed_array);
    // The scalars train_step makes itself are passed by reference.
    let targs: Vec<String> = targs.into_iter().map(|a| if matches!(a.as_str(), "lr" | "step" | "dropout_key") { format!("&{a}") } else { a }).collect();
    let data_sig = builder::params(&[inputs.as_slice(), std::slice::from_ref(&target)].concat(), false, fixed_array).forward;
    let fparts = Parts { prefix: "part", more: Some(("s: rt::arena::Region", "s")), params: &fpsig, lints: &[], bodies: fparts };
    let tparts = Parts { prefix: "train_part", more: Some(("s: rt::arena::Region", "s")), params: &tpsig, lints: &[], bodies: tparts };

    let mut m = ModuleBuilder::new(&opts.source_name, " with training");
    for d in &inputs {
        m.io_line("input", d, &format!("{:?}", d.shape));
    }
    m.io_line("target", &target, &format!("{:?}", target.shape));
    for d in &outputs {
        m.io_line("output", d, &format!("{:?}", d.shape));
    }
    m.note(&format!("optimizer {:?}, {} trainable tensors, {} frozen", tg.rule, tg.params.len(), frozen.len()));
    m.note(&format!(
        "train arena {} bytes (lower bound {}), forward arena {} bytes, state {} bytes, weights {} bytes",
        train_arena_bytes, tplan.lower_bound_bytes, arena_bytes, state_bytes, wl.blob.len()
    ));

    m.constant("ARENA_BYTES", "Bytes of working memory `forward` needs: the size of [`Arena`].", arena_bytes);
    m.constant("TRAIN_ARENA_BYTES", "Bytes of working memory `train_step` needs: the size of [`TrainArena`].", train_arena_bytes);
    m.constant("TRAIN_LOWER_BOUND_BYTES", "Bytes live at once at the train step's peak: no plan of this schedule can be smaller.", tplan.lower_bound_bytes);
    m.constant("TRAIN_BUFFER_SUM_BYTES", "Sum of all buffers of the train step, as if nothing were reused.", tplan.total_buffer_bytes);
    m.constant("STATE_BYTES", "Bytes of the trainable parameters and optimizer moments: the size of [`State`].", state_bytes);
    m.weights_bytes(opts, wl.blob.len());
    m.constant("SAFETENSORS_BYTES", "Bytes [`Model::write_safetensors`] writes.", safetensors_bytes);
    m.item(&format!("/// The learning rate a new [`Model`] starts with.\npub const DEFAULT_LR: f32 = {:?};", tg.default_lr));
    m.buffer("Arena", "ARENA_BYTES", "The working memory of [`Model::forward`].");
    m.buffer("TrainArena", "TRAIN_ARENA_BYTES", "The working memory of [`Model::train_step`].");
    m.buffer("State", "STATE_BYTES", "Trainable parameters and optimizer moments: the caller owns it (a `static`, the heap), can copy its bytes out to save a run and back to resume it.");
    m.weights_static(opts);
    let mut table = String::from("/// Every f32 parameter: trainable ones in [`State`], frozen ones in the weights blob.\npub const PARAMS: &[rt::train::ParamInfo] = &[\n");
    for p in &params {
        let _ = writeln!(
            table,
            "    rt::train::ParamInfo {{ name: {}, shape: &{:?}, offset: {}, len: {}, trainable: {} }},",
            names::str_lit(&p.name),
            p.shape,
            p.offset,
            p.shape.iter().product::<usize>(),
            p.trainable
        );
    }
    m.item(&(table + "];"));
    m.item(&format!("/// (blob offset, state offset, bytes) of each trainable parameter's initial value.\nconst INIT: &[(usize, usize, usize)] = &{init:?};"));
    m.item(PARAM_FNS);
    m.outputs_struct("The model's outputs, borrowed from the arena.", &fixed_output_fields(&outputs));
    let forward = Entry {
        doc: "/// Run the model with the current parameters. Every shape is fixed at compile time, so this cannot fail.\n",
        lints: &[],
        sig: format!("forward<'a>(&self, arena: &'a mut Arena, {}) -> Outputs<'a>", fsig.join(", ")),
        setup: String::new(),
        then: "    // Read only: forward never writes the state.\n    let s = rt::arena::Region::of_read_only(&self.s.0);\n".into(),
        calls: fparts.calls(&fargs),
        result: outputs_literal(fg, &fplan, &outputs)?,
    };
    let train_step = Entry {
        doc: "/// One training step on a batch: forward, loss, backward and the optimizer update of every\n\
              /// trainable parameter in the state. Returns the loss (before the update).\n",
        lints: &[],
        sig: format!("train_step(&mut self, arena: &mut TrainArena, {}) -> f32", data_sig.join(", ")),
        setup: format!(
            "    self.step += 1;\n    let lr = [self.lr];\n    let step = [self.step as i64];\n{}",
            // Only a graph with Dropout takes a key (an unused one would be a warning in the user's crate).
            if tg.dropout_key.is_some() { "    // Dropout masks: a new key each step (salted per Dropout by the compiler).\n    let dropout_key = [self.step as i64];\n" } else { "" }
        ),
        then: "    let s = rt::arena::Region::of(&mut self.s.0);\n".into(),
        calls: tparts.calls(&targs),
        result: format!("    // SAFETY: the loss is the train graph's output: live to the end, aligned.\n    let loss = unsafe {{ rt::arena::view::<f32>(a, {loss_slot}, 1) }};\n    loss[0]\n"),
    };
    m.model(&model_head(params.len()), &[forward, train_step]);
    m.parts(fparts);
    m.parts(tparts);
    let source = m.finish()?;
    Ok(TrainGenerated {
        source,
        weights: wl.blob,
        arena_bytes,
        train_arena_bytes,
        train_lower_bound_bytes: tplan.lower_bound_bytes,
        train_total_buffer_bytes: tplan.total_buffer_bytes,
        state_bytes,
        safetensors_bytes,
        inputs,
        target,
        outputs,
        params,
    })
}

/// The free functions over [`PARAMS`]: look a parameter up, and replace frozen ones in a copy
/// of the weights blob.
const PARAM_FNS: &str = "/// The index in [`PARAMS`] of the parameter called `name`.\n\
         pub fn param_index(name: &str) -> Option<usize> { PARAMS.iter().position(|p| p.name == name) }\n\
         /// The weights blob embedded at compile time (copy it to replace frozen parameters).\n\
         pub fn weights() -> &'static [u8] { &WEIGHTS.0 }\n\
         /// Replace frozen parameter `i` of [`PARAMS`] in a copy of the weights blob (then start\n\
         /// with [`Model::with_weights`]).\n\
         pub fn set_frozen(blob: &mut [u8], i: usize, values: &[f32]) -> Result<(), rt::train::ParamError> {\n\
             let p = PARAMS.get(i).ok_or(rt::train::ParamError::NoSuchParam)?;\n\
             if p.trainable { return Err(rt::train::ParamError::Trainable); }\n\
             if values.len() != p.len { return Err(rt::train::ParamError::Length(p.len, values.len())); }\n\
             let have = blob.len();\n\
             let dst = blob.get_mut(p.offset..p.offset + 4 * p.len).ok_or(rt::train::ParamError::Length(WEIGHTS_BYTES, have))?;\n\
             for (d, v) in dst.chunks_exact_mut(4).zip(values) { d.copy_from_slice(&v.to_le_bytes()); }\n\
             Ok(())\n\
         }";

/// `Model` of a training module over `n_params` parameters: frozen weights borrowed, the state
/// the caller's; its `impl` block is left open for the entry functions.
fn model_head(n_params: usize) -> String {
    format!(
        "/// The model being trained: frozen weights borrowed (the embedded blob or a caller's copy),\n\
         /// trainable parameters and moments in the caller's [`State`].\n\
         pub struct Model<'w, 's> {{\n    w: &'w [u8],\n    s: &'s mut State,\n    step: u64,\n    lr: f32,\n}}\n\
         impl<'s> Model<'static, 's> {{\n\
         /// Start training from the weights embedded at compile time: `state` gets the initial\n\
         /// parameters and zero moments.\n\
         pub fn new(state: &'s mut State) -> Self {{\n    Self::start(&WEIGHTS.0, state)\n}}\n\
         /// Continue a run: `state` holds the bytes of an earlier [`State`] after `step` steps.\n\
         pub fn resume(state: &'s mut State, step: u64) -> Self {{\n    Model {{ w: &WEIGHTS.0, s: state, step, lr: DEFAULT_LR }}\n}}\n}}\n\
         impl<'w, 's> Model<'w, 's> {{\n\
         /// Start training with weights from elsewhere: `WEIGHTS_BYTES` bytes, 64-byte aligned.\n\
         pub fn with_weights(w: &'w [u8], state: &'s mut State) -> Result<Self, rt::arena::WeightsError> {{\n    rt::arena::check_weights(w, WEIGHTS_BYTES)?;\n    Ok(Self::start(w, state))\n}}\n\
         fn start(w: &'w [u8], state: &'s mut State) -> Self {{\n    state.0.fill(0);\n    for &(from, to, n) in INIT {{\n        state.0[to..to + n].copy_from_slice(&w[from..from + n]);\n    }}\n    Model {{ w, s: state, step: 0, lr: DEFAULT_LR }}\n}}\n\
         /// Steps taken so far.\npub fn step(&self) -> u64 {{ self.step }}\n\
         pub fn lr(&self) -> f32 {{ self.lr }}\n\
         /// The learning rate of the next steps (schedules are the caller's).\npub fn set_lr(&mut self, lr: f32) {{ self.lr = lr; }}\n\
         /// The state buffer (to save a run: its bytes and [`Model::step`]).\npub fn state(&self) -> &State {{ self.s }}\n\
         /// The current values of parameter `i` of [`PARAMS`].\n\
         pub fn param(&self, i: usize) -> &[f32] {{\n    let p = &PARAMS[i];\n    let src: &[u8] = if p.trainable {{ &self.s.0 }} else {{ self.w }};\n    // SAFETY: offsets and lengths come from the compiler's layout; both buffers are 64-byte aligned.\n    unsafe {{ rt::arena::weights::<f32>(src, p.offset, p.len) }}\n}}\n\
         /// Replace trainable parameter `i` of [`PARAMS`] (e.g. with another run's values).\n\
         pub fn set_param(&mut self, i: usize, values: &[f32]) -> Result<(), rt::train::ParamError> {{\n\
             let p = PARAMS.get(i).ok_or(rt::train::ParamError::NoSuchParam)?;\n\
             if !p.trainable {{ return Err(rt::train::ParamError::Frozen); }}\n\
             if values.len() != p.len {{ return Err(rt::train::ParamError::Length(p.len, values.len())); }}\n\
             // SAFETY: the compiler's layout; the state is 64-byte aligned.\n\
             let dst = unsafe {{ rt::arena::view_mut::<f32>(rt::arena::Region::of(&mut self.s.0), p.offset, p.len) }};\n\
             dst.copy_from_slice(values);\n\
             Ok(())\n\
         }}\n\
         /// Write every parameter (trained and frozen) as a safetensors file into `out`\n\
         /// ([`SAFETENSORS_BYTES`] bytes); returns the length. `burnc MODEL --weights FILE` compiles\n\
         /// the model with them.\n\
         pub fn write_safetensors(&self, out: &mut [u8]) -> Result<usize, rt::train::safetensors::WriteError> {{\n\
             let empty = rt::train::safetensors::Entry {{ name: \"\", dtype: \"F32\", shape: &[], data: &[] }};\n\
             let mut entries = [empty; {np}];\n\
             for (i, (e, p)) in entries.iter_mut().zip(PARAMS).enumerate() {{\n\
                 let v = self.param(i);\n\
                 // SAFETY: f32s viewed as their little-endian bytes.\n\
                 let data = unsafe {{ core::slice::from_raw_parts(v.as_ptr() as *const u8, v.len() * 4) }};\n\
                 *e = rt::train::safetensors::Entry {{ name: p.name, dtype: \"F32\", shape: p.shape, data }};\n\
             }}\n\
             rt::train::safetensors::write(&entries, out)\n\
         }}",
        np = n_params
    )
}
