//! Calls on a mux stream: reading messages and the final status, writing
//! messages and trailers, and mapping stream failures to a [`Status`].
//!
//! A call's stream carries, in each direction, length-prefixed messages
//! ([`crate::codec`]); the server's last frame carries `END_STREAM` and the
//! status in its metadata. A stream that ends without that status, or fails
//! (reset, connection gone), never reads as success.

use std::future::Future;

use bytes::Bytes;
use weft_frame::{Metadata, Reason};
use weft_mux::{MuxError, Stream, StreamError};

use crate::codec::{Framed, MessageDecoder};
use crate::status::{Code, Status};

/// The trailers for `status`. `OK` allocates nothing.
pub(crate) fn trailers(status: &Status) -> Metadata {
    if status.is_ok() {
        return Metadata::ok_status();
    }
    let mut msg = status.message();
    // Keep the block under the 16 KiB metadata limit; cut on a char boundary.
    let cap = 8 * 1024;
    if msg.len() > cap {
        let mut end = cap;
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg = &msg[..end];
    }
    let b = Metadata::builder().status(status.code().0).message(msg);
    match status.details() {
        Some(d) if d.len() <= crate::status::MAX_DETAILS => b.status_details(d).finish(),
        Some(d) => {
            tracing::warn!(len = d.len(), "status details over the limit, not sent");
            b.finish()
        }
        None => b.finish(),
    }
}

/// The trailers for `status` with the handler's custom entries.
pub(crate) fn trailers_with(status: &Status, extra: &[crate::options::Entry]) -> Metadata {
    if extra.is_empty() {
        return trailers(status);
    }
    let mut b = Metadata::builder().status(status.code().0);
    let base = trailers(status);
    for e in base
        .iter()
        .filter(|e| e.tag != weft_frame::metadata::tag::STATUS)
    {
        b = b.raw(e.tag, e.key, e.value);
    }
    for (k, v) in extra {
        b = b.custom(k, v);
    }
    b.finish()
}

/// The response headers block of a handler's entries (custom entries
/// only: no status, so a caller tells them from trailers; PROTOCOL 7.5.2).
pub(crate) fn headers(entries: &[crate::options::Entry]) -> Metadata {
    entries
        .iter()
        .fold(Metadata::builder(), |b, (k, v)| b.custom(k, v))
        .finish()
}

/// The call's outcome from its trailers. Inlined: the usual trailers
/// (`OK`, told without reading entries) are a branch in the caller.
#[inline]
pub(crate) fn status_of(trailers: Option<&Metadata>) -> Result<(), Status> {
    if trailers.is_some_and(Metadata::is_ok_status) {
        return Ok(());
    }
    status_read(trailers)
}

/// [`status_of`] for trailers that are not the usual `OK` ones.
#[inline(never)]
fn status_read(trailers: Option<&Metadata>) -> Result<(), Status> {
    let Some(code) = trailers.and_then(Metadata::status) else {
        return Err(Status::internal("stream ended without a status"));
    };
    if code == Code::OK.0 {
        return Ok(());
    }
    let message = trailers
        .and_then(Metadata::message)
        .unwrap_or("")
        .to_owned();
    let status = Status::new(Code(code), message);
    Err(match trailers.and_then(Metadata::status_details) {
        Some(d) => status.with_details(Bytes::copy_from_slice(d)),
        None => status,
    })
}

/// A stream failure as a status.
pub(crate) fn from_stream(e: &StreamError) -> Status {
    if e.is_refused() {
        return Status::unavailable(format!("{e}")).stream_refused();
    }
    if e.is_unprocessed() {
        return Status::unavailable(format!("{e}")).retry_safe();
    }
    if e.is_closed() {
        return Status::unavailable(format!("{e}"));
    }
    match e.reason() {
        Some(Reason::CANCEL) => Status::cancelled(format!("{e}")),
        Some(Reason::FRAME_SIZE_ERROR) => Status::resource_exhausted(format!("{e}")),
        Some(Reason::COMPRESSION_ERROR) => Status::resource_exhausted(format!("{e}")),
        Some(Reason::TIMEOUT) => Status::unavailable(format!("{e}")),
        _ => Status::internal(format!("{e}")),
    }
}

