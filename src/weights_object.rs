//! The weights blob as a static library for the linker, instead of bytes rustc embeds with
//! `include_bytes!`: one object file (ELF, Mach-O or COFF, as the target uses) holding the blob
//! in a read-only data section, 64-byte aligned, under one global symbol, wrapped in a `.a`
//! archive. The generated module declares the symbol as an `extern` static and names the
//! library in `#[link]`, so rustc never reads, hashes or holds the blob: its cost in a build
//! is one copy when the linker writes the binary.
use crate::BuildError;
use object::write::{Object, StandardSection, Symbol, SymbolSection};
use object::{Architecture, BinaryFormat, Endianness, FileFlags, SymbolFlags, SymbolKind, SymbolScope};
use std::path::Path;

/// How the object file for `triple` is written; `None` when burnc does not write objects for
/// it (wasm32 and the rarer architectures: those keep `include_bytes!`).
pub fn format_for(triple: &str) -> Option<(BinaryFormat, Architecture, Endianness, FileFlags)> {
    let arch_name = triple.split('-').next().unwrap_or("");
    let (arch, endian) = match arch_name {
        "x86_64" => (Architecture::X86_64, Endianness::Little),
        "i386" | "i586" | "i686" => (Architecture::I386, Endianness::Little),
        "aarch64" | "arm64" | "arm64e" => (Architecture::Aarch64, Endianness::Little),
        a if a.starts_with("arm") || a.starts_with("thumb") => (Architecture::Arm, Endianness::Little),
        "riscv64gc" | "riscv64imac" | "riscv64" => (Architecture::Riscv64, Endianness::Little),
        a if a.starts_with("riscv32") => (Architecture::Riscv32, Endianness::Little),
        _ => return None,
    };
    let format = if triple.contains("-apple-") {
        BinaryFormat::MachO
    } else if triple.contains("-windows") {
        BinaryFormat::Coff
    } else if triple.contains("-linux") || triple.contains("-none") || triple.contains("-android") || triple.contains("bsd") || triple.contains("-unknown-") {
        BinaryFormat::Elf
    } else {
        return None;
    };
    if format == BinaryFormat::MachO && !matches!(arch, Architecture::X86_64 | Architecture::Aarch64) {
        return None;
    }
    // The ABI bits linkers compare between objects (a data-only object must not look like
    // the wrong float ABI to them).
    let e_flags = match arch {
        // EF_ARM_EABI_VER5, and EF_ARM_ABI_FLOAT_HARD for the `hf` targets.
        Architecture::Arm => 0x0500_0000 | if triple.ends_with("hf") || triple.contains("eabihf") { 0x400 } else { 0x200 },
        Architecture::Riscv64 | Architecture::Riscv32 => {
            let ext = arch_name.trim_start_matches("riscv64").trim_start_matches("riscv32");
            let rvc = if ext.contains('c') || ext.contains('g') { 0x1 } else { 0 };
            let float = if ext.contains('g') || ext.contains('d') { 0x4 } else if ext.contains('f') { 0x2 } else { 0 };
            rvc | float
        }
        _ => 0,
    };
    let flags = if format == BinaryFormat::Elf { FileFlags::Elf { os_abi: 0, abi_version: 0, e_flags } } else { FileFlags::None };
    Some((format, arch, endian, flags))
}

pub use burnc_compiler::codegen::weights::symbol;

/// [`write_archive`] of the blob burnc wrote to `bin` beside the module, for `link`'s library
/// and symbol.
pub fn archive_of_blob(dir: &Path, link: &crate::build::LinkedWeights, bin: &Path, triple: &str) -> Result<std::path::PathBuf, BuildError> {
    let lib = link.lib().ok_or_else(|| BuildError::Invalid("internal: weights assembled into the module have no library".into()))?;
    let blob = std::fs::read(bin).map_err(|e| crate::build::file_err(bin, e))?;
    write_archive(dir, lib, &link.symbol, &blob, triple)
}

