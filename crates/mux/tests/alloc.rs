//! Allocation count of a mux stream round trip in steady state, with a
//! counting global allocator (stats_alloc, so no `unsafe` here).
//!
//! The allocator counts every thread and libtest's own threads allocate at
//! random moments, so this file runs without the test harness
//! (`harness = false`): `main` runs alone on the main thread, client and
//! server share one current-thread runtime over TCP loopback, and a failed
//! check panics, failing `cargo test`.
//!
//! Steady state: after a warm-up, a 7-byte ping-pong on one stream
//! (`send` then `recv` on the client, `recv` then `send` on the server)
//! allocates nothing per round trip. Buffers that grow (the read buffer,
//! the send and receive queues) keep their capacity, frames are slices of
//! the read buffer, and no waker is cloned when the same task waits again.

use std::alloc::System;

use bytes::Bytes;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::net::{TcpListener, TcpStream};
use weft_mux::pipeline::{EncryptionPolicy, HandshakeConfig};
use weft_mux::{Config, Metadata, Role, connect};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WARMUP: usize = 3_000;
const MEASURED: usize = 2_000;

fn config() -> Config {
    let mut hs = HandshakeConfig::default();
    hs.offer.compression = false;
    hs.offer.encryption = EncryptionPolicy::Off;
    let mut c = Config::default();
    c.handshake(hs);
    c
}

/// Allocations plus reallocations over `MEASURED` round trips.
async fn measure() -> usize {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        sock.set_nodelay(true).unwrap();
        let (_conn, mut incoming) = connect(sock, Role::Server, config()).await.unwrap();
        let mut st = incoming.accept().await.unwrap();
        while let Some(c) = st.recv().await.unwrap() {
            st.send(c.data, false).await.unwrap();
        }
        st.send(Bytes::new(), true).await.unwrap();
    });
    let sock = TcpStream::connect(addr).await.unwrap();
    sock.set_nodelay(true).unwrap();
    let (conn, _incoming) = connect(sock, Role::Client, config()).await.unwrap();
    let mut st = conn
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let msg = Bytes::from_static(b"pingpng");
    let mut region = None;
    for i in 0..WARMUP + MEASURED {
        if i == WARMUP {
            region = Some(Region::new(GLOBAL));
        }
        st.send(msg.clone(), false).await.unwrap();
        let got = st.recv().await.unwrap().unwrap();
        assert_eq!(got.data, msg);
    }
    let change = region.expect("measured").change();
    st.send(Bytes::new(), true).await.unwrap();
    assert!(st.recv().await.unwrap().is_none());
    server.await.unwrap();
    change.allocations + change.reallocations
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let allocs = rt.block_on(measure());
    // Nothing at all: one allocation per round trip would count MEASURED,
    // and the read buffer's refills (one per 16 KiB, about every 700 round
    // trips) count too unless it is reused in place.
    assert_eq!(
        allocs, 0,
        "steady-state stream round trips allocated {allocs} times in {MEASURED} round trips"
    );
    println!("alloc: {allocs} allocations in {MEASURED} steady-state stream round trips");
}
