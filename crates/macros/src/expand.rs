//! The code `#[weft::service]` generates: the trait (its methods as `Send`
//! futures), `FooClient` and `FooServer`.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ItemTrait;
use syn::spanned::Spanned;

use crate::model::{Idempotency, Method, Options, Shape};

pub(crate) fn expand(mut item: ItemTrait, opts: &Options) -> syn::Result<TokenStream> {
    let methods = match crate::model::methods(&mut item, opts) {
        Ok(m) => m,
        // The trait as written (its `#[weft]` attributes stripped) with the
        // errors: uses of it elsewhere do not add errors of their own.
        Err(e) => {
            let e = e.to_compile_error();
            return Ok(quote!(#item #e));
        }
    };
    let rpc = opts.rpc();
    item.supertraits
        .push(syn::parse_quote!(::core::marker::Send));
    item.supertraits
        .push(syn::parse_quote!(::core::marker::Sync));
    item.supertraits.push(syn::parse_quote!('static));
    let vis = &item.vis;
    let name = &item.ident;
    let client = format_ident!("{}Client", name);
    let server = format_ident!("{}Server", name);
    let names = format_ident!("{}Methods", name);
    let checks = codec_checks(&methods, &rpc);
    let client_fns = methods.iter().map(|m| client_fn(m, &rpc, vis, &names));
    let routes = methods.iter().map(|m| route(m, &rpc, &names, name));
    let carried = methods.iter().map(|m| carried(m, &rpc));
    let konsts = methods.iter().map(|m| {
        let (konst, wire) = (&m.konst, &m.wire);
        let doc = format!("The wire name of [`{name}::{}`]: `{wire}`.", m.ident);
        quote!(#[doc = #doc] #vis const #konst: &'static str = #wire;)
    });
    let all = methods.iter().map(|m| &m.konst);
    let names_doc = format!(
        "The wire names of [`{name}`]'s methods, one constant each: what to \
         pass where a method is named by hand (a raw call, a layer or an \
         interceptor keyed on `Context::method`)."
    );
    let caller = opts.default_caller();
    let client_doc = format!(
        "The typed client of [`{name}`] over any `Caller` `C` (a `Channel`, which \
         reconnects and balances, by default; or a one-connection `Client`): one \
         method per call, each with a `_with` variant taking `CallOptions` (and, for \
         a unary call, a `_response` variant returning the response's headers and \
         trailers too). Cheap to clone (clones share the caller's connections)."
    );
    let server_doc = format!(
        "Serves an implementation of [`{name}`]: add it to a `Router` with \
         `Router::add_service`."
    );
    Ok(quote! {
        #item

        #checks

        #[doc = #names_doc]
        #[derive(Debug, Clone, Copy)]
        #vis enum #names {}

        impl #names {
            #(#konsts)*
        }

        #[doc = #client_doc]
        #[derive(Clone, Debug)]
        #vis struct #client<C = #caller> {
            inner: C,
        }

        impl<C: #rpc::Caller> #client<C> {
            /// A client making its calls through `caller` (a `Channel`, a
            /// `Client`, or any other `Caller`).
            #vis fn new(caller: C) -> Self {
                #client { inner: caller }
            }

            /// A client whose every call first passes `interceptor`, which
            /// can add metadata or refuse the call with a `Status`
            /// (`Caller::with_interceptor`).
            #vis fn with_interceptor<F>(caller: C, interceptor: F) -> Self
            where
                F: ::core::ops::Fn(&mut #rpc::Outgoing<'_>) -> ::core::result::Result<(), #rpc::Status>
                    + ::core::marker::Send + ::core::marker::Sync + 'static,
            {
                #client { inner: #rpc::Caller::with_interceptor(caller, interceptor) }
            }

            /// The caller underneath.
            #vis fn inner(&self) -> &C {
                &self.inner
            }

            /// The caller underneath, by value.
            #vis fn into_inner(self) -> C {
                self.inner
            }

            #(#client_fns)*
        }

        #[doc = #server_doc]
        #vis struct #server<S> {
            service: ::std::sync::Arc<S>,
        }

        impl<S> #server<S> {
            /// The wire names of the service's methods, in declaration order.
            #vis const METHODS: &'static [&'static str] = &[#(#names::#all),*];

            /// An adapter serving `service`.
            #vis fn new(service: S) -> Self {
                #server { service: ::std::sync::Arc::new(service) }
            }

            /// An adapter serving a shared `service`.
            #vis fn from_arc(service: ::std::sync::Arc<S>) -> Self {
                #server { service }
            }
        }

        impl<S> ::core::fmt::Debug for #server<S> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(::core::stringify!(#server))
                    .field("methods", &Self::METHODS)
                    .finish()
            }
        }

        impl<S: #name> #rpc::IntoRoutes for #server<S>
        where
            #(#carried,)*
        {
            fn into_routes(self, router: #rpc::Router) -> #rpc::Router {
                #(#routes)*
                router
            }
        }
    })
}

