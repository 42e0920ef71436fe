//! A `tokio::io::duplex` end with hooks for driver tests: it can trickle
//! reads (a few bytes at a time), hold reads back behind a gate, counts
//! the bytes read and the writes that moved bytes (and the bytes read at
//! each such write),
//! records which task ran each read that returned bytes, records when
//! it is dropped, and can fail every write from a moment on (a reset).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::task::Id;

/// The task of each read that returned bytes (`None`: outside a task).
pub type ReadTasks = Arc<Mutex<Vec<Option<Id>>>>;

/// The transport; see the module docs.
pub struct TestIo {
    inner: DuplexStream,
    read_max: usize,
    writes: Arc<AtomicUsize>,
    read_tasks: ReadTasks,
    dropped: Arc<AtomicBool>,
    reset_writes: Arc<AtomicBool>,
    gate: Arc<Gate>,
    read: Arc<AtomicUsize>,
    read_at_writes: ReadAtWrites,
}

/// The bytes read so far at each write that moved bytes.
pub type ReadAtWrites = Arc<Mutex<Vec<usize>>>;

/// Holds a [`TestIo`]'s reads back (`Pending`) while closed; opening it
/// wakes the read that waits.
#[derive(Default)]
pub struct Gate {
    closed: AtomicBool,
    waiting: Mutex<Option<Waker>>,
}

impl Gate {
    /// Reads return `Pending` from now on.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Reads go on; the read that waited is woken.
    pub fn open(&self) {
        self.closed.store(false, Ordering::SeqCst);
        if let Some(w) = self.waiting.lock().unwrap().take() {
            w.wake();
        }
    }

    /// Whether a read may go on; if not, `cx` is woken on `open`.
    fn admits(&self, cx: &Context<'_>) -> bool {
        if !self.closed.load(Ordering::SeqCst) {
            return true;
        }
        *self.waiting.lock().unwrap() = Some(cx.waker().clone());
        // Opened meanwhile: the waker may have been missed.
        !self.closed.load(Ordering::SeqCst)
    }
}

impl TestIo {
    pub fn new(inner: DuplexStream) -> TestIo {
        TestIo {
            inner,
            read_max: usize::MAX,
            writes: Arc::default(),
            read_tasks: Arc::default(),
            dropped: Arc::default(),
            reset_writes: Arc::default(),
            gate: Arc::default(),
            read: Arc::default(),
            read_at_writes: Arc::default(),
        }
    }

    /// The gate in front of reads (open at first).
    pub fn gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> Arc<AtomicUsize> {
        self.read.clone()
    }

    /// The bytes read so far at each write that moved bytes.
    pub fn read_at_writes(&self) -> ReadAtWrites {
        self.read_at_writes.clone()
    }

    /// Hands out at most `max` bytes per read (at most 64).
    pub fn trickle(mut self, max: usize) -> TestIo {
        self.read_max = max;
        self
    }

    /// Counts writes that moved bytes.
    pub fn writes(&self) -> Arc<AtomicUsize> {
        self.writes.clone()
    }

    /// The task of every read that returned bytes.
    pub fn read_tasks(&self) -> ReadTasks {
        self.read_tasks.clone()
    }

    /// Once set, every write fails with `ConnectionReset` (what a write
    /// gets after the peer's TCP reset).
    pub fn reset_writes(&self) -> Arc<AtomicBool> {
        self.reset_writes.clone()
    }

    /// Set once the transport is dropped.
    pub fn dropped(&self) -> Arc<AtomicBool> {
        self.dropped.clone()
    }
}

impl Drop for TestIo {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

impl AsyncRead for TestIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.gate.admits(cx) {
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let r = if self.read_max >= buf.remaining() {
            Pin::new(&mut self.inner).poll_read(cx, buf)
        } else {
            let mut small = [0u8; 64];
            let n = self.read_max.min(small.len());
            let mut view = ReadBuf::new(&mut small[..n]);
            let r = Pin::new(&mut self.inner).poll_read(cx, &mut view);
            buf.put_slice(view.filled());
            r
        };
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let n = buf.filled().len() - before;
            self.read.fetch_add(n, Ordering::SeqCst);
            let task = tokio::task::try_id();
            self.read_tasks.lock().unwrap().push(task);
        }
        r
    }
}

impl AsyncWrite for TestIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.reset_writes.load(Ordering::SeqCst) {
            return Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into()));
        }
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.writes.fetch_add(1, Ordering::Relaxed);
            let read = self.read.load(Ordering::SeqCst);
            self.read_at_writes.lock().unwrap().push(read);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A client connection over a [`TestIo`] whose writes can be made to fail
/// (the switch returned, see [`TestIo::reset_writes`]), facing a raw peer
/// that already answered the handshake.
pub async fn client_with_failing_writes() -> (
    weft_mux::Connection,
    weft_mux::Incoming,
    weft_testkit::RawPeer<DuplexStream>,
    Arc<AtomicBool>,
) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let io = TestIo::new(a);
    let reset = io.reset_writes();
    let mux = tokio::spawn(weft_mux::connect(
        io,
        weft_mux::Role::Client,
        weft_mux::Config::default(),
    ));
    let peer = weft_testkit::RawPeer::facing(b, weft_mux::Role::Client).await;
    let (client, incoming) = mux.await.unwrap().unwrap();
    (client, incoming, peer, reset)
}
