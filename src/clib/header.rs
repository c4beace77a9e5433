//! The C header of a C library: sizes, every input and output (name, dtype, shape) as
//! constants, the error codes and the functions. Tensor names from the model appear only
//! inside C string literals, escaped; identifiers come from the module's sanitised ones.
use crate::build::Report;
use crate::BuildError;
use burnc_compiler::codegen::IoDesc;
use burnc_compiler::ir::DType;
use std::fmt::Write;

/// The C type of an element (16-bit floats as their bits).
pub fn c_type(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I8 => "int8_t",
        DType::I16 => "int16_t",
        DType::I32 => "int32_t",
        DType::I64 => "int64_t",
        DType::U8 | DType::Bool => "uint8_t",
        DType::U16 | DType::F16 | DType::BF16 => "uint16_t",
        DType::U32 => "uint32_t",
        DType::U64 => "uint64_t",
        d if d.is_small() => "uint8_t",
        _ => return None,
    })
}

/// A C string literal reading back as `s`'s UTF-8 bytes: printable ASCII as is, everything
/// else (and `"`, `\`, `?`, which could start a trigraph) as octal escapes.
pub fn c_str_lit(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' | b'\\' | b'?' => {
                let _ = write!(out, "\\{:03o}", b);
            }
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{:03o}", b);
            }
        }
    }
    out.push('"');
    out
}

fn tensor(h: &mut String, prefix: &str, kind: &str, i: usize, d: &IoDesc) -> Result<&'static str, BuildError> {
    let ty = c_type(d.dtype).ok_or_else(|| BuildError::Invalid(format!("{kind} {i} has dtype {}, which does not cross the C interface", d.dtype)))?;
    let id = format!("{prefix}_{}_{}", kind.to_uppercase(), d.ident.to_uppercase());
    let note = match d.dtype {
        DType::Bool => " (0 or 1)",
        DType::F16 => " (IEEE half bits)",
        DType::BF16 => " (bfloat16 bits)",
        _ => "",
    };
    let _ = writeln!(h, "/* {kind} {i}: {ty}{note}, shape {:?} */", d.shape);
    let _ = writeln!(h, "#define {id}_LEN ((size_t){})", d.shape.iter().product::<usize>());
    let _ = writeln!(h, "#define {id}_RANK {}", d.shape.len());
    let _ = writeln!(h, "static const char {id}_NAME[] = {};", c_str_lit(&d.name));
    if !d.shape.is_empty() {
        let dims: Vec<String> = d.shape.iter().map(|x| x.to_string()).collect();
        let _ = writeln!(h, "static const size_t {id}_SHAPE[{}] = {{{}}};", d.shape.len(), dims.join(", "));
    }
    h.push('\n');
    Ok(ty)
}

/// `<name>.h`.
pub fn header(name: &str, source_name: &str, r: &Report) -> Result<String, BuildError> {
    let up = name.to_uppercase();
    let mut h = String::new();
    let _ = write!(
        h,
        "/* {name}.h: the C interface of a model compiled by burnc {ver} (`burnc MODEL --emit c-lib`).\n \
         * Generated; do not edit. Link with lib{name}.a. The model's file name: {up}_SOURCE.\n \
         * Every size is fixed: the caller gives one arena of {up}_ARENA_BYTES bytes, 64-byte\n \
         * aligned (static, stack or heap), reused across calls; nothing is allocated. */\n\
         #ifndef BURNC_{up}_H\n#define BURNC_{up}_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n\
         #ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n\
         static const char {up}_SOURCE[] = {src};\n\
         #define {up}_ARENA_BYTES ((size_t){arena})\n#define {up}_ARENA_ALIGN 64\n\
         /* The weights are embedded; {name}_forward_with_weights takes a copy from elsewhere. */\n\
         #define {up}_WEIGHTS_BYTES ((size_t){weights})\n\
         #define {up}_NUM_INPUTS {ni}\n#define {up}_NUM_OUTPUTS {no}\n\n",
        ver = env!("CARGO_PKG_VERSION"),
        src = c_str_lit(source_name),
        arena = r.arena_bytes.max(64),
        weights = r.weights_bytes,
        ni = r.inputs.len(),
        no = r.outputs.len(),
    );
    let mut params = Vec::new();
    for (i, d) in r.inputs.iter().enumerate() {
        let ty = tensor(&mut h, &up, "input", i, d)?;
        params.push(format!("const {ty} *input_{}", d.ident));
    }
    for (i, d) in r.outputs.iter().enumerate() {
        let ty = tensor(&mut h, &up, "output", i, d)?;
        params.push(format!("{ty} *output_{}", d.ident));
    }
    let params = params.join(", ");
    let _ = write!(
        h,
        "/* What the functions return. */\n\
         enum {{\n    {up}_OK = 0,\n    {up}_ERR_NULL = 1,    /* a pointer is NULL */\n    {up}_ERR_ALIGN = 2,   /* the arena or weights are not 64-byte aligned, or a tensor not aligned for its type */\n    {up}_ERR_WEIGHTS = 3  /* the module refused the weights (their size or alignment) */\n}};\n\n\
         size_t {name}_arena_bytes(void);\nsize_t {name}_weights_bytes(void);\n\n\
         /* Run the model: inputs read, outputs written (each its _LEN elements). On an error\n   nothing is written. Reentrant with one arena per concurrent call. */\n\
         int32_t {name}_forward(void *arena, {params});\n\n\
         /* The same with weights from elsewhere: {up}_WEIGHTS_BYTES bytes, 64-byte aligned, as the\n   compiler wrote them (model.bin). */\n\
         int32_t {name}_forward_with_weights(const void *weights, void *arena, {params});\n\n\
         #ifdef __cplusplus\n}}\n#endif\n\n#endif /* BURNC_{up}_H */\n"
    );
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_literals_hold_any_name_safely() {
        assert_eq!(c_str_lit("x"), "\"x\"");
        assert_eq!(c_str_lit("a\"b\\c"), "\"a\\042b\\134c\"");
        // No trigraph, no comment end, no newline can survive.
        assert_eq!(c_str_lit("??/\n*/"), "\"\\077\\077/\\012*/\"");
        assert_eq!(c_str_lit("é"), "\"\\303\\251\"");
    }
}
