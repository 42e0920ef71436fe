//! How connections close: a graceful `GOAWAY` drains its streams before the
//! transport is shut, and a closed connection shuts its transport's write
//! side even while handles to it live.

use std::time::Duration;

use bytes::Bytes;
use weft_mux::{Config, Connection, Incoming, Metadata, Role, Stream, connect};

async fn pair_with(
    client: Config,
    server: Config,
) -> ((Connection, Incoming), (Connection, Incoming)) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let (c, s) = tokio::join!(
        connect(a, Role::Client, client),
        connect(b, Role::Server, server)
    );
    (c.unwrap(), s.unwrap())
}

/// Echoes one stream: everything it receives, then the end.
async fn echo(mut st: Stream) {
    while let Some(c) = st.recv().await.unwrap() {
        let end = c.end;
        st.send(c.data, end).await.unwrap();
        if end {
            return;
        }
    }
    st.send(Bytes::new(), true).await.unwrap();
}

async fn call(conn: &Connection, body: &'static [u8]) -> Result<Vec<u8>, String> {
    let mut s = conn
        .open(Metadata::new(), Bytes::from_static(body), true)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let mut got = Vec::new();
    while let Some(c) = s.recv().await.map_err(|e| format!("recv: {e}"))? {
        got.extend_from_slice(&c.data);
    }
    Ok(got)
}

#[tokio::test(start_paused = true)]
async fn the_call_on_the_last_stream_id_gets_its_answer() {
    let mut cc = Config::default();
    cc.max_stream_id(3); // ids 1 and 3; opening 3 also sends GOAWAY
    let ((client, _ci), (server, mut incoming)) = pair_with(cc, Config::default()).await;
    let handler = tokio::spawn(async move {
        while let Some(st) = incoming.accept().await {
            echo(st).await;
        }
    });
    assert_eq!(call(&client, b"first").await.unwrap(), b"first");
    let last = tokio::time::timeout(Duration::from_secs(5), call(&client, b"last"))
        .await
        .expect("the last call ends");
    assert_eq!(last.unwrap(), b"last");
    // Both sides then close gracefully.
    tokio::time::timeout(Duration::from_secs(5), server.closed())
        .await
        .expect("the server closes once the drain is done");
    tokio::time::timeout(Duration::from_secs(5), client.closed())
        .await
        .expect("the client closes once the drain is done");
    assert_eq!(
        server.close_cause().unwrap().reason,
        weft_mux::Reason::NO_ERROR
    );
    handler.await.unwrap();
}
