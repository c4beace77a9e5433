//! Keeps the harness cache under a size limit. Every model run through generated code leaves a
//! crate (with its weights blob) and a binary (with the weights embedded again) in the cache;
//! a test suite over large models filled disks with tens of GB. After each build the least
//! recently used harnesses are deleted until the cache fits `BURNC_CACHE_MAX_MB` (default
//! 4096); the compiled runtime they share is kept, so a deleted harness costs only its own
//! crate's rebuild.
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Name of the file whose mtime records a harness's last use.
pub const STAMP: &str = ".last-used";

/// Harnesses used this recently are never deleted: another process may be building one (its
/// stamp is touched before the build), or running one (it reads its `model.bin`).
const GRACE: Duration = Duration::from_secs(300);

const DEFAULT_MAX_MB: u64 = 4096;

/// The limit in bytes: `BURNC_CACHE_MAX_MB` (0: no limit), or the default when unset or
/// unreadable.
pub fn max_bytes() -> u64 {
    match std::env::var("BURNC_CACHE_MAX_MB").ok().and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(DEFAULT_MAX_MB) {
        0 => u64::MAX,
        mb => mb.saturating_mul(1 << 20),
    }
}

/// Record that harness crate `dir` was just used.
pub fn touch(dir: &Path) {
    // A failed stamp only makes the entry look older (evicted sooner); never an error.
    let _ = std::fs::write(dir.join(STAMP), b"");
}

/// One harness: its crate folder and the files cargo built for it.
struct Entry {
    name: String,
    files: Vec<PathBuf>,
    bytes: u64,
    used: SystemTime,
}

/// Delete least recently used harnesses under `root` until they take at most `limit` bytes.
/// `keep` (the harness just built) and harnesses used within [`GRACE`] stay. Returns the
/// names deleted. Errors reading or deleting are skipped: the cache is best effort.
pub fn enforce(root: &Path, limit: u64, keep: &str) -> Vec<String> {
    let mut entries = entries(root);
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    if total <= limit {
        return Vec::new();
    }
    entries.sort_by_key(|e| e.used);
    let now = SystemTime::now();
    let mut removed = Vec::new();
    for e in entries {
        if total <= limit {
            break;
        }
        // The stamp again, just before deleting: another process may have taken it meanwhile.
        let used = std::fs::metadata(root.join(&e.name).join(STAMP)).and_then(|m| m.modified()).unwrap_or(e.used);
        let recent = now.duration_since(used.max(e.used)).map(|d| d < GRACE).unwrap_or(true);
        if e.name == keep || recent {
            continue;
        }
        for f in &e.files {
            let _ = if f.is_dir() { std::fs::remove_dir_all(f) } else { std::fs::remove_file(f) };
        }
        total = total.saturating_sub(e.bytes);
        removed.push(e.name);
    }
    removed
}

fn entries(root: &Path) -> Vec<Entry> {
    let Ok(rd) = std::fs::read_dir(root) else { return Vec::new() };
    let mut out = Vec::new();
    for d in rd.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        let target = if name.starts_with("burnc-harness-") {
            "target"
        } else if name.starts_with("burnc-bench-") {
            "target-bench"
        } else {
            continue;
        };
        let dir = d.path();
        let used = std::fs::metadata(dir.join(STAMP)).or_else(|_| d.metadata()).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
        let release = root.join(target).join("release");
        let under = name.replace('-', "_");
        let mut built = matching(&release.join("deps"), &format!("{under}-"));
        built.extend(matching(&release.join(".fingerprint"), &format!("{name}-")));
        let bytes = size(&dir) + built.iter().map(|f| size(f)).sum::<u64>();
        // `release/NAME` is a hard link to `deps/NAME-HASH`: deleted, not counted again.
        let mut files = vec![dir, release.join(&name), release.join(format!("{name}.d"))];
        files.extend(built);
        out.push(Entry { name, files, bytes, used });
    }
    out
}

fn matching(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(prefix)).map(|e| e.path()).collect()
}

/// Bytes under `p` (a file or a folder, not following links).
fn size(p: &Path) -> u64 {
    let Ok(m) = std::fs::symlink_metadata(p) else { return 0 };
    if !m.is_dir() {
        return m.len();
    }
    std::fs::read_dir(p).map(|rd| rd.flatten().map(|e| size(&e.path())).sum()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_harness(root: &Path, name: &str, bytes: usize, age_s: u64) {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/model.bin"), vec![0u8; bytes]).unwrap();
        let release = root.join("target/release");
        std::fs::create_dir_all(release.join("deps")).unwrap();
        std::fs::create_dir_all(release.join(format!(".fingerprint/{name}-abc"))).unwrap();
        let bin = release.join(format!("deps/{}-abc", name.replace('-', "_")));
        std::fs::write(&bin, vec![0u8; bytes]).unwrap();
        std::fs::hard_link(&bin, release.join(name)).unwrap();
        let f = std::fs::File::create(dir.join(STAMP)).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(age_s)).unwrap();
    }

    #[test]
    fn evicts_least_recently_used_until_under_the_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // Three harnesses of 2 × 1000 bytes each (crate blob + binary).
        fake_harness(root, "burnc-harness-old", 1000, 3000);
        fake_harness(root, "burnc-harness-mid", 1000, 2000);
        fake_harness(root, "burnc-harness-new", 1000, 1000);
        // The shared runtime's artifacts are not entries and stay.
        std::fs::write(root.join("target/release/deps/libburnc_runtime-x.rlib"), b"rt").unwrap();
        let removed = enforce(root, 4500, "burnc-harness-new");
        assert_eq!(removed, vec!["burnc-harness-old".to_string()]);
        assert!(!root.join("burnc-harness-old").exists());
        assert!(!root.join("target/release/burnc-harness-old").exists());
        assert!(!root.join("target/release/deps/burnc_harness_old-abc").exists());
        assert!(!root.join("target/release/.fingerprint/burnc-harness-old-abc").exists());
        assert!(root.join("burnc-harness-mid").exists() && root.join("target/release/burnc-harness-mid").exists());
        assert!(root.join("target/release/deps/libburnc_runtime-x.rlib").exists());
        // Under the limit: nothing more goes.
        assert!(enforce(root, 4500, "burnc-harness-new").is_empty());
    }

    #[test]
    fn keeps_the_current_and_recently_used_harnesses() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_harness(root, "burnc-harness-a", 1000, 3000);
        fake_harness(root, "burnc-harness-b", 1000, 10);
        // Limit 0: everything would go, but `a` is the one just built and `b` was used 10 s ago.
        assert!(enforce(root, 0, "burnc-harness-a").is_empty());
        assert_eq!(enforce(root, 0, "burnc-harness-b"), vec!["burnc-harness-a".to_string()]);
    }
}
