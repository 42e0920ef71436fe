//! One call on the serving side: the type-erased [`Handler`]s a
//! `Router` stores, the [`ServerCall`] the server hands them, and the
//! runners that drive a call of each shape from its first request to its
//! one final status.
//!
//! Dependencies run one way: `router` stores handlers from here, `server`
//! routes a stream and starts its handler here; nothing here knows either.
//!
//! Every call ends with exactly one status: the handler's result,
//! `DEADLINE_EXCEEDED` when its deadline passes (the handler is dropped),
//! `INTERNAL` when it panics, `RESOURCE_EXHAUSTED` for an oversize message.
//! Each affects that call only.

use std::future::{Future, poll_fn};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use weft_mux::{Stream, StreamError};

use crate::codec::Framed;
use crate::codec::message::{Decode, Encode};
use crate::codec::typed::{Codec, UnaryMethod, With, Wrap};
use crate::codec::wire;
use crate::observe;
use crate::observe::meter::CallMeter;
use crate::server::context::Context;
use crate::server::context::{CallCell, CancelSignal, Finished};
use crate::server::end::{End, respond};
use crate::server::middleware::Hold;
use crate::server::mismatch;
use crate::server::pool::Pool;
use crate::server::request::{read_request, taken_whole};
use crate::server::route::Shape;
use crate::server::streams::{BidiStream, RequestStream, ResponseSink};
use crate::server::streams::{Closed, Slot};
use crate::status::Status;
use crate::within::{Deadline, within_as};

pub(crate) type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A registered handler, its types erased. `start` runs the call's first
/// poll inline (in a pooled slot, no allocation in steady state) and
/// returns it boxed only if it is still pending, for the caller to spawn.
pub(crate) trait Handler: Send + Sync + 'static {
    fn start(&self, call: ServerCall, cx: &mut std::task::Context<'_>) -> Option<BoxFuture>;
}

/// Polls the future `make` builds of `call` once in a slot of `pool`;
/// boxes it only if still pending. The call is passed on by value, not
/// captured by `make`: a closure holding it was a copy of it (a few
/// hundred bytes) per call.
#[inline(always)]
fn run_inline<T>(
    pool: &Arc<Pool<T>>,
    call: ServerCall,
    make: impl FnOnce(ServerCall) -> T,
    cx: &mut std::task::Context<'_>,
) -> Option<BoxFuture>
where
    T: Future<Output = ()> + Send + 'static,
{
    let mut filled = pool.start(call, make);
    match filled.poll(cx) {
        // Its slot went back as it finished.
        Poll::Ready(()) => None,
        Poll::Pending => Some(Box::pin(filled.into_pooled())),
    }
}

/// What a unary call runs, held by the call's future while it runs, so
/// that the handler's future may borrow it: a closure's `Arc`, or a typed
/// service's `Arc` and the method to call on it ([`ServiceMethod`]). The
/// latter is a typed call's whole handler: the service is shared once per
/// call, where a closure capturing it cloned its `Arc` again and wrapped
/// the method's future in an `async` block of its own.
pub(crate) trait CallUnary<Req, Resp>: Clone + Send + Sync + 'static {
    /// Starts the handler on one request.
    fn call(
        &self,
        ctx: Context,
        req: Req,
    ) -> impl Future<Output = Result<Resp, Status>> + Send + '_;
}

impl<F, Fut, Req, Resp> CallUnary<Req, Resp> for Arc<F>
where
    F: Fn(Context, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
{
    fn call(
        &self,
        ctx: Context,
        req: Req,
    ) -> impl Future<Output = Result<Resp, Status>> + Send + '_ {
        (**self)(ctx, req)
    }
}

/// A typed service's unary method `M` on the service `S`, by codec `C`.
pub(crate) struct ServiceMethod<S, M, C>(Arc<S>, PhantomData<fn() -> (M, C)>);

impl<S, M, C> ServiceMethod<S, M, C> {
    pub(crate) fn new(service: Arc<S>) -> Self {
        ServiceMethod(service, PhantomData)
    }
}

impl<S, M, C> Clone for ServiceMethod<S, M, C> {
    fn clone(&self) -> Self {
        ServiceMethod::new(self.0.clone())
    }
}

