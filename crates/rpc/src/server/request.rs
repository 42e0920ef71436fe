//! The one request of a unary call, read without the general message
//! reader when it came the usual way.
//!
//! A weft client sends a unary request that fits a frame as one frame:
//! the length prefix, the message, and the end of its side. When the first
//! frame received is exactly that (it ends the direction, and its prefix
//! announces the rest of it, within the limit) its payload past the prefix
//! is the request: no decoder state, no second look for an end already
//! seen. Anything else (a message over several frames, two messages, an
//! oversize length, an end without a message, a reset) goes to
//! [`Reader::single`] with that first frame, which answers it exactly as
//! if it had read the frame itself. The frame's metadata is ignored either
//! way: a unary server reads no request headers or trailers.

use bytes::{Buf, Bytes};
use weft_mux::{Chunk, Stream};

use crate::codec::PREFIX_LEN;
use crate::codec::wire::{Reader, is_one_message};
use crate::status::Status;

/// The only message of a unary call's request direction: as
/// [`Reader::single`] gives it (`INVALID_ARGUMENT` for none or more,
/// `RESOURCE_EXHAUSTED` over `max`), in one step when it is whole in its
/// first frame.
///
/// The unary runner (`server::call::unary`) makes the same two steps
/// itself, so that the usual request costs it no future of this
/// function's (about 40 instructions per call); the tests read through
/// this one.
#[cfg(all(test, not(loom)))]
pub(crate) async fn unary_request(
    stream: &mut Stream,
    taken: Option<Bytes>,
    max: usize,
) -> Result<Bytes, Status> {
    match taken_whole(taken, max) {
        Ok(req) => Ok(req),
        Err(taken) => read_request(stream, taken, max).await,
    }
}

/// The request, when the accept took it whole with the stream (the usual
/// way); else what the accept took, for [`read_request`]. Apart from it so
/// that a caller can take the usual request without building (and
/// polling through) a reader's future.
#[inline]
pub(crate) fn taken_whole(taken: Option<Bytes>, max: usize) -> Result<Bytes, Option<Bytes>> {
    match taken {
        Some(mut data) if is_one_message(&data, max) => {
            data.advance(PREFIX_LEN);
            Ok(data)
        }
        other => Err(other),
    }
}

/// [`unary_request`] past [`taken_whole`]: `taken` is not one whole
/// message (or the accept took nothing).
pub(crate) async fn read_request(
    stream: &mut Stream,
    taken: Option<Bytes>,
    max: usize,
) -> Result<Bytes, Status> {
    let first = match taken {
        Some(data) => Ok(Some(whole_side(data))),
        // Otherwise `poll_recv`, not `recv`: the first frame is nearly
        // always in by now (the accept read it), so `recv`'s
        // socket-reading wait is only overhead (about 40 instructions per
        // call); a call still waiting for its first frame is woken by the
        // connection's reader.
        None => match std::future::poll_fn(|cx| stream.poll_recv(cx)).await {
            Ok(Some(mut chunk)) if chunk.end && is_one_message(&chunk.data, max) => {
                chunk.data.advance(PREFIX_LEN);
                return Ok(chunk.data);
            }
            other => other,
        },
    };
    // Boxed: a rare path, and the reader inline would make every unary
    // call's future (copied as it is built) larger by its size.
    Box::pin(async move {
        let mut reader = Reader::new(max);
        reader.absorb(first)?;
        reader.single(stream).await
    })
    .await
}

/// The chunk `recv` would have given for an `OPEN` that ended its
/// direction with `data` (what `Incoming::accept_with_request` takes).
pub(crate) fn whole_side(data: Bytes) -> Chunk {
    Chunk {
        data,
        metadata: weft_frame::Metadata::new(),
        end: true,
    }
}

// Not in the `--cfg loom` build, which has no weft-testkit.
#[cfg(all(test, not(loom)))]
mod tests {
    use weft_frame::Metadata;
    use weft_mux::Config;

    use super::*;
    use crate::status::Code;

