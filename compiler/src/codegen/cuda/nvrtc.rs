//! CUDA C to PTX when burnc runs, through NVRTC (loaded at run time: burnc links no CUDA
//! library, and compiles modules on machines without a GPU). The PTX is embedded in the module;
//! the user's binary only loads it.
use std::path::PathBuf;
use thiserror::Error;

/// The virtual architecture the PTX is written for: Hopper (sm_90), which the driver compiles
/// to the GPU's own code when the module loads.
pub const ARCH: &str = "compute_90";
/// Hopper's own architecture, for modules that use its `wgmma` instructions: such PTX loads
/// on sm_90 devices (H100, H200) only.
pub const ARCH_SM90A: &str = "compute_90a";

#[derive(Debug, Error)]
pub enum NvrtcError {
    #[error("NVRTC (libnvrtc.so.13) was not found: install it with `python3 -m pip install nvidia-cuda-nvrtc==13.0.*` (scripts/setup_python.sh does), or set BURNC_NVRTC to the library's path")]
    NotFound,
    #[error("NVRTC at {path} could not be loaded: {reason}")]
    Load { path: String, reason: String },
    #[error("NVRTC rejected the generated kernels (a compiler bug, please report it): {0}")]
    Compile(String),
}

/// Where libnvrtc may be: `BURNC_NVRTC`, then the pip package `nvidia-cuda-nvrtc` in any
/// Python site directory python3 reports, then the loader's own search path.
fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("BURNC_NVRTC") {
        out.push(PathBuf::from(p));
    }
    let sites = std::process::Command::new("python3")
        .args(["-c", "import site, sys; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for s in sites.lines().filter(|l| !l.is_empty()) {
        out.push(PathBuf::from(s).join("nvidia/cu13/lib/libnvrtc.so.13"));
        out.push(PathBuf::from(s).join("nvidia/cuda_nvrtc/lib/libnvrtc.so.13"));
    }
    out
}

/// Load libnvrtc once. Loading it by path first makes cudarc's own load by name find it.
fn ensure_loaded() -> Result<(), NvrtcError> {
    static LOADED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let r = LOADED.get_or_init(|| {
        for p in candidates() {
            if !p.is_file() {
                continue;
            }
            // NVRTC opens its builtins library by name when it compiles: load it from the same
            // folder first, so that lookup finds it without LD_LIBRARY_PATH.
            let dir = p.parent().map(|d| d.to_path_buf()).unwrap_or_default();
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with("libnvrtc-builtins.so") && !name.contains(".alt.") {
                        // SAFETY: as below.
                        if let Ok(lib) = unsafe { libloading::os::unix::Library::open(Some(e.path()), libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL) } {
                            std::mem::forget(lib);
                        }
                    }
                }
            }
            // SAFETY: libnvrtc's initializers have no preconditions; the library stays loaded
            // for the life of the process (leaked on purpose).
            match unsafe { libloading::os::unix::Library::open(Some(&p), libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL) } {
                Ok(lib) => {
                    std::mem::forget(lib);
                    return Ok(());
                }
                Err(e) => return Err(format!("{}\u{0}{e}", p.display())),
            }
        }
        // SAFETY: only probes whether the shared library loads by its name.
        if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            Ok(())
        } else {
            Err(String::new())
        }
    });
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.is_empty() => Err(NvrtcError::NotFound),
        Err(e) => {
            let (path, reason) = e.split_once('\u{0}').unwrap_or((e.as_str(), ""));
            Err(NvrtcError::Load { path: path.into(), reason: reason.into() })
        }
    }
}

/// Whether NVRTC can be loaded on this machine.
pub fn available() -> bool {
    ensure_loaded().is_ok()
}

/// Compile CUDA C source to PTX for `arch` ([`ARCH`] or [`ARCH_SM90A`]).
pub fn compile(source: &str, arch: &'static str) -> Result<String, NvrtcError> {
    ensure_loaded()?;
    let opts = cudarc::nvrtc::CompileOptions { arch: Some(arch), options: vec!["--std=c++17".into()], ..Default::default() };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| NvrtcError::Compile(format!("{e:?}")))?;
    let bytes = ptx.as_bytes().ok_or_else(|| NvrtcError::Compile("NVRTC returned no PTX image".into()))?;
    let text = String::from_utf8_lossy(bytes);
    Ok(text.trim_end_matches('\0').to_string())
}