/// `tokens` with every span set to `span`, so that errors they cause point
/// at the user's method, not at the attribute.
fn respan(tokens: &TokenStream, span: proc_macro2::Span) -> TokenStream {
    use proc_macro2::{Group, TokenTree};
    tokens
        .clone()
        .into_iter()
        .map(|mut t| {
            if let TokenTree::Group(g) = &t {
                let mut ng = Group::new(g.delimiter(), respan(&g.stream(), span));
                ng.set_span(span);
                t = TokenTree::Group(ng);
            } else {
                t.set_span(span);
            }
            t
        })
        .collect()
}

/// The compile-time check that each method's codec carries its message
/// types: one check per codec and type (a type used by three methods is
/// checked once), spanned at the type's first use, so a type that is not
/// `Serialize` is one error there, naming the missing trait.
///
/// It is the only place the bound is checked where the service is
/// declared: the client's methods and the server's `IntoRoutes` carry it
/// as a where clause ([`carried`]), which the compiler checks where they
/// are used, not where they are defined.
fn codec_checks(methods: &[Method], rpc: &TokenStream) -> TokenStream {
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut checks = Vec::new();
    for m in methods {
        for ty in [&m.request, &m.response] {
            let key = (m.codec.to_string(), ty.to_token_stream().to_string());
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let codec = respan(&m.codec, ty.span());
            checks.push(quote_spanned! {ty.span()=> carries::<_, #ty>(#codec); });
        }
    }
    quote! {
        const _: fn() = || {
            fn carries<C: #rpc::Codec<T>, T>(_: C) {}
            #(#checks)*
        };
    }
}

/// The where-clause predicate "the method's codec carries its types".
///
/// A bound on concrete types would be checked where it is written (and a
/// type that is not `Serialize` would fail once per generated function);
/// `for<'w>` makes it a bound the compiler assumes inside the function and
/// checks only at each use (the same effect as the unstable
/// `trivial_bounds`). [`codec_checks`] reports the error once, at the type.
/// The generated calls name their message types (`::<_, Req, Resp>`):
/// with the types left to inference the compiler proves the bound from the
/// codec's impl, not from this clause, and the errors come back.
fn carried(m: &Method, rpc: &TokenStream) -> TokenStream {
    let (req, resp) = (&m.request, &m.response);
    let codec = respan(&m.codec, m.span);
    quote_spanned! {m.span=>
        for<'w> #codec: #rpc::Codec<#req> + #rpc::Codec<#resp>
    }
}

/// `opts` (a `&CallOptions`) as the call sends them: marked idempotent
/// for a `#[weft(idempotent)]` method, so a `Channel` may resend it
/// ([`CallOptions::to_idempotent`]); `call` uses `opts`. For a unary
/// method the marked options live in the returned future (an `async move`
/// block, whose call starts at its first poll; their timeout was already
/// fixed from now).
fn with_options(m: &Method, rpc: &TokenStream, call: TokenStream, unary: bool) -> TokenStream {
    match (m.idempotency, unary) {
        (Idempotency::Unknown, _) => call,
        (Idempotency::Idempotent, true) => quote! {
            let opts = #rpc::CallOptions::to_idempotent(opts);
            async move {
                let opts = &*opts;
                #call.await
            }
        },
        (Idempotency::Idempotent, false) => quote! {
            let opts = #rpc::CallOptions::to_idempotent(opts);
            let opts = &*opts;
            #call
        },
    }
}

fn client_fn(
    m: &Method,
    rpc: &TokenStream,
    vis: &syn::Visibility,
    names: &syn::Ident,
) -> TokenStream {
    let Method {
        ident,
        docs,
        wire,
        konst,
        request,
        response,
        ..
    } = m;
    let codec = &respan(&m.codec, m.span);
    let wire_const = quote!(#names::#konst);
    let carried = carried(m, rpc);
    let with = format_ident!("{}_with", ident);
    let opts_doc = format!("[`{ident}`](Self::{ident}) with options (deadline, metadata).");
    let with_response = format_ident!("{}_response", ident);
    let response_doc = format!(
        "[`{ident}_with`](Self::{ident}_with), also returning the response headers and \
         trailers the handler set (`Response::header`, `Response::trailer`)."
    );
    let wire_doc = match m.idempotency {
        Idempotency::Unknown => format!("Wire name: `{wire}`."),
        Idempotency::Idempotent => format!(
            "Wire name: `{wire}`. Idempotent: a `Channel` may send a call again \
             if its connection is lost after it was sent."
        ),
    };
    let docs = quote! {
        #(#docs)*
        #[doc = ""]
        #[doc = #wire_doc]
    };
    let span = m.span;
    match &m.shape {
        Shape::Unary => {
            let unary = with_options(
                m,
                rpc,
                quote!(#rpc::Caller::call_unary::<_, #request, #response>(&self.inner, #wire_const, #codec, request, opts)),
                true,
            );
            let unary_response = with_options(
                m,
                rpc,
                quote!(#rpc::Caller::call_unary_response::<_, #request, #response>(&self.inner, #wire_const, #codec, request, opts)),
                true,
            );
            quote_spanned! {span=>
                #docs
                #[inline(always)]
                #vis fn #ident(
                    &self,
                    request: #request,
                ) -> impl ::core::future::Future<Output = ::core::result::Result<#response, #rpc::Status>> + ::core::marker::Send + use<'_, C>
                where
                    #carried,
                {
                    self.#with(request, #rpc::CallOptions::none())
                }

                #[doc = #opts_doc]
                #[inline(always)]
                #vis fn #with<'a, 'o>(
                    &'a self,
                    request: #request,
                    opts: &'o #rpc::CallOptions,
                ) -> impl ::core::future::Future<Output = ::core::result::Result<#response, #rpc::Status>> + ::core::marker::Send + use<'a, 'o, C>
                where
                    #carried,
                {
                    #unary
                }

                #[doc = #response_doc]
                #vis fn #with_response<'a, 'o>(
                    &'a self,
                    request: #request,
                    opts: &'o #rpc::CallOptions,
                ) -> impl ::core::future::Future<Output = ::core::result::Result<#rpc::Response<#response>, #rpc::Status>> + ::core::marker::Send + use<'a, 'o, C>
                where
                    #carried,
                {
                    #unary_response
                }
            }
        }
        Shape::ServerStreaming { .. } => {
            let open = with_options(
                m,
                rpc,
                quote!(#rpc::Caller::call_server_streaming::<_, #request, #response>(&self.inner, #wire_const, #codec, &request, opts)),
                false,
            );
            quote_spanned! {span=>
                #docs
                #vis async fn #ident(
                    &self,
                    request: #request,
                ) -> ::core::result::Result<#rpc::Streaming<#response, #codec>, #rpc::Status>
                where
                    #carried,
                {
                    self.#with(request, &#rpc::CallOptions::new()).await
                }

                #[doc = #opts_doc]
                #vis async fn #with(
                    &self,
                    request: #request,
                    opts: &#rpc::CallOptions,
                ) -> ::core::result::Result<#rpc::Streaming<#response, #codec>, #rpc::Status>
                where
                    #carried,
                {
                    #open.await
                }
            }
        }
        // Both open the call and hand back its handle.
        Shape::ClientStreaming { .. } | Shape::Bidi { .. } => {
            let (handle, open) = match &m.shape {
                Shape::Bidi { .. } => (quote!(BidiCall), quote!(call_bidi)),
                _ => (quote!(ClientStreamingCall), quote!(call_client_streaming)),
            };
            let open = with_options(
                m,
                rpc,
                quote!(#rpc::Caller::#open::<_, #request, #response>(&self.inner, #wire_const, #codec, opts)),
                false,
            );
            quote_spanned! {span=>
                #docs
                #vis async fn #ident(
                    &self,
                ) -> ::core::result::Result<#rpc::#handle<#request, #response, #codec>, #rpc::Status>
                where
                    #carried,
                {
                    self.#with(&#rpc::CallOptions::new()).await
                }

                #[doc = #opts_doc]
                #vis async fn #with(
                    &self,
                    opts: &#rpc::CallOptions,
                ) -> ::core::result::Result<#rpc::#handle<#request, #response, #codec>, #rpc::Status>
                where
                    #carried,
                {
                    #open.await
                }
            }
        }
    }
}