impl<S, M, C, Req, Resp> CallUnary<With<C, Req>, With<C, Resp>> for ServiceMethod<S, M, C>
where
    S: Send + Sync + 'static,
    M: UnaryMethod<S, Req, Resp>,
    C: Codec<Req> + Codec<Resp>,
    Req: Send + 'static,
    Resp: Send + 'static,
{
    fn call(
        &self,
        ctx: Context,
        With(req, _): With<C, Req>,
    ) -> impl Future<Output = Result<With<C, Resp>, Status>> + Send + '_ {
        Wrap::<_, C> {
            fut: M::call(&self.0, ctx, req),
            _c: PhantomData,
        }
    }
}

/// A route's handler: what the call runs (`h`, shared with each call),
/// the function `make` that builds a call's future of it, and the pool of
/// that future's slots. `make` is a function item or a closure capturing
/// nothing (zero-size, called statically), so the future's type `T` is
/// named here, through `make`'s, and the pool is typed: a type-erased
/// pool checked its type (`dyn Any`) on every call.
pub(crate) struct Runner<H, M, T> {
    h: H,
    make: M,
    pool: Arc<Pool<T>>,
}

impl<H, M, T> Runner<H, M, T>
where
    M: Fn(ServerCall, H) -> T,
{
    fn new(h: H, make: M) -> Self {
        Runner {
            h,
            make,
            pool: Arc::default(),
        }
    }
}

impl<H, M, T> Handler for Runner<H, M, T>
where
    H: Clone + Send + Sync + 'static,
    M: Fn(ServerCall, H) -> T + Send + Sync + 'static,
    T: Future<Output = ()> + Send + 'static,
{
    fn start(&self, call: ServerCall, cx: &mut std::task::Context<'_>) -> Option<BoxFuture> {
        run_inline(&self.pool, call, |c| (self.make)(c, self.h.clone()), cx)
    }
}

/// The handler of a unary route that runs `h`.
pub(crate) fn unary_handler<H, Req, Resp>(h: H) -> impl Handler
where
    H: CallUnary<Req, Resp>,
    Req: Decode,
    Resp: Encode,
{
    Runner::new(h, unary::<H, Req, Resp>)
}

/// The handler of a server-streaming route that runs `f`.
pub(crate) fn server_streaming_handler<F, Fut, Req>(f: F) -> impl Handler
where
    F: Fn(Context, Req, ResponseSink) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Status>> + Send + 'static,
    Req: Decode,
{
    Runner::new(Arc::new(f), |c, f: Arc<F>| {
        server_streaming(c, move |ctx, req, sink| f(ctx, req, sink))
    })
}

