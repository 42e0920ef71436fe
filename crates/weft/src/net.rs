//! Connecting and serving over TCP, Unix sockets and in-memory pipes.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use weft_mux::{Connection, Incoming, Reason, Role};
use weft_rpc::{Client, PeerInfo, Server};

mod conn;

use crate::admission::{Admission, Refusal, refuse};
use crate::counters::{self, Side};
use crate::{Config, Error};
use conn::{ConnTask, PerServer, serve_accepted};

/// Where to connect or listen: `host:port` (TCP) or `unix:/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// A TCP `host:port`.
    Tcp(String),
    /// A Unix socket path.
    Unix(std::path::PathBuf),
}

impl std::str::FromStr for Address {
    type Err = Error;

    fn from_str(s: &str) -> Result<Address, Error> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(Error::Address(s.to_owned()));
            }
            return Ok(Address::Unix(path.into()));
        }
        if s.rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        {
            return Ok(Address::Tcp(s.to_owned()));
        }
        Err(Error::Address(s.to_owned()))
    }
}

fn client_of(conn: Connection, config: &Config) -> Client {
    Client::with_limits(conn, config.message_limit(), config.default_call_timeout())
        .with_metrics(config.metrics_mode())
}

/// Connects to `addr` (`host:port` or `unix:/path`) and runs the handshake.
/// The config's handshake timeout bounds the transport connect and the
/// handshake each.
///
/// TCP sockets get `TCP_NODELAY` (unless the config turns it off). A server
/// that is busy or at a connection limit refuses with an error whose
/// [`Error::is_retry_safe`] is true: retry after a backoff.
pub async fn connect(addr: &str, config: &Config) -> Result<Client, Error> {
    match addr.parse::<Address>()? {
        Address::Tcp(a) => {
            let s = tokio::time::timeout(config.handshake_deadline(), TcpStream::connect(&a))
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"))
                .and_then(|r| r)
                .map_err(Error::Connect)?;
            s.set_nodelay(config.nodelay())?;
            let peer = s.peer_addr().map_or(a, |p| p.to_string());
            handshake(s, config, Some(&peer)).await
        }
        #[cfg(unix)]
        Address::Unix(p) => {
            let s = tokio::net::UnixStream::connect(&p)
                .await
                .map_err(Error::Connect)?;
            handshake(s, config, Some(&format!("unix:{}", p.display()))).await
        }
        #[cfg(not(unix))]
        Address::Unix(_) => Err(Error::Address(addr.to_owned())),
    }
}

/// Runs the client handshake on any byte stream (e.g. one half of
/// `tokio::io::duplex`) and returns a client on it.
pub async fn connect_io<T>(io: T, config: &Config) -> Result<Client, Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    handshake(io, config, None).await
}

/// The client handshake on `io`; `peer` names the server on the calls'
/// spans.
async fn handshake<T>(io: T, config: &Config, peer: Option<&str>) -> Result<Client, Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (conn, _incoming) = weft_mux::connect(io, Role::Client, config.mux_config())
        .await
        .map_err(|e| {
            let e = Error::from(e);
            counters::handshake_failed(config, Side::Client, &e);
            e
        })?;
    let client = client_of(conn, config);
    Ok(match peer {
        Some(p) => client.with_peer_address(p),
        None => client,
    })
}

/// Serves `server` on one accepted byte stream until the connection ends.
/// Returns the connection handle once the handshake is done, and a future
/// that serves it.
pub async fn accept_io<T>(
    io: T,
    server: &Server,
    config: &Config,
    peer_addr: Option<String>,
) -> Result<(Connection, impl Future<Output = ()> + Send + 'static), Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (conn, incoming, peer) = server_handshake(io, config, peer_addr).await?;
    let server = server.clone();
    let serving = async move { server.serve_connection(incoming, peer).await };
    Ok((conn, serving))
}

/// The server handshake on `io`: the connection, the streams its peer
/// opens, and who the peer is. Returns once the client's first record has
/// opened (see [`weft_mux::Handshaken::start`]).
async fn server_handshake<T>(
    io: T,
    config: &Config,
    peer_addr: Option<String>,
) -> Result<(Connection, Incoming, PeerInfo), Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let hs = weft_mux::handshake(io, Role::Server, config.mux_config()).await?;
    server_start(hs, peer_addr).await
}

