//! A unary call reads whatever framing of its reply the server chose the
//! same way: the usual reply (one frame: the message whole, the end and
//! the status) takes the client's short path, every other shape the
//! general reader, and both give the same value or status.

use bytes::Bytes;
use weft_frame::Metadata;
use weft_mux::{Config, Stream};
use weft_rpc::{CallOptions, Client, Code, Status};

/// A length-prefixed message.
fn msg(body: &[u8]) -> Bytes {
    let mut v = (body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    Bytes::from(v)
}

/// One frame of a reply: its metadata, its payload, and whether it ends
/// the stream.
type Frame = (Metadata, Bytes, bool);

fn ok() -> Metadata {
    Metadata::ok_status()
}

/// Makes one unary call (message limit `max`) to a server that answers
/// with exactly `frames`, and returns what `read` makes of it.
async fn answered<T>(
    max: usize,
    frames: Vec<Frame>,
    read: impl AsyncFnOnce(&Client) -> Result<T, Status>,
) -> Result<T, Status> {
    let ((client, _), (_server, mut incoming)) =
        weft_testkit::duplex_pair(1 << 20, Config::default(), Config::default()).await;
    let server = tokio::spawn(async move {
        let mut stream: Stream = incoming.accept().await.unwrap();
        // The request, whole, then the reply as given.
        while !matches!(stream.recv().await, Ok(None) | Err(_)) {}
        for (metadata, payload, end) in frames {
            stream
                .send_with_metadata(metadata, payload, end)
                .await
                .unwrap();
        }
        // Held until the client is done with the call.
        let _ = stream.recv().await;
    });
    let client = Client::with_limits(client, max, None);
    let out = read(&client).await;
    drop(client);
    server.abort();
    out
}

async fn unary(max: usize, frames: Vec<Frame>) -> Result<Bytes, Status> {
    answered(max, frames, async |c| c.unary("svc/m", Bytes::new()).await).await
}

#[tokio::test]
async fn the_usual_reply_and_its_status() {
    let got = unary(64, vec![(ok(), msg(b"hello"), true)]).await;
    assert_eq!(got.unwrap(), &b"hello"[..]);
    let got = unary(64, vec![(ok(), msg(b""), true)]).await;
    assert_eq!(got.unwrap(), &b""[..]);
    // A message and an error status in one frame: the status wins.
    let failed = Metadata::builder()
        .status(Code::NOT_FOUND.0)
        .message("gone")
        .finish();
    let e = unary(64, vec![(failed, msg(b"hello"), true)])
        .await
        .unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::NOT_FOUND, "gone"));
    // An end with no status is never success.
    for metadata in [Metadata::new(), Metadata::builder().message("x").finish()] {
        let e = unary(64, vec![(metadata, msg(b"hello"), true)])
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::INTERNAL, "{e}");
        assert!(e.message().contains("without a status"), "{e}");
    }
}

#[tokio::test]
async fn a_reply_over_the_limit_fails_in_one_frame_or_many() {
    let big = msg(&[7u8; 65]);
    let e = unary(64, vec![(ok(), big.clone(), true)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED, "{e}");
    let (a, b) = (big.slice(..10), big.slice(10..));
    let e = unary(64, vec![(Metadata::new(), a, false), (ok(), b, true)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED, "{e}");
    // Exactly the limit is fine either way.
    let edge = msg(&[7u8; 64]);
    assert_eq!(unary(64, vec![(ok(), edge, true)]).await.unwrap().len(), 64);
}

#[tokio::test]
async fn every_other_framing_reads_as_the_usual_one() {
    let whole = msg(b"hello");
    let cases: Vec<Vec<Frame>> = vec![
        // Cut after its prefix, and mid-body.
        vec![
            (Metadata::new(), whole.slice(..4), false),
            (ok(), whole.slice(4..), true),
        ],
        vec![
            (Metadata::new(), whole.slice(..6), false),
            (ok(), whole.slice(6..), true),
        ],
        // The status in a frame of its own.
        vec![
            (Metadata::new(), whole.clone(), false),
            (ok(), Bytes::new(), true),
        ],
    ];
    for frames in cases {
        let got = unary(64, frames.clone()).await;
        assert_eq!(got.unwrap(), &b"hello"[..], "{frames:?}");
    }
}

#[tokio::test]
async fn replies_with_no_message_or_two_fail() {
    let e = unary(64, vec![(ok(), Bytes::new(), true)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::INTERNAL, "{e}");
    assert!(e.message().contains("without a message"), "{e}");
    let two = [msg(b"a"), msg(b"b")].concat();
    let e = unary(64, vec![(ok(), Bytes::from(two), true)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");
    // A message cut short by the end.
    let whole = msg(b"hello");
    let e = unary(64, vec![(ok(), whole.slice(..6), true)])
        .await
        .unwrap_err();
    assert_ne!(e.code(), Code::OK);
}

#[tokio::test]
async fn headers_and_trailers_reach_the_response_on_either_path() {
    let trailers = Metadata::builder().status(0).custom(b"t", b"2").finish();
    let headers = Metadata::builder().custom(b"h", b"1").finish();
    let read = async |c: &Client| {
        c.unary_response("svc/m", Bytes::new(), &CallOptions::new())
            .await
    };
    // The usual reply: trailers only.
    let r = answered(64, vec![(trailers.clone(), msg(b"x"), true)], read)
        .await
        .unwrap();
    assert_eq!(r.message(), &b"x"[..]);
    assert_eq!(r.trailers(), &trailers);
    assert!(r.headers().is_empty());
    // Headers on a frame of their own, before the message.
    let frames = vec![
        (headers.clone(), msg(b"x"), false),
        (trailers.clone(), Bytes::new(), true),
    ];
    let r = answered(64, frames, read).await.unwrap();
    assert_eq!(
        (r.message(), r.headers(), r.trailers()),
        (&Bytes::from_static(b"x"), &headers, &trailers)
    );
}
