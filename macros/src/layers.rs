//! The struct side: each field of a `#[derive(Model)]` struct is a layer, its type
//! (`Conv2d<1, 8, 3>`) giving the sizes and `#[layer(..)]` the options.
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Error, Expr, GenericArgument, PathArguments, Result, Type};

#[derive(Debug, Clone)]
pub enum Kind {
    Linear { inp: usize, out: usize, bias: bool },
    /// `dims` spatial dims (1 or 2).
    Conv { dims: usize, inp: usize, out: usize, k: usize, stride: usize, padding: usize, dilation: usize, groups: usize, bias: bool },
    /// `rank`: the input rank it was declared for (BatchNorm1d: 2 or 3, BatchNorm2d: 4).
    BatchNorm { c: usize, eps: f32, two_d: bool },
    LayerNorm { d: usize, eps: f32 },
    Embedding { n: usize, d: usize },
    Dropout,
    /// `e` wide, `h` heads, inputs `[B, S, E]` (PyTorch's `batch_first = True`).
    MultiHeadAttention { e: usize, h: usize, bias: bool, causal: bool },
    /// Another `#[derive(Model)]` struct, inlined where it is called; its parameters are
    /// named `key.` + its own keys, as nested modules are in a PyTorch state_dict.
    Sub { ty: syn::Ident },
}

#[derive(Debug, Clone)]
pub struct Layer {
    /// The field's name.
    pub name: String,
    /// The weights' key prefix: the field's name unless `#[layer(key = "..")]` says otherwise
    /// (dotted paths allowed, `attention.self.query`).
    pub key: String,
    pub kind: Kind,
    /// `Some(n)` for an array field `[Linear<4, 4>; n]`: n layers keyed `key.0`, `key.1`, ….
    pub count: Option<usize>,
}

pub const KNOWN_LAYERS: &str = "Linear, Conv1d, Conv2d, BatchNorm1d, BatchNorm2d, LayerNorm, Embedding, Dropout, MultiHeadAttention";

impl Layer {
    /// The key prefix of instance `i` (`None` for a field that is not an array).
    pub fn instance_key(&self, i: Option<usize>) -> String {
        match i {
            Some(i) => format!("{}.{i}", self.key),
            None => self.key.clone(),
        }
    }

    /// The parameters one instance owns (keyed under `key`): (state-dict name, shape), PyTorch's
    /// names and layouts. Sub-models own none themselves; their layers do.
    pub fn params(&self, key: &str) -> Vec<(String, Vec<usize>)> {
        let p = |s: &str| format!("{key}.{s}");
        match &self.kind {
            Kind::Linear { inp, out, bias } => {
                let mut v = vec![(p("weight"), vec![*out, *inp])];
                if *bias {
                    v.push((p("bias"), vec![*out]));
                }
                v
            }
            Kind::Conv { dims, inp, out, k, groups, bias, .. } => {
                let mut w = vec![*out, inp / groups];
                w.extend(std::iter::repeat_n(*k, *dims));
                let mut v = vec![(p("weight"), w)];
                if *bias {
                    v.push((p("bias"), vec![*out]));
                }
                v
            }
            Kind::BatchNorm { c, .. } => ["weight", "bias", "running_mean", "running_var"].iter().map(|s| (p(s), vec![*c])).collect(),
            Kind::LayerNorm { d, .. } => vec![(p("weight"), vec![*d]), (p("bias"), vec![*d])],
            Kind::Embedding { n, d } => vec![(p("weight"), vec![*n, *d])],
            Kind::Dropout | Kind::Sub { .. } => vec![],
            Kind::MultiHeadAttention { e, bias, .. } => {
                let mut v = vec![(p("in_proj_weight"), vec![3 * e, *e])];
                if *bias {
                    v.push((p("in_proj_bias"), vec![3 * e]));
                }
                v.push((p("out_proj.weight"), vec![*e, *e]));
                if *bias {
                    v.push((p("out_proj.bias"), vec![*e]));
                }
                v
            }
        }
    }

    /// How the type reads, for messages: `Linear<784, 10>`.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Linear { inp, out, .. } => format!("Linear<{inp}, {out}>"),
            Kind::Conv { dims, inp, out, k, .. } => format!("Conv{dims}d<{inp}, {out}, {k}>"),
            Kind::BatchNorm { c, two_d, .. } => format!("BatchNorm{}d<{c}>", if *two_d { 2 } else { 1 }),
            Kind::LayerNorm { d, .. } => format!("LayerNorm<{d}>"),
            Kind::Embedding { n, d } => format!("Embedding<{n}, {d}>"),
            Kind::Dropout => "Dropout".into(),
            Kind::MultiHeadAttention { e, h, .. } => format!("MultiHeadAttention<{e}, {h}>"),
            Kind::Sub { ty } => ty.to_string(),
        }
    }
}