/// The second half of [`server_handshake`]: waits for the client's first
/// record and starts the connection.
async fn server_start<T>(
    hs: weft_mux::Handshaken<T>,
    peer_addr: Option<String>,
) -> Result<(Connection, Incoming, PeerInfo), Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (conn, incoming) = hs.start().await?;
    let n = conn.negotiated();
    let peer = PeerInfo::new(peer_addr, n.encrypted, n.compressed).with_public_key(n.peer_key);
    Ok((conn, incoming, peer))
}

/// An in-memory client/server pair over `tokio::io::duplex`: the server
/// side runs on a spawned task. For tests, examples, and in-process use.
pub async fn memory(service: impl Into<Server>, config: &Config) -> Result<Client, Error> {
    let (a, b) = tokio::io::duplex(256 * 1024);
    let server = rpc_server(service.into(), config);
    let cfg = config.clone();
    let accept = tokio::spawn(async move {
        let (_conn, serving) = accept_io(b, &server, &cfg, Some("memory".into())).await?;
        serving.await;
        Ok::<(), Error>(())
    });
    let client = connect_io(a, config).await;
    if client.is_err() {
        accept.abort();
    }
    client
}

fn rpc_server(server: Server, config: &Config) -> Server {
    server
        .max_message(config.message_limit())
        .metrics(config.metrics_mode())
}

/// A bound TCP or Unix listener.
#[derive(Debug)]
pub enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// A Unix socket.
    #[cfg(unix)]
    Unix(tokio::net::UnixListener),
}

/// The default listen backlog: connections the kernel completes and queues
/// before the server accepts them (capped by the kernel's `somaxconn`).
/// Far above the kernel default of 128 and equal to Linux's default
/// `somaxconn` since 5.4, so a reconnect storm waits in the queue instead of
/// overflowing it (Go's net package asks for `somaxconn` too).
pub const DEFAULT_BACKLOG: u32 = 4096;

impl Listener {
    /// Binds `host:port` or `unix:/path` (an existing socket file at the
    /// path is not removed: bind fails instead), with a listen backlog of
    /// [`DEFAULT_BACKLOG`].
    pub async fn bind(addr: &str) -> Result<Listener, Error> {
        Listener::bind_with_backlog(addr, DEFAULT_BACKLOG).await
    }

    /// Like [`bind`](Self::bind) with a listen backlog of `backlog`
    /// connections (at least 1; the kernel caps it at `somaxconn`).
    pub async fn bind_with_backlog(addr: &str, backlog: u32) -> Result<Listener, Error> {
        match addr.parse::<Address>()? {
            Address::Tcp(a) => Ok(Listener::Tcp(bind_tcp(&a, backlog.max(1)).await?)),
            #[cfg(unix)]
            Address::Unix(p) => Ok(Listener::Unix(bind_unix(&p, backlog.max(1))?)),
            #[cfg(not(unix))]
            Address::Unix(_) => Err(Error::Address(addr.to_owned())),
        }
    }

    /// The bound address, in the form [`connect`] takes.
    pub fn local_addr(&self) -> Result<String, Error> {
        match self {
            Listener::Tcp(l) => Ok(l.local_addr()?.to_string()),
            #[cfg(unix)]
            Listener::Unix(l) => {
                let a = l.local_addr()?;
                let p = a
                    .as_pathname()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                Ok(format!("unix:{p}"))
            }
        }
    }
}

async fn bind_tcp(addr: &str, backlog: u32) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // As `TcpListener::bind` does: a restarted server can rebind at once.
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(backlog)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address")))
}

#[cfg(unix)]
fn bind_unix(path: &std::path::Path, backlog: u32) -> std::io::Result<tokio::net::UnixListener> {
    // std binds Unix sockets with a backlog of 128; a larger one needs the
    // socket built by hand, which std does not offer, so Unix sockets keep
    // the default (`backlog` applies to TCP).
    let _ = backlog;
    tokio::net::UnixListener::bind(path)
}

