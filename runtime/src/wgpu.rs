//! What a module compiled with `--target wgpu` runs on (feature `wgpu`, std only): WGSL
//! kernels through wgpu, on Vulkan, Metal or DX12, and on wasm32 through the browser's WebGPU.
//! Starting a session and reading a buffer wait for the device: natively they block
//! ([`Session::new`], [`Session::read`]); on wasm32, where a page must not block, only their
//! async forms exist ([`Session::new_async`], [`Session::read_async`]).
//!
//! The compiler decides everything, as for the CUDA target: the kernels (one WGSL module,
//! validated with naga when burnc ran, one entry point per kernel), the dispatches of one
//! forward pass, and the byte offsets of every tensor in two buffers, the arena (activations
//! and inputs, planned like the CPU arena) and the weights. Every kernel binds the same two
//! buffers, so the bind group is built once; a forward pass is one command encoder with one
//! compute pass. The compiler also knows the largest buffer, workgroup and dispatch the module
//! needs: a [`Session`] checks them against the adapter's limits before creating anything, so
//! a device too small for the model is a [`WgpuError`], never a panic or a validation abort.
extern crate alloc;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use std::sync::Mutex;

/// Why a session could not start or run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WgpuError {
    /// No adapter (GPU or software rasterizer) is available through Vulkan, Metal or DX12.
    NoAdapter { reason: String },
    /// A weight named in a write is not one the module stores as f32 (or does not exist).
    NoSuchWeight { name: String },
    /// The adapter's limit `limit` is below what the module needs.
    Limit { limit: &'static str, needed: u64, available: u64 },
    /// A host buffer does not have the size the module was compiled for.
    Size { what: &'static str, expected: usize, got: usize },
    /// wgpu refused a call (a validation error, a lost device, a failed map).
    Device { call: &'static str, message: String },
}

impl fmt::Display for WgpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WgpuError::NoAdapter { reason } => write!(f, "no wgpu adapter (Vulkan, Metal, DX12 or WebGPU): {reason}"),
            WgpuError::NoSuchWeight { name } => write!(f, "the module stores no f32 weight `{name}`"),
            WgpuError::Limit { limit, needed, available } => write!(f, "the model needs {limit} = {needed}, the adapter allows {available}"),
            WgpuError::Size { what, expected, got } => write!(f, "{what}: {got} bytes where the module was compiled for {expected}"),
            WgpuError::Device { call, message } => write!(f, "wgpu {call} failed: {message}"),
        }
    }
}

impl std::error::Error for WgpuError {}

/// One dispatch: entry point `kernel` of the module over `workgroups` (x, y, z).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispatch {
    pub kernel: u32,
    pub workgroups: [u32; 3],
}

/// What the compiler fixed about a module: its WGSL, entry points, dispatches, buffer sizes
/// and the most each kernel asks of the device.
#[derive(Debug, Clone, Copy)]
pub struct ModuleSpec {
    pub wgsl: &'static str,
    pub kernels: &'static [&'static str],
    pub dispatches: &'static [Dispatch],
    /// Bytes of the arena (activations, then the inputs).
    pub arena_bytes: usize,
    pub weights_bytes: usize,
    /// The weights are bound in chunks of this many bytes (the last may be shorter), bindings
    /// 1, 2, …: no adapter need offer a binding as large as all of them.
    pub weight_chunk: usize,
    /// The largest workgroup memory of any kernel, in bytes.
    pub workgroup_bytes: u32,
    /// The most invocations in one workgroup of any kernel.
    pub invocations: u32,
}

/// A module on one adapter, its weights uploaded, its pipelines built, ready to run.
pub struct Session {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipelines: Vec<wgpu::ComputePipeline>,
    bind_group: wgpu::BindGroup,
    arena: wgpu::Buffer,
    /// The weight chunks, bindings 1, 2, … (kept for [`Session::write_weights`]).
    weights: Vec<wgpu::Buffer>,
    spec: ModuleSpec,
    adapter: String,
    errors: Arc<Mutex<Vec<String>>>,
}

