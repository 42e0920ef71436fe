//! `Connection::call`, the client's unary entry, against what the same
//! exchange gives as a full stream (`open(.., end = true)` + `recv` +
//! drop): the same bytes, the same errors, the same frames seen by the
//! peer, for every way a reply can leave the one-frame case.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use weft_mux::{Config, Connection, Incoming, Metadata, Reason, Replied, StreamError};
use weft_testkit::duplex_pair;

/// What a client saw of one exchange: the reply's bytes in order, how it
/// ended (`Ok` for the peer's end), and the chunks it came in.
#[derive(Debug, PartialEq)]
struct Seen {
    bytes: Vec<u8>,
    chunks: usize,
    end: Result<(), String>,
}

/// A stream error as the test compares it: its kind and reason.
fn kind(e: &StreamError) -> String {
    format!(
        "reset={} closed={} remote={} reason={:?}",
        e.is_reset(),
        e.is_closed(),
        e.is_remote(),
        e.reason()
    )
}

/// Reads the rest of a reply after its first piece.
async fn collect(r: Replied) -> Seen {
    let mut seen = Seen {
        bytes: Vec::new(),
        chunks: 0,
        end: Ok(()),
    };
    if matches!(&r.first, Ok(Some(c)) if c.end) {
        assert!(r.more.is_none(), "an ended reply hands out no stream");
    }
    let mut next = r.first;
    let mut more = r.more;
    loop {
        match next {
            Ok(Some(c)) => {
                seen.bytes.extend_from_slice(&c.data);
                seen.chunks += 1;
                if c.end {
                    return seen;
                }
            }
            Ok(None) => return seen,
            Err(e) => {
                seen.end = Err(kind(&e));
                return seen;
            }
        }
        let s = more
            .as_mut()
            .expect("a reply not ended comes with its stream");
        next = s.recv().await;
    }
}

/// The same exchange as a full stream, the way rpc ran it before `call`.
async fn by_stream(client: &Connection, request: Bytes) -> Seen {
    let mut s = client.open(Metadata::new(), request, true).await.unwrap();
    let mut seen = Seen {
        bytes: Vec::new(),
        chunks: 0,
        end: Ok(()),
    };
    loop {
        match s.recv().await {
            Ok(Some(c)) => {
                seen.bytes.extend_from_slice(&c.data);
                seen.chunks += 1;
                if c.end {
                    return seen;
                }
            }
            Ok(None) => return seen,
            Err(e) => {
                seen.end = Err(kind(&e));
                return seen;
            }
        }
    }
}

async fn by_call(client: &Connection, request: Bytes) -> Seen {
    let r = client.call(Metadata::new(), request).await.unwrap();
    assert!(r.id % 2 == 1, "a client's stream id is odd: {}", r.id);
    collect(r).await
}

/// How the server answers one request it has read whole.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// One `DATA|END_STREAM` frame.
    One,
    /// Three frames, the last with the end.
    Three,
    /// `n` bytes in one send (split by flow control and the frame limit).
    Big(usize),
    /// The server resets the stream (`INTERNAL_ERROR`).
    Reset,
    /// The server's connection goes away.
    Close,
}

/// Serves one stream: checks the request arrived whole, then answers.
async fn serve(server: &Connection, incoming: &mut Incoming, want: usize, answer: Answer) {
    let mut peer = incoming.accept().await.unwrap();
    let mut got = 0;
    loop {
        let c = peer.recv().await.unwrap().unwrap();
        got += c.data.len();
        if c.end {
            break;
        }
    }
    assert_eq!(got, want, "the request arrived whole");
    match answer {
        Answer::One => peer.send(Bytes::from_static(b"reply"), true).await.unwrap(),
        Answer::Three => {
            for (piece, end) in [(&b"re"[..], false), (b"pl", false), (b"y", true)] {
                peer.send(Bytes::copy_from_slice(piece), end).await.unwrap();
            }
        }
        Answer::Big(n) => peer.send(bytes(n), true).await.unwrap(),
        Answer::Reset => peer.reset(Reason::INTERNAL_ERROR),
        Answer::Close => server.shutdown(Duration::ZERO).await,
    }
}

