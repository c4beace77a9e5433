//! burnc's Rust frontend: a model written in Rust, compiled at build time.
//!
//! ```ignore
//! use burnc_macros::{model, Model};
//! use burnc_runtime::nn::{Conv2d, Linear};
//!
//! #[derive(Model)]
//! struct Net {
//!     #[layer(padding = 1)]
//!     conv1: Conv2d<1, 8, 3>,
//!     fc: Linear<6272, 10>,
//! }
//!
//! #[model(weights = "net.safetensors")]
//! impl Net {
//!     fn forward(&self, x: Tensor<1, 1, 28, 28>) -> Tensor<1, 10> {
//!         let x = self.conv1(x).relu();
//!         self.fc(x.flatten(1))
//!     }
//! }
//!
//! // expands to `mod net { .. }` — the module `burnc model.onnx -o net.rs` would write — and
//! // `impl Net { fn new(), fn forward(&self, &mut net::Arena, &[f32; 784]) -> net::Outputs }`.
//! let out = Net::new().forward(&mut net::Arena::new(), &[0.0; 784]);
//! ```
//!
//! Models made of models: a field whose type is another `#[derive(Model)]` struct (or an array
//! `[Block; 6]` of them) is a sub-model, inlined where `forward` calls it (`self.block(x)`,
//! `self.blocks[0](x)`, `for b in &self.blocks { x = b(x); }`), its parameters keyed under the
//! field's key like a PyTorch state_dict. Each `#[model]` also leaves a hidden
//! `macro_rules! __burnc_def_<Name>` holding its struct and impl; a model that needs a sub-model
//! expands to a call of that macro with its own input, which calls [`__model_impl!`] again with
//! the definition appended (`@def { struct } { impl }`), until every sub-model is known. So a
//! sub-model is defined before the models that use it; `#[model(inline)]` marks one that
//! compiles to no module of its own.
//!
//! How it works: a proc macro only sees its own item, so `#[derive(Model)]` emits a hidden
//! `macro_rules! __burnc_model_Net` holding the struct's tokens, and `#[model]` on `impl Net`
//! expands to a call of it with the impl; that macro hands both to the hidden
//! [`__model_impl!`], which lowers `forward` to burnc's IR, runs the compiler and returns the
//! generated module. Spans of the user's tokens survive the round trip, so mistakes in the
//! forward body are compile errors at the expression that made them.
use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::{parse_macro_input, DeriveInput};

mod cache;
mod expand;
mod layers;
mod lower;
#[cfg(test)]
mod tests;

/// Declares a model's layers: every field is a layer of `burnc_runtime::nn` (`Linear<IN, OUT>`,
/// `Conv2d<IN, OUT, K>`, …), options in `#[layer(stride = 2, padding = 1)]`. Pair it with
/// `#[model]` on an `impl` of the same struct, later in the same module.
#[proc_macro_derive(Model, attributes(layer))]
pub fn derive_model(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    // Check the fields now, so a bad layer is reported even before `#[model]` is written.
    if let Err(e) = layers::parse_struct(&input) {
        return e.to_compile_error().into();
    }
    let name = &input.ident;
    let mac = format_ident!("__burnc_model_{}", name);
    let (fields, inits): (Vec<_>, Vec<_>) = match &input.data {
        syn::Data::Struct(s) => s
            .fields
            .iter()
            .filter_map(|f| {
                let init = match &f.ty {
                    // Arrays of any length (Default stops at 32).
                    syn::Type::Array(_) => quote! { ::core::array::from_fn(|_| ::core::default::Default::default()) },
                    _ => quote! { ::core::default::Default::default() },
                };
                Some((f.ident.clone()?, init))
            })
            .unzip(),
        _ => (vec![], vec![]),
    };
    quote! {
        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #mac {
            ($($tokens:tt)*) => {
                ::burnc_macros::__model_impl! { { #input } $($tokens)* }
            };
        }
        impl #name {
            /// The model's layers hold nothing at run time: weights live in the generated module.
            #[allow(dead_code)]
            pub fn new() -> Self {
                #name { #( #fields: #inits, )* }
            }
            // The fields are read by the macro, not at run time; this keeps rustc's dead-code
            // lint from saying otherwise.
            #[doc(hidden)]
            #[allow(dead_code)]
            fn __burnc_layers(&self) {
                #( let _ = &self.#fields; )*
            }
        }
        // Sub-models are fields of other models.
        impl ::core::default::Default for #name {
            fn default() -> Self {
                Self::new()
            }
        }
    }
    .into()
}

/// Compiles the `forward` method of a `#[derive(Model)]` struct. Options:
/// `#[model(weights = "file.safetensors")]` embeds weights (path relative to the crate's
/// `Cargo.toml`; keys are `field.weight`, `field.bias`, … as in a PyTorch state_dict; without
/// it the weights are zeros and `Model::with_weights` takes them at run time);
/// `module = "name"` names the generated module (default: the struct's name in snake_case).
#[proc_macro_attribute]
pub fn model(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = proc_macro2::TokenStream::from(attr);
    let imp = parse_macro_input!(item as syn::ItemImpl);
    let name = match &*imp.self_ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.clone()),
        _ => None,
    };
    let Some(name) = name else {
        return syn::Error::new_spanned(&imp.self_ty, "#[model] goes on `impl Name { fn forward .. }` of a #[derive(Model)] struct")
            .to_compile_error()
            .into();
    };
    let mac = format_ident!("__burnc_model_{}", name, span = name.span());
    quote! { #mac! { [ #attr ] #imp } }.into()
}

/// What `__model_impl!` receives: the struct, the `#[model(..)]` options, the impl, and the
/// definitions of sub-models gathered so far (`@def { struct } { impl }`, one per struct).
pub(crate) struct ImplInput {
    pub strukt: DeriveInput,
    pub attr: proc_macro2::TokenStream,
    pub imp: syn::ItemImpl,
    pub defs: Vec<(DeriveInput, syn::ItemImpl)>,
    /// A sub-model failed to lower (its error is already reported): compile nothing more.
    pub broken_defs: bool,
}

impl Parse for ImplInput {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let s;
        syn::braced!(s in input);
        let strukt: DeriveInput = s.parse()?;
        let a;
        syn::bracketed!(a in input);
        let attr: proc_macro2::TokenStream = a.parse()?;
        let imp: syn::ItemImpl = input.parse()?;
        let mut defs = Vec::new();
        let mut broken_defs = false;
        while input.peek(syn::Token![@]) {
            input.parse::<syn::Token![@]>()?;
            let kw: syn::Ident = input.parse()?;
            if kw != "def" {
                return Err(syn::Error::new_spanned(kw, "internal: expected `@def`"));
            }
            let (s, i);
            syn::braced!(s in input);
            syn::braced!(i in input);
            defs.push((s.parse()?, i.parse()?));
            if input.peek(syn::Token![!]) {
                input.parse::<syn::Token![!]>()?;
                broken_defs = true;
            }
        }
        Ok(ImplInput { strukt, attr, imp, defs, broken_defs })
    }
}

/// Implementation detail of `#[model]` (called by the `macro_rules!` that `#[derive(Model)]`
/// writes, with the struct and the impl; called again with each sub-model's definition
/// appended until every sub-model is known).
#[doc(hidden)]
#[proc_macro]
pub fn __model_impl(input: TokenStream) -> TokenStream {
    let raw = proc_macro2::TokenStream::from(input.clone());
    let input = parse_macro_input!(input as ImplInput);
    match expand::expand(&input, raw) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}
