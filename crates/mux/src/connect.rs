//! `connect`: handshake under its deadline, then spawn the driver.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::Config;
use crate::driver::{Driver, READ_FIRST, now, shared};
use crate::error::MuxError;
use crate::handle::{Connection, Incoming};
use crate::pipeline::{Established, Handshake, HandshakeRole};
use crate::session::{Role, Session};

static CONNECTION_IDS: AtomicU64 = AtomicU64::new(1);

/// Runs the handshake under `config`'s deadline, then spawns the
/// connection's driver on the current tokio runtime; returns the handle and
/// the queue of streams the peer opens.
///
/// For TCP, set `TCP_NODELAY` on the socket first (the facade does): the
/// writer already coalesces, and Nagle's algorithm would delay every small
/// frame by a round trip.
///
/// # Panics
/// Outside a tokio runtime (it spawns a task).
pub async fn connect<T>(
    io: T,
    role: Role,
    config: Config,
) -> Result<(Connection, Incoming), MuxError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn_id = CONNECTION_IDS.fetch_add(1, Ordering::Relaxed);
    let span = tracing::debug_span!("weft_mux::connection", conn = conn_id, ?role);
    let mut io = io;
    // Sized on demand, as the driver's buffers are: the handshake's
    // messages are small, the driver grows the buffer as frames need, and
    // a buffer reserved up front costs allocator peak mapping per idle
    // connection even untouched.
    let mut buf = BytesMut::new();
    // Boxed: the handshake's state (Noise, offers: over 1 KiB) would
    // otherwise sit inline in this future, and so in the task of every
    // caller that awaits it, for the connection's whole life. One
    // allocation per connection, freed once the handshake is done.
    let est = tokio::time::timeout(
        config.handshake_timeout,
        Box::pin(handshake(&mut io, &mut buf, role, &config)),
    )
    .await
    .map_err(|_| MuxError::handshake_timeout())??;
    tracing::debug!(parent: &span, negotiated = ?est.negotiated, "handshake complete");

    let mut session = Session::new(role, &config, now());
    // Never send frames larger than the peer accepts.
    session.set_peer_max_payload(est.negotiated.peer_limits.max_payload);
    let shared = shared(
        session,
        Box::new(io),
        (est.inbound, est.outbound),
        buf,
        est.negotiated,
        config.write_coalesce,
        span,
    );
    shared.lock().start(); // the settings frame
    tokio::spawn(Driver::new(shared.clone()));
    Ok((
        Connection {
            shared: shared.clone(),
        },
        Incoming { shared },
    ))
}

async fn handshake<T>(
    io: &mut T,
    buf: &mut BytesMut,
    role: Role,
    config: &Config,
) -> Result<Established, MuxError>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let hs_role = match role {
        Role::Client => HandshakeRole::Initiator,
        Role::Server => HandshakeRole::Responder,
    };
    // `Config::limits` is the one source of the frame limits.
    let mut hs_config = config.handshake.clone();
    hs_config.limits = config.limits;
    hs_config.offer.max_payload = config.limits.max_payload;
    let mut hs = Handshake::new(hs_role, hs_config).map_err(MuxError::handshake)?;
    let mut out = BytesMut::new();
    loop {
        hs.poll_transmit(&mut out);
        if !out.is_empty() {
            io.write_all(&out).await.map_err(MuxError::io)?;
            io.flush().await.map_err(MuxError::io)?;
            out.clear();
        }
        if hs.is_complete() {
            break;
        }
        hs.handle_input(buf).map_err(MuxError::handshake)?;
        if hs.is_complete() || hs.has_transmit() {
            continue; // send whatever the last message produced
        }
        buf.reserve(READ_FIRST);
        if io.read_buf(buf).await.map_err(MuxError::io)? == 0 {
            return Err(MuxError::io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
    hs.into_session().map_err(MuxError::handshake)
}
