//! From the struct and the `#[model]` impl to the generated module: lower `forward`, apply the
//! weights, run the compiler, and parse the generated source back into tokens.
use crate::layers::{self, Kind, Layer};
use crate::lower::{check_returns, forward_args, Defs, Lower, SubDef};
use crate::ImplInput;
use burnc_compiler::codegen::{self, CodegenOptions};
use burnc_compiler::ir::{Op, UnaryOp, ValueKind};
use burnc_compiler::passes::{self, PassError};
use proc_macro2::{Group, Literal, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use burnc_frontends::safetensors::{Rename, WeightsOptions};
use std::collections::HashMap;
use std::str::FromStr;
use syn::{Error, Result};

/// The `include_bytes!` path codegen is given; the expansion puts the blob in its place.
const WEIGHTS_MARKER: &str = "weights embedded by #[model]";

struct Options {
    weights: Option<syn::LitStr>,
    /// Keys of the weights file to leave out (`*` globs): heads the model does not use.
    ignore: Vec<(syn::LitStr, Rename)>,
    /// `PATTERN=REPLACEMENT` rules for the file's keys, as `burnc --rename`.
    rename: Vec<Rename>,
    module: Option<syn::Ident>,
    /// Only a part of other models: checked, inlined where it is called, compiled to nothing.
    inline: bool,
}

fn parse_options(attr: TokenStream) -> Result<Options> {
    let mut o = Options { weights: None, ignore: vec![], rename: vec![], module: None, inline: false };
    let strings = |m: &syn::meta::ParseNestedMeta| -> Result<Vec<syn::LitStr>> {
        let arr: syn::ExprArray = m.value()?.parse()?;
        arr.elems
            .iter()
            .map(|e| match e {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Ok(s.clone()),
                other => Err(Error::new_spanned(other, "expected a string")),
            })
            .collect()
    };
    let parser = syn::meta::parser(|m| {
        if m.path.is_ident("inline") {
            o.inline = true;
        } else if m.path.is_ident("weights") {
            o.weights = Some(m.value()?.parse()?);
        } else if m.path.is_ident("module") {
            let s: syn::LitStr = m.value()?.parse()?;
            o.module = Some(s.parse()?);
        } else if m.path.is_ident("ignore") {
            for lit in strings(&m)? {
                let r = Rename::new(&lit.value(), "").map_err(|e| Error::new_spanned(&lit, e.to_string()))?;
                o.ignore.push((lit, r));
            }
        } else if m.path.is_ident("rename") {
            for lit in strings(&m)? {
                o.rename.push(Rename::parse(&lit.value()).map_err(|e| Error::new_spanned(&lit, e.to_string()))?);
            }
        } else {
            return Err(m.error("unknown #[model] option (known: weights = \"file.safetensors\", ignore = [\"pooler.*\"], rename = [\"model.*=*\"], module = \"name\", inline)"));
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(o)
}

fn snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

/// The `forward` of a `#[model]` impl (the only item it may hold).
fn forward_of(imp: &syn::ItemImpl) -> Result<&syn::ImplItemFn> {
    let mut forward = None;
    for item in &imp.items {
        match item {
            syn::ImplItem::Fn(f) if f.sig.ident == "forward" => forward = Some(f),
            other => return Err(Error::new_spanned(other, "a #[model] impl holds only `fn forward`")),
        }
    }
    forward.ok_or_else(|| Error::new_spanned(&imp.self_ty, "a #[model] impl needs `fn forward(&self, x: Tensor<..>) -> Tensor<..>`"))
}

/// The sub-model types `layers` name, with the field types' spans.
fn subs(layers: &[Layer]) -> impl Iterator<Item = &syn::Ident> {
    layers.iter().filter_map(|l| match &l.kind {
        Kind::Sub { ty } => Some(ty),
        _ => None,
    })
}

/// Refuse a struct that contains itself, through any chain of sub-models.
fn check_cycles(name: &syn::Ident, layers: &[Layer], defs: &Defs, path: &mut Vec<String>) -> Result<()> {
    for ty in subs(layers) {
        let t = ty.to_string();
        if t == name.to_string() || path.contains(&t) {
            return Err(Error::new_spanned(ty, format!("`{t}` contains itself (through {})", path.join(" → "))));
        }
        if let Some(d) = defs.get(&t) {
            path.push(t);
            check_cycles(name, &d.layers, defs, path)?;
            path.pop();
        }
    }
    Ok(())
}

pub fn expand(input: &ImplInput, raw: TokenStream) -> Result<TokenStream> {
    let (strukt, imp) = (&input.strukt, &input.imp);
    let t0 = std::time::Instant::now();
    let layers = layers::parse_struct(strukt)?;
    let opts = parse_options(input.attr.clone())?;
    let name = &strukt.ident;
    forward_of(imp)?;

    // Sub-models: each `#[model]` leaves a `macro_rules! __burnc_def_<Name>` that appends its
    // struct and impl to a call of this macro; ask for the first one still missing (a proc
    // macro sees only its own input, so definitions travel this way).
    let mut defs: Defs = HashMap::new();
    for (s, i) in &input.defs {
        defs.insert(s.ident.to_string(), SubDef { layers: layers::parse_struct(s)?, forward: forward_of(i)?.clone() });
    }
    let mut wanted: Vec<&syn::Ident> = subs(&layers).collect();
    for d in defs.values() {
        wanted.extend(subs(&d.layers));
    }
    if let Some(ty) = wanted.into_iter().find(|t| !defs.contains_key(&t.to_string()) && **t != *name) {
        let mac = format_ident!("__burnc_def_{}", ty, span = ty.span());
        return Ok(quote_spanned! {ty.span()=> #mac! { @then #raw } });
    }
    check_cycles(name, &layers, &defs, &mut vec![name.to_string()])?;

    // This model's own definition, for models that use it as a field; `!` marks one whose own
    // lowering failed, so they do not report its mistake a second time.
    let define = |broken: bool| {
        let def_mac = format_ident!("__burnc_def_{}", name);
        let mark = if broken { quote! { ! } } else { quote! {} };
        quote! {
            #[doc(hidden)]
            #[allow(unused_macros)]
            macro_rules! #def_mac {
                (@then $($t:tt)*) => {
                    ::burnc_macros::__model_impl! { $($t)* @def { #strukt } { #imp } #mark }
                };
            }
        }
    };
    if input.broken_defs {
        return Ok(define(true));
    }
    match compile(input, &layers, &defs, &opts, t0) {
        Ok(ts) => {
            let d = define(false);
            Ok(quote! { #ts #d })
        }
        Err(e) => {
            let (e, d) = (e.to_compile_error(), define(true));
            Ok(quote! { #e #d })
        }
    }
}

/// [`expand`] for a model without sub-models, its mistakes as `Err` (for unit tests).
#[cfg(test)]
pub(crate) fn expand_standalone(input: &ImplInput) -> Result<TokenStream> {
    let layers = layers::parse_struct(&input.strukt)?;
    let opts = parse_options(input.attr.clone())?;
    compile(input, &layers, &Defs::new(), &opts, std::time::Instant::now())
}

/// Lower, compile and generate the module (nothing for an `inline` model).
fn compile(input: &ImplInput, layers: &[Layer], defs: &Defs, opts: &Options, t0: std::time::Instant) -> Result<TokenStream> {
    let (strukt, imp) = (&input.strukt, &input.imp);
    let name = &strukt.ident;
    let vis = &strukt.vis;
    let f = forward_of(imp)?;
    let mut lower = Lower::new(&name.to_string(), layers, defs);
    let args = forward_args(f)?;
    for (id, dtype, shape) in &args {
        lower.input(&id.to_string(), *dtype, shape.clone());
    }
    let outs = lower.body(&f.block)?;
    check_returns(&f.sig, &outs)?;
    if opts.inline {
        if let Some(w) = &opts.weights {
            return Err(Error::new_spanned(w, "an `inline` model takes its weights from the model that uses it"));
        }
        return Ok(quote! {});
    }

    // Graph outputs: `output` (or `output_0`, `output_1` …), each computed by its own node.
    let single = outs.len() == 1;
    for (i, (t, span)) in outs.iter().enumerate() {
        let oname = if single { "output".to_string() } else { format!("output_{i}") };
        let own = matches!(lower.g.value(t.id).kind, ValueKind::Node(_)) && !lower.g.outputs.contains(&t.id);
        let id = if own {
            t.id
        } else {
            let (_, o) = lower.g.add_node(format!("{oname}_copy"), Op::Unary(UnaryOp::Identity), vec![Some(t.id)], std::slice::from_ref(&oname));
            lower.spans.insert(format!("{oname}_copy"), syn::spanned::Spanned::span(span));
            o[0]
        };
        lower.g.value_mut(id).name = oname;
        lower.g.outputs.push(id);
    }

    // Weights: embedded from a safetensors file, or zeros.
    let mut track = quote! {};
    if let Some(lit) = &opts.weights {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
        let path = std::path::Path::new(&dir).join(lit.value());
        let mut file = burnc_frontends::weights::load(&path).map_err(|e| Error::new_spanned(lit, format!("{e}")))?;
        // PyTorch's BatchNorm counter is no weight.
        file.tensors.retain(|k, _| !k.ends_with(".num_batches_tracked") && !opts.ignore.iter().any(|(_, r)| r.apply(k).is_some()));
        let wopts = WeightsOptions { renames: opts.rename.clone(), ..Default::default() };
        burnc_frontends::safetensors::apply(&mut lower.g, &file, &wopts)
            .map_err(|e| Error::new_spanned(lit, format!("{}: {e}", lit.value())))?;
        let abs = path.display().to_string();
        // Rebuild when the file changes: rustc tracks files that `include_bytes!` reads.
        track = quote! { const _: &[u8] = include_bytes!(#abs); };
    }

    let span_of = |e: &PassError| match e {
        PassError::Node { node, .. } => lower.spans.get(node).copied().unwrap_or_else(|| f.sig.ident.span()),
        _ => f.sig.ident.span(),
    };
    let t_lower = t0.elapsed();
    let mut g = lower.g.clone();
    passes::prepare(&mut g).map_err(|e| Error::new(span_of(&e), format!("{e}")))?;
    let modname = opts.module.clone().unwrap_or_else(|| format_ident!("{}", snake(&name.to_string())));
    let copts = CodegenOptions { weights_file: WEIGHTS_MARKER.into(), source_name: format!("#[model] {name}"), ..Default::default() };
    let gen = codegen::generate(&g, &copts).map_err(|e| Error::new_spanned(&imp.self_ty, format!("burnc: {e}")))?;
    let body = TokenStream::from_str(&gen.source).map_err(|e| Error::new_spanned(&imp.self_ty, format!("internal: generated code does not tokenize: {e}")))?;
    let blob = blob_tokens(&gen.weights, &modname.to_string()).map_err(|e| Error::new_spanned(&imp.self_ty, format!("burnc: cannot write the weights blob: {e}")))?;
    let body = embed_weights(body, &blob);
    if std::env::var_os("BURNC_MACRO_TIMINGS").is_some() {
        eprintln!(
            "burnc #[model] {name}: lower + weights {:.1} ms, compile + codegen + tokens {:.1} ms, {} nodes, {} bytes of weights",
            t_lower.as_secs_f64() * 1e3,
            (t0.elapsed() - t_lower).as_secs_f64() * 1e3,
            g.nodes.len(),
            gen.weights.len()
        );
    }

    // `Net::forward`: the generated forward with the struct's names.
    let fvis = &f.vis;
    let params: Vec<TokenStream> = args
        .iter()
        .map(|(id, dt, shape)| {
            let n: usize = shape.iter().product();
            let ty = format_ident!("{}", codegen::emit::rust_ty(*dt).unwrap_or("f32"));
            quote! { #id: &[#ty; #n] }
        })
        .collect();
    let idents: Vec<&syn::Ident> = args.iter().map(|a| &a.0).collect();
    let doc = format!(" Run the compiled model: arena of [`{modname}::ARENA_BYTES`] bytes, outputs borrowed from it.");
    Ok(quote! {
        /// The compiled model (generated by burnc's `#[model]`).
        #[allow(dead_code, clippy::all)]
        #vis mod #modname {
            #body
        }
        impl #name {
            #[doc = #doc]
            #[allow(dead_code)]
            #fvis fn forward<'a>(&self, arena: &'a mut #modname::Arena, #(#params),*) -> #modname::Outputs<'a> {
                #modname::Model::new().forward(arena, #(#idents),*)
            }
        }
        #track
    })
}

/// Blobs above this are written to a file and included; below, a byte string literal keeps the
/// expansion self-contained.
const INLINE_BLOB_MAX: usize = 4 << 20;

/// The tokens that stand for the weights blob: a byte string literal, or for a large blob
/// (rustc lexes a 90 MB literal slowly and in several times its size of memory) `include_bytes!`
/// of a file named by the blob's hash in `OUT_DIR` (crates with a build script) or the temp
/// directory. Named by content, so a rebuild with the same weights reuses the file.
fn blob_tokens(blob: &[u8], module: &str) -> std::io::Result<TokenStream> {
    if blob.len() <= INLINE_BLOB_MAX {
        return Ok(TokenTree::Literal(Literal::byte_string(blob)).into());
    }
    // FNV-1a over the bytes, 8 at a time (a name, not a security property).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in blob.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let dir = match std::env::var_os("OUT_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join("burnc-macros"),
    };
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{module}-{h:016x}-{}.bin", blob.len()));
    if std::fs::metadata(&path).map(|m| m.len() != blob.len() as u64).unwrap_or(true) {
        // Write then rename, so a concurrent build never includes half a file.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, blob)?;
        std::fs::rename(&tmp, &path)?;
    }
    let p = path.display().to_string();
    Ok(quote! { include_bytes!(#p) })
}

/// Replace `include_bytes!("<marker>")` in the generated tokens with `blob` (the tokens of
/// [`blob_tokens`]; a proc macro has no file next to the module to include).
fn embed_weights(ts: TokenStream, blob: &TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = ts.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if let (TokenTree::Ident(id), Some(TokenTree::Punct(p)), Some(TokenTree::Group(g))) = (&tokens[i], tokens.get(i + 1), tokens.get(i + 2)) {
            if id == "include_bytes" && p.as_char() == '!' && g.stream().to_string().contains(WEIGHTS_MARKER) {
                out.extend(blob.clone());
                i += 3;
                continue;
            }
        }
        match &tokens[i] {
            TokenTree::Group(g) => {
                let mut ng = Group::new(g.delimiter(), embed_weights(g.stream(), blob));
                ng.set_span(g.span());
                out.push(TokenTree::Group(ng));
            }
            t => out.push(t.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}
