//! Errors that name a call whose shape does not match its method's: a
//! client- or bidi-streaming call to a method that takes one request
//! (unary, server streaming) sends none or several, and the server says
//! which shape the method has instead of "expected one message".
//!
//! The reverse (a unary call to a streaming method) sends what a
//! server-streaming call sends: only the caller can tell, when a second
//! response arrives.

use crate::server::route::Shape;
use crate::status::{Code, Status};

/// Why a call that must carry one request message did not.
pub(crate) const NO_REQUEST: &str = "expected one message, got none";
/// See [`NO_REQUEST`].
pub(crate) const MORE_REQUESTS: &str = "expected one message, got more";

/// The shape as its users write it.
pub(crate) fn name(shape: Shape) -> &'static str {
    match shape {
        Shape::Unary => "unary",
        Shape::ServerStreaming => "server-streaming",
        Shape::ClientStreaming => "client-streaming",
        Shape::Bidi => "bidi",
    }
}

/// `e`, or, when it says the call did not carry exactly one request,
/// an `INVALID_ARGUMENT` naming `method`'s shape.
pub(crate) fn one_request(e: Status, method: &str, shape: Shape) -> Status {
    if e.code() != Code::INVALID_ARGUMENT {
        return e;
    }
    let sent = match e.message() {
        NO_REQUEST => "none",
        MORE_REQUESTS => "more (is it called as client-streaming or bidi?)",
        _ => return e,
    };
    Status::invalid_argument(format!(
        "method {method:?} is {}: it takes one request message, and this call sent {sent}",
        name(shape)
    ))
}