/// Write `lib<lib>.a` into `dir`: one object with `blob` under `symbol`, for `triple`.
pub fn write_archive(dir: &Path, lib: &str, symbol: &str, blob: &[u8], triple: &str) -> Result<std::path::PathBuf, BuildError> {
    let (format, arch, endian, flags) = format_for(triple).ok_or_else(|| BuildError::Invalid(format!("burnc writes no object files for `{triple}`")))?;
    let mut obj = Object::new(format, arch, endian);
    obj.flags = flags;
    let section = obj.add_subsection(StandardSection::ReadOnlyData, b"burnc_weights");
    let sym = obj.add_symbol(Symbol {
        name: symbol.as_bytes().to_vec(),
        value: 0,
        size: 0,
        kind: SymbolKind::Data,
        scope: SymbolScope::Linkage,
        weak: false,
        section: SymbolSection::Undefined,
        flags: SymbolFlags::None,
    });
    // An empty blob still gets a byte: a symbol needs an address inside its section.
    let data: &[u8] = if blob.is_empty() { &[0] } else { blob };
    obj.add_symbol_data(sym, section, data, 64);
    let bytes = obj.write().map_err(|e| BuildError::Invalid(format!("writing the weights object: {e}")))?;
    let kind = match format {
        BinaryFormat::MachO => ar_archive_writer::ArchiveKind::Darwin,
        BinaryFormat::Coff => ar_archive_writer::ArchiveKind::Coff,
        _ => ar_archive_writer::ArchiveKind::Gnu,
    };
    let member = ar_archive_writer::NewArchiveMember::new(bytes, &ar_archive_writer::DEFAULT_OBJECT_READER, format!("{lib}.o"));
    let mut out = std::io::Cursor::new(Vec::new());
    ar_archive_writer::write_archive_to_stream(&mut out, &[member], kind, false, None).map_err(|e| BuildError::Invalid(format!("writing the weights archive: {e}")))?;
    let path = dir.join(format!("lib{lib}.a"));
    crate::build::write_if_changed(&path, out.get_ref())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

    #[test]
    fn formats_follow_the_target() {
        let f = |t: &str| format_for(t).map(|(f, a, _, fl)| (f, a, fl));
        assert!(matches!(f("x86_64-unknown-linux-gnu"), Some((BinaryFormat::Elf, Architecture::X86_64, _))));
        assert!(matches!(f("aarch64-apple-darwin"), Some((BinaryFormat::MachO, Architecture::Aarch64, _))));
        assert!(matches!(f("x86_64-pc-windows-msvc"), Some((BinaryFormat::Coff, Architecture::X86_64, _))));
        assert!(matches!(f("thumbv7em-none-eabihf"), Some((BinaryFormat::Elf, Architecture::Arm, FileFlags::Elf { e_flags: 0x0500_0400, .. }))));
        assert!(matches!(f("thumbv6m-none-eabi"), Some((BinaryFormat::Elf, Architecture::Arm, FileFlags::Elf { e_flags: 0x0500_0200, .. }))));
        assert!(matches!(f("riscv64gc-unknown-linux-gnu"), Some((_, Architecture::Riscv64, FileFlags::Elf { e_flags: 0x5, .. }))));
        assert!(f("wasm32-unknown-unknown").is_none());
        assert_eq!(symbol("my-app", "resnet50.v2"), "burnc_weights_my_app_resnet50_v2");
    }

    #[test]
    fn the_archive_holds_the_blob_under_its_symbol() {
        let dir = std::env::temp_dir().join(format!("burnc-wobj-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let blob: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let path = write_archive(&dir, "m_weights", "burnc_weights_t_m", &blob, "x86_64-unknown-linux-gnu").unwrap();
        let ar = std::fs::read(&path).unwrap();
        let archive = object::read::archive::ArchiveFile::parse(&*ar).unwrap();
        let member = archive.members().next().unwrap().unwrap();
        let obj = object::File::parse(member.data(&*ar).unwrap()).unwrap();
        let sym = obj.symbols().find(|s| s.name() == Ok("burnc_weights_t_m")).expect("the symbol");
        let section = obj.section_by_index(sym.section_index().unwrap()).unwrap();
        assert_eq!(section.align(), 64);
        assert_eq!(&section.data().unwrap()[sym.address() as usize..][..blob.len()], &blob[..]);
        assert!(archive.symbols().unwrap().is_some(), "an archive index, as linkers want");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
