//! What a `Stream` send holds once it is over: a send that fails lets go
//! of the data and metadata it was handed, and a send that queued them
//! keeps no second reference of its own (only the frame made of them
//! does, until it is written).

use bytes::Bytes;
use weft_mux::{Config, Metadata, Stream};
use weft_testkit::duplex_pair;

fn trailers() -> Metadata {
    Metadata::builder().status(0).message("done").finish()
}

/// A stream the client opened (its end sent with the `OPEN` if `end`),
/// and the server's side of it, accepted.
async fn opened(end: bool) -> (Stream, Stream, impl Sized) {
    let ((client, ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let stream = client
        .open(
            Metadata::builder().method("svc/x").finish(),
            Bytes::new(),
            end,
        )
        .await
        .unwrap();
    let peer = incoming.accept().await.unwrap();
    (stream, peer, (client, ci, server, incoming))
}

#[tokio::test]
async fn a_failed_send_lets_go_of_its_data_and_metadata() {
    let (mut stream, _peer, _conns) = opened(true).await;
    let data = Bytes::from(vec![7u8; 100]);
    let (held, md) = (data.clone(), trailers());
    let held_md = md.as_bytes().clone();
    // The stream's end was sent with its `OPEN`: nothing more may go.
    assert!(stream.send_with_metadata(md, data, true).await.is_err());
    assert!(held.is_unique(), "the failed send dropped its data");
    assert!(held_md.is_unique(), "and its metadata");
}

#[tokio::test]
async fn a_queued_send_keeps_nothing_once_its_frame_is_written() {
    let (mut stream, mut peer, _conns) = opened(false).await;
    let data = Bytes::from(vec![7u8; 100]);
    let (held, md) = (data.clone(), trailers());
    let held_md = md.as_bytes().clone();
    stream.send_with_metadata(md, data, true).await.unwrap();
    let got = peer.recv().await.unwrap().unwrap();
    assert_eq!((got.data.len(), got.end), (100, true));
    // The peer has the bytes, so the frame holding ours was written and
    // dropped.
    assert!(held.is_unique(), "the data went with its frame");
    assert!(held_md.is_unique(), "and so did the metadata");
}
