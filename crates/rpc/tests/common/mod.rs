//! Test support: a client and a server joined in memory.
#![allow(dead_code, unreachable_pub)]

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use weft_mux::{Config, Connection};
use weft_rpc::{Client, PeerInfo, Router, Server};

/// A client and the server side of one in-memory connection.
pub struct Pair {
    pub client: Client,
    pub server_conn: Connection,
    pub cut: Cut,
    pub serving: tokio::task::JoinHandle<()>,
}

pub async fn pair(router: Router) -> Pair {
    pair_with(Server::new(router), Client::new).await
}

pub async fn pair_with(server: Server, client: impl FnOnce(Connection) -> Client) -> Pair {
    pair_configured(server, client, Config::default()).await
}

/// Like [`pair_with`], with the server connection's mux config.
pub async fn pair_configured(
    server: Server,
    client: impl FnOnce(Connection) -> Client,
    server_config: Config,
) -> Pair {
    let (a, b) = tokio::io::duplex(256 * 1024);
    let cut = Cut::default();
    let b = Cuttable {
        io: b,
        cut: cut.clone(),
    };
    let ((client_conn, _incoming), (server_conn, incoming)) =
        weft_testkit::pair_over(a, b, Config::default(), server_config).await;
    let serving = tokio::spawn(async move {
        server
            .serve_connection(incoming, PeerInfo::new(Some("memory".into()), false, false))
            .await
    });
    Pair {
        client: client(client_conn),
        server_conn,
        cut,
        serving,
    }
}

/// Cuts a transport as a crash would: reads see EOF, writes fail.
#[derive(Clone, Default)]
pub struct Cut {
    cut: Arc<AtomicBool>,
    wakers: Arc<Mutex<Vec<Waker>>>,
}

impl Cut {
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for w in self.wakers.lock().unwrap().drain(..) {
            w.wake();
        }
    }
    fn is_cut(&self, cx: &mut Context<'_>) -> bool {
        if self.cut.load(Ordering::SeqCst) {
            return true;
        }
        self.wakers.lock().unwrap().push(cx.waker().clone());
        false
    }
}

pub struct Cuttable {
    io: DuplexStream,
    cut: Cut,
}

impl AsyncRead for Cuttable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.cut.is_cut(cx) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Cuttable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.cut.cut.load(Ordering::SeqCst) {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Counts handler starts and drops (a handler future dropped before or
/// after finishing counts as dropped).
#[derive(Clone, Default)]
pub struct Probe {
    pub started: Arc<std::sync::atomic::AtomicUsize>,
    pub dropped: Arc<std::sync::atomic::AtomicUsize>,
    pub finished: Arc<std::sync::atomic::AtomicUsize>,
}

pub struct ProbeGuard(Probe);

impl Probe {
    pub fn enter(&self) -> ProbeGuard {
        self.started.fetch_add(1, Ordering::SeqCst);
        ProbeGuard(self.clone())
    }
    pub fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }
}

impl ProbeGuard {
    pub fn finish(&self) {
        self.0.finished.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// Lets other tasks run until `cond` holds (bounded).
pub async fn settle(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..10_000 {
        if cond() {
            return true;
        }
        tokio::task::yield_now().await;
    }
    cond()
}