fn bytes(n: usize) -> Bytes {
    (0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()
}

/// Runs one exchange both ways, each on a fresh pair, and returns what
/// each client saw (stream first, call second); both tables end empty.
async fn both(
    request: usize,
    answer: Answer,
    client_cfg: &Config,
    server_cfg: &Config,
) -> [Seen; 2] {
    let mut out = Vec::new();
    for fast in [false, true] {
        let ((client, _ci), (server, mut incoming)) =
            duplex_pair(1 << 20, client_cfg.clone(), server_cfg.clone()).await;
        let req = bytes(request);
        let ask = async {
            if fast {
                by_call(&client, req).await
            } else {
                by_stream(&client, req).await
            }
        };
        let (seen, ()) = tokio::join!(ask, serve(&server, &mut incoming, request, answer));
        // The reply is handled: nothing of the call is left in the table
        // (the fast path's drop owes nothing; the stream's drop ran).
        tokio::time::timeout(Duration::from_secs(10), async {
            while client.stats().streams != 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the client's table empties");
        out.push(seen);
    }
    let call = out.pop().unwrap();
    let stream = out.pop().unwrap();
    [stream, call]
}

fn small_window() -> Config {
    let mut c = Config::default();
    c.stream_window(16 * 1024);
    c
}

#[tokio::test]
async fn a_one_frame_reply_ends_the_call_in_its_first_piece() {
    let d = Config::default();
    let [stream, call] = both(3, Answer::One, &d, &d).await;
    assert_eq!(stream, call);
    assert_eq!(call.bytes, b"reply");
    assert_eq!((call.chunks, call.end), (1, Ok(())));
}

#[tokio::test]
async fn a_multi_frame_reply_continues_on_a_stream() {
    let d = Config::default();
    let [stream, call] = both(3, Answer::Three, &d, &d).await;
    assert_eq!(stream, call);
    assert_eq!((call.bytes.as_slice(), call.chunks), (&b"reply"[..], 3));
}

#[tokio::test]
async fn a_reply_over_our_window_is_read_whole() {
    let n = 100 * 1024;
    let [stream, call] = both(3, Answer::Big(n), &small_window(), &Config::default()).await;
    assert_eq!(stream.bytes, call.bytes);
    assert_eq!(call.bytes, bytes(n));
    assert!(call.chunks > 1, "{} chunks", call.chunks);
    assert_eq!(call.end, Ok(()));
}

#[tokio::test]
async fn a_request_over_the_peers_window_is_sent_whole() {
    let n = 100 * 1024;
    let [stream, call] = both(n, Answer::One, &Config::default(), &small_window()).await;
    assert_eq!(stream, call);
    assert_eq!(call.bytes, b"reply");
}

#[tokio::test]
async fn a_reset_reply_is_the_same_error() {
    let d = Config::default();
    let [stream, call] = both(3, Answer::Reset, &d, &d).await;
    assert_eq!(stream, call);
    let e = call.end.unwrap_err();
    assert!(
        e.contains("reset=true") && e.contains("INTERNAL_ERROR"),
        "{e}"
    );
}

#[tokio::test]
async fn a_closed_connection_is_the_same_error() {
    let d = Config::default();
    let [stream, call] = both(3, Answer::Close, &d, &d).await;
    assert_eq!(stream, call);
    let e = call.end.unwrap_err();
    assert!(e.contains("closed=true"), "{e}");
}

#[tokio::test]
async fn a_call_on_a_closed_connection_fails_to_open() {
    let ((client, _ci), (server, _incoming)) =
        duplex_pair(1 << 16, Config::default(), Config::default()).await;
    server.shutdown(Duration::ZERO).await;
    client.closed().await;
    let e = client.call(Metadata::new(), bytes(3)).await.unwrap_err();
    assert!(e.is_closed(), "{e:?}");
}

/// Polls `f` once; true if it is still pending.
async fn pending_once<F: Future>(f: std::pin::Pin<&mut F>) -> bool {
    let mut f = f;
    poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx).is_pending())).await
}

#[tokio::test]
async fn a_call_dropped_before_its_reply_resets_the_stream_with_cancel() {
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(1 << 16, Config::default(), Config::default()).await;
    {
        // Boxed, so that the drop below drops the future itself.
        let mut call = Box::pin(client.call(Metadata::new(), bytes(3)));
        assert!(pending_once(call.as_mut()).await, "no reply yet");
        let mut peer = incoming.accept().await.unwrap();
        assert!(peer.recv().await.unwrap().unwrap().end);
        assert_eq!(client.stats().streams, 1);
        // Dropped here, with the request read and no reply sent.
        drop(call);
        let e = tokio::time::timeout(Duration::from_secs(10), poll_fn(|cx| peer.poll_reset(cx)))
            .await
            .expect("the peer learns of the cancel");
        assert!(e.is_reset() && e.is_remote(), "{e:?}");
        assert_eq!(e.reason(), Some(Reason::CANCEL));
    }
    assert_eq!(client.stats().streams, 0, "freed by the drop");
}

#[tokio::test]
async fn a_call_dropped_after_its_one_frame_reply_resets_nothing() {
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(1 << 16, Config::default(), Config::default()).await;
    let (replied, ()) = tokio::join!(
        client.call(Metadata::new(), bytes(3)),
        serve(&server, &mut incoming, 3, Answer::One)
    );
    let replied = replied.unwrap();
    assert!(replied.more.is_none());
    assert_eq!(client.stats().streams, 0, "left the table in the read");
    drop(replied);
    // A second exchange on the same connection proves nothing was reset
    // or freed twice: the server still answers, and both tables are empty.
    let (second, ()) = tokio::join!(
        by_call(&client, bytes(3)),
        serve(&server, &mut incoming, 3, Answer::One)
    );
    assert_eq!(second.bytes, b"reply");
    assert_eq!(client.stats().streams, 0);
    assert_eq!(server.stats().streams, 0);
}

#[tokio::test]
async fn a_call_waits_its_turn_under_the_peers_cap_and_leaves_the_queue_when_dropped() {
    let mut one = Config::default();
    one.max_concurrent_streams(1);
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(1 << 16, Config::default(), one).await;
    // Learn the cap first.
    let (_, ()) = tokio::join!(
        by_call(&client, bytes(1)),
        serve(&server, &mut incoming, 1, Answer::One)
    );
    let mut first = pin!(client.call(Metadata::new(), bytes(1)));
    assert!(pending_once(first.as_mut()).await);
    {
        let mut second = pin!(client.call(Metadata::new(), bytes(1)));
        assert!(pending_once(second.as_mut()).await, "queued behind the cap");
        assert_eq!(client.stats().streams, 1, "the queued call opened nothing");
    }
    let (replied, ()) = tokio::join!(first, serve(&server, &mut incoming, 1, Answer::One));
    assert!(replied.unwrap().more.is_none());
    // The dropped queued call gave its turn back: a third opens at once.
    let (third, ()) = tokio::join!(
        by_call(&client, bytes(1)),
        serve(&server, &mut incoming, 1, Answer::One)
    );
    assert_eq!(third.bytes, b"reply");
}
