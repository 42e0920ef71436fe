//! The code `#[weft::service]` generates: the trait (its methods as `Send`
//! futures), `FooClient` and `FooServer`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::ItemTrait;
use syn::spanned::Spanned;

use crate::model::{Method, Options, Shape};

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
    let checks = methods.iter().map(|m| codec_check(m, &rpc));
    let client_fns = methods.iter().map(|m| client_fn(m, &rpc, vis));
    let routes = methods.iter().map(|m| route(m, &rpc));
    let wires = methods.iter().map(|m| &m.wire);
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

        #(#checks)*

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
            #vis const METHODS: &'static [&'static str] = &[#(#wires),*];

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

        impl<S: #name> #rpc::IntoRoutes for #server<S> {
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

/// A compile-time check that the method's codec carries its types, spanned
/// at the method so a missing `Serialize` points there.
fn codec_check(m: &Method, rpc: &TokenStream) -> TokenStream {
    let (req, resp) = (&m.request, &m.response);
    let (c1, c2) = (respan(&m.codec, req.span()), respan(&m.codec, resp.span()));
    let req_check = quote_spanned! {req.span()=> carries::<_, #req>(#c1); };
    let resp_check = quote_spanned! {resp.span()=> carries::<_, #resp>(#c2); };
    quote_spanned! {m.span=>
        const _: fn() = || {
            fn carries<C: #rpc::Codec<T>, T>(_: C) {}
            #req_check
            #resp_check
        };
    }
}

fn client_fn(m: &Method, rpc: &TokenStream, vis: &syn::Visibility) -> TokenStream {
    let Method {
        ident,
        docs,
        wire,
        request,
        response,
        ..
    } = m;
    let codec = &respan(&m.codec, m.span);
    let with = format_ident!("{}_with", ident);
    let opts_doc = format!("[`{ident}`](Self::{ident}) with options (deadline, metadata).");
    let with_response = format_ident!("{}_response", ident);
    let response_doc = format!(
        "[`{ident}_with`](Self::{ident}_with), also returning the response headers and \
         trailers the handler set (`Response::header`, `Response::trailer`)."
    );
    let wire_doc = format!("Wire name: `{wire}`.");
    let docs = quote! {
        #(#docs)*
        #[doc = ""]
        #[doc = #wire_doc]
    };
    let span = m.span;
    match &m.shape {
        Shape::Unary => quote_spanned! {span=>
            #docs
            #vis fn #ident(
                &self,
                request: #request,
            ) -> impl ::core::future::Future<Output = ::core::result::Result<#response, #rpc::Status>> + ::core::marker::Send + use<'_, C> {
                self.#with(request, #rpc::CallOptions::none())
            }

            #[doc = #opts_doc]
            #vis fn #with<'a, 'o>(
                &'a self,
                request: #request,
                opts: &'o #rpc::CallOptions,
            ) -> impl ::core::future::Future<Output = ::core::result::Result<#response, #rpc::Status>> + ::core::marker::Send + use<'a, 'o, C> {
                #rpc::Caller::call_unary(&self.inner, #wire, #codec, request, opts)
            }

            #[doc = #response_doc]
            #vis fn #with_response<'a, 'o>(
                &'a self,
                request: #request,
                opts: &'o #rpc::CallOptions,
            ) -> impl ::core::future::Future<Output = ::core::result::Result<#rpc::Response<#response>, #rpc::Status>> + ::core::marker::Send + use<'a, 'o, C> {
                #rpc::Caller::call_unary_response(&self.inner, #wire, #codec, request, opts)
            }
        },
        Shape::ServerStreaming { .. } => quote_spanned! {span=>
            #docs
            #vis async fn #ident(
                &self,
                request: #request,
            ) -> ::core::result::Result<#rpc::Streaming<#response, #codec>, #rpc::Status> {
                self.#with(request, &#rpc::CallOptions::new()).await
            }

            #[doc = #opts_doc]
            #vis async fn #with(
                &self,
                request: #request,
                opts: &#rpc::CallOptions,
            ) -> ::core::result::Result<#rpc::Streaming<#response, #codec>, #rpc::Status> {
                #rpc::Caller::call_server_streaming(&self.inner, #wire, #codec, &request, opts).await
            }
        },
        // Both open the call and hand back its handle.
        Shape::ClientStreaming { .. } | Shape::Bidi { .. } => {
            let (handle, open) = match &m.shape {
                Shape::Bidi { .. } => (quote!(BidiCall), quote!(call_bidi)),
                _ => (quote!(ClientStreamingCall), quote!(call_client_streaming)),
            };
            quote_spanned! {span=>
                #docs
                #vis async fn #ident(
                    &self,
                ) -> ::core::result::Result<#rpc::#handle<#request, #response, #codec>, #rpc::Status> {
                    self.#with(&#rpc::CallOptions::new()).await
                }

                #[doc = #opts_doc]
                #vis async fn #with(
                    &self,
                    opts: &#rpc::CallOptions,
                ) -> ::core::result::Result<#rpc::#handle<#request, #response, #codec>, #rpc::Status> {
                    #rpc::Caller::#open(&self.inner, #wire, #codec, opts).await
                }
            }
        }
    }
}

/// Registers one method on `router`: the closure holds the service and
/// clones its `Arc` per call (no allocation).
fn route(m: &Method, rpc: &TokenStream) -> TokenStream {
    let Method {
        ident,
        wire,
        request,
        ..
    } = m;
    let codec = &respan(&m.codec, m.span);
    let ctx = quote!(#rpc::Context);
    let span = m.span;
    let register = match &m.shape {
        Shape::Unary => quote_spanned! {span=>
            router.unary_codec(#wire, #codec, move |ctx: #ctx, request: #request| {
                let s = s.clone();
                async move { s.#ident(ctx, request).await }
            })
        },
        Shape::ServerStreaming { sink } => quote_spanned! {span=>
            router.server_streaming_codec(#wire, #codec, move |ctx: #ctx, request: #request, sink: #sink| {
                let s = s.clone();
                async move { s.#ident(ctx, request, sink).await }
            })
        },
        Shape::ClientStreaming { source } => quote_spanned! {span=>
            router.client_streaming_codec(#wire, #codec, move |ctx: #ctx, requests: #source| {
                let s = s.clone();
                async move { s.#ident(ctx, requests).await }
            })
        },
        Shape::Bidi { source, sink } => quote_spanned! {span=>
            router.bidi_codec(#wire, #codec, move |ctx: #ctx, requests: #source, sink: #sink| {
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