/// An `open` failure as a status. Retry-safe when refused, and when the
/// connection was already closed: `open` then sent nothing.
pub(crate) fn from_mux(e: &MuxError) -> Status {
    let s = Status::unavailable(format!("{e}"));
    if e.is_refused() || e.close_cause().is_some() {
        s.retry_safe()
    } else {
        s
    }
}

/// Whether `data` is one length-prefixed message, whole, of at most `max`
/// bytes: what a unary request or reply nearly always is in its first
/// frame, which either end then takes without a [`Reader`].
pub(crate) fn is_one_message(data: &[u8], max: usize) -> bool {
    let Some((prefix, body)) = data.split_first_chunk::<{ crate::codec::PREFIX_LEN }>() else {
        return false;
    };
    let len = u32::from_be_bytes(*prefix) as usize;
    len == body.len() && len <= max
}

/// What a direction carried besides its messages, for a caller that wants
/// them ([`Response`](crate::Response)): the headers (its first metadata
/// without a status) and the trailers (the metadata of its end).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ends<'a> {
    pub(crate) headers: Option<&'a Metadata>,
    pub(crate) trailers: Option<&'a Metadata>,
}

/// What a direction meant to carry one message carried.
#[derive(Debug)]
pub(crate) enum Only {
    /// It ended without a message.
    None,
    /// One message, then its end.
    One(Bytes),
    /// A message and another after it.
    More,
}

/// Reads the messages of one direction of a call, then its end.
#[derive(Debug)]
pub(crate) struct Reader {
    decoder: MessageDecoder,
    chunk: Bytes,
    ended: bool,
    /// Boxed: most calls have none, and every unary future holds a Reader.
    headers: Option<Box<Metadata>>,
    trailers: Option<Metadata>,
}

impl Reader {
    pub(crate) fn new(max_message: usize) -> Reader {
        Reader {
            decoder: MessageDecoder::new(max_message),
            chunk: Bytes::new(),
            ended: false,
            headers: None,
            trailers: None,
        }
    }

