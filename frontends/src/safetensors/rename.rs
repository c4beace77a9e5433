//! `--rename PATTERN=REPLACEMENT`: map file keys onto the model's parameter names.
//!
//! PATTERN is a glob over the whole key where each `*` matches any run of characters (possibly
//! empty); every other character matches itself. The `*`s of REPLACEMENT are filled, in order,
//! with what the pattern's `*`s matched. Rules are tried in the order given and the first that
//! matches a key renames it; a key no rule matches keeps its name. Examples:
//! `model.*=*` strips a prefix, `*=onnx::*` adds one, `*.weight=*.w` swaps a suffix,
//! `layers.*.attn.*=blk*.*` rewrites the middle.
use super::SafetensorsError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rename {
    /// Literal pieces between the pattern's `*`s (one more than there are `*`s).
    pieces: Vec<String>,
    replacement: String,
}

impl Rename {
    /// Parse `PATTERN=REPLACEMENT` (split at the first `=`).
    pub fn parse(rule: &str) -> Result<Rename, SafetensorsError> {
        let bad = |reason: &str| SafetensorsError::BadRename { rule: rule.to_string(), reason: reason.to_string() };
        let (pattern, replacement) = rule.split_once('=').ok_or_else(|| bad("expected PATTERN=REPLACEMENT"))?;
        Rename::new(pattern, replacement).map_err(|e| match e {
            SafetensorsError::BadRename { reason, .. } => bad(&reason),
            other => other,
        })
    }

    pub fn new(pattern: &str, replacement: &str) -> Result<Rename, SafetensorsError> {
        let pieces: Vec<String> = pattern.split('*').map(str::to_string).collect();
        let bad = |reason: String| SafetensorsError::BadRename { rule: format!("{pattern}={replacement}"), reason };
        if pattern.is_empty() {
            return Err(bad("empty pattern".into()));
        }
        if pattern.contains("**") {
            // Two adjacent wildcards would split a match ambiguously.
            return Err(bad("`**`: adjacent wildcards are ambiguous".into()));
        }
        let (stars, uses) = (pieces.len() - 1, replacement.matches('*').count());
        if uses > stars {
            return Err(bad(format!("the replacement uses {uses} `*` but the pattern has {stars}")));
        }
        Ok(Rename { pieces, replacement: replacement.to_string() })
    }

    /// What the `*`s matched, when the pattern matches all of `key`. The middle pieces are found
    /// leftmost, which finds a match whenever one exists (wildcards are unconstrained).
    fn captures<'k>(&self, key: &'k str) -> Option<Vec<&'k str>> {
        let (first, rest) = self.pieces.split_first()?;
        let Some((last, middle)) = rest.split_last() else {
            return (key == first).then(Vec::new);
        };
        let mut pos = first.len();
        if !key.starts_with(first.as_str()) || key.len() < first.len() + last.len() || !key.ends_with(last.as_str()) {
            return None;
        }
        let limit = key.len() - last.len();
        let mut caps = Vec::with_capacity(rest.len());
        for piece in middle {
            let found = key.get(pos..limit)?.find(piece.as_str())?;
            caps.push(&key[pos..pos + found]);
            pos += found + piece.len();
        }
        caps.push(key.get(pos..limit)?);
        Some(caps)
    }

    /// The renamed key, or `None` when the pattern does not match.
    pub fn apply(&self, key: &str) -> Option<String> {
        let caps = self.captures(key)?;
        let mut out = String::new();
        let mut caps = caps.into_iter();
        for (i, part) in self.replacement.split('*').enumerate() {
            if i > 0 {
                out += caps.next().unwrap_or_default();
            }
            out += part;
        }
        Some(out)
    }
}

/// Rename `key` with the first matching rule.
pub fn rename(rules: &[Rename], key: &str) -> String {
    rules.iter().find_map(|r| r.apply(key)).unwrap_or_else(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Rename {
        Rename::parse(s).expect("rule")
    }

    #[test]
    fn globs() {
        assert_eq!(r("model.*=*").apply("model.conv.weight").as_deref(), Some("conv.weight"));
        assert_eq!(r("model.*=*").apply("other.conv"), None);
        assert_eq!(r("*=onnx::*").apply("w").as_deref(), Some("onnx::w"));
        assert_eq!(r("*.weight=*.w").apply("fc.weight").as_deref(), Some("fc.w"));
        assert_eq!(r("layers.*.attn.*=blk*.*").apply("layers.3.attn.q").as_deref(), Some("blk3.q"));
        assert_eq!(r("a=b").apply("a").as_deref(), Some("b"));
        assert_eq!(r("a=b").apply("ab"), None);
        // The prefix and suffix may not overlap.
        assert_eq!(r("ab*ba=x").apply("aba"), None);
        // A dropped capture is allowed; `=` after the first belongs to the replacement.
        assert_eq!(r("x.*=y=z").apply("x.1").as_deref(), Some("y=z"));
        assert_eq!(rename(&[r("a*=1"), r("*=2")], "ab"), "1");
        assert_eq!(rename(&[r("a*=1")], "b"), "b");
    }

    #[test]
    fn refuses_bad_rules() {
        for bad in ["noequals", "=x", "a=**", "a**=b", "a*=**"] {
            assert!(matches!(Rename::parse(bad), Err(SafetensorsError::BadRename { .. })), "{bad}");
        }
    }
}
