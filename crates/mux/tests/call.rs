//! `Connection::call`: a request sent whole and the first piece of its
//! answer in one future, behaving as `open` with `end` then `recv` does —
//! the table freed by a one-frame answer, the stream handed on for more,
//! a reset when dropped early, its turn under the peer's cap.

use std::future::poll_fn;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use weft_mux::{Answer, Config, Connection, Incoming, Metadata, Stream};
use weft_testkit::duplex_pair;

mod support;

fn md(method: &str) -> Metadata {
    Metadata::builder().method(method).finish()
}

/// One call of `method` with `request`, answered by the peer with `reply`
/// (ending the stream if `end`) once it has read the whole request: the
/// call's answer and the peer's stream.
async fn answered<'a>(
    client: &'a Connection,
    incoming: &mut Incoming,
    (method, request): (&str, &'static [u8]),
    (reply, end): (&'static [u8], bool),
) -> (Answer<'a>, Stream) {
    let call = client.call(md(method), Bytes::from_static(request));
    let serve = async {
        let mut peer = incoming.accept().await.unwrap();
        assert_eq!(peer.metadata().method(), Some(method));
        let got = peer.recv().await.unwrap().unwrap();
        assert_eq!((&got.data[..], got.end), (request, true));
        peer.send(Bytes::from_static(reply), end).await.unwrap();
        peer
    };
    let (answer, peer) = tokio::join!(call, serve);
    (answer.unwrap(), peer)
}

#[tokio::test]
async fn a_one_frame_answer_resolves_the_call_and_frees_both_tables() {
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let (mut answer, _peer) = answered(
        &client,
        &mut incoming,
        ("svc/echo", b"ask"),
        (b"answer", true),
    )
    .await;
    assert_eq!(answer.metadata().method(), Some("svc/echo"));
    let first = answer.take_first().unwrap().unwrap();
    assert_eq!((&first.data[..], first.end), (&b"answer"[..], true));
    assert_eq!(client.stats().streams, 0, "released by the answer's end");
    assert_eq!(server.stats().streams, 0);
    // Handed on, the stream reads as ended; nothing is reset.
    let mut stream = answer.into_stream();
    assert!(stream.recv().await.unwrap().is_none());
    drop(stream);
    let (again, _peer) =
        answered(&client, &mut incoming, ("svc/echo", b"again"), (b"2", true)).await;
    let second = { again }.take_first().unwrap().unwrap();
    assert_eq!(&second.data[..], b"2");
}

/// `first` shows the piece without taking it; once taken, both `first`
/// and `take_first` read the stream's end. A reset answer reads as the
/// failure either way.
#[tokio::test]
async fn an_answers_first_piece_reads_alike_before_and_after_it_is_taken() {
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let (mut answer, _peer) = answered(
        &client,
        &mut incoming,
        ("svc/echo", b"ask"),
        (b"answer", true),
    )
    .await;
    let seen = answer.first().unwrap().map(|c| (c.data.clone(), c.end));
    assert_eq!(seen, Some((Bytes::from_static(b"answer"), true)));
    let taken = answer.take_first().unwrap().unwrap();
    assert_eq!((&taken.data[..], taken.end), (&b"answer"[..], true));
    assert!(answer.first().unwrap().is_none(), "taken: the stream's end");
    assert!(answer.take_first().unwrap().is_none());

    let call = client.call(md("svc/refuse"), Bytes::from_static(b"ask"));
    let serve = async {
        let mut peer = incoming.accept().await.unwrap();
        peer.reset(weft_mux::Reason::REFUSED_STREAM);
        peer
    };
    let (answer, _peer) = tokio::join!(call, serve);
    let mut answer = answer.unwrap();
    let reason = answer.first().map(|_| ()).unwrap_err().reason();
    assert_eq!(reason, Some(weft_mux::Reason::REFUSED_STREAM));
    let err = answer.take_first().unwrap_err();
    assert_eq!(err.reason(), Some(weft_mux::Reason::REFUSED_STREAM));
}

/// An answer dropped with its first piece untaken drops the piece: once
/// the connection is gone, a copy of the piece's bytes is the last
/// holder of the read buffer they are a slice of.
#[tokio::test]
async fn an_answer_dropped_untaken_lets_go_of_its_first_piece() {
    let ((client, ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let (answer, peer) = answered(
        &client,
        &mut incoming,
        ("svc/echo", b"ask"),
        (b"answer", true),
    )
    .await;
    let data = answer.first().unwrap().unwrap().data.clone();
    assert!(!data.is_unique(), "a slice of the read buffer");
    drop(answer);
    drop((peer, incoming));
    client.shutdown(Duration::from_secs(1)).await;
    drop((client, ci));
    // The connection task lets go of its state as it finishes.
    for _ in 0..100 {
        if data.is_unique() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(data.is_unique(), "the answer's untaken piece was dropped");
}

#[tokio::test]
async fn the_rest_of_a_longer_answer_is_read_from_the_stream() {
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let (mut answer, mut peer) = answered(
        &client,
        &mut incoming,
        ("svc/list", b"ask"),
        (b"one", false),
    )
    .await;
    let first = answer.take_first().unwrap().unwrap();
    assert_eq!((&first.data[..], first.end), (&b"one"[..], false));
    assert_eq!(client.stats().streams, 1, "the answer goes on");
    let mut stream = answer.into_stream();
    peer.send(Bytes::from_static(b"two"), true).await.unwrap();
    let second = stream.recv().await.unwrap().unwrap();
    assert_eq!((&second.data[..], second.end), (&b"two"[..], true));
    assert_eq!(client.stats().streams, 0);
}

#[tokio::test]
async fn a_call_dropped_before_its_answer_resets_the_peers_stream() {
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    {
        let mut call = pin!(client.call(md("svc/slow"), Bytes::from_static(b"ask")));
        // Sent and waiting.
        let polled = poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        assert!(polled.is_pending());
    }
    let mut peer = incoming.accept().await.unwrap();
    peer.recv().await.unwrap();
    let reset = tokio::time::timeout(Duration::from_secs(5), poll_fn(|cx| peer.poll_reset(cx)))
        .await
        .expect("the peer sees the reset");
    assert_eq!(reset.reason(), Some(weft_mux::Reason::CANCEL), "{reset}");
    tokio::time::timeout(Duration::from_secs(5), async {
        while client.stats().streams != 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the slot is freed");
}

#[tokio::test]
async fn an_answer_dropped_before_its_end_resets_the_stream() {
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let (answer, mut peer) = answered(
        &client,
        &mut incoming,
        ("svc/list", b"ask"),
        (b"one", false),
    )
    .await;
    drop(answer);
    let reset = tokio::time::timeout(Duration::from_secs(5), poll_fn(|cx| peer.poll_reset(cx)))
        .await
        .expect("the peer sees the reset");
    assert_eq!(reset.reason(), Some(weft_mux::Reason::CANCEL), "{reset}");
}

#[tokio::test]
async fn a_call_waits_its_turn_under_the_peers_cap_and_can_leave_the_queue() {
    let mut capped = Config::default();
    capped.max_concurrent_streams(1);
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), capped).await;
    // Settings exchanged: the cap is known once a call went through.
    answered(&client, &mut incoming, ("svc/m", b"w"), (b"w", true)).await;

    let first = client.call(md("svc/m"), Bytes::from_static(b"1"));
    let mut first = pin!(first);
    assert!(
        poll_fn(|cx| Poll::Ready(first.as_mut().poll(cx)))
            .await
            .is_pending()
    );
    {
        // Over the cap: queued, and dropped from the queue.
        let mut queued = pin!(client.call(md("svc/m"), Bytes::from_static(b"x")));
        assert!(
            poll_fn(|cx| Poll::Ready(queued.as_mut().poll(cx)))
                .await
                .is_pending()
        );
    }
    let third = client.call(md("svc/m"), Bytes::from_static(b"3"));
    let mut third = pin!(third);
    assert!(
        poll_fn(|cx| Poll::Ready(third.as_mut().poll(cx)))
            .await
            .is_pending()
    );
    let mut peer = incoming.accept().await.unwrap();
    assert_eq!(&peer.recv().await.unwrap().unwrap().data[..], b"1");
    peer.send(Bytes::from_static(b"a1"), true).await.unwrap();
    let a1 = first.await.unwrap().take_first().unwrap().unwrap();
    assert_eq!(&a1.data[..], b"a1");
    // The dropped call never went out: the next stream is the third call.
    let serve = async {
        let mut peer = incoming.accept().await.unwrap();
        assert_eq!(&peer.recv().await.unwrap().unwrap().data[..], b"3");
        peer.send(Bytes::from_static(b"a3"), true).await.unwrap();
    };
    let both = async { tokio::join!(third, serve) };
    let (a3, ()) = tokio::time::timeout(Duration::from_secs(5), both)
        .await
        .expect("the third call goes out once the first's slot is free");
    let a3 = a3.unwrap().take_first().unwrap().unwrap();
    assert_eq!(&a3.data[..], b"a3");
}

#[tokio::test]
async fn a_call_on_a_closed_connection_fails_as_open_does() {
    let ((client, _ci), (server, _incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    server.shutdown(Duration::ZERO).await;
    client.closed().await;
    let e = client.call(md("svc/m"), Bytes::new()).await.unwrap_err();
    let o = client
        .open(md("svc/m"), Bytes::new(), true)
        .await
        .unwrap_err();
    assert_eq!(format!("{e}"), format!("{o}"));
    assert!(e.close_cause().is_some() || e.is_refused(), "{e}");
}

/// A call polled once takes the socket's watch from a task waiting in
/// `recv`, and is dropped: the watch goes back to the connection task, so
/// that task's next piece still reaches it. (Paused clock, all in memory:
/// the timeout fires only if nobody will ever read the socket again.)
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_dropped_while_waiting_hands_the_socket_back() {
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let mut st = client
        .open(md("svc/stream"), Bytes::from_static(b"open"), false)
        .await
        .unwrap();
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(c)) = st.recv().await {
            got_tx.send(c.data).unwrap();
        }
    });
    let mut peer = incoming.accept().await.unwrap();
    peer.recv().await.unwrap();
    peer.send(Bytes::from_static(b"a"), false).await.unwrap();
    assert_eq!(got_rx.recv().await.unwrap(), "a");
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // Another task polls a call once and drops it, then never reads again.
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        {
            let mut call = pin!(client.call(md("svc/m"), Bytes::from_static(b"x")));
            let polled = poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
            assert!(polled.is_pending());
        }
        dropped_tx.send(()).unwrap();
        std::future::pending::<()>().await;
    });
    dropped_rx.await.unwrap();
    peer.send(Bytes::from_static(b"b"), false).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), got_rx.recv()).await;
    assert_eq!(
        got.expect("the reader was never woken: the socket's watch was lost"),
        Some(Bytes::from_static(b"b"))
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_stops_the_idle_clock_which_restarts_at_its_end() {
    let idle = Duration::from_secs(10);
    let mut quiet = Config::default();
    quiet.idle_timeout(None);
    let mut idling = Config::default();
    idling.idle_timeout(Some(idle));
    let ((client, _ci), (_server, mut incoming)) = duplex_pair(64 * 1024, idling, quiet).await;
    // Most of an idle period passes before the call, and the answer takes
    // longer than one: the open stopped the clock.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let call = client.call(md("svc/slow"), Bytes::from_static(b"ask"));
    let serve = async {
        let mut peer = incoming.accept().await.unwrap();
        peer.recv().await.unwrap();
        tokio::time::sleep(Duration::from_secs(8)).await;
        peer.send(Bytes::from_static(b"late"), true).await.unwrap();
        peer
    };
    let (answer, _peer) = tokio::join!(call, serve);
    let mut answer = answer.expect("the open stopped the idle clock");
    assert_eq!(&answer.take_first().unwrap().unwrap().data[..], b"late");
    drop(answer);
    // The clock restarted at the call's end, not at its open.
    let ended = tokio::time::Instant::now();
    assert!(
        tokio::time::timeout(idle - Duration::from_secs(1), client.closed())
            .await
            .is_err(),
        "closed before a whole idle period after the call"
    );
    client.closed().await;
    assert!(ended.elapsed() >= idle, "{:?}", ended.elapsed());
}

/// The call's `OPEN` is written inline, in the call's own first poll, and
/// that write fails: the connection closes under the call, which must
/// then answer with the close at once (it waits for nothing: nobody
/// will ever read for it), not wait for a reply.
#[tokio::test(start_paused = true)]
async fn a_call_whose_open_cannot_be_written_fails_with_the_close() {
    let (client, _incoming, mut peer, reset) = support::io::client_with_failing_writes().await;
    // A first call answered, so the socket is quiet (nothing unread that
    // would make the next call read before it looks at its stream).
    let first = client.call(md("first"), Bytes::from_static(b"ping"));
    let answer = async {
        let open = peer.recv().await.frame().expect("the OPEN");
        let reply = weft_frame::Frame::new(
            weft_frame::FrameType::DATA,
            weft_frame::Flags::END_STREAM,
            open.stream_id,
            Bytes::from_static(b"pong"),
        );
        peer.send(&reply).await.unwrap();
    };
    let (first, ()) = tokio::join!(first, answer);
    assert_eq!(first.unwrap().first().unwrap().unwrap().data, &b"pong"[..]);
    reset.store(true, std::sync::atomic::Ordering::SeqCst);
    let call = client.call(md("lost"), Bytes::from_static(b"ping"));
    let answer = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call waits for a reply that cannot come");
    let failed = match answer {
        Ok(answer) => answer.first().map(|c| c.cloned()).map_err(|e| e.clone()),
        Err(e) => {
            assert!(e.is_closed(), "{e:?}");
            return;
        }
    };
    let e = failed.expect_err("an answer on a connection that closed");
    assert!(e.is_closed(), "{e:?}");
}

/// A task's wake-ups, counted.
#[derive(Default)]
struct Count(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Count {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn counted() -> (std::sync::Arc<Count>, std::task::Waker) {
    let c = std::sync::Arc::new(Count::default());
    (c.clone(), std::task::Waker::from(c))
}

fn woken(c: &Count) -> usize {
    c.0.load(std::sync::atomic::Ordering::SeqCst)
}

/// A call's reply read by another call's task (the later call waits as
/// the socket's reader) wakes the first call's task, and only that one:
/// the reply hands its slot's waker to the driver.
#[tokio::test]
async fn a_reply_read_by_another_calls_task_wakes_its_own() {
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    // Settings exchanged first, so both calls are unary slots.
    answered(&client, &mut incoming, ("svc/m", b"w"), (b"w", true)).await;
    let (a_count, a_waker) = counted();
    let (b_count, b_waker) = counted();
    let mut a = pin!(client.call(md("svc/a"), Bytes::from_static(b"a")));
    let mut b = pin!(client.call(md("svc/b"), Bytes::from_static(b"b")));
    let poll = |f: std::pin::Pin<&mut weft_mux::Call<'_>>, w: &std::task::Waker| {
        f.poll(&mut std::task::Context::from_waker(w)).is_pending()
    };
    assert!(poll(a.as_mut(), &a_waker), "nothing sent back yet");
    // Now `b` reads the socket for both; `a` keeps its waker in its slot.
    assert!(poll(b.as_mut(), &b_waker));
    let mut peer_a = incoming.accept().await.unwrap();
    let _peer_b = incoming.accept().await.unwrap();
    assert_eq!(peer_a.metadata().method(), Some("svc/a"));
    peer_a.recv().await.unwrap();
    peer_a
        .send(Bytes::from_static(b"for a"), true)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while woken(&b_count) == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the socket wakes its reader, b");
    assert_eq!(woken(&a_count), 0, "nobody has read the reply yet");
    assert!(poll(b.as_mut(), &b_waker), "b's own reply has not come");
    assert_eq!(woken(&a_count), 1, "b's read brought a's reply: a is woken");
    let mut cx = std::task::Context::from_waker(&a_waker);
    let Poll::Ready(answer) = a.as_mut().poll(&mut cx) else {
        panic!("a's reply is there");
    };
    let first = answer.unwrap().take_first().unwrap().unwrap();
    assert_eq!(&first.data[..], b"for a");
}

/// Metadata whose bytes count their owner's drops: it is let go once every
/// clone of it is.
fn tracked(method: &str, drops: &std::sync::Arc<Count>) -> Metadata {
    struct Owner(Vec<u8>, std::sync::Arc<Count>);
    impl AsRef<[u8]> for Owner {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }
    impl Drop for Owner {
        fn drop(&mut self) {
            self.1.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let raw = md(method).as_bytes().to_vec();
    Metadata::from_bytes(Bytes::from_owner(Owner(raw, drops.clone()))).unwrap()
}

/// Whether `drops` counts a drop within five seconds.
async fn let_go(drops: &Count) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        while woken(drops) == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .is_ok()
}

/// The call keeps its `OPEN` metadata beside its state and hands it to the
/// answer by hand (no copy moves with the state): whichever way a call
/// ends — never polled, queued or waiting when dropped, failed, answered
/// — the metadata is let go, once.
#[tokio::test]
async fn a_calls_metadata_is_let_go_however_the_call_ends() {
    let mut capped = Config::default();
    capped.max_concurrent_streams(1);
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), capped).await;
    // Settings exchanged: the cap is known once a call went through.
    answered(&client, &mut incoming, ("svc/m", b"w"), (b"w", true)).await;

    let never = std::sync::Arc::new(Count::default());
    drop(client.call(tracked("svc/m", &never), Bytes::new()));
    assert!(let_go(&never).await, "a call never polled");

    let (waiting, queued) = (
        std::sync::Arc::new(Count::default()),
        std::sync::Arc::new(Count::default()),
    );
    {
        let mut first = pin!(client.call(tracked("svc/m", &waiting), Bytes::new()));
        let mut second = pin!(client.call(tracked("svc/m", &queued), Bytes::new()));
        for call in [first.as_mut(), second.as_mut()] {
            let mut call = call;
            let polled = poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
            assert!(polled.is_pending());
        }
    }
    assert!(let_go(&queued).await, "a call dropped in the queue");
    // The peer takes the request (its frame holds a copy of the metadata
    // until written) and the reset.
    let mut peer = incoming.accept().await.unwrap();
    peer.recv().await.unwrap();
    assert!(let_go(&waiting).await, "a call dropped while waiting");
    drop(peer);

    let answered_once = std::sync::Arc::new(Count::default());
    let call = client.call(tracked("svc/m", &answered_once), Bytes::new());
    let serve = async {
        let mut peer = incoming.accept().await.unwrap();
        peer.recv().await.unwrap();
        peer.send(Bytes::from_static(b"a"), true).await.unwrap();
    };
    let (answer, ()) = tokio::join!(call, serve);
    let answer = answer.unwrap();
    assert_eq!(answer.metadata().method(), Some("svc/m"));
    assert_eq!(woken(&answered_once), 0, "the answer holds it");
    drop(answer);
    assert!(let_go(&answered_once).await, "an answered call");

    let failed = std::sync::Arc::new(Count::default());
    server.shutdown(Duration::ZERO).await;
    client.closed().await;
    let e = client.call(tracked("svc/m", &failed), Bytes::new()).await;
    assert!(e.is_err());
    assert!(let_go(&failed).await, "a failed call");
}
