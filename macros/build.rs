//! `BURNC_MACROS_BUILD_ID`: a hash of the sources a `#[model]` expansion depends on, the key
//! of the expansion cache (src/cache.rs) besides the macro's input. In the workspace those are
//! this crate's, the compiler's and the frontends' sources; a published crate is immutable, so
//! there its version is enough.
use std::hash::{Hash, Hasher};
use std::path::Path;

fn main() {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::env::var("CARGO_PKG_VERSION")
        .unwrap_or_default()
        .hash(&mut h);
    println!("cargo:rerun-if-changed=build.rs");
    for dir in ["src", "../compiler/src", "../frontends/src"] {
        if Path::new(dir).is_dir() {
            println!("cargo:rerun-if-changed={dir}");
            hash_dir(Path::new(dir), &mut h);
        }
    }
    println!("cargo:rustc-env=BURNC_MACROS_BUILD_ID={:016x}", h.finish());
}

/// Every file under `dir`, in name order: its path and bytes.
fn hash_dir(dir: &Path, h: &mut impl Hasher) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            hash_dir(&p, h);
        } else if let Ok(bytes) = std::fs::read(&p) {
            p.hash(h);
            bytes.hash(h);
        }
    }
}
