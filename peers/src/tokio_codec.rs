//! A raw tokio ping-pong: `Framed<TcpStream, LengthDelimitedCodec>` on both
//! sides, one server task. Concurrency is pipelining on one connection: the
//! client feeds `inflight` requests, flushes once, then reads the responses.

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use crate::drive::time_each;
use crate::{Counts, Place, RESPONSE, Runtime};

type Conn = Framed<TcpStream, LengthDelimitedCodec>;

/// Times batches of `inflight` pipelined calls.
pub fn run_batches(
    runtime: Runtime,
    counts: Counts,
    inflight: usize,
    place: Place,
) -> Vec<Duration> {
    runtime.build().block_on(async {
        let mut conn = connect(place).await;
        time_each(counts, async || call(&mut conn, inflight).await).await
    })
}

async fn call(conn: &mut Conn, count: usize) {
    for _ in 0..count {
        conn.feed(Bytes::new()).await.expect("send request");
    }
    SinkExt::<Bytes>::flush(conn).await.expect("flush requests");
    for _ in 0..count {
        let body = conn.next().await.expect("response").expect("read response");
        assert_eq!(&body[..], RESPONSE);
    }
}

/// The server alone (split layout).
pub fn server() -> Pin<Box<dyn Future<Output = SocketAddr> + Send>> {
    Box::pin(start())
}

/// Starts the server on the current runtime, a task per connection.
async fn start() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            stream.set_nodelay(true).expect("nodelay");
            tokio::spawn(serve(Framed::new(stream, LengthDelimitedCodec::new())));
        }
    });
    addr
}

async fn connect(place: Place) -> Conn {
    let addr = place.addr(start()).await;
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    Framed::new(stream, LengthDelimitedCodec::new())
}

/// Answers each request; flushes once no further request is buffered.
async fn serve(mut conn: Conn) {
    let response = Bytes::from_static(RESPONSE);
    while let Some(Ok(_request)) = conn.next().await {
        if conn.feed(response.clone()).await.is_err() {
            return;
        }
        if conn.read_buffer().is_empty() && SinkExt::<Bytes>::flush(&mut conn).await.is_err() {
            return;
        }
    }
}
