//! A connection's read and write buffers are sized on demand and given
//! back when it goes quiet: 10,000 idle connections must not
//! each hold 16 KiB of read buffer reserved at connect, which doubled the
//! allocator's peak mapping (and its never-returned metadata) though the
//! pages were never touched.
//!
//! In memory on a paused clock: the keepalive ticks are virtual.

use std::time::Duration;

use bytes::Bytes;
use weft_mux::{BufferCapacity, Config, Connection, Metadata};
use weft_testkit::{Endpoint, duplex_pair, echo_all};

/// What a connection that only exchanged settings and small calls may
/// hold per buffer (the first reserve is 1 KiB each; reserved at connect
/// instead, the read buffer was 16 KiB and the write buffer 8 KiB).
const SMALL: usize = 2 * 1024;

async fn pair(server: Config) -> (Endpoint, Endpoint) {
    let mut client = Config::default();
    // The window these tests were written for (the default before it
    // became 64 KiB): with 64 KiB the server's write buffer was found at
    // capacity 0 right after the 256 KiB echo below.
    client.stream_window(256 * 1024);
    client.idle_timeout(None);
    duplex_pair(1 << 20, client, server).await
}

/// `len` bytes deflate cannot shrink (compression may be negotiated).
fn incompressible(len: usize) -> Bytes {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// One call of `len` bytes through the echo server, awaited to its end;
/// returns once both sides have released the stream.
async fn call(client: &Connection, server: &Connection, len: usize) {
    let body = incompressible(len);
    let mut s = client.open(Metadata::new(), body, true).await.unwrap();
    let mut got = 0;
    while let Some(c) = s.recv().await.unwrap() {
        got += c.data.len();
    }
    assert_eq!(got, len);
    drop(s);
    while client.stats().streams + server.stats().streams > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn assert_small(who: &str, b: BufferCapacity) {
    assert!(b.read <= SMALL && b.write <= SMALL, "{who}: {b:?}");
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_reserves_small_buffers() {
    let mut server = Config::default();
    server.idle_timeout(None);
    let ((client, _ci), (server, incoming)) = pair(server).await;
    tokio::spawn(echo_all(incoming));
    // Settings both ways, then two small calls: nothing needs more.
    for _ in 0..2 {
        call(&client, &server, 100).await;
    }
    assert_small("client", client.buffer_capacity());
    assert_small("server", server.buffer_capacity());
}

#[tokio::test(start_paused = true)]
async fn a_burst_grows_the_buffers_and_a_quiet_tick_gives_them_back() {
    let mut config = Config::default();
    config
        .idle_timeout(None)
        .stream_window(256 * 1024) // see `pair`
        .keepalive_interval(Some(Duration::from_secs(1)));
    let ((client, _ci), (server, incoming)) = pair(config).await;
    tokio::spawn(echo_all(incoming));
    // Large payloads are chained, not copied into the write buffer: what
    // grows it is many small frames written together.
    let calls: Vec<_> = (0..32)
        .map(|_| {
            let (client, server) = (client.clone(), server.clone());
            tokio::spawn(async move { call(&client, &server, 1000).await })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }
    call(&client, &server, 256 * 1024).await;
    let grown = server.buffer_capacity();
    assert!(grown.read > SMALL && grown.write > SMALL, "{grown:?}");
    // Busy between the ticks: kept (a call per tick allocates nothing).
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        call(&client, &server, 4 * 1024).await;
        assert!(server.buffer_capacity().read > SMALL, "released while busy");
    }
    // One tick finds the burst, the next finds nothing read but pongs.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!server.is_closed());
    assert_small("server after going quiet", server.buffer_capacity());
    // And it still works, growing again as needed.
    call(&client, &server, 64 * 1024).await;
    assert!(server.buffer_capacity().read > SMALL);
}

#[tokio::test(start_paused = true)]
async fn with_no_deadline_at_all_a_quiet_connection_still_gives_its_buffers_back() {
    // No idle timeout and no keepalive (`weft serve --idle-timeout off`):
    // no deadline ever ticks, yet an idle connection must not keep its
    // buffers for its whole life.
    let mut config = Config::default();
    config.idle_timeout(None).keepalive_interval(None);
    let ((client, _ci), (server, incoming)) = duplex_pair(1 << 20, config.clone(), config).await;
    tokio::spawn(echo_all(incoming));
    call(&client, &server, 100).await;
    assert!(
        server.buffer_capacity().read > 0,
        "a call reads into a buffer"
    );
    tokio::time::sleep(Duration::from_secs(25)).await;
    for (who, c) in [("client", &client), ("server", &server)] {
        let b = c.buffer_capacity();
        assert_eq!((b.read, b.write), (0, 0), "{who} still holds {b:?}");
    }
    // And it still works.
    call(&client, &server, 64 * 1024).await;
    assert!(!server.is_closed());
}
