//! The service as the macro understands it: its options, and for each
//! method its wire name, shape, message types and codec. Every check that
//! can fail here does, with an error spanning the user's code.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::{
    Attribute, FnArg, GenericArgument, Ident, ItemTrait, LitStr, Pat, Path, PathArguments,
    ReturnType, TraitItem, TraitItemFn, Type,
};

/// Longest method name the runtime accepts (`weft_rpc::method::MAX_METHOD_LEN`).
const MAX_METHOD_LEN: usize = 256;

/// The options of `#[weft::service(...)]`.
pub(crate) struct Options {
    /// `package = "a.b"`: the wire names are `a.b.Trait/Method`.
    package: Option<LitStr>,
    /// `codec = path`: the codec of every method that names none.
    codec: Option<Path>,
    /// `rpc = path`: where `weft_rpc` is (default `::weft::rpc`).
    rpc: Option<Path>,
}

impl Options {
    pub(crate) fn parse(args: TokenStream) -> syn::Result<Options> {
        let mut o = Options {
            package: None,
            codec: None,
            rpc: None,
        };
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("package") {
                o.package = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("codec") {
                o.codec = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("rpc") {
                o.rpc = Some(meta.value()?.parse()?);
            } else {
                return Err(
                    meta.error("expected `package = \"...\"`, `codec = Path` or `rpc = path`")
                );
            }
            Ok(())
        });
        syn::parse::Parser::parse2(parser, args)?;
        Ok(o)
    }

    /// The path of the runtime crate.
    pub(crate) fn rpc(&self) -> TokenStream {
        match &self.rpc {
            Some(p) => p.to_token_stream(),
            None => quote!(::weft::rpc),
        }
    }

    /// The caller a generated client holds unless told otherwise: the
    /// facade's `Channel` (the client that stays up, as tonic's clients
    /// default to theirs); with `rpc = path` (no facade), the one-connection
    /// `Client` of that crate.
    pub(crate) fn default_caller(&self) -> TokenStream {
        match &self.rpc {
            Some(p) => quote!(#p::Client),
            None => quote!(::weft::Channel),
        }
    }
}

/// The four call shapes, with the message types they carry.
pub(crate) enum Shape {
    /// `(ctx, Req) -> Result<Resp, Status>`
    Unary,
    /// `(ctx, Req, Responses<Resp>) -> Result<(), Status>`
    ServerStreaming { sink: Box<Type> },
    /// `(ctx, Requests<Req>) -> Result<Resp, Status>`
    ClientStreaming { source: Box<Type> },
    /// `(ctx, Requests<Req>, Responses<Resp>) -> Result<(), Status>`
    Bidi { source: Box<Type>, sink: Box<Type> },
}

/// Whether a method's calls may run twice (`#[weft(idempotent)]`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idempotency {
    /// Not declared: retried only when refused retry-safe.
    Unknown,
    /// Declared: the generated client marks each call idempotent.
    Idempotent,
}

/// One method of the service.
pub(crate) struct Method {
    pub(crate) ident: Ident,
    /// The name of its wire-name constant (`bulk_upload` → `BULK_UPLOAD`).
    pub(crate) konst: Ident,
    pub(crate) docs: Vec<Attribute>,
    /// The canonical wire name, in the declared case (what the router
    /// stores and the call sends).
    pub(crate) wire: String,
    pub(crate) idempotency: Idempotency,
    pub(crate) shape: Shape,
    pub(crate) request: Type,
    pub(crate) response: Type,
    pub(crate) codec: TokenStream,
    pub(crate) span: Span,
}

