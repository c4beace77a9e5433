//! What a module compiled with `--target cuda` runs on (feature `cuda`, std only).
//!
//! The compiler decides everything: each kernel's source (compiled to PTX when burnc ran and
//! embedded in the module), the launches of one forward pass, and the byte offsets of every
//! tensor in two device buffers, the arena (activations and inputs, planned like the CPU arena)
//! and the weights. Kernels take those two base pointers and nothing else: their offsets and
//! shapes are literals. A [`Session`] uploads the weights once, captures the launches as one
//! CUDA graph on the first run and replays it after.
//!
//! The CUDA driver is loaded when a session starts (`cudarc`'s dynamic loading), so the binary
//! links no CUDA library and builds on machines without CUDA; a machine without a driver or a
//! GPU gets a [`CudaError`], never a panic.
extern crate alloc;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

/// Why a session could not start or run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaError {
    /// `libcuda` could not be loaded: no NVIDIA driver on this machine.
    NoDriver,
    /// The driver is there but reports no device (or not the one asked for).
    NoDevice { ordinal: usize, count: usize },
    /// The device has too little free memory for the arena and the weights.
    OutOfMemory { needed: usize, free: usize },
    /// A host buffer does not have the size the module was compiled for.
    Size { what: &'static str, expected: usize, got: usize },
    /// A call into the driver failed.
    Driver { call: &'static str, message: String },
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::NoDriver => write!(f, "no CUDA driver: libcuda could not be loaded (is an NVIDIA driver installed?)"),
            CudaError::NoDevice { ordinal, count } => write!(f, "no CUDA device {ordinal}: the driver reports {count}"),
            CudaError::OutOfMemory { needed, free } => write!(f, "the model needs {needed} bytes of GPU memory, {free} are free"),
            CudaError::Size { what, expected, got } => write!(f, "{what}: {got} bytes where the module was compiled for {expected}"),
            CudaError::Driver { call, message } => write!(f, "CUDA {call} failed: {message}"),
        }
    }
}

impl std::error::Error for CudaError {}

fn driver(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> CudaError {
    move |e| CudaError::Driver { call, message: alloc::format!("{e:?}") }
}

/// One kernel launch: `kernel` indexes the module's kernel names; a grid of `grid` blocks of
/// `block` threads (x, y, z) with `shared` bytes of dynamic shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    pub kernel: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
}

/// What the compiler fixed about a module: its PTX, kernel names, launches and buffer sizes.
#[derive(Debug, Clone, Copy)]
pub struct ModuleSpec {
    pub ptx: &'static str,
    pub kernels: &'static [&'static str],
    pub launches: &'static [Launch],
    /// Bytes of the device arena (activations, then the inputs).
    pub arena_bytes: usize,
    pub weights_bytes: usize,
}

/// A module loaded on one device, its weights uploaded, ready to run.
pub struct Session {
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    functions: Vec<CudaFunction>,
    spec: ModuleSpec,
    arena: CudaSlice<u8>,
    weights: CudaSlice<u8>,
    graph: Option<CudaGraph>,
}

