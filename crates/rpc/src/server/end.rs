//! The end of a served call: its one final status (and its one response
//! message, for a unary or client-streaming call) sent as the call's last
//! frame, its outcome recorded (span, meter), and its entry taken, all
//! after the server's layers, if it has some, saw the result.
//!
//! Built in two steps: [`End::of`] makes what the end sends without
//! waiting, [`End::send`] sends it, so a caller whose end is the usual
//! one frame (a unary call's) sends it from its own future.

use std::future::Future;

use bytes::Bytes;
use futures_util::future::{Either, FutureExt};
use weft_frame::Metadata;
use weft_mux::Stream;

use crate::codec::Framed;
use crate::codec::wire;
use crate::observe;
use crate::server::call::CallGuard;
use crate::server::middleware::Hold;
use crate::status::{Code, Status};

/// Whether an outcome means the call was cut short (fires the signal).
fn cut_short(status: &Status) -> bool {
    matches!(status.code(), Code::DEADLINE_EXCEEDED | Code::CANCELLED)
}

/// The status of a call that succeeded.
static OK: Status = Status::ok();

/// Sends the call's one response message and its OK trailers, or its
/// error status (after the server's layers saw it, if it has some);
/// records whether the call ended cleanly.
pub(crate) async fn respond(
    stream: &mut Stream,
    mut result: Result<Option<Framed>, Status>,
    guard: &mut CallGuard,
    hold: &Hold,
) {
    if hold.is_held() {
        result = hold.settle(result).await;
    }
    let end = End::of(stream.id(), result, guard);
    let sent = end.send(stream).await;
    guard.sent(sent);
}

/// What a call's end sends, built before its one await (so the call's
/// future holds none of it): the handler's headers, if they have not gone
/// with a streamed message, and its trailers (none allocates nothing).
pub(crate) enum End {
    /// The usual end: one message in one buffer and the OK trailers, in
    /// one frame.
    One(Bytes, Metadata),
    /// A message (with the handler's headers, if it set some), then the
    /// trailers.
    Message(Framed, Option<Metadata>, Metadata),
    /// No message: the trailers alone.
    Trailers(Metadata),
}

impl End {
    /// Records a call's outcome (its span's status, its meter, in the
    /// guard whether it cut the call short) and takes its entry: what its
    /// end sends. Not sent yet: the server's layers have seen the result.
    /// The end alone is returned: a pair of it and the cut flag was built
    /// apart and copied out whole (a `memcpy`, about 30 instructions a
    /// call).
    // Inlined: its result (the end, a hundred bytes or more) was copied
    // out of it by `memcpy` on every call.
    #[inline(always)]
    pub(crate) fn of(
        id: u32,
        result: Result<Option<Framed>, Status>,
        guard: &mut CallGuard,
    ) -> End {
        let status = match &result {
            Ok(_) => &OK,
            Err(status) => {
                if cut_short(status) {
                    guard.cut_short();
                }
                status
            }
        };
        observe::server_finished(status);
        // Counted while the meter runs: a finished meter counts nothing.
        if let Ok(Some(framed)) = &result {
            guard.meter.sent(framed);
        }
        guard.meter.finish(status.code());
        match guard.finish() {
            // The handler set nothing: the usual end is one message and
            // the OK trailers, built without looking through any entries.
            None => match result {
                Ok(Some(Framed::One(b))) => End::One(b, Metadata::ok_status()),
                other => End::with(id, other, Vec::new(), Vec::new()),
            },
            Some((headers, extra)) => End::with(id, result, headers, extra),
        }
    }

    /// [`of`](Self::of) past the usual end: the handler's `headers` not
    /// sent yet and its trailers `extra`, with the result.
    fn with(
        id: u32,
        result: Result<Option<Framed>, Status>,
        headers: Vec<crate::options::Entry>,
        extra: Vec<crate::options::Entry>,
    ) -> End {
        match result {
            Ok(Some(Framed::One(b))) if headers.is_empty() => End::One(b, ok_trailers(&extra)),
            Ok(Some(framed)) => {
                let h = (!headers.is_empty()).then(|| wire::headers(&headers));
                End::Message(framed, h, ok_trailers(&extra))
            }
            // No message: headers not sent yet join the trailers (gRPC's
            // "trailers-only" response).
            Ok(None) => End::Trailers(ok_trailers(&join(headers, extra))),
            Err(status) => {
                tracing::debug!(id, %status, "call failed");
                End::Trailers(wire::trailers_with(&status, &join(headers, extra)))
            }
        }
    }

    /// Sends it; whether it all went. The future of the way it goes is
    /// built here, the end taken apart first: an `async fn` would keep
    /// the end itself beside the parts it moved into that future, every
    /// byte of it twice in each streaming call's future.
    pub(crate) fn send(self, stream: &mut Stream) -> impl Future<Output = bool> + '_ {
        let sent = |r: Result<(), _>| r.is_ok();
        match self {
            // The usual end, one frame: sent from here, not through
            // `wire::send`, whose state machine would nest in this one.
            End::One(b, trailers) => {
                let one = stream.send_with_metadata(trailers, b, true);
                Either::Left(Either::Left(one.map(|r| r.is_ok())))
            }
            End::Message(framed, None, trailers) => Either::Left(Either::Right(
                wire::send(stream, framed, Some(trailers)).map(sent),
            )),
            End::Message(framed, Some(h), trailers) => {
                let headed = wire::send_headed(stream, framed, h, Some(trailers));
                Either::Right(Either::Left(headed.map(sent)))
            }
            End::Trailers(trailers) => {
                Either::Right(Either::Right(wire::end(stream, trailers).map(sent)))
            }
        }
    }
}

/// The trailers of a call that succeeded, with the handler's entries.
#[inline]
fn ok_trailers(extra: &[crate::options::Entry]) -> Metadata {
    if extra.is_empty() {
        // The usual end, without the general builder's checks.
        return Metadata::ok_status();
    }
    wire::trailers_with(&OK, extra)
}

/// Headers then trailers, for a call whose end carries both.
fn join(
    mut headers: Vec<crate::options::Entry>,
    trailers: Vec<crate::options::Entry>,
) -> Vec<crate::options::Entry> {
    if headers.is_empty() {
        return trailers;
    }
    headers.extend(trailers);
    headers
}