/// The handler of a client-streaming route that runs `f`.
pub(crate) fn client_streaming_handler<F, Fut, Resp>(f: F) -> impl Handler
where
    F: Fn(Context, RequestStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
    Resp: Encode,
{
    Runner::new(Arc::new(f), |c, f: Arc<F>| {
        client_streaming(c, move |ctx, rx| f(ctx, rx))
    })
}

/// The handler of a bidirectional route that runs `f`.
pub(crate) fn bidi_handler<F, Fut>(f: F) -> impl Handler
where
    F: Fn(Context, BidiStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Status>> + Send + 'static,
{
    Runner::new(Arc::new(f), |c, f: Arc<F>| bidi(c, move |ctx, s| f(ctx, s)))
}

/// Everything a handler's call task needs.
pub(crate) struct ServerCall {
    pub(crate) stream: Stream,
    /// The caller's whole side, when the accept took it with the stream
    /// (a request in the `OPEN` that ended it): read before the stream.
    pub(crate) request: Option<Bytes>,
    /// The call's context; its deadline is the call's (not kept twice:
    /// every byte here is copied a few times per call).
    pub(crate) ctx: Context,
    pub(crate) max: usize,
    pub(crate) guard: CallGuard,
    /// The server's layers, when it has some: they see the final status
    /// before it goes, and may cut the handler (zero-size without `tower`).
    pub(crate) hold: Hold,
}

/// Ends the call's entry, firing its cancellation signal unless the call
/// completed cleanly.
pub(crate) struct CallGuard {
    pub(crate) cell: Arc<CallCell>,
    ending: Ending,
    pub(crate) meter: CallMeter,
    entry: Entry,
}

/// How far a call's end got: whether its guard, dropped now, fires the
/// call's cancellation signal (unless the end went out whole).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Not sent (or not all of it): the call was cancelled.
    Unsent,
    /// Its result cut it short (its deadline passed, or it was
    /// cancelled): cancelled, however its end goes. Recorded as the end
    /// is built ([`CallGuard::cut_short`]), where the result is at hand:
    /// read beside the end's building, the result was borrowed across
    /// the end's send and kept in every call's future (72 bytes).
    CutShort,
    /// Its end went out: the call completed cleanly.
    Sent,
}

/// Whether a call's entry is still live.
enum Entry {
    /// Yes: dropping the guard ends it.
    Live,
    /// Taken as the result went out ([`CallGuard::finish`]), with the
    /// signal to fire should the end fail.
    Taken(Option<CancelSignal>),
}

impl CallGuard {
    /// The guard of the call whose entry is `cell`.
    pub(crate) fn new(cell: Arc<CallCell>, meter: CallMeter) -> CallGuard {
        CallGuard {
            cell,
            ending: Ending::Unsent,
            meter,
            entry: Entry::Live,
        }
    }

    /// Records that the call's result cut it short (see [`Ending`]).
    pub(crate) fn cut_short(&mut self) {
        self.ending = Ending::CutShort;
    }

    /// Records whether the call's end went out whole: the call completed
    /// cleanly if so, unless its result cut it short.
    pub(crate) fn sent(&mut self, sent: bool) {
        if sent && let Ending::Unsent = self.ending {
            self.ending = Ending::Sent;
        }
    }

    /// Takes the call's entry as its end is built: the response headers
    /// not sent yet and the trailers its handler set, `None` when it set
    /// none (nor asked for a signal). One lock at most, where taking them
    /// and ending the entry at the drop took two.
    #[inline(always)]
    pub(crate) fn finish(
        &mut self,
    ) -> Option<(Vec<crate::options::Entry>, Vec<crate::options::Entry>)> {
        let Some(Finished {
            headers,
            trailers,
            signal,
        }) = self.cell.finish()
        else {
            self.entry = Entry::Taken(None);
            return None;
        };
        self.entry = Entry::Taken(signal);
        Some((headers, trailers))
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let cancelled = self.ending != Ending::Sent;
        match &self.entry {
            Entry::Live => self.cell.end(cancelled),
            Entry::Taken(Some(signal)) if cancelled => signal.fire(),
            Entry::Taken(_) => {}
        }
    }
}

/// Ends a call that never reached its handler with `status`.
pub(crate) async fn reject(mut stream: Stream, status: Status) {
    tracing::debug!(id = stream.id(), %status, "call rejected");
    observe::server_finished(&status);
    let _ = wire::finish(&mut stream, &status).await;
}

/// Runs `fut` turning a panic into `INTERNAL`.
async fn catch<T>(fut: impl Future<Output = Result<T, Status>>) -> Result<T, Status> {
    let mut fut = pin!(fut);
    poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(_) => Poll::Ready(Err(panicked())),
        },
    )
    .await
}

fn panicked() -> Status {
    tracing::error!("handler panicked");
    Status::internal("handler panicked")
}

/// The status message of a call whose deadline passed in its handler.
const IN_HANDLER: &str = "deadline exceeded in the handler";

/// Calls the handler function itself, turning a panic into `INTERNAL`.
// Inlined: out of line, the handler's future was built in its frame and
// then copied, as a `Result`, into the call's future.
#[inline(always)]
fn call_handler<R>(f: impl FnOnce() -> R) -> Result<R, Status> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| panicked())
}

