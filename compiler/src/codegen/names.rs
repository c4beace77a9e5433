//! Text from the model (value, node and dim names, the file name) into generated source. A
//! model file is untrusted: a name with a newline would end the `//` comment it is pasted
//! into and become code. Every identifier, comment text and string literal of a generated
//! module that carries such text is made here, and nowhere else.
use std::collections::HashSet;

/// Identifiers a generated module uses itself, at module level or in `forward`/`train_step`
/// next to the inputs' parameters; Rust's keywords and names of the prelude types the module
/// spells unqualified.
const RESERVED: &[&str] = &[
    // Keywords (strict, reserved, and edition 2024's `gen`).
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let",
    "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true",
    "type", "unsafe", "use", "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen", "union",
    // Paths and names of the module and its functions' locals.
    "rt", "core", "std", "alloc", "a", "w", "s", "sz", "arena", "dims", "lr", "step", "dropout_key", "entries", "empty",
    "trips", "cond", "it", "forward", "train_step", "new", "with_weights",
];

/// Prefixes of names the module makes itself: `part_3`, `train_part_0`, `in_x` (an input's
/// parameter inside the part functions), `d_h` (a bounded dim's value).
const RESERVED_PREFIXES: &[&str] = &["part_", "train_part_", "in_", "d_"];

/// A snake_case identifier for `name`, not a keyword nor a name the module uses itself, and
/// unique within `taken` (to which it is added): `Conv 1/out` → `conv_1_out`, `self` → `v_self`,
/// a second `conv_1_out` → `conv_1_out_2`.
pub fn ident(name: &str, taken: &mut HashSet<String>) -> String {
    crate::ir::unique_name(snake(name), taken)
}

/// The snake_case form `ident` starts from, before making it unique.
fn snake(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    let s = s.trim_matches('_');
    let clash = s.is_empty()
        || s.starts_with(|c: char| c.is_ascii_digit())
        || RESERVED.contains(&s)
        || RESERVED_PREFIXES.iter().any(|p| s.starts_with(p))
        || s.starts_with("v_");
    if clash {
        format!("v_{s}")
    } else {
        s.to_string()
    }
}

/// The prefix of a bounded dim's constant (`H` of `H_MAX` for dim `h`): its field, upper-cased.
pub fn const_ident(name: &str) -> String {
    dim_field(name).to_uppercase()
}

/// A dim's field name in the generated `Dims`: lowercase, a keyword gets a trailing `_`
/// (`type_`), a name that cannot start an identifier a `dim_` prefix. The caller refuses two
/// dims with one field name. Fields live in `Dims` only, and locals made from them carry a
/// `d_` prefix, so the module's own names need no escaping here.
pub fn dim_field(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) || s == "_" {
        format!("dim_{s}")
    } else if syn::parse_str::<syn::Ident>(&s).is_ok() {
        s
    } else {
        format!("{s}_")
    }
}

/// `text` as it may appear inside a comment or doc line of generated code, or in an error
/// message or a terminal line: one line, every
/// character that could end the line or change how the line reads (control characters,
/// Unicode line and paragraph separators, bidirectional overrides, which rustc rejects in
/// comments) written as an escape (`\n`, `\u{202e}`).
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}')
        // Bidirectional formatting characters (rustc's `text_direction_codepoint_*` lints).
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A Rust string literal holding `s` exactly (what `"…"` reads back is `s`).
pub fn str_lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if needs_escape(c) => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_snake_unique_and_never_reserved() {
        let mut taken = HashSet::new();
        assert_eq!(ident("Conv 1/out", &mut taken), "conv_1_out");
        assert_eq!(ident("conv_1_out", &mut taken), "conv_1_out_2");
        assert_eq!(ident("CONV-1-OUT", &mut taken), "conv_1_out_3");
        for name in ["self", "arena", "a", "w", "part_0", "in_x", "d_n", "123", "", "__", "вход", "v_x", "fn", "Self"] {
            let id = ident(name, &mut HashSet::new());
            assert!(syn::parse_str::<syn::Ident>(&id).is_ok(), "{name:?} -> {id:?} is no identifier");
            assert!(!RESERVED.contains(&id.as_str()) && !RESERVED_PREFIXES.iter().any(|p| id.starts_with(p)), "{name:?} -> {id:?}");
        }
        // Two names one snake form apart stay apart, and `v_` names cannot meet an escaped one.
        let mut taken = HashSet::new();
        let a = ident("self", &mut taken);
        let b = ident("v_self", &mut taken);
        assert_ne!(a, b);
    }

    #[test]
    fn text_stays_on_one_line_and_literals_round_trip() {
        let evil = "x\n#[used] static INJECTED: u8 = 0;\r\n// \u{202e}\u{2028}\u{1b}[31m\"\\";
        let t = text(evil);
        assert!(!t.chars().any(needs_escape), "{t:?}");
        let src = format!("// {t}\nconst X: &str = {};\n", str_lit(evil));
        let file = syn::parse_file(&src).expect("parses");
        assert_eq!(file.items.len(), 1, "only the constant: nothing injected");
        let syn::Item::Const(c) = &file.items[0] else { panic!("a const") };
        let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(l), .. }) = &*c.expr else { panic!("a string literal") };
        assert_eq!(l.value(), evil);
    }
}
