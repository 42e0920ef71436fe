//! `Incoming::cork`: the answers to a batch of calls leave in one write,
//! and a stream reset under a cork still delivers what it sent first.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use weft_mux::{Config, Connection, Incoming, Metadata, Role, Stream, connect};

/// A duplex end that counts its `poll_write` calls that wrote something.
struct Counted {
    inner: DuplexStream,
    writes: Arc<AtomicUsize>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A client, and a server whose transport counts writes.
async fn pair() -> (Connection, Incoming, Arc<AtomicUsize>, Connection) {
    let (a, b) = tokio::io::duplex(1 << 20);
    let writes = Arc::new(AtomicUsize::new(0));
    let b = Counted {
        inner: b,
        writes: writes.clone(),
    };
    let (c, s) = tokio::join!(
        connect(a, Role::Client, Config::default()),
        connect(b, Role::Server, Config::default())
    );
    let ((client, _ci), (server, incoming)) = (c.unwrap(), s.unwrap());
    (client, incoming, writes, server)
}

async fn open_calls(client: &Connection, n: u8) -> Vec<Stream> {
    let mut calls = Vec::new();
    for i in 0..n {
        let md = Metadata::builder().method("m").finish();
        calls.push(client.open(md, Bytes::from(vec![i]), true).await.unwrap());
    }
    calls
}

async fn accept_n(incoming: &mut Incoming, n: usize) -> Vec<Stream> {
    let mut streams = Vec::new();
    while streams.len() < n {
        match incoming.try_accept() {
            Some(s) => streams.push(s),
            None => streams.push(incoming.accept().await.unwrap()),
        }
    }
    streams
}

#[tokio::test]
async fn corked_answers_leave_in_one_write_and_all_arrive() {
    let (client, mut incoming, writes, _server) = pair().await;
    let mut calls = open_calls(&client, 8).await;
    let mut streams = accept_n(&mut incoming, 8).await;
    let before = writes.load(Ordering::SeqCst);
    {
        let _cork = incoming.cork();
        for s in &mut streams {
            let first = s.recv().await.unwrap().unwrap();
            s.send(first.data, true).await.unwrap();
        }
        assert_eq!(
            writes.load(Ordering::SeqCst),
            before,
            "nothing written while corked"
        );
    }
    assert_eq!(
        writes.load(Ordering::SeqCst),
        before + 1,
        "one write for the batch"
    );
    for (i, call) in calls.iter_mut().enumerate() {
        let got = call.recv().await.unwrap().unwrap();
        assert_eq!(&got.data[..], &[i as u8]);
    }
}

#[tokio::test]
async fn a_stream_dropped_under_a_cork_still_delivers_what_it_sent() {
    let (client, mut incoming, _writes, _server) = pair().await;
    let mut calls = open_calls(&client, 1).await;
    let mut streams = accept_n(&mut incoming, 1).await;
    {
        let _cork = incoming.cork();
        let mut s = streams.pop().unwrap();
        s.send(Bytes::from_static(b"first"), false).await.unwrap();
        drop(s); // not closed both ways: reset with CANCEL
    }
    let got = calls[0].recv().await.unwrap().unwrap();
    assert_eq!(&got.data[..], b"first");
    let err = calls[0].recv().await.unwrap_err();
    assert!(err.is_reset(), "{err:?}");
}