/// Polls a running handler, then (only while it is pending) whether its
/// caller went away: the handler's result (`INTERNAL` if it panicked), or
/// `CANCELLED` (or `UNAVAILABLE`) once the caller resets the stream or the
/// connection dies, as `reset` reports; used after the request has been
/// read. The mux wakes the call when the reset arrives: no polling.
///
/// One poll function over the pinned handler: a `tokio::select!` over
/// `catch(handler)` and an `async fn` watching the stream nested three
/// state machines, each polled through, in every call's one poll (about
/// 28 instructions per call more).
fn poll_until_reset<T>(
    handler: Pin<&mut impl Future<Output = Result<T, Status>>>,
    cx: &mut std::task::Context<'_>,
    reset: impl FnOnce(&mut std::task::Context<'_>) -> Poll<StreamError>,
) -> Poll<Result<T, Status>> {
    match catch_unwind(AssertUnwindSafe(|| handler.poll(cx))) {
        Ok(Poll::Pending) => reset(cx).map(|e| Err(wire::from_stream(&e))),
        Ok(ready) => ready,
        Err(_) => Poll::Ready(Err(panicked())),
    }
}

/// The reset watch of a streaming call whose stream sits in `slot`.
/// While the handler has it out (sending) the handler sees a reset itself;
/// this task is polled again whenever the handler makes progress, so the
/// watch resumes once the stream is back.
fn poll_slot_reset(slot: &Slot, cx: &mut std::task::Context<'_>) -> Poll<StreamError> {
    let Some(mut stream) = slot.take() else {
        return Poll::Pending;
    };
    let polled = stream.poll_reset(cx);
    slot.put(stream);
    polled
}

/// A unary call. A plain function returning the future, the call taken
/// apart outside it: an `async fn` keeps its argument for its whole life
/// and the parts it binds beside it, so every part was held (and copied
/// with the future) twice.
#[allow(clippy::manual_async_fn)] // reason: see above; the async fn held the call twice
pub(crate) fn unary<H, Req, Resp>(call: ServerCall, h: H) -> impl Future<Output = ()>
where
    H: CallUnary<Req, Resp>,
    Req: Decode,
    Resp: Encode,
{
    let ServerCall {
        mut stream,
        request,
        ctx,
        max,
        mut guard,
        hold,
    } = call;
    let deadline = ctx.deadline();
    async move {
        let mut result = {
            // The call's bounds, polled at each of its waits (for the
            // handler, or a request still to come) after what it waits
            // for: its deadline, whose timer is armed only then, and the
            // layers' cut. Checked here rather than by wrappers: the work
            // as a future of its own, wrapped by the deadline's and the
            // layers' futures, was three state machines to poll through
            // and move the result out of, in every call's one poll.
            let mut deadline = pin!(Deadline::new(deadline));
            let mut bounds = |cx: &mut std::task::Context<'_>| {
                if deadline.as_mut().poll_passed(cx).is_ready() {
                    return Poll::Ready(Status::deadline_exceeded(IN_HANDLER));
                }
                hold.poll_cut(cx)
            };
            // The handler (and a reader) is dropped as this block ends,
            // before the end is sent (see `streaming`).
            'work: {
                // The usual request, whole in what the accept took, is
                // taken without a reader's future to build and poll. Its
                // `match` ends before the read's await: a match around
                // the await kept its scrutinee (the request, or what the
                // accept took) alive across it, in this future, and the
                // request was copied into it and out again (about 15
                // instructions a call).
                let req = 'req: {
                    let taken = match taken_whole(request, max) {
                        Ok(req) => break 'req req,
                        Err(taken) => taken,
                    };
                    let mut read = pin!(read_request(&mut stream, taken, max));
                    let read = poll_fn(|cx| match read.as_mut().poll(cx) {
                        Poll::Ready(read) => Poll::Ready(
                            read.map_err(|e| mismatch::one_request(e, ctx.method(), Shape::Unary)),
                        ),
                        Poll::Pending => bounds(cx).map(Err),
                    });
                    match read.await {
                        Ok(req) => req,
                        Err(status) => break 'work Err(status),
                    }
                };
                guard.meter.received(req.len());
                let req = match Req::decode(req) {
                    Ok(req) => req,
                    Err(status) => break 'work Err(status),
                };
                // Borrows `h`, which this future holds.
                let mut handler = pin!(match call_handler(|| h.call(ctx, req)) {
                    Ok(handler) => handler,
                    Err(status) => break 'work Err(status),
                });
                let polled = poll_fn(|cx| {
                    match poll_until_reset(handler.as_mut(), cx, |cx| stream.poll_reset(cx)) {
                        Poll::Pending => bounds(cx).map(Err),
                        ready => ready,
                    }
                });
                match polled.await {
                    Ok(resp) => resp.encode(max).map(Some),
                    Err(status) => Err(status),
                }
            }
        };
        // `respond`'s steps, here so that the usual end (one frame) is
        // sent from this future rather than through one more of its own,
        // nor through `End::send`'s dispatch (each measured about 100
        // instructions per call more in the release build).
        // Replaced only when held: a `match` yielding the result moved
        // it (about 10 instructions a call) even when nothing held it.
        if hold.is_held() {
            result = hold.settle(result).await;
        }
        let end = End::of(stream.id(), result, &mut guard);
        let sent = match end {
            End::One(b, trailers) => stream.send_with_metadata(trailers, b, true).await.is_ok(),
            end => end.send(&mut stream).await,
        };
        guard.sent(sent);
        // Ended here, as the async fn's locals were (a captured value
        // would live until the future is dropped), in their order.
        #[allow(clippy::drop_non_drop)] // reason: `Hold` has a `Drop` with feature `tower`
        drop(hold);
        drop(guard);
        drop(stream);
    }
}

