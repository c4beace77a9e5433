//! From the struct and the `#[model]` impl to the generated module: lower `forward`, apply the
//! weights, run the compiler, and parse the generated source back into tokens.
use crate::layers::{self, Kind, Layer};
use crate::lower::{check_returns, forward_args, Defs, Lower, SubDef};
use crate::{cache, ImplInput};
use burnc_compiler::codegen::{self, CodegenOptions, LinkFrom, LinkedWeights};
use burnc_compiler::ir::{Op, UnaryOp, ValueKind};
use burnc_compiler::passes::{self, PassError};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use burnc_frontends::safetensors::{Rename, WeightsOptions};
use std::collections::HashMap;
use std::str::FromStr;
use syn::{Error, Result};

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
    let entry = cache::Entry::new(&raw, opts.weights.as_ref().map(weights_path).as_deref(), &module_name(&opts, name).to_string());
    if let Some(ts) = entry.load() {
        let d = define(false);
        return Ok(quote! { #ts #d });
    }
    match compile(input, &layers, &defs, &opts, t0, &entry) {
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
    let (strukt, attr, imp) = (&input.strukt, &input.attr, &input.imp);
    let entry = cache::Entry::new(&quote! { #strukt #attr #imp }, opts.weights.as_ref().map(weights_path).as_deref(), &module_name(&opts, &strukt.ident).to_string());
    compile(input, &layers, &Defs::new(), &opts, std::time::Instant::now(), &entry)
}

/// A `weights = "…"` file, relative to the crate's manifest.
fn weights_path(lit: &syn::LitStr) -> std::path::PathBuf {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    std::path::Path::new(&dir).join(lit.value())
}

/// The generated module's name: `module = …`, else the struct's name in snake case.
fn module_name(opts: &Options, name: &syn::Ident) -> syn::Ident {
    opts.module.clone().unwrap_or_else(|| format_ident!("{}", snake(&name.to_string())))
}

/// Lower, compile and generate the module (nothing for an `inline` model), its blob written to
/// `entry`'s file and the expansion stored there.
fn compile(input: &ImplInput, layers: &[Layer], defs: &Defs, opts: &Options, t0: std::time::Instant, entry: &cache::Entry) -> Result<TokenStream> {
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
        let path = weights_path(lit);
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
    let modname = module_name(opts, name);
    // The blob is assembled into the module from its file (or included, on targets without
    // that route): rustc never lexes or embeds the bytes itself.
    let blob_file = entry.blob.display().to_string();
    let symbol = weights_symbol(&modname.to_string(), &entry.key);
    let copts = CodegenOptions {
        weights_file: blob_file.clone(),
        source_name: format!("#[model] {name}"),
        linked_weights: Some(LinkedWeights { symbol, from: LinkFrom::Assembler(blob_file) }),
        ..Default::default()
    };
    let gen = codegen::generate(&g, &copts).map_err(|e| Error::new_spanned(&imp.self_ty, format!("burnc: {e}")))?;
    let body = TokenStream::from_str(&gen.source).map_err(|e| Error::new_spanned(&imp.self_ty, format!("internal: generated code does not tokenize: {e}")))?;
    entry.write_blob(&gen.weights).map_err(|e| Error::new_spanned(&imp.self_ty, format!("burnc: cannot write the weights blob {}: {e}", entry.blob.display())))?;
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
    let expansion = quote! {
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
    };
    entry.store(&expansion, gen.weights.len());
    Ok(expansion)
}

/// The blob's symbol: the package, module and cache key make it unique in a link.
fn weights_symbol(module: &str, key: &str) -> String {
    codegen::weights::symbol(&std::env::var("CARGO_PKG_NAME").unwrap_or_default(), &format!("{module}_{key}"))
}