    /// The next message; `Ok(None)` after the sender's explicit end (with no
    /// message cut short). Cancel safe: nothing is lost if dropped.
    ///
    /// (A function returning an `async` block, as [`only`](Self::only) is.)
    #[allow(clippy::manual_async_fn)] // reason: an `async fn` would hold its arguments twice
    pub(crate) fn next<'a>(
        &'a mut self,
        stream: &'a mut Stream,
    ) -> impl Future<Output = Result<Option<Bytes>, Status>> + 'a {
        async move {
            loop {
                if let Some(done) = self.buffered()? {
                    return Ok(done);
                }
                // `recv` reads the socket from this task while it waits.
                let chunk = stream.recv().await;
                self.absorb(chunk)?;
            }
        }
    }

    /// Waits for the sender's first frame (a message or its first bytes,
    /// its headers with them, or its end) without taking a message: what
    /// a server-streaming call waits for before it returns (as tonic's
    /// waits for response headers, which weft's server sends only with its
    /// first message). A sender that ended before any message with an
    /// error status is that status; a reset or a lost connection is its
    /// error. Cancel safe.
    pub(crate) async fn answered(&mut self, stream: &mut Stream) -> Result<(), Status> {
        while self.chunk.is_empty() && !self.ended {
            let chunk = stream.recv().await;
            self.absorb(chunk)?;
        }
        if self.ended && self.chunk.is_empty() && !self.decoder.is_mid_message() {
            // Ended without a message: only an error status is news now
            // (an `OK` end reads as the stream's clean end).
            if let Some(t) = self.trailers.as_ref().filter(|t| t.status().is_some()) {
                return status_of(Some(t));
            }
        }
        Ok(())
    }

    /// [`next`](Self::next) as a poll (the connection task reads the socket).
    pub(crate) fn poll_next(
        &mut self,
        stream: &mut Stream,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Option<Bytes>, Status>> {
        loop {
            if let Some(done) = self.buffered()? {
                return std::task::Poll::Ready(Ok(done));
            }
            let chunk = std::task::ready!(stream.poll_recv(cx));
            self.absorb(chunk)?;
        }
    }

    /// What the chunks received so far give: a message, the end, or `None`
    /// (receive more).
    fn buffered(&mut self) -> Result<Option<Option<Bytes>>, Status> {
        if let Some(m) = self.decoder.decode(&mut self.chunk)? {
            return Ok(Some(Some(m)));
        }
        if self.ended {
            if self.decoder.is_mid_message() {
                // A sender that ended its side inside a message with an
                // error status (a deadline that passed mid-send) is
                // reported by that status; otherwise the cut is the error.
                let stated = self.trailers.as_ref().filter(|t| t.status().is_some());
                return Err(match status_of(stated) {
                    Err(status) if stated.is_some() => status,
                    _ => MessageDecoder::truncated(),
                });
            }
            return Ok(Some(None));
        }
        Ok(None)
    }

    /// Takes in what one receive gave (a caller that received the first
    /// chunk itself hands it over here, then reads on).
    pub(crate) fn absorb(
        &mut self,
        chunk: Result<Option<weft_mux::Chunk>, StreamError>,
    ) -> Result<(), Status> {
        match chunk {
            Ok(Some(c)) => {
                if c.end {
                    self.ended = true;
                    if !c.metadata.is_empty() {
                        self.trailers = Some(c.metadata);
                    }
                } else if c.metadata.status().is_some() {
                    // A status on a frame that does not end the stream.
                    self.trailers = Some(c.metadata);
                } else if !c.metadata.is_empty() && self.headers.is_none() {
                    // The first metadata without a status: the headers,
                    // copied (one allocation, only for a call that has
                    // them): the block is a slice of the read buffer, and
                    // a long call would keep that whole buffer alive.
                    let own = Bytes::copy_from_slice(c.metadata.as_bytes());
                    self.headers = Some(Box::new(Metadata::from_bytes(own).unwrap_or_default()));
                }
                self.chunk = c.data;
            }
            Ok(None) => self.ended = true,
            Err(e) => return Err(from_stream(&e)),
        }
        Ok(())
    }

    /// The only message of a direction that carries exactly one (a unary
    /// request or response): `INVALID_ARGUMENT` for none or more.
    pub(crate) async fn single(&mut self, stream: &mut Stream) -> Result<Bytes, Status> {
        match self.only(stream).await? {
            Only::One(msg) => Ok(msg),
            Only::None => Err(Status::invalid_argument(
                crate::server::mismatch::NO_REQUEST,
            )),
            Only::More => Err(Status::invalid_argument(
                crate::server::mismatch::MORE_REQUESTS,
            )),
        }
    }

    /// The first message and whether another followed it before the end
    /// (which is then not waited for: a direction that streams may never
    /// end by itself).
    ///
    /// A function returning an `async` block, not an `async fn`: an `async
    /// fn` keeps its arguments twice in its state, and this one is inside
    /// every unary call's future on both ends.
    #[allow(clippy::manual_async_fn)] // reason: an `async fn` would hold its arguments twice
    pub(crate) fn only<'a>(
        &'a mut self,
        stream: &'a mut Stream,
    ) -> impl Future<Output = Result<Only, Status>> + 'a {
        async move {
            let Some(first) = self.next(stream).await? else {
                return Ok(Only::None);
            };
            // The common case: the frame that carried the message ended the
            // direction too, so looking for a second one would find the end.
            if self.ended && self.chunk.is_empty() && !self.decoder.is_mid_message() {
                return Ok(Only::One(first));
            }
            Ok(match self.next(stream).await? {
                Some(_) => Only::More,
                None => Only::One(first),
            })
        }
    }

    /// The sender's headers, once received (the first frame with metadata
    /// and no status that did not end the stream).
    pub(crate) fn headers(&self) -> Option<&Metadata> {
        self.headers.as_deref()
    }

    /// The sender's trailers, once ended.
    pub(crate) fn trailers(&self) -> Option<&Metadata> {
        self.trailers.as_ref()
    }

    /// The headers and trailers read so far.
    pub(crate) fn ends(&self) -> Ends<'_> {
        Ends {
            headers: self.headers(),
            trailers: self.trailers(),
        }
    }
}