/// Ends a streaming call with the handler's result. After a send cut short
/// (the deadline passed while it waited for credit) an error status still
/// goes out, after the part of the message already queued: the caller sees
/// the status, not a reset (PROTOCOL 7.4). A handler claiming success after
/// a cut message cannot be believed: the stream is dropped, resetting it.
/// A send still under way on another task (a split half the handler
/// spawned) is waited for: its message goes whole, then the status.
async fn end_streaming(
    slot: Slot,
    result: Result<Option<Framed>, Status>,
    guard: &mut CallGuard,
    hold: &Hold,
) {
    let closed = match slot.close() {
        Closed::Away => slot.returned().await,
        found => found,
    };
    match (closed, result) {
        (Closed::Whole(mut stream), result) => respond(&mut stream, result, guard, hold).await,
        (Closed::Torn(mut stream), Err(status)) => {
            respond(&mut stream, Err(status), guard, hold).await;
        }
        // Not sent: the guard's drop cancels the call.
        (Closed::Torn(_), Ok(_)) | (Closed::Away, _) => {}
    }
}

/// Runs a streaming call: its stream goes into a slot the handler's
/// handles share, `work` gets the slot, the context, the message limit and
/// the request the accept took (if it did),
/// and the call ends with `work`'s result (or `DEADLINE_EXCEEDED`).
/// A plain function taking the call apart outside its future, as `unary`
/// does: as an `async fn` (and each shape's `async fn` around it) it held
/// the call, and each shape's handler, once more per layer.
#[allow(clippy::manual_async_fn)] // reason: see above; the async fn held the call twice
fn streaming<W>(
    call: ServerCall,
    work: impl FnOnce(Slot, Context, usize, Option<Bytes>) -> W,
) -> impl Future<Output = ()>
where
    W: Future<Output = Result<Option<Framed>, Status>>,
{
    let ServerCall {
        stream,
        request,
        ctx,
        max,
        mut guard,
        hold,
    } = call;
    let deadline = ctx.deadline();
    async move {
        let slot = Slot::serving(stream, guard.cell.clone());
        let result = {
            // Pinned where they are built, wrapped by reference (see `unary`).
            let work = pin!(work(slot.clone(), ctx, max, request));
            let timed = pin!(within_as(deadline, work, IN_HANDLER));
            hold.cut(timed).await
            // The handler is dropped here, before the end is sent: one
            // past its deadline may be blocked in a send the end must
            // wait behind, and its drop is what lets that send go (and
            // what `Context::cancellation` reports).
        };
        end_streaming(slot, result, &mut guard, &hold).await;
        // Ended here, as the async fn's locals were, in their order.
        #[allow(clippy::drop_non_drop)] // reason: `Hold` has a `Drop` with feature `tower`
        drop(hold);
        drop(guard);
    }
}

pub(crate) fn server_streaming<F, Fut, Req>(call: ServerCall, f: F) -> impl Future<Output = ()>
where
    F: FnOnce(Context, Req, ResponseSink) -> Fut,
    Fut: Future<Output = Result<(), Status>>,
    Req: Decode,
{
    streaming(call, |slot, ctx, max, first| async move {
        let req = RequestStream::new(slot.clone(), max, first).single().await;
        let shape = Shape::ServerStreaming;
        let req = req.map_err(|e| mismatch::one_request(e, ctx.method(), shape))?;
        let req = Req::decode(req)?;
        let sink = ResponseSink::new(slot.clone(), max);
        let mut handler = pin!(call_handler(|| f(ctx, req, sink))?);
        let polled = |cx: &mut std::task::Context<'_>| {
            poll_until_reset(handler.as_mut(), cx, |cx| poll_slot_reset(&slot, cx))
        };
        poll_fn(polled).await.map(|()| None)
    })
}

