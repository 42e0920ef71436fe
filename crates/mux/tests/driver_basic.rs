//! The tokio driver end to end over `tokio::io::duplex` and TCP loopback.
//!
//! The in-memory tests that bound a wait run on a paused clock: time moves
//! only when every task waits, so a timeout fires when the awaited event can
//! never happen, not when the machine is slow. (The TCP test cannot: a
//! paused clock jumps ahead while the runtime waits on the kernel.)

use std::time::Duration;

use bytes::Bytes;
use weft_mux::{Config, Metadata, Reason, Role, connect};
use weft_testkit::{Endpoint, duplex_pair};

async fn pair() -> (Endpoint, Endpoint) {
    duplex_pair(64 * 1024, Config::default(), Config::default()).await
}

#[tokio::test]
async fn open_send_recv_end_over_duplex() {
    let ((client, _ci), (_server, mut incoming)) = pair().await;
    let md = Metadata::builder().method("echo").finish();
    let mut s = client
        .open(md, Bytes::from_static(b"hello"), false)
        .await
        .unwrap();
    assert_eq!(s.id(), 1);
    let mut peer = incoming.accept().await.unwrap();
    assert_eq!(peer.id(), 1);
    assert_eq!(peer.metadata().method(), Some("echo"));
    let c = peer.recv().await.unwrap().unwrap();
    assert_eq!(&c.data[..], b"hello");
    s.send(Bytes::from_static(b" world"), true).await.unwrap();
    let c = peer.recv().await.unwrap().unwrap();
    assert_eq!(&c.data[..], b" world");
    assert!(c.end);
    assert!(peer.recv().await.unwrap().is_none(), "explicit end");
    let trailers = Metadata::builder().status(0).finish();
    peer.send_with_metadata(trailers, Bytes::from_static(b"bye"), true)
        .await
        .unwrap();
    let c = s.recv().await.unwrap().unwrap();
    assert_eq!(&c.data[..], b"bye");
    assert_eq!(c.metadata.status(), Some(0));
    assert!(s.recv().await.unwrap().is_none());
}

#[tokio::test]
async fn ping_pong_many_messages() {
    let ((client, _ci), (_server, mut incoming)) = pair().await;
    let server = tokio::spawn(async move {
        let mut st = incoming.accept().await.unwrap();
        while let Some(c) = st.recv().await.unwrap() {
            st.send(c.data, false).await.unwrap();
        }
        // A bare END_STREAM is `Ok(None)`: answer it with ours.
        st.send(Bytes::new(), true).await.unwrap();
    });
    let mut s = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    for i in 0..2000u32 {
        let msg = Bytes::copy_from_slice(&i.to_be_bytes());
        s.send(msg.clone(), false).await.unwrap();
        let c = match s.recv().await {
            Ok(c) => c.unwrap(),
            Err(e) => panic!("client {i}: {e}; server: {:?}", server.await),
        };
        assert_eq!(c.data, msg);
    }
    s.send(Bytes::new(), true).await.unwrap();
    assert!(s.recv().await.unwrap().is_none());
    server.await.unwrap();
}

#[tokio::test]
async fn dropping_a_stream_resets_it_with_cancel() {
    let ((client, _ci), (_server, mut incoming)) = pair().await;
    let s = client
        .open(Metadata::new(), Bytes::from_static(b"x"), false)
        .await
        .unwrap();
    let mut peer = incoming.accept().await.unwrap();
    assert_eq!(&peer.recv().await.unwrap().unwrap().data[..], b"x");
    drop(s);
    let err = peer.recv().await.unwrap_err();
    assert!(err.is_reset());
    assert_eq!(err.reason(), Some(Reason::CANCEL));
    assert!(err.is_remote());
}

#[tokio::test(start_paused = true)]
async fn large_transfer_crosses_windows() {
    let ((client, _ci), (_server, mut incoming)) = pair().await;
    let data = Bytes::from((0..3_000_000u32).map(|i| i as u8).collect::<Vec<u8>>());
    let expect = data.clone();
    let reader = tokio::spawn(async move {
        let mut st = incoming.accept().await.unwrap();
        let mut got = Vec::new();
        while let Some(c) = st.recv().await.unwrap() {
            got.extend_from_slice(&c.data);
        }
        got
    });
    let mut s = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let c2 = client.clone();
    let srv = _server.clone();
    let r = tokio::time::timeout(Duration::from_secs(5), s.send(data, true)).await;
    if r.is_err() {
        panic!(
            "send stuck: client {:?} server {:?}",
            c2.stats(),
            srv.stats()
        );
    }
    let got = tokio::time::timeout(Duration::from_secs(5), reader).await;
    let Ok(got) = got else {
        panic!(
            "recv stuck: client {:?} server {:?}",
            c2.stats(),
            srv.stats()
        );
    };
    let got = got.unwrap();
    assert_eq!(got.len(), expect.len());
    assert!(got == expect[..]);
}