/// Sends one framed message, optionally ending the stream with `trailers`.
pub(crate) async fn send(
    stream: &mut Stream,
    framed: Framed,
    end: Option<Metadata>,
) -> Result<(), Status> {
    let r = match (framed, end) {
        (Framed::One(b), None) => stream.send(b, false).await,
        (Framed::One(b), Some(t)) => stream.send_with_metadata(t, b, true).await,
        (Framed::Two(p, b), end) => {
            stream.send(p, false).await.map_err(|e| from_stream(&e))?;
            match end {
                None => stream.send(b, false).await,
                Some(t) => stream.send_with_metadata(t, b, true).await,
            }
        }
    };
    r.map_err(|e| from_stream(&e))
}

/// [`send`] of a server's first message when the handler set response
/// headers: the first frame carries them (PROTOCOL 7.5.2). A message in one
/// piece that also ends the stream is cut after its length prefix, so
/// headers and trailers never share a frame. (A separate function so the
/// common call, without headers, pays nothing for it.)
pub(crate) async fn send_headed(
    stream: &mut Stream,
    framed: Framed,
    headers: Metadata,
    end: Option<Metadata>,
) -> Result<(), Status> {
    let (first, body) = match framed {
        Framed::One(b) if end.is_none() => (b, None),
        Framed::One(mut b) => (b.split_to(b.len().min(crate::codec::PREFIX_LEN)), Some(b)),
        Framed::Two(p, b) => (p, Some(b)),
    };
    let r = stream.send_with_metadata(headers, first, false).await;
    r.map_err(|e| from_stream(&e))?;
    let r = match (body, end) {
        (None, _) => return Ok(()),
        (Some(b), Some(t)) => stream.send_with_metadata(t, b, true).await,
        (Some(b), None) => stream.send(b, false).await,
    };
    r.map_err(|e| from_stream(&e))
}

/// Ends the stream with `status` and no message.
pub(crate) async fn finish(stream: &mut Stream, status: &Status) -> Result<(), Status> {
    end(stream, trailers(status)).await
}

/// Ends the stream with these trailers and no message.
pub(crate) async fn end(stream: &mut Stream, trailers: Metadata) -> Result<(), Status> {
    stream
        .send_with_metadata(trailers, Bytes::new(), true)
        .await
        .map_err(|e| from_stream(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_round_trip_through_status_of() {
        assert_eq!(status_of(Some(&trailers(&Status::ok()))), Ok(()));
        let s = Status::not_found("no such key");
        let back = status_of(Some(&trailers(&s))).unwrap_err();
        assert_eq!(back, s);
        let missing = status_of(None).unwrap_err();
        assert_eq!(missing.code(), Code::INTERNAL);
        assert!(missing.message().contains("without a status"));
        let no_status = Metadata::builder().message("x").finish();
        assert_eq!(
            status_of(Some(&no_status)).unwrap_err().code(),
            Code::INTERNAL
        );
        // An unknown code survives as a number.
        let odd = Metadata::builder().status(77).finish();
        assert_eq!(status_of(Some(&odd)).unwrap_err().code(), Code(77));
    }

    #[test]
    fn details_round_trip_and_oversize_ones_are_dropped() {
        let s = Status::not_found("x").with_details(Bytes::from_static(b"\0\xffbin"));
        let back = status_of(Some(&trailers(&s))).unwrap_err();
        assert_eq!(back.details().map(|d| &d[..]), Some(&b"\0\xffbin"[..]));
        assert_eq!(back, s);
        assert!(format!("{back:?}").contains("details"));
        let big = Bytes::from(vec![1u8; crate::status::MAX_DETAILS + 1]);
        let back =
            status_of(Some(&trailers(&Status::internal("y").with_details(big)))).unwrap_err();
        assert_eq!((back.code(), back.details()), (Code::INTERNAL, None));
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let s = Status::internal("é".repeat(10_000));
        let t = trailers(&s);
        let m = t.message().unwrap();
        assert!(m.len() <= 8 * 1024 && m.len() > 8000);
        assert!(weft_frame::metadata::validate(t.as_bytes()).is_ok());
    }
}