pub(crate) fn client_streaming<F, Fut, Resp>(call: ServerCall, f: F) -> impl Future<Output = ()>
where
    F: FnOnce(Context, RequestStream) -> Fut,
    Fut: Future<Output = Result<Resp, Status>>,
    Resp: Encode,
{
    streaming(call, |slot, ctx, max, first| async move {
        let rx = RequestStream::new(slot, max, first);
        let resp = catch(call_handler(|| f(ctx, rx))?).await?;
        resp.encode(max).map(Some)
    })
}

pub(crate) fn bidi<F, Fut>(call: ServerCall, f: F) -> impl Future<Output = ()>
where
    F: FnOnce(Context, BidiStream) -> Fut,
    Fut: Future<Output = Result<(), Status>>,
{
    streaming(call, |slot, ctx, max, first| async move {
        let s = BidiStream::new(slot, max, first);
        catch(call_handler(|| f(ctx, s))?).await.map(|()| None)
    })
}

// Not in the `--cfg loom` build, which has no weft-testkit.
#[cfg(all(test, not(loom)))]
mod tests {
    use bytes::Bytes;
    use weft_frame::Metadata;

    use super::*;
    use crate::observe::meter::CallMeter;

    /// A unary call's future is built, then copied into its pooled slot,
    /// for every call: its size is paid per call. This debug build
    /// measures 856 bytes since the call's context keeps what its
    /// connection's calls share in its cell (56 bytes, 112 before); 928
    /// since the deadline and the layers' cut are
    /// polled in place rather than by wrapper futures (the release build's
    /// call cost 65 instructions less for it, the larger copy included);
    /// 848 since the handler's owner (a closure's `Arc`, a
    /// typed service) is held while the handler runs, so a typed method's
    /// future can borrow its service (816 before; the raw call's release
    /// instruction counts moved by under 0.2 %); 784 since the call's end was
    /// built before its send and sent from this future; 1,024 while the
    /// end was an `async fn`
    /// (and the request's read another); 1,136 while `unary` was an
    /// `async fn` holding its call twice.
    ///
    /// With feature `tower` (the layers' hold is a pointer, its settling
    /// a future of its own) this debug build measures 1,000 bytes since
    /// the request's `match` ends before the read's await (864 before);
    /// the release build's is 864 bytes either way, with and without
    /// `tower`, and its call 11 to 15 instructions cheaper.
    #[tokio::test]
    async fn a_unary_call_future_stays_small() {
        let (call, _out) = a_call().await;
        let echo = |_ctx, req: Bytes| async move { Ok::<_, Status>(req) };
        let fut = unary(call, Arc::new(echo));
        let size = size_of_val(&fut);
        println!("unary call future: {size} bytes");
        let most = if cfg!(feature = "tower") { 1000 } else { 864 };
        assert!(size <= most, "{size} bytes");
    }

