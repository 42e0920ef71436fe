//! A link with latency: two in-memory ends where every written byte
//! arrives a fixed time later, on tokio's clock (so a paused clock makes a
//! long round trip cost no real time, and the figures are exact).
//!
//! [`delay_pair`] has unlimited bandwidth: a transfer over it is bound by
//! its round trip and by flow control alone, which is what a window-growth
//! test needs to see. [`link_pair`] adds a rate and a queue ([`Link`]):
//! bytes leave one after another at the rate, and a writer waits while
//! the queue (the socket buffer and the bottleneck's queue together) is
//! full, so what a sender writes ahead of a small message delays it as on
//! a real link. Bytes in flight are bounded either way (a writer waits
//! beyond [`IN_FLIGHT_LIMIT`]) so a peer that never reads cannot grow
//! memory.

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

/// A link's shape, the same both ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Time from a byte leaving the sender's queue to its arrival.
    pub one_way: Duration,
    /// Bytes per second leaving the queue (`None`: unlimited).
    pub rate: Option<u64>,
    /// Bytes the queue holds before a writer waits (with a rate only).
    pub queue: usize,
}

/// One direction: what was written, each piece with the instant it
/// arrives.
#[derive(Debug)]
struct Pipe {
    /// When the last queued byte has left the queue (with a rate).
    free_at: Option<Instant>,
    pieces: VecDeque<(Instant, Bytes)>,
    in_flight: usize,
    end: End,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

impl Pipe {
    fn new() -> Arc<Mutex<Pipe>> {
        Arc::new(Mutex::new(Pipe {
            free_at: None,
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
    link: Link,
    /// The wait for the next piece to arrive.
    sleep: Option<Pin<Box<Sleep>>>,
    /// The wait for room in the queue.
    write_sleep: Option<Pin<Box<Sleep>>>,
}

/// Two connected ends; each byte written at one is readable at the other
/// `one_way` later.
pub fn delay_pair(one_way: Duration) -> (DelayIo, DelayIo) {
    link_pair(Link {
        one_way,
        rate: None,
        queue: 0,
    })
}

/// Two connected ends of a [`Link`].
pub fn link_pair(link: Link) -> (DelayIo, DelayIo) {
    let (ab, ba) = (Pipe::new(), Pipe::new());
    let end = |rx, tx| DelayIo {
        rx,
        tx,
        link,
        sleep: None,
        write_sleep: None,
    };
    (end(ba.clone(), ab.clone()), end(ab, ba))
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
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let mut p = lock(&this.tx);
        if p.end == End::Shut {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let mut room = IN_FLIGHT_LIMIT - p.in_flight;
        if room == 0 {
            p.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let now = Instant::now();
        let mut leaves = now;
        if let Some(rate) = this.link.rate {
            let secs = |bytes: usize| Duration::from_secs_f64(bytes as f64 / rate as f64);
            let free_at = p.free_at.filter(|&f| f > now).unwrap_or(now);
            let backlog = (free_at - now).as_secs_f64() * rate as f64;
            let queue_room = this.link.queue.saturating_sub(backlog.ceil() as usize);
            if queue_room == 0 {
                // Wait until the queue has drained below its size.
                let at = free_at - secs(this.link.queue) + Duration::from_micros(1);
                drop(p);
                let sleep = this
                    .write_sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
                sleep.as_mut().reset(at);
                if sleep.as_mut().poll(cx).is_ready() {
                    cx.waker().wake_by_ref();
                }
                return Poll::Pending;
            }
            room = room.min(queue_room);
            leaves = free_at + secs(room.min(buf.len()));
            p.free_at = Some(leaves);
        }
        let n = buf.len().min(room);
        p.pieces.push_back((
            leaves + this.link.one_way,
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

    #[tokio::test(start_paused = true)]
    async fn a_rated_link_queues_bytes_and_a_full_queue_makes_writers_wait() {
        // 1 MB/s: 1,000 bytes take 1 ms to leave; the queue holds 2,000.
        let (mut a, mut b) = link_pair(Link {
            one_way: Duration::from_millis(10),
            rate: Some(1_000_000),
            queue: 2_000,
        });
        let t0 = Instant::now();
        a.write_all(&[1; 2_000]).await.unwrap();
        assert_eq!(
            t0.elapsed(),
            Duration::ZERO,
            "the queue takes 2,000 at once"
        );
        a.write_all(&[2; 1_000]).await.unwrap();
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(1) && waited < Duration::from_millis(2),
            "the next 1,000 wait for room: {waited:?}"
        );
        // The last byte leaves at about 3 ms and arrives 10 ms later.
        let mut got = vec![0u8; 3_000];
        b.read_exact(&mut got).await.unwrap();
        let arrived = t0.elapsed();
        assert!(
            arrived >= Duration::from_millis(12) && arrived < Duration::from_millis(14),
            "{arrived:?}"
        );
        assert_eq!(got[2_999], 2);
    }
}
