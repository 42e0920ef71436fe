//! A link with latency: two in-memory ends where every written byte
//! arrives a fixed time later, on tokio's clock (so a paused clock makes a
//! long round trip cost no real time, and the figures are exact).
//!
//! Bandwidth is unlimited: a transfer over it is bound by its round trip
//! and by flow control alone, which is what a window-growth test needs to
//! see. Bytes in flight are bounded (a writer waits beyond
//! [`IN_FLIGHT_LIMIT`]) so a peer that never reads cannot grow memory.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Bytes one direction holds in flight before writes wait: 64 MiB, above
/// any window weft grows to by default (16 MiB).
pub const IN_FLIGHT_LIMIT: usize = 64 << 20;

/// Whether a direction's writer is still there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Open,
    /// The writer shut down or was dropped: end of file after the bytes.
    Shut,
}

/// One direction: what was written, each piece with the instant it
/// arrives.
#[derive(Debug)]
struct Pipe {
    pieces: VecDeque<(Instant, Bytes)>,
    in_flight: usize,
    end: End,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

impl Pipe {
    fn new() -> Arc<Mutex<Pipe>> {
        Arc::new(Mutex::new(Pipe {
            pieces: VecDeque::new(),
            in_flight: 0,
            end: End::Open,
            reader: None,
            writer: None,
        }))
    }
}

/// One end of a [`delay_pair`].
#[derive(Debug)]
pub struct DelayIo {
    rx: Arc<Mutex<Pipe>>,
    tx: Arc<Mutex<Pipe>>,
    delay: Duration,
    /// The wait for the next piece to arrive.
    sleep: Option<Pin<Box<Sleep>>>,
}

/// Two connected ends; each byte written at one is readable at the other
/// `one_way` later.
pub fn delay_pair(one_way: Duration) -> (DelayIo, DelayIo) {
    let (ab, ba) = (Pipe::new(), Pipe::new());
    let a = DelayIo {
        rx: ba.clone(),
        tx: ab.clone(),
        delay: one_way,
        sleep: None,
    };
    let b = DelayIo {
        rx: ab,
        tx: ba,
        delay: one_way,
        sleep: None,
    };
    (a, b)
}

fn lock(p: &Mutex<Pipe>) -> std::sync::MutexGuard<'_, Pipe> {
    p.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AsyncRead for DelayIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            let mut p = lock(&this.rx);
            let due = match p.pieces.front() {
                None if p.end == End::Shut => return Poll::Ready(Ok(())),
                None => {
                    p.reader = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Some((at, _)) => *at,
            };
            if due > Instant::now() {
                drop(p);
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                sleep.as_mut().reset(due);
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                continue;
            }
            // Everything that has arrived, as far as the buffer takes it.
            let now = Instant::now();
            let p = &mut *p;
            while buf.remaining() > 0 {
                let Some((at, piece)) = p.pieces.front_mut() else {
                    break;
                };
                if *at > now {
                    break;
                }
                let n = piece.len().min(buf.remaining());
                buf.put_slice(&piece[..n]);
                piece.advance(n);
                p.in_flight -= n;
                if piece.is_empty() {
                    p.pieces.pop_front();
                }
            }
            if let Some(w) = p.writer.take() {
                w.wake();
            }
            return Poll::Ready(Ok(()));
        }
    }
}

impl AsyncWrite for DelayIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut p = lock(&self.tx);
        if p.end == End::Shut {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let room = IN_FLIGHT_LIMIT - p.in_flight;
        if room == 0 {
            p.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(room);
        p.pieces.push_back((
            Instant::now() + self.delay,
            Bytes::copy_from_slice(&buf[..n]),
        ));
        p.in_flight += n;
        if let Some(w) = p.reader.take() {
            w.wake();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut p = lock(&self.tx);
        p.end = End::Shut;
        if let Some(w) = p.reader.take() {
            w.wake();
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for DelayIo {
    fn drop(&mut self) {
        for pipe in [&self.tx, &self.rx] {
            let mut p = lock(pipe);
            p.end = End::Shut;
            for w in [p.reader.take(), p.writer.take()].into_iter().flatten() {
                w.wake();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn bytes_arrive_one_delay_later_in_order() {
        let (mut a, mut b) = delay_pair(Duration::from_millis(20));
        let t0 = Instant::now();
        a.write_all(b"hello ").await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        a.write_all(b"world").await.unwrap();
        let mut got = [0u8; 11];
        b.read_exact(&mut got[..6]).await.unwrap();
        assert_eq!(t0.elapsed(), Duration::from_millis(20));
        b.read_exact(&mut got[6..]).await.unwrap();
        assert_eq!(t0.elapsed(), Duration::from_millis(25));
        assert_eq!(&got, b"hello world");
        a.shutdown().await.unwrap();
        assert_eq!(
            b.read(&mut got).await.unwrap(),
            0,
            "end of file after the bytes"
        );
    }
}