/// Parses and checks every method of `item`, stripping the `#[weft(...)]`
/// attributes and turning each `async fn` into a `Send` future.
pub(crate) fn methods(item: &mut ItemTrait, opts: &Options) -> syn::Result<Vec<Method>> {
    let service = item.ident.to_string();
    let default_codec = match &opts.codec {
        Some(p) => p.to_token_stream(),
        None => {
            let rpc = opts.rpc();
            quote!(#rpc::Json)
        }
    };
    let mut out: Vec<Method> = Vec::new();
    let mut errors: Option<syn::Error> = None;
    for it in &mut item.items {
        let TraitItem::Fn(f) = it else {
            push(
                &mut errors,
                syn::Error::new(
                    it.span(),
                    "a #[weft::service] trait holds only `async fn` methods",
                ),
            );
            continue;
        };
        match method(f, &service, opts, &default_codec) {
            Ok(m) => {
                // The router refuses names that differ only in case (it
                // still finds a method by an earlier release's lower-cased
                // name), so the macro does too, at compile time.
                if let Some(prev) = out.iter().find(|p| p.wire.eq_ignore_ascii_case(&m.wire)) {
                    let why = if prev.wire == m.wire {
                        format!("wire name {:?} is also used by `{}`", m.wire, prev.ident)
                    } else {
                        format!(
                            "wire name {:?} is also used by `{}` (as {:?}: names differing \
                             only in case are one method)",
                            m.wire, prev.ident, prev.wire
                        )
                    };
                    let e = syn::Error::new(m.span, why);
                    push(&mut errors, e);
                }
                out.push(m);
            }
            Err(e) => push(&mut errors, e),
        }
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn push(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// What `#[weft(...)]` on a method says.
struct MethodAttrs {
    name: Option<LitStr>,
    codec: Option<Path>,
    idempotency: Idempotency,
}

fn method_attrs(f: &mut TraitItemFn) -> syn::Result<MethodAttrs> {
    let mut a = MethodAttrs {
        name: None,
        codec: None,
        idempotency: Idempotency::Unknown,
    };
    let mut kept = Vec::new();
    for attr in std::mem::take(&mut f.attrs) {
        if !attr.path().is_ident("weft") {
            kept.push(attr);
            continue;
        }
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                a.name = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("codec") {
                a.codec = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("idempotent") {
                a.idempotency = Idempotency::Idempotent;
            } else {
                return Err(meta.error("expected `name = \"...\"`, `codec = Path` or `idempotent`"));
            }
            Ok(())
        })?;
    }
    f.attrs = kept;
    Ok(a)
}

fn method(
    f: &mut TraitItemFn,
    service: &str,
    opts: &Options,
    default_codec: &TokenStream,
) -> syn::Result<Method> {
    let attrs = method_attrs(f)?;
    let sig = &f.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span,
            "a #[weft::service] method must be an `async fn`",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "a #[weft::service] method cannot be generic: its types are its wire contract",
        ));
    }
    if let Some(d) = &f.default {
        return Err(syn::Error::new(
            d.span(),
            "a #[weft::service] method has no default body: implement it in the `impl`",
        ));
    }
    let mut args = sig.inputs.iter();
    match args.next() {
        Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
        other => {
            let span = other.map_or(sig.ident.span(), Spanned::span);
            return Err(syn::Error::new(
                span,
                "a #[weft::service] method takes `&self` first",
            ));
        }
    }
    let ctx_err = || {
        syn::Error::new(
            sig.paren_token.span.join(),
            "a #[weft::service] method takes the call's `Context` after `&self`: `ctx: Context`",
        )
    };
    let ctx = typed_arg(args.next()).ok_or_else(ctx_err)?;
    if last_ident(ctx).is_none_or(|i| i != "Context") {
        return Err(ctx_err());
    }
    let rest: Vec<&Type> = args
        .map(|a| typed_arg(Some(a)))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            syn::Error::new(
                sig.inputs.span(),
                "a #[weft::service] method's arguments are `name: Type`",
            )
        })?;
    let ok = ok_type(&sig.output)?;
    let is = |t: &Type, name: &str| last_ident(t).is_some_and(|i| i == name);
    let shape_err = || {
        syn::Error::new(
            sig.inputs.span(),
            "expected `(&self, ctx: Context, request: Req)`, \
             `(&self, ctx: Context, request: Req, responses: Responses<Resp>)`, \
             `(&self, ctx: Context, requests: Requests<Req>)` or \
             `(&self, ctx: Context, requests: Requests<Req>, responses: Responses<Resp>)`",
        )
    };
    let (shape, request, response) = match rest.as_slice() {
        [req] if is(req, "Requests") => (
            Shape::ClientStreaming {
                source: Box::new((*req).clone()),
            },
            first_arg(req)?,
            ok.clone(),
        ),
        [req] if !is(req, "Responses") => (Shape::Unary, (*req).clone(), ok.clone()),
        [req, sink] if is(sink, "Responses") && !is(req, "Responses") => {
            unit_ok(&ok)?;
            let response = first_arg(sink)?;
            if is(req, "Requests") {
                let shape = Shape::Bidi {
                    source: Box::new((*req).clone()),
                    sink: Box::new((*sink).clone()),
                };
                (shape, first_arg(req)?, response)
            } else {
                let shape = Shape::ServerStreaming {
                    sink: Box::new((*sink).clone()),
                };
                (shape, (*req).clone(), response)
            }
        }
        _ => return Err(shape_err()),
    };
    let wire = wire_name(&attrs.name, opts, service, &sig.ident)?;
    let codec = match &attrs.codec {
        Some(p) => p.to_token_stream(),
        None => default_codec.clone(),
    };
    let span = sig.ident.span();
    let ident = sig.ident.clone();
    let docs = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .cloned()
        .collect();
    into_send_future(f);
    let konst = Ident::new(&screaming(&ident), ident.span());
    Ok(Method {
        ident,
        konst,
        docs,
        wire,
        idempotency: attrs.idempotency,
        shape,
        request,
        response,
        codec,
        span,
    })
}