/// Registers one method on `router`: the closure holds the service and
/// clones its `Arc` per call (no allocation).
fn route(m: &Method, rpc: &TokenStream, names: &syn::Ident, service: &syn::Ident) -> TokenStream {
    let Method {
        ident,
        konst,
        request,
        response,
        ..
    } = m;
    let wire = quote!(#names::#konst);
    let codec = &respan(&m.codec, m.span);
    let ctx = quote!(#rpc::Context);
    let span = m.span;
    let register = match &m.shape {
        // The method itself is the handler: its future borrows the service,
        // which each call holds once (`UnaryMethod`), where a closure
        // cloned the service again and wrapped the future in an `async`
        // block.
        Shape::Unary => quote_spanned! {span=>
            {
                struct __WeftMethod;

                impl<S: #service> #rpc::UnaryMethod<S, #request, #response> for __WeftMethod {
                    fn call(
                        service: &S,
                        ctx: #ctx,
                        request: #request,
                    ) -> impl ::core::future::Future<Output = ::core::result::Result<#response, #rpc::Status>>
                           + ::core::marker::Send + '_ {
                        S::#ident(service, ctx, request)
                    }
                }

                router.unary_method::<_, _, _, #request, #response>(#wire, #codec, s, __WeftMethod)
            }
        },
        Shape::ServerStreaming { sink } => quote_spanned! {span=>
            router.server_streaming_codec::<_, _, _, #request, #response>(#wire, #codec, move |ctx: #ctx, request: #request, sink: #sink| {
                let s = s.clone();
                async move { s.#ident(ctx, request, sink).await }
            })
        },
        Shape::ClientStreaming { source } => quote_spanned! {span=>
            router.client_streaming_codec::<_, _, _, #request, #response>(#wire, #codec, move |ctx: #ctx, requests: #source| {
                let s = s.clone();
                async move { s.#ident(ctx, requests).await }
            })
        },
        Shape::Bidi { source, sink } => quote_spanned! {span=>
            router.bidi_codec::<_, _, _, #request, #response>(#wire, #codec, move |ctx: #ctx, requests: #source, sink: #sink| {
                let s = s.clone();
                async move { s.#ident(ctx, requests, sink).await }
            })
        },
    };
    quote! {
        let router = {
            let s = ::std::sync::Arc::clone(&self.service);
            #register
        };
    }
}
