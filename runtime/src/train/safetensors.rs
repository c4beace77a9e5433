//! Writing parameters as a safetensors file without an allocator: the caller sizes the
//! buffer with [`serialized_len`] (or a compile-time constant) and [`write`] fills it. The
//! file loads back with `burnc --weights`, the `safetensors` Python package or PyTorch.

/// One tensor to write: little-endian bytes in C order.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub name: &'a str,
    /// safetensors dtype tag: "F32", "F16", "I64", …
    pub dtype: &'a str,
    pub shape: &'a [usize],
    pub data: &'a [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// The output buffer is smaller than the file (needed, given).
    TooSmall(usize, usize),
}

impl core::fmt::Display for WriteError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WriteError::TooSmall(need, got) => write!(f, "safetensors output needs {need} bytes, the buffer has {got}"),
        }
    }
}

/// Counts bytes, and copies them when it has a buffer.
struct Sink<'o> {
    out: Option<&'o mut [u8]>,
    n: usize,
}

impl Sink<'_> {
    fn bytes(&mut self, b: &[u8]) {
        if let Some(o) = self.out.as_deref_mut() {
            if let Some(dst) = o.get_mut(self.n..self.n + b.len()) {
                dst.copy_from_slice(b);
            }
        }
        self.n += b.len();
    }

    fn num(&mut self, mut v: usize) {
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.bytes(&buf[i..]);
    }

    /// A JSON string literal.
    fn string(&mut self, s: &str) {
        self.bytes(b"\"");
        for c in s.bytes() {
            match c {
                b'"' => self.bytes(b"\\\""),
                b'\\' => self.bytes(b"\\\\"),
                0..=0x1f => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.bytes(&[b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
                }
                _ => self.bytes(&[c]),
            }
        }
        self.bytes(b"\"");
    }
}

/// The header JSON (unpadded) into `s`.
fn header(entries: &[Entry<'_>], s: &mut Sink<'_>) {
    s.bytes(b"{");
    let mut off = 0usize;
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            s.bytes(b",");
        }
        s.string(e.name);
        s.bytes(b":{\"dtype\":");
        s.string(e.dtype);
        s.bytes(b",\"shape\":[");
        for (k, d) in e.shape.iter().enumerate() {
            if k > 0 {
                s.bytes(b",");
            }
            s.num(*d);
        }
        s.bytes(b"],\"data_offsets\":[");
        s.num(off);
        s.bytes(b",");
        off += e.data.len();
        s.num(off);
        s.bytes(b"]}");
    }
    s.bytes(b"}");
}

fn header_len(entries: &[Entry<'_>]) -> usize {
    let mut s = Sink { out: None, n: 0 };
    header(entries, &mut s);
    // Padded with spaces so the data starts 8-byte aligned, as the format recommends.
    s.n.div_ceil(8) * 8
}

/// Bytes of the file [`write`] produces.
pub fn serialized_len(entries: &[Entry<'_>]) -> usize {
    8 + header_len(entries) + entries.iter().map(|e| e.data.len()).sum::<usize>()
}

/// Write the file into `out`; returns its length.
pub fn write(entries: &[Entry<'_>], out: &mut [u8]) -> Result<usize, WriteError> {
    let total = serialized_len(entries);
    if out.len() < total {
        return Err(WriteError::TooSmall(total, out.len()));
    }
    let hl = header_len(entries);
    let mut s = Sink { out: Some(out), n: 0 };
    s.bytes(&(hl as u64).to_le_bytes());
    header(entries, &mut s);
    while s.n < 8 + hl {
        s.bytes(b" ");
    }
    for e in entries {
        s.bytes(e.data);
    }
    Ok(s.n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_format() {
        let w = [1.0f32, 2.0];
        let data: [u8; 8] = unsafe { core::mem::transmute(w) };
        let e = [Entry { name: "fc.\"w\"", dtype: "F32", shape: &[2], data: &data }];
        let mut out = [0u8; 128];
        let n = write(&e, &mut out).unwrap();
        assert_eq!(n, serialized_len(&e));
        let hl = u64::from_le_bytes(out[..8].try_into().unwrap()) as usize;
        assert_eq!(hl % 8, 0);
        let h = core::str::from_utf8(&out[8..8 + hl]).unwrap().trim_end();
        assert_eq!(h, r#"{"fc.\"w\"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#);
        assert_eq!(&out[8 + hl..n], &data);
        assert_eq!(write(&e, &mut [0u8; 10]), Err(WriteError::TooSmall(n, 10)));
    }
}