    /// Drops its flag's count as it is dropped: whether a handler's
    /// future was dropped.
    struct Dropped(Arc<std::sync::atomic::AtomicUsize>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A call opened with a 50 ms timeout, as the server runs it (its
    /// request sent only if `request` is), and the caller's stream.
    async fn a_timed_call(request: bool) -> (ServerCall, weft_mux::Stream) {
        let ((client, _), (_server, mut incoming)) = weft_testkit::duplex_pair(
            1 << 16,
            weft_mux::Config::default(),
            weft_mux::Config::default(),
        )
        .await;
        let timeout = std::time::Duration::from_millis(50);
        let meta = Metadata::builder().method("m").timeout(timeout).finish();
        let body = if request {
            crate::codec::empty_message()
        } else {
            Bytes::new()
        };
        let out = client.open(meta, body, request).await.unwrap();
        let stream = incoming.accept().await.unwrap();
        let cell = CallCell::for_test();
        let deadline = Some(tokio::time::Instant::now() + timeout);
        let ctx = Context::for_call(deadline, Metadata::new(), cell.clone());
        (served(stream, ctx, cell), out)
    }

    /// A served call of `stream` with its context and cell, no request
    /// taken yet, nothing metered.
    fn served(stream: weft_mux::Stream, ctx: Context, cell: Arc<CallCell>) -> ServerCall {
        ServerCall {
            stream,
            request: None,
            ctx,
            max: 1 << 20,
            guard: CallGuard::new(cell, CallMeter::OFF),
            hold: Hold::default(),
        }
    }

    /// The status the caller's stream ends with.
    async fn status_at(out: &mut weft_mux::Stream) -> Status {
        loop {
            match out.recv().await {
                Ok(Some(chunk)) if chunk.end => {
                    return wire::status_of(Some(&chunk.metadata)).unwrap_err();
                }
                Ok(Some(_)) => {}
                other => panic!("no end: {other:?}"),
            }
        }
    }

    /// A unary handler still running at its call's deadline is dropped
    /// and the caller gets the server's `DEADLINE_EXCEEDED` (the deadline
    /// is polled beside the handler, its timer armed only once the
    /// handler waits).
    #[tokio::test(start_paused = true)]
    async fn a_unary_handler_past_its_deadline_is_dropped_and_the_call_ends() {
        let (call, mut out) = a_timed_call(true).await;
        let drops = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let flag = drops.clone();
        let slow = move |_ctx, _req: Bytes| {
            let dropped = Dropped(flag.clone());
            async move {
                let _dropped = dropped;
                std::future::pending::<()>().await;
                Ok::<_, Status>(Bytes::new())
            }
        };
        let run = unary(call, Arc::new(slow));
        tokio::time::timeout(std::time::Duration::from_secs(5), run)
            .await
            .expect("the server ends the call at its deadline");
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 1);
        let status = status_at(&mut out).await;
        assert_eq!(status.code(), crate::Code::DEADLINE_EXCEEDED);
        assert_eq!(status.message(), IN_HANDLER);
    }

    /// A request that never comes is waited for only until the deadline:
    /// the handler is never called.
    #[tokio::test(start_paused = true)]
    async fn a_unary_request_still_to_come_at_the_deadline_ends_the_call() {
        let (call, mut out) = a_timed_call(false).await;
        let never = |_ctx, _req: Bytes| async move {
            panic!("called without its request");
            #[allow(unreachable_code)]
            Ok::<_, Status>(Bytes::new())
        };
        let run = unary(call, Arc::new(never));
        tokio::time::timeout(std::time::Duration::from_secs(5), run)
            .await
            .expect("the server ends the call at its deadline");
        let status = status_at(&mut out).await;
        assert_eq!(status.code(), crate::Code::DEADLINE_EXCEEDED);
    }

    /// The parts of a served call, for the size tests.
    async fn a_call() -> (ServerCall, weft_mux::Stream) {
        let ((client, _), (_server, mut incoming)) = weft_testkit::duplex_pair(
            1 << 16,
            weft_mux::Config::default(),
            weft_mux::Config::default(),
        )
        .await;
        let out = client
            .open(Metadata::new(), Bytes::new(), false)
            .await
            .unwrap();
        let stream = incoming.accept().await.unwrap();
        let cell = CallCell::for_test();
        let ctx = Context::for_test(&cell);
        (served(stream, ctx, cell), out)
    }

    /// A streaming call's future is held (pooled) for the call's life, so
    /// its size is memory per open stream. This debug build measures
    /// 1,088 bytes for a bidi call since whether a call was cut short is
    /// kept in its guard (rather than beside its end); 1,096 since the
    /// context shrank (see `a_unary_call_future_stays_small`); 1,152 since the end's send future is built
    /// from its parts; 1,328 while the end was an `async fn`; 1,920 while
    /// `streaming` and each shape's runner were `async fn`s holding the
    /// call twice.
    #[tokio::test]
    async fn a_streaming_call_future_stays_small() {
        let (call, _out) = a_call().await;
        let fut = bidi(call, |_ctx, _s| async move { Ok::<_, Status>(()) });
        let size = size_of_val(&fut);
        println!("bidi call future: {size} bytes");
        // 1,096 with feature `tower`.
        assert!(size <= 1096, "{size} bytes");
    }
}
