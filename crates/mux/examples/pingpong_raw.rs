//! Baseline for `pingpong_mux`: a raw tokio `LengthDelimitedCodec`
//! ping-pong of 7-byte messages over TCP loopback, client and server in one
//! process. Usage: `pingpong_raw N [mt]` (N round trips after 1000 of
//! warm-up; `mt` uses the multi-thread runtime). Prints the median latency.
#![allow(missing_docs)]

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

const WARMUP: usize = 1000;

async fn read_frame(
    sock: &mut TcpStream,
    codec: &mut LengthDelimitedCodec,
    buf: &mut BytesMut,
) -> Option<BytesMut> {
    loop {
        if let Some(f) = codec.decode(buf).unwrap() {
            return Some(f);
        }
        if sock.read_buf(buf).await.unwrap() == 0 {
            return None;
        }
    }
}

async fn run(n: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        sock.set_nodelay(true).unwrap();
        let mut codec = LengthDelimitedCodec::new();
        let (mut rbuf, mut wbuf) = (BytesMut::with_capacity(8192), BytesMut::with_capacity(8192));
        while let Some(msg) = read_frame(&mut sock, &mut codec, &mut rbuf).await {
            codec.encode(msg.freeze(), &mut wbuf).unwrap();
            sock.write_all(&wbuf).await.unwrap();
            wbuf.clear();
        }
    });
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.set_nodelay(true).unwrap();
    let mut codec = LengthDelimitedCodec::new();
    let (mut rbuf, mut wbuf) = (BytesMut::with_capacity(8192), BytesMut::with_capacity(8192));
    let msg = Bytes::from_static(b"pingpng");
    let mut lat = Vec::with_capacity(n);
    for i in 0..WARMUP + n {
        let t = Instant::now();
        codec.encode(msg.clone(), &mut wbuf).unwrap();
        sock.write_all(&wbuf).await.unwrap();
        wbuf.clear();
        let got = read_frame(&mut sock, &mut codec, &mut rbuf).await.unwrap();
        assert_eq!(got.len(), 7);
        if i >= WARMUP {
            lat.push(t.elapsed());
        }
    }
    drop(sock);
    server.await.unwrap();
    lat.sort();
    println!(
        "round trips: {n}, median latency: {:?}",
        lat.get(n / 2).copied().unwrap_or_default()
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let mt = args.next().as_deref() == Some("mt");
    let rt = if mt {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .unwrap();
    rt.block_on(run(n));
}