/// Storage bindings and copies move whole 4-byte words.
fn words(bytes: usize) -> u64 {
    (bytes.max(4) as u64).div_ceil(4) * 4
}

fn check(limit: &'static str, needed: u64, available: u64) -> Result<(), WgpuError> {
    if needed > available {
        return Err(WgpuError::Limit { limit, needed, available });
    }
    Ok(())
}

/// How many weight bindings `spec` has.
fn chunks(spec: &ModuleSpec) -> usize {
    spec.weights_bytes.div_ceil(spec.weight_chunk.max(4)).max(1)
}

/// The limits `spec` needs that the adapter's `have` may not offer.
fn check_limits(spec: &ModuleSpec, have: &wgpu::Limits) -> Result<(), WgpuError> {
    let largest = words(spec.arena_bytes).max(words(spec.weights_bytes.min(spec.weight_chunk)));
    check("max_storage_buffers_per_shader_stage", chunks(spec) as u64 + 1, have.max_storage_buffers_per_shader_stage.into())?;
    check("max_storage_buffer_binding_size", largest, have.max_storage_buffer_binding_size)?;
    check("max_buffer_size", largest, have.max_buffer_size)?;
    check("max_compute_workgroup_storage_size", spec.workgroup_bytes.into(), have.max_compute_workgroup_storage_size.into())?;
    check("max_compute_invocations_per_workgroup", spec.invocations.into(), have.max_compute_invocations_per_workgroup.into())?;
    check("max_compute_workgroup_size_x", spec.invocations.into(), have.max_compute_workgroup_size_x.into())?;
    let most = spec.dispatches.iter().flat_map(|d| d.workgroups).max().unwrap_or(0);
    check("max_compute_workgroups_per_dimension", most.into(), have.max_compute_workgroups_per_dimension.into())?;
    Ok(())
}

