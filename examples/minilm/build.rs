//! The model is compiled by `#[model]` from model/model.safetensors, which setup.sh fetches.
//! Without it (a fresh checkout building the whole workspace) the crate still builds, as a
//! binary that says to run setup.sh, instead of failing the workspace build.
fn main() {
    println!("cargo:rustc-check-cfg=cfg(minilm_no_model)");
    println!("cargo:rerun-if-changed=model/model.safetensors");
    if !std::path::Path::new("model/model.safetensors").exists() {
        println!("cargo:rustc-cfg=minilm_no_model");
    }
}