    /// A length-prefixed message.
    fn msg(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    /// Sends `frames` (the first with the open, the last ending the
    /// direction) and reads the request with `read`, as a server would,
    /// handing it what the accept took (`taking`: the server's accept).
    async fn served<F>(frames: &[Vec<u8>], taking: bool, read: F) -> Result<Bytes, Status>
    where
        F: AsyncFnOnce(&mut Stream, Option<Bytes>) -> Result<Bytes, Status>,
    {
        let ((client, _), (_server, mut incoming)) =
            weft_testkit::duplex_pair(1 << 20, Config::default(), Config::default()).await;
        let last = frames.len() - 1;
        let first = Bytes::copy_from_slice(&frames[0]);
        let mut out = client
            .open(Metadata::new(), first, last == 0)
            .await
            .unwrap();
        for (i, f) in frames.iter().enumerate().skip(1) {
            out.send(Bytes::copy_from_slice(f), i == last)
                .await
                .unwrap();
        }
        let (mut stream, taken) = if taking {
            let a = incoming.accept_with_request().await.unwrap();
            (a.stream, a.request)
        } else {
            (incoming.accept().await.unwrap(), None)
        };
        read(&mut stream, taken).await
    }

    /// A request that is not in yet when the call starts waiting for it is
    /// read once it comes (the connection's reader wakes the call).
    #[tokio::test]
    async fn a_request_still_on_its_way_is_waited_for() {
        let ((client, _), (_server, mut incoming)) =
            weft_testkit::duplex_pair(1 << 16, Config::default(), Config::default()).await;
        let mut out = client
            .open(Metadata::new(), Bytes::new(), false)
            .await
            .unwrap();
        let mut stream = incoming.accept().await.unwrap();
        let read = tokio::spawn(async move { unary_request(&mut stream, None, 64).await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!read.is_finished());
        out.send(Bytes::from(msg(b"late")), true).await.unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), read).await;
        assert_eq!(got.unwrap().unwrap().unwrap(), &b"late"[..]);
    }

    /// Whatever the caller sent, the request (or the error) is what the
    /// general reader gives; the usual single frame takes the short way.
    #[tokio::test]
    async fn reads_what_the_general_reader_reads() {
        let max = 64;
        let two: Vec<u8> = [msg(b"a"), msg(b"b")].concat();
        let whole = msg(b"hello");
        // The frames sent, and the request or the error's code.
        type Case = (Vec<Vec<u8>>, Result<&'static [u8], Code>);
        let cases: Vec<Case> = vec![
            // The usual request: one frame, whole, ending the direction.
            (vec![whole.clone()], Ok(b"hello")),
            (vec![msg(b"")], Ok(b"")),
            // Split over frames, or ended by a frame of its own.
            (vec![whole[..2].to_vec(), whole[2..].to_vec()], Ok(b"hello")),
            (vec![whole.clone(), vec![]], Ok(b"hello")),
            // Two messages, none, a cut one, one over the limit.
            (vec![two], Err(Code::INVALID_ARGUMENT)),
            (vec![vec![]], Err(Code::INVALID_ARGUMENT)),
            (vec![whole[..7].to_vec()], Err(Code::INTERNAL)),
            (vec![msg(&[7; 65])], Err(Code::RESOURCE_EXHAUSTED)),
        ];
        for (frames, want) in cases {
            let read = async |s: &mut Stream, taken| unary_request(s, taken, max).await;
            let fast = served(&frames, false, read).await;
            let general = served(&frames, false, async |s: &mut Stream, _| {
                Reader::new(max).single(s).await
            })
            .await;
            assert_eq!(fast, general, "{frames:?}");
            let accepted = served(&frames, true, read).await;
            assert_eq!(accepted, general, "taken by the accept: {frames:?}");
            match want {
                Ok(body) => assert_eq!(fast.as_deref(), Ok(body), "{frames:?}"),
                Err(code) => assert_eq!(fast.map_err(|e| e.code()), Err(code), "{frames:?}"),
            }
        }
    }
}