impl Session {
    /// Start `spec`'s module on the first adapter wgpu offers (a discrete GPU first) and
    /// upload `weights` (`spec.weights_bytes`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(spec: ModuleSpec, weights: &[u8]) -> Result<Session, WgpuError> {
        pollster::block_on(Self::new_async(spec, weights))
    }

    /// [`Session::new`] as a future: the only form on wasm32, where the browser's WebGPU hands
    /// out adapters and devices asynchronously.
    pub async fn new_async(spec: ModuleSpec, weights: &[u8]) -> Result<Session, WgpuError> {
        if weights.len() != spec.weights_bytes {
            return Err(WgpuError::Size { what: "weights", expected: spec.weights_bytes, got: weights.len() });
        }
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor { backends: wgpu::Backends::PRIMARY, ..wgpu::InstanceDescriptor::new_without_display_handle() });
        let options = wgpu::RequestAdapterOptions { power_preference: wgpu::PowerPreference::HighPerformance, ..Default::default() };
        let adapter = instance.request_adapter(&options).await.map_err(|e| WgpuError::NoAdapter { reason: e.to_string() })?;
        let have = adapter.limits();
        check_limits(&spec, &have)?;
        let info = adapter.get_info();
        // Ask for exactly what the adapter has: the checks above said it is enough.
        let desc = wgpu::DeviceDescriptor { label: Some("burnc"), required_limits: have, ..Default::default() };
        let (device, queue) = adapter.request_device(&desc).await.map_err(|e| WgpuError::Device { call: "request_device", message: e.to_string() })?;
        // Errors outside a scope are kept for the next call to report, not a panic.
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let storage = |binding, read_only| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Storage { read_only }, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        };
        let n = chunks(&spec);
        let entries: Vec<_> = core::iter::once(storage(0, false)).chain((1..=n as u32).map(|b| storage(b, true))).collect();
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some("arena, weights"), entries: &entries });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor { label: None, bind_group_layouts: &[Some(&layout)], immediate_size: 0 });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some("model.wgsl"), source: wgpu::ShaderSource::Wgsl(spec.wgsl.into()) });
        let pipelines = spec
            .kernels
            .iter()
            .map(|k| {
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(k),
                    layout: Some(&pipeline_layout),
                    module: &module,
                    entry_point: Some(k),
                    compilation_options: Default::default(),
                    cache: None,
                })
            })
            .collect();
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
        let arena = device.create_buffer(&wgpu::BufferDescriptor { label: Some("arena"), size: words(spec.arena_bytes), usage, mapped_at_creation: false });
        let step = spec.weight_chunk.max(4);
        let wbufs: Vec<wgpu::Buffer> = (0..n)
            .map(|c| {
                let part = weights.get(c * step..((c + 1) * step).min(weights.len())).unwrap_or(&[]);
                let b = device.create_buffer(&wgpu::BufferDescriptor { label: Some("weights"), size: words(part.len()), usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST, mapped_at_creation: false });
                if !part.is_empty() {
                    queue.write_buffer(&b, 0, &padded(part));
                }
                b
            })
            .collect();
        let entries: Vec<_> = core::iter::once(wgpu::BindGroupEntry { binding: 0, resource: arena.as_entire_binding() })
            .chain(wbufs.iter().enumerate().map(|(c, b)| wgpu::BindGroupEntry { binding: c as u32 + 1, resource: b.as_entire_binding() }))
            .collect();
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some("arena, weights"), layout: &layout, entries: &entries });
        if let Some(e) = scope.pop().await {
            return Err(WgpuError::Device { call: "creating the pipelines", message: e.to_string() });
        }
        // A browser names little (WebGPU hides the device): only the parts it gives.
        let detail: Vec<String> = [alloc::format!("{:?}", info.backend), info.driver.clone()].into_iter().filter(|s| !s.is_empty()).collect();
        let adapter = alloc::format!("{} ({})", if info.name.is_empty() { "unnamed adapter" } else { &info.name }, detail.join(", "));
        Ok(Session { device, queue, pipelines, bind_group, arena, weights: wbufs, spec, adapter, errors })
    }

    /// The adapter's name, backend and driver.
    pub fn adapter(&self) -> &str {
        &self.adapter
    }

    fn take_errors(&self, call: &'static str) -> Result<(), WgpuError> {
        let mut v = self.errors.lock().map_err(|_| WgpuError::Device { call, message: "error log poisoned".into() })?;
        let first = v.drain(..).next();
        match first {
            Some(message) => Err(WgpuError::Device { call, message }),
            None => Ok(()),
        }
    }

    fn range(&self, what: &'static str, offset: usize, len: usize) -> Result<(), WgpuError> {
        match offset.checked_add(len) {
            Some(e) if e <= self.spec.arena_bytes => Ok(()),
            _ => Err(WgpuError::Size { what, expected: self.spec.arena_bytes, got: offset.saturating_add(len) }),
        }
    }

    /// Copy `bytes` into the arena at `offset` (an input's slot, 4-byte aligned; the slot is
    /// padded to whole words, so the last word's spare bytes may be written with zeros).
    pub fn write(&mut self, offset: usize, bytes: &[u8]) -> Result<(), WgpuError> {
        self.range("input slot", offset, bytes.len())?;
        if !offset.is_multiple_of(4) {
            return Err(WgpuError::Size { what: "input slot alignment", expected: 4, got: offset % 4 });
        }
        if !bytes.is_empty() {
            self.queue.write_buffer(&self.arena, offset as u64, &padded(bytes));
        }
        self.take_errors("write_buffer")
    }

    /// Replace weights bytes at `offset` of the blob (a weight's place, as the module's
    /// `WEIGHTS_TABLE` gives it; 4-byte aligned, within one chunk): later passes use them.
    pub fn write_weights(&mut self, offset: usize, bytes: &[u8]) -> Result<(), WgpuError> {
        let chunk = self.spec.weight_chunk.max(4);
        let fits = offset.checked_add(bytes.len()).is_some_and(|e| e <= self.spec.weights_bytes && (bytes.is_empty() || offset / chunk == (e - 1) / chunk));
        if !fits || !offset.is_multiple_of(4) {
            return Err(WgpuError::Size { what: "weights range", expected: self.spec.weights_bytes, got: offset.saturating_add(bytes.len()) });
        }
        let buffer = self.weights.get(offset / chunk).ok_or(WgpuError::Size { what: "weights chunk", expected: self.weights.len(), got: offset / chunk })?;
        if !bytes.is_empty() {
            self.queue.write_buffer(buffer, (offset % chunk) as u64, &padded(bytes));
        }
        self.take_errors("write_buffer")
    }

    /// Copy the arena's bytes at `offset` into `out` (an output's slot); waits for the device.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), WgpuError> {
        pollster::block_on(self.read_async(offset, out))
    }

    /// [`Session::read`] as a future (the only form on wasm32): resolves when the device has
    /// finished the work queued before it and the bytes are copied.
    pub async fn read_async(&self, offset: usize, out: &mut [u8]) -> Result<(), WgpuError> {
        self.range("output slot", offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        // Copies move whole words: widen the range to them.
        let start = offset / 4 * 4;
        let end = words(offset + out.len()).min(words(self.spec.arena_bytes)) as usize;
        let size = (end - start) as u64;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor { label: Some("read"), size, usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, mapped_at_creation: false });
        let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("read") });
        enc.copy_buffer_to_buffer(&self.arena, start as u64, &staging, 0, size);
        self.queue.submit([enc.finish()]);
        let slice = staging.slice(..);
        let (tx, rx) = futures_channel::oneshot::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        // Natively the callback runs inside `poll`; in a browser `poll` does nothing and the
        // callback comes from the event loop while this future waits.
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| WgpuError::Device { call: "poll", message: e.to_string() })?;
        match rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(WgpuError::Device { call: "map_async", message: e.to_string() }),
            Err(e) => return Err(WgpuError::Device { call: "map_async", message: e.to_string() }),
        }
        {
            let view = slice.get_mapped_range().map_err(|e| WgpuError::Device { call: "get_mapped_range", message: e.to_string() })?;
            let skip = offset - start;
            out.copy_from_slice(&view[skip..skip + out.len()]);
        }
        staging.unmap();
        self.take_errors("read")
    }

    /// Queue one forward pass: one command encoder, one compute pass, every dispatch in
    /// order (wgpu orders a dispatch's reads after the previous ones' writes).
    pub fn run(&mut self) -> Result<(), WgpuError> {
        let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("forward") });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("forward"), timestamp_writes: None });
            pass.set_bind_group(0, &self.bind_group, &[]);
            for d in self.spec.dispatches {
                let p = self.pipelines.get(d.kernel as usize).ok_or(WgpuError::Size { what: "kernel index", expected: self.pipelines.len(), got: d.kernel as usize })?;
                pass.set_pipeline(p);
                let [x, y, z] = d.workgroups;
                pass.dispatch_workgroups(x, y, z);
            }
        }
        self.queue.submit([enc.finish()]);
        self.take_errors("forward pass")
    }

    /// Wait until everything queued has finished.
    pub fn synchronize(&self) -> Result<(), WgpuError> {
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| WgpuError::Device { call: "poll", message: e.to_string() })?;
        self.take_errors("poll")
    }

    /// Milliseconds of each of `n` forward passes, host clock from submit to finished.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn time_runs(&mut self, n: usize) -> Result<Vec<f32>, WgpuError> {
        let mut t = Vec::with_capacity(n);
        for _ in 0..n {
            let start = std::time::Instant::now();
            self.run()?;
            self.synchronize()?;
            t.push(start.elapsed().as_secs_f32() * 1e3);
        }
        Ok(t)
    }
}

