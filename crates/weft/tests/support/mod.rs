//! Shared by the channel tests: a demo router, in-process servers with a
//! shutdown handle, and a TCP proxy that can be killed (every connection
//! through it cut at once, as when a server process dies).
#![allow(dead_code, unreachable_pub)] // reason: each test binary uses part of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use weft::{Config, Health, Listener, Router};

/// `echo`, and `slow` (echo after 2 ms, so calls are in flight).
pub fn echo_router() -> Router {
    counted_router(Arc::default())
}

/// A server with `config` on a loopback port serving [`echo_router`]; the
/// returned sender stops it.
pub async fn serve_with(config: Config) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        weft::serve(listener, echo_router(), config, async {
            let _ = rx.await;
        })
        .await
        .unwrap()
    });
    (addr, tx)
}

/// Retry-safe refusals a real client may meet before it must get in, 50 ms
/// apart (150 ms in all): what a `Channel` does. The admission policy may
/// evict a client whose handshake the server has not read yet when a
/// newcomer arrives (docs/SECURITY.md, "Admission"), likelier on a loaded
/// machine; a slot held by an attacker would instead refuse it for the
/// whole handshake deadline.
pub const RETRIES: usize = 3;

/// `weft::connect` and one `echo` call, both retried after a retry-safe
/// failure up to [`RETRIES`] times in all (a client evicted after the
/// handshake, its first record not yet read, sees its first call fail so);
/// the client and how many retries it needed. Any other error, or one
/// retry too many, fails with `what` and the error.
pub async fn connect_and_echo_within_retries(
    addr: &str,
    config: &Config,
    what: &str,
) -> (weft::Client, usize) {
    let mut retries = 0;
    loop {
        let failed = match weft::connect(addr, config).await {
            Ok(c) => match c.unary("echo", Bytes::from_static(b"hi")).await {
                Ok(r) => {
                    assert_eq!(r, "hi");
                    return (c, retries);
                }
                Err(s) if s.is_retry_safe() => s.to_string(),
                Err(s) => panic!("{what}: the call failed: {s}"),
            },
            Err(e) if e.is_retry_safe() => e.to_string(),
            Err(e) => panic!("{what}: {e}"),
        };
        if retries == RETRIES {
            panic!("{what}: {failed} (after {RETRIES} retries)");
        }
        retries += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`echo_router`], counting the calls it serves in `hits`.
pub fn counted_router(hits: Arc<AtomicUsize>) -> Router {
    let h2 = hits.clone();
    Router::new()
        .unary("echo", move |_ctx, req: Bytes| {
            hits.fetch_add(1, Ordering::Relaxed);
            async move { Ok(req) }
        })
        .unary("slow", move |_ctx, req: Bytes| {
            h2.fetch_add(1, Ordering::Relaxed);
            async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok(req)
            }
        })
}

/// `router` with `concat` (client streaming: the messages joined) and
/// `upper` (bidi: each message upper-cased, answered as it comes).
pub fn streaming_shapes(router: Router) -> Router {
    router
        .client_streaming("concat", |_c, mut rx| async move {
            let mut out = Vec::new();
            while let Some(m) = rx.message().await? {
                out.extend_from_slice(&m);
            }
            Ok(Bytes::from(out))
        })
        .bidi("upper", |_c, mut s| async move {
            while let Some(m) = s.message().await? {
                s.send(Bytes::from(m.to_ascii_uppercase())).await?;
            }
            Ok(())
        })
}

/// A running server.
pub struct Server {
    pub addr: String,
    pub health: Health,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// Serves [`echo_router`] on `listener`.
pub fn serve(listener: Listener) -> Server {
    serve_router(listener, Arc::default(), Duration::ZERO)
}

/// Serves [`counted_router`] and the health service; on stop, reports
/// `NOT_SERVING` for `grace`, then sends `GOAWAY` and drains.
pub fn serve_router(listener: Listener, hits: Arc<AtomicUsize>, grace: Duration) -> Server {
    let addr = listener.local_addr().unwrap();
    let health = Health::new();
    let router = health.install(counted_router(hits));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = health.shutdown_after(
        async {
            let _ = stopped.await;
        },
        grace,
    );
    let task = tokio::spawn(async move {
        weft::serve(listener, router, Config::new(), shutdown)
            .await
            .unwrap();
    });
    Server {
        addr,
        health,
        stop,
        task,
    }
}

impl Server {
    /// Starts a graceful shutdown without waiting for it.
    pub fn stop(self) -> tokio::task::JoinHandle<()> {
        let _ = self.stop.send(());
        self.task
    }

    /// Aborts the serve task, as a crashed accept loop would: the listener
    /// closes, but the connections already open stay up (their drivers
    /// are tasks of their own) and refuse every new stream, since nothing
    /// accepts streams any more.
    pub fn abort(self) {
        self.task.abort();
    }

    /// Shuts down gracefully and waits until it is done.
    pub async fn stop_and_wait(self) {
        self.stop().await.unwrap();
    }
}

/// A TCP proxy to a backend.
pub struct Proxy {
    pub addr: String,
    /// Connections accepted.
    pub accepted: Arc<AtomicUsize>,
    tasks: JoinSet<()>,
}

impl Proxy {
    /// Listens on `addr` (port 0: any) and forwards to `backend`.
    pub async fn start(addr: &str, backend: String) -> Proxy {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let mut tasks = JoinSet::new();
        let conns = Arc::new(std::sync::Mutex::new(JoinSet::new()));
        let c2 = conns.clone();
        let accepted = Arc::new(AtomicUsize::new(0));
        let a2 = accepted.clone();
        tasks.spawn(async move {
            // Holding the connection tasks here: aborting this task drops
            // them, cutting every connection.
            let _conns = c2;
            loop {
                let Ok((mut front, _)) = listener.accept().await else {
                    return;
                };
                a2.fetch_add(1, Ordering::Relaxed);
                let backend = backend.clone();
                _conns.lock().unwrap().spawn(async move {
                    let Ok(mut back) = TcpStream::connect(&backend).await else {
                        return;
                    };
                    let _ = front.set_nodelay(true);
                    let _ = back.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut front, &mut back).await;
                });
            }
        });
        drop(conns);
        Proxy {
            addr,
            accepted,
            tasks,
        }
    }

    /// Closes the listener and cuts every connection.
    pub fn kill(&mut self) {
        self.tasks.abort_all();
    }
}
