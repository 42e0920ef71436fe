//! A weft-mux stream ping-pong of 7-byte messages on one connection over
//! TCP loopback, client and server in one process: the figure to compare
//! with `pingpong_raw`. Usage: `pingpong_mux N [mt] [enc]` (N round trips
//! after 1000 of warm-up; `mt` uses the multi-thread runtime; `enc`
//! negotiates AES-256-GCM, otherwise encryption and compression are off, as
//! in the raw baseline). Prints the median latency.
#![allow(missing_docs)]

use std::time::Instant;

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use weft_mux::pipeline::{EncryptionPolicy, HandshakeConfig};
use weft_mux::{Config, Metadata, Role, connect};

const WARMUP: usize = 1000;

fn config(enc: bool) -> Config {
    let mut hs = HandshakeConfig::default();
    hs.offer.compression = false;
    if !enc {
        hs.offer.encryption = EncryptionPolicy::Off;
    }
    let mut c = Config::default();
    c.handshake(hs);
    c
}

async fn run(n: usize, enc: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        sock.set_nodelay(true).unwrap();
        let (_conn, mut incoming) = connect(sock, Role::Server, config(enc)).await.unwrap();
        let mut st = incoming.accept().await.unwrap();
        while let Some(c) = st.recv().await.unwrap() {
            st.send(c.data, false).await.unwrap();
        }
        st.send(Bytes::new(), true).await.unwrap();
    });
    let sock = TcpStream::connect(addr).await.unwrap();
    sock.set_nodelay(true).unwrap();
    let (conn, _incoming) = connect(sock, Role::Client, config(enc)).await.unwrap();
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let mt = args.iter().any(|a| a == "mt");
    let enc = args.iter().any(|a| a == "enc");
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
    rt.block_on(run(n, enc));
}
