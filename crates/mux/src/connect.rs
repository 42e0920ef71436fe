//! `connect`: handshake under its deadline, then (a server) the client's
//! first frame under the same deadline, then spawn the driver.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::Config;
use crate::driver::{Driver, READ_FIRST, now, shared};
use crate::error::MuxError;
use crate::handle::{Connection, Incoming};
use crate::pipeline::{Established, Handshake, HandshakeRole};
use crate::session::{Role, Session};
use weft_frame::{Frame, HEADER_LEN, Header};

static CONNECTION_IDS: AtomicU64 = AtomicU64::new(1);

/// The largest first record a server reads from a peer not yet proven: the
/// client's settings frame is under 100 bytes (docs/PROTOCOL.md 6.1), so
/// an unproven peer never makes a server buffer more than this.
pub const MAX_FIRST_RECORD: usize = 1024;

/// Runs the handshake under `config`'s deadline, then spawns the
/// connection's driver on the current tokio runtime; returns the handle and
/// the queue of streams the peer opens. A server (`Role::Server`) returns
/// only once the client's first frame has arrived (see
/// [`Handshaken::start`]).
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
    handshake(io, role, config).await?.start().await
}

/// The first half of [`connect`]: the handshake messages, under `config`'s
/// handshake deadline. The result is not a connection yet: see
/// [`Handshaken::start`]. A server's admission control uses the split to
/// know when the handshake made progress.
pub async fn handshake<T>(io: T, role: Role, config: Config) -> Result<Handshaken<T>, MuxError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let deadline = tokio::time::Instant::now() + config.handshake_timeout;
    let mut io = io;
    // Sized on demand, as the driver's buffers are: the handshake's
    // messages are small, the driver grows the buffer as frames need, and
    // a buffer reserved up front costs allocator peak mapping per idle
    // connection even untouched. Made with its first reserve's capacity
    // rather than grown to it: a buffer remembers the capacity it was made
    // with, and once frames share it a reserve allocates at least that
    // much instead of the few bytes a split frame still needs.
    let mut buf = BytesMut::with_capacity(READ_FIRST);
    // Boxed: the handshake's state (Noise, offers: over 1 KiB) would
    // otherwise sit inline in this future, and so in the task of every
    // caller that awaits it, for the connection's whole life. One
    // allocation per connection, freed once the handshake is done.
    let est = tokio::time::timeout_at(
        deadline,
        Box::pin(run_handshake(&mut io, &mut buf, role, &config)),
    )
    .await
    .map_err(|_| MuxError::handshake_timeout())??;
    Ok(Handshaken {
        io,
        buf,
        est,
        role,
        config,
        deadline,
    })
}

/// A connection whose handshake messages are done, before its driver runs.
///
/// A server's peer is not proven yet: in NN, NNpsk0, IK and IKpsk2 the
/// client's only message can be a replay of one captured earlier, and only
/// its first record under the new keys shows it holds them
/// (docs/SECURITY.md, "Replayed first messages"). Dropping this closes the
/// transport.
pub struct Handshaken<T> {
    io: T,
    buf: BytesMut,
    est: Established,
    role: Role,
    config: Config,
    deadline: tokio::time::Instant,
}

impl<T> std::fmt::Debug for Handshaken<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshaken")
            .field("role", &self.role)
            .field("negotiated", &self.est.negotiated)
            .field("awaits_first_record", &self.est.awaits_first_record())
            .finish_non_exhaustive()
    }
}

impl<T> Handshaken<T>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    /// Spawns the connection's driver and returns the handle and the queue
    /// of streams the peer opens. A server first reads the client's first
    /// frame (its settings, which a client sends at once), within what is
    /// left of the handshake deadline: until that record has opened the
    /// peer may be replaying a captured handshake message, so nothing of the
    /// connection is handed out, and `negotiated().authenticated` is final
    /// once it is. A first record that does not open, is over
    /// [`MAX_FIRST_RECORD`] bytes, or does not come fails like a handshake,
    /// with nothing sent. A client sends its settings at once and waits for
    /// nothing.
    ///
    /// # Panics
    /// Outside a tokio runtime (it spawns a task).
    pub async fn start(self) -> Result<(Connection, Incoming), MuxError> {
        let Handshaken {
            mut io,
            mut buf,
            mut est,
            role,
            config,
            deadline,
        } = self;
        let first = match role {
            Role::Server => Some(
                tokio::time::timeout_at(deadline, first_frame(&mut io, &mut buf, &mut est))
                    .await
                    .map_err(|_| MuxError::handshake_timeout())??,
            ),
            Role::Client => None,
        };
        let conn_id = CONNECTION_IDS.fetch_add(1, Ordering::Relaxed);
        let span = tracing::debug_span!("weft_mux::connection", conn = conn_id, ?role);
        tracing::debug!(parent: &span, negotiated = ?est.negotiated, "handshake complete");
        let mut session = Session::new(role, &config, now());
        if est.negotiated.encrypted {
            // We read sealed batches (PROTOCOL 5.2); the peer's settings
            // say whether it does, and the writer sends them only then.
            session.announce_sealed_batches();
        }
        // Never send frames larger than the peer accepts.
        session.set_peer_max_payload(est.negotiated.peer_limits.max_payload);
        if let Some(frame) = first {
            session.handle_frame(frame, now());
        }
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
}

/// Server: reads until the client's first frame has been decoded (its
/// record opened, when encrypted), refusing to buffer more than
/// [`MAX_FIRST_RECORD`] for it.
async fn first_frame<T>(
    io: &mut T,
    buf: &mut BytesMut,
    est: &mut Established,
) -> Result<Frame, MuxError>
where
    T: AsyncRead + Unpin,
{
    // The record's header is checked once, the first time it is whole: the
    // decoder may take it out of `buf` while it waits for the body, and what
    // `buf` starts with after that is the body, not a header.
    let mut header_checked = false;
    loop {
        if !header_checked && let Some(raw) = buf.first_chunk::<HEADER_LEN>() {
            header_checked = true;
            if let Ok(h) = Header::parse(raw)
                && HEADER_LEN + h.metadata_len as usize + h.payload_len as usize > MAX_FIRST_RECORD
            {
                return Err(MuxError::handshake(FirstRecordTooLarge));
            }
        }
        if let Some(frame) = est.read_first_frame(buf).map_err(MuxError::handshake)? {
            return Ok(frame);
        }
        buf.reserve(READ_FIRST);
        if io.read_buf(buf).await.map_err(MuxError::io)? == 0 {
            return Err(MuxError::io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
}

/// A client's first record announced more than [`MAX_FIRST_RECORD`] bytes.
#[derive(Debug)]
struct FirstRecordTooLarge;

impl std::fmt::Display for FirstRecordTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the peer's first record is over {MAX_FIRST_RECORD} bytes (a settings frame is under 100)"
        )
    }
}

impl std::error::Error for FirstRecordTooLarge {}

async fn run_handshake<T>(
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