/// Evaluate a const generic argument or attribute value: integer literals and `+ - * /` of them.
pub fn const_int(e: &Expr) -> Result<i64> {
    match e {
        Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.base10_parse::<i64>(),
            _ => Err(Error::new_spanned(e, "expected an integer")),
        },
        Expr::Paren(p) => const_int(&p.expr),
        Expr::Group(g) => const_int(&g.expr),
        Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            syn::Stmt::Expr(e, None) => const_int(e),
            _ => Err(Error::new_spanned(e, "expected an integer expression")),
        },
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => Ok(-const_int(&u.expr)?),
        Expr::Binary(b) => {
            let (l, r) = (const_int(&b.left)?, const_int(&b.right)?);
            let v = match b.op {
                syn::BinOp::Add(_) => l.checked_add(r),
                syn::BinOp::Sub(_) => l.checked_sub(r),
                syn::BinOp::Mul(_) => l.checked_mul(r),
                syn::BinOp::Div(_) if r != 0 => Some(l / r),
                _ => return Err(Error::new_spanned(e, "only + - * / of integers here")),
            };
            v.ok_or_else(|| Error::new_spanned(e, "integer overflow"))
        }
        _ => Err(Error::new_spanned(e, "expected an integer literal (or `{ .. }` arithmetic of literals)")),
    }
}

fn positive(e: &Expr) -> Result<usize> {
    let v = const_int(e)?;
    if v <= 0 {
        return Err(Error::new_spanned(e, format!("expected a positive size, got {v}")));
    }
    Ok(v as usize)
}

/// Options from `#[layer(key = value, ..)]`.
#[derive(Default)]
struct Opts {
    stride: Option<usize>,
    padding: Option<usize>,
    dilation: Option<usize>,
    groups: Option<usize>,
    bias: Option<bool>,
    eps: Option<f32>,
    causal: Option<bool>,
    key: Option<String>,
    spans: Vec<(&'static str, Span)>,
}

fn parse_opts(field: &syn::Field) -> Result<Opts> {
    let mut o = Opts::default();
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("layer")) {
        attr.parse_nested_meta(|m| {
            let key = m.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
            let span = m.path.span();
            let int = |m: &syn::meta::ParseNestedMeta| -> Result<usize> {
                let e: Expr = m.value()?.parse()?;
                let v = const_int(&e)?;
                if v < 0 {
                    return Err(Error::new_spanned(&e, "expected a non-negative integer"));
                }
                Ok(v as usize)
            };
            match key.as_str() {
                "stride" => (o.stride = Some(int(&m)?), o.spans.push(("stride", span))).1,
                "padding" => (o.padding = Some(int(&m)?), o.spans.push(("padding", span))).1,
                "dilation" => (o.dilation = Some(int(&m)?), o.spans.push(("dilation", span))).1,
                "groups" => (o.groups = Some(int(&m)?), o.spans.push(("groups", span))).1,
                "bias" => {
                    let b: syn::LitBool = m.value()?.parse()?;
                    o.bias = Some(b.value);
                    o.spans.push(("bias", span));
                }
                "causal" => {
                    let b: syn::LitBool = m.value()?.parse()?;
                    o.causal = Some(b.value);
                    o.spans.push(("causal", span));
                }
                "key" => {
                    let k: syn::LitStr = m.value()?.parse()?;
                    let v = k.value();
                    if v.is_empty() || v.split('.').any(str::is_empty) {
                        return Err(Error::new_spanned(&k, "a key is a dotted path of names: `attention.self.query`"));
                    }
                    o.key = Some(v);
                }
                "eps" => {
                    let e: Expr = m.value()?.parse()?;
                    let v = match &e {
                        Expr::Lit(syn::ExprLit { lit: syn::Lit::Float(f), .. }) => f.base10_parse::<f32>()?,
                        Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse::<f32>()?,
                        _ => return Err(Error::new_spanned(&e, "expected a number")),
                    };
                    o.eps = Some(v);
                    o.spans.push(("eps", span));
                }
                _ => return Err(m.error(format!("unknown layer option `{key}` (known: key, stride, padding, dilation, groups, bias, eps, causal)"))),
            }
            Ok(())
        })?;
    }
    Ok(o)
}

/// Read one field.
pub fn parse_field(field: &syn::Field) -> Result<Layer> {
    let ident = field.ident.as_ref().ok_or_else(|| Error::new_spanned(field, "#[derive(Model)] needs named fields"))?;
    // `[Layer; N]`: N layers of one type, keyed `field.0`, `field.1`, ….
    let (ty, count) = match &field.ty {
        Type::Array(a) => {
            let n = positive(&a.len)?;
            (&*a.elem, Some(n))
        }
        t => (t, None),
    };
    let o = parse_opts(field)?;
    let kind = parse_kind(ty, &o)?;
    Ok(Layer { name: ident.to_string(), key: o.key.clone().unwrap_or_else(|| ident.to_string()), kind, count })
}

