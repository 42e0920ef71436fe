//! The fault-injecting wrapper.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// Which faults to inject, by byte offset in each direction. All off by
/// default. Offsets count bytes that passed through the wrapper.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// After this many bytes written, further writes report success but the
    /// bytes are discarded (a black hole: the peer hears nothing more).
    pub drop_writes_after: Option<usize>,
    /// After this many bytes written, writes fail with `ConnectionReset`.
    pub reset_writes_after: Option<usize>,
    /// Flip the lowest bit of the byte read at this offset.
    pub corrupt_read_at: Option<usize>,
    /// After this many bytes read, reads return EOF (the connection is cut).
    pub truncate_reads_after: Option<usize>,
    /// After this many bytes read, each further read waits this long first.
    pub delay_reads_after: Option<(usize, Duration)>,
    /// After this many bytes written, writes return `Ok(0)` (a writer that
    /// accepts nothing: the caller must fail, never spin).
    pub zero_writes_after: Option<usize>,
    /// Each write passes at most this many bytes (short writes).
    pub max_write: Option<usize>,
}

/// An `AsyncRead + AsyncWrite` that injects [`Faults`] into `T`.
#[derive(Debug)]
pub struct FaultyIo<T> {
    inner: T,
    faults: Faults,
    read: usize,
    written: usize,
    delay: Option<Pin<Box<Sleep>>>,
}

impl<T> FaultyIo<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, faults: Faults) -> FaultyIo<T> {
        FaultyIo {
            inner,
            faults,
            read: 0,
            written: 0,
            delay: None,
        }
    }

    /// Bytes read through the wrapper so far.
    pub fn bytes_read(&self) -> usize {
        self.read
    }

    /// Bytes written through the wrapper so far (dropped ones included).
    pub fn bytes_written(&self) -> usize {
        self.written
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FaultyIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some((after, pause)) = this.faults.delay_reads_after
            && this.read >= after
        {
            let sleep = this
                .delay
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
            ready!(sleep.as_mut().poll(cx));
            this.delay = None;
        }
        let limit = match this.faults.truncate_reads_after {
            Some(cut) if this.read >= cut => return Poll::Ready(Ok(())),
            Some(cut) => cut - this.read,
            None => usize::MAX,
        };
        let want = buf.remaining().min(limit);
        let mut sub = ReadBuf::new(buf.initialize_unfilled_to(want));
        ready!(Pin::new(&mut this.inner).poll_read(cx, &mut sub))?;
        let got = sub.filled().len();
        if let Some(at) = this.faults.corrupt_read_at
            && (this.read..this.read + got).contains(&at)
        {
            sub.filled_mut()[at - this.read] ^= 1;
        }
        buf.advance(got);
        this.read += got;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FaultyIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(after) = this.faults.reset_writes_after
            && this.written >= after
        {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        if let Some(after) = this.faults.drop_writes_after
            && this.written >= after
        {
            this.written += buf.len();
            return Poll::Ready(Ok(buf.len()));
        }
        if let Some(after) = this.faults.zero_writes_after
            && this.written >= after
        {
            return Poll::Ready(Ok(0));
        }
        // Stop exactly at the next fault boundary so it lands on its byte.
        let boundary = [
            this.faults.reset_writes_after,
            this.faults.drop_writes_after,
            this.faults.zero_writes_after,
        ]
        .into_iter()
        .flatten()
        .map(|at| at - this.written)
        .chain(this.faults.max_write.map(|m| m.max(1)))
        .min()
        .unwrap_or(usize::MAX);
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &buf[..buf.len().min(boundary)]))?;
        this.written += n;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    #[tokio::test]
    async fn corrupts_truncates_and_passes_the_rest() {
        let (a, mut b) = duplex(64);
        let faults = Faults {
            corrupt_read_at: Some(2),
            truncate_reads_after: Some(5),
            ..Faults::default()
        };
        let mut f = FaultyIo::new(a, faults);
        b.write_all(b"abcdefgh").await.unwrap();
        let mut out = Vec::new();
        f.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"abbde"); // 'c' ^ 1 == 'b'; cut after 5
        assert_eq!(f.bytes_read(), 5);
    }

    #[tokio::test]
    async fn drops_then_resets_writes_at_their_offsets() {
        let (a, mut b) = duplex(64);
        let faults = Faults {
            drop_writes_after: Some(3),
            reset_writes_after: Some(6),
            ..Faults::default()
        };
        let mut f = FaultyIo::new(a, faults);
        f.write_all(b"xyzuvw").await.unwrap();
        let err = f.write_all(b"!").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(f.bytes_written(), 6);
        drop(f);
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"xyz");
    }

    #[tokio::test]
    async fn short_writes_then_zero_writes() {
        let (a, mut b) = duplex(64);
        let faults = Faults {
            max_write: Some(2),
            zero_writes_after: Some(5),
            ..Faults::default()
        };
        let mut f = FaultyIo::new(a, faults);
        assert_eq!(f.write(b"abcdefg").await.unwrap(), 2);
        f.write_all(b"cde").await.unwrap();
        assert_eq!(f.write(b"fg").await.unwrap(), 0);
        let err = f.write_all(b"fg").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
        drop(f);
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"abcde");
    }

    #[tokio::test(start_paused = true)]
    async fn delays_reads_after_the_offset() {
        let (a, mut b) = duplex(64);
        let faults = Faults {
            delay_reads_after: Some((1, Duration::from_secs(5))),
            ..Faults::default()
        };
        let mut f = FaultyIo::new(a, faults);
        b.write_all(b"ab").await.unwrap();
        let start = tokio::time::Instant::now();
        let mut one = [0u8; 1];
        f.read_exact(&mut one).await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        f.read_exact(&mut one).await.unwrap();
        assert_eq!(one, *b"b");
        assert!(start.elapsed() >= Duration::from_secs(5));
    }
}