#[tokio::test]
async fn tcp_loopback_round_trip() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        sock.set_nodelay(true).unwrap();
        let (_conn, mut incoming) = connect(sock, Role::Server, Config::default())
            .await
            .unwrap();
        let mut st = incoming.accept().await.unwrap();
        let c = st.recv().await.unwrap().unwrap();
        st.send(c.data, true).await.unwrap();
        // Keep the connection until the client is done.
        let _ = st.recv().await;
    });
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.set_nodelay(true).unwrap();
    let (conn, _incoming) = connect(sock, Role::Client, Config::default())
        .await
        .unwrap();
    let mut s = conn
        .open(Metadata::new(), Bytes::from_static(b"ping"), true)
        .await
        .unwrap();
    let c = s.recv().await.unwrap().unwrap();
    assert_eq!(&c.data[..], b"ping");
    assert!(s.recv().await.unwrap().is_none());
    drop(s);
    conn.shutdown(Duration::from_secs(1)).await;
    assert!(conn.is_closed());
    server.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn cancelled_recv_hands_the_socket_back_to_the_driver() {
    let ((client, _ci), (_server, mut incoming)) = pair().await;
    let mut a = client
        .open(Metadata::new(), Bytes::from_static(b"a"), false)
        .await
        .unwrap();
    let mut b = client
        .open(Metadata::new(), Bytes::from_static(b"b"), false)
        .await
        .unwrap();
    let mut pa = incoming.accept().await.unwrap();
    let mut pb = incoming.accept().await.unwrap();
    pa.recv().await.unwrap();
    pb.recv().await.unwrap();
    // `a.recv` waits on the socket, then is cancelled.
    let r = tokio::time::timeout(Duration::from_millis(20), a.recv()).await;
    assert!(r.is_err());
    // Bytes for `b` now arrive while no recv watches the socket; a plain
    // poll_recv (which never reads the socket) still gets them, so the
    // connection task must be watching.
    pb.send(Bytes::from_static(b"to b"), false).await.unwrap();
    // On the paused clock this bound fires only if nothing will ever read
    // the socket for `b`: a hang becomes a failure.
    let c = tokio::time::timeout(
        Duration::from_secs(10),
        std::future::poll_fn(|cx| b.poll_recv(cx)),
    )
    .await
    .expect("nobody watched the socket after the cancelled recv")
    .unwrap()
    .unwrap();
    assert_eq!(&c.data[..], b"to b");
    // And `a` still works afterwards.
    pa.send(Bytes::from_static(b"to a"), false).await.unwrap();
    assert_eq!(&a.recv().await.unwrap().unwrap().data[..], b"to a");
}

#[tokio::test(start_paused = true)]
async fn a_displaced_socket_waiter_is_still_woken_for_its_data() {
    let ((client, _ci), (_server, mut incoming)) = pair().await;
    let mut a = client
        .open(Metadata::new(), Bytes::from_static(b"a"), false)
        .await
        .unwrap();
    let mut b = client
        .open(Metadata::new(), Bytes::from_static(b"b"), false)
        .await
        .unwrap();
    let mut pa = incoming.accept().await.unwrap();
    let mut pb = incoming.accept().await.unwrap();
    pa.recv().await.unwrap();
    pb.recv().await.unwrap();
    // `a` waits on the socket first, then `b` displaces it as the waiter.
    let ta = tokio::spawn(async move { a.recv().await.unwrap().unwrap().data });
    tokio::task::yield_now().await;
    let tb = tokio::spawn(async move { b.recv().await.unwrap().unwrap().data });
    tokio::task::yield_now().await;
    // Data for `a` arrives: `b`'s task reads it and must wake `a`.
    pa.send(Bytes::from_static(b"for a"), false).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), ta)
        .await
        .expect("a woken")
        .unwrap();
    assert_eq!(&got[..], b"for a");
    pb.send(Bytes::from_static(b"for b"), false).await.unwrap();
    assert_eq!(&tb.await.unwrap()[..], b"for b");
}
