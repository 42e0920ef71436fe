//! Connecting and serving over TCP, Unix sockets and in-memory pipes.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use weft_mux::{Connection, Role};
use weft_rpc::{Client, PeerInfo, Router, Server};

use crate::{Config, Error};

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
}

/// Connects to `addr` (`host:port` or `unix:/path`) and runs the handshake.
///
/// TCP sockets get `TCP_NODELAY` (unless the config turns it off).
pub async fn connect(addr: &str, config: &Config) -> Result<Client, Error> {
    match addr.parse::<Address>()? {
        Address::Tcp(a) => {
            let s = TcpStream::connect(&a).await?;
            s.set_nodelay(config.nodelay())?;
            connect_io(s, config).await
        }
        #[cfg(unix)]
        Address::Unix(p) => connect_io(tokio::net::UnixStream::connect(p).await?, config).await,
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
    let (conn, _incoming) = weft_mux::connect(io, Role::Client, config.mux_config()).await?;
    Ok(client_of(conn, config))
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
    let (conn, incoming) = weft_mux::connect(io, Role::Server, config.mux_config()).await?;
    let n = conn.negotiated();
    let peer = PeerInfo::new(peer_addr, n.encrypted, n.compressed).with_public_key(n.peer_key);
    let server = server.clone();
    let serving = async move { server.serve_connection(incoming, peer).await };
    Ok((conn, serving))
}

/// An in-memory client/server pair over `tokio::io::duplex`: the server
/// side runs on a spawned task. For tests, examples, and in-process use.
pub async fn memory(router: Router, config: &Config) -> Result<Client, Error> {
    let (a, b) = tokio::io::duplex(256 * 1024);
    let server = rpc_server(router, config);
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

fn rpc_server(router: Router, config: &Config) -> Server {
    Server::new(router).max_message(config.message_limit())
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

impl Listener {
    /// Binds `host:port` or `unix:/path` (an existing socket file at the
    /// path is not removed: bind fails instead).
    pub async fn bind(addr: &str) -> Result<Listener, Error> {
        match addr.parse::<Address>()? {
            Address::Tcp(a) => Ok(Listener::Tcp(TcpListener::bind(a).await?)),
            #[cfg(unix)]
            Address::Unix(p) => Ok(Listener::Unix(tokio::net::UnixListener::bind(p)?)),
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

/// Serves `router` on `listener` until `shutdown` resolves, then shuts down
/// gracefully: stops accepting, sends every connection `GOAWAY` (calls in
/// flight finish, new ones fail retry-safe), and returns once all
/// connections closed or the config's drain time passed.
pub async fn serve(
    listener: Listener,
    router: Router,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let server = rpc_server(router, &config);
    let live: Live = Arc::default();
    let handshakes = Arc::new(Semaphore::new(config.pending_handshakes()));
    let mut tasks = JoinSet::new();
    let next_id = AtomicU64::new(0);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = accept(&listener, config.nodelay()) => a,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let (io, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "too many handshakes in progress; closing");
            continue;
        };
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        let (server, config, live) = (server.clone(), config.clone(), live.clone());
        tasks.spawn(async move {
            match io {
                Io::Tcp(s) => run_conn(s, server, config, peer, permit, live, id).await,
                #[cfg(unix)]
                Io::Unix(s) => run_conn(s, server, config, peer, permit, live, id).await,
            }
        });
    }
    drop(listener);
    let conns: Vec<Connection> = lock(&live).values().cloned().collect();
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

type Live = Arc<Mutex<HashMap<u64, Connection>>>;

fn lock(live: &Live) -> std::sync::MutexGuard<'_, HashMap<u64, Connection>> {
    live.lock().unwrap_or_else(|e| e.into_inner())
}

/// One accepted connection: handshake (holding a handshake permit), then
/// serve it, tracked in `live` so a shutdown can reach it.
async fn run_conn<T>(
    io: T,
    server: Server,
    config: Config,
    peer: String,
    permit: tokio::sync::OwnedSemaphorePermit,
    live: Live,
    id: u64,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let r = accept_io(io, &server, &config, Some(peer.clone())).await;
    drop(permit);
    let (conn, serving) = match r {
        Ok(x) => x,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "handshake failed");
            return;
        }
    };
    lock(&live).insert(id, conn.clone());
    serving.await;
    conn.closed().await;
    lock(&live).remove(&id);
}

enum Io {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

async fn accept(listener: &Listener, nodelay: bool) -> std::io::Result<(Io, String)> {
    match listener {
        Listener::Tcp(l) => {
            let (s, a) = l.accept().await?;
            // Best effort: a socket that refuses NODELAY still works.
            let _ = s.set_nodelay(nodelay);
            Ok((Io::Tcp(s), a.to_string()))
        }
        #[cfg(unix)]
        Listener::Unix(l) => {
            let (s, _) = l.accept().await?;
            Ok((Io::Unix(s), "unix".to_owned()))
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