/// `async fn f(..) -> R;` becomes `fn f(..) -> impl Future<Output = R> + Send;`
/// so the router can run it on any worker (an implementation still writes
/// `async fn`).
fn into_send_future(f: &mut TraitItemFn) {
    f.sig.asyncness = None;
    let out = match &f.sig.output {
        ReturnType::Type(_, t) => t.to_token_stream(),
        ReturnType::Default => quote!(()),
    };
    let span = f.sig.output.span();
    f.sig.output = syn::parse_quote_spanned! {span=>
        -> impl ::core::future::Future<Output = #out> + ::core::marker::Send
    };
}

fn typed_arg(a: Option<&FnArg>) -> Option<&Type> {
    match a {
        Some(FnArg::Typed(t)) if matches!(&*t.pat, Pat::Ident(_) | Pat::Wild(_)) => Some(&t.ty),
        _ => None,
    }
}

fn last_ident(t: &Type) -> Option<&Ident> {
    match t {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| &s.ident),
        _ => None,
    }
}

/// The first generic argument of `Requests<T>` / `Responses<T>`.
fn first_arg(t: &Type) -> syn::Result<Type> {
    if let Type::Path(p) = t
        && let Some(seg) = p.path.segments.last()
        && let PathArguments::AngleBracketed(a) = &seg.arguments
        && let Some(GenericArgument::Type(inner)) = a.args.first()
    {
        return Ok(inner.clone());
    }
    Err(syn::Error::new(
        t.span(),
        "name the message type: `Requests<T>` / `Responses<T>`",
    ))
}

/// `T` of the method's `Result<T, Status>`.
fn ok_type(out: &ReturnType) -> syn::Result<Type> {
    let err = |span| {
        syn::Error::new(
            span,
            "a #[weft::service] method returns `Result<T, Status>`",
        )
    };
    let ReturnType::Type(_, t) = out else {
        return Err(err(out.span()));
    };
    if let Type::Path(p) = &**t
        && let Some(seg) = p.path.segments.last()
        && seg.ident == "Result"
        && let PathArguments::AngleBracketed(a) = &seg.arguments
        && a.args.len() == 2
        && let Some(GenericArgument::Type(ok)) = a.args.first()
    {
        return Ok(ok.clone());
    }
    Err(err(t.span()))
}

fn unit_ok(ok: &Type) -> syn::Result<()> {
    match ok {
        Type::Tuple(t) if t.elems.is_empty() => Ok(()),
        _ => Err(syn::Error::new(
            ok.span(),
            "a method that streams its responses returns `Result<(), Status>`: \
             send them through `Responses`",
        )),
    }
}

/// `SCREAMING_SNAKE` of a snake-case method name (`get_user` → `GET_USER`):
/// the name of its wire-name constant.
fn screaming(ident: &Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").unwrap_or(&s).to_ascii_uppercase()
}

/// `UpperCamel` of a snake-case method name (`get_user` → `GetUser`), as
/// gRPC names methods.
fn camel(ident: &Ident) -> String {
    let s = ident.to_string();
    let s = s.strip_prefix("r#").unwrap_or(&s);
    s.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// The method's wire name, checked and canonical (as the router stores
/// it, so a call never canonicalises it again): `package.Trait/Method`
/// with the trait's name as declared and the method in `UpperCamel`.
fn wire_name(
    given: &Option<LitStr>,
    opts: &Options,
    service: &str,
    ident: &Ident,
) -> syn::Result<String> {
    let (name, span) = match (given, &opts.package) {
        (Some(n), _) => (n.value(), n.span()),
        (None, Some(p)) => (
            format!("{}.{service}/{}", p.value(), camel(ident)),
            p.span(),
        ),
        (None, None) => (format!("{service}/{}", camel(ident)), ident.span()),
    };
    canonical(&name)
        .map_err(|why| syn::Error::new(span, format!("{name:?} is not a weft method name: {why}")))
}

/// The runtime's canonical form (`weft_rpc::method`), at compile time.
fn canonical(name: &str) -> Result<String, &'static str> {
    if name.len() > MAX_METHOD_LEN {
        return Err("longer than 256 bytes");
    }
    let mut segs = Vec::new();
    for seg in name.split('/').filter(|s| !s.is_empty()) {
        if seg == "." || seg == ".." {
            return Err("`.` and `..` are not segments");
        }
        if !seg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        {
            return Err("segments use only `A-Z a-z 0-9 _ . -`, separated by `/`");
        }
        segs.push(seg);
    }
    if segs.is_empty() {
        return Err("empty");
    }
    Ok(segs.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_and_canonical_names() {
        let id = |s| Ident::new(s, Span::call_site());
        assert_eq!(camel(&id("get_user")), "GetUser");
        assert_eq!(camel(&id("echo")), "Echo");
        assert_eq!(camel(&id("a__b_")), "AB");
        assert_eq!(screaming(&id("bulk_upload")), "BULK_UPLOAD");
        assert_eq!(canonical("/Pkg.Svc//Get/").unwrap(), "Pkg.Svc/Get");
        for bad in ["", "/", "a b", "a/../b", "é", &"a".repeat(257)] {
            assert!(canonical(bad).is_err(), "{bad:?}");
        }
    }
}
