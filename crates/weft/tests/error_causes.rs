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
        .backoff(slow_retry.clone())
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
