//! The transport and how far its life has gone: open, write side shut,
//! or released once the connection task has finished.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};

/// The transport, both directions (no split: the connection lock already
/// serialises access, and `tokio::io::split` would add a lock per call).
pub(crate) trait Transport: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Transport for T {}

/// Where the transport is in its life. It only moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IoState {
    /// Both directions usable.
    Open,
    /// Our write side was shut down (the peer has seen our FIN); reads
    /// may still drain what the peer sends.
    WriteShut,
    /// The connection task has finished: the transport was released (an
    /// empty stand-in reads end of file) and `Connection::closed` is ready.
    Done,
}

/// The transport with its [`IoState`].
pub(super) struct Io {
    transport: Box<dyn Transport>,
    state: IoState,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Io {
    pub(super) fn new(transport: Box<dyn Transport>) -> Io {
        Io {
            transport,
            state: IoState::Open,
        }
    }

    /// The transport, to read or write.
    #[inline]
    pub(super) fn get(&mut self) -> Pin<&mut dyn Transport> {
        Pin::new(&mut *self.transport)
    }

    /// The transport, for callers that pin it themselves.
    #[inline]
    pub(super) fn get_mut(&mut self) -> &mut dyn Transport {
        &mut *self.transport
    }

    /// Whether writes are vectored (large payloads are chained then).
    pub(super) fn is_write_vectored(&self) -> bool {
        self.transport.is_write_vectored()
    }

    /// Shuts our write side down, once: `Ready` when it is shut (a failed
    /// shutdown counts as shut: nothing more can be written either way).
    pub(super) fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.state == IoState::Open {
            if self.get().poll_shutdown(cx).is_pending() {
                return Poll::Pending;
            }
            self.state = IoState::WriteShut;
        }
        Poll::Ready(())
    }

    /// The connection task has finished: releases the transport now rather
    /// than with the last handle, so the peer sees the end (FIN, or a reset
    /// if it still sends) and the descriptor is freed while the application
    /// keeps its handles.
    pub(super) fn finish(&mut self) {
        self.transport = Box::new(tokio::io::empty());
        self.state = IoState::Done;
    }

    /// Whether the connection task has finished.
    pub(super) fn is_done(&self) -> bool {
        self.state == IoState::Done
    }
}
