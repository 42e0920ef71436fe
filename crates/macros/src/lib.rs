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
//!     /// Unary: `shop.Stock/Get`, safe to resend.
//!     #[weft(idempotent)]
//!     async fn get(&self, ctx: Context, sku: String) -> Result<u32, Status>;
//!     /// Server streaming.
//!     async fn watch(&self, ctx: Context, sku: String, out: Responses<u32>) -> Result<(), Status>;
//!     /// Client streaming, with an explicit wire name.
//!     #[weft(name = "shop.Stock/Restock")]
//!     async fn restock(&self, ctx: Context, skus: Requests<String>) -> Result<u32, Status>;
//!     /// Bidirectional.
//!     async fn chat(&self, ctx: Context, rx: Requests<String>, tx: Responses<String>) -> Result<(), Status>;
//! }
//!
//! assert_eq!(StockMethods::GET, "shop.Stock/Get");
//! ```
//!
//! ## The contract
//! - Every method is an `async fn` taking `&self`, the call's `Context`,
//!   then its messages in one of four shapes: `(req)` unary, `(req,
//!   Responses<T>)` server streaming, `(Requests<T>)` client streaming,
//!   `(Requests<T>, Responses<U>)` bidirectional. It returns
//!   `Result<T, Status>` (`Result<(), Status>` when it streams responses).
//! - **Wire names** are explicit and stable, in gRPC's form:
//!   `package.Trait/Method`, the package as given, the trait's name as
//!   declared and the method in `UpperCamel` (`bulk_upload` →
//!   `userdir.Users/BulkUpload`), or `Trait/Method` without a package;
//!   `#[weft(name = "...")]` overrides one. They are checked at compile
//!   time and keep their case on the wire, in layers, metrics and logs.
//!   Renaming a Rust method changes its wire name: pin it with `name` first.
//! - **Method-name constants**: `FooMethods::BULK_UPLOAD` (one per method,
//!   the Rust name in `SCREAMING_SNAKE`) is the wire name, for wherever a
//!   method is named by hand (a raw call, a layer keyed on
//!   `Context::method`); `FooServer::METHODS` lists them all.
//! - **Idempotency** is declared where the method is:
//!   `#[weft(idempotent)]` makes the generated client mark each call of it
//!   (`CallOptions::idempotent`), so a `Channel` may resend it when its
//!   connection is lost after it was sent, with no
//!   `ChannelBuilder::idempotent` to keep in step.
//! - **Codec**: `Json` unless `codec = Path` on the service or on a
//!   method (`#[weft(codec = weft::Raw)]` for `Bytes` as they are). The
//!   codec must carry every message type; if it does not, the error is
//!   one per missing trait (`Serialize`, `Deserialize`), at the type's
//!   first use in the trait (each use of the client method or of
//!   `add_service` with it adds one where it is).
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
//! adds nothing to what the caller and the codec allocate (but for an
//! idempotent method called with options, which are copied once to mark
//! them; empty options are a shared static).
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
