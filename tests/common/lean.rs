//! Disk use of a test run: what a lean run (CI) deletes when a test is done with it. Standalone
//! tests take this file alone (`#[path = "common/lean.rs"] mod lean;`).
use std::path::PathBuf;

/// Whether the run keeps disk use low (`BURNC_TEST_LEAN`, set by `.ci/run`): CI machines have
/// had as little as a few GB free, and a full run's private build directories (wgpu batches
/// with VGG-19's weights inside, the examples' target dirs, the wasm page) add up to ~10 GB.
pub fn lean() -> bool {
    std::env::var_os("BURNC_TEST_LEAN").is_some()
}

/// Deletes its paths when dropped (at the end of a test, passed or not) in a lean run; keeps
/// them otherwise, so that local reruns build incrementally.
pub struct LeanCleanup(pub Vec<PathBuf>);

impl Drop for LeanCleanup {
    fn drop(&mut self) {
        if lean() {
            for p in &self.0 {
                let _ = if p.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
            }
        }
    }
}
