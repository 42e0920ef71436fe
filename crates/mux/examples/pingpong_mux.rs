//! A weft-mux stream ping-pong of 7-byte messages on one connection over
//! TCP loopback, client and server in one process: the figure to compare
//! with `pingpong_raw`. Usage: `pingpong_mux N [mt]` (N round trips after
//! 1000 of warm-up; `mt` uses the multi-thread runtime). Prints the median
//! latency.
#![allow(missing_docs)]

use std::time::Instant;

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use weft_mux::{Config, Metadata, Role, connect};

const WARMUP: usize = 1000;

async fn run(n: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        sock.set_nodelay(true).unwrap();
        let (_conn, mut incoming) = connect(sock, Role::Server, Config::default())
            .await
            .unwrap();
        let mut st = incoming.accept().await.unwrap();
        while let Some(c) = st.recv().await.unwrap() {
            st.send(c.data, false).await.unwrap();
        }
        st.send(Bytes::new(), true).await.unwrap();
    });
    let sock = TcpStream::connect(addr).await.unwrap();
    sock.set_nodelay(true).unwrap();
    let (conn, _incoming) = connect(sock, Role::Client, Config::default())
        .await
        .unwrap();
    let mut st = conn
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let msg = Bytes::from_static(b"pingpng");
    let mut lat = Vec::with_capacity(n);
    for i in 0..WARMUP + n {
        let t = Instant::now();
        st.send(msg.clone(), false).await.unwrap();
        let got = st.recv().await.unwrap().unwrap();
        assert_eq!(got.data.len(), 7);
        if i >= WARMUP {
            lat.push(t.elapsed());
        }
    }
    st.send(Bytes::new(), true).await.unwrap();
    assert!(st.recv().await.unwrap().is_none());
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
