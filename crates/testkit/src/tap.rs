//! A transport that watches its write half: how many writes moved bytes
//! and, once asked, a copy of the bytes written. It writes vectored, as a
//! TCP socket does (each slice in turn, as far as the inner end takes
//! them), so a writer that batches frames is seen batching.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a [`Tap`] saw written.
#[derive(Debug, Default)]
pub struct Tapped {
    writes: AtomicUsize,
    bytes: Mutex<Option<Vec<u8>>>,
}

impl Tapped {
    /// Writes that moved bytes so far.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::Relaxed)
    }

    /// Keeps a copy of the bytes written from now on (for instance after
    /// a handshake, to parse what follows as records).
    pub fn record(&self) {
        *self.bytes.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    }

    /// The bytes written since [`record`](Self::record) (none before it).
    pub fn recorded(&self) -> Vec<u8> {
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        bytes.clone().unwrap_or_default()
    }
}

/// Wraps a transport and reports what is written through it to a shared
/// [`Tapped`].
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use tokio::io::AsyncWriteExt;
/// let (a, _b) = tokio::io::duplex(64);
/// let (mut a, seen) = weft_testkit::Tap::new(a);
/// seen.record();
/// a.write_all(b"hello").await.unwrap();
/// assert_eq!((seen.writes(), seen.recorded()), (1, b"hello".to_vec()));
/// # });
/// ```
#[derive(Debug)]
pub struct Tap<T> {
    inner: T,
    seen: Arc<Tapped>,
}

impl<T> Tap<T> {
    /// `inner`, tapped, and what the tap sees.
    pub fn new(inner: T) -> (Tap<T>, Arc<Tapped>) {
        let seen = Arc::new(Tapped::default());
        (
            Tap {
                inner,
                seen: seen.clone(),
            },
            seen,
        )
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tap<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tap<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Each slice in turn, as far as the inner end takes them: one write.
        let mut n = 0;
        for b in bufs {
            match Pin::new(&mut self.inner).poll_write(cx, b) {
                Poll::Ready(Ok(k)) => {
                    self.keep(&b[..k]);
                    n += k;
                    if k < b.len() {
                        break;
                    }
                }
                Poll::Ready(Err(e)) if n == 0 => return Poll::Ready(Err(e)),
                Poll::Pending if n == 0 => return Poll::Pending,
                _ => break,
            }
        }
        if n > 0 {
            self.seen.writes.fetch_add(1, Ordering::Relaxed);
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T> Tap<T> {
    fn keep(&self, written: &[u8]) {
        let mut bytes = self.seen.bytes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = bytes.as_mut() {
            b.extend_from_slice(written);
        }
    }
}
