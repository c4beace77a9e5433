//! From the struct and the `#[model]` impl to the generated module: lower `forward`, apply the
//! weights, run the compiler, and parse the generated source back into tokens.
use crate::layers;
use crate::lower::{tensor_type, Lower};
use burnc_compiler::codegen::{self, CodegenOptions};
use burnc_compiler::ir::{Op, UnaryOp, ValueKind};
use burnc_compiler::passes::{self, PassError};
use proc_macro2::{Group, Literal, TokenStream, TokenTree};
use quote::{format_ident, quote};
use std::str::FromStr;
use syn::{Error, Result};

/// The `include_bytes!` path codegen is given; the expansion puts the blob in its place.
const WEIGHTS_MARKER: &str = "weights embedded by #[model]";

struct Options {
    weights: Option<syn::LitStr>,
    module: Option<syn::Ident>,
}

fn parse_options(attr: TokenStream) -> Result<Options> {
    let mut o = Options { weights: None, module: None };
    let parser = syn::meta::parser(|m| {
        if m.path.is_ident("weights") {
            o.weights = Some(m.value()?.parse()?);
        } else if m.path.is_ident("module") {
            let s: syn::LitStr = m.value()?.parse()?;
            o.module = Some(s.parse()?);
        } else {
            return Err(m.error("unknown #[model] option (known: weights = \"file.safetensors\", module = \"name\")"));
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

pub fn expand(strukt: &syn::DeriveInput, attr: TokenStream, imp: &syn::ItemImpl) -> Result<TokenStream> {
    let t0 = std::time::Instant::now();
    let layers = layers::parse_struct(strukt)?;
    let opts = parse_options(attr)?;
    let name = &strukt.ident;
    let vis = &strukt.vis;

    // The impl holds `forward` and nothing else.
    let mut forward = None;
    for item in &imp.items {
        match item {
            syn::ImplItem::Fn(f) if f.sig.ident == "forward" => forward = Some(f),
            other => return Err(Error::new_spanned(other, "a #[model] impl holds only `fn forward`")),
        }
    }
    let f = forward.ok_or_else(|| Error::new_spanned(&imp.self_ty, "a #[model] impl needs `fn forward(&self, x: Tensor<..>) -> Tensor<..>`"))?;

    let mut lower = Lower::new(&name.to_string(), &layers);
    let mut args = Vec::new();
    let mut has_self = false;
    for input in &f.sig.inputs {
        match input {
            syn::FnArg::Receiver(r) if r.reference.is_some() && r.mutability.is_none() => has_self = true,
            syn::FnArg::Receiver(r) => return Err(Error::new_spanned(r, "`forward` takes `&self`")),
            syn::FnArg::Typed(pt) => {
                let syn::Pat::Ident(pi) = &*pt.pat else {
                    return Err(Error::new_spanned(&pt.pat, "expected an argument name"));
                };
                let (dtype, shape) = tensor_type(&pt.ty)?;
                lower.input(&pi.ident.to_string(), dtype, shape.clone());
                args.push((pi.ident.clone(), dtype, shape));
            }
        }
    }
    if !has_self {
        return Err(Error::new_spanned(&f.sig, "`forward` takes `&self` first"));
    }
    let outs = lower.body(&f.block)?;

    // The declared return type: one tensor, or a tuple of them.
    let declared: Vec<(&syn::Type, _)> = match &f.sig.output {
        syn::ReturnType::Default => return Err(Error::new_spanned(&f.sig, "`forward` must declare what it returns: `-> Tensor<1, 10>`")),
        syn::ReturnType::Type(_, ty) => match &**ty {
            syn::Type::Tuple(t) => t.elems.iter().map(|t| Ok((t, tensor_type(t)?))).collect::<Result<_>>()?,
            t => vec![(t, tensor_type(t)?)],
        },
    };
    if declared.len() != outs.len() {
        return Err(Error::new_spanned(&f.sig.output, format!("`forward` declares {} outputs, the body returns {}", declared.len(), outs.len())));
    }
    for ((ty, (dt, shape)), (t, span)) in declared.iter().zip(&outs) {
        if *shape != t.shape || *dt != t.dtype {
            let mut e = Error::new_spanned(span, format!("shape mismatch: `forward` returns {:?} ({}), but this is {:?} ({})", shape, dt, t.shape, t.dtype));
            e.combine(Error::new_spanned(ty, "declared here"));
            return Err(e);
        }
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
        let mut file = burnc_frontends::safetensors::load(&path).map_err(|e| Error::new_spanned(lit, format!("{e}")))?;
        // PyTorch's BatchNorm counter is no weight.
        file.tensors.retain(|k, _| !k.ends_with(".num_batches_tracked"));
        burnc_frontends::safetensors::apply(&mut lower.g, &file, &Default::default())
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
    let body = embed_weights(body, &gen.weights);
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

/// Replace `include_bytes!("<marker>")` in the generated tokens with the blob as a byte string
/// literal (a proc macro has no file next to the module to include).
fn embed_weights(ts: TokenStream, blob: &[u8]) -> TokenStream {
    let tokens: Vec<TokenTree> = ts.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if let (TokenTree::Ident(id), Some(TokenTree::Punct(p)), Some(TokenTree::Group(g))) = (&tokens[i], tokens.get(i + 1), tokens.get(i + 2)) {
            if id == "include_bytes" && p.as_char() == '!' && g.stream().to_string().contains(WEIGHTS_MARKER) {
                out.push(TokenTree::Literal(Literal::byte_string(blob)));
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