impl Session {
    /// Load `spec`'s module on device `ordinal` and upload `weights` (`spec.weights_bytes`).
    pub fn new(spec: ModuleSpec, ordinal: usize, weights: &[u8]) -> Result<Session, CudaError> {
        if weights.len() != spec.weights_bytes {
            return Err(CudaError::Size { what: "weights", expected: spec.weights_bytes, got: weights.len() });
        }
        // SAFETY: only probes whether the shared library loads.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NoDriver);
        }
        let count = CudaContext::device_count().map_err(driver("cuDeviceGetCount"))?.max(0) as usize;
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("cuCtxCreate"))?;
        // One stream and no other: the ordering of its launches is all the synchronization
        // there is, so cudarc's per-buffer events (which a graph capture cannot hold) are off.
        // SAFETY: no buffer of this context is used from another stream.
        unsafe { ctx.disable_event_tracking() };
        let (free, _) = ctx.mem_get_info().map_err(driver("cuMemGetInfo"))?;
        let needed = spec.arena_bytes + spec.weights_bytes;
        if needed > free {
            return Err(CudaError::OutOfMemory { needed, free });
        }
        // A stream of its own: the legacy default stream cannot be captured into a graph.
        let stream = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(spec.ptx)).map_err(driver("cuModuleLoadData"))?;
        let functions = spec.kernels.iter().map(|k| module.load_function(k)).collect::<Result<Vec<_>, _>>().map_err(driver("cuModuleGetFunction"))?;
        // Past 48 KiB a kernel must opt in to its dynamic shared memory.
        for l in spec.launches.iter().filter(|l| l.shared > 48 * 1024) {
            let f = functions.get(l.kernel as usize).ok_or(CudaError::Size { what: "kernel index", expected: functions.len(), got: l.kernel as usize })?;
            f.set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, l.shared as i32).map_err(driver("cuFuncSetAttribute"))?;
        }
        let arena = stream.alloc_zeros::<u8>(spec.arena_bytes.max(1)).map_err(driver("cuMemAlloc"))?;
        let mut wbuf = stream.alloc_zeros::<u8>(spec.weights_bytes.max(1)).map_err(driver("cuMemAlloc"))?;
        if !weights.is_empty() {
            stream.memcpy_htod(weights, &mut wbuf.slice_mut(..weights.len())).map_err(driver("cuMemcpyHtoD"))?;
        }
        Ok(Session { stream, _module: module, functions, spec, arena, weights: wbuf, graph: None })
    }

    /// Copy `bytes` into the arena at `offset` (an input's slot).
    pub fn write(&mut self, offset: usize, bytes: &[u8]) -> Result<(), CudaError> {
        let end = offset.checked_add(bytes.len()).filter(|&e| e <= self.spec.arena_bytes);
        let end = end.ok_or(CudaError::Size { what: "input slot", expected: self.spec.arena_bytes, got: offset.saturating_add(bytes.len()) })?;
        self.stream.memcpy_htod(bytes, &mut self.arena.slice_mut(offset..end)).map_err(driver("cuMemcpyHtoD"))
    }

    /// Copy the arena's bytes at `offset` into `out` (an output's slot); waits for the device.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), CudaError> {
        let end = offset.checked_add(out.len()).filter(|&e| e <= self.spec.arena_bytes);
        let end = end.ok_or(CudaError::Size { what: "output slot", expected: self.spec.arena_bytes, got: offset.saturating_add(out.len()) })?;
        self.stream.memcpy_dtoh(&self.arena.slice(offset..end), out).map_err(driver("cuMemcpyDtoH"))
    }

    /// The device arena, for callers whose data stays on the GPU: inputs and outputs sit at
    /// the offsets the module names.
    pub fn arena_mut(&mut self) -> &mut CudaSlice<u8> {
        &mut self.arena
    }

    /// The stream every launch goes to (order device-side copies on it).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Launch every kernel of one forward pass, in order, on the stream (no graph).
    pub fn launch_all(&self) -> Result<(), CudaError> {
        let (a, _) = self.arena.device_ptr(&self.stream);
        let (w, _) = self.weights.device_ptr(&self.stream);
        for l in self.spec.launches {
            let f = self.functions.get(l.kernel as usize).ok_or(CudaError::Size { what: "kernel index", expected: self.functions.len(), got: l.kernel as usize })?;
            let cfg = LaunchConfig { grid_dim: (l.grid[0], l.grid[1], l.grid[2]), block_dim: (l.block[0], l.block[1], l.block[2]), shared_mem_bytes: l.shared };
            let mut b = self.stream.launch_builder(f);
            b.arg(&a).arg(&w);
            // SAFETY: each kernel takes exactly (arena, weights) base pointers and touches only
            // the byte ranges the compiler planned inside them, which both buffers cover.
            unsafe { b.launch(cfg) }.map_err(driver("cuLaunchKernel"))?;
        }
        Ok(())
    }

    /// Run one forward pass: the first call captures the launches as a CUDA graph, every call
    /// replays it. Asynchronous: [`Session::read`] or [`Session::synchronize`] waits.
    pub fn run(&mut self) -> Result<(), CudaError> {
        if self.graph.is_none() {
            self.stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(driver("cuStreamBeginCapture"))?;
            let launched = self.launch_all();
            let graph = self.stream.end_capture(sys::CUgraphInstantiate_flags(0)).map_err(driver("cuStreamEndCapture"));
            launched?;
            self.graph = graph?;
        }
        match &self.graph {
            Some(g) => g.launch().map_err(driver("cuGraphLaunch")),
            // An empty capture (a module with no launches) gives no graph: nothing to run.
            None => Ok(()),
        }
    }

    /// Milliseconds of each of `n` back-to-back replays of the forward pass, from CUDA events
    /// recorded on the stream around each one (after one untimed run that also captures the
    /// graph): device time, as torch.cuda.Event measures it.
    pub fn time_replays(&mut self, n: usize) -> Result<Vec<f32>, CudaError> {
        self.run()?;
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let ctx = self.stream.context().clone();
        let events = (0..=n).map(|_| ctx.new_event(timing)).collect::<Result<Vec<_>, _>>().map_err(driver("cuEventCreate"))?;
        events[0].record(&self.stream).map_err(driver("cuEventRecord"))?;
        for e in &events[1..] {
            self.run()?;
            e.record(&self.stream).map_err(driver("cuEventRecord"))?;
        }
        self.synchronize()?;
        events.windows(2).map(|w| w[0].elapsed_ms(&w[1]).map_err(driver("cuEventElapsedTime"))).collect()
    }

    /// Wait until everything queued on the stream has finished.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize().map_err(driver("cuStreamSynchronize"))
    }
}

pub use crate::plain::{bytes_of, bytes_of_mut, Plain};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_driver_is_an_error_not_a_panic() {
        // On a machine with a GPU this starts a session on an empty module instead.
        let spec = ModuleSpec { ptx: "", kernels: &[], launches: &[], arena_bytes: 64, weights_bytes: 0 };
        match Session::new(spec, 0, &[]) {
            Err(CudaError::NoDriver | CudaError::NoDevice { .. } | CudaError::Driver { .. }) | Ok(_) => {}
            Err(e) => panic!("unexpected error {e}"),
        }
        let wrong = ModuleSpec { weights_bytes: 8, ..spec };
        assert_eq!(Session::new(wrong, 0, &[0; 4]).err(), Some(CudaError::Size { what: "weights", expected: 8, got: 4 }));
    }
}