fn parse_kind(ty: &Type, o: &Opts) -> Result<Kind> {
    let Type::Path(tp) = ty else {
        return Err(Error::new_spanned(ty, format!("a layer type is expected here ({KNOWN_LAYERS}, another #[derive(Model)] struct, or an array `[T; N]` of them)")));
    };
    let seg = tp.path.segments.last().ok_or_else(|| Error::new_spanned(ty, "empty type"))?;
    let args: Vec<&Expr> = match &seg.arguments {
        PathArguments::None => vec![],
        PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .map(|g| match g {
                GenericArgument::Const(e) => Ok(e),
                other => Err(Error::new_spanned(other, "layer sizes are integer literals (or `{ .. }` arithmetic of literals)")),
            })
            .collect::<Result<_>>()?,
        PathArguments::Parenthesized(p) => return Err(Error::new_spanned(p, "unexpected parentheses")),
    };
    let ty_name = seg.ident.to_string();
    let want = |n: usize, form: &str| -> Result<()> {
        if args.len() != n {
            return Err(Error::new_spanned(ty, format!("`{ty_name}` takes {n} sizes: {form}")));
        }
        Ok(())
    };
    let allow = |keys: &[&str]| -> Result<()> {
        for (k, span) in &o.spans {
            if !keys.contains(k) {
                return Err(Error::new(*span, format!("`{ty_name}` has no option `{k}` (it takes: {})", if keys.is_empty() { "none".to_string() } else { keys.join(", ") })));
            }
        }
        Ok(())
    };
    let kind = match ty_name.as_str() {
        "Linear" => {
            want(2, "Linear<IN, OUT>")?;
            allow(&["bias"])?;
            Kind::Linear { inp: positive(args[0])?, out: positive(args[1])?, bias: o.bias.unwrap_or(true) }
        }
        "Conv1d" | "Conv2d" => {
            want(3, &format!("{ty_name}<IN, OUT, KERNEL>"))?;
            allow(&["stride", "padding", "dilation", "groups", "bias"])?;
            let (inp, out) = (positive(args[0])?, positive(args[1])?);
            let groups = o.groups.unwrap_or(1).max(1);
            if inp % groups != 0 || out % groups != 0 {
                return Err(Error::new_spanned(ty, format!("groups = {groups} must divide both IN ({inp}) and OUT ({out})")));
            }
            Kind::Conv {
                dims: if ty_name == "Conv1d" { 1 } else { 2 },
                inp,
                out,
                k: positive(args[2])?,
                stride: o.stride.unwrap_or(1).max(1),
                padding: o.padding.unwrap_or(0),
                dilation: o.dilation.unwrap_or(1).max(1),
                groups,
                bias: o.bias.unwrap_or(true),
            }
        }
        "BatchNorm1d" | "BatchNorm2d" => {
            want(1, &format!("{ty_name}<CHANNELS>"))?;
            allow(&["eps"])?;
            Kind::BatchNorm { c: positive(args[0])?, eps: o.eps.unwrap_or(1e-5), two_d: ty_name == "BatchNorm2d" }
        }
        "LayerNorm" => {
            want(1, "LayerNorm<DIM>")?;
            allow(&["eps"])?;
            Kind::LayerNorm { d: positive(args[0])?, eps: o.eps.unwrap_or(1e-5) }
        }
        "Embedding" => {
            want(2, "Embedding<NUM, DIM>")?;
            allow(&[])?;
            Kind::Embedding { n: positive(args[0])?, d: positive(args[1])? }
        }
        "Dropout" => {
            allow(&[])?;
            Kind::Dropout
        }
        "MultiHeadAttention" => {
            want(2, "MultiHeadAttention<EMBED, HEADS>")?;
            allow(&["bias", "causal"])?;
            let (e, h) = (positive(args[0])?, positive(args[1])?);
            if e % h != 0 {
                return Err(Error::new_spanned(ty, format!("HEADS ({h}) must divide EMBED ({e})")));
            }
            Kind::MultiHeadAttention { e, h, bias: o.bias.unwrap_or(true), causal: o.causal.unwrap_or(false) }
        }
        // A plain name that is no layer: another `#[derive(Model)]` struct (sub-models take no
        // sizes; `Conv3d<1, 4, 3>` is a misspelt layer, not a sub-model).
        _ if args.is_empty() && tp.qself.is_none() && tp.path.segments.len() == 1 => {
            allow(&[])?;
            Kind::Sub { ty: seg.ident.clone() }
        }
        other => return Err(Error::new_spanned(&seg.ident, format!("unknown layer type `{other}` (known: {KNOWN_LAYERS})"))),
    };
    Ok(kind)
}

/// Every field of the struct, in order.
pub fn parse_struct(input: &syn::DeriveInput) -> Result<Vec<Layer>> {
    let syn::Data::Struct(s) = &input.data else {
        return Err(Error::new_spanned(&input.ident, "#[derive(Model)] goes on a struct whose fields are layers"));
    };
    if !input.generics.params.is_empty() {
        return Err(Error::new_spanned(&input.generics, "#[derive(Model)] structs take no generic parameters"));
    }
    match &s.fields {
        syn::Fields::Named(f) => f.named.iter().map(parse_field).collect(),
        syn::Fields::Unit => Ok(vec![]),
        syn::Fields::Unnamed(f) => Err(Error::new_spanned(f, "#[derive(Model)] needs named fields (they name the weights)")),
    }
}