/// `bytes` padded with zeros to whole words (what `write_buffer` moves).
fn padded(bytes: &[u8]) -> alloc::borrow::Cow<'_, [u8]> {
    if bytes.len().is_multiple_of(4) {
        return alloc::borrow::Cow::Borrowed(bytes);
    }
    let mut v = bytes.to_vec();
    v.resize(words(bytes.len()) as usize, 0);
    alloc::borrow::Cow::Owned(v)
}

pub use crate::plain::{bytes_of, bytes_of_mut, Plain};

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(wgsl: &'static str, kernels: &'static [&'static str], dispatches: &'static [Dispatch]) -> ModuleSpec {
        ModuleSpec { wgsl, kernels, dispatches, arena_bytes: 64, weights_bytes: 8, weight_chunk: 128 << 20, workgroup_bytes: 0, invocations: 64 }
    }

    #[test]
    fn limits_are_checked_before_anything_is_created() {
        let mut s = spec("", &[], &[]);
        let have = wgpu::Limits::downlevel_defaults();
        assert!(check_limits(&s, &have).is_ok());
        s.workgroup_bytes = have.max_compute_workgroup_storage_size + 4;
        assert!(matches!(check_limits(&s, &have), Err(WgpuError::Limit { limit: "max_compute_workgroup_storage_size", .. })));
        s.workgroup_bytes = 0;
        s.arena_bytes = 1 << 40;
        assert!(matches!(check_limits(&s, &have), Err(WgpuError::Limit { limit: "max_storage_buffer_binding_size", .. })));
        static BIG: [Dispatch; 1] = [Dispatch { kernel: 0, workgroups: [70_000, 1, 1] }];
        let s = spec("", &[], &BIG);
        assert!(matches!(check_limits(&s, &have), Err(WgpuError::Limit { limit: "max_compute_workgroups_per_dimension", .. })));
    }

    #[test]
    fn a_kernel_runs_or_the_machine_has_no_adapter() {
        const WGSL: &str = "@group(0) @binding(0) var<storage, read_write> A: array<f32>;\n\
            @group(0) @binding(1) var<storage, read> W0: array<f32>;\n\
            @group(0) @binding(2) var<storage, read> W1: array<f32>;\n\
            @compute @workgroup_size(64) fn k0(@builtin(global_invocation_id) g: vec3<u32>) {\n\
              if (g.x < 4u) { A[4u + g.x] = A[g.x] * select(W1[0], W0[0], g.x % 2u == 0u); }\n}\n";
        static D: [Dispatch; 1] = [Dispatch { kernel: 0, workgroups: [1, 1, 1] }];
        let weights = bytes_of(&[2.0f32, -1.0]).to_vec();
        assert_eq!(Session::new(spec(WGSL, &["k0"], &D), &[0; 4]).err(), Some(WgpuError::Size { what: "weights", expected: 8, got: 4 }));
        // Two weight bindings of one f32 each.
        let mut s = match Session::new(ModuleSpec { weight_chunk: 4, ..spec(WGSL, &["k0"], &D) }, &weights) {
            Ok(s) => s,
            // A machine without Vulkan/Metal/DX12; CI installs lavapipe and sets
            // BURNC_REQUIRE_WGPU, so there a missing adapter fails.
            Err(e @ WgpuError::NoAdapter { .. }) if std::env::var_os("BURNC_REQUIRE_WGPU").is_none() => {
                std::eprintln!("skipped: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        std::eprintln!("adapter: {}", s.adapter());
        s.write(0, bytes_of(&[1.0f32, 2.0, 3.0, 4.0])).unwrap();
        s.run().unwrap();
        let mut out = [0f32; 4];
        s.read(16, bytes_of_mut(&mut out)).unwrap();
        assert_eq!(out, [2.0, -2.0, 6.0, -4.0]);
        assert!(matches!(s.read(60, bytes_of_mut(&mut out)), Err(WgpuError::Size { .. })));
        // New weights for later passes; a range across two chunks, past the end or unaligned
        // is refused.
        s.write_weights(4, bytes_of(&[10.0f32])).unwrap();
        s.run().unwrap();
        s.read(16, bytes_of_mut(&mut out)).unwrap();
        assert_eq!(out, [2.0, 20.0, 6.0, 40.0]);
        for (at, len) in [(0, 8), (8, 4), (2, 4)] {
            assert!(matches!(s.write_weights(at, &[0; 8][..len]), Err(WgpuError::Size { .. })), "{at}+{len}");
        }
    }
}