/// Serves `service` (a `Router`, or a `Server` with middleware) on
/// `listener` until `shutdown` resolves, then shuts down
/// gracefully: stops accepting, sends every connection `GOAWAY` (calls in
/// flight finish, new ones fail retry-safe), and returns once all
/// connections closed or the config's drain time passed.
///
/// Admission (see [`Config::max_pending_handshakes`],
/// [`Config::max_connections`], [`Config::max_connections_per_address`]):
/// a connection is pending until the client's first record after the
/// handshake has opened (a replayed handshake message never gets that
/// far); a full pending set makes room by evicting the pending connection
/// without progress for longest, and a connection that cannot be admitted
/// gets a retry-safe refusal rather than a bare close. Connections,
/// refusals and failures are logged at INFO
/// through `tracing` (target `weft::net`).
pub async fn serve(
    listener: Listener,
    service: impl Into<Server>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    // Fail at start, not on every handshake, for a config no client could pass.
    config
        .handshake_config()
        .check(weft_transform::Role::Responder)
        .map_err(Error::Config)?;
    let shared = Arc::new(PerServer {
        server: rpc_server(service.into(), &config),
        live: Live::default(),
        lingering: Arc::new(Semaphore::new(MAX_LINGERING)),
        config,
    });
    let config = &shared.config;
    let admission = Admission::new(config.admission_limits());
    let mut tasks = JoinSet::new();
    let next_id = AtomicU64::new(0);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = accept(&listener, config.nodelay()) => a,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let (io, peer, ip) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let ticket = match admission.admit(ip) {
            Ok(t) => t,
            Err(why) => {
                tracing::info!(%peer, reason = why.text(), "connection refused (retry-safe)");
                counters::refused(config, why);
                let Ok(permit) = shared.lingering.clone().try_acquire_owned() else {
                    // Too many refusals in flight: the refusal without waiting.
                    io.refuse_now(why);
                    continue;
                };
                tasks.spawn(async move {
                    match io {
                        Io::Tcp(s) => refuse(s, why, false, true).await,
                        #[cfg(unix)]
                        Io::Unix(s) => refuse(s, why, false, true).await,
                    }
                    drop(permit);
                });
                continue;
            }
        };
        let conn = ConnTask {
            shared: shared.clone(),
            peer,
            id: next_id.fetch_add(1, Ordering::Relaxed),
        };
        tasks.spawn(serve_accepted(conn, io, ticket));
    }
    drop(listener);
    let conns = lock(&shared.live).all();
    let drain = config.drain();
    let all = async {
        let mut shut = JoinSet::new();
        for c in conns {
            shut.spawn(async move { c.shutdown(drain).await });
        }
        while shut.join_next().await.is_some() {}
        while tasks.join_next().await.is_some() {}
    };
    // The mux enforces the drain; this bound only guards against a stuck peer.
    let _ = tokio::time::timeout(drain + Duration::from_secs(1), all).await;
    Ok(())
}

/// Refused or evicted connections kept open at once so the client reads
/// the refusal; more are closed plainly.
const MAX_LINGERING: usize = 1024;

type Live = Mutex<crate::live::Live>;

fn lock(live: &Live) -> std::sync::MutexGuard<'_, crate::live::Live> {
    live.lock().unwrap_or_else(|e| e.into_inner())
}

enum Io {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

impl Io {
    /// The refusal without waiting: whatever the client already sent is read
    /// (so closing does not reset the connection), the refusal written if
    /// the socket takes it, then the socket closed.
    fn refuse_now(self, why: Refusal) {
        let bytes = weft_transform::refusal(Reason::REFUSED_STREAM, why.text(), false);
        let mut sink = [0u8; 1024];
        macro_rules! now {
            ($s:expr) => {{
                for _ in 0..64 {
                    if !matches!($s.try_read(&mut sink), Ok(n) if n > 0) {
                        break;
                    }
                }
                let _ = $s.try_write(&bytes);
            }};
        }
        match self {
            Io::Tcp(s) => now!(s),
            #[cfg(unix)]
            Io::Unix(s) => now!(s),
        }
    }
}

async fn accept(
    listener: &Listener,
    nodelay: bool,
) -> std::io::Result<(Io, String, Option<std::net::IpAddr>)> {
    match listener {
        Listener::Tcp(l) => {
            let (s, a) = l.accept().await?;
            // Best effort: a socket that refuses NODELAY still works.
            let _ = s.set_nodelay(nodelay);
            Ok((Io::Tcp(s), a.to_string(), Some(a.ip())))
        }
        #[cfg(unix)]
        Listener::Unix(l) => {
            let (s, _) = l.accept().await?;
            Ok((Io::Unix(s), "unix".to_owned(), None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            "127.0.0.1:80".parse::<Address>().unwrap(),
            Address::Tcp("127.0.0.1:80".into())
        );
        assert_eq!(
            "[::1]:9".parse::<Address>().unwrap(),
            Address::Tcp("[::1]:9".into())
        );
        assert_eq!(
            "unix:/tmp/s".parse::<Address>().unwrap(),
            Address::Unix("/tmp/s".into())
        );
        for bad in ["", "nohost", ":80", "host:port", "unix:", "h:99999"] {
            assert!(
                matches!(bad.parse::<Address>(), Err(Error::Address(_))),
                "{bad}"
            );
        }
    }
}
