//! RegexFullMatch's patterns: RE2 syntax (what ONNX names) compiled to a dense DFA that the
//! interpreter searches and generated code carries, serialized, in its weights blob.
//!
//! RE2 and Rust's regex syntax agree except that RE2's `\d`, `\s`, `\w` and `\b` are ASCII
//! while Rust's are Unicode: the pattern's syntax tree is rewritten to the ASCII classes
//! before it is compiled.
use super::R;
#[cfg(feature = "regex")]
use regex_automata::{dfa::dense, dfa::StartKind, nfa::thompson, MatchKind};
#[cfg(feature = "regex")]
use regex_syntax::ast::{self, Ast};

/// Without the `regex` feature patterns are not compiled: the op is refused.
#[cfg(not(feature = "regex"))]
pub fn compile(pattern: &str) -> R<Vec<u8>> {
    Err(format!("pattern {pattern:?}: this burnc was built without RegexFullMatch (feature `regex`)"))
}

/// Patterns whose automaton grows past this many bytes are refused (a hostile pattern can
/// make a DFA exponential in its length).
#[cfg(feature = "regex")]
const DFA_LIMIT: usize = 8 << 20;

/// The pattern as a full-match DFA (`^(?:pattern)\z`, anchored), serialized little-endian.
#[cfg(feature = "regex")]
pub fn compile(pattern: &str) -> R<Vec<u8>> {
    let mut tree = ast::parse::Parser::new().parse(pattern).map_err(|e| format!("pattern {pattern:?}: {e}"))?;
    ascii_classes(&mut tree);
    let hir = regex_syntax::hir::translate::Translator::new().translate(pattern, &tree).map_err(|e| format!("pattern {pattern:?}: {e}"))?;
    let full = regex_syntax::hir::Hir::concat(vec![hir, regex_syntax::hir::Hir::look(regex_syntax::hir::Look::End)]);
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().nfa_size_limit(Some(DFA_LIMIT)))
        .build_from_hir(&full)
        .map_err(|e| format!("pattern {pattern:?}: {e}"))?;
    let dfa = dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .dfa_size_limit(Some(DFA_LIMIT))
                .determinize_size_limit(Some(DFA_LIMIT)),
        )
        .build_from_nfa(&nfa)
        .map_err(|e| format!("pattern {pattern:?}: {e}"))?;
    Ok(dfa.to_bytes_little_endian().0)
}

/// Bytes kept 4-byte aligned (a DFA deserializes only from such).
#[derive(Debug, Clone)]
pub struct Aligned {
    words: Vec<u32>,
    len: usize,
}

impl Aligned {
    pub fn new(bytes: &[u8]) -> Aligned {
        let mut words = vec![0u32; bytes.len().div_ceil(4)];
        bytemuck::cast_slice_mut::<u32, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Aligned { words, len: bytes.len() }
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u32, u8>(&self.words)[..self.len]
    }
}

#[cfg(feature = "regex")]
/// Rewrite Perl classes and word boundaries to their ASCII forms, as RE2 reads them.
fn ascii_classes(a: &mut Ast) {
    match a {
        Ast::ClassPerl(p) => {
            let span = p.span;
            let item = ast::ClassSetItem::Ascii(ascii(p));
            *a = Ast::class_bracketed(ast::ClassBracketed { span, negated: false, kind: ast::ClassSet::Item(item) });
        }
        Ast::ClassBracketed(b) => set(&mut b.kind),
        Ast::Assertion(x) if matches!(x.kind, ast::AssertionKind::WordBoundary | ast::AssertionKind::NotWordBoundary) => {
            let span = x.span;
            let flags = ast::Flags { span, items: vec![ast::FlagsItem { span, kind: ast::FlagsItemKind::Negation }, ast::FlagsItem { span, kind: ast::FlagsItemKind::Flag(ast::Flag::Unicode) }] };
            let inner = std::mem::replace(a, Ast::empty(span));
            *a = Ast::group(ast::Group { span, kind: ast::GroupKind::NonCapturing(flags), ast: Box::new(inner) });
        }
        Ast::Repetition(r) => ascii_classes(&mut r.ast),
        Ast::Group(g) => ascii_classes(&mut g.ast),
        Ast::Alternation(x) => x.asts.iter_mut().for_each(ascii_classes),
        Ast::Concat(x) => x.asts.iter_mut().for_each(ascii_classes),
        _ => {}
    }
}

#[cfg(feature = "regex")]
fn set(s: &mut ast::ClassSet) {
    match s {
        ast::ClassSet::Item(i) => item(i),
        ast::ClassSet::BinaryOp(op) => {
            set(&mut op.lhs);
            set(&mut op.rhs);
        }
    }
}

#[cfg(feature = "regex")]
fn item(i: &mut ast::ClassSetItem) {
    match i {
        ast::ClassSetItem::Perl(p) => *i = ast::ClassSetItem::Ascii(ascii(p)),
        ast::ClassSetItem::Bracketed(b) => set(&mut b.kind),
        ast::ClassSetItem::Union(u) => u.items.iter_mut().for_each(item),
        _ => {}
    }
}

#[cfg(feature = "regex")]
fn ascii(p: &ast::ClassPerl) -> ast::ClassAscii {
    let kind = match p.kind {
        ast::ClassPerlKind::Digit => ast::ClassAsciiKind::Digit,
        ast::ClassPerlKind::Space => ast::ClassAsciiKind::Space,
        ast::ClassPerlKind::Word => ast::ClassAsciiKind::Word,
    };
    ast::ClassAscii { span: p.span, kind, negated: p.negated }
}
