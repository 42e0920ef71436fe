//! # weft-macros: `#[weft::service]`
//!
//! Turns a trait into a weft service: a typed client (`FooClient`) and a
//! server adapter (`FooServer`) that plugs an implementation into a
//! `Router`. Use it through the facade, as `#[weft::service]`.
//!
//! ```
//! use weft::{Context, Requests, Responses, Status};
//!
//! #[weft::service(package = "shop")]
//! pub trait Stock {
//!     /// Unary: `shop.Stock/Get`.
//!     async fn get(&self, ctx: Context, sku: String) -> Result<u32, Status>;
//!     /// Server streaming.
//!     async fn watch(&self, ctx: Context, sku: String, out: Responses<u32>) -> Result<(), Status>;
//!     /// Client streaming, with an explicit wire name.
//!     #[weft(name = "shop.Stock/Restock")]
//!     async fn restock(&self, ctx: Context, skus: Requests<String>) -> Result<u32, Status>;
//!     /// Bidirectional.
//!     async fn chat(&self, ctx: Context, rx: Requests<String>, tx: Responses<String>) -> Result<(), Status>;
//! }
//! ```
//!
//! ## The contract
//! - Every method is an `async fn` taking `&self`, the call's `Context`,
//!   then its messages in one of four shapes: `(req)` unary, `(req,
//!   Responses<T>)` server streaming, `(Requests<T>)` client streaming,
//!   `(Requests<T>, Responses<U>)` bidirectional. It returns
//!   `Result<T, Status>` (`Result<(), Status>` when it streams responses).
//! - **Wire names** are explicit and stable: `package.Trait/Method` (the
//!   method in `UpperCamel`), or `Trait/Method` without a package;
//!   `#[weft(name = "...")]` overrides one. They are checked at compile
//!   time and emitted in the canonical (lower-case) form the router stores.
//!   Renaming a Rust method changes its wire name: pin it with `name` first.
//! - **Codec**: `Json` unless `codec = Path` on the service or on a
//!   method (`#[weft(codec = weft::Raw)]` for `Bytes` as they are). The
//!   codec must carry every message type; if it does not, the error points
//!   at the method.
//! - In the trait, each `async fn` becomes `fn .. -> impl Future + Send`,
//!   and the trait gets `Send + Sync + 'static`: an implementation writes
//!   plain `async fn`s, and its futures must be `Send`.
//! - `rpc = path` names the `weft_rpc` crate if not reached as `::weft::rpc`.
//!
//! - The client has, per method, `foo(req)` and `foo_with(req, &opts)`
//!   (`CallOptions`: deadline, metadata); a unary method also has
//!   `foo_response(req, &opts)`, returning a `Response<T>` with the
//!   response headers and trailers the handler set (`Context::set_header`,
//!   `Context::set_trailer`).
//!
//! - The client, `FooClient<C = weft::Channel>`, makes its calls through
//!   any `weft_rpc::Caller` (`FooClient::new(channel)`, or a one-connection
//!   `Client`); `FooClient::with_interceptor(caller, f)` runs `f` on each.
//!
//! The generated client calls the `Caller` methods directly: per call it
//! adds nothing to what the caller and the codec allocate.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

use proc_macro::TokenStream;

mod expand;
mod model;
#[cfg(test)]
mod tests;

/// Makes a trait a weft service: see the [crate docs](crate).
#[proc_macro_attribute]
pub fn service(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = syn::parse_macro_input!(input as syn::ItemTrait);
    let out = model::Options::parse(args.into()).and_then(|o| expand::expand(item, &o));
    match out {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}
