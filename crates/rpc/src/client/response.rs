//! A unary response with its metadata: what [`Client::unary_response`]
//! and [`Client::unary_codec_response`] (and the `_response` methods of a
//! `#[weft::service]` client) return.
//!
//! [`Client::unary_response`]: crate::Client::unary_response
//! [`Client::unary_codec_response`]: crate::Client::unary_codec_response

use weft_frame::Metadata;
use weft_frame::metadata::{Key, Kind};

use crate::codec::wire::Ends;

/// A successful call's message, with the response headers and trailers
/// the handler set (`Context::set_header`, `Context::set_trailer`).
///
/// Read entries by typed key ([`header`](Self::header),
/// [`trailer`](Self::trailer)) or as raw blocks
/// ([`headers`](Self::headers), [`trailers`](Self::trailers)).
///
/// ```
/// # async fn demo(client: weft_rpc::Client) -> Result<(), weft_rpc::Status> {
/// use bytes::Bytes;
/// use weft_rpc::{Ascii, CallOptions, MetadataKey};
///
/// const SERVED_BY: MetadataKey<Ascii> = MetadataKey::from_static("x-served-by");
/// let resp = client
///     .unary_response("echo", Bytes::from_static(b"hi"), &CallOptions::new())
///     .await?;
/// println!("served by {:?}", resp.header(&SERVED_BY));
/// let body: Bytes = resp.into_message();
/// # let _ = body; Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response<T> {
    message: T,
    headers: Metadata,
    trailers: Metadata,
}

impl<T> Response<T> {
    /// A response of `message` with these metadata blocks.
    pub fn new(message: T, headers: Metadata, trailers: Metadata) -> Response<T> {
        Response {
            message,
            headers,
            trailers,
        }
    }

    /// The parts a call's reader collected.
    pub(crate) fn read(message: T, ends: Ends<'_>) -> Response<T> {
        Response::new(
            message,
            ends.headers.cloned().unwrap_or_default(),
            ends.trailers.cloned().unwrap_or_default(),
        )
    }

    /// The message.
    pub fn message(&self) -> &T {
        &self.message
    }

    /// The message, the metadata dropped.
    pub fn into_message(self) -> T {
        self.message
    }

    /// The response headers (empty if the handler set none).
    pub fn headers(&self) -> &Metadata {
        &self.headers
    }

    /// The trailers: the status entries, then the custom ones the handler
    /// set.
    pub fn trailers(&self) -> &Metadata {
        &self.trailers
    }

    /// The value of a response header, if present and of the key's kind.
    pub fn header<K: Kind>(&self, key: &Key<K>) -> Option<&K::Value> {
        self.headers.value(key)
    }

    /// The value of a trailer, if present and of the key's kind.
    pub fn trailer<K: Kind>(&self, key: &Key<K>) -> Option<&K::Value> {
        self.trailers.value(key)
    }

    /// Message, headers and trailers.
    pub fn into_parts(self) -> (T, Metadata, Metadata) {
        (self.message, self.headers, self.trailers)
    }
}
