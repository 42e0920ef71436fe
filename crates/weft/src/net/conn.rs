//! The task that serves one accepted connection: its handshake (in the
//! admission table's pending set, evictable), then its calls until it
//! closes.
//!
//! Its future is one allocation per connection that lives as long as the
//! connection (the largest of an idle server connection's), so
//! it holds only what serving needs: what every connection of a server
//! shares sits behind one `Arc` ([`PerServer`]), and the handshake's state
//! (the mux handshake future, the transport wrapper, the eviction watch)
//! is boxed and freed once the connection is established. Inline, that
//! state made every connection's task 4,480 bytes for its whole life
//! (docs/BENCHMARKS.md, "What a server connection holds").

use std::future::Future;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio::sync::oneshot;
use weft_mux::{Connection, Incoming, Role};
use weft_rpc::{PeerInfo, Server};

use super::{Io, Live, lock, server_start};
use crate::admission::{Refusal, Stage, Ticket, Tracked, close_after, preface_sent, refuse};
use crate::counters::{self, Side};
use crate::{Config, Error};

/// What every connection of one server shares.
pub(super) struct PerServer {
    pub(super) server: Server,
    pub(super) config: Config,
    pub(super) live: Live,
    /// Refused or evicted connections lingering so the client reads the
    /// refusal.
    pub(super) lingering: Arc<Semaphore>,
}

/// What serving one accepted connection needs.
pub(super) struct ConnTask {
    pub(super) shared: Arc<PerServer>,
    pub(super) peer: String,
    pub(super) id: u64,
}

/// The future [`super::serve`] spawns for one admitted connection:
/// the handshake (boxed, see the module docs), then its calls, tracked in
/// the server's live set so a shutdown can reach it. One async block
/// rather than nested async fns, each of which would keep its own copy of
/// the arguments.
#[allow(clippy::manual_async_fn)] // reason: an async fn keeps a second copy of its arguments in the future (88 bytes more per connection in a debug build)
pub(super) fn serve_accepted(
    task: ConnTask,
    io: Io,
    ticket: Ticket,
) -> impl Future<Output = ()> + Send + 'static {
    async move {
        // No named binding for the result: it would keep its own 128
        // bytes in the future beside the parts moved out of it.
        let Some((conn, incoming, peer_info, ticket)) = (match io {
            Io::Tcp(s) => Box::pin(task.establish(s, ticket)).await,
            #[cfg(unix)]
            Io::Unix(s) => Box::pin(task.establish(s, ticket)).await,
        }) else {
            return;
        };
        let ConnTask { shared, peer, id } = &task;
        lock(&shared.live).insert(*id, conn.clone());
        shared.server.serve_connection(incoming, peer_info).await;
        conn.closed().await;
        lock(&shared.live).remove(*id);
        match conn.close_cause() {
            Some(cause) => tracing::info!(%peer, %cause, "connection closed"),
            None => tracing::info!(%peer, "connection closed"),
        }
        drop(ticket);
    }
}

impl ConnTask {
    /// The handshake, then the client's first record, each raced against an
    /// eviction from the pending set: the connection, its incoming streams
    /// and its peer, with the ticket now counted as established; `None` if
    /// it failed or was evicted. Until the first record has opened the
    /// client may be replaying a captured handshake message, so the
    /// connection stays pending (evictable, under the handshake deadline,
    /// invisible to handlers).
    async fn establish<T>(
        &self,
        io: T,
        mut ticket: Ticket,
    ) -> Option<(Connection, Incoming, PeerInfo, Ticket)>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let config = &self.shared.config;
        let peer = &self.peer;
        let slot = ticket.slot().clone();
        let (io, rescue) = Tracked::new(io, slot.clone());
        let handshake = weft_mux::handshake(io, Role::Server, config.mux_config());
        // Eviction first: a handshake evicted before its task ran must not
        // send its reply after all (the client could not read the refusal
        // then). Once the reply is out, the first record wins a tie.
        let r = tokio::select! {
            biased;
            () = slot.evicted() => {
                self.evicted(ticket, rescue, Stage::Handshake).await;
                return None;
            }
            r = handshake => r.map_err(Error::from),
        };
        let r = match r {
            Ok(hs) => {
                ticket.replied();
                tokio::select! {
                        biased;
                        r = server_start(hs, Some(peer.clone())) => r,
                        () = slot.evicted() => {
                    self.evicted(ticket, rescue, Stage::FirstRecord).await;
                    return None;
                }
                    }
            }
            Err(e) => Err(e),
        };
        let (conn, incoming, peer_info) = match r {
            Ok(x) => x,
            Err(e) => {
                tracing::info!(%peer, error = %e, "handshake failed");
                counters::handshake_failed(config, Side::Server, &e);
                return None;
            }
        };
        ticket.established();
        let n = conn.negotiated();
        tracing::info!(
            %peer,
            encrypted = n.encrypted,
            compressed = n.compressed,
            authenticated = n.authenticated,
            "connection established"
        );
        Some((conn, incoming, peer_info, ticket))
    }

    /// Evicted from the pending set. Still in its handshake, the client
    /// gets the retry-safe refusal; after our reply, when only its first
    /// record was missing, the connection ends cleanly with nothing sent
    /// (the client holds keys now and could not read a refusal in clear;
    /// an end of file before our settings frame tells it nothing was
    /// processed, so its calls fail retry-safe). Either lingers only
    /// within the shared cap.
    async fn evicted<T>(&self, ticket: Ticket, rescue: oneshot::Receiver<T>, stage: Stage)
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        let PerServer {
            config, lingering, ..
        } = &*self.shared;
        let peer = &self.peer;
        let slot = ticket.slot().clone();
        drop(ticket);
        counters::refused(config, Refusal::Evicted);
        let Ok(io) = rescue.await else { return };
        // Evictions are bounded by accepts; linger only within the shared
        // cap, else close after the refusal.
        let linger = lingering.try_acquire().ok();
        match stage {
            Stage::Handshake => {
                tracing::info!(%peer, "handshake evicted to make room (retry-safe refusal sent)");
                refuse(io, Refusal::Evicted, preface_sent(&slot), linger.is_some()).await;
            }
            Stage::FirstRecord => {
                tracing::info!(%peer, "unproven connection evicted to make room (closed)");
                close_after(io, &[], linger.is_some()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Admission;

    /// The spawned future is the largest allocation every server
    /// connection keeps for its life. Its tokio task was 4,480 bytes in a
    /// release build with the handshake's state inline (docs/BENCHMARKS.md,
    /// "What a server connection holds"), 640 now. This debug build
    /// measures 464 bytes for the future, 2,568 with the handshake unboxed,
    /// 624 with the handshake's result bound to a name.
    #[tokio::test]
    async fn the_connection_task_future_stays_small() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let config = Config::new();
        let shared = Arc::new(PerServer {
            server: Server::new(weft_rpc::Router::new()),
            live: Live::default(),
            lingering: Arc::new(Semaphore::new(1)),
            config: config.clone(),
        });
        let ticket = Admission::new(config.admission_limits())
            .admit(None)
            .unwrap();
        let task = ConnTask {
            shared,
            peer: "test".into(),
            id: 0,
        };
        let future = serve_accepted(task, Io::Tcp(accepted), ticket);
        let size = std::mem::size_of_val(&future);
        println!("connection task future: {size} bytes");
        assert!(size <= 576, "{size} bytes");
        drop((future, client));
    }
}
