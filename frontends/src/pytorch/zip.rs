//! A reader (and a small writer, for tests and tools) of the zip archives `torch.save` writes.
//!
//! torch writes every record *stored* (method 0), so a reader of the central directory is all
//! it takes: no inflate, no dependency. Zip64 records are followed (archives over 4 GiB). Each
//! entry's CRC-32 is checked unless it is 0, which is what torch writes when
//! `torch.serialization.set_crc32_options(False)` turned it off.
use bytes::Bytes;

/// One stored record: its name and a slice of the archive's bytes (no copy).
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub data: Bytes,
}

const EOCD: u32 = 0x0605_4b50;
const EOCD64: u32 = 0x0606_4b50;
const EOCD64_LOCATOR: u32 = 0x0706_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;

/// Bounds-checked little-endian reads at absolute offsets; every failure names what was read.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes(&self, at: usize, n: usize, what: &str) -> Result<&[u8], String> {
        at.checked_add(n)
            .and_then(|end| self.0.get(at..end))
            .ok_or_else(|| format!("{what} at byte {at} runs past the end of the archive ({} bytes)", self.0.len()))
    }
    fn u16(&self, at: usize, what: &str) -> Result<u16, String> {
        let b = self.bytes(at, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&self, at: usize, what: &str) -> Result<u32, String> {
        let b = self.bytes(at, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&self, at: usize, what: &str) -> Result<u64, String> {
        let b = self.bytes(at, 8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

fn to_usize(v: u64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} {v} is too large"))
}

/// The end-of-central-directory record: the last `PK\5\6` whose comment ends the file.
fn find_eocd(r: &Reader) -> Result<usize, String> {
    let len = r.0.len();
    if len < 22 {
        return Err(format!("{len} bytes: too short for a zip archive"));
    }
    let lowest = len.saturating_sub(22 + 0xFFFF);
    let mut at = len - 22;
    loop {
        if r.u32(at, "end record")? == EOCD && at + 22 + r.u16(at + 20, "comment length")? as usize == len {
            return Ok(at);
        }
        if at == lowest {
            return Err("no end-of-central-directory record (truncated archive?)".into());
        }
        at -= 1;
    }
}

/// (entry count, central directory offset), from the zip64 record where the classic one
/// overflowed.
fn directory(r: &Reader, eocd: usize) -> Result<(u64, u64), String> {
    let count = r.u16(eocd + 10, "entry count")?;
    let offset = r.u32(eocd + 16, "central directory offset")?;
    if count != 0xFFFF && offset != 0xFFFF_FFFF {
        return Ok((count as u64, offset as u64));
    }
    let loc = eocd.checked_sub(20).ok_or("zip64 end record locator missing")?;
    if r.u32(loc, "zip64 locator")? != EOCD64_LOCATOR {
        return Err("zip64 end record locator missing".into());
    }
    let at = to_usize(r.u64(loc + 8, "zip64 end record offset")?, "zip64 end record offset")?;
    if r.u32(at, "zip64 end record")? != EOCD64 {
        return Err(format!("no zip64 end record at byte {at}"));
    }
    Ok((r.u64(at + 32, "zip64 entry count")?, r.u64(at + 48, "zip64 central directory offset")?))
}

/// The zip64 extended-information extra field (id 1) holds, in order, the 64-bit versions of
/// whichever of (size, compressed size, local header offset) are 0xFFFFFFFF in the record.
fn zip64_extra(extra: &[u8], wanted: &mut [(&mut u64, bool)]) -> Result<(), String> {
    let r = Reader(extra);
    let mut at = 0;
    while at + 4 <= extra.len() {
        let (id, n) = (r.u16(at, "extra field id")?, r.u16(at + 2, "extra field size")? as usize);
        if id == 1 {
            let mut p = at + 4;
            for (v, overflowed) in wanted.iter_mut() {
                if *overflowed {
                    **v = r.u64(p, "zip64 extra field")?;
                    p += 8;
                }
            }
            return Ok(());
        }
        at += 4 + n;
    }
    Err("a size or offset is 0xFFFFFFFF but there is no zip64 extra field".into())
}

/// Read the central directory of `bytes` and slice every entry's data.
pub fn entries(bytes: &Bytes) -> Result<Vec<Entry>, String> {
    let r = Reader(bytes);
    let eocd = find_eocd(&r)?;
    let (count, cd) = directory(&r, eocd)?;
    let mut at = to_usize(cd, "central directory offset")?;
    // Each record takes at least 46 bytes: a corrupt count cannot drive a huge allocation.
    if count > (bytes.len() / 46) as u64 {
        return Err(format!("{count} entries cannot fit in a {}-byte archive", bytes.len()));
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        if r.u32(at, "central directory record")? != CENTRAL {
            return Err(format!("central directory record {i} at byte {at} has a bad signature"));
        }
        let flags = r.u16(at + 8, "flags")?;
        let method = r.u16(at + 10, "method")?;
        let crc = r.u32(at + 16, "crc")?;
        let (mut csize, mut size) = (r.u32(at + 20, "size")? as u64, r.u32(at + 24, "size")? as u64);
        let (nlen, elen, clen) = (r.u16(at + 28, "name length")? as usize, r.u16(at + 30, "extra length")? as usize, r.u16(at + 32, "comment length")? as usize);
        let mut local = r.u32(at + 42, "local header offset")? as u64;
        let raw_name = r.bytes(at + 46, nlen, "entry name")?;
        let name = String::from_utf8_lossy(raw_name).into_owned();
        let extra = r.bytes(at + 46 + nlen, elen, "extra field")?;
        let (big_size, big_csize, big_local) = (size == 0xFFFF_FFFF, csize == 0xFFFF_FFFF, local == 0xFFFF_FFFF);
        if big_size || big_csize || big_local {
            zip64_extra(extra, &mut [(&mut size, big_size), (&mut csize, big_csize), (&mut local, big_local)])?;
        }
        let bad = |why: String| format!("entry `{name}`: {why}");
        if flags & 1 != 0 {
            return Err(bad("encrypted".into()));
        }
        if method != 0 {
            return Err(bad(format!("compressed (method {method}); torch.save stores records uncompressed — re-save the file with torch.save")));
        }
        if csize != size {
            return Err(bad(format!("stored entry with compressed size {csize} != size {size}")));
        }
        let local = to_usize(local, "local header offset").map_err(bad)?;
        if r.u32(local, "local header").map_err(bad)? != LOCAL {
            return Err(bad(format!("no local header at byte {local}")));
        }
        let local_nlen = r.u16(local + 26, "local name length").map_err(bad)? as usize;
        // The two copies of the name must agree: a damaged name (say `byteorder`) must not
        // make a record silently disappear.
        if r.bytes(local + 30, local_nlen, "local name").map_err(bad)? != raw_name {
            return Err(bad(format!("the local header at byte {local} names another record")));
        }
        let data_at = local + 30 + local_nlen + r.u16(local + 28, "local extra length").map_err(bad)? as usize;
        let size = to_usize(size, "size").map_err(bad)?;
        r.bytes(data_at, size, "data").map_err(bad)?;
        let data = bytes.slice(data_at..data_at + size);
        if crc != 0 && crc32(&data) != crc {
            return Err(bad(format!("CRC-32 mismatch (stored {crc:08x}, computed {:08x}): the file is corrupt", crc32(&data))));
        }
        out.push(Entry { name, data });
        at += 46 + nlen + elen + clen;
    }
    Ok(out)
}

/// CRC-32 (IEEE), slice-by-8: fast enough that checking a multi-gigabyte checkpoint costs
/// about as much as reading it.
pub fn crc32(data: &[u8]) -> u32 {
    static TABLES: std::sync::OnceLock<[[u32; 256]; 8]> = std::sync::OnceLock::new();
    let t = TABLES.get_or_init(|| {
        let mut t = [[0u32; 256]; 8];
        for (i, slot) in t[0].iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            }
            *slot = c;
        }
        for i in 0..256 {
            for k in 1..8 {
                t[k][i] = (t[k - 1][i] >> 8) ^ t[0][(t[k - 1][i] & 0xFF) as usize];
            }
        }
        t
    });
    let mut c = !0u32;
    let mut chunks = data.chunks_exact(8);
    for ch in &mut chunks {
        let lo = c ^ u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
        c = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][ch[4] as usize]
            ^ t[2][ch[5] as usize]
            ^ t[1][ch[6] as usize]
            ^ t[0][ch[7] as usize];
    }
    for &b in chunks.remainder() {
        c = t[0][((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// A zip archive of stored entries (no zip64: for tests and small exports).
pub fn write(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let fixed = |sig: u32, v: &mut Vec<u8>| {
            v.extend_from_slice(&sig.to_le_bytes());
            if sig == CENTRAL {
                v.extend_from_slice(&20u16.to_le_bytes()); // version made by
            }
            v.extend_from_slice(&20u16.to_le_bytes()); // version needed
            v.extend_from_slice(&[0; 8]); // flags, method, time, date
            v.extend_from_slice(&crc.to_le_bytes());
            v.extend_from_slice(&(data.len() as u32).to_le_bytes());
            v.extend_from_slice(&(data.len() as u32).to_le_bytes());
            v.extend_from_slice(&(name.len() as u16).to_le_bytes());
            v.extend_from_slice(&0u16.to_le_bytes()); // extra length
        };
        fixed(LOCAL, &mut out);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        fixed(CENTRAL, &mut central);
        central.extend_from_slice(&[0; 10]); // comment length, disk, internal and external attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_at = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&EOCD.to_le_bytes());
    out.extend_from_slice(&[0; 4]); // disk numbers
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_at.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}
