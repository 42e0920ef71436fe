//! Errors that name their cause: a channel's call that runs out of time
//! waiting for a connection names the last connect error, and a client
//! whose connection the server closed for idleness says so, with the
//! server's timeout. Each test checks the text a user reads.

use std::time::Duration;

use bytes::Bytes;
use weft::{Backoff, CallOptions, Channel, Code, Config, Endpoint, Error, Router};

mod support;

/// An endpoint whose every connect is refused, saying `why`.
fn refusing(name: &str, why: &'static str) -> Endpoint {
    Endpoint::from_fn(name, move || async move {
        Err(Error::Connect(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            why,
        )))
    })
}

/// A loopback address nothing listens on.
async fn dead_address() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}

#[tokio::test(start_paused = true)]
async fn a_deadline_spent_waiting_for_a_connection_names_the_last_connect_error() {
    let channel = Channel::builder().endpoint(refusing("db-1", "refused by the test"));
    let opts = CallOptions::new().timeout(Duration::from_secs(3));
    let e = channel
        .unary_with("echo", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    assert_eq!(
        e.message(),
        "deadline exceeded waiting for a connection to db-1; \
         last connect error: could not connect: refused by the test"
    );
    // The channel's own call timeout, and a streaming call, say the same.
    let channel = Channel::builder()
        .call_timeout(Some(Duration::from_secs(1)))
        .endpoint(refusing("db-2", "no route"));
    let e = channel.bidi("chat", &CallOptions::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    assert!(
        e.message()
            .ends_with("db-2; last connect error: could not connect: no route"),
        "{e}"
    );
}

/// Over TCP, to a port nothing listens on: the operating system's
/// "connection refused" reaches the caller whether the call waits (a
/// deadline) or fails fast.
#[tokio::test]
async fn a_call_to_a_dead_server_says_connection_refused() {
    let addr = dead_address().await;
    let slow_retry = Backoff::new().base(Duration::from_secs(10));
    let channel = Channel::builder()
        .backoff(slow_retry)
        .connect_lazy(&addr, &Config::new())
        .unwrap();
    let opts = CallOptions::new().timeout(Duration::from_millis(300));
    let e = channel
        .unary_with("echo", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    let text = e.message().to_lowercase();
    assert!(text.contains(&addr), "{e}");
    assert!(text.contains("connection refused"), "{e}");

    let fast = Channel::builder()
        .backoff(slow_retry)
        .fail_fast(true)
        .connect_lazy(&addr, &Config::new())
        .unwrap();
    let e = fast.unary("echo", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE, "{e}");
    assert!(
        e.message().to_lowercase().contains("connection refused"),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_balanced_channel_names_the_last_connect_error_of_its_endpoints() {
    let channel = Channel::builder()
        .balance_list([refusing("a", "refused by a"), refusing("b", "refused by b")]);
    let opts = CallOptions::new().timeout(Duration::from_secs(2));
    let e = channel
        .unary_with("echo", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    let m = e.message();
    assert!(
        m.starts_with("deadline exceeded waiting for a ready endpoint; last connect error: "),
        "{e}"
    );
    assert!(
        m.contains("refused by a") || m.contains("refused by b"),
        "{e}"
    );
}

/// A deadline that passes once the call is on a live connection is the
/// plain `deadline exceeded`: no stale connect error is blamed.
#[tokio::test(start_paused = true)]
async fn a_slow_answer_blames_no_connect_error() {
    let router = Router::new().unary("sleep", |_c, _req: Bytes| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(Bytes::new())
    });
    // The first connect fails, the second succeeds.
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let endpoint = Endpoint::from_fn("memory", move || {
        let router = router.clone();
        let first = tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0;
        async move {
            if first {
                return Err(Error::Connect(std::io::ErrorKind::ConnectionRefused.into()));
            }
            weft::memory(router, &Config::new()).await
        }
    });
    let channel = Channel::builder().endpoint(endpoint);
    // Connected after the first backoff (about 1 s), then the answer
    // takes too long.
    let opts = CallOptions::new().timeout(Duration::from_secs(5));
    let e = channel
        .unary_with("sleep", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    assert_eq!(e.message(), "deadline exceeded", "{e}");
}

/// A client whose connection the server closed for idleness says so, with
/// the server's timeout, instead of "peer went away": the default 30 s on
/// a paused clock, and a short one over TCP.
#[tokio::test(start_paused = true)]
async fn a_client_closed_by_the_servers_idle_timeout_says_so() {
    let router = Router::new().unary("echo", |_c, req: Bytes| async move { Ok(req) });
    // The server has the default idle timeout (30 s); the client has
    // none, so the server's fires.
    let (a, b) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let server = weft::Server::new(router);
        let (_conn, serving) = weft::accept_io(b, &server, &Config::new(), None)
            .await
            .unwrap();
        serving.await;
    });
    let client = weft::connect_io(a, &Config::new().idle_timeout(None))
        .await
        .unwrap();
    assert_eq!(
        client
            .unary("echo", Bytes::from_static(b"a"))
            .await
            .unwrap(),
        "a"
    );
    tokio::time::sleep(Duration::from_secs(31)).await;
    let e = client.unary("echo", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE, "{e}");
    assert!(e.is_retry_safe(), "nothing was sent: {e}");
    assert_eq!(
        e.message(),
        "connection closed: peer went away: \
         closed by the server's idle timeout (30 s) (peer: NO_ERROR(0))"
    );
}

#[tokio::test]
async fn over_tcp_the_idle_timeout_text_names_the_servers_setting() {
    let (addr, _stop) =
        support::serve_with(Config::new().idle_timeout(Some(Duration::from_millis(200)))).await;
    let client = weft::connect(&addr, &Config::new().idle_timeout(None))
        .await
        .unwrap();
    assert_eq!(
        client
            .unary("echo", Bytes::from_static(b"a"))
            .await
            .unwrap(),
        "a"
    );
    let closed = || client.is_closed().then_some(());
    weft_testkit::eventually(closed, || "the server never closed the idle connection").await;
    let e = client.unary("echo", Bytes::new()).await.unwrap_err();
    assert!(
        e.message()
            .contains("closed by the server's idle timeout (200 ms)"),
        "{e}"
    );
}
