//! When a streaming call returns: a server-streaming call waits for the
//! server's first frame, so a server that rejects the call (an
//! interceptor, a handler that fails before its first message) fails the
//! call itself, as tonic's does; a client-streaming or bidi call returns
//! at once (the server may be waiting for the client's first message), and
//! a rejection is its first read's or send's error. Paused clocks over
//! in-memory pipes; a generated client on a channel over TCP.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use weft::{
    CallOptions, Channel, Client, Code, Config, Context, Requests, Responses, Router, Server,
    Status,
};

const TOKEN: &[u8] = b"x-token";

/// `count` (server streaming: `n` messages, the first after `n` seconds
/// when asked `slow`), `fail` (fails before any message), `half` (one
/// message, then fails), `none` (no message, `OK`), `echo` (bidi that waits
/// for the client first). Every call without `x-token: t` is refused.
fn server() -> Server {
    let router = Router::new()
        .server_streaming("count", |_c, req: Bytes, mut out| async move {
            if &req[..] == b"slow" {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            for i in 0..3u8 {
                out.send(Bytes::from(vec![i])).await?;
            }
            Ok(())
        })
        .server_streaming("fail", |_c, _req: Bytes, _out| async move {
            Err(Status::new(Code::FAILED_PRECONDITION, "not today"))
        })
        .server_streaming("half", |_c, _req: Bytes, mut out| async move {
            out.send(Bytes::from_static(b"one")).await?;
            Err(Status::new(Code::ABORTED, "cut"))
        })
        .server_streaming("none", |_c, _req: Bytes, _out| async move { Ok(()) })
        .bidi("echo", |_c, mut s| async move {
            while let Some(m) = s.message().await? {
                s.send(m).await?;
            }
            Ok(())
        });
    Server::new(router).interceptor(|ctx| match ctx.metadata().get(TOKEN) {
        Some(b"t") => Ok(()),
        _ => Err(Status::new(Code::UNAUTHENTICATED, "no token")),
    })
}

async fn client() -> Client {
    weft::memory(server(), &Config::new()).await.unwrap()
}

fn token() -> CallOptions {
    CallOptions::new().metadata(TOKEN, b"t")
}

#[tokio::test(start_paused = true)]
async fn a_rejected_server_streaming_call_fails_from_the_call() {
    let client = client().await;
    let e = client
        .server_streaming("count", Bytes::new(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED, "{e}");
    assert_eq!(e.message(), "no token");
    // A handler that fails before its first message: the same.
    let e = client
        .server_streaming("fail", Bytes::new(), &token())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FAILED_PRECONDITION, "{e}");
    assert_eq!(e.message(), "not today");
    // An unknown method too.
    let e = client
        .server_streaming("nope", Bytes::new(), &token())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::UNIMPLEMENTED, "{e}");
}

#[tokio::test(start_paused = true)]
async fn an_accepted_call_keeps_every_message_and_its_end() {
    let client = client().await;
    let mut s = client
        .server_streaming("count", Bytes::new(), &token())
        .await
        .unwrap();
    for i in 0..3u8 {
        assert_eq!(s.message().await.unwrap().as_deref(), Some(&[i][..]));
    }
    assert_eq!(s.message().await.unwrap(), None);
    // A failure after the first message is the stream's, not the call's.
    let mut s = client
        .server_streaming("half", Bytes::new(), &token())
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap().unwrap(), "one");
    assert_eq!(s.message().await.unwrap_err().code(), Code::ABORTED);
    // A stream of no message with OK: the call succeeds, and ends cleanly.
    let mut s = client
        .server_streaming("none", Bytes::new(), &token())
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap(), None);
}

/// The cost of the wait: a server slow to send its first message delays
/// the call's return by as much, and the call's deadline covers the wait.
#[tokio::test(start_paused = true)]
async fn the_call_returns_with_the_first_message_and_within_its_deadline() {
    let client = client().await;
    let start = Instant::now();
    let mut s = client
        .server_streaming("count", Bytes::from_static(b"slow"), &token())
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(s.message().await.unwrap().as_deref(), Some(&[0][..]));

    let opts = token().timeout(Duration::from_secs(1));
    let e = client
        .server_streaming("count", Bytes::from_static(b"slow"), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
}

/// A bidi call returns before the server says anything: its handler waits
/// for the client's first message, so waiting for the server would
/// deadlock. A rejected bidi call fails on its first read.
#[tokio::test(start_paused = true)]
async fn a_bidi_call_returns_at_once_and_a_rejection_comes_with_the_first_read() {
    let client = client().await;
    let mut chat = tokio::time::timeout(Duration::from_secs(5), client.bidi("echo", &token()))
        .await
        .expect("a bidi call waits for nothing from the server")
        .unwrap();
    chat.send(Bytes::from_static(b"hi")).await.unwrap();
    assert_eq!(chat.message().await.unwrap().unwrap(), "hi");
    chat.close_send().await.unwrap();
    assert_eq!(chat.message().await.unwrap(), None);

    let mut refused = client.bidi("echo", &CallOptions::new()).await.unwrap();
    let e = refused.message().await.unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED, "{e}");
}

/// The generated client of issue's example: `list` with a bad token on a
/// channel over TCP fails from the call.
#[weft::service(package = "dir")]
pub trait Users {
    /// Server streaming: 0..n.
    async fn list(&self, ctx: Context, n: u32, out: Responses<u32>) -> Result<(), Status>;
    /// Bidi: each number doubled.
    async fn double(
        &self,
        ctx: Context,
        rx: Requests<u32>,
        tx: Responses<u32>,
    ) -> Result<(), Status>;
}

struct Dir;

impl Users for Dir {
    async fn list(&self, _ctx: Context, n: u32, mut out: Responses<u32>) -> Result<(), Status> {
        for i in 0..n {
            out.send(i).await?;
        }
        Ok(())
    }
    async fn double(
        &self,
        _ctx: Context,
        mut rx: Requests<u32>,
        mut tx: Responses<u32>,
    ) -> Result<(), Status> {
        while let Some(n) = rx.message().await? {
            tx.send(2 * n).await?;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_generated_client_on_a_channel_gets_the_rejection_from_list() {
    let listener = weft::Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server =
        Server::new(Router::new().add_service(UsersServer::new(Dir))).interceptor(|ctx| match ctx
            .metadata()
            .get(TOKEN)
        {
            Some(b"t") => Ok(()),
            _ => Err(Status::new(Code::UNAUTHENTICATED, "no token")),
        });
    tokio::spawn(weft::serve(
        listener,
        server,
        Config::new(),
        std::future::pending(),
    ));
    let users = UsersClient::new(Channel::new(&addr, &Config::new()).unwrap());
    let bad = CallOptions::new().metadata(TOKEN, b"wrong");
    let e = users.list_with(3, &bad).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED, "{e}");
    let mut ok = users.list_with(2, &token()).await.unwrap();
    assert_eq!(ok.message().await.unwrap(), Some(0));
    assert_eq!(ok.message().await.unwrap(), Some(1));
    assert_eq!(ok.message().await.unwrap(), None);
    // Bidi: returns, then the first read says why.
    let mut d = users.double_with(&bad).await.unwrap();
    assert_eq!(d.message().await.unwrap_err().code(), Code::UNAUTHENTICATED);
}
