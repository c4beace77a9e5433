//! The expansion cache and the weights blob file of a `#[model]`.
//!
//! rustc runs a proc macro again on every build of the crate, also when only another file
//! changed; lowering and compiling MiniLM takes most of a second even so. The expansion is a
//! function of the macro's input tokens, the weights file and this burnc's sources, so it is
//! stored under a hash of those ([`Entry::key`]) and read back while they stay the same. The
//! blob file the expansion assembles (`.incbin`) is named by the same key, so a cached
//! expansion and its blob always belong together.
use proc_macro2::TokenStream;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A hash of the sources the expansion depends on (see build.rs): an edited burnc never reads
/// expansions an older one cached.
const BUILD_ID: &str = env!("BURNC_MACROS_BUILD_ID");

/// One model's cache entry: `<dir>/<module>-<key>.rs` (the expansion) and `.bin` (its blob).
pub struct Entry {
    pub key: String,
    expansion: PathBuf,
    pub blob: PathBuf,
}

impl Entry {
    /// The entry for the macro input `raw` (every token the expansion reads, sub-models'
    /// definitions included) with weights from `weights` (identified as cargo identifies
    /// files: path, length and modification time), in `OUT_DIR` for a crate with a build
    /// script, else the temp directory.
    pub fn new(raw: &TokenStream, weights: Option<&Path>, module: &str) -> Entry {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        BUILD_ID.hash(&mut h);
        std::env::var("CARGO_PKG_NAME")
            .unwrap_or_default()
            .hash(&mut h);
        std::env::var("CARGO_PKG_VERSION")
            .unwrap_or_default()
            .hash(&mut h);
        raw.to_string().hash(&mut h);
        if let Some(w) = weights {
            w.hash(&mut h);
            if let Ok(m) = std::fs::metadata(w) {
                m.len().hash(&mut h);
                m.modified().ok().hash(&mut h);
            }
        }
        let key = format!("{:016x}", h.finish());
        let dir = match std::env::var_os("OUT_DIR") {
            Some(d) => PathBuf::from(d),
            None => std::env::temp_dir().join("burnc-macros"),
        };
        Entry {
            expansion: dir.join(format!("{module}-{key}.rs")),
            blob: dir.join(format!("{module}-{key}.bin")),
            key,
        }
    }

    /// The cached expansion, if it and its blob are there (`BURNC_MACRO_CACHE=0` turns the cache
    /// off).
    pub fn load(&self) -> Option<TokenStream> {
        if std::env::var_os("BURNC_MACRO_CACHE").is_some_and(|v| v == "0") {
            return None;
        }
        let text = std::fs::read_to_string(&self.expansion).ok()?;
        let (first, body) = text.split_once('\n')?;
        let bytes: u64 = first.strip_prefix("// blob bytes: ")?.parse().ok()?;
        if std::fs::metadata(&self.blob).ok()?.len() != bytes {
            return None;
        }
        TokenStream::from_str(body).ok()
    }

    /// Write the blob (before the expansion is used: it assembles the file).
    pub fn write_blob(&self, blob: &[u8]) -> std::io::Result<()> {
        if std::fs::metadata(&self.blob).is_ok_and(|m| m.len() == blob.len() as u64) {
            return Ok(());
        }
        write_atomic(&self.blob, blob)
    }

    /// Keep `expansion` for the next build with the same inputs (best effort: a cache that
    /// cannot be written only costs time).
    pub fn store(&self, expansion: &TokenStream, blob_bytes: usize) {
        let _ = write_atomic(
            &self.expansion,
            format!("// blob bytes: {blob_bytes}\n{expansion}").as_bytes(),
        );
    }
}

/// Write then rename, so a concurrent build never reads half a file.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::Entry;
    use quote::quote;

    fn scratch(name: &str) -> std::path::PathBuf {
        let p =
            std::env::temp_dir().join(format!("burnc-macros-cache-{}-{name}", std::process::id()));
        std::fs::write(&p, b"weights").unwrap();
        p
    }

    #[test]
    fn a_stored_expansion_is_read_back_while_its_inputs_stay_the_same() {
        let w = scratch("same");
        let raw = quote! { struct A; impl A { fn forward() {} } };
        let e = Entry::new(&raw, Some(&w), "cache_round_trip");
        e.write_blob(&[1, 2, 3]).unwrap();
        let expansion = quote! { mod a { const X: u8 = 1; } };
        e.store(&expansion, 3);
        let back = Entry::new(&raw, Some(&w), "cache_round_trip")
            .load()
            .expect("a hit");
        assert_eq!(back.to_string(), expansion.to_string());
        // Another input, a lost blob or other weights: a miss.
        assert!(
            Entry::new(&quote! { struct B; }, Some(&w), "cache_round_trip")
                .load()
                .is_none()
        );
        std::fs::remove_file(&e.blob).unwrap();
        assert!(
            Entry::new(&raw, Some(&w), "cache_round_trip")
                .load()
                .is_none(),
            "an expansion without its blob is not used"
        );
        e.write_blob(&[1, 2, 3]).unwrap();
        assert!(Entry::new(&raw, Some(&w), "cache_round_trip")
            .load()
            .is_some());
        std::fs::write(&w, b"other weights").unwrap();
        assert!(Entry::new(&raw, Some(&w), "cache_round_trip")
            .load()
            .is_none());
        let _ = std::fs::remove_file(&e.blob);
        let _ = std::fs::remove_file(&w);
    }
}
